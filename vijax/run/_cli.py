"""The ``vijax`` command: ``vijax run [CONFIG]``, ``vijax list [EXPERIMENT]`` and ``vijax prepare``.

``vijax run`` validates a config, runs the experiment and its baselines and writes ``config.yaml``,
``checkpoints/``, the report, ``metrics.json`` and ``elbo.png``. Exit status: 0 for a finished run with a
finite ELBO; 2 when it could not start (an invalid config, an unwritable output folder, a refused resume,
a missing extra); 3 when its result is not to be trusted (a non-finite last ELBO, or more than
``run.max_rejected_share`` of the updates rejected).
"""

from __future__ import annotations

import argparse
import copy
import importlib
import json
import os
import sys
import uuid
from typing import Optional, Sequence

import numpy as np

from vijax._validate import ArgumentError, EXTRA_MODULES, require

from ._checkpoint import CheckpointError, jsonable
from ._config import (
    SECTIONS,
    ConfigError,
    config_fingerprint,
    config_keys,
    flatten_config,
    load_config,
    resolve_config,
    shipped_configs,
)
from ._experiment import EXPERIMENTS, Experiment
from ._health import applied_steps, psis_note, run_health
from ._lock import hold_folder
from ._plots import plot_elbo, plots_missing
from ._runner import RunConfig, RunResult, run
from ._yaml import dump_yaml

EXIT_OK, EXIT_CANNOT_START, EXIT_UNTRUSTED = 0, 2, 3
# the modules of the extras (and funsor, of the numpyro extra): an experiment that cannot start without one
# raises an ImportError whose name is the module and whose message names the extra
OPTIONAL_MODULES = (*EXTRA_MODULES.values(), "funsor")
DEFAULT_EXPERIMENT = "dp_bernoulli"


def import_builtin_experiments() -> None:
    """Imports ``vijax.run.experiments``, whose modules register the built-in experiments."""
    importlib.import_module("vijax.run.experiments")


def experiment_extras(config: dict) -> dict[str, str]:
    """``{extra: what needs it}`` of a resolved config: what its experiment declares (``build.extras``,
    a function of the config's sections; see ``vijax/run/experiments/_common.py::needs``)."""
    table = getattr(EXPERIMENTS[config["experiment"]].build, "extras", None)
    return dict(table(config)) if table is not None else {}


def check_extras(config: dict) -> None:
    """Imports the module of each extra the config's experiment needs: an ImportError naming the
    first missing one's ``pip install`` line, before any work."""
    for extra, why in experiment_extras(config).items():
        require(EXTRA_MODULES[extra], extra, f"{config['experiment']} ({why})")


def default_config() -> dict:
    """The embedded default config of ``vijax run``: ``DEFAULT_EXPERIMENT``, shortened (as ``configs/dp_bernoulli.yaml``)."""
    return {
        "experiment": DEFAULT_EXPERIMENT,
        "algorithm": {"gibbs_burn_in": 50, "kl_samples": 5000, "eval_kl_samples": 5000},
        "run": {"num_steps": 100, "chunk_size": 50, "eval_every": 50, "checkpoint_every": None},
    }


def _write_atomic(path: str, text: str) -> None:
    tmp = os.path.join(
        os.path.dirname(path) or ".", f".tmp_{uuid.uuid4().hex}"
    )  # the umask's mode, as any tool's output
    with open(tmp, "x", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def _final_elbo(result: RunResult, chunk_size: int) -> tuple[Optional[float], Optional[float]]:
    """The ELBO of the last applied step and the mean over the applied ones among the last ``chunk_size``."""
    elbo = np.asarray(result.trace.get("elbo", np.zeros((0,))), dtype=np.float64)
    applied, _ = applied_steps(result.trace)
    if not len(elbo) or not applied.any():
        return None, None
    elbo = elbo.reshape(len(elbo), -1).mean(axis=1)
    tail = elbo[-chunk_size:][applied[-chunk_size:]]
    return jsonable(float(elbo[applied][-1])), jsonable(float(np.mean(tail)) if tail.size else None)


def _blame(error: Exception, config: dict) -> str:
    """A builder's error message prefixed with the config key it is about: for an ``ArgumentError``, the key whose
    last part is (or holds as a word) its argument, its value deciding between several."""
    message = str(error)
    if message.startswith(("model.", "data.", "algorithm.", "run.", "output.")):
        return message  # already names its key
    scores = {}
    if isinstance(error, ArgumentError):
        for key, v in flatten_config({s: config.get(s) or {} for s in SECTIONS}).items():
            last = key.rsplit(".", 1)[-1]
            score = 4 if error.argument == last else 2 if error.argument in last.split("_") else 0
            if score:
                try:  # the value decides between several
                    score += error.has_value and bool(v == error.value)
                except Exception:  # noqa: BLE001 -- arrays of different shapes, ...
                    pass
                scores[key] = score
    best = [k for k, v in scores.items() if v == max(scores.values())]
    if len(best) == 1:
        return f"{best[0]}: {message}"
    return f"invalid config for experiment {config['experiment']!r}: {message}"


def _check_checkpoint_folder(path: str) -> None:
    """ConfigError naming ``output.dir`` when ``path``, a checkpoint folder of the run, is a file."""
    if os.path.lexists(path) and not os.path.isdir(path):
        raise ConfigError(
            f"output.dir (--out): {path!r} is a file, not a folder of the run's checkpoints; "
            "move it away or choose another output folder"
        )


def build_experiment(config: dict) -> Experiment:
    """The ``Experiment`` of a resolved config, as ``vijax run`` builds it (apply the process settings first).

    Raises:
      ConfigError: the builder's ValueError or FileNotFoundError, naming its key where the error tells which.
    """
    sections = {s: copy.deepcopy(config[s]) for s in SECTIONS} | {"run": RunConfig(**config["run"]).as_dict()}
    try:
        return EXPERIMENTS[config["experiment"]].build(sections, config["seed"])
    except ConfigError:
        raise
    except (ValueError, FileNotFoundError) as e:
        raise ConfigError(_blame(e, config)) from e


def run_experiment(config: dict, *, resume: bool = False, allow_changes: bool = False) -> tuple[RunResult, dict]:
    """Runs a resolved config (from ``load_config``) and writes its results folder.

    Args:
      config: a resolved config.
      resume: continue from the latest checkpoints in ``<output.dir>/checkpoints``.
      allow_changes: resume despite checkpoints written with another config (e.g. a larger ``run.num_steps``).

    Returns:
      ``(result, metrics)``: the experiment's own ``RunResult`` and the dict written to ``metrics.json``.

    Raises:
      ConfigError: an invalid value (naming its key), or an output folder that cannot be written or is held.
      CheckpointError: a resume refused (``ConfigChangedError``) or impossible (no intact checkpoint).
    """
    import jax  # deferred so that ``vijax list`` and argument errors stay fast

    name, out_dir = config["experiment"], config["output"]["dir"]
    with hold_folder(out_dir, "output.dir (--out)", error=ConfigError):
        rc = RunConfig(**config["run"])
        try:
            rc.apply_process_settings()  # before any array of the run is made
        except ValueError as e:
            raise ConfigError(str(e)) from None
        checkpoints = os.path.join(out_dir, "checkpoints")
        _check_checkpoint_folder(checkpoints)
        experiment = build_experiment(config)  # its data read and checked before anything is written
        try:
            _write_atomic(os.path.join(out_dir, "config.yaml"), dump_yaml(jsonable(config)))
        except OSError as e:
            raise ConfigError(
                f"output.dir (--out): cannot write the output folder {out_dir!r}: {e.strerror or e}"
            ) from None
        fingerprint = config_fingerprint(config)
        for b in experiment.baselines:
            _check_checkpoint_folder(os.path.join(checkpoints, b.name))

        common = {"resume": resume, "fingerprint": fingerprint, "allow_changes": allow_changes}

        def run_one(spec, rc, seed, folder):  # the experiment's own run, or a Baseline's
            inputs = {k: getattr(spec, k) for k in ("batch_fn", "host_batches", "init_state", "eval_fn")}
            return run(spec.algorithm, jax.random.PRNGKey(seed), checkpoint_dir=folder, config=rc, **inputs, **common)

        result = run_one(experiment, rc, config["seed"], checkpoints)
        baselines = {}
        for b in experiment.baselines:  # in order, each with its own checkpoint folder and settings
            if b.name in baselines:
                raise ValueError(f"baseline names must be unique; {b.name!r} is repeated")
            brc = rc.replace(**b.settings)
            seed = config["seed"] if b.seed is None else b.seed
            baselines[b.name] = r = run_one(b, brc, seed, os.path.join(checkpoints, b.name))
            if brc.progress:
                print(
                    f"vijax: baseline {b.name}: {r.num_steps} steps in {r.wall_time:.1f}s", file=sys.stderr, flush=True
                )
        skipped = plots_missing()  # None, or the line that says the plots are skipped (no matplotlib)
        if skipped is not None:
            print(f"vijax: {skipped}", file=sys.stderr, flush=True)
        try:
            summary = experiment.report(result, out_dir, baselines) if experiment.report is not None else {}
        except ImportError as e:  # a report that draws without `optional_plot` (vijax/run/experiments/_plotting.py)
            if skipped is None or (e.name or "").split(".")[0] != "matplotlib":
                raise
            print(f"vijax: {name}: its report needs matplotlib, so its summary is left out too", file=sys.stderr)
            summary = {}
        if skipped is None:
            plot_elbo(result.trace, result.evals, os.path.join(out_dir, "elbo.png"), title=name)
        last, last_mean = _final_elbo(result, rc.chunk_size)
        health = {b: _health_entry(r, rc.max_rejected_share) for b, r in {"run": result, **baselines}.items()}
        metrics = jsonable(
            {
                "experiment": name,
                "config": config,
                "summary": summary or {},
                "final_elbo": last,
                "final_elbo_mean": last_mean,
                "num_steps": result.num_steps,
                "wall_time": result.wall_time,
                "converged": result.converged,
                "health": health,
                "evals": result.evals,
                "elbo": result.trace.get("elbo", np.zeros((0,))),
            }
        )
        _write_atomic(os.path.join(out_dir, "metrics.json"), json.dumps(metrics, indent=1))
    return result, metrics


def _health_entry(result: RunResult, max_rejected_share: float) -> dict:
    h = run_health(result.trace)
    return {
        "nonfinite_elbo_steps": int(h.nonfinite_steps.size),
        "first_nonfinite_step": int(h.nonfinite_steps[0]) if h.nonfinite_steps.size else None,
        "rejected_steps": int(h.rejected_steps.size),
        "rejected_share": h.rejected_share,
        "first_rejected_step": int(h.rejected_steps[0]) if h.rejected_steps.size else None,
        "final_elbo_finite": h.final_elbo_finite,
        "problems": h.problems(max_rejected_share),
    }


def _print_summary(metrics: dict, out_dir: str) -> None:
    def fmt(v) -> str:
        return f"{v:.6g}" if isinstance(v, float) else str(v)

    status = "converged" if metrics["converged"] else "stopped at num_steps"
    print(f"vijax: {metrics['experiment']}: {metrics['num_steps']} steps in {metrics['wall_time']:.1f}s ({status})")
    chunk = metrics["config"]["run"]["chunk_size"]
    print(
        f"  final ELBO {fmt(metrics['final_elbo'])} (mean of the last {chunk} steps: {fmt(metrics['final_elbo_mean'])})"
    )
    if metrics["evals"]:
        last = {k: v for k, v in metrics["evals"][-1].items() if k != "wall_time"}
        print("  last evaluation: " + ", ".join(f"{k}={fmt(v)}" for k, v in last.items()))
    note = psis_note(metrics["evals"])
    if note is not None:
        print("  " + note)
    scalars = {k: v for k, v in metrics["summary"].items() if isinstance(v, (int, float, str, bool)) or v is None}
    if scalars:
        print("  summary: " + ", ".join(f"{k}={fmt(v)}" for k, v in scalars.items()))
    for name, entry in metrics.get("health", {}).items():
        for line in entry["problems"]:
            print(f"  {'' if name == 'run' else 'baseline ' + name + ': '}{line}")
    plots = plots_missing() is None
    files = f"metrics.json, {'elbo.png, ' if plots else ''}config.yaml, checkpoints/"
    print(f"  results in {out_dir}/ ({files}){'' if plots else '; plots skipped: no matplotlib'}")


def _keys_text(experiment: Optional[str] = None) -> str:
    """The config keys of the schema, one per line: key, type, default, allowed range."""
    keys = config_keys(experiment)
    width = max(len(k.key) for k in keys)
    return "\n".join(f"  {k.key:<{width}}  {k.type}, default {k.default!r}; {k.allowed}" for k in keys)


def _parser() -> argparse.ArgumentParser:
    from vijax import __version__  # deferred: vijax/__init__ imports this package

    parser = argparse.ArgumentParser(prog="vijax", description="Variational inference in JAX.")
    parser.add_argument("--version", action="version", version=f"vijax {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser(
        "run",
        help="run an experiment config (default: the embedded one)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="config keys (type, default, allowed range); a config may set any of them, --set KEY=VALUE too:\n"
        + _keys_text()
        + "\n\nThe model, data and algorithm keys depend on the experiment: "
        "`vijax list EXPERIMENT` lists them with their types and defaults.",
    )
    p_run.add_argument(
        "config",
        nargs="?",
        help=f"a YAML config's path or a shipped config's name (`vijax list`); default: {DEFAULT_EXPERIMENT}'s",
    )
    p_run.add_argument(
        "--resume",
        action="store_true",
        help="continue from the latest intact checkpoint in <out>/checkpoints (refused for a changed config)",
    )
    p_run.add_argument(
        "--allow-changes", action="store_true", help="with --resume: continue with changed config values"
    )
    p_run.add_argument("--out", help="output folder (overrides output.dir)")
    p_run.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, e.g. model.K=7",
    )
    p_run.add_argument("--no-progress", action="store_true", help="no progress bar")
    cache = p_run.add_mutually_exclusive_group()
    cache.add_argument(
        "--no-compile-cache", action="store_true", help="no persistent compilation cache (run.compile_cache=false)"
    )
    cache.add_argument(
        "--compile-cache",
        metavar="DIR",
        help="JAX's persistent compilation cache folder (default: $VIJAX_COMPILE_CACHE, else "
        "$XDG_CACHE_HOME/vijax/jax or ~/.cache/vijax/jax)",
    )
    p_list = sub.add_parser("list", help="list the registered experiments, one line each; with a name, its config keys")
    p_list.add_argument(
        "experiment", nargs="?", help="an experiment: every key of its config with type, default and allowed range"
    )
    p_prep = sub.add_parser("prepare", help="convert a corpus (UCI, lda-c or text) to the memory-mapped .npz format")
    p_prep.add_argument("input", help="the corpus file (optionally gzipped)")
    p_prep.add_argument(
        "--format",
        required=True,
        choices=("uci", "ldac", "text"),
        help="uci: docword.*.txt; ldac: 'M id:count ...' per line; text: one document per line",
    )
    p_prep.add_argument("--vocab", help="one word per line (text: without it, one is built)")
    p_prep.add_argument("--vocab-size", type=int, help="ldac without --vocab: V (default: largest id + 1)")
    p_prep.add_argument("--out", required=True, help="the .npz file to write")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the ``vijax`` command.

    Args:
      argv: the arguments (without the program name); ``sys.argv[1:]`` when None.

    Returns:
      The exit status of the module docstring; 1 where a reader closed the output early (``| head -1``).
    """
    try:
        status = _main(argv)
        sys.stdout.flush()  # a pipe's buffered output fails here, not at the interpreter's exit
        return status
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)  # Python flushes stdout again at exit: point it nowhere
        os.dup2(devnull, sys.stdout.fileno())
        return 1


def _error(message) -> int:
    print(f"vijax: error: {message}", file=sys.stderr)
    return EXIT_CANNOT_START


def _main(argv: Optional[Sequence[str]]) -> int:
    args = _parser().parse_args(argv)
    if args.command == "prepare":
        from vijax.data import prepare_corpus

        try:
            corpus = prepare_corpus(
                args.input, args.format, args.out, vocab_path=args.vocab, vocab_size=args.vocab_size
            )
        except (ValueError, OSError) as e:
            return _error(e)
        print(
            f"{args.out}: {corpus.num_docs} documents, {corpus.vocab_size} words, {corpus.num_tokens} tokens "
            f"({corpus.nnz} entries, {corpus.num_empty} empty documents)"
        )
        return EXIT_OK
    import_builtin_experiments()
    if args.command == "list" and args.experiment is not None:
        if args.experiment not in EXPERIMENTS:
            return _error(f"unknown experiment {args.experiment!r}; registered: {sorted(EXPERIMENTS)}")
        print(f"{args.experiment}: {EXPERIMENTS[args.experiment].description}")
        print(_keys_text(args.experiment))
        return EXIT_OK
    if args.command == "list":
        if not EXPERIMENTS:
            print("no experiments registered")
        width = max((len(n) for n in EXPERIMENTS), default=0)
        for name in sorted(EXPERIMENTS):
            mark = "  [the default of `vijax run`]" if name == DEFAULT_EXPERIMENT else ""
            if extras := experiment_extras({"experiment": name, **EXPERIMENTS[name].defaults}):
                mark += f"  [needs: {','.join(extras)}]"
            print(f"{name:<{width}}  {EXPERIMENTS[name].description}{mark}")
        if configs := shipped_configs():
            print(f"\nconfigs shipped with vijax (`vijax run NAME`): {', '.join(configs)}")
        return EXIT_OK
    try:
        source = args.config
        if source is None:  # the embedded default, unless --set names another experiment (its own defaults)
            named = [o.split("=", 1)[1].strip() for o in args.overrides if o.split("=", 1)[0].strip() == "experiment"]
            source = default_config() if not named or named[-1] == DEFAULT_EXPERIMENT else {}
        config = load_config(resolve_config(source) if isinstance(source, str) else source, args.overrides)
    except ConfigError as e:
        return _error(e)
    if args.out is not None:
        config["output"]["dir"] = args.out
    if args.no_progress:
        config["run"]["progress"] = False
    if args.no_compile_cache:
        config["run"]["compile_cache"] = False
    elif args.compile_cache is not None:
        config["run"]["compile_cache"] = args.compile_cache
    elif config["run"].get("compile_cache") is None:
        config["run"]["compile_cache"] = True  # on for the command (opt-in for library calls of run)
    if args.allow_changes and not args.resume:
        return _error("--allow-changes only applies with --resume")
    try:
        check_extras(config)
        _, metrics = run_experiment(config, resume=args.resume, allow_changes=args.allow_changes)
    except (ConfigError, CheckpointError) as e:
        return _error(e)
    except ImportError as e:  # an optional dependency the experiment needs (its message names the extra)
        if e.name not in OPTIONAL_MODULES:
            raise
        return _error(e)
    _print_summary(metrics, config["output"]["dir"])
    problems = metrics["health"]["run"]["problems"]
    if problems:
        out = config["output"]["dir"]
        print(
            f"vijax: error: {metrics['experiment']}: {'; '.join(problems)} (results written to {out}/)", file=sys.stderr
        )
        return EXIT_UNTRUSTED
    return EXIT_OK
