"""The one host loop that drives every ``VIAlgorithm``: ``lax.scan`` chunks, progress, held-out
evaluation, a relative-tolerance stopping rule, checkpoints and bit-identical resume.

The conventions, which every caller can rely on:

**Keys.** ``init_key, step_base = jax.random.split(key)``. ``init_key`` goes to the init (only when
the run starts from scratch); update ``t`` (0-based) uses
``batch_key, step_key = jax.random.split(jax.random.fold_in(step_base, t))`` and calls
``state, info = alg.step(state, batch_fn(batch_key, t), step_key)``. No key is used twice, and the
keys of step ``t`` depend only on ``key`` and ``t``, never on chunking or on where a run resumed.

**Chunks.** Steps run in chunks laid on a fixed grid: chunk ``c`` covers updates
``[c * chunk_size, (c + 1) * chunk_size)`` (clipped to ``num_steps``). Each chunk is one call of a
jitted ``lax.scan`` of length ``chunk_size``; steps outside ``[t0, t_end)`` (a final partial chunk,
or the rest of a chunk a resumed run starts inside) are computed and discarded with a
``jnp.where`` on the carry. So the chunk function compiles exactly once per ``run`` call, and a
resumed run replays the very same compiled program on the very same inputs, which is what makes
its final state and trace bit-identical to an uninterrupted run. The price is at most
``chunk_size - 1`` wasted updates per run (none when ``chunk_size`` divides ``num_steps``).

**Stopping.** At each grid boundary ``b = (c + 1) * chunk_size`` the runner forms the mean ELBO of
the chunk, ``L_c = mean(elbo[b - chunk_size : b])`` (also over any extra axes of ``info.elbo``);
averaging a chunk keeps the noise of stochastic estimates from stopping or prolonging a run. The
relative change ``r_c = |L_c - L_{c-1}| / |L_c|`` is the one of Stan's ADVI (Kucukelbir et al.,
2017); the run stops, with ``converged=True``, at the first boundary where the last ``patience``
values ``r`` are all below ``tol``. A NaN ELBO never counts as converged.

**Evaluation and checkpoints.** They happen between chunks: at the first chunk boundary at or
after each multiple of ``eval_every`` (``checkpoint_every``), and once more when the run ends
(last step reached or converged); ``eval_every=None`` with an ``eval_fn`` evaluates only at the end.
A ``KeyboardInterrupt`` writes a checkpoint of the last completed chunk before re-raising.
"""
from __future__ import annotations

import time
from typing import Callable, NamedTuple, Optional, Sequence, Union

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from vijax.inference.base import VIAlgorithm
from vijax.run import _checkpoint
from vijax.types import Array, PRNGKey, PyTree


class RunResult(NamedTuple):
    """What ``run`` returns.

    Attributes:
      state: the final state pytree.
      trace: dict ``name -> np.ndarray`` with one row per update: every leaf of ``info`` (named by
        its path, e.g. ``"elbo"``, ``"step_size"``, ``"stats.n"``) and ``"step"``, the number of
        updates applied after that row's update (1, 2, ..., ``num_steps``).
      evals: list of dicts ``{"step", "wall_time", **eval_fn(state)}``, oldest first.
      converged: whether the tolerance rule stopped the run.
      num_steps: the number of updates applied to ``state`` (across resumes).
      wall_time: seconds spent, summed over the runs that a resume continued.
    """

    state: PyTree
    trace: dict
    evals: list
    converged: bool
    num_steps: int
    wall_time: float


def _make_chunk_fn(step_fn: Callable, batch_fn: Optional[Callable], chunk_size: int) -> Callable:
    """The jitted ``(state, step_base, t0, t_end, host) -> (state, stacked infos)`` of one chunk.

    ``host`` is None with a ``batch_fn``, or the chunk's stacked host batches (leading axis
    ``chunk_size``) that the scan walks through."""

    def chunk(state, step_base, t0, t_end, host):
        ts = t0 + jnp.arange(chunk_size, dtype=jnp.int32)

        def body(state, xs):
            t, host_batch = xs
            batch_key, step_key = jax.random.split(jax.random.fold_in(step_base, t))
            batch = batch_fn(batch_key, t) if host_batch is None else host_batch
            new_state, info = step_fn(state, batch, step_key)
            active = t < t_end
            state = jax.tree.map(lambda new, old: jnp.where(active, new, old), new_state, state)
            return state, info

        return jax.lax.scan(body, state, (ts, host))

    return jax.jit(chunk)


def _as_strong_arrays(tree: PyTree) -> PyTree:
    """Leaves as ``jax.Array`` without weak types, so a state loaded from a checkpoint has the
    same abstract values (and compiled program) as one built by ``init``."""
    def leaf(x):
        x = jnp.asarray(x)
        return jnp.asarray(x, dtype=x.dtype)

    return jax.tree.map(leaf, tree)


def _key_data(key: PRNGKey) -> np.ndarray:
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    return np.asarray(key, dtype=np.uint32)


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


def _tail(parts: list, name: str, n: int) -> np.ndarray:
    """The last ``n`` rows of ``name`` over the trace parts."""
    got, rows = [], 0
    for p in reversed(parts):
        if rows >= n:
            break
        got.append(p[name])
        rows += len(p[name])
    return np.concatenate(got[::-1])[-n:]


def _chunk_mean(values: np.ndarray) -> float:
    return float(np.mean(values)) if values.size else float("nan")


def _tolerance_met(means: Sequence[float], tol: Optional[float], patience: int) -> bool:
    """Whether the last ``patience`` relative changes of the chunk means are all below ``tol``."""
    if tol is None or len(means) < patience + 1:
        return False
    m = np.asarray(means[-(patience + 1):], dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.abs(np.diff(m)) / np.abs(m[1:])
    return bool(np.all(rel < tol))


def _crossed(before: int, after: int, every: Optional[int]) -> bool:
    """Whether a multiple of ``every`` lies in ``(before, after]``."""
    return every is not None and after // every > before // every


def _eval_entry(eval_fn: Callable, state: PyTree, step: int, wall_time: float) -> dict:
    values = jax.device_get(eval_fn(state))
    entry = {"step": int(step), "wall_time": float(wall_time)}
    for k, v in values.items():
        v = np.asarray(v)
        entry[str(k)] = v.item() if v.ndim == 0 else v.tolist()
    return entry


def _postfix(mean_of: dict, evals: list) -> dict:
    post = {k: f"{v:.5g}" for k, v in mean_of.items()}
    if evals:
        post.update({k: (f"{v:.5g}" if isinstance(v, float) else v)
                     for k, v in evals[-1].items() if k not in ("step", "wall_time")
                     and isinstance(v, (int, float))})
    return post


def _check_args(num_steps, chunk_size, tol, patience, eval_every, checkpoint_dir,
                checkpoint_every, resume):
    def positive(name, v, optional=False):
        if v is None and optional:
            return
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")

    if isinstance(num_steps, bool) or not isinstance(num_steps, (int, np.integer)) \
            or not 0 <= num_steps < 2**31 - 1:
        raise ValueError(f"num_steps must be an int in [0, 2**31 - 1), got {num_steps!r}")
    positive("chunk_size", chunk_size)
    positive("patience", patience)
    positive("eval_every", eval_every, optional=True)
    positive("checkpoint_every", checkpoint_every, optional=True)
    if tol is not None and not tol > 0:
        raise ValueError(f"tol must be positive or None, got {tol!r}")
    if checkpoint_dir is None and (checkpoint_every is not None or resume):
        raise ValueError("checkpoint_every and resume need a checkpoint_dir")


def run(alg: VIAlgorithm, key: PRNGKey, *, batch_fn: Optional[Callable[[PRNGKey, Array], PyTree]] = None,
        num_steps: int, host_batches: Optional[Callable[[int, int], PyTree]] = None, init_state: Union[PyTree, Callable[[PRNGKey], PyTree], None] = None,
        chunk_size: int = 100, tol: Optional[float] = None, patience: int = 3,
        eval_fn: Optional[Callable[[PyTree], dict]] = None, eval_every: Optional[int] = None,
        checkpoint_dir: Optional[str] = None, checkpoint_every: Optional[int] = None,
        resume: bool = False, progress: bool = True,
        progress_fields: Optional[Sequence[str]] = None) -> RunResult:
    """Runs ``alg`` for ``num_steps`` updates (or until converged); see the module docstring for
    the key layout, the chunk grid, the stopping rule and the evaluation/checkpoint cadence.

    Args:
      alg: the ``VIAlgorithm``; ``alg.step(state, batch, key) -> (state, info)`` must be jit-able
        and ``info`` a pytree (e.g. a NamedTuple) of arrays with an ``elbo`` field.
      key: the run's PRNG key (raw ``uint32[2]`` or typed); split as documented above.
      batch_fn: ``(batch_key, t) -> batch``, pure and jit-able; ``t`` is the int32 index of the
        update. Return the full data (ignoring both) for batch algorithms.
      num_steps: the total number of updates, counting those done before a resume.
      host_batches: instead of ``batch_fn``, for data that lives on the host (or on disk):
        ``(t0, n) -> the batches of updates t0 .. t0 + n - 1 stacked on a leading axis``. It must
        be a function of the update indices alone (e.g. a seeded epoch permutation), so that a
        resumed run sees the same batches; updates past ``num_steps`` may be asked for and are
        discarded. The next chunk's batches are built while the current chunk runs. A chunk
        whose stacked shapes differ from the last one's compiles again (pad to a few buckets).
      init_state: the starting state; or a callable ``init_key -> state``; or None for
        ``alg.init(init_key)``. On resume it only gives the expected tree structure.
      chunk_size: updates per jitted ``lax.scan`` call.
      tol: relative ELBO tolerance of the stopping rule, or None to run all steps.
      patience: consecutive chunk boundaries below ``tol`` needed to stop.
      eval_fn: ``state -> dict`` of held-out metrics, run on the host between chunks.
      eval_every: evaluation period in updates (rounded up to chunk boundaries).
      checkpoint_dir: folder for checkpoints; a final checkpoint is always written there. A run
        that does not resume one removes the folder's older checkpoints at its first save.
      checkpoint_every: checkpoint period in updates (rounded up to chunk boundaries).
      resume: continue from the latest checkpoint in ``checkpoint_dir`` (from scratch if there is
        none). It must be the same ``key``; a checkpoint at or past ``num_steps`` is returned as is.
      progress: show a tqdm bar (it switches itself off when stderr is not a terminal).
      progress_fields: trace fields whose chunk means the bar shows; default ``("elbo",)``.

    Returns:
      A ``RunResult``.

    Raises:
      ValueError: for bad arguments, an ``info`` without ``elbo``, or a checkpoint whose state
        structure or key does not match this run.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from typing import NamedTuple
      >>> from vijax.inference.base import VIAlgorithm
      >>> class Info(NamedTuple):
      ...     elbo: jax.Array
      >>> alg = VIAlgorithm(init=lambda key, batch=None: jnp.zeros(()),
      ...                   step=lambda x, b, k: (x + 0.5 * (b - x), Info(-(x - b) ** 2)))
      >>> res = run(alg, jax.random.PRNGKey(0), batch_fn=lambda k, t: jnp.ones(()),
      ...           num_steps=60, chunk_size=20, progress=False)
      >>> round(float(res.state), 6), res.trace["elbo"].shape, int(res.trace["step"][-1])
      (1.0, (60,), 60)
    """
    _check_args(num_steps, chunk_size, tol, patience, eval_every, checkpoint_dir,
                checkpoint_every, resume)
    start = time.perf_counter()
    init_key, step_base = jax.random.split(key)
    key_data = _key_data(key)
    fields = tuple(progress_fields) if progress_fields is not None else ("elbo",)

    def build_init():
        if init_state is None:
            return alg.init(init_key)
        return init_state(init_key) if callable(init_state) else init_state

    state = _as_strong_arrays(build_init())
    step, parts, evals, wall0 = 0, [], [], 0.0
    if resume:
        path = _checkpoint.latest_checkpoint(checkpoint_dir)
        if path is not None:
            ck = _checkpoint.load_checkpoint(path, state)
            if not np.array_equal(ck.key_data, key_data):
                raise ValueError(f"checkpoint {path} was written by a run with another key "
                                 f"({ck.key_data.tolist()} != {key_data.tolist()})")
            state = _as_strong_arrays(ck.state)
            step, evals, wall0 = ck.step, list(ck.evals), ck.wall_time
            parts = [ck.trace] if ck.step else []

    def elapsed():
        return wall0 + time.perf_counter() - start

    # Means of the complete grid chunks so far: L_0, L_1, ...
    done_chunks = step // chunk_size
    elbo_so_far = _concat(parts).get("elbo", np.zeros((0,)))
    means = [_chunk_mean(elbo_so_far[c * chunk_size:(c + 1) * chunk_size])
             for c in range(done_chunks)]
    converged = _tolerance_met(means, tol, patience)
    saved_at = step if parts else None
    fresh = not parts  # a new checkpoint history: older files go at the first save

    def save():
        nonlocal parts, saved_at, fresh
        if checkpoint_dir is None or saved_at == step or step == 0:
            return
        if fresh:
            _checkpoint.clear_checkpoints(checkpoint_dir)
            fresh = False
        parts = [_concat(parts)] if parts else []
        _checkpoint.save_checkpoint(checkpoint_dir, step, state, _concat(parts), evals,
                                    wall_time=elapsed(), key_data=key_data)
        saved_at = step

    if (batch_fn is None) == (host_batches is None):
        raise ValueError("give exactly one of batch_fn and host_batches")
    chunk_fn = _make_chunk_fn(alg.step, batch_fn, chunk_size)

    def host_chunk(t0):
        if host_batches is None:
            return None
        return host_batches(t0, chunk_size)

    pending = host_chunk(step) if step < num_steps else None
    bar = tqdm(total=num_steps, initial=min(step, num_steps), unit="step", desc="vijax",
               disable=None if progress else True, dynamic_ncols=True)
    try:
        while step < num_steps and not converged:
            t0 = step
            t_end = min((t0 // chunk_size + 1) * chunk_size, num_steps)
            new_state, infos = chunk_fn(state, step_base, np.int32(t0), np.int32(t_end), pending)
            if host_batches is not None and t_end < num_steps:
                pending = host_chunk(t_end)  # overlaps with the chunk the device is running
            part = _flatten_info(jax.device_get(infos), t_end - t0)
            part["step"] = np.arange(t0 + 1, t_end + 1, dtype=np.int64)
            state, step = new_state, t_end
            parts.append(part)
            if step % chunk_size == 0:
                means.append(_chunk_mean(_tail(parts, "elbo", chunk_size)))
                converged = _tolerance_met(means, tol, patience)
            finished = converged or step >= num_steps
            if eval_fn is not None and (_crossed(t0, step, eval_every) or finished):
                evals.append(_eval_entry(eval_fn, state, step, elapsed()))
            if _crossed(t0, step, checkpoint_every) or finished:
                save()
            bar.set_postfix(_postfix({f: _chunk_mean(part[f]) for f in fields if f in part},
                                     evals), refresh=False)
            bar.update(t_end - t0)
    except KeyboardInterrupt:
        save()
        raise
    finally:
        bar.close()
    if eval_fn is not None and (not evals or evals[-1]["step"] != step):
        evals.append(_eval_entry(eval_fn, state, step, elapsed()))
    save()
    return RunResult(state=state, trace=_concat(parts), evals=evals, converged=converged,
                     num_steps=step, wall_time=elapsed())


__all__ = ["RunResult", "run"]
