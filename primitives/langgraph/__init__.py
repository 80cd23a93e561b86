"""primitives.langgraph"""
