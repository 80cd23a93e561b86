"""primitives.retrieval"""
