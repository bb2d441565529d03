"""Data: synthetic generators with known ground truth, images, the UCI binary classification sets, and the corpus
layer of bag-of-words models (``Corpus``, a CSR corpus memory-mapped from ``.npz``; the UCI and lda-c readers; a
tokenizer and vocabulary; ``Minibatcher``, ``epoch_batches``; prefetching). Random functions take an int seed or a
JAX PRNG key, never a default.
"""

from vijax._lazy import attach_stub

# the names of __init__.pyi, each loaded from its module at its first use (vijax._lazy)
__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
