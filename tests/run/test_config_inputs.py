"""Hostile config input: YAML read as written (YAML 1.2 numbers, no duplicate keys), bounded
aliases and nesting, config files that are not files or not UTF-8, and an output folder whose
``checkpoints`` is a file. Every refusal is a ConfigError naming the key or the path."""

from __future__ import annotations

import time

import pytest
import yaml

from tests.run.test_config import TOY
from vijax.run import ConfigError, build_experiment, load_config, main, parse_yaml, run_experiment
from vijax.run._yaml import MAX_DEPTH, dump_yaml


@pytest.mark.parametrize(
    "text, expected",
    [
        ("a: 010", {"a": 10}),  # YAML 1.1: octal 8
        ("a: 1:30", {"a": "1:30"}),  # YAML 1.1: sexagesimal 90
        ("a: 1_000", {"a": "1_000"}),  # YAML 1.1: 1000
        ("a: 0b11", {"a": "0b11"}),  # YAML 1.1: 3
        ("a: yes", {"a": "yes"}),  # YAML 1.1: True
        ("a: off", {"a": "off"}),  # YAML 1.1: False
        ("a: 2001-01-01", {"a": "2001-01-01"}),  # YAML 1.1: a date
        ("a: 0o17", {"a": 15}),
        ("a: 0x1F", {"a": 31}),
        ("a: -12", {"a": -12}),
        ("a: 1e-3", {"a": 0.001}),
        ("a: .5", {"a": 0.5}),
        ("a: 1.", {"a": 1.0}),
        ("a: -.inf", {"a": float("-inf")}),
        ("a: [true, False, ~, null, NULL]", {"a": [True, False, None, None, None]}),
        ("a: !!float 3", {"a": 3.0}),
        ("<<: {a: 1}", {"<<": {"a": 1}}),  # no merge keys in YAML 1.2: an unknown key for the schema
    ],
)
def test_yaml_1_2_core_schema(text, expected):
    assert parse_yaml(text) == expected


@pytest.mark.parametrize(
    "text, message",
    [
        ("seed: 1\nseed: 2\n", "seed: given twice in c.yaml (lines 1 and 2); each key may appear once"),
        (
            "model:\n  dim: 1\ndata: {}\nmodel:\n  dim: 2\n",
            "model: given twice in c.yaml (lines 1 and 4); each key may appear once",
        ),
        ("model:\n  dim: 1\n  dim: 2\n", "model.dim: given twice in c.yaml (lines 2 and 3); each key may appear once"),
        ("a: [{b: 1, b: 2}]", "a[0].b: given twice in c.yaml (lines 1 and 1); each key may appear once"),
        ("a: 1\n1: 2\n01: 3\n", "1: given twice in c.yaml (lines 2 and 3)"),  # 01 and 1 are both the int 1
        ("? [1]\n: 2\n", "c.yaml: a key must be a plain value, got a list (line 1 of c.yaml)"),
        ("a: &x [*x]\n", "a[0]: refers to itself through an alias (line 1 of c.yaml)"),
        ("a: !!int 1_0\n", "c.yaml: not valid YAML: '1_0' is not a YAML 1.2 integer"),
        ("a: [1, 2\n", "c.yaml: not valid YAML: while parsing a flow sequence"),
    ],
)
def test_yaml_refusals_name_the_key(text, message):
    with pytest.raises(ConfigError) as e:
        parse_yaml(text, "c.yaml")
    assert str(e.value).startswith(message)


def test_alias_bomb_and_deep_nesting_refused_quickly():
    """A "billion laughs" document (9 aliases per level, 9 levels: 9**9 values once expanded),
    5,000 levels of flow brackets, 1,000 of block mappings (a 1 MiB file) and aliases nesting
    each other 120 levels deep are refused in under a second each (PyYAML alone: no end, or a
    RecursionError)."""
    bomb = 'a: &a ["x","x","x","x","x","x","x","x","x"]\n' + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]\n" for i in range(8)
    )
    deep_flow = "a: " + "[" * 5000 + "]" * 5000
    deep_block = "".join("  " * i + f"k{i}:\n" for i in range(1000))  # 1 MiB: the largest config file
    chained = "a0: &a0 [[[[1]]]]\n" + "".join(f"a{i}: &a{i} [[[[*a{i - 1}]]]]\n" for i in range(1, 30))
    cases = [
        (bomb, "c.yaml: its aliases expand to more than 1,000,000 values (line 6)"),
        (deep_flow, f"c.yaml: nested more than {MAX_DEPTH} levels deep (line 1)"),
        (deep_block, f"c.yaml: nested more than {MAX_DEPTH} levels deep (line {MAX_DEPTH + 1})"),
        (chained, f"c.yaml: nested more than {MAX_DEPTH} levels deep (line 16, aliases expanded)"),
    ]
    for text, message in cases:
        t0 = time.perf_counter()
        with pytest.raises(ConfigError) as e:
            parse_yaml(text, "c.yaml")
        assert time.perf_counter() - t0 < 1.0
        assert str(e.value).startswith(message)
    nested = parse_yaml("a: " + "[" * 40 + "1" + "]" * 40 + "\nb: &b [1]\nc: [*b, *b]")["a"]
    for _ in range(40):
        nested = nested[0]
    assert nested == 1


def test_dump_yaml_reads_back_the_same_under_yaml_1_1_and_1_2():
    """config.yaml is written so that both readers read what was written: strings that either
    schema reads as something else are quoted."""
    value = {"a": "010", "b": "0o10", "c": "yes", "d": 1e-6, "e": [1, 2.5, None, True], "f": "1:30", "g": "1e3"}
    value |= {"h": float("inf"), "i": "text", "j": "null", "k": "0x1F", "l": ".5", "m": "+1", "n": "2001-01-01"}
    text = dump_yaml(value)
    assert parse_yaml(text) == value
    assert yaml.safe_load(text) == value


def test_duplicate_key_in_a_config_file_and_in_a_set_value(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(f"experiment: {TOY}\nmodel:\n  dim: 4\nrun:\n  num_steps: 3\nmodel:\n  dim: 5\n")
    with pytest.raises(ConfigError, match=rf"^model: given twice in {path} \(lines 2 and 6\)"):
        load_config(path)
    with pytest.raises(ConfigError, match=r"^model\.dim: given twice in --set model=\{dim: 1, dim: 2\}"):
        load_config({"experiment": TOY}, ["model={dim: 1, dim: 2}"])


def test_leading_zero_and_sexagesimal_values_reach_the_schema(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(f"experiment: {TOY}\nseed: 010\nmodel:\n  dim: 1:30\n")
    with pytest.raises(ConfigError, match=r"^model\.dim: expected int \(like the default 3\), got str '1:30'"):
        load_config(path)
    assert load_config(path, ["model.dim=012"])["seed"] == 10
    assert load_config(path, ["model.dim=012"])["model"]["dim"] == 12


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: p.mkdir(), "{p}: is a folder, not a YAML config file"),
        (lambda p: None, "{p}: no such config file"),
        (lambda p: p.write_bytes(b"experiment: toy\n# caf\xe9\n"), "{p}: not UTF-8 text (byte 0xe9 on line 2)"),
        (lambda p: p.write_bytes(b"a: 1\n" + b" " * (1 << 20)), "{p}: larger than 1 MiB, not a config"),
    ],
    ids=["folder", "missing", "latin-1", "huge"],
)
def test_config_path_not_a_yaml_file(tmp_path, make, message):
    p = tmp_path / "c.yaml"
    make(p)
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert str(e.value).startswith(message.format(p=p))


def test_dev_zero_config_refused_without_reading_it_all():
    with pytest.raises(ConfigError, match=r"^/dev/zero: larger than 1 MiB, not a config"):
        load_config("/dev/zero")


def test_command_names_the_config_path(tmp_path, capsys):
    p = tmp_path / "c.yaml"
    p.write_bytes(b"\xff\xfe" + "experiment: toy".encode("utf-16-le"))
    assert main(["run", str(p)]) == 2
    assert f"vijax: error: {p}: not UTF-8 text (byte 0xff on line 1)" in capsys.readouterr().err
    assert main(["run", str(tmp_path)]) == 2
    assert f"vijax: error: {tmp_path}: is a folder, not a YAML config file" in capsys.readouterr().err


def test_checkpoints_path_that_is_a_file_refused_before_the_run(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "checkpoints").write_text("not a folder")
    config = tmp_path / "c.yaml"
    config.write_text(f"experiment: {TOY}\nrun: {{num_steps: 2}}\n")
    status = main(["run", str(config), "--out", str(out), "--no-progress", "--no-compile-cache"])
    assert status == 2
    err = capsys.readouterr().err
    assert f"vijax: error: output.dir (--out): {str(out / 'checkpoints')!r} is a file, not a folder" in err
    assert not (out / "metrics.json").exists()


def _tiny_ldac(tmp_path):
    path = tmp_path / "tiny.ldac"
    path.write_text("".join(f"2 {i % 5}:1 {(i + 1) % 5}:2\n" for i in range(12)))
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(f"w{i}\n" for i in range(5)))
    return path, vocab


def _lda_corpus(tmp_path, **data):
    cfg = load_config(
        {
            "experiment": "lda_corpus",
            "model": {"num_topics": 2},
            "algorithm": {"batch_size": 4},
            "data": data,
            "output": {"dir": str(tmp_path / "out")},
        }
    )
    return build_experiment(cfg)


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("path", "{tmp}", "data.path: '{tmp}' is a folder, not a data file"),
        ("path", "/dev/zero", "data.path: '/dev/zero' is not a regular file (a device or a pipe), not a data file"),
        ("path", "{tmp}/no.ldac", "data.path: '{tmp}/no.ldac' not found (directly, or under $VIJAX_SHARED_DATA"),
        ("vocab", "{tmp}/vocabb.txt", "data.vocab: '{tmp}/vocabb.txt' not found (directly, or under"),
        ("vocab", "wiki_bnpy/vocabb.txt", "data.vocab: 'wiki_bnpy/vocabb.txt' not found"),
        ("vocab", "{tmp}", "data.vocab: '{tmp}' is a folder, not a data file"),
    ],
)
def test_data_files_named_by_their_key(tmp_path, key, value, message):
    """A corpus or vocabulary path that is a folder, a device or absent is refused when the
    experiment is built, naming the key; a mistyped vocabulary is no longer ignored."""
    path, vocab = _tiny_ldac(tmp_path)
    data = {"path": str(path), "vocab": str(vocab), "test_fraction": 0.25}
    data[key] = value.format(tmp=tmp_path)
    with pytest.raises(ConfigError) as e:
        _lda_corpus(tmp_path, **data)
    assert str(e.value).startswith(message.format(tmp=tmp_path)), str(e.value)


def test_corpus_with_and_without_a_vocabulary_builds(tmp_path):
    path, vocab = _tiny_ldac(tmp_path)
    assert _lda_corpus(tmp_path, path=str(path), vocab=str(vocab), test_fraction=0.25).algorithm is not None
    assert _lda_corpus(tmp_path, path=str(path), vocab="", test_fraction=0.25).algorithm is not None
    with pytest.raises(ConfigError, match=r"^data\.test_fraction: 0\.01 of 12 documents leaves 12 for training and 0"):
        _lda_corpus(tmp_path, path=str(path), vocab="", test_fraction=0.01)


def test_ctm_and_lda_ssvi_vocabularies_named_by_their_key(tmp_path):
    path, _ = _tiny_ldac(tmp_path)
    ctm = {"experiment": "ctm_corpus", "data": {"path": str(path), "vocab": str(tmp_path / "v.txt")}}
    with pytest.raises(ConfigError, match=r"^data\.vocab: '.*v\.txt' not found"):
        build_experiment(load_config(ctm))
    ssvi = {
        "experiment": "lda_ssvi",
        "data": {"corpora": ["wiki_bnpy"], "wiki_path": str(path), "wiki_vocab": str(tmp_path / "v.txt")},
    }
    with pytest.raises(ConfigError, match=r"^data\.wiki_vocab: '.*v\.txt' not found"):
        build_experiment(load_config(ssvi))


@pytest.mark.parametrize(
    "experiment, content, message",
    [
        ("lda_corpus", "w0\n\nw1\n", r"^data\.vocab: '.*bad\.txt': blank line 2 inside the word list"),
        ("lda_corpus", b"\xff\xfe\n", r"^data\.vocab: .*bad\.txt, line 1: not UTF-8 text"),
        ("ctm_corpus", "w0\n\nw1\n", r"^data\.vocab: '.*bad\.txt': blank line 2 inside the word list"),
    ],
)
def test_a_malformed_vocabulary_is_named_by_its_key(tmp_path, experiment, content, message):
    """A vocabulary file that exists but is malformed was refused by the reader naming its argument
    ``vocab_path``, which no config key matches: the message blamed the experiment; it names
    ``data.vocab``."""
    path, _ = _tiny_ldac(tmp_path)
    bad = tmp_path / "bad.txt"
    bad.write_bytes(content) if isinstance(content, bytes) else bad.write_text(content)
    config = {"experiment": experiment, "data": {"path": str(path), "vocab": str(bad)}}
    with pytest.raises(ConfigError, match=message):
        build_experiment(load_config(config))


def test_truncated_nuts_reference_is_recomputed_with_a_warning(tmp_path):
    """A cached NUTS reference cut short (a run killed while writing, a full disk) is not an
    error after the fit: a warning names the file and the reference is computed again."""
    import numpy as np

    from vijax.run.experiments._posterior import _load, _save

    ref = {"mean": np.zeros(3), "sd": np.ones(3), "ess": np.ones(3), "rhat": np.ones(3), "mcse": np.ones(3)}
    ref |= {"divergences": 0, "draws": 100, "wall_time": 1.0}
    path = str(tmp_path / "nuts_reference.npz")
    _save(path, "abc", ref)
    assert _load(path, "abc")["draws"] == 100 and _load(path, "other") is None
    data = open(path, "rb").read()
    open(path, "wb").write(data[: len(data) // 2])
    with pytest.warns(UserWarning, match=r"nuts_reference\.npz: the cached NUTS reference cannot be read"):
        assert _load(path, "abc") is None


def test_set_experiment_without_a_config_starts_from_that_experiments_defaults(tmp_path, capsys):
    """`vijax run --set experiment=X` (no config file) uses X's defaults, not the embedded
    default's algorithm keys (which X does not have): the config loads, and the run stops at the
    output folder (a file here), before anything is built."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    status = main(["run", "--set", f"experiment={TOY}", "--out", str(blocker), "--no-progress", "--no-compile-cache"])
    assert status == 2
    assert capsys.readouterr().err.startswith(
        f"vijax: error: output.dir (--out): {str(blocker)!r} is a file, not a folder"
    )


def test_a_missing_data_file_is_refused_before_anything_is_written(tmp_path):
    """``run_experiment`` builds the experiment (its data read and checked) before it writes config.yaml: a
    missing corpus leaves the output folder without results."""
    cfg = load_config(
        {
            "experiment": "lda_corpus",
            "data": {"path": str(tmp_path / "no.ldac"), "vocab": ""},
            "output": {"dir": str(tmp_path / "out")},
        }
    )
    with pytest.raises(ConfigError, match=r"^data\.path: .* not found"):
        run_experiment(cfg)
    assert not (tmp_path / "out" / "config.yaml").exists()
