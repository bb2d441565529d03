"""Hostile config input: YAML read as written (YAML 1.2 numbers, no duplicate keys), bounded
aliases and nesting, config files that are not files or not UTF-8, and an output folder whose
``checkpoints`` is a file. Every refusal is a ConfigError naming the key or the path."""

from __future__ import annotations

import time

import pytest
import yaml

from tests.run.test_config import TOY
from vijax.run import ConfigError, load_config, main, parse_yaml
from vijax.run._config import MAX_DEPTH, dump_yaml


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
    """A "billion laughs" document (9 aliases per level, 9 levels: 9**9 values once expanded) and
    5,000 levels of nesting, as flow brackets and as block mappings, are refused in well under a
    second each (PyYAML alone: no end, or a RecursionError)."""
    bomb = 'a: &a ["x","x","x","x","x","x","x","x","x"]\n' + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]\n" for i in range(8)
    )
    deep_flow = "a: " + "[" * 5000 + "]" * 5000
    deep_block = "".join("  " * i + f"k{i}:\n" for i in range(5000))
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
