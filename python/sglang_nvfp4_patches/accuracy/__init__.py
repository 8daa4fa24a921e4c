"""MMLU-format accuracy A/B check (``run``, ``compare``, ``ab``) against an SGLang server.

Importing it imports neither SGLang nor torch nor aiohttp (loaded only by ``accuracy run``).
"""
