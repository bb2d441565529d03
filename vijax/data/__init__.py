"""Data: synthetic generators with known ground truth, images (the 8 x 8 digits), the UCI binary
classification sets, and the corpus layer of bag-of-words models: ``Corpus`` (an immutable CSR
corpus on the host, memory-mapped from ``.npz``), readers of the UCI and lda-c formats, a text
tokenizer and vocabulary, synthetic LDA and CTM corpora, the one minibatcher (``Minibatcher``,
``epoch_batches``) and background prefetching. Random functions take an int seed or a JAX PRNG
key, never a default.
"""

from vijax._lazy import attach_stub

# the names of __init__.pyi, each loaded from its module at its first use (vijax._lazy)
__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
