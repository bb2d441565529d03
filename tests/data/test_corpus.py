"""Tests of the corpus layer: Corpus, readers, tokenizer, synthetic LDA corpora, minibatching."""

import dataclasses
import gzip
import time
import tracemalloc

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax.data import (
    LDA_BLOCK_DOCS,
    STOP_WORDS_EN,
    BowBatch,
    Corpus,
    CorpusWriter,
    Minibatcher,
    Vocabulary,
    bucket_length,
    build_vocabulary,
    corpus_from_texts,
    epoch_batches,
    load_vocabulary,
    minibatches,
    read_ldac,
    read_uci_bow,
    sample_lda_corpus,
    shuffled_positions,
    stack_batches,
    tokenize,
    write_lda_corpus_npz,
)
from vijax.data import shared_data_path


WIKI = shared_data_path("wiki_bnpy", "train.ldac.gz")
WIKI_VOCAB = shared_data_path("wiki_bnpy", "vocab.txt")
DICTNOSTOPS = shared_data_path("onlineldavb_vocab", "dictnostops.txt")
_ABSENT = "reference data absent (see vijax.data.shared_data_path; set VIJAX_SHARED_DATA)"


def _docs_as_dicts(corpus):
    """Each document as {word id: count}, for order-free comparisons."""
    out = []
    for d in range(corpus.num_docs):
        ids, cnt = corpus.document(d)
        out.append({int(i): float(c) for i, c in zip(ids, cnt)})
    return out


def _random_corpus(seed, num_docs=40, vocab_size=30, max_unique=12, empty_every=7):
    rng = np.random.default_rng(seed)
    lens, ids, cnts = [], [], []
    for d in range(num_docs):
        m = 0 if d % empty_every == 3 else int(rng.integers(1, max_unique + 1))
        lens.append(m)
        ids.append(np.sort(rng.choice(vocab_size, m, replace=False)))
        cnts.append(rng.integers(1, 6, m))
    ptr = np.concatenate([[0], np.cumsum(lens)])
    return Corpus(
        ptr,
        np.concatenate(ids),
        np.concatenate(cnts).astype(np.float32),
        vocab_size,
        [f"w{v}" for v in range(vocab_size)],
    )


@pytest.fixture
def small():
    # doc 0: 3 unique words, doc 1: empty, doc 2: 9 unique, doc 3: 20 unique
    rng = np.random.default_rng(0)
    sizes = [3, 0, 9, 20]
    ids = np.concatenate([np.sort(rng.choice(50, m, replace=False)) for m in sizes])
    counts = rng.integers(1, 4, ids.size).astype(np.float32)
    return Corpus(np.concatenate([[0], np.cumsum(sizes)]), ids, counts, 50)


# ---------------------------------------------------------------------------- Corpus


def test_corpus_sizes(small):
    assert small.num_docs == len(small) == 4
    assert small.nnz == 32 and small.vocab_size == 50 and small.vocab is None
    np.testing.assert_array_equal(small.doc_unique_words, [3, 0, 9, 20])
    lengths = [int(small.document(d)[1].sum()) for d in range(4)]
    np.testing.assert_array_equal(small.doc_lengths, lengths)
    assert small.num_tokens == sum(lengths)
    assert small.num_empty == 1
    assert small.doc_ptr.dtype == np.int64 and small.word_ids.dtype == np.int32
    assert small.counts.dtype == np.float32


def test_corpus_is_immutable(small):
    with pytest.raises(dataclasses.FrozenInstanceError):
        small.vocab_size = 3
    with pytest.raises(ValueError):
        small.counts[0] = 5.0
    with pytest.raises(ValueError):
        small.word_ids[0] = 1


def test_vocab_size_inferred():
    c = Corpus(np.array([0, 2]), np.array([4, 1]), np.array([1, 2]))
    assert c.vocab_size == 5
    c = Corpus(np.array([0, 1]), np.array([1]), np.array([1]), vocab=["a", "b", "c"])
    assert c.vocab_size == 3 and c.vocab == ("a", "b", "c")


@pytest.mark.parametrize(
    "ptr, ids, counts, size, message",
    [
        ([0, 2], [0, 1], [1.0, -2.0], 3, "negative count"),
        ([0, 2], [0, 1], [1.0, 0.5], 3, "fractional count"),
        ([0, 2], [0, 1], [1.0, np.nan], 3, "non-finite"),
        ([0, 2], [0, 3], [1.0, 1.0], 3, "found word id 3"),
        ([0, 2], [0, -1], [1.0, 1.0], 3, "negative word id"),
        ([0, 2, 1, 3], [0, 1, 2], [1.0, 1.0, 1.0], 3, "non-decreasing"),
        ([1, 3], [0, 1], [1.0, 1.0], 3, "start at 0"),
        ([0, 1], [0, 1], [1.0, 1.0], 3, "end at nnz"),
        ([0, 2], [0, 1], [1.0], 3, "equal length"),
        ([0, 2], [0.0, 1.0], [1.0, 1.0], 3, "word_ids must hold integers"),
        ([0, 1], [0], [2.0**25], 3, "not exact in float32"),
    ],
)
def test_validation_names_the_problem(ptr, ids, counts, size, message):
    with pytest.raises(ValueError, match=message):
        Corpus(np.array(ptr), np.array(ids), np.array(counts), size)


def test_validation_of_vocab_and_integer_counts():
    with pytest.raises(ValueError, match="vocab has 2 words but vocab_size is 3"):
        Corpus(np.array([0, 1]), np.array([0]), np.array([1]), 3, ["a", "b"])
    with pytest.raises(ValueError, match="negative count"):
        Corpus(np.array([0, 1]), np.array([0]), np.array([-1]), 3)


def test_bucket_length():
    assert [bucket_length(n) for n in (0, 1, 8, 9, 16, 17, 1000)] == [8, 8, 8, 16, 16, 32, 1024]
    assert bucket_length(3, minimum=1) == 4


def test_batch_pads_to_the_minibatch_with_buckets(small):
    assert small.batch([0]).word_ids.shape == (1, 8)  # 3 unique words -> bucket 8
    assert small.batch([1]).word_ids.shape == (1, 8)  # an empty document alone
    assert small.batch([0, 2]).word_ids.shape == (2, 16)  # 9 -> 16: this batch, not the corpus
    assert small.batch([3, 0]).word_ids.shape == (2, 32)
    assert small.batch([0, 2], bucket=False).word_ids.shape == (2, 9)
    b = small.batch([2, 1, 0], bucket=False)
    assert isinstance(b, BowBatch) and b.word_ids.dtype == np.int32 and b.counts.dtype == np.float32
    for row, d in enumerate([2, 1, 0]):
        ids, cnt = small.document(d)
        m = ids.size
        np.testing.assert_array_equal(b.word_ids[row, :m], ids)
        np.testing.assert_array_equal(b.counts[row, :m], cnt)
        assert np.all(b.word_ids[row, m:] == 0) and np.all(b.counts[row, m:] == 0)


def test_batch_extra_rows_and_length(small):
    b = small.batch([0], num_rows=4, length=12, dtype=np.float64)
    assert b.word_ids.shape == (4, 12) and b.counts.dtype == np.float64
    assert np.all(b.counts[1:] == 0)
    with pytest.raises(ValueError, match="shorter than the longest"):
        small.batch([3], length=16)
    with pytest.raises(ValueError, match="num_rows"):
        small.batch([0, 1], num_rows=1)
    with pytest.raises(IndexError):
        small.batch([4])


def test_subset_and_split_documents():
    c = _random_corpus(1)
    sub = c.subset([5, 0, 5])
    assert _docs_as_dicts(sub) == [_docs_as_dicts(c)[i] for i in (5, 0, 5)]
    assert sub.vocab == c.vocab
    train, test = c.split_documents(3, test_fraction=0.25)
    assert (train.num_docs, test.num_docs) == (30, 10)
    assert train.num_tokens + test.num_tokens == c.num_tokens
    all_docs = _docs_as_dicts(c)
    got = _docs_as_dicts(train) + _docs_as_dicts(test)
    assert sorted(map(str, got)) == sorted(map(str, all_docs))
    again = c.split_documents(3, test_fraction=0.25)[1]
    assert _docs_as_dicts(again) == _docs_as_dicts(test)
    other = c.split_documents(4, test_fraction=0.25)[1]
    assert _docs_as_dicts(other) != _docs_as_dicts(test)
    new_style = c.split_documents(jax.random.key(3), 0.25)[1]  # typed keys carry the same data
    assert _docs_as_dicts(new_style) == _docs_as_dicts(c.split_documents(jax.random.PRNGKey(3), 0.25)[1])
    with pytest.raises(ValueError, match="^seed must be an int or a JAX PRNG key"):
        c.split_documents(0.5, 0.25)
    keyed = c.split_documents(jax.random.PRNGKey(3), 0.25)[1]
    assert _docs_as_dicts(keyed) == _docs_as_dicts(c.split_documents(jax.random.PRNGKey(3), 0.25)[1])
    with pytest.raises(ValueError, match="test_fraction"):
        c.split_documents(0, 1.5)


def test_split_tokens_preserves_documents():
    c = _random_corpus(2, num_docs=60)
    obs, held = c.split_tokens(0, observed_fraction=0.3)
    assert obs.num_docs == held.num_docs == c.num_docs
    np.testing.assert_array_equal(obs.doc_lengths + held.doc_lengths, c.doc_lengths)
    np.testing.assert_array_equal(obs.doc_lengths, np.floor(0.3 * c.doc_lengths + 0.5))
    for d, (a, b, full) in enumerate(zip(_docs_as_dicts(obs), _docs_as_dicts(held), _docs_as_dicts(c))):
        merged = {w: a.get(w, 0.0) + b.get(w, 0.0) for w in set(a) | set(b)}
        assert merged == {w: n for w, n in full.items() if n > 0}, d
        assert all(v > 0 for v in a.values()) and all(v > 0 for v in b.values())
    assert _docs_as_dicts(c.split_tokens(0, 0.3)[0]) == _docs_as_dicts(obs)
    assert _docs_as_dicts(c.split_tokens(1, 0.3)[0]) != _docs_as_dicts(obs)


def test_split_tokens_is_uniform_over_tokens():
    # 2000 copies of one document with counts (30, 70); observing 50 of its 100 tokens draws the
    # first word's observed count from Hypergeometric(100, 30, 50): mean 15, variance 50*.3*.7*50/99.
    n = 2000
    c = Corpus(np.arange(0, 2 * n + 1, 2), np.tile([0, 1], n), np.tile([30.0, 70.0], n), 2)
    obs, _ = c.split_tokens(jax.random.PRNGKey(0), 0.5)
    x = np.array([d.get(0, 0.0) for d in _docs_as_dicts(obs)])
    var = 50 * 0.3 * 0.7 * 50 / 99
    assert abs(x.mean() - 15) < 5 * np.sqrt(var / n)
    assert abs(x.var() / var - 1) < 5 * np.sqrt(2 / n)  # chi-square-like spread of a sample variance
    assert len(set(x.tolist())) > 5  # not a fixed split by word


# ---------------------------------------------------------------------------- disk


def test_npz_round_trip_memory_mapped(tmp_path):
    c = _random_corpus(3)
    path = tmp_path / "c.npz"
    c.save_npz(path)
    m = Corpus.load_npz(path, mmap=True)
    for name in ("doc_ptr", "word_ids", "counts"):
        arr = getattr(m, name)
        assert isinstance(arr, np.memmap) or isinstance(arr.base, np.memmap), name
        np.testing.assert_array_equal(arr, getattr(c, name))
    assert m.vocab == c.vocab and m.vocab_size == c.vocab_size
    idx = [4, 0, 17, 3]
    for a, b in zip(m.batch(idx), c.batch(idx)):
        np.testing.assert_array_equal(a, b)
    r = Corpus.load_npz(path, mmap=False)
    assert not isinstance(r.word_ids, np.memmap)
    np.testing.assert_array_equal(r.counts, c.counts)
    # A memory-mapped corpus saves elsewhere unchanged.
    m.save_npz(tmp_path / "copy.npz")
    np.testing.assert_array_equal(Corpus.load_npz(tmp_path / "copy.npz").word_ids, c.word_ids)


def test_npz_load_rejects_other_files(tmp_path):
    np.savez(tmp_path / "x.npz", a=np.arange(3))
    with pytest.raises(ValueError, match="not a vijax corpus"):
        Corpus.load_npz(tmp_path / "x.npz")
    c = _random_corpus(4)
    np.savez_compressed(
        tmp_path / "z.npz",
        doc_ptr=c.doc_ptr,
        word_ids=c.word_ids,
        counts=c.counts,
        vocab_size=np.array(c.vocab_size),
        format=np.array("vijax.Corpus/1"),
    )
    with pytest.raises(ValueError, match="compressed"):
        Corpus.load_npz(tmp_path / "z.npz", mmap=True)
    assert Corpus.load_npz(tmp_path / "z.npz", mmap=False).num_docs == c.num_docs


def test_npz_empty_corpus(tmp_path):
    c = Corpus(np.zeros(1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.float32), 4)
    c.save_npz(tmp_path / "e.npz")
    e = Corpus.load_npz(tmp_path / "e.npz")
    assert e.num_docs == 0 and e.nnz == 0 and e.vocab_size == 4


def test_corpus_writer_chunks(tmp_path):
    c = _random_corpus(5)
    path = tmp_path / "w.npz"
    with CorpusWriter(path, c.vocab_size, c.vocab) as w:
        for lo in range(0, c.num_docs, 7):
            w.append(c.subset(range(lo, min(lo + 7, c.num_docs))))
        assert w.num_docs == c.num_docs
    r = Corpus.load_npz(path)
    assert _docs_as_dicts(r) == _docs_as_dicts(c) and r.vocab == c.vocab
    with pytest.raises(ValueError, match="word ids must be < vocab_size"):
        with CorpusWriter(tmp_path / "bad.npz", 3) as w:
            w.append_arrays([2], [0, 3], [1.0, 1.0])
    assert not (tmp_path / "bad.npz").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".npz-spool")] == []


def _write_uci(path, corpus, order, opener=open):
    with opener(path, "wt") as fh:
        fh.write(f"{corpus.num_docs}\n{corpus.vocab_size}\n{corpus.nnz}\n")
        lines = []
        for d in range(corpus.num_docs):
            ids, cnt = corpus.document(d)
            lines += [f"{d + 1} {w + 1} {int(n)}\n" for w, n in zip(ids, cnt)]
        fh.writelines(lines[i] for i in order)


@pytest.mark.parametrize("gz", [False, True])
def test_uci_round_trip(tmp_path, gz):
    c = _random_corpus(6)
    order = np.random.default_rng(0).permutation(c.nnz)  # entries need not be sorted by document
    path = tmp_path / ("docword.test.txt" + (".gz" if gz else ""))
    _write_uci(path, c, order, gzip.open if gz else open)
    (tmp_path / "vocab.test.txt").write_text("".join(w + "\n" for w in c.vocab))
    r = read_uci_bow(path, tmp_path / "vocab.test.txt")
    assert r.num_docs == c.num_docs and r.vocab == c.vocab and r.num_empty == c.num_empty
    assert _docs_as_dicts(r) == _docs_as_dicts(c)


def test_uci_errors(tmp_path):
    p = tmp_path / "d.txt"
    p.write_text("2\n5\n3\n1 1 2\n2 5 1\n")
    with pytest.raises(ValueError, match="NNZ = 3 but the file has 2"):
        read_uci_bow(p)
    p.write_text("2\n5\n2\n1 1 2\n3 5 1\n")
    with pytest.raises(ValueError, match=r"d\.txt, line 5: docID 3 out of range \[1, 2\]"):
        read_uci_bow(p)
    p.write_text("2\n5\n2\n1 1 2\n2 6 1\n")
    with pytest.raises(ValueError, match="line 5: wordID 6 out of range"):
        read_uci_bow(p)
    p.write_text("2\n5\n2\n1 1 2\n2 x 1\n")
    with pytest.raises(ValueError, match="expected integers"):
        read_uci_bow(p)


@pytest.mark.parametrize(
    "body, message",
    [
        ("1 1 2\n1 2\n2 3 1\n", "line 5: expected 'docID wordID count', found 2 numbers"),  # would re-pair
        ("1 1\n2 2 3 1\n1 1 1\n", "line 4: expected 'docID wordID count', found 2 numbers"),
        ("1 1 2\n\n2 1 1 4\n", "line 6: expected 'docID wordID count', found 4 numbers"),
        ("1 1 2\n2 1 -3\n1 2 1\n", "line 5: count -3 out of range"),
        ("1 1 2\n2 4294967297 1\n1 2 1\n", "line 5: wordID 4294967297 out of range"),  # would wrap to 1 in int32
        ("1 1 2\n2 99999999999999999999 1\n1 2 1\n", r"line 5: wordID \d+ \(too large for an integer\)"),
    ],
)
def test_uci_misaligned_lines_and_huge_ids_are_named_by_line(tmp_path, body, message):
    p = tmp_path / "docword.bad.txt"
    p.write_text("2\n5\n3\n" + body)
    with pytest.raises(ValueError, match="docword.bad.txt, " + message):
        read_uci_bow(p)


def test_uci_header_beyond_int32_and_blank_lines(tmp_path):
    p = tmp_path / "d.txt"
    p.write_text("2\n5000000000\n1\n1 4294967297 1\n")
    with pytest.raises(ValueError, match=r"header W = 5000000000 is out of range"):
        read_uci_bow(p)
    p.write_text("\n2\n5\n2\n\n1 1 2\n\n2 5 1")  # blank lines, no final newline: fine
    c = read_uci_bow(p)
    assert c.num_docs == 2 and c.nnz == 2


def _write_ldac(path, corpus, opener=open):
    with opener(path, "wt") as fh:
        for d in range(corpus.num_docs):
            ids, cnt = corpus.document(d)
            fh.write(" ".join([str(ids.size)] + [f"{w}:{int(n)}" for w, n in zip(ids, cnt)]) + "\n")


@pytest.mark.parametrize("gz", [False, True])
def test_ldac_round_trip(tmp_path, gz):
    c = _random_corpus(7)
    path = tmp_path / ("c.ldac" + (".gz" if gz else ""))
    _write_ldac(path, c, gzip.open if gz else open)
    r = read_ldac(path, vocab_size=c.vocab_size)
    assert r.num_docs == c.num_docs and r.vocab_size == c.vocab_size and r.num_empty == c.num_empty
    assert _docs_as_dicts(r) == _docs_as_dicts(c)
    (tmp_path / "vocab.txt").write_text("".join(w + "\n" for w in c.vocab))
    assert read_ldac(path, tmp_path / "vocab.txt").vocab == c.vocab


def test_ldac_errors(tmp_path):
    p = tmp_path / "bad.ldac"
    p.write_text("2 0:1 3:2\n2 1:1\n")
    with pytest.raises(ValueError, match="line 2: M = 2 but the line has 1"):
        read_ldac(p)
    p.write_text("1 0:1\nx 1:1\n")
    with pytest.raises(ValueError, match="line 2: expected the number of pairs"):
        read_ldac(p)
    p.write_text("1 0:1.5\n")
    with pytest.raises(ValueError, match="expected integers"):
        read_ldac(p)
    p.write_text("1 0:1\n1 7:1\n")
    with pytest.raises(ValueError, match="line 2: word id 7 >= vocabulary size 5"):
        read_ldac(p, vocab_size=5)


@pytest.mark.parametrize(
    "text, message",
    [
        ("1 0:1\n2 0:3:4 5\n", "line 2: malformed id:count pairs"),  # would re-pair as 0:3 4:5
        ("1 0:1\n\n2 1:1 :2 3\n", "line 3: malformed id:count pairs"),
        ("1 0:1\n1 2:-3\n", "line 2: count -3 out of range"),
        ("1 0:1\n1 2:-1\n", "line 2: malformed id:count pairs"),
        ("1 0:1\n1 -2:1\n", "line 2: word id -2 out of range"),
        ("1 0:1\n1 4294967297:1\n", "line 2: word id 4294967297 out of range"),  # would wrap to 1 in int32
        ("1 0:1\n1 99999999999999999999:1\n", r"line 2: word id \d+ \(too large for an integer\)"),
    ],
)
def test_ldac_malformed_pairs_and_huge_ids_are_named_by_line(tmp_path, text, message):
    p = tmp_path / "bad.ldac"
    p.write_text(text)
    with pytest.raises(ValueError, match="bad.ldac, " + message):
        read_ldac(p)


@pytest.mark.skipif(WIKI is None or WIKI_VOCAB is None, reason=_ABSENT)
def test_wiki_bnpy_counts():
    t0 = time.perf_counter()
    c = read_ldac(WIKI, WIKI_VOCAB)
    elapsed = time.perf_counter() - t0
    assert c.num_docs == 7961
    assert c.vocab_size == 6130 and len(c.vocab) == 6130
    assert c.nnz == 2_107_419
    assert c.num_tokens == 2_844_630
    assert int(c.word_ids.max()) == 6129
    assert elapsed < 30, elapsed  # streamed and parsed in C; about half a second here


@pytest.mark.skipif(DICTNOSTOPS is None, reason=_ABSENT)
def test_dictnostops_vocabulary():
    path = DICTNOSTOPS
    v = load_vocabulary(path)
    assert len(v) == 7702 and all(w.isalpha() and w == w.lower() for w in v.words)
    assert v["none"] == 3050 and "None" in load_vocabulary(path, lowercase=False)  # line 3051 is "None"
    c = corpus_from_texts(["The writings of None: four woods, yellow woods."], v)
    assert c.num_tokens == 6 and c.vocab_size == 7702  # "the", "of" are not in the list


# ---------------------------------------------------------------------------- raw text


def test_tokenize():
    assert tokenize("Hello, World! It's 2024: naïve café_au lait.") == [
        "hello",
        "world",
        "it",
        "s",
        "naïve",
        "café",
        "au",
        "lait",
    ]


def test_build_vocabulary_cutoffs():
    texts = ["the cat sat on the mat", "the cat ate", "a dog and a cat", "dog dog bird", "cat fish"]
    v = build_vocabulary(texts)  # stop words dropped; ids by decreasing count, then alphabetically
    assert v.words == ("cat", "dog", "ate", "bird", "fish", "mat", "sat")
    assert "the" in STOP_WORDS_EN and "cat" not in STOP_WORDS_EN
    assert build_vocabulary(texts, min_count=2).words == ("cat", "dog")
    assert "cat" not in build_vocabulary(texts, max_doc_fraction=0.6)  # cat is in 4 of 5 texts
    assert build_vocabulary(texts, max_size=3).words == ("cat", "dog", "ate")
    assert build_vocabulary(texts, stop_words=None).words[0] == "cat"
    assert "the" in build_vocabulary(texts, stop_words=())
    assert build_vocabulary(texts, min_length=4).words == ("bird", "fish")
    assert build_vocabulary(iter(texts)) == v  # any iterable, read once


def test_corpus_from_texts_and_vocabulary_files(tmp_path):
    texts = ["The cat sat on the mat.", "Dogs! Dogs and a cat.", "", "nothing known here"]
    v = Vocabulary(["cat", "dogs", "mat", "sat"])
    c = corpus_from_texts(texts, v)
    assert c.vocab == v.words and c.num_docs == 4 and c.num_empty == 2
    assert _docs_as_dicts(c) == [{0: 1.0, 2: 1.0, 3: 1.0}, {0: 1.0, 1: 2.0}, {}, {}]
    v.save(tmp_path / "v.txt")
    assert load_vocabulary(tmp_path / "v.txt") == v
    with pytest.raises(ValueError, match="repeat a word"):
        Vocabulary(["a", "b", "a"])
    (tmp_path / "gap.txt").write_text("a\n\nb\n")
    with pytest.raises(ValueError, match="blank line 2"):
        load_vocabulary(tmp_path / "gap.txt")


# ---------------------------------------------------------------------------- synthetic LDA


def test_sample_lda_corpus_shapes_and_reproducibility():
    s = sample_lda_corpus(jax.random.PRNGKey(0), 700, 4, 60, alpha=0.5, eta=0.1, doc_length_mean=40)
    assert s.corpus.num_docs == 700 and s.corpus.vocab_size == 60
    assert s.topics.shape == (4, 60) and s.doc_topics.shape == (700, 4)
    np.testing.assert_allclose(s.topics.sum(1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(s.doc_topics.sum(1), 1.0, rtol=1e-12)
    again = sample_lda_corpus(jax.random.PRNGKey(0), 700, 4, 60, alpha=0.5, eta=0.1, doc_length_mean=40)
    np.testing.assert_array_equal(again.corpus.word_ids, s.corpus.word_ids)
    np.testing.assert_array_equal(again.corpus.counts, s.corpus.counts)
    other = sample_lda_corpus(jax.random.PRNGKey(1), 700, 4, 60, alpha=0.5, eta=0.1, doc_length_mean=40)
    assert not np.array_equal(other.topics, s.topics)
    # entries sorted by word within each document, no repeats, no zero counts
    for d in range(0, 700, 50):
        ids, cnt = s.corpus.document(d)
        assert np.all(np.diff(ids) > 0) and np.all(cnt > 0)
    with pytest.raises(ValueError, match="alpha"):
        sample_lda_corpus(0, 10, 3, 20, alpha=[1.0, -1.0, 1.0])


def test_sample_lda_corpus_statistics():
    """Word counts are Multinomial(N_d, theta_d @ beta): compare per word (k standard errors)."""
    D, K, V, mean_len = 3000, 5, 40, 60.0
    s = sample_lda_corpus(7, D, K, V, alpha=0.3, eta=0.5, doc_length_mean=mean_len)
    c = s.corpus
    # lengths ~ Poisson(mean_len)
    assert abs(c.doc_lengths.mean() - mean_len) < 5 * np.sqrt(mean_len / D)
    # theta_d ~ Dirichlet(0.3): mean 1/K per topic, sd sqrt((1/K)(1-1/K)/(K*0.3+1)/D)
    sd = np.sqrt((1 / K) * (1 - 1 / K) / (K * 0.3 + 1) / D)
    assert np.all(np.abs(s.doc_topics.mean(0) - 1 / K) < 5 * sd)
    p = s.doc_topics @ s.topics  # (D, V) word probabilities of each document
    expected = (c.doc_lengths[:, None] * p).sum(0)
    var = (c.doc_lengths[:, None] * p * (1 - p)).sum(0)
    observed = np.bincount(c.word_ids, weights=c.counts, minlength=V)
    z = (observed - expected) / np.sqrt(var)
    assert np.max(np.abs(z)) < 5, np.max(np.abs(z))
    assert abs(np.mean(z**2) - 1) < 5 * np.sqrt(2 / V)  # z^2 has mean 1, variance 2 (roughly)


def test_sample_lda_corpus_is_fast():
    t0 = time.perf_counter()
    s = sample_lda_corpus(0, 50_000, 20, 2000, doc_length_mean=100)
    elapsed = time.perf_counter() - t0
    assert s.corpus.num_docs == 50_000 and abs(s.corpus.num_tokens / 5e6 - 1) < 0.01
    assert elapsed < 20, elapsed  # one to two seconds on one core


def test_write_lda_corpus_npz_matches_in_memory(tmp_path, monkeypatch):
    num_docs = 3 * LDA_BLOCK_DOCS + 37
    appended = []
    original = CorpusWriter.append

    def spy(self, chunk):
        appended.append(chunk.num_docs)
        return original(self, chunk)

    monkeypatch.setattr(CorpusWriter, "append", spy)
    w = write_lda_corpus_npz(tmp_path / "lda.npz", 3, num_docs, 4, 80, alpha=0.2, eta=0.1, doc_length_mean=30)
    assert appended == [LDA_BLOCK_DOCS] * 3 + [37]  # one block at a time, never the whole corpus
    m = sample_lda_corpus(3, num_docs, 4, 80, alpha=0.2, eta=0.1, doc_length_mean=30)
    assert isinstance(w.corpus.word_ids.base, np.memmap) or isinstance(w.corpus.word_ids, np.memmap)
    for name in ("doc_ptr", "word_ids", "counts"):
        np.testing.assert_array_equal(getattr(w.corpus, name), getattr(m.corpus, name))
    np.testing.assert_array_equal(w.topics, m.topics)
    np.testing.assert_allclose(w.doc_topics, m.doc_topics, rtol=1e-6)
    np.testing.assert_array_equal(np.load(tmp_path / "lda.npz")["topics"], m.topics)
    assert Corpus.load_npz(tmp_path / "lda.npz").num_tokens == m.corpus.num_tokens


def test_write_lda_corpus_npz_memory_is_bounded_by_a_block(tmp_path):
    """Peak traced memory does not grow with the corpus: 4x the documents, the same peak."""

    def peak(num_docs, name):
        tracemalloc.start()
        tracemalloc.reset_peak()
        write_lda_corpus_npz(
            tmp_path / name, 0, num_docs, 5, 5000, alpha=0.1, eta=0.05, doc_length_mean=50, save_doc_topics=True
        )
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return top

    small = peak(8 * LDA_BLOCK_DOCS, "small.npz")
    large = peak(32 * LDA_BLOCK_DOCS, "large.npz")
    c = Corpus.load_npz(tmp_path / "large.npz")
    full = c.word_ids.nbytes + c.counts.nbytes + c.doc_ptr.nbytes
    assert large < 1.5 * small, (small, large)
    assert large < 0.5 * full, (large, full)


# ---------------------------------------------------------------------------- minibatching


def test_minibatcher_covers_each_document_once_per_epoch():
    c = _random_corpus(8, num_docs=23)
    mb = Minibatcher(c, 5, seed=jax.random.PRNGKey(4), num_epochs=3)
    assert mb.steps_per_epoch == 5
    got = list(mb.with_indices())
    assert len(got) == 15
    for e in range(3):
        idx = np.concatenate([i for i, _ in got[5 * e : 5 * e + 5]])
        assert np.sum(idx == -1) == 2  # 23 = 4 * 5 + 3: two padding rows in the last batch
        assert sorted(idx[idx >= 0].tolist()) == list(range(23))
        np.testing.assert_array_equal(idx[idx >= 0], mb.epoch_order(e))
    for idx, b in got:
        assert b.word_ids.shape[0] == 5 and b.word_ids.shape[1] in (8, 16)
        assert np.all(b.counts[idx == -1] == 0)
        for row in np.flatnonzero(idx >= 0):
            ids, cnt = c.document(idx[row])
            np.testing.assert_array_equal(b.counts[row, : ids.size], cnt)
    assert not np.array_equal(mb.epoch_order(0), mb.epoch_order(1))
    # reproducible, and resumable at an epoch
    again = [i for i, _ in Minibatcher(c, 5, seed=jax.random.PRNGKey(4), num_epochs=3).with_indices()]
    np.testing.assert_array_equal(np.stack(again), np.stack([i for i, _ in got]))
    resumed = [i for i, _ in Minibatcher(c, 5, jax.random.PRNGKey(4), num_epochs=1, start_epoch=2).with_indices()]
    np.testing.assert_array_equal(np.stack(resumed), np.stack([i for i, _ in got[10:]]))


def test_minibatches_drop_remainder_and_endless():
    c = _random_corpus(9, num_docs=23)
    mb = Minibatcher(c, 5, seed=0, num_epochs=2, drop_remainder=True)
    got = [i for i, _ in mb.with_indices()]
    assert len(got) == 8 and all(np.all(i >= 0) for i in got)
    assert len(set(np.concatenate(got[:4]).tolist())) == 20
    it = minibatches(c, 4, seed=0)  # endless
    assert all(next(it).counts.shape[0] == 4 for _ in range(20))
    with pytest.raises(ValueError, match="batch_size"):
        Minibatcher(c, 0, seed=0)
    with pytest.raises(ValueError, match="^seed must be an int or a JAX PRNG key, got None"):
        Minibatcher(c, 4, seed=None)
    with pytest.raises(ValueError, match=r"^corpus must be a vijax.data.Corpus .*got ndarray"):
        Minibatcher(np.zeros((3, 2)), 2, seed=0)  # an array met an AttributeError on num_docs


def test_epoch_batches_are_permutations_per_pass():
    """Each pass of floor(N / M) minibatches is a permutation of M * floor(N / M) distinct
    indices (the remainder skipped), a fresh one every pass, under jit with a traced step."""
    batch_fn, spp = epoch_batches(23, 5, jax.random.PRNGKey(3))
    assert spp == 4
    step = jax.jit(batch_fn)
    passes = [np.concatenate([np.asarray(step(None, p * spp + t)) for t in range(spp)]) for p in range(3)]
    for idx in passes:
        assert idx.shape == (20,) and len(set(idx.tolist())) == 20 and idx.min() >= 0 and idx.max() < 23
    assert not np.array_equal(passes[0], passes[1])
    np.testing.assert_array_equal(np.asarray(batch_fn(jax.random.PRNGKey(9), 5)), passes[1][5:10])  # key unused
    with pytest.raises(ValueError, match="batch_size"):
        epoch_batches(4, 5, jax.random.PRNGKey(3))  # a minibatch larger than the data
    with pytest.raises(ValueError, match="num_data"):
        epoch_batches(0, 1, jax.random.PRNGKey(3))


@pytest.mark.parametrize("n", [1, 2, 3, 5, 10, 17, 1000, 100_003])
def test_shuffled_positions_are_a_permutation_uniform_per_entry(n):
    """Every N (4^h the power of 4 cycle-walked down to N): the positions range(N) give each index once; over 4,000
    keys each of N <= 10 positions holds each index 4,000 / N times within 4.5 binomial sds (four rounds: 11 sds off
    at N = 5, its fixed points too likely); a position out of range is refused by name."""
    p = np.asarray(shuffled_positions(jax.random.PRNGKey(3), jnp.arange(n), n))
    assert sorted(p.tolist()) == list(range(n))
    if n <= 10:
        keys = jax.random.split(jax.random.PRNGKey(0), 4000)
        draws = np.asarray(jax.jit(jax.vmap(lambda k: shuffled_positions(k, jnp.arange(n), n)))(keys))
        counts = np.stack([(draws == i).sum(0) for i in range(n)])  # index x position
        expected = 4000 / n
        assert np.all(np.abs(counts - expected) <= 4.5 * np.sqrt(expected * (1 - 1 / n)) + 1e-9)
    with pytest.raises(ValueError, match="positions"):
        shuffled_positions(jax.random.PRNGKey(3), jnp.array([n]), n)


def test_stack_batches_for_scan():
    c = _random_corpus(10, num_docs=30, max_unique=12)
    batches = [c.batch([0, 1, 2]), c.batch([3, 4, 5], bucket=False), c.batch([6, 7, 8])]
    st = stack_batches(batches)
    longest = max(b.word_ids.shape[1] for b in batches)
    assert st.word_ids.shape == (3, 3, longest) and st.counts.shape == (3, 3, longest)
    for t, b in enumerate(batches):
        n = b.word_ids.shape[1]
        np.testing.assert_array_equal(st.counts[t, :, :n], b.counts)
        assert np.all(st.counts[t, :, n:] == 0)
    assert stack_batches(batches, length=64).word_ids.shape == (3, 3, 64)
    with pytest.raises(ValueError, match="same batch size"):
        stack_batches([c.batch([0]), c.batch([0, 1])])
    chunks = list(Minibatcher(c, 4, seed=1, num_epochs=1).chunks(3))
    assert [ch.word_ids.shape[:2] for ch in chunks] == [(3, 4), (3, 4), (2, 4)]

    # the stacked chunk drives a lax.scan (leading axis = step)
    def total(carry, batch):
        return carry + batch.counts.sum(), None

    out, _ = jax.lax.scan(total, np.float32(0), chunks[0])
    np.testing.assert_allclose(float(out), float(chunks[0].counts.sum()), rtol=1e-6)


def test_minibatcher_pads_every_batch_to_one_length():
    """``length="corpus"``: every batch (so every chunk of a run) has the bucket of the corpus's
    longest document as its length, and holds the same documents as without it; a length shorter
    than that document is refused, naming ``length``."""
    c = _random_corpus(12, num_docs=40)
    free = Minibatcher(c, 6, seed=3)
    one = Minibatcher(c, 6, seed=3, length="corpus")
    longest = bucket_length(int(c.doc_unique_words.max()))
    assert {one.host_batches(t0, 3).counts.shape for t0 in range(0, 30, 3)} == {(3, 6, longest)}
    for t in range(8):
        a, b = free.step_batch(t), one.step_batch(t)
        l = a.counts.shape[1]
        np.testing.assert_array_equal(b.counts[:, :l], a.counts)
        np.testing.assert_array_equal(b.word_ids[:, :l], a.word_ids)
        assert not b.counts[:, l:].any()
    with pytest.raises(ValueError, match="length"):
        Minibatcher(c, 6, seed=3, length=int(c.doc_unique_words.max()) - 1)


def test_host_batches_random_access():
    """``host_batches(t0, n)`` (the runner's interface) equals iteration, from any t0."""
    c = _random_corpus(11, num_docs=23)
    mb = Minibatcher(c, 5, seed=2, num_epochs=3)
    seq = list(mb)
    for t0, n in [(0, 4), (3, 6), (11, 4)]:
        st = mb.host_batches(t0, n)
        ref = stack_batches(seq[t0 : t0 + n])
        np.testing.assert_array_equal(st.word_ids, ref.word_ids)
        np.testing.assert_array_equal(st.counts, ref.counts)
    assert mb.host_batches(7, 2, length=64).counts.shape == (2, 5, 64)
    np.testing.assert_array_equal(mb.step_indices(5), mb.epoch_order(1)[:5])


def test_a_single_string_empty_vocabulary_and_bad_cut_offs_are_named():
    """A str is an iterable of characters: corpus_from_texts("hello world", ...) made 11 documents
    and build_vocabulary("a b c") a vocabulary of letters, without a word."""
    with pytest.raises(ValueError, match=r"^texts must be an iterable of documents \(str\), got a single str"):
        corpus_from_texts("hello world", ["hello", "world"])
    with pytest.raises(ValueError, match=r"^texts must be an iterable of documents"):
        build_vocabulary("a b c")
    with pytest.raises(ValueError, match=r"^vocabulary is empty"):
        corpus_from_texts(["hello world"], [])
    with pytest.raises(ValueError, match=r"^min_count must be an integer >= 1, got 0"):
        build_vocabulary(["a b"], min_count=0)
    with pytest.raises(ValueError, match=r"^text must be a str, got NoneType"):
        tokenize(None)
    assert corpus_from_texts(["hello world"], ["hello", "world"]).num_docs == 1


def test_a_batch_size_that_cannot_fit_in_memory_is_named_at_construction():
    """Minibatcher(corpus, 10**9) was accepted and met NumPy's MemoryError at the first batch (S
    rows are padded to the longest document); a batch larger than a small corpus still pads."""
    c = sample_lda_corpus(0, 20, 3, 30, doc_length_mean=10.0).corpus
    with pytest.raises(ValueError, match=r"^batch_size asks for an array of .* more than the .* bytes of memory"):
        Minibatcher(c, 10**12, seed=0)
    assert Minibatcher(c, 64, seed=0).step_batch(0).counts.shape[0] == 64


def test_lognormal_document_lengths_match_their_mean_and_spread(tmp_path):
    """doc_length_log_sd = sigma: each document's Poisson rate is doc_length_mean times a mean-1
    lognormal, so the lengths keep their mean (5 standard errors) and log N_d spreads with sd about
    sigma (Poisson noise adds var about 1/200 at these lengths); the streamed file holds the same
    documents; sigma = 0 is the plain Poisson."""
    mean, sigma, d = 200.0, 0.9, 3000
    s = sample_lda_corpus(0, d, 3, 40, doc_length_mean=mean, doc_length_log_sd=sigma)
    n = s.corpus.doc_lengths
    se = np.sqrt(mean + mean**2 * (np.exp(sigma**2) - 1)) / np.sqrt(d)
    assert abs(n.mean() - mean) < 5 * se
    assert abs(np.log(n[n > 0]).std() - sigma) < 0.05
    assert np.log(sample_lda_corpus(0, d, 3, 40, doc_length_mean=mean).corpus.doc_lengths).std() < 0.1
    w = write_lda_corpus_npz(tmp_path / "c.npz", 0, d, 3, 40, doc_length_mean=mean, doc_length_log_sd=sigma)
    assert np.array_equal(w.corpus.word_ids, s.corpus.word_ids) and np.array_equal(w.corpus.doc_ptr, s.corpus.doc_ptr)
    with pytest.raises(ValueError, match="doc_length_log_sd"):
        sample_lda_corpus(0, 5, 2, 10, doc_length_log_sd=-1.0)


def test_subset_of_a_range_is_a_view_that_stays_mapped(tmp_path):
    """``subset(range(a, b))`` (a process's ``process_shard``) equals ``subset(list(...))`` and shares a
    mapped corpus's pages instead of copying them; an out-of-range range raises as a list does."""
    c = _random_corpus(1)
    c.save_npz(tmp_path / "c.npz")
    mapped = Corpus.load_npz(tmp_path / "c.npz", mmap=True)
    for r in (range(3, 17), range(0, mapped.num_docs), range(5, 5)):
        view, copy = mapped.subset(r), c.subset(list(r))
        assert _docs_as_dicts(view) == _docs_as_dicts(copy) and view.vocab == c.vocab
        assert view.word_ids.size == 0 or np.shares_memory(view.word_ids, mapped.word_ids)
    assert mapped.subset(range(3, 17)).batch([0, 1]).checked_vocab_size() == c.vocab_size  # still a checked corpus
    with pytest.raises(IndexError, match="document indices"):
        mapped.subset(range(0, mapped.num_docs + 1))
