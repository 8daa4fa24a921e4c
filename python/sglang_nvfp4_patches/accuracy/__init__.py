"""MMLU-format accuracy A/B check against a running SGLang server (pure HTTP client).

``run`` records a server's answers, ``compare`` pairs two runs by question id with McNemar's
test, ``ab`` does both for two server configurations. Importing this package imports neither
SGLang nor torch nor aiohttp (the HTTP client is loaded only by ``accuracy run``).
"""
