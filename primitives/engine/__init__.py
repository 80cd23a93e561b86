"""primitives.engine"""
