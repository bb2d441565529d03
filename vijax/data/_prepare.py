"""``prepare_corpus`` (what ``vijax prepare`` runs): any supported input format to the memory-mapped ``.npz``
corpus format, lda-c and text streamed a chunk of lines at a time (UCI, whose entries come in any order, whole)."""

from __future__ import annotations

import itertools
import os
import pathlib
from typing import Optional


from vijax.data._csr import Corpus, CorpusWriter
from vijax.data._paths import check_regular_file
from vijax.data._readers import ldac_chunks, ldac_vocabulary, read_line_chunks, read_uci_bow
from vijax.data._text import build_vocabulary, corpus_from_texts, load_vocabulary
from vijax._validate import ArgumentError

FORMATS = ("uci", "ldac", "text")
_TEXT_DOCS_PER_CHUNK = 10_000
_WRITE_DOCS_PER_CHUNK = 100_000


def _text_lines(path):
    for _, lines in read_line_chunks(path, _TEXT_DOCS_PER_CHUNK):
        for line in lines:
            yield line.rstrip("\n")


def _check_out_path(out_path, sources) -> None:
    """Refuses an output that would replace one of ``sources``, is a directory, or has no folder."""
    out = os.fspath(out_path)
    if os.path.isdir(out):
        raise ArgumentError("out_path", f"out_path: {out} is a directory; give the .npz file to write")
    folder = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(folder):
        raise ArgumentError("out_path", f"out_path: the folder {folder} of {out} does not exist")
    for what, src in sources.items():
        if src is None:
            continue
        same = pathlib.Path(out).resolve() == pathlib.Path(src).resolve()
        if not same and os.path.exists(out):
            same = os.path.samefile(out, src)
        if same:
            raise ArgumentError(
                "out_path", f"out_path: {out} is the {what} file {os.fspath(src)}; writing it would destroy it"
            )


def prepare_corpus(
    input_path: str | os.PathLike,
    fmt: str,
    out_path: str | os.PathLike,
    *,
    vocab_path: Optional[str | os.PathLike] = None,
    vocab_size: Optional[int] = None,
) -> Corpus:
    """Converts ``input_path`` to the ``.npz`` corpus ``out_path`` and returns it memory-mapped.

    Args:
      input_path: the corpus file (optionally gzipped).
      fmt: ``"uci"`` (``docword.*.txt``), ``"ldac"`` (``M id:count ...`` per line) or ``"text"``
        (one document per line, tokenised with ``tokenize``).
      out_path: the ``.npz`` file to write, replaced only by a complete one (never the input or vocabulary).
      vocab_path: one word per line (for text, the words kept; default: ``build_vocabulary`` of the file).
      vocab_size: lda-c only: V when there is no vocabulary file (default: the largest id + 1).

    Raises:
      ValueError: an unknown ``fmt``; ``out_path`` the input or vocabulary file, a directory, or in a missing
        folder; a malformed input (naming the file and line); an input or vocabulary that is not a regular file.
      FileNotFoundError: naming a missing input or vocabulary file.

    Examples:
      >>> import tempfile, os
      >>> d = tempfile.mkdtemp()
      >>> _ = open(os.path.join(d, "c.ldac"), "w").write("2 0:3 4:1\\n0\\n1 2:2\\n")
      >>> prepare_corpus(os.path.join(d, "c.ldac"), "ldac", os.path.join(d, "c.npz")).num_tokens
      6
    """
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
    for what, p in (("input", input_path), ("vocabulary", vocab_path)):
        if p is not None:
            try:
                check_regular_file(p)
            except FileNotFoundError:
                raise FileNotFoundError(f"{what} file {os.fspath(p)!r} does not exist") from None
    _check_out_path(out_path, {"input": input_path, "vocabulary": vocab_path})
    if os.path.getsize(input_path) == 0:
        raise ValueError(f"input file {os.fspath(input_path)!r} is empty: no documents to prepare")
    if vocab_size is not None and fmt != "ldac":
        raise ArgumentError("vocab_size", "vocab_size applies to the ldac format only")
    if fmt == "uci":
        corpus = read_uci_bow(input_path, vocab_path)
        with CorpusWriter(out_path, corpus.vocab_size, corpus.vocab) as w:
            for start in range(0, corpus.num_docs, _WRITE_DOCS_PER_CHUNK):
                w.append(corpus.subset(range(start, min(start + _WRITE_DOCS_PER_CHUNK, corpus.num_docs))))
    elif fmt == "ldac":
        vocab, vocab_size = ldac_vocabulary(vocab_path, vocab_size)
        if vocab_size is None:  # a first pass for the largest word id
            vocab_size = 1 + max(
                (int(ids.max()) for _, ids, _ in ldac_chunks(input_path, None) if ids.size), default=-1
            )
        with CorpusWriter(out_path, vocab_size, vocab) as w:
            for sizes, ids, counts in ldac_chunks(input_path, vocab_size):
                w.append_arrays(sizes, ids, counts)
    else:
        vocabulary = (
            load_vocabulary(vocab_path) if vocab_path is not None else build_vocabulary(_text_lines(input_path))
        )
        with CorpusWriter(out_path, len(vocabulary), vocabulary.words) as w:
            lines = _text_lines(input_path)
            while True:
                chunk = list(itertools.islice(lines, _TEXT_DOCS_PER_CHUNK))
                if not chunk:
                    break
                w.append(corpus_from_texts(chunk, vocabulary))
    return Corpus.load_npz(out_path, mmap=True)
