"""The one host loop that drives every ``VIAlgorithm``: ``lax.scan`` chunks, progress, held-out evaluation, a
relative-tolerance stopping rule, checkpoints and bit-identical resume.

**Keys.** ``init_key, step_base = jax.random.split(key)``; update ``t`` (0-based) calls ``alg.step(step_key,
state, batch_fn(batch_key, t))`` with ``batch_key, step_key = jax.random.split(jax.random.fold_in(step_base, t))``.

**Chunks.** Chunk ``c`` covers updates ``[c * chunk_size, (c + 1) * chunk_size)`` in one jitted ``lax.scan``; steps
outside ``[t0, t_end)`` are computed and discarded by a ``jnp.where``, so a resumed run is bit-identical.

**Stopping.** The chunk mean ELBOs ``L_c`` give ``r_c = |L_c - L_{c-1}| / |L_c|`` (Kucukelbir et al. 2017, Stan's
ADVI); the run stops once the last ``patience`` values are below ``tol``, not before ``min_steps`` updates. A NaN
ELBO never converges.

**Evaluation and checkpoints** happen at the first boundary at or after each multiple of ``eval_every``
(``checkpoint_every``) and at the end. A ``KeyboardInterrupt`` checkpoints the last completed chunk.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from typing import Callable, Mapping, NamedTuple, Optional, Sequence, Union

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import ClosedJaxpr, jaxpr_as_fun
from tqdm.auto import tqdm

from vijax._validate import ArgumentError, NestedValueCheck, check_key, collecting_checks, raise_collected, value_checks
from vijax.data import PrefetchHostBatches, device_batch
from vijax._compile import step_compile_options
from vijax.inference import VIAlgorithm, check_algorithm, jit_step
from vijax.models import split_arrays
from vijax.types import Array, PRNGKey, PyTree
from . import _cache, _checkpoint
from ._checkpoint import CheckpointStore, replicated
from vijax._validate import raise_batch_error
from ._health import psis_note, run_health
from ._run_config import RunConfig


BatchFn = Callable[[PRNGKey, Array], PyTree]  # (batch_key, t) -> batch
HostBatches = Callable[[int, int], PyTree]  # (t0, n) -> the stacked batches of updates t0 .. t0 + n - 1
InitState = Union[PyTree, Callable[[PRNGKey], PyTree], None]


class RunResult(NamedTuple):
    """What ``run`` returns.

    Attributes:
      state: the final state pytree.
      trace: ``name -> np.ndarray`` by update: ``info``'s leaves by path (``"elbo"``, ``"stats.n"``) and ``"step"``.
      evals: ``{"step", "wall_time", **eval_fn(state)}`` dicts, oldest first.
      converged: whether the tolerance rule stopped the run.
      num_steps: the number of updates applied to ``state`` (across resumes).
      wall_time: seconds spent, summed over resumes.
    """

    state: PyTree
    trace: dict
    evals: list
    converged: bool
    num_steps: int
    wall_time: float


def _as_strong_arrays(tree: PyTree) -> PyTree:
    """Leaves as ``jax.Array`` without weak types, so a loaded state compiles as ``init``'s does."""
    return jax.tree.map(lambda x: jnp.asarray(x, dtype=jnp.asarray(x).dtype), tree)


def _flatten_info(infos: PyTree, n: int) -> dict:
    """Host arrays ``name -> values[:n]`` of a chunk's stacked infos."""
    out = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(infos)[0]:
        name = jax.tree_util.keystr(path, simple=True, separator=".") or "elbo"
        if name == "step":
            raise ValueError("info may not have a field named 'step'; the trace uses that name")
        out[name] = np.asarray(leaf)[:n]
    if "elbo" not in out:
        raise ValueError(f"info must have an 'elbo' field; it has {sorted(out)}")
    return out


def _concat(parts: list) -> dict:
    if not parts:
        return {"step": np.zeros((0,), np.int64)}
    return {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}


def _chunk_mean(values: np.ndarray) -> float:
    return float(np.mean(values)) if values.size else float("nan")


def _tolerance_met(means: Sequence[float], rc: RunConfig, step: int) -> bool:
    """Whether the last ``patience`` relative changes of the chunk means are all below ``tol``, after ``min_steps``."""
    tol, patience = rc.tol, rc.patience
    if tol is None or len(means) < patience + 1 or step < rc.min_steps:
        return False
    m = np.asarray(means[-(patience + 1) :], dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.abs(np.diff(m)) / np.abs(m[1:])
    return bool(np.all(rel < tol))


def crossed(before: int, after: int, every: Optional[int]) -> bool:
    """Whether a multiple of ``every`` lies in ``(before, after]``."""
    return every is not None and after // every > before // every


def _eval_entry(eval_fn: Callable, state: PyTree, step: int, wall_time: float) -> dict:
    values = jax.device_get(eval_fn(state))
    if not isinstance(values, Mapping):
        raise ArgumentError(
            "eval_fn", f"eval_fn must return a dict of metrics (name -> number or array), got {type(values).__name__}"
        )
    entry = {"step": int(step), "wall_time": float(wall_time)}
    for k, v in values.items():
        v = np.asarray(v)
        entry[str(k)] = v.item() if v.ndim == 0 else v.tolist()
    return entry


class _Progress:
    """What a run has done so far: state, update count, trace parts, evaluations, chunk means, saves."""

    def __init__(self, state, step=0, parts=(), evals=(), wall0=0.0):
        self.state, self.step, self.parts, self.evals, self.wall0 = state, step, list(parts), list(evals), wall0
        self.saved_at = step if self.parts else None
        self.fresh = not self.parts  # a new checkpoint history: older files go at the first save
        self.means: list = []
        self.converged = False
        self.warned_nonfinite = False


def initial_progress(
    alg, init_state, init_key, key_data, store, resume, fingerprint=None, allow_changes=False
) -> _Progress:
    """The start of a run: ``init_state`` (or ``alg.init``), or on resume the newest intact checkpoint, checked."""
    if init_state is None:
        state = alg.init(init_key)
    else:
        state = init_state(init_key) if callable(init_state) else init_state
    state = _as_strong_arrays(state)
    path, data = store.resumable() if resume else (None, None)
    if path is None:
        return _Progress(state)
    try:
        ck = _checkpoint.load_checkpoint(path, state, data)
    except _checkpoint.CheckpointError as e:  # another state structure: name the config keys if known
        changed = _checkpoint.compare_fingerprints(e.fingerprint, fingerprint)
        if changed:
            raise _checkpoint.ConfigChangedError(
                f"checkpoint {path} was written with another config; changed: {'; '.join(changed)}. Its state "
                "has another structure, so it cannot be continued: run without resume",
                changed,
            ) from e
        raise
    changed = _checkpoint.compare_fingerprints(ck.fingerprint, fingerprint)
    if changed and not allow_changes:
        raise _checkpoint.ConfigChangedError(
            f"checkpoint {path} was written with another config; changed: {'; '.join(changed)}. Resume with "
            "allow_changes=True (vijax run --resume --allow-changes) to continue with the new values, or without "
            "resume to start again",
            changed,
        )
    if not np.array_equal(ck.key_data, key_data):
        raise _checkpoint.CheckpointError(
            f"checkpoint {path} was written by a run with another key ({ck.key_data.tolist()} != {key_data.tolist()})"
        )
    if changed:
        warnings.warn(f"resuming {path} with changed config values: " + "; ".join(changed), UserWarning, stacklevel=3)
    elif fingerprint is not None and ck.fingerprint is None:
        warnings.warn(
            f"checkpoint {path} records no config fingerprint (an older vijax wrote it); the config is not checked",
            UserWarning,
            stacklevel=3,
        )
    # where init's state sits (a data-parallel model's mesh): the step compiles for one placement
    loaded = jax.device_put(_as_strong_arrays(ck.state), jax.tree.map(lambda x: x.sharding, state))
    return _Progress(loaded, ck.step, [ck.trace] if ck.step else [], ck.evals, ck.wall_time)


def _run_config(config: Optional[RunConfig], settings: dict, batch_fn, host_batches) -> RunConfig:
    rc = (config if config is not None else RunConfig()).replace(**settings)
    rc.check_process_settings()
    if (batch_fn is None) == (host_batches is None):
        raise ValueError("give exactly one of batch_fn and host_batches")
    return rc


def run(
    alg: VIAlgorithm,
    key: PRNGKey,
    *,
    batch_fn: Optional[BatchFn] = None,
    host_batches: Optional[HostBatches] = None,
    init_state: InitState = None,
    eval_fn: Optional[Callable[[PyTree], dict]] = None,
    checkpoint_dir: Optional[str] = None,
    resume: bool = False,
    progress_fields: Optional[Sequence[str]] = None,
    config: Optional[RunConfig] = None,
    fingerprint: Optional[Mapping] = None,
    allow_changes: bool = False,
    programs: Optional[dict] = None,
    **settings,
) -> RunResult:
    """Runs ``alg`` for ``num_steps`` updates or until converged (the module docstring's rules).

    Args:
      alg: the ``VIAlgorithm``; ``step(key, state, batch) -> (state, info)``, ``info`` with an ``elbo`` field.
      key: the run's PRNG key (raw ``uint32[2]`` or typed).
      batch_fn: ``(batch_key, t) -> batch``, pure and jit-able; the full data for batch algorithms.
      host_batches: instead of ``batch_fn``: ``(t0, n) ->`` the batches of updates ``t0 .. t0 + n - 1``, stacked.
      init_state: the starting state, ``init_key -> state``, or None for ``alg.init``; on resume only its structure.
      eval_fn: ``state -> dict`` of held-out metrics, run between chunks (the steps are checkpointed if it raises).
      checkpoint_dir: checkpoint folder (locked by ``.vijax.lock``); a fresh run removes older checkpoints.
      resume: continue from the newest intact checkpoint (a corrupt newer one is renamed ``<name>.corrupt``).
      progress_fields: trace fields whose chunk means the bar shows (default ``("elbo",)``).
      config: the run settings (``RunConfig``); default ``RunConfig()``.
      fingerprint: ``{"hash", "values"}`` of what the run computes, stored in checkpoints and compared on resume.
      allow_changes: resume despite a changed fingerprint (a warning lists the changes).
      programs: a dict, owned by the caller, that keeps the compiled chunk for a later call with the same ``alg.step``
        and ``batch_fn`` (the same objects), chunk size and value checks: a continued run neither traces nor compiles
        again; None: the chunk is this call's.
      **settings: ``RunConfig`` fields overriding ``config``.

    Returns:
      A ``RunResult``.

    Raises:
      ValueError: bad arguments or settings (also across processes), an ``info`` without ``elbo``, a locked folder.
      CheckpointError: no intact checkpoint, another structure or key; ``ConfigChangedError``: a changed fingerprint.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from typing import NamedTuple
      >>> from vijax.inference import VIAlgorithm
      >>> class Info(NamedTuple):
      ...     elbo: jax.Array
      >>> alg = VIAlgorithm(init=lambda key, batch=None: jnp.zeros(()),
      ...                   step=lambda k, x, b: (x + 0.5 * (b - x), Info(-(x - b) ** 2)))
      >>> res = run(alg, jax.random.PRNGKey(0), batch_fn=lambda k, t: jnp.ones(()),
      ...           num_steps=60, chunk_size=20, progress=False)
      >>> round(float(res.state), 6), res.trace["elbo"].shape, int(res.trace["step"][-1])
      (1.0, (60,), 60)
    """
    rc = _run_config(config, settings, batch_fn, host_batches)
    check_algorithm("alg", alg)
    check_key("key", key)
    _cache.enable_compile_cache(rc.compile_cache)
    # the settings that decide which chunks a run computes and when it evaluates: the same in every process
    same = {k: getattr(rc, k) for k in ("num_steps", "chunk_size", "tol", "patience", "min_steps", "eval_every")}
    same.update(check_values=rc.check_values, eval_fn=None if eval_fn is None else "given")
    store = CheckpointStore(checkpoint_dir, resume, rc.checkpoint_every, same)
    start = time.perf_counter()
    init_key, step_base = jax.random.split(key)
    key_data = np.asarray(jax.random.key_data(key))
    if isinstance(progress_fields, str):  # one field; tuple("elbo") would be its letters
        progress_fields = (progress_fields,)
    fields = ("elbo",) if progress_fields is None else tuple(progress_fields)
    fingerprint = None if fingerprint is None else _checkpoint.jsonable(dict(fingerprint))
    with store.held():  # the folder is this run's until it returns (vijax.run._lock)
        prog = initial_progress(alg, init_state, init_key, key_data, store, resume, fingerprint, allow_changes)
        prog.state = replicated(prog.state)  # several processes: placed as every chunk leaves it
        elbo_so_far = _concat(prog.parts).get("elbo", np.zeros((0,)))  # the chunk means L_0, L_1, ... so far
        prog.means = [
            _chunk_mean(elbo_so_far[c * rc.chunk_size :][: rc.chunk_size]) for c in range(prog.step // rc.chunk_size)
        ]
        prog.converged = _tolerance_met(prog.means, rc, prog.step)

        def elapsed():
            return prog.wall0 + time.perf_counter() - start

        def save(collective=True):  # every process calls it, but for an interrupt
            if not store.enabled or prog.saved_at == prog.step or prog.step == 0:
                return  # nothing new to save
            prog.parts = [_concat(prog.parts)] if prog.parts else []
            meta = {"wall_time": elapsed(), "key_data": key_data, "fingerprint": fingerprint}
            store.save(
                prog.step, prog.state, prog.parts[0], prog.evals, fresh=prog.fresh, collective=collective, **meta
            )
            prog.fresh, prog.saved_at = False, prog.step

        chunk_fn = _kept_chunk_fn(programs, alg.step, batch_fn, rc.chunk_size, step_base, rc.check_values)
        prefetcher = None
        if host_batches is not None and rc.prefetch > 0:
            host_batches = prefetcher = PrefetchHostBatches(host_batches, rc.prefetch)
        look = {"unit": "step", "desc": "vijax", "disable": None if rc.progress else True, "dynamic_ncols": True}
        bar = tqdm(total=rc.num_steps, initial=min(prog.step, rc.num_steps), **look)
        try:
            with value_checks(rc.check_values):  # read when the chunk is traced
                _run_chunks(prog, rc, chunk_fn, step_base, host_batches, eval_fn, fields, bar, elapsed, save)
        except jax.errors.JaxRuntimeError as e:
            raise_batch_error(e)
        except KeyboardInterrupt:
            save(collective=False)
            raise
        finally:
            bar.close()
            if prefetcher is not None:
                prefetcher.close()
        if eval_fn is not None and (not prog.evals or prog.evals[-1]["step"] != prog.step):
            prog.evals.append(_eval_entry(eval_fn, prog.state, prog.step, elapsed()))
        save()
    note = psis_note(prog.evals)
    if note is not None and "above" in note:
        warnings.warn(note, stacklevel=2)
    health = run_health(_concat(prog.parts))
    if health.notes():
        warnings.warn("vijax.run: " + "; ".join(health.notes()), RuntimeWarning, stacklevel=2)
    return RunResult(prog.state, _concat(prog.parts), prog.evals, prog.converged, prog.step, elapsed())


def _run_chunks(prog: _Progress, rc: RunConfig, chunk_fn, step_base, host_batches, eval_fn, fields, bar, elapsed, save):
    """The chunks from ``prog.step`` to ``rc.num_steps`` or convergence, compiled before the first."""
    chunk_size, first = rc.chunk_size, prog.step
    if prog.step >= rc.num_steps or prog.converged:
        return
    pending = None if host_batches is None else host_batches(first, chunk_size)
    if not bar.disable:
        bar.write("vijax: compiling the step ...")
    compile_start = time.perf_counter()
    chunk_fn.lower(prog.state, step_base, np.int32(first), np.int32(first + chunk_size), pending).compile()
    if not bar.disable:  # jit's cache is filled: the loop's first call does not compile again
        bar.write(f"vijax: compiled in {time.perf_counter() - compile_start:.1f} s")
    while prog.step < rc.num_steps and not prog.converged:
        t0 = prog.step
        t_end = min((t0 // chunk_size + 1) * chunk_size, rc.num_steps)
        new_state, infos = chunk_fn(prog.state, step_base, np.int32(t0), np.int32(t_end), pending)
        if host_batches is not None and t_end < rc.num_steps:
            pending = host_batches(t_end, chunk_size)  # overlaps with the chunk the device is running
        part = _flatten_info(jax.device_get(infos), t_end - t0)
        part["step"] = np.arange(t0 + 1, t_end + 1, dtype=np.int64)
        prog.state, prog.step = new_state, t_end
        prog.parts.append(part)
        if not prog.warned_nonfinite:
            bad = ~np.all(np.isfinite(np.asarray(part["elbo"], np.float64).reshape(len(part["step"]), -1)), axis=1)
            if bad.any():
                prog.warned_nonfinite = True
                warnings.warn(
                    f"vijax.run: the ELBO is not finite at step {int(part['step'][bad][0])} (the first "
                    "such step; the end of the run summarises them)",
                    RuntimeWarning,
                    stacklevel=3,
                )
        if prog.step % chunk_size == 0:
            last = np.concatenate([p["elbo"][-chunk_size:] for p in prog.parts[-2:]])[-chunk_size:]  # L_c
            prog.means.append(_chunk_mean(last))
            prog.converged = _tolerance_met(prog.means, rc, prog.step)
        finished = prog.converged or prog.step >= rc.num_steps
        unknown = [f for f in fields if f not in part]
        if t0 == first and unknown:  # the trace's fields are known from this call's first chunk on
            save()
            raise ArgumentError(
                "progress_fields",
                f"progress_fields: {unknown} are not fields of this algorithm's trace; it has {sorted(part)}",
            )
        if eval_fn is not None and (crossed(t0, prog.step, rc.eval_every) or finished):
            try:
                prog.evals.append(_eval_entry(eval_fn, prog.state, prog.step, elapsed()))
            except Exception:  # the user's evaluation failed: keep the steps taken, then report it
                save()
                raise
        if crossed(t0, prog.step, rc.checkpoint_every) or finished:
            save()
        post = {f: f"{_chunk_mean(part[f]):.5g}" for f in fields}
        for k, v in (prog.evals[-1] if prog.evals else {}).items():
            if k not in ("step", "wall_time") and isinstance(v, (int, float)):
                post[k] = f"{v:.5g}" if isinstance(v, float) else v
        bar.set_postfix(post, refresh=False)
        bar.update(t_end - t0)


class _Chunk:
    """The compiled chunk ``chunk(state, step_base, t0, t_end, host)``, its data arrays passed as arguments."""

    def __init__(self, make_jit: Callable, consts: tuple, step_arrays: list, collect: bool):
        self.make_jit, self.consts, self.step_arrays, self.collect = make_jit, consts, step_arrays, collect
        self.fn = make_jit(collect)
        self.located = None  # the chunk returning located checks, compiled at a first failure

    def _apply(self, lower: bool, args):
        try:
            out = (self.fn.lower if lower else self.fn)(self.consts, self.step_arrays, *args)
        except NestedValueCheck:  # at most once: the checks' other way
            self.collect = False
            self.fn = self.make_jit(self.collect)
            out = (self.fn.lower if lower else self.fn)(self.consts, self.step_arrays, *args)
        if lower:
            return out
        state, (infos, checks) = out
        if checks is not None:

            def located_checks():  # from the chunk that locates them, compiled at a first failure only
                self.located = self.located or self.make_jit(self.collect, locate=True)
                return self.located(self.consts, self.step_arrays, *args)[1][1]

            raise_collected(checks, located_checks)
        return state, infos

    def __call__(self, *args):
        return self._apply(False, args)

    def lower(self, *args):
        return self._apply(True, args)


def make_chunk_fn(
    step_fn: Callable, batch_fn: Optional[Callable], chunk_size: int, step_base, checked: bool = False
) -> "_Chunk":
    """The jitted ``(state, step_base, t0, t_end, host) -> (state, stacked infos)`` of one chunk."""
    consts, step_arrays, rebuild_step = (), *split_arrays(step_fn)
    if batch_fn is not None:  # the arrays it captures (a batch algorithm's data) as arguments, not constants
        key = jax.eval_shape(lambda b: jax.random.split(jax.random.fold_in(b, 0))[0], step_base)
        closed, out = jax.make_jaxpr(batch_fn, return_shape=True)(key, jax.ShapeDtypeStruct((), jnp.int32))
        consts, batch_tree = tuple(closed.consts), jax.tree.structure(out)

    def batch_of(consts, batch_key, t):
        return jax.tree.unflatten(batch_tree, jaxpr_as_fun(ClosedJaxpr(closed.jaxpr, list(consts)))(batch_key, t))

    def make_jit(collect: bool, locate: bool = False):
        def chunk(consts, step_arrays, state, step_base, t0, t_end, host):
            ts = t0 + jnp.arange(chunk_size, dtype=jnp.int32)
            bound = rebuild_step(step_arrays)
            step = collecting_checks(bound, locate) if collect else lambda *a: (bound(*a), None)

            def body(state, xs):
                t, host_batch = xs
                batch_key, step_key = jax.random.split(jax.random.fold_in(step_base, t))
                batch = batch_of(consts, batch_key, t) if host_batch is None else device_batch(host_batch)
                (new_state, info), checks = step(step_key, state, batch)
                active = t < t_end
                state = jax.tree.map(lambda new, old: jnp.where(active, new, old), new_state, state)
                # a step past t_end is not applied, nor are its checks
                if checks is not None and "failed" in checks:
                    checks = {**checks, "failed": checks["failed"] & active}
                elif checks is not None:
                    checks = {"rows": [r & active for r in checks["rows"]]}
                return state, (info, checks)

            return jax.lax.scan(body, state, (ts, host))

        # jit_step's quick options (module vijax._compile), as a user's jitted step gets them
        options = step_compile_options()
        if collect or not checked:
            return jax.jit(chunk, **({} if options is None else {"compiler_options": options}))
        return jit_step(chunk)

    return _Chunk(make_jit, consts, step_arrays, checked)


def _kept_chunk_fn(programs: Optional[dict], step_fn, batch_fn, chunk_size: int, step_base, checked: bool) -> "_Chunk":
    """``make_chunk_fn``'s chunk, or the one ``programs`` keeps for the same step, batches, size, checks and key type."""
    if programs is None:
        return make_chunk_fn(step_fn, batch_fn, chunk_size, step_base, checked)
    slot = (chunk_size, checked, jnp.shape(step_base), jnp.result_type(step_base))
    kept = programs.get(slot)
    if kept is None or kept[0] is not step_fn or kept[1] is not batch_fn:
        kept = programs[slot] = (step_fn, batch_fn, make_chunk_fn(step_fn, batch_fn, chunk_size, step_base, checked))
    return kept[2]


def lower_run(
    alg: VIAlgorithm,
    key: PRNGKey,
    *,
    batch_fn: Optional[BatchFn] = None,
    host_batches: Optional[HostBatches] = None,
    init_state: InitState = None,
    config: Optional[RunConfig] = None,
    **settings,
) -> jax.stages.Lowered:
    """The chunk program that ``run`` with the same arguments compiles, lowered but not compiled.

    Raises:
      ValueError: as ``run`` does, for missing process settings or not exactly one of ``batch_fn``, ``host_batches``.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from vijax.inference import VIAlgorithm
      >>> alg = VIAlgorithm(init=lambda key, batch=None: jnp.zeros(()),
      ...                   step=lambda k, x, b: (x + 0.5 * (b - x), {"elbo": -(x - b) ** 2}))
      >>> low = lower_run(alg, jax.random.PRNGKey(0), batch_fn=lambda k, t: jnp.ones(()), chunk_size=20)
      >>> "stablehlo" in low.as_text()
      True
    """
    rc = _run_config(config, settings, batch_fn, host_batches)
    init_key, step_base = jax.random.split(key)
    state = None
    if init_state is None or callable(init_state):  # the start's shapes and dtypes (no weak types), traced
        with contextlib.suppress(jax.errors.JAXTypeError):
            shapes = jax.eval_shape(alg.init if init_state is None else init_state, init_key)
            state = jax.tree.map(lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=s.sharding), shapes)
    if state is None:  # a given state, or an init with host code: run it, as run does
        state = initial_progress(alg, init_state, init_key, np.asarray(jax.random.key_data(key)), None, False).state
    chunk_fn = make_chunk_fn(alg.step, batch_fn, rc.chunk_size, step_base, rc.check_values)
    pending = None if host_batches is None else host_batches(0, rc.chunk_size)
    with value_checks(rc.check_values):  # read when the chunk is traced, as in run
        return chunk_fn.lower(state, step_base, np.int32(0), np.int32(rc.chunk_size), pending)
