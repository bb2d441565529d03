"""The minibatch type of bag-of-words models (LDA and its relatives)."""

from __future__ import annotations

from typing import NamedTuple

from vijax.types import Array


class BowBatch(NamedTuple):
    """A padded minibatch of S documents, each as its unique word ids and their counts.

    Attributes:
      word_ids: (S, L) int32 word ids; padding slots hold 0.
      counts: (S, L) float counts; padding slots hold 0, so they contribute nothing. A document
        whose counts are all zero is empty (allowed; metrics skip it).

    L is the padded length of this minibatch (the largest number of unique words of its documents,
    rounded up to a bucket so that few shapes are compiled), never of the whole corpus.
    """

    word_ids: Array
    counts: Array
