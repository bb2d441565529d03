"""Config loading and validation against a toy registered experiment."""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.run.test_runner import toy_algorithm, toy_batch_fn
from vijax.run import EXPERIMENTS, ConfigError, Experiment, load_config, register_experiment

TOY = "toy_quadratic"
TOY_DEFAULTS = {
    "model": {"dim": 3, "curvature": 1.0, "offset": -10.0},
    "data": {"center": 1.5, "noise": 0.0},
    "algorithm": {"lr": 0.1, "noise": 0.0, "schedule": {"kappa": 0.7, "tau": 1.0}, "sizes": (2, 3), "label": None},
}


@register_experiment(TOY, TOY_DEFAULTS, description="toy quadratic for the runner tests")
def build_toy(sections: dict, seed: int) -> Experiment:
    model, data, alg = sections["model"], sections["data"], sections["algorithm"]
    mu = jnp.full((model["dim"],), data["center"])

    def eval_fn(state):
        return {"distance": jnp.linalg.norm(state.x - mu)}

    def report(result, out_dir, baselines):
        with open(os.path.join(out_dir, "toy.txt"), "w") as f:
            f.write(f"{np.asarray(result.state.x).tolist()}\n")
        return {"distance": float(jnp.linalg.norm(result.state.x - mu)), "seed": seed}

    algorithm = toy_algorithm(
        lr=alg["lr"], noise=alg["noise"], curvature=model["curvature"], offset=model["offset"], dim=model["dim"]
    )
    return Experiment(
        algorithm=algorithm,
        init_state=algorithm.init,
        batch_fn=toy_batch_fn(mu, data["noise"]),
        eval_fn=eval_fn,
        report=report,
    )


def test_defaults_filled():
    cfg = load_config({"experiment": TOY})
    assert list(cfg) == ["experiment", "seed", "model", "data", "algorithm", "run", "output"]
    assert cfg["seed"] == 0
    assert cfg["model"] == TOY_DEFAULTS["model"] and cfg["algorithm"] == TOY_DEFAULTS["algorithm"]
    assert cfg["run"] == {
        "num_steps": 1000,
        "chunk_size": 100,
        "tol": None,
        "patience": 3,
        "min_steps": 0,
        "eval_every": None,
        "checkpoint_every": None,
        "progress": True,
        "max_rejected_share": 0.5,
        "x64": False,
        "cpu_devices": None,
        "compile_cache": None,  # the caller's default: the vijax command turns it on
        "fast_cpu_compile": True,
        "prefetch": 2,
        "check_values": True,
    }
    assert cfg["output"] == {"dir": f"results/{TOY}"}
    assert EXPERIMENTS[TOY].description.startswith("toy")


def test_yaml_file_overrides_and_conversions(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(f"""
experiment: {TOY}
seed: 5
model:
  curvature: 2        # int accepted for float
algorithm:
  schedule: {{kappa: 0.6}}
  sizes: [4, 5]
  label: anything
run:
  tol: 1e-4           # dot-less scientific notation is a float
  num_steps: 50
""")
    cfg = load_config(
        str(path), ["model.dim=7", "algorithm.schedule.tau=3", "run.eval_every=10", "output.dir=out/x", "seed=9"]
    )
    assert cfg["seed"] == 9
    assert cfg["model"] == {"dim": 7, "curvature": 2.0, "offset": -10.0}
    assert isinstance(cfg["model"]["curvature"], float)
    assert cfg["algorithm"]["schedule"] == {"kappa": 0.6, "tau": 3.0}
    assert cfg["algorithm"]["sizes"] == (4, 5) and cfg["algorithm"]["label"] == "anything"
    assert cfg["run"]["tol"] == 1e-4 and cfg["run"]["num_steps"] == 50
    assert cfg["run"]["eval_every"] == 10 and cfg["output"]["dir"] == "out/x"


@pytest.mark.parametrize(
    "config, overrides, pattern",
    [
        ({"experiment": TOY, "model": {"nmae": 1}}, (), r"'model\.nmae'.*allowed.*'curvature'"),
        ({"experiment": TOY}, ["algorithm.schedule.kapa=1"], r"'algorithm\.schedule\.kapa'.*'kappa'"),
        ({"experiment": TOY}, ["data.nosie=0.1"], r"'data\.nosie'"),
        ({"experiment": TOY, "model": {"dim": "three"}}, (), r"model\.dim: expected int"),
        ({"experiment": TOY, "model": {"dim": 3.0}}, (), r"model\.dim: expected int"),
        ({"experiment": TOY, "model": {"curvature": True}}, (), r"model\.curvature: expected float"),
        ({"experiment": TOY, "algorithm": {"schedule": 3}}, (), r"algorithm\.schedule: expected a"),
        ({"experiment": TOY, "algorithm": {"sizes": 3}}, (), r"algorithm\.sizes: expected tuple"),
        ({"experiment": TOY, "modle": {}}, (), r"top-level config key 'modle'"),
        ({"experiment": "nope"}, (), r"unknown experiment 'nope'.*toy_quadratic"),
        ({"seed": 1}, (), r"experiment: expected the name"),
        ({"experiment": TOY, "seed": "one"}, (), r"seed: expected int"),
        ({"experiment": TOY}, ["run.num_step=5"], r"'run\.num_step'.*'num_steps'"),
        ({"experiment": TOY}, ["run.chunk_size=0"], r"run\.chunk_size: must be >= 1"),
        ({"experiment": TOY}, ["run.tol=abc"], r"run\.tol: expected float or null"),
        ({"experiment": TOY}, ["run.progress=1"], r"run\.progress: expected bool"),
        ({"experiment": TOY}, ["output.folder=x"], r"'output\.folder'"),
        ({"experiment": TOY}, ["model.dim"], r"key\.path=value"),
        ({"experiment": TOY, "model": {"dim": 3}}, ["model.dim.x=1"], r"model\.dim is not a mapping"),
        ({"experiment": TOY}, ["model.dim.x=1"], r"model\.dim: expected int"),
    ],
)
def test_validation_errors_name_the_key(config, overrides, pattern):
    with pytest.raises(ValueError, match=pattern):
        load_config(config, overrides)


def test_config_error_is_value_error_and_input_untouched():
    raw = {"experiment": TOY, "model": {"dim": 4}}
    load_config(raw, ["model.dim=5"])
    assert raw == {"experiment": TOY, "model": {"dim": 4}}
    assert issubclass(ConfigError, ValueError)


def test_built_experiment_runs():
    cfg = load_config({"experiment": TOY}, ["run.num_steps=40", "run.chunk_size=20"])
    exp = EXPERIMENTS[TOY].build({s: cfg[s] for s in ("model", "data", "algorithm")}, 0)
    from vijax.run import run

    res = run(
        exp.algorithm,
        jax.random.PRNGKey(0),
        batch_fn=exp.batch_fn,
        num_steps=40,
        init_state=exp.init_state,
        chunk_size=20,
        eval_fn=exp.eval_fn,
        progress=False,
    )
    assert res.num_steps == 40 and res.evals[-1]["distance"] < 0.1


def test_an_experiments_description_is_its_builders_docstring_unless_given():
    """``vijax list`` shows a description per experiment: the first paragraph of the builder's
    docstring on one line, or the ``description=`` given (one builder under several names)."""
    from vijax.run import import_builtin_experiments

    import_builtin_experiments()
    for name, spec in EXPERIMENTS.items():
        assert spec.description and "\n" not in spec.description, name

    def build(sections, seed):
        """A first paragraph
        on two lines.

        Details not shown."""

    register_experiment("_doc_test", {"model": {}})(build)
    register_experiment("_doc_test_given", {"model": {}}, description="given")(build)
    try:
        assert EXPERIMENTS["_doc_test"].description == "A first paragraph on two lines."
        assert EXPERIMENTS["_doc_test_given"].description == "given"
    finally:
        del EXPERIMENTS["_doc_test"], EXPERIMENTS["_doc_test_given"]
