"""Pure analysis for Copy-as-Decode: corpora, tokenization, programs, oracle, resolver, spans.

Nothing in this package imports torch at module level, so the analysis half of the pipeline
runs (and is tested) without a model stack.
"""

__version__ = "0.1.0"
