"""Hostile files given to the corpus readers and to ``prepare_corpus``: a vocabulary that repeats a
word, counts float32 cannot hold, an output that would overwrite its input, a write that fails
half-way, text that is not UTF-8, gzip data cut short or damaged, and paths that are not files.
Each is refused with a ValueError naming the file (and the line where there is one)."""

import gzip
import os
import re
import stat

import numpy as np
import pytest

from vijax.data import (
    Corpus,
    Vocabulary,
    corpus_from_texts,
    load_vocabulary,
    prepare_corpus,
    read_ldac,
    read_uci_bow,
    read_word_list,
)
from vijax.data import _npz, _readers

UCI = "2\n3\n3\n1 1 2\n1 3 1\n2 2 4\n"  # D = 2, W = 3
LDAC = "2 0:2 2:1\n1 1:4\n1 2:1\n"
REPEAT = "apple\npear\nplum\npear\n"  # "pear" on lines 2 and 4


def _write(path, text):
    path.write_text(text)
    return path


def _exact(message):
    return "^" + re.escape(message) + "$"


# ------------------------------------------------------------------ a vocabulary repeating a word


def test_vocabulary_names_the_repeated_word_and_both_positions():
    with pytest.raises(
        ValueError, match=_exact("words: 'b' is repeated, at positions 1 and 3; a vocabulary must not repeat a word")
    ):
        Vocabulary(["a", "b", "c", "b", "a"])


@pytest.mark.parametrize(
    "reader",
    [
        lambda d, v: read_uci_bow(_write(d / "docword.txt", UCI.replace("\n3\n3\n", "\n4\n3\n", 1)), v),
        lambda d, v: read_ldac(_write(d / "c.ldac", LDAC), v),
        lambda d, v: prepare_corpus(_write(d / "docword.txt", "2\n4\n1\n1 1 2\n"), "uci", d / "o.npz", vocab_path=v),
        lambda d, v: prepare_corpus(_write(d / "c.ldac", LDAC), "ldac", d / "o.npz", vocab_path=v),
        lambda d, v: prepare_corpus(_write(d / "t.txt", "pear plum\n"), "text", d / "o.npz", vocab_path=v),
        lambda d, v: load_vocabulary(v),
    ],
    ids=["read_uci_bow", "read_ldac", "prepare_uci", "prepare_ldac", "prepare_text", "load_vocabulary"],
)
def test_a_vocabulary_file_repeating_a_word_is_refused_naming_file_word_and_lines(tmp_path, reader):
    vocab = _write(tmp_path / "vocab.txt", REPEAT)
    message = f"{vocab}, lines 2 and 4: the word 'pear' is repeated; a vocabulary must not repeat a word"
    with pytest.raises(ValueError, match=_exact(message)):
        reader(tmp_path, vocab)
    assert not (tmp_path / "o.npz").exists()


def test_a_vocabulary_repeating_a_word_after_lower_casing_says_so(tmp_path):
    vocab = _write(tmp_path / "vocab.txt", "None\ncat\nnone\n")
    message = (
        f"{vocab}, lines 1 and 3: the word 'none' is repeated (as 'None' and 'none', lower-cased); "
        "a vocabulary must not repeat a word"
    )
    with pytest.raises(ValueError, match=_exact(message)):
        load_vocabulary(vocab)
    assert load_vocabulary(vocab, lowercase=False).words == ("None", "cat", "none")


def test_an_empty_corpus_is_refused_naming_its_argument_and_config_key(tmp_path):
    """Every file empty: the vocabulary was read first and the message named no config key;
    the corpus without documents is refused first, naming ``path`` (the run's ``data.path``)."""
    from vijax._validate import ArgumentError
    from vijax.run import build_experiment, import_builtin_experiments, load_config

    path, vocab = _write(tmp_path / "empty.ldac", ""), _write(tmp_path / "vocab.txt", "")
    gz = tmp_path / "blank.ldac.gz"
    gz.write_bytes(gzip.compress(b"\n\n"))
    for corpus in (path, gz):
        with pytest.raises(ArgumentError, match=re.escape(str(corpus)) + ".* holds no documents") as err:
            read_ldac(corpus, vocab)
        assert err.value.argument == "path"
    with pytest.raises(ArgumentError, match="holds no words") as err:
        read_ldac(_write(tmp_path / "c.ldac", LDAC), vocab)
    assert err.value.argument == "vocab_path"
    import_builtin_experiments()
    for v in (str(vocab), ""):
        config = load_config({"experiment": "lda_corpus", "data": {"path": str(path), "vocab": v}})
        with pytest.raises(ValueError, match=r"^data\.path: .* holds no documents"):
            build_experiment(config)


# ------------------------------------------------------------------ counts float32 cannot hold


@pytest.mark.parametrize("fmt", ["uci", "ldac"])
def test_a_count_above_2_to_the_24_is_refused_not_rounded(tmp_path, fmt):
    """16,777,217 = 2**24 + 1 rounds to 16,777,216 in float32: refused naming the line; 2**24 itself
    is stored exactly."""
    if fmt == "uci":
        path = _write(tmp_path / "docword.txt", "2\n3\n3\n1 1 2\n1 3 16777217\n2 2 4\n")
        read, line = read_uci_bow, 5
    else:
        path = _write(tmp_path / "c.ldac", "1 0:2\n2 1:1 2:16777217\n")
        read, line = read_ldac, 2
    message = (
        f"{path}, line {line}: count 16777217 out of range [0, 16777216]: counts are stored as float32, "
        "which holds whole numbers exactly only up to 2**24"
    )
    with pytest.raises(ValueError, match=_exact(message)):
        read(path)
    path.write_text(path.read_text().replace("16777217", "16777216"))
    assert float(read(path).counts.max()) == 2.0**24


def test_a_text_count_is_checked_before_the_float32_cast():
    """corpus_from_texts hands Corpus its integer counts, so Corpus's own 2**24 check sees them
    before they are rounded (one document of 2**24 + 1 tokens is too large for a quick test; the
    check itself is Corpus's)."""
    c = corpus_from_texts(["b a b"], ["a", "b"])
    assert c.counts.dtype == np.float32 and c.counts.tolist() == [1.0, 2.0]
    with pytest.raises(ValueError, match=_exact("counts above 2**24 are not exact in float32, found count 16777217")):
        Corpus(np.array([0, 1]), np.array([0]), np.array([2**24 + 1]), 2)


# ------------------------------------------------------------------ prepare: output over its input


@pytest.mark.parametrize("how", ["same", "dot", "symlink", "hardlink"])
def test_prepare_refuses_an_output_that_is_its_input(tmp_path, how, monkeypatch):
    src = _write(tmp_path / "c.ldac", LDAC)
    monkeypatch.chdir(tmp_path)
    out = {"same": src, "dot": "./c.ldac", "symlink": tmp_path / "link.npz", "hardlink": tmp_path / "hard.npz"}[how]
    if how == "symlink":
        os.symlink(src, out)
    elif how == "hardlink":
        os.link(src, out)
    message = f"out_path: {os.fspath(out)} is the input file {src}; writing it would destroy it"
    with pytest.raises(ValueError, match=_exact(message)):
        prepare_corpus(src, "ldac", out)
    assert src.read_text() == LDAC


def test_prepare_refuses_an_output_that_is_its_vocabulary_a_directory_or_in_no_folder(tmp_path):
    src = _write(tmp_path / "c.ldac", LDAC)
    vocab = _write(tmp_path / "vocab.txt", "a\nb\nc\n")
    with pytest.raises(
        ValueError, match=_exact(f"out_path: {vocab} is the vocabulary file {vocab}; writing it would destroy it")
    ):
        prepare_corpus(src, "ldac", vocab, vocab_path=vocab)
    assert vocab.read_text() == "a\nb\nc\n"
    with pytest.raises(ValueError, match=_exact(f"out_path: {tmp_path} is a directory; give the .npz file to write")):
        prepare_corpus(src, "ldac", tmp_path)
    missing = tmp_path / "no" / "c.npz"
    with pytest.raises(ValueError, match=_exact(f"out_path: the folder {tmp_path / 'no'} of {missing} does not exist")):
        prepare_corpus(src, "ldac", missing)


def test_a_write_failing_half_way_leaves_the_old_output_and_nothing_else(tmp_path, monkeypatch):
    """The archive is assembled beside its path and renamed into place: a failure while it is being
    written (a full disk, say) leaves an existing output as it was and no temporary file."""
    src = _write(tmp_path / "c.ldac", LDAC)
    out = tmp_path / "c.npz"
    prepare_corpus(src, "ldac", out, vocab_size=3)
    before = out.read_bytes()
    src.write_text("1 0:7\n")

    def full_disk(fsrc, fdst, length=0):
        fdst.write(fsrc.read(3))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_npz.shutil, "copyfileobj", full_disk)
    with pytest.raises(OSError, match="No space left on device"):
        prepare_corpus(src, "ldac", out, vocab_size=3)
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.ldac", "c.npz"]
    monkeypatch.undo()
    assert prepare_corpus(src, "ldac", out, vocab_size=3).counts.tolist() == [7.0]


# ------------------------------------------------------------------ text that is not UTF-8, broken gzip


def _readers_of(kind, out):
    """(reader of a file, a good text of its format of at least three lines); ``prepare_corpus``
    writes ``out``."""
    return {
        "read_ldac": (lambda p: read_ldac(p), LDAC),
        "read_uci_bow": (lambda p: read_uci_bow(p), UCI),
        "read_word_list": (read_word_list, "a\nb\nc\n"),
        "load_vocabulary": (load_vocabulary, "a\nb\nc\n"),
        "prepare_ldac": (lambda p: prepare_corpus(p, "ldac", out), LDAC),
        "prepare_uci": (lambda p: prepare_corpus(p, "uci", out), UCI),
        "prepare_text": (lambda p: prepare_corpus(p, "text", out), "cats and dogs\nmore cats\nbirds\n"),
    }[kind]


READERS = [
    "read_ldac",
    "read_uci_bow",
    "read_word_list",
    "load_vocabulary",
    "prepare_ldac",
    "prepare_uci",
    "prepare_text",
]


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("kind", READERS)
def test_text_that_is_not_utf8_is_named_by_file_and_line(tmp_path, kind, gz):
    reader, good = _readers_of(kind, tmp_path / "o.npz")
    lines = good.encode().split(b"\n")
    col = min(2, len(lines[2]))
    lines[2] = lines[2][:col] + b"\xff" + lines[2][col + 1 :]  # the third line's third byte (or its end)
    data = b"\n".join(lines)
    path = tmp_path / ("f.gz" if gz else "f.txt")
    path.write_bytes(gzip.compress(data) if gz else data)
    with pytest.raises(ValueError, match=_exact(f"{path}, line 3: not UTF-8 text (byte 0xff at column {col + 1})")):
        reader(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def _big_gzip(kind):
    """A gzip file of the reader's format, long enough (about 300 kB of text) for damage to fall
    well after its first lines."""
    if kind in ("read_word_list", "load_vocabulary"):
        text = "".join(f"w{i}\n" for i in range(50_000))
    elif kind in ("read_uci_bow", "prepare_uci"):
        text = "50000\n3\n50000\n" + "".join(f"{i + 1} 2 3\n" for i in range(50_000))
    elif kind == "prepare_text":
        text = "".join(f"cats dogs birds {i}\n" for i in range(50_000))
    else:
        text = "2 0:2 2:1\n" * 50_000
    return gzip.compress(text.encode(), compresslevel=1)


@pytest.mark.parametrize("kind", READERS)
def test_truncated_gzip_is_named_with_the_lines_read(tmp_path, kind):
    reader, _ = _readers_of(kind, tmp_path / "o.npz")
    data = _big_gzip(kind)
    path = tmp_path / "cut.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError) as err:
        reader(path)
    message = str(err.value)
    m = re.fullmatch(
        re.escape(f"{path}: the gzip data is truncated or corrupt after line ")
        + r"(\d+)"
        + re.escape(" (Compressed file ended before the end-of-stream marker was reached)"),
        message,
    )
    assert m and 1000 < int(m.group(1)) < 50_000, message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.gz"]


@pytest.mark.parametrize("kind", READERS)
def test_corrupt_gzip_is_named(tmp_path, kind):
    """Damage in the middle of the stream: a decompression error or a failed CRC check, always
    a ValueError naming the file (never a bare zlib.error or EOFError)."""
    reader, _ = _readers_of(kind, tmp_path / "o.npz")
    data = bytearray(_big_gzip(kind))
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(64)
    path = tmp_path / "bad.gz"
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError) as err:
        reader(path)
    assert str(err.value).startswith(f"{path}: the gzip data is truncated or corrupt after line "), str(err.value)


# ------------------------------------------------------------------ paths that are not files


def _not_files(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    cases = [(tmp_path, "a directory"), (fifo, "a named pipe")]
    if os.path.exists("/dev/zero") and stat.S_ISCHR(os.stat("/dev/zero").st_mode):
        cases.append(("/dev/zero", "a character device"))
    return cases


ALL_READERS = READERS + ["load_npz", "load_npz_in_memory"]


@pytest.mark.parametrize("kind", ALL_READERS)
def test_a_path_that_is_not_a_file_is_refused_before_it_is_opened(tmp_path, kind):
    """A directory, a named pipe (opening it would block) or /dev/zero (reading it never ends)."""
    if kind.startswith("load_npz"):
        reader = lambda p: Corpus.load_npz(p, mmap=kind == "load_npz")  # noqa: E731
    else:
        reader, _ = _readers_of(kind, tmp_path / "o.npz")
    for path, what in _not_files(tmp_path):
        with pytest.raises(ValueError, match=_exact(f"{path}: is {what}, not a file")):
            reader(path)


def test_a_missing_file_is_named(tmp_path):
    missing = tmp_path / "missing.ldac"
    with pytest.raises(FileNotFoundError, match=_exact(f"{missing}: no such file")):
        read_ldac(missing)
    with pytest.raises(FileNotFoundError, match=_exact(f"input file {str(missing)!r} does not exist")):
        prepare_corpus(missing, "ldac", tmp_path / "o.npz")


def test_uci_header_and_entries_across_chunk_boundaries(tmp_path, monkeypatch):
    """Lines are read in chunks; the header and entries read the same whatever the chunk size
    (blank lines in the header included), and errors keep their line numbers."""
    path = _write(tmp_path / "docword.txt", "\n2\n\n3\n4\n1 1 2\n1 3 1\n\n2 2 4\n2 1 1\n")
    want = read_uci_bow(path)
    for size in (1, 2, 3, 5):
        monkeypatch.setattr(_readers, "_LINES_PER_CHUNK", size)
        got = read_uci_bow(path)
        for a, b in ((got.doc_ptr, want.doc_ptr), (got.word_ids, want.word_ids), (got.counts, want.counts)):
            np.testing.assert_array_equal(a, b)
        bad = _write(tmp_path / "bad.txt", path.read_text().replace("2 1 1", "2 1 -1"))
        with pytest.raises(ValueError, match=_exact(f"{bad}, line 10: count -1 out of range [0, 16777216]")):
            read_uci_bow(bad)


def test_the_labelled_csv_reader_names_non_utf8_lines_and_non_files(tmp_path):
    from vijax.data._uci import read_labelled_csv

    path = tmp_path / "x.csv"
    path.write_bytes(b"0.5,1\n0.25,-1\n0.\xe9,1\n")
    with pytest.raises(ValueError, match=_exact(f"{path}, line 3: not UTF-8 text (byte 0xe9 at column 3)")):
        read_labelled_csv(path)
    with pytest.raises(ValueError, match=_exact(f"{tmp_path}: is a directory, not a file")):
        read_labelled_csv(tmp_path)


def test_a_damaged_usps_file_is_named(tmp_path, monkeypatch):
    from vijax.data import _uci, load_usps_3v5

    path = tmp_path / "usps_resampled.mat.gz"
    path.write_bytes(gzip.compress(b"MATLAB 5.0 MAT-file" + bytes(200))[:40])
    monkeypatch.setattr(_uci, "_need", lambda *parts: path)
    with pytest.raises(ValueError) as err:
        load_usps_3v5()
    assert str(err.value).startswith(f"{path}: not a readable gzipped MATLAB file (truncated or corrupt?): "), str(
        err.value
    )


def test_vocabulary_save_replaces_the_file_whole_or_not_at_all(tmp_path, monkeypatch):
    from vijax.data import _text

    path = tmp_path / "vocab.txt"
    Vocabulary(["a", "b"]).save(path)
    assert path.read_text() == "a\nb\n" and load_vocabulary(path).words == ("a", "b")

    def fail(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_text.os, "replace", fail)
    with pytest.raises(OSError, match="No space left on device"):
        Vocabulary(["c", "d", "e"]).save(path)
    assert path.read_text() == "a\nb\n"
    assert [p.name for p in tmp_path.iterdir()] == ["vocab.txt"]


# ------------------------------------------------------------------ empty files
@pytest.mark.parametrize(
    "read,words",
    [
        (lambda p: read_ldac(p, vocab_size=5), "holds no documents (an empty lda-c file)"),
        (read_word_list, "holds no words: an empty word list"),
        (load_vocabulary, "holds no words: an empty word list"),
        (lambda p: prepare_corpus(p, "ldac", p.with_name("out.npz"), vocab_size=5), "is empty: no documents"),
    ],
)
def test_an_empty_file_is_refused_naming_it(tmp_path, read, words):
    path = _write(tmp_path / "empty.txt", "")
    with pytest.raises(ValueError, match=re.escape(str(path)) + ".*" + re.escape(words)):
        read(path)
    assert not (tmp_path / "out.npz").exists()
