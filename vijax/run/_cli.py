"""The ``vijax`` command: ``vijax run [CONFIG] ...`` and ``vijax list``.

``vijax run`` loads and validates a config (the packaged ``default_config.yaml`` when none is
given), builds the registered experiment, drives it with ``vijax.run.run``, then writes into the
output folder:

- ``config.yaml``: the resolved config (defaults filled, overrides applied);
- ``checkpoints/``: the run's checkpoints (``--resume`` continues from the latest);
- whatever the experiment's ``report`` writes (its own plots);
- ``metrics.json``: config, the report's summary, final ELBO, steps, wall time, convergence,
  evaluations and the ELBO trace;
- ``elbo.png``: the ELBO trace and held-out metrics against steps;

and prints a short summary.
"""
from __future__ import annotations

import argparse
import copy
import importlib.resources
import json
import os
import sys
import tempfile
from typing import Optional, Sequence

import numpy as np
import yaml

from vijax.run._checkpoint import jsonable
from vijax.run._config import SECTIONS, ConfigError, load_config, parse_yaml
from vijax.run._experiment import EXPERIMENTS, import_builtin_experiments
from vijax.run._plots import plot_elbo
from vijax.run._runner import RunResult, run

DEFAULT_CONFIG = "default_config.yaml"


def default_config() -> dict:
    """The raw (unvalidated) config shipped as ``vijax/run/default_config.yaml``."""
    resource = importlib.resources.files("vijax.run").joinpath(DEFAULT_CONFIG)
    if not resource.is_file():
        raise ConfigError(f"no config given and the package ships no {DEFAULT_CONFIG}")
    raw = parse_yaml(resource.read_text(encoding="utf-8"))
    if not isinstance(raw, dict):
        raise ConfigError(f"{DEFAULT_CONFIG}: a config must be a mapping")
    return raw


def _write_atomic(path: str, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".tmp_")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def _final_elbo(result: RunResult, chunk_size: int) -> tuple[Optional[float], Optional[float]]:
    """The last step's ELBO and the mean over the last ``chunk_size`` steps."""
    elbo = np.asarray(result.trace.get("elbo", np.zeros((0,))), dtype=np.float64)
    if not len(elbo):
        return None, None
    elbo = elbo.reshape(len(elbo), -1).mean(axis=1)
    return jsonable(float(elbo[-1])), jsonable(float(np.mean(elbo[-chunk_size:])))


def set_cpu_devices(n: int) -> None:
    """``jax.config.update("jax_num_cpu_devices", n)``: possible only before JAX has started its
    backends (a notebook that already ran JAX code must restart); ConfigError naming
    ``run.cpu_devices`` otherwise."""
    import jax

    try:
        jax.config.update("jax_num_cpu_devices", int(n))
    except RuntimeError as e:
        if len(jax.devices("cpu")) == n:
            return  # already so
        raise ConfigError(f"run.cpu_devices: cannot set {n} CPU devices, JAX has already started with "
                          f"{len(jax.devices('cpu'))} ({e}); set it before any JAX computation") from None


def run_experiment(config: dict, *, resume: bool = False) -> tuple[RunResult, dict]:
    """Runs a resolved config (from ``load_config``) and writes its results folder.

    Args:
      config: a resolved config.
      resume: continue from the latest checkpoint in ``<output.dir>/checkpoints``.

    Returns:
      ``(result, metrics)``: the ``RunResult`` and the dict written to ``metrics.json``.
    """
    import jax  # deferred so that ``vijax list`` and argument errors stay fast

    name, out_dir, rc = config["experiment"], config["output"]["dir"], config["run"]
    if rc.get("x64"):
        jax.config.update("jax_enable_x64", True)  # before any array of the run is made
    if rc.get("cpu_devices") is not None:
        set_cpu_devices(rc["cpu_devices"])
    os.makedirs(out_dir, exist_ok=True)
    _write_atomic(os.path.join(out_dir, "config.yaml"),
                  yaml.safe_dump(jsonable(config), sort_keys=False))
    experiment = EXPERIMENTS[name].build(
        {s: copy.deepcopy(config[s]) for s in SECTIONS}, config["seed"])
    result = run(experiment.algorithm, jax.random.PRNGKey(config["seed"]),
                 batch_fn=experiment.batch_fn, host_batches=experiment.host_batches,
                 num_steps=rc["num_steps"],
                 init_state=experiment.init_state, chunk_size=rc["chunk_size"], tol=rc["tol"],
                 patience=rc["patience"], eval_fn=experiment.eval_fn,
                 eval_every=rc["eval_every"],
                 checkpoint_dir=os.path.join(out_dir, "checkpoints"),
                 checkpoint_every=rc["checkpoint_every"], resume=resume,
                 progress=rc["progress"])
    summary = experiment.report(result, out_dir) if experiment.report is not None else {}
    plot_elbo(result.trace, result.evals, os.path.join(out_dir, "elbo.png"), title=name)
    last, last_mean = _final_elbo(result, rc["chunk_size"])
    metrics = jsonable({
        "experiment": name,
        "config": config,
        "summary": summary or {},
        "final_elbo": last,
        "final_elbo_mean": last_mean,
        "num_steps": result.num_steps,
        "wall_time": result.wall_time,
        "converged": result.converged,
        "evals": result.evals,
        "elbo": result.trace.get("elbo", np.zeros((0,))),
    })
    _write_atomic(os.path.join(out_dir, "metrics.json"), json.dumps(metrics, indent=1))
    return result, metrics


def _format(v) -> str:
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def _print_summary(metrics: dict, out_dir: str, file=None) -> None:
    file = sys.stdout if file is None else file
    status = "converged" if metrics["converged"] else "stopped at num_steps"
    print(f"vijax: {metrics['experiment']}: {metrics['num_steps']} steps in "
          f"{metrics['wall_time']:.1f}s ({status})", file=file)
    chunk = metrics["config"]["run"]["chunk_size"]
    print(f"  final ELBO {_format(metrics['final_elbo'])} (mean of the last {chunk} steps: "
          f"{_format(metrics['final_elbo_mean'])})", file=file)
    if metrics["evals"]:
        last = {k: v for k, v in metrics["evals"][-1].items() if k not in ("wall_time",)}
        print("  last evaluation: " + ", ".join(f"{k}={_format(v)}" for k, v in last.items()),
              file=file)
    scalars = {k: v for k, v in metrics["summary"].items()
               if isinstance(v, (int, float, str, bool)) or v is None}
    if scalars:
        print("  summary: " + ", ".join(f"{k}={_format(v)}" for k, v in scalars.items()),
              file=file)
    print(f"  results in {out_dir}/ (metrics.json, elbo.png, config.yaml, checkpoints/)",
          file=file)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vijax", description="Variational inference in JAX.")
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run", help="run an experiment config (default: the embedded one)")
    p_run.add_argument("config", nargs="?", default=None,
                       help="a YAML config; without it, the packaged default_config.yaml")
    p_run.add_argument("--resume", action="store_true",
                       help="continue from the latest checkpoint in <out>/checkpoints")
    p_run.add_argument("--out", default=None, help="output folder (overrides output.dir)")
    p_run.add_argument("--set", dest="overrides", action="append", default=[],
                       metavar="KEY=VALUE", help="override a config value, e.g. model.K=7")
    p_run.add_argument("--no-progress", action="store_true", help="no progress bar")
    sub.add_parser("list", help="list the registered experiments")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the ``vijax`` command.

    Args:
      argv: the arguments (without the program name); ``sys.argv[1:]`` when None.

    Returns:
      The exit status: 0 on success, 2 for an invalid config.
    """
    args = _parser().parse_args(argv)
    import_builtin_experiments()
    if args.command == "list":
        if not EXPERIMENTS:
            print("no experiments registered")
        width = max((len(n) for n in EXPERIMENTS), default=0)
        for name in sorted(EXPERIMENTS):
            print(f"{name:<{width}}  {EXPERIMENTS[name].description}")
        return 0
    try:
        source = args.config if args.config is not None else default_config()
        config = load_config(source, args.overrides)
    except (ConfigError, OSError, yaml.YAMLError) as e:
        print(f"vijax: error: {e}", file=sys.stderr)
        return 2
    if args.out is not None:
        config["output"]["dir"] = args.out
    if args.no_progress:
        config["run"]["progress"] = False
    _, metrics = run_experiment(config, resume=args.resume)
    _print_summary(metrics, config["output"]["dir"])
    return 0


__all__ = ["default_config", "main", "run_experiment"]
