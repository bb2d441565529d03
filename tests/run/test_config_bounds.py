"""The allowed values of every registered experiment's config keys (``register_experiment(...,
bounds=..., memory=...)``), from the registry: every numeric key has a bound, every bound refuses a
value outside it at config load naming the key, and sizes beyond the machine's memory are refused
before anything is allocated. Config loading only: nothing is built or fitted."""

from __future__ import annotations

import math

import pytest

import vijax.run.experiments  # noqa: F401  (registers the built-in experiments)
from vijax.run import EXPERIMENTS, ConfigError, load_config, register_experiment
from vijax.run._bounds import check_memory, machine_memory, parse_bound
from vijax.run._config import config_keys

BUILTIN = sorted(n for n, s in EXPERIMENTS.items() if s.build.__module__.startswith("vijax.run.experiments"))

# keys whose default is null and whose values are not numbers (choices checked when the experiment is built)
NON_NUMERIC_NULL = {
    ("bbvi_logistic", "algorithm.gradient"),
    ("eight_schools", "algorithm.gradient"),
    ("mean_field_gaussian", "algorithm.gradient"),
}
# experiments whose sizes come from a data file: their memory is checked when the file is read
SIZES_FROM_FILES = {"ctm_corpus", "lda_corpus"}
# keys of a memory need whose large values cost nothing more: clipped to the data (a block of all of it, a
# chunk of all the draws, a width of the whole vocabulary), or unused by the default data set
CLIPPED = {
    ("gmm_em", "model.block_size"),
    ("vae", "algorithm.iw_chunk"),
    ("ctm_synthetic", "data.doc_length"),
    ("bbvi_logistic", "data.num_data"),  # the synthetic data's: the default is breast_cancer
    ("bbvi_logistic", "data.num_features"),
    ("vae", "data.dim"),  # the synthetic data's: the default is digits
    ("vae", "data.num_train"),
    ("vae", "data.num_test"),
    ("hmm", "model.dim"),  # Gaussian emissions': the default is categorical
}


def _leaves(prefix: str, node: dict):
    for key, value in node.items():
        path = f"{prefix}.{key}"
        if isinstance(value, dict):
            yield from _leaves(path, value)
        else:
            yield path, value


def _numeric(value) -> bool:
    if isinstance(value, (list, tuple)):
        return bool(value) and all(_numeric(v) for v in value)
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _nested(path: str, value) -> dict:
    """``{"algorithm": {"nuts": {"chains": 1}}}`` from ``"algorithm.nuts.chains"``."""
    out: dict = {}
    node = out
    *heads, last = path.split(".")
    for h in heads:
        node = node.setdefault(h, {})
    node[last] = value
    return out


def _lookup(config: dict, path: str):
    for part in path.split("."):
        config = config[part]
    return config


def _outside(bound, kind: str, defaults: dict):
    """A value just outside ``bound``."""
    if bound.low is None and bound.high is None:
        return math.nan
    low = _lookup(defaults, bound.low) if isinstance(bound.low, str) else bound.low
    high = _lookup(defaults, bound.high) if isinstance(bound.high, str) else bound.high
    if low is not None:
        bad = low - 1 if bound.include_low else low
    else:
        bad = high + 1 if bound.include_high else high
    return int(bad) if kind == "int" else float(bad)


def _cases():
    for name in BUILTIN:
        spec = EXPERIMENTS[name]
        for key, text in spec.bounds.items():
            yield pytest.param(name, key, text, id=f"{name}:{key}")


def test_every_numeric_key_has_a_bound():
    """A key added to an experiment without a bound fails here, with the keys to bound."""
    missing = []
    for name in BUILTIN:
        spec = EXPERIMENTS[name]
        for section in ("model", "data", "algorithm"):
            for path, default in _leaves(section, spec.defaults.get(section, {})):
                numeric = _numeric(default) or (default is None and (name, path) not in NON_NUMERIC_NULL)
                if numeric and path not in spec.bounds:
                    missing.append(f"{name}: {path} (default {default!r})")
    assert not missing, "give these keys a bound in register_experiment(..., bounds=...): " + "; ".join(missing)
    assert all(EXPERIMENTS[n].memory is not None for n in BUILTIN if n not in SIZES_FROM_FILES)


@pytest.mark.parametrize("name, key, text", list(_cases()))
def test_value_outside_its_bound_refused_at_load_naming_the_key(name, key, text):
    spec = EXPERIMENTS[name]
    defaults = {s: spec.defaults.get(s, {}) for s in ("model", "data", "algorithm")}
    bound = parse_bound(text)
    default = _lookup(defaults, key)
    sample = default[0] if bound.each and default else default
    kind = bound.kind or ("int" if isinstance(sample, int) else "number")
    bad = _outside(bound, kind, defaults)
    value, named = ([bad], f"{key}[0]") if bound.each else (bad, key)
    with pytest.raises(ConfigError) as e:
        load_config({"experiment": name, **_nested(key, value)})
    assert str(e.value).startswith(f"{named} must be "), str(e.value)
    if bound.nonempty:
        with pytest.raises(ConfigError, match=rf"^{key} must be a non-empty list, got \[\]"):
            load_config({"experiment": name, **_nested(key, [])})
    if bound.nullable:  # null is accepted, also where the default is a number
        assert _lookup(load_config({"experiment": name, **_nested(key, None)}), key) is None


def _memory_cases():
    for name in BUILTIN:
        spec = EXPERIMENTS[name]
        if spec.memory is None:
            continue
        config = load_config({"experiment": name})
        keys = {k for need in spec.memory(config) for k in need.keys}
        for key in sorted(keys):
            value = _lookup(config, key)
            if (
                isinstance(value, int)
                and not isinstance(value, bool)
                or (isinstance(value, list) and value and isinstance(value[0], int))
            ):
                yield pytest.param(name, key, id=f"{name}:{key}")


@pytest.mark.parametrize("name, key", list(_memory_cases()))
def test_sizes_beyond_the_machine_memory_refused_at_load_naming_the_key(name, key):
    """Every integer key that a memory need is made of, set to 10**13 (a list: its elements):
    ConfigError naming the key (its bound, or the memory it would take), except where a larger
    value costs nothing more (``CLIPPED``)."""
    default = _lookup(load_config({"experiment": name}), key)
    huge = [10**13] * len(default) if isinstance(default, list) else 10**13
    try:
        load_config({"experiment": name, **_nested(key, huge)})
    except ConfigError as e:
        assert str(e).startswith(key), str(e)
        assert (name, key) not in CLIPPED
    else:
        assert (name, key) in CLIPPED, f"{name}: {key} = 10**13 was accepted"


@pytest.mark.parametrize(
    "name, override, message",
    [
        ("gmm_simulation", "data.dim=100000000", "data.dim = 100000000 is too large: the data and its features"),
        (
            "gmm_simulation",
            "algorithm.num_restarts=100000000",
            "algorithm.num_restarts = 100000000 is too large: the restarts' responsibilities",
        ),
        ("gmm_simulation", "data.dim=1e8", "data.dim: expected int (like the default 2), got float 100000000.0"),
        ("dp_bernoulli", "data.dim=100000000", "data.dim = 100000000 is too large"),
        ("ard_regression", "data.dim=1000000", "data.dim = 1000000 is too large: the posterior's covariances"),
    ],
)
def test_reported_sizes_refused(name, override, message):
    with pytest.raises(ConfigError) as e:
        load_config({"experiment": name}, [override])
    assert str(e.value).startswith(message), str(e.value)
    assert "more than this machine's memory" in str(e.value) or "expected int" in str(e.value)


@pytest.mark.parametrize(
    "name, override, message",
    [
        ("gmm_simulation", "seed=18446744073709551616", "seed must be an integer in [0, 4294967295], got 1844"),
        ("gmm_simulation", "seed=-1", "seed must be an integer in [0, 4294967295], got -1"),
        ("gmm_simulation", "seed=4294967296", "seed must be an integer in [0, 4294967295], got 4294967296"),
        ("gmm_simulation", "seed=1.5", "seed: expected int, got float 1.5"),
        ("gmm_simulation", "run.num_steps=0", "run.num_steps must be an integer >= 1 in a config, got 0"),
        ("gmm_simulation", "data.num_test=0", "data.num_test must be an integer >= 1, got 0"),
        ("gmm_simulation", "data.num_clusters=0", "data.num_clusters must be an integer >= 1, got 0"),
        ("student_t_mixture", "data.num_clusters=0", "data.num_clusters must be an integer >= 1, got 0"),
        ("dp_mixture_truncation", "data.num_clusters=0", "data.num_clusters must be an integer >= 1, got 0"),
        ("plsa", "data.test_fraction=1.0", "data.test_fraction must be a finite number in (0, 1), got 1.0"),
        ("lda_synthetic", "data.test_fraction=1.0", "data.test_fraction must be a finite number in (0, 1), got 1.0"),
        ("lda_synthetic", "data.eval_batch=0", "data.eval_batch must be an integer >= 1, got 0"),
        ("plsa", "data.eval_batch=0", "data.eval_batch must be an integer >= 1, got 0"),
        ("ctm_synthetic", "data.eval_batch=0", "data.eval_batch must be an integer >= 1, got 0"),
        ("eight_schools", "algorithm.nuts.chains=1", "algorithm.nuts.chains must be an integer >= 2, got 1"),
        ("bbvi_logistic", "algorithm.nuts.chains=1", "algorithm.nuts.chains must be an integer >= 2, got 1"),
        ("hmm", "data.min_length=61", "data.min_length must be an integer in [1, data.length = 60], got 61"),
        ("eight_schools", "data.sigma=[1, 0]", "data.sigma[1] must be a finite number > 0, got 0"),
        (
            "lda_synthetic",
            "model.gibbs_burn_in=10",
            "model.gibbs_burn_in must be an integer in [0, model.gibbs_sweeps = 10)",
        ),
    ],
)
def test_reported_values_refused_at_load(name, override, message):
    with pytest.raises(ConfigError) as e:
        load_config({"experiment": name}, [override])
    assert str(e.value).startswith(message), str(e.value)


def test_bounds_shown_by_vijax_list():
    keys = {k.key: k for k in config_keys("gmm_simulation")}
    assert keys["data.num_test"].allowed == ">= 1"
    assert keys["algorithm.step_size"].allowed == "null or number in (0, 1]"
    assert keys["seed"].allowed.startswith("in [0, 4294967295]")
    assert keys["run.num_steps"].allowed == ">= 1 and < 2**31 - 1"


def test_bound_table_checked_at_registration():
    defaults = {"model": {"k": 3, "rate": 0.5, "widths": [2, 3]}, "data": {"n": None}}
    with pytest.raises(ValueError, match="'model.kk', a key its defaults do not have"):
        register_experiment("bad_bounds", defaults, bounds={"model.kk": ">= 1"})
    with pytest.raises(ValueError, match="bound 'between 1 and 2' is not one of"):
        register_experiment("bad_bounds", defaults, bounds={"model.k": "between 1 and 2"})
    with pytest.raises(ValueError, match="'data.n' defaults to null; its bound must start 'null or'"):
        register_experiment("bad_bounds", defaults, bounds={"data.n": ">= 1"})
    with pytest.raises(ValueError, match="say 'int' or 'number'"):
        register_experiment("bad_bounds", defaults, bounds={"data.n": "null or >= 1"})
    with pytest.raises(ValueError, match="model.k must be an integer >= 4, got 3"):  # the default outside
        register_experiment("bad_bounds", defaults, bounds={"model.k": ">= 4"})
    with pytest.raises(ValueError, match="refers to 'model.kk', not a key"):
        register_experiment("bad_bounds", defaults, bounds={"model.k": "in [1, model.kk]"})
    assert "bad_bounds" not in EXPERIMENTS


def test_check_memory_blames_the_key_furthest_above_its_default():
    from vijax.run._bounds import Need

    config = {"data": {"n": 1000, "d": 10**9}}
    defaults = {"data": {"n": 100, "d": 2}}
    needs = [Need("the data (data.n x data.d)", ("data.n", "data.d"), 8 * 1000 * 10**9)]
    with pytest.raises(ValueError, match=r"^data\.d = 1000000000 is too large: the data \(data\.n x data\.d\) would"):
        check_memory(needs, config, defaults)
    check_memory(needs, config, defaults, limit=10**13)  # fits
    assert machine_memory() > 2**28
