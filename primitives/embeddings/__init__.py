"""primitives.embeddings"""
