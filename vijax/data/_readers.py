"""Readers of the standard bag-of-words text formats (UCI and lda-c), streaming line by line."""
from __future__ import annotations

import gzip
import io
import itertools
import warnings
import os
from typing import Iterator, Optional

import numpy as np

from vijax.data._csr import Corpus

_LINES_PER_CHUNK = 1 << 16


def open_text(path: str | os.PathLike) -> io.TextIOBase:
    """Opens a text file for reading, decompressing it on the fly when it is gzipped.

    Gzip is recognised by its magic bytes, whatever the file name.
    """
    with open(path, "rb") as fh:
        gzipped = fh.read(2) == b"\x1f\x8b"
    if gzipped:
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
    return open(path, "r", encoding="utf-8")


def read_word_list(path: str | os.PathLike) -> list[str]:
    """The words of a one-word-per-line file, in order (surrounding white space stripped).

    Blank lines are skipped only at the end of the file; a blank line between words would shift
    every later id, so it is an error.
    """
    with open_text(path) as fh:
        words = [line.strip() for line in fh]
    while words and not words[-1]:
        words.pop()
    if "" in words:
        raise ValueError(f"{os.fspath(path)!r}: blank line {words.index('') + 1} inside the word list")
    return words


def _parse_ints(text: str, what: str) -> np.ndarray:
    """All white-space separated integers of ``text`` (C-speed parsing), or ValueError."""
    with warnings.catch_warnings():
        # NumPy warns (and stops) at the first token that is not an integer.
        warnings.simplefilter("error", DeprecationWarning)
        try:
            vals = np.fromstring(text, dtype=np.int64, sep=" ")
        except (DeprecationWarning, ValueError):
            vals = None
    if vals is None:
        bad = next((t for t in text.split() if not t.lstrip("+-").isdigit()), "?")
        raise ValueError(f"{what}: expected integers, found {bad!r}")
    return vals


def _chunked_lines(fh) -> Iterator[list[str]]:
    while True:
        lines = list(itertools.islice(fh, _LINES_PER_CHUNK))
        if not lines:
            return
        yield lines


def read_uci_bow(docword_path: str | os.PathLike, vocab_path: Optional[str | os.PathLike] = None) -> Corpus:
    """Reads a corpus in the UCI bag-of-words format (``docword.*.txt``, optionally gzipped).

    The file has three header lines, D (documents), W (vocabulary size) and NNZ (entries), then
    NNZ lines ``docID wordID count`` with 1-based ids. The file is read in chunks of lines, so the
    text is never in memory at once; entries need not be sorted by document. A document without a
    line is an empty document.

    Args:
      docword_path: the ``docword`` file.
      vocab_path: the matching ``vocab.*.txt`` (W words, one per line), or None.

    Returns:
      The ``Corpus`` (ids 0-based).

    Raises:
      ValueError: a malformed header or line, an id out of range, or NNZ not matching the lines.
    """
    name = os.fspath(docword_path)
    with open_text(docword_path) as fh:
        header = []
        for line in fh:
            if line.strip():
                header.append(line)
            if len(header) == 3:
                break
        if len(header) < 3:
            raise ValueError(f"{name}: expected the three header lines D, W, NNZ")
        try:
            num_docs, num_words, nnz = (int(h) for h in header)
        except ValueError:
            raise ValueError(f"{name}: the header lines D, W, NNZ must be integers, got "
                             f"{[h.strip() for h in header]}") from None
        docs, words, counts = [], [], []
        seen = 0
        for lines in _chunked_lines(fh):
            vals = _parse_ints("".join(lines), f"{name}: lines after {3 + seen}")
            if vals.size % 3:
                raise ValueError(f"{name}: every line after the header must be 'docID wordID count'")
            vals = vals.reshape(-1, 3)
            seen += vals.shape[0]
            d, w, c = vals[:, 0], vals[:, 1], vals[:, 2]
            if d.size and (d.min() < 1 or d.max() > num_docs):
                raise ValueError(f"{name}: docID out of range [1, {num_docs}]")
            if w.size and (w.min() < 1 or w.max() > num_words):
                raise ValueError(f"{name}: wordID out of range [1, {num_words}]")
            docs.append((d - 1).astype(np.int32))
            words.append((w - 1).astype(np.int32))
            counts.append(c.astype(np.float32))
    if seen != nnz:
        raise ValueError(f"{name}: the header gives NNZ = {nnz} but the file has {seen} entries")
    docs = np.concatenate(docs) if docs else np.zeros(0, np.int32)
    words = np.concatenate(words) if words else np.zeros(0, np.int32)
    counts = np.concatenate(counts) if counts else np.zeros(0, np.float32)
    if np.any(np.diff(docs) < 0):
        order = np.argsort(docs, kind="stable")
        docs, words, counts = docs[order], words[order], counts[order]
    ptr = np.concatenate([[0], np.cumsum(np.bincount(docs, minlength=num_docs))]).astype(np.int64)
    vocab = None
    if vocab_path is not None:
        vocab = read_word_list(vocab_path)
        if len(vocab) != num_words:
            raise ValueError(f"{os.fspath(vocab_path)}: {len(vocab)} words but the header gives W = {num_words}")
    return Corpus(ptr, words, counts, num_words, vocab)


def read_ldac(path: str | os.PathLike, vocab_path: Optional[str | os.PathLike] = None, *,
              vocab_size: Optional[int] = None) -> Corpus:
    """Reads a corpus in lda-c format (Blei's LDA-C; optionally gzipped).

    One document per line: ``M id:count id:count ...`` with M the number of pairs and ids
    0-based. ``0`` alone is an empty document; blank lines are skipped. The file is parsed in
    chunks of lines, never held as text all at once.

    Args:
      path: the ``.ldac`` (or ``.ldac.gz``) file.
      vocab_path: one word per line; its length is the vocabulary size.
      vocab_size: V when there is no vocabulary file (default: the largest id plus one).

    Returns:
      The ``Corpus``.

    Raises:
      ValueError: a malformed line (the message gives its number), or ids beyond the vocabulary.

    Examples:
      >>> import tempfile, os
      >>> path = os.path.join(tempfile.mkdtemp(), "tiny.ldac")
      >>> _ = open(path, "w").write("2 0:3 4:1\\n0\\n1 2:2\\n")
      >>> c = read_ldac(path)
      >>> c.num_docs, c.vocab_size, c.num_tokens, c.num_empty
      (3, 5, 6, 1)
    """
    name = os.fspath(path)
    lengths, words, counts = [], [], []
    lineno = 0
    with open_text(path) as fh:
        for lines in _chunked_lines(fh):
            sizes = np.empty(len(lines), np.int64)
            kept = 0
            chunk_first = lineno + 1
            for line in lines:
                lineno += 1
                if not line.strip():
                    continue
                head, rest = (line.split(None, 1) + [""])[:2]
                try:
                    m = int(head)
                except ValueError:
                    raise ValueError(f"{name}, line {lineno}: expected the number of pairs M first, "
                                     f"got {head.strip()!r}") from None
                if rest.count(":") != m:
                    raise ValueError(f"{name}, line {lineno}: M = {m} but the line has "
                                     f"{rest.count(':')} id:count pairs")
                sizes[kept] = m
                kept += 1
            sizes = sizes[:kept]
            vals = _parse_ints("".join(lines).replace(":", " "), f"{name}, lines {chunk_first}-{lineno}")
            heads = np.cumsum(1 + 2 * sizes) - (1 + 2 * sizes)
            if vals.size != int(np.sum(1 + 2 * sizes)) or np.any(vals[heads] != sizes):
                raise ValueError(f"{name}, lines {chunk_first}-{lineno}: malformed id:count pairs")
            is_pair = np.ones(vals.size, bool)
            is_pair[heads] = False
            pairs = vals[is_pair].reshape(-1, 2)
            lengths.append(sizes)
            words.append(pairs[:, 0])
            counts.append(pairs[:, 1].astype(np.float32))
    lengths = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
    ids = np.concatenate(words) if words else np.zeros(0, np.int64)
    counts = np.concatenate(counts) if counts else np.zeros(0, np.float32)
    vocab = None
    if vocab_path is not None:
        vocab = read_word_list(vocab_path)
        if vocab_size is not None and vocab_size != len(vocab):
            raise ValueError(f"vocab_size = {vocab_size} but {os.fspath(vocab_path)} has {len(vocab)} words")
        vocab_size = len(vocab)
    if ids.size and ids.min() < 0:
        raise ValueError(f"{name}: negative word id {int(ids.min())}")
    if vocab_size is not None and ids.size and ids.max() >= vocab_size:
        raise ValueError(f"{name}: word id {int(ids.max())} >= vocabulary size {vocab_size}")
    ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return Corpus(ptr, ids.astype(np.int32), counts, vocab_size, vocab)
