"""primitives.db"""
