"""primitives.compile"""
