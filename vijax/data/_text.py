"""From raw text to a ``Corpus``: tokenising, vocabularies with cut-offs, stop words."""

from __future__ import annotations

import collections
import os
import re
import uuid
from typing import Iterable, Iterator, Mapping, Optional, Sequence

import numpy as np

from vijax.data._csr import Corpus
from vijax.data._readers import read_word_list
from vijax._validate import ArgumentError, check_int, check_scalar

# English function words (articles, pronouns, auxiliaries, prepositions, conjunctions, common adverbs)
STOP_WORDS_EN = frozenset(
    """
a an the this that these those
i me my mine myself we us our ours ourselves you your yours yourself yourselves
he him his himself she her hers herself it its itself they them their theirs themselves
who whom whose which what where when why how
am is are was were be been being
have has had having do does did doing done
will would shall should can could may might must
not no nor only also too very just so than then there here
and or but if because as while until although though
of at by for with about against between into through during before after above below
to from up down in out on off over under again further once
all any both each few more most other some such own same
s t don now ever yet
""".split()
)

_TOKEN = re.compile(r"[^\W\d_]+")  # runs of letters (any alphabet); digits and '_' split tokens


def tokenize(text: str) -> list[str]:
    """The lower-cased alphabetic tokens of ``text`` (letters of any alphabet; all else separates them).

    Examples:
      >>> tokenize("The Cat sat; the cat's mat (2 of them).")
      ['the', 'cat', 'sat', 'the', 'cat', 's', 'mat', 'of', 'them']
    """
    if not isinstance(text, str):
        raise ArgumentError("text", f"text must be a str, got {type(text).__name__}")
    return _TOKEN.findall(text.lower())


def _check_texts(texts) -> None:
    """Refuses one str as ``texts`` (it would be read as its characters, each a document)."""
    if isinstance(texts, (str, bytes)):
        raise ArgumentError(
            "texts", "texts must be an iterable of documents (str), got a single str: wrap it in a list"
        )


class _RepeatedWord(ValueError):
    """A vocabulary's words repeat ``word``, at positions ``first`` < ``second`` (0-based)."""

    def __init__(self, word: str, first: int, second: int):
        super().__init__(
            f"words: {word!r} is repeated, at positions {first} and {second}; a vocabulary must not repeat a word"
        )
        self.word, self.first, self.second = word, first, second


class Vocabulary:
    """An immutable, ordered list of distinct words (word ``i`` has id ``i``) and the map from word to id.

    Raises:
      ValueError: naming ``words``, the first repeated word and its two positions.

    Examples:
      >>> v = Vocabulary(["topic", "model"])
      >>> v["model"], len(v), "cat" in v
      (1, 2, False)
    """

    __slots__ = ("_words", "_index")

    def __init__(self, words: Iterable[str]):
        words = tuple(str(w) for w in words)
        index: dict = {}
        for i, w in enumerate(words):
            if index.setdefault(w, i) != i:
                raise _RepeatedWord(w, index[w], i)
        self._words = words
        self._index = index

    @property
    def words(self) -> tuple[str, ...]:
        """The words, in id order."""
        return self._words

    def __len__(self) -> int:
        return len(self._words)

    def __contains__(self, word) -> bool:
        return word in self._index

    def __getitem__(self, word: str) -> int:
        return self._index[word]

    def __iter__(self) -> Iterator[str]:
        return iter(self._words)

    def __eq__(self, other) -> bool:
        return isinstance(other, Vocabulary) and self._words == other._words

    def __hash__(self) -> int:
        return hash(self._words)

    def __repr__(self) -> str:
        head = ", ".join(self._words[:5])
        return f"Vocabulary({len(self)} words: {head}{', ...' if len(self) > 5 else ''})"

    def get(self, word: str, default=None):
        """The id of ``word``, or ``default`` when it is not in the vocabulary."""
        return self._index.get(word, default)

    def encode(self, tokens: Iterable[str]) -> np.ndarray:
        """The ids of the tokens that are in the vocabulary (the others are dropped)."""
        index = self._index
        return np.fromiter((index[t] for t in tokens if t in index), dtype=np.int32)

    def save(self, path: str | os.PathLike) -> None:
        """Writes the words one per line (as ``load_vocabulary`` reads them); a failed write leaves no partial list."""
        name = os.fspath(path)
        tmp = os.path.join(
            os.path.dirname(os.path.abspath(name)), f".{os.path.basename(name)}.{uuid.uuid4().hex[:12]}.tmp"
        )
        try:
            with open(tmp, "x", encoding="utf-8") as fh:
                fh.writelines(w + "\n" for w in self._words)
            os.replace(tmp, name)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise


def load_vocabulary(path: str | os.PathLike, lowercase: bool = True) -> Vocabulary:
    """Reads a vocabulary with one word per line (such as Hoffman's ``dictnostops.txt``), optionally gzipped.

    Args:
      lowercase: lower-case the words, as ``corpus_from_texts`` lower-cases text.

    Raises:
      FileNotFoundError: naming a missing file.
      ValueError: naming the file (and line): a blank line inside the list, a repeated word, not a regular file,
        not UTF-8, broken gzip.
    """
    words = read_word_list(path)
    try:
        return Vocabulary([w.lower() for w in words] if lowercase else words)
    except _RepeatedWord as e:
        a, b = words[e.first], words[e.second]
        how = "" if a == b else f" (as {a!r} and {b!r}, lower-cased)"
        raise ValueError(
            f"{os.fspath(path)}, lines {e.first + 1} and {e.second + 1}: the word {e.word!r} is repeated{how}; "
            "a vocabulary must not repeat a word"
        ) from None


def build_vocabulary(
    texts: Iterable[str],
    *,
    min_count: int = 1,
    max_doc_fraction: float = 1.0,
    max_size: Optional[int] = None,
    stop_words: Optional[Iterable[str]] = STOP_WORDS_EN,
    min_length: int = 1,
) -> Vocabulary:
    """The vocabulary of a collection of texts after the usual cut-offs, ids by decreasing count then alphabetically.

    Args:
      texts: the documents (any iterable, read once).
      min_count: smallest total number of occurrences.
      max_doc_fraction: largest fraction of documents a word may appear in, in (0, 1].
      max_size: keep the ``max_size`` most frequent words, or all (None).
      stop_words: words to leave out (default ``STOP_WORDS_EN``; None or ``()`` keeps all).
      min_length: shortest word kept.
    """
    _check_texts(texts)
    check_int("min_count", min_count)
    check_int("min_length", min_length)
    check_scalar("max_doc_fraction", max_doc_fraction, low=0.0, high=1.0)
    if max_size is not None:
        check_int("max_size", max_size, 0)
    stop = frozenset(stop_words or ())
    total: collections.Counter = collections.Counter()
    doc_freq: collections.Counter = collections.Counter()
    num_docs = 0
    for text in texts:
        num_docs += 1
        tokens = collections.Counter(tokenize(text))
        total.update(tokens)
        doc_freq.update(tokens.keys())
    max_docs = max_doc_fraction * num_docs
    kept = [w for w, n in total.items() if n >= min_count and doc_freq[w] <= max_docs and w not in stop]
    kept = sorted((w for w in kept if len(w) >= min_length), key=lambda w: (-total[w], w))
    return Vocabulary(kept if max_size is None else kept[:max_size])


def corpus_from_texts(texts: Iterable[str], vocabulary: Vocabulary | Sequence[str] | Mapping) -> Corpus:
    """The bag-of-words ``Corpus`` of texts over a fixed vocabulary.

    Tokens outside the vocabulary (a ``Vocabulary`` or distinct words) are dropped; ``texts`` are read once.
    """
    _check_texts(texts)
    if not isinstance(vocabulary, Vocabulary):
        vocabulary = Vocabulary(vocabulary)
    if len(vocabulary) == 0:
        raise ArgumentError("vocabulary", "vocabulary is empty: no word of any text could be counted")
    lengths, ids, counts = [], [], []
    for text in texts:
        uniq, cnt = np.unique(vocabulary.encode(tokenize(text)), return_counts=True)
        lengths.append(uniq.size)
        ids.append(uniq.astype(np.int32))
        counts.append(cnt)  # int64: Corpus refuses a count float32 cannot hold before it casts
    ptr = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).astype(np.int64)
    ids = np.concatenate(ids) if ids else np.zeros(0, np.int32)
    counts = np.concatenate(counts) if counts else np.zeros(0, np.int64)
    return Corpus(ptr, ids, counts, len(vocabulary), vocabulary.words)
