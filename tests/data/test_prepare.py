"""``vijax prepare`` / ``prepare_corpus``: each format round-trips to the memory-mapped .npz."""

import gzip

import numpy as np
import pytest

from vijax.data import Corpus, prepare_corpus, read_ldac, read_uci_bow
from vijax.run import main


def _same(a: Corpus, b: Corpus):
    assert (a.num_docs, a.vocab_size, a.vocab) == (b.num_docs, b.vocab_size, b.vocab)
    for x, y in ((a.doc_ptr, b.doc_ptr), (a.word_ids, b.word_ids), (a.counts, b.counts)):
        np.testing.assert_array_equal(x, y)


def test_prepare_round_trips_each_format(tmp_path, capsys):
    ldac = tmp_path / "c.ldac"
    ldac.write_text("2 0:3 4:1\n0\n1 2:2\n3 1:1 3:5 0:2\n")
    out = tmp_path / "c.npz"
    assert main(["prepare", str(ldac), "--format", "ldac", "--out", str(out)]) == 0
    assert "4 documents, 5 words, 14 tokens" in capsys.readouterr().out
    got = Corpus.load_npz(out, mmap=True)
    assert isinstance(got.word_ids, np.memmap) or isinstance(got.word_ids.base, np.memmap)
    _same(got, read_ldac(ldac))
    _same(prepare_corpus(ldac, "ldac", tmp_path / "v.npz", vocab_size=9), read_ldac(ldac, vocab_size=9))

    uci = tmp_path / "docword.txt.gz"
    with gzip.open(uci, "wt") as f:
        f.write("3\n4\n4\n3 2 1\n1 1 2\n1 4 1\n3 3 7\n")  # unsorted entries, an empty document 2
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("a\nb\nc\nd\n")
    _same(prepare_corpus(uci, "uci", tmp_path / "u.npz", vocab_path=vocab), read_uci_bow(uci, vocab))

    text = tmp_path / "docs.txt"
    text.write_text("Topic models topic\n\nmodels of text, text text\n")
    c = prepare_corpus(text, "text", tmp_path / "t.npz")
    assert c.num_docs == 3 and c.num_empty == 1 and set(c.vocab) == {"topic", "models", "text"}
    words = {c.vocab[w]: n for w, n in zip(*c.document(2))}
    assert words == {"models": 1.0, "text": 3.0}
    vfile = tmp_path / "words.txt"
    vfile.write_text("text\ntopic\n")
    c = prepare_corpus(text, "text", tmp_path / "t2.npz", vocab_path=vfile)
    assert c.vocab == ("text", "topic") and c.doc_lengths.tolist() == [2, 0, 3]


def test_prepare_errors_name_the_file(tmp_path, capsys):
    bad = tmp_path / "bad.ldac"
    bad.write_text("2 0:3\n")
    assert main(["prepare", str(bad), "--format", "ldac", "--out", str(tmp_path / "o.npz")]) == 2
    assert "bad.ldac, line 1" in capsys.readouterr().err
    assert main(["prepare", str(tmp_path / "missing.txt"), "--format", "text", "--out", str(tmp_path / "o.npz")]) == 2
    assert "missing.txt" in capsys.readouterr().err
    with pytest.raises(ValueError, match="format"):
        prepare_corpus(bad, "csv", tmp_path / "o.npz")
