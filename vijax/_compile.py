"""vijax's one compile-tuning policy.

vijax compiles with XLA's settings. A user opts in to quicker CPU compiles for the whole process
with ``vijax.run.fast_cpu_compile()`` (what ``vijax run`` does), or per step with
``vijax.inference.jit_step`` (its ``compiler_options``, :func:`step_cpu_options`). Both only
change how XLA compiles for the CPU: the classic elemental kernel emitter instead of the MLIR
fusion emitters, and no loop unrolling by LLVM. Results are the same up to floating-point
rounding; GPU and TPU programs are unaffected.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import threading
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from vijax._validate import trace_state

_EMITTER = "--xla_cpu_use_fusion_emitters"
FLAGS = (_EMITTER + "=false",)
EXTRA_OPTIONS = ("xla_cpu_disable_loop_unrolling",)
KNOWN_BELOW = (0, 11)  # jaxlib 0.11 no longer knows the emitter flag, and XLA exits at an unknown flag
_EXTRA = "--xla_backend_extra_options="


def _extra_options(tokens) -> list:
    return [o for t in tokens if t.startswith(_EXTRA) for o in t[len(_EXTRA) :].split(",") if o]


def _missing(xla_flags: str) -> tuple[list, list]:
    """The flags and extra options ``xla_flags`` does not set (a flag set to another value is the
    user's choice and counts as set)."""
    tokens = xla_flags.split()
    names = {t.split("=", 1)[0] for t in tokens}
    extra = {o.split("=", 1)[0] for o in _extra_options(tokens)}
    return [f for f in FLAGS if f.split("=", 1)[0] not in names], [o for o in EXTRA_OPTIONS if o not in extra]


def with_fast_cpu_compile(xla_flags: str) -> str:
    """``xla_flags`` (an ``XLA_FLAGS`` value) with the quick-compile settings added, keeping the
    flags and backend extra options it already sets."""
    flags, options = _missing(xla_flags)
    if not flags and not options:
        return xla_flags
    tokens = xla_flags.split()
    extra = _extra_options(tokens) + options
    return " ".join([t for t in tokens if not t.startswith(_EXTRA)] + flags + [_EXTRA + ",".join(extra)])


def _jaxlib_version() -> tuple:
    from jaxlib import version  # read without starting JAX's backends

    return tuple(int(p) for p in version.__version__.split(".")[:2])


def _backends_started() -> bool:
    from jax._src import xla_bridge  # no public API says whether the backends have started

    return bool(xla_bridge.backends_are_initialized())


def fast_cpu_compile() -> bool:
    """Adds the quick CPU compile settings (module docstring) to ``XLA_FLAGS`` for this process and
    the processes it starts, keeping any flag already there. XLA reads its flags once, when JAX
    starts its backends: call it before the first JAX computation.

    Returns:
      Whether the settings are in force: False when JAX had started without them, or when the
      installed jaxlib (0.11 and newer) does not know them (nothing is added).

    Examples:
      >>> import vijax.run
      >>> vijax.run.fast_cpu_compile()  # doctest: +SKIP
      True
    """
    before = os.environ.get("XLA_FLAGS", "")
    if _jaxlib_version() >= KNOWN_BELOW:
        return False
    if _missing(before) == ([], []):
        return True
    if _backends_started():
        return False
    os.environ["XLA_FLAGS"] = with_fast_cpu_compile(before)
    return True


def step_cpu_options() -> Optional[dict]:
    """The ``compiler_options`` ``jit_step`` compiles a step with on a CPU (the classic emitter,
    LLVM at ``-O2``), or None: on another backend, with a jaxlib that does not know the option, or
    where ``XLA_FLAGS`` choose the emitter (``fast_cpu_compile`` or the user's own flag)."""
    if _EMITTER in os.environ.get("XLA_FLAGS", "") or _jaxlib_version() >= KNOWN_BELOW:
        return None
    if jax.default_backend() != "cpu":
        return None
    return {"xla_cpu_use_fusion_emitters": False, "xla_backend_optimization_level": 2}


# ---- to be deleted once no module uses them (compile tuning being removed) ----

# a set-up, a start, a check: small arrays, run once
SETUP_CPU_OPTIONS = {"xla_cpu_use_fusion_emitters": False, "xla_backend_optimization_level": 0}
# an evaluation run once at the user's call (predictive draws, pointwise log-likelihoods): its run
# time grows with the draws and the data, so LLVM keeps its -O2 passes (XLA's default is -O3)
EVALUATION_CPU_OPTIONS = {"xla_cpu_use_fusion_emitters": False, "xla_backend_optimization_level": 2}
_OPTIONS_KNOWN = [True]  # False once XLA has refused an option: every later call is the plain jit


def is_unknown_option(error: Exception) -> bool:
    """Whether a ``JaxRuntimeError`` is XLA refusing a compile option it does not know (nothing has
    run); records it, so that later programs are compiled without options."""
    if isinstance(error, jax.errors.JaxRuntimeError) and "No such compile option" in str(error):
        _OPTIONS_KNOWN[0] = False
        return True
    return False


@contextlib.contextmanager
def collection_paused():
    """Python's cyclic garbage collector paused for the block, as it was after: for a first trace
    and lowering, which allocate many objects that live until the program is built, so that the
    collector's full passes over the process's heap (a JAX process holds millions of objects)
    fall after it. An A/B probe (``benchmarks/user_script.py``'s LDA SVI step, warm compile cache,
    8 alternating fresh processes on a 2-core CPU): the first call took 0.28-0.34 s with the
    pause (median 0.306 s) and 0.36-0.41 s without it (median 0.383 s)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@functools.lru_cache(maxsize=1)
def _eager_state():
    """The trace state with no trace under way: read in a fresh thread (JAX's trace state is the
    thread's), so that a first call inside a trace reads the right one."""
    box = []
    thread = threading.Thread(target=lambda: box.append(trace_state()))
    thread.start()
    thread.join()
    return box[0]


def at_top_level() -> bool:
    """Whether no trace (``jit``, ``vmap``, ``grad``...) is under way in this thread."""
    return trace_state() == _eager_state()


class SetupJit:
    """``fn`` under ``jax.jit(fn, **jit_kwargs)``, compiled with the CPU compiler ``options``
    (default ``SETUP_CPU_OPTIONS``) where they apply (module docstring). ``_cache_size()`` counts
    the programs of both compilations."""

    def __init__(self, fn: Callable, options: Optional[dict] = None, **jit_kwargs: Any):
        self.plain = jax.jit(fn, **jit_kwargs)
        self.quick = jax.jit(fn, compiler_options=SETUP_CPU_OPTIONS if options is None else options, **jit_kwargs)
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _OPTIONS_KNOWN[0] and jax.default_backend() == "cpu" and at_top_level():
            try:
                return self.quick(*args, **kwargs)
            except jax.errors.JaxRuntimeError as e:  # raised by the compiler: nothing has run
                if not is_unknown_option(e):
                    raise
        return self.plain(*args, **kwargs)

    def _cache_size(self) -> int:
        return self.quick._cache_size() + self.plain._cache_size()


# the programs ``one_program`` compiled so far, by the text of their jaxpr (the most recently used last)
_PROGRAMS: dict = {}
_MAX_PROGRAMS = 32


def one_program(program: Callable, name: str, *, options: Optional[dict] = None) -> Any:
    """``program()`` (no arguments, a pytree of arrays out) as one compiled program, not op by op.
    The program is traced to a jaxpr and compiled with the arrays it captures (a model's data) as
    arguments, not as constants in the program; the compilation is kept by the jaxpr's text, so
    that a later call whose trace is the same (the same model on data of the same shapes) reuses
    it, where a ``jit`` of a fresh closure would compile again. ``name``: the program's name in
    JAX's compilation logs. ``options``: the CPU compiler options of ``SetupJit`` (default
    ``SETUP_CPU_OPTIONS``; ``EVALUATION_CPU_OPTIONS`` for a program whose run time grows with the
    data). Raises what tracing raises (a TypeError where the program needs concrete values)."""
    from jax.extend.core import ClosedJaxpr, jaxpr_as_fun

    closed, shapes = jax.make_jaxpr(program, return_shape=True)()
    options = SETUP_CPU_OPTIONS if options is None else options
    key = (str(closed.jaxpr), name, tuple(sorted(options.items())))
    fn = _PROGRAMS.pop(key, None)
    if fn is None:
        jaxpr = closed.jaxpr

        def run(consts):
            return jaxpr_as_fun(ClosedJaxpr(jaxpr, list(consts)))()

        run.__name__ = run.__qualname__ = name
        fn = SetupJit(run, options)
    _PROGRAMS[key] = fn
    while len(_PROGRAMS) > _MAX_PROGRAMS:
        _PROGRAMS.pop(next(iter(_PROGRAMS)))
    return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(shapes), fn(tuple(closed.consts)))


def as_one_program(run: Callable, name: str, *, options: Optional[dict] = None) -> Any:
    """``run()`` as ``one_program`` where no trace is under way, else as it is (inlined into the
    caller's program); as it is, op by op, where tracing raises a TypeError (a model that needs
    concrete values: ``int`` of a computed array, a Python ``if`` on one)."""
    if not at_top_level():
        return run()
    try:
        return one_program(run, name, options=options)
    except TypeError:
        return run()


def setup_jit(fn: Callable = None, **jit_kwargs: Any):
    """``SetupJit(fn, **jit_kwargs)``; usable as a decorator, with or without keyword arguments
    (``@setup_jit``, ``@setup_jit(static_argnums=0)``)."""
    if fn is None:
        return lambda f: SetupJit(f, **jit_kwargs)
    return SetupJit(fn, **jit_kwargs)


def host_key_data(key) -> np.ndarray:
    """A concrete PRNG key's words on the host, uint32 (..., words), typed (``jax.random.key``) or
    raw (``jax.random.PRNGKey``) alike; no program compiles for it. Read so by the start checks'
    and LDA's random start (the seeds of NumPy's generators), the runner and ``lower_run`` (the
    checkpoints' key) and :func:`split_on_host`; ``vijax.data.as_rng``, which takes an int seed
    too and imports JAX only for a typed key, reads a key alike."""
    return np.asarray(jax.random.key_data(key), dtype=np.uint32)


def split_on_host(key, num: int = 2) -> list:
    """``num`` keys of ``key``'s kind (typed, with its implementation, or raw) made from a concrete
    key on the host: their words drawn by NumPy's generator seeded with ``key``'s words, so that
    no program compiles, where ``jax.random.split`` of a concrete key and the unpacking of its
    result compile one each, the first time in a process, for an ``init`` a user waits for. The
    same key gives the same keys; they are not ``jax.random.split``'s."""
    words = host_key_data(key)
    new = np.random.default_rng(words.ravel()).integers(0, 2**32, size=(num,) + words.shape, dtype=np.uint32)
    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        impl = jax.random.key_impl(key)
        return [jax.random.wrap_key_data(w, impl=impl) for w in new]
    return [jax.device_put(w) for w in new]  # a transfer: jnp.asarray would compile a copy


# XLA's CPU compiler splits a reduction over a dimension longer than this into a reduce-window
# and a reduce (TreeReductionRewriter: a pairwise sum, for the precision of long float sums)
_REDUCE_WINDOW = 32
# a float sum over at most this many entries is as precise summed in order (float32: a relative
# error of at most n eps = 6e-5)
SHORT_AXIS = 1024


def _short_factors(n: int) -> Optional[tuple]:
    """n as a product of factors of at most ``_REDUCE_WINDOW`` (the largest first), or None."""
    factors = []
    while n > _REDUCE_WINDOW:
        d = next((d for d in range(_REDUCE_WINDOW, 1, -1) if n % d == 0), None)
        if d is None:
            return None
        factors.append(d)
        n //= d
    return tuple(factors) + (n,)


def _identity(op: Callable, dtype) -> Any:
    """The value ``op`` ignores (its padding), or None for an operation not listed."""
    if op in (jnp.max, jnp.min):
        if jnp.issubdtype(dtype, jnp.inexact):
            return -jnp.inf if op is jnp.max else jnp.inf
        return jnp.iinfo(dtype).min if op is jnp.max else jnp.iinfo(dtype).max
    return {jnp.sum: 0, jnp.all: True, jnp.any: False}.get(op)


def _cut(n: int, padding: bool) -> tuple[int, Optional[tuple]]:
    """(entries of padding, the dimensions of at most 32) for an axis of n entries: n's own factors
    where they are all at most 32, else (``padding``) those of the first multiple of 32 above n
    that has them; (0, None) where neither applies."""
    factors = _short_factors(n)
    if factors is not None or not padding:
        return 0, factors
    m = -(-n // _REDUCE_WINDOW) * _REDUCE_WINDOW
    while _short_factors(m) is None:
        m += _REDUCE_WINDOW
    return m - n, _short_factors(m)


def reduce_in_one_kernel(op: Callable, x, axis: Optional[int] = -1, keepdims: bool = False):
    """``op(x, axis=axis, keepdims=keepdims)`` (``jnp.sum``, ``jnp.all``, ``jnp.any``, ``jnp.max``,
    ``jnp.min``) over one axis (``None``: over all, the array taken flat), that axis cut into
    dimensions of at most 32 entries (50 -> (25, 2); a length with a prime factor above 32 padded
    with the value the operation ignores first: 257 -> 288 = 9 x 32). XLA's CPU compiler splits a
    reduction over a longer dimension into two or three kernels of their own (reduce-windows of 32
    entries, then a reduce: a pairwise sum, for the precision of long float sums); this one it
    fuses with the operation that makes ``x``: fewer kernels to generate code for and to launch
    (LDA's SQUAREM cycle holds a dozen sums over the K topics, its SVI step a dozen tests over the
    K x V topics). The same value (a float sum up to rounding, in another order). A float sum over
    more than ``SHORT_AXIS`` entries stays ``op`` itself, pairwise, and so does every reduction
    traced for another backend than the CPU (JAX's default backend), whose compilers reduce
    otherwise."""
    x = jnp.asarray(x)
    if axis is None:
        if keepdims:
            raise ValueError("reduce_in_one_kernel: keepdims needs an axis")
        x, axis = x.reshape(-1), 0
    axis = axis % x.ndim
    n = x.shape[axis]
    fill = _identity(op, x.dtype)
    pad, factors = _cut(n, fill is not None)
    long_sum = op is jnp.sum and n > SHORT_AXIS and jnp.issubdtype(x.dtype, jnp.inexact)
    if factors is None or len(factors) == 1 or long_sum or jax.default_backend() != "cpu":
        return op(x, axis=axis, keepdims=keepdims)
    if pad:
        widths = [(0, 0)] * x.ndim
        widths[axis] = (0, pad)
        x = jnp.pad(x, widths, constant_values=fill)
    # held by an optimization barrier, or XLA's simplifier folds the reshape back into the reduction
    cut = jax.lax.optimization_barrier(x.reshape(x.shape[:axis] + factors + x.shape[axis + 1 :]))
    out = op(cut, axis=tuple(range(axis, axis + len(factors))))
    return jnp.expand_dims(out, axis) if keepdims else out
