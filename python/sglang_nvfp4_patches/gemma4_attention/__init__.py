"""Patch ``gemma4-attention``."""
