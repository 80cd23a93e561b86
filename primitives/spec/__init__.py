"""primitives.spec"""
