"""`vijax run --help` and `vijax list` describe every config key and experiment from the schema,
and the ranges they state are the ones the run settings' validator enforces."""

import re

import pytest

from vijax.run import DEFAULT_EXPERIMENT, EXPERIMENTS, import_builtin_experiments, main
from vijax.run._config import RUN_SETTINGS, _check_run, config_keys, run_setting_schema


def _help(capsys) -> str:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    return capsys.readouterr().out


def _flat(prefix, defaults):
    for key, value in defaults.items():
        path = f"{prefix}.{key}"
        yield from (_flat(path, value) if isinstance(value, dict) else [path])


def test_run_help_lists_every_common_key_with_type_default_and_range(capsys):
    out = _help(capsys)
    for name in RUN_SETTINGS:
        kind, default, allowed = run_setting_schema(name)
        assert re.search(
            rf"^  run\.{name} +{re.escape(kind)}, default {re.escape(repr(default))}; "
            rf"{re.escape(allowed)}$",
            out,
            re.M,
        ), name
    for key in ("experiment", "seed", "output.dir"):
        assert re.search(rf"^  {re.escape(key)} ", out, re.M), key
    assert "vijax list EXPERIMENT" in out


def test_list_one_line_per_experiment_and_every_key_of_each(capsys):
    import_builtin_experiments()
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    listing, _, shipped = out.partition("\n\nconfigs shipped with vijax")
    lines = listing.splitlines()
    assert sorted(line.split()[0] for line in lines) == sorted(EXPERIMENTS)
    # one default, the command's; the shipped configs named after the experiments
    assert [line.split()[0] for line in lines if "[the default of `vijax run`]" in line] == [DEFAULT_EXPERIMENT]
    assert sum("(the default)" in line for line in lines) == 0
    assert "gmm_simulation" in shipped and "dp_bernoulli" in shipped
    # other test modules register toy experiments (no description) in the same process
    builtin = {n: s for n, s in EXPERIMENTS.items() if getattr(s.build, "__module__", "").startswith("vijax.")}
    assert len(builtin) >= 20
    for name, spec in builtin.items():
        assert spec.description and any(line.split()[0] == name and spec.description in line for line in lines)
        assert main(["list", name]) == 0
        out = capsys.readouterr().out
        keys = [k for section in ("model", "data", "algorithm") for k in _flat(section, spec.defaults.get(section, {}))]
        keys += [f"run.{k}" for k in RUN_SETTINGS] + ["experiment", "seed", "output.dir"]
        for key in keys:
            assert re.search(rf"^  {re.escape(key)} +\S.*, default .*; .+$", out, re.M), (name, key)
        # an experiment's own run defaults replace RunConfig's
        for key, value in spec.defaults.get("run", {}).items():
            assert re.search(rf"^  run\.{key} +.*, default {re.escape(repr(value))};", out, re.M), (name, key)


def test_list_unknown_experiment_is_an_error_naming_it(capsys):
    import_builtin_experiments()
    assert main(["list", "no_such_experiment"]) == 2
    assert "no_such_experiment" in capsys.readouterr().err


def _accepts(name, value) -> bool:
    """Whether a config's ``run`` section (what the help text describes) accepts ``value``."""
    try:
        _check_run({name: value}, {})
        return True
    except ValueError:
        return False


@pytest.mark.parametrize("name", RUN_SETTINGS)
def test_stated_run_ranges_are_enforced(name):
    """Each bound in the help text is probed at the bound (accepted) and just past it (refused):
    ints by 1, floats by 1e-9 relative; "null" in the type exactly when None is accepted; a numeric
    setting without a stated upper (lower) bound accepts 10**6 (-10**6), so no bound goes unstated."""
    kind, default, allowed = run_setting_schema(name)
    assert _accepts(name, default)
    assert _accepts(name, None) == ("null" in kind)
    is_int = kind.startswith("int")
    for bound in allowed.split(" and "):
        m = re.fullmatch(r"(>=|<=|<|>) (.+)", bound)
        if m is None:
            assert bound in ("any", "true, false or a folder"), bound
            continue
        op, value = m.group(1), eval(m.group(2), {})  # "2**31 - 1" and plain numbers
        eps = 1 if is_int else 1e-9 * max(1.0, abs(value))
        cast = int if is_int else float
        inside = {">=": value, "<=": value, "<": value - eps, ">": value + eps}[op]
        outside = {">=": value - eps, "<=": value + eps, "<": value, ">": value}[op]
        assert _accepts(name, cast(inside)), (name, bound, inside)
        assert not _accepts(name, cast(outside)), (name, bound, outside)
    if kind.split(" ")[0] in ("int", "float"):
        cast = int if is_int else float
        if not re.search(r"(^| )<", allowed):
            assert _accepts(name, cast(10**6)), (name, "no upper bound stated")
        if not re.search(r"(^| )>", allowed):
            assert _accepts(name, cast(-(10**6))), (name, "no lower bound stated")


def test_config_keys_names_an_unknown_experiment():
    with pytest.raises(ValueError, match="experiment: unknown experiment 'nope'"):
        config_keys("nope")
