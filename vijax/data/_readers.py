"""Readers of the standard bag-of-words text formats (UCI and lda-c), streaming line by line; each refuses,
naming the file (and line), a path that is not a regular file, text that is not UTF-8 and broken gzip data."""

from __future__ import annotations

import contextlib
import gzip
import io
import itertools
import warnings
import os
import zlib
from typing import Iterator, Optional

import numpy as np

from vijax.data._csr import Corpus
from vijax.data._paths import check_regular_file
from vijax._validate import ArgumentError

_LINES_PER_CHUNK = 1 << 16
_SENTINEL = -(1 << 62)  # stands for a line end (UCI) among the parsed integers
_COLON = -1  # stands for a colon (lda-c): a -1 of the data lands where no colon belongs, an error
_INT64_MAX = np.iinfo(np.int64).max  # NumPy's parser saturates larger integers to this value
_ID_LIMIT = np.iinfo(np.int32).max  # ids and sizes are stored as int32
_COUNT_LIMIT = 1 << 24  # counts are stored as float32, exact for whole numbers up to 2**24
_READ_ERRORS = (UnicodeDecodeError, EOFError, OSError, zlib.error)  # OSError covers gzip.BadGzipFile


def _is_gzip(name: str) -> bool:
    with open(name, "rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


def open_text(path: str | os.PathLike) -> io.TextIOBase:
    """Opens a UTF-8 text file for reading, decompressing it when it is gzipped (by its magic bytes).

    Raises:
      FileNotFoundError: naming ``path`` when it does not exist.
      ValueError: naming ``path`` when it is not a regular file (a directory, a device).
    """
    name = check_regular_file(path)
    if _is_gzip(name):
        return io.TextIOWrapper(gzip.open(name, "rb"), encoding="utf-8")
    return open(name, "r", encoding="utf-8")


def unreadable(name: str, lines_read: int, exc: BaseException) -> ValueError:
    """The error for a file whose reading failed after ``lines_read`` lines, naming the first line that is not
    UTF-8 or where the gzip data breaks."""
    gzipped = _is_gzip(name)
    n = 0
    try:
        with gzip.open(name, "rb") if gzipped else open(name, "rb") as fh:
            for raw in fh:
                n += 1
                try:
                    raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    return ValueError(
                        f"{name}, line {n}: not UTF-8 text (byte {raw[e.start]:#04x} at column {e.start + 1})"
                    )
    except _READ_ERRORS as e:
        what = "the gzip data is truncated or corrupt" if gzipped else "reading failed"
        return ValueError(f"{name}: {what} {f'after line {n}' if n else 'before the first line'} ({e})")
    return ValueError(f"{name}: reading failed after line {lines_read} ({exc})")


def read_line_chunks(path: str | os.PathLike, lines_per_chunk: Optional[int] = None) -> Iterator[tuple[int, list]]:
    """``(first line's 1-based number, lines)`` of a text file (optionally gzipped), ``lines_per_chunk`` at a time.

    Raises:
      FileNotFoundError: naming ``path`` when it does not exist.
      ValueError: naming ``path`` (and the line): not a regular file, not UTF-8, broken gzip data.
    """
    name = check_regular_file(path)
    size = _LINES_PER_CHUNK if lines_per_chunk is None else lines_per_chunk
    done = 0
    with open_text(name) as fh:
        while True:
            try:
                lines = list(itertools.islice(fh, size))
            except _READ_ERRORS as e:
                raise unreadable(name, done, e) from e
            if not lines:
                return
            yield done + 1, lines
            done += len(lines)


def read_word_list(path: str | os.PathLike) -> list[str]:
    """The words of a one-word-per-line file, word ``i`` on line ``i + 1`` (stripped); blank lines are
    allowed only at the end (one between words would shift every later id)."""
    words = [line.strip() for _, lines in read_line_chunks(path) for line in lines]
    while words and not words[-1]:
        words.pop()
    if "" in words:
        raise ValueError(f"{os.fspath(path)!r}: blank line {words.index('') + 1} inside the word list")
    if not words:
        raise ValueError(f"{os.fspath(path)!r} holds no words: an empty word list")
    return words


def _vocabulary_words(vocab_path) -> tuple:
    """The words of a vocabulary file, distinct (``load_vocabulary`` without lower-casing)."""
    from vijax.data._text import load_vocabulary  # _text reads word lists with this module

    return load_vocabulary(vocab_path, lowercase=False).words


def ldac_vocabulary(vocab_path, vocab_size) -> tuple[Optional[tuple], Optional[int]]:
    """``(words, V)`` of a vocabulary file, checked against ``vocab_size``; ``(None, vocab_size)`` without."""
    if vocab_path is None:
        return None, vocab_size
    vocab = _vocabulary_words(vocab_path)
    if vocab_size is not None and vocab_size != len(vocab):
        raise ArgumentError(
            "vocab_size", f"vocab_size = {vocab_size} but {os.fspath(vocab_path)} has {len(vocab)} words"
        )
    return vocab, len(vocab)


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
        raise ArgumentError(what, f"{what}: expected integers, found {bad!r}")
    return vals


def read_uci_bow(docword_path: str | os.PathLike, vocab_path: Optional[str | os.PathLike] = None) -> Corpus:
    """Reads a corpus in the UCI bag-of-words format (``docword.*.txt``, optionally gzipped).

    Three header lines D (documents), W (vocabulary size) and NNZ (entries), then NNZ lines ``docID wordID
    count`` with 1-based ids, in any order. ``vocab_path``: the matching ``vocab.*.txt`` (W words), or None.

    Raises:
      FileNotFoundError: naming a missing file.
      ValueError: naming the file and line: a malformed header, a line without three integers, an id out of
        range, a count < 0 or > 2**24, NNZ not matching the lines, a vocabulary that repeats a word or whose
        length is not W; not a regular file, not UTF-8, broken gzip data.
    """
    name = os.fspath(docword_path)
    vocab = None if vocab_path is None else _vocabulary_words(vocab_path)  # a bad one fails first
    chunks = read_line_chunks(docword_path)
    header, rest = [], None
    for first, lines in chunks:
        for i, line in enumerate(lines):
            if line.strip():
                header.append(line)
            if len(header) == 3:
                rest = (first + i + 1, lines[i + 1 :])
                break
        if rest is not None:
            break
    if len(header) < 3:
        raise ValueError(f"{name}: expected the three header lines D, W, NNZ")
    try:
        num_docs, num_words, nnz = (int(h) for h in header)
    except ValueError:
        raise ValueError(
            f"{name}: the header lines D, W, NNZ must be integers, got {[h.strip() for h in header]}"
        ) from None
    for label, value in (("D", num_docs), ("W", num_words)):
        if not 0 <= value < _ID_LIMIT:
            raise ValueError(f"{name}: header {label} = {value} is out of range [0, {_ID_LIMIT})")
    if nnz < 0:
        raise ValueError(f"{name}: header NNZ = {nnz} is negative")
    if vocab is not None and len(vocab) != num_words:
        raise ValueError(f"{os.fspath(vocab_path)}: {len(vocab)} words but the header gives W = {num_words}")
    docs, words, counts = [np.zeros(0, np.int32)], [np.zeros(0, np.int32)], [np.zeros(0, np.float32)]
    seen = 0
    for first, lines in itertools.chain([rest] if rest[1] else [], chunks):
        last = first + len(lines) - 1
        if not lines[-1].endswith("\n"):
            lines[-1] += "\n"
        text = "".join(lines).replace("\n", f" {_SENTINEL}\n")
        vals = _parse_ints(text, f"{name}: lines {first}-{last}")
        ends = np.flatnonzero(vals == _SENTINEL)  # one per line
        widths = np.diff(ends, prepend=-1) - 1
        bad = (widths != 3) & (widths != 0)
        if bad.any() or ends.size != len(lines):
            i = int(np.argmax(bad)) if bad.any() else 0
            raise ValueError(f"{name}, line {first + i}: expected 'docID wordID count', found {int(widths[i])} numbers")
        rows = np.flatnonzero(widths == 3)  # the data lines of the chunk (blank ones skipped)
        vals = np.delete(vals, ends).reshape(-1, 3)
        seen += vals.shape[0]
        d, w, c = vals[:, 0], vals[:, 1], vals[:, 2]
        for what, v, lo, hi in (("docID", d, 1, num_docs), ("wordID", w, 1, num_words), ("count", c, 0, _COUNT_LIMIT)):
            out = (v < lo) | (v > hi)
            if out.any():
                i = int(np.argmax(out))
                raise ValueError(
                    f"{name}, line {first + int(rows[i])}: {what} {int(v[i])}{_big(v[i])} out of range [{lo}, {hi}]"
                    + _float32_note(what, v[i])
                )
        docs.append((d - 1).astype(np.int32))
        words.append((w - 1).astype(np.int32))
        counts.append(c.astype(np.float32))
    if seen != nnz:
        raise ValueError(f"{name}: the header gives NNZ = {nnz} but the file has {seen} entries")
    docs, words, counts = np.concatenate(docs), np.concatenate(words), np.concatenate(counts)
    if np.any(np.diff(docs) < 0):
        order = np.argsort(docs, kind="stable")
        docs, words, counts = docs[order], words[order], counts[order]
    ptr = np.concatenate([[0], np.cumsum(np.bincount(docs, minlength=num_docs))]).astype(np.int64)
    return Corpus(ptr, words, counts, num_words, vocab)


def _big(value) -> str:
    return " (too large for an integer)" if value == _INT64_MAX else ""


def _float32_note(what: str, value) -> str:
    """Why a count above 2**24 is refused (rounding it would change the data silently)."""
    if what == "count" and _COUNT_LIMIT < value < _INT64_MAX:
        return ": counts are stored as float32, which holds whole numbers exactly only up to 2**24"
    return ""


@contextlib.contextmanager
def _about(argument: str) -> Iterator[None]:
    """Re-raises a ValueError (not an ArgumentError) as an ArgumentError naming ``argument``, its message kept."""
    try:
        yield
    except ArgumentError:
        raise
    except ValueError as e:
        raise ArgumentError(argument, str(e)) from e


def ldac_chunks(path, vocab_size: Optional[int]) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``(entries per document, word ids, counts)`` of an lda-c file, a chunk of lines at a time, checked."""
    name = os.fspath(path)
    id_limit = _ID_LIMIT if vocab_size is None else vocab_size
    for chunk_first, lines in read_line_chunks(path):
        lineno = chunk_first - 1
        sizes = np.empty(len(lines), np.int64)
        where = np.empty(len(lines), np.int64)  # the line number of each kept line
        kept = 0
        for line in lines:
            lineno += 1
            if not line.strip():
                continue
            head, rest = (line.split(None, 1) + [""])[:2]
            try:
                m = int(head)
            except ValueError:
                raise ValueError(
                    f"{name}, line {lineno}: expected the number of pairs M first, got {head.strip()!r}"
                ) from None
            if rest.count(":") != m:
                raise ValueError(f"{name}, line {lineno}: M = {m} but the line has {rest.count(':')} id:count pairs")
            sizes[kept], where[kept] = m, lineno
            kept += 1
        sizes, where = sizes[:kept], where[:kept]
        # each line must read [M, (id, colon, count) * M]: a colon stands for _COLON
        vals = _parse_ints("".join(lines).replace(":", " -1 "), f"{name}, lines {chunk_first}-{lineno}")
        widths = 1 + 3 * sizes
        heads = np.cumsum(widths) - widths
        if vals.size != int(np.sum(widths)):
            raise ValueError(f"{name}, lines {chunk_first}-{lineno}: malformed id:count pairs")
        local = np.arange(vals.size) - np.repeat(heads, widths)
        colon = local % 3 == 2
        wrong = (vals == _COLON) != colon
        wrong[heads] |= vals[heads] != sizes
        if wrong.any():
            line = int(where[np.searchsorted(heads, int(np.argmax(wrong)), side="right") - 1])
            raise ValueError(f"{name}, line {line}: malformed id:count pairs (expected 'M id:count ...')")
        is_pair = local > 0
        pairs = vals[is_pair & ~colon].reshape(-1, 2)
        line_of = np.repeat(where, sizes)
        for what, v, hi in (("word id", pairs[:, 0], id_limit - 1), ("count", pairs[:, 1], _COUNT_LIMIT)):
            out = (v < 0) | (v > hi)
            if out.any():
                i = int(np.argmax(out))
                limit = (
                    f" >= vocabulary size {vocab_size}"
                    if what == "word id" and vocab_size is not None and v[i] >= vocab_size
                    else f" out of range [0, {hi}]"
                )
                raise ValueError(
                    f"{name}, line {int(line_of[i])}: {what} {int(v[i])}{_big(v[i])}{limit}" + _float32_note(what, v[i])
                )
        yield sizes, pairs[:, 0].astype(np.int32), pairs[:, 1].astype(np.float32)


def read_ldac(
    path: str | os.PathLike, vocab_path: Optional[str | os.PathLike] = None, *, vocab_size: Optional[int] = None
) -> Corpus:
    """Reads a corpus in lda-c format (Blei's LDA-C; optionally gzipped).

    One document per line: ``M id:count id:count ...`` with M the number of pairs and ids 0-based; ``0`` alone is
    an empty document, blank lines are skipped.

    Args:
      vocab_path: one word per line; its length is the vocabulary size.
      vocab_size: V when there is no vocabulary file (default: the largest id plus one).

    Raises:
      FileNotFoundError: naming a missing file.
      ValueError: an ``ArgumentError`` naming ``path`` or ``vocab_path``, its message the file and line: a
        malformed line, an id or count out of range, a vocabulary that repeats a word; not a regular file, not
        UTF-8, broken gzip data; a file without documents (refused first).

    Examples:
      >>> import tempfile, os
      >>> path = os.path.join(tempfile.mkdtemp(), "tiny.ldac")
      >>> _ = open(path, "w").write("2 0:3 4:1\\n0\\n1 2:2\\n")
      >>> c = read_ldac(path)
      >>> c.num_docs, c.vocab_size, c.num_tokens, c.num_empty
      (3, 5, 6, 1)
    """
    with _about("path"):  # a file without documents first: whatever its vocabulary, nothing to read
        if not any(line.strip() for _, lines in read_line_chunks(path, 1) for line in lines):
            raise ValueError(f"{os.fspath(path)!r} holds no documents (an empty lda-c file)")
    with _about("vocab_path"):
        vocab, vocab_size = ldac_vocabulary(vocab_path, vocab_size)
    with _about("path"):
        lengths, ids, counts = (np.concatenate(parts) for parts in zip(*ldac_chunks(path, vocab_size)))
    ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return Corpus(ptr, ids, counts, vocab_size, vocab)
