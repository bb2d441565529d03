"""vijax's one compile-tuning policy (docs/decisions.md gives each tuning's end-to-end figure).

vijax compiles with XLA's settings. A user opts in to quicker CPU compiles for the whole process with
``vijax.run.fast_cpu_compile()`` (what ``vijax run`` does), or per step with ``jit_step`` (its default
``cpu_compile="quick"``: :func:`step_cpu_options`): the classic kernel emitter instead of the MLIR fusion
emitters (and, process-wide, no loop unrolling by LLVM). Results are the same up to rounding. On a GPU,
:func:`step_gpu_options` turns off XLA's autotuning, which times candidate kernels while it compiles: vijax's
steps are small programs, bound by kernel launches more than by the kernels' speed; TPU programs are unaffected. ``jit_step`` pauses Python's cyclic collector for a step's first trace, lowering and
compile (:func:`collection_paused`).

Set-ups a user waits for once (a NumPyro model's start, ``auto_family``, the start checks of ``bbvi`` and ``ngvi``,
``conjugate_sites``' checks) run once on small arrays: :func:`setup_jit` compiles them, on a CPU, with the classic
emitter and LLVM at ``-O0`` (the program's own ``compiler_options``), as module-level functions of the arrays they
read, so that JAX's cache serves a repeated call; op by op where a user's model needs concrete values
(:func:`jit_or_eager`). JAX's Gamma sampler is a rejection loop that XLA compiles for seconds, so two kinds of
draws are made on the host: LDA's random topics (:func:`gamma_on_host`) and the draws of q at which ``ngvi``'s
start checks evaluate the joint (:func:`draws_on_host`).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
from typing import Callable, Optional

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


@functools.lru_cache(maxsize=1)
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
    import jax

    if jax.default_backend() != "cpu":
        return None
    return {"xla_cpu_use_fusion_emitters": False, "xla_backend_optimization_level": 2}


@contextlib.contextmanager
def collection_paused(pause: bool = True):
    """Python's cyclic garbage collector paused for the block (``pause``), as it was after, also on error:
    ``jit_step``'s first trace, lowering and compile allocate many objects that live until the program is
    built, and the collector's full passes over a JAX process's heap would fall inside them."""
    was = gc.isenabled()
    if pause:
        gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


GPU_AUTOTUNE_LEVEL = 0  # XLA's GEMM and fusion autotuning off: each kernel's first candidate, none timed (XLA: 4)
_AUTOTUNE = "--xla_gpu_autotune_level"


def step_gpu_options() -> Optional[dict]:
    """The ``compiler_options`` of a step on a GPU, ``{"xla_gpu_autotune_level": GPU_AUTOTUNE_LEVEL}``, or None: on
    another backend, or where ``XLA_FLAGS`` set the level (the user's choice)."""
    if _AUTOTUNE in os.environ.get("XLA_FLAGS", ""):
        return None
    import jax

    if jax.default_backend() != "gpu":
        return None
    return {"xla_gpu_autotune_level": GPU_AUTOTUNE_LEVEL}


def step_compile_options() -> Optional[dict]:
    """The platform's ``compiler_options`` of a step: :func:`step_cpu_options` on a CPU, :func:`step_gpu_options`
    on a GPU, None elsewhere."""
    return step_cpu_options() or step_gpu_options()


SETUP_OPTIONS = {"xla_cpu_use_fusion_emitters": False, "xla_backend_optimization_level": 0}
_NESTED = "can only be passed to top-level"  # JAX's refusal of compiler_options inside a caller's trace


def setup_jit(fn: Callable, **jit_kwargs) -> Callable:
    """``jax.jit(fn, **jit_kwargs)``, compiled with ``SETUP_OPTIONS`` where it is called at the top
    level on a CPU whose jaxlib knows them (inside a caller's trace it is part of the caller's
    program)."""
    import jax

    plain = jax.jit(fn, **jit_kwargs)
    quick = jax.jit(fn, compiler_options=SETUP_OPTIONS, **jit_kwargs)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if _jaxlib_version() < KNOWN_BELOW and jax.default_backend() == "cpu":
            try:
                return quick(*args, **kwargs)
            except ValueError as e:
                if _NESTED not in str(e):
                    raise
        return plain(*args, **kwargs)

    call._cache_size = lambda: plain._cache_size() + quick._cache_size()
    return call


def jit_or_eager(jitted: Callable, fn: Callable) -> Callable:
    """A call of ``jitted`` (``fn`` under ``jax.jit``), or of ``fn`` op by op where tracing it
    fails with a TypeError: a user's model that needs concrete values
    (``jax.errors.ConcretizationTypeError`` and JAX's other tracer conversion errors are
    TypeErrors), or an argument ``jit`` cannot take. A genuine TypeError is raised again by
    ``fn``; a value check failing inside ``jitted`` raises its ValueError."""

    def call(*args, **kwargs):
        import jax

        from vijax._validate import raise_batch_error

        try:
            return jitted(*args, **kwargs)
        except TypeError:
            return fn(*args, **kwargs)
        except jax.errors.JaxRuntimeError as e:  # a traced value check's failure: its ValueError
            raise_batch_error(e)

    return call


def gamma_on_host(key, shape: tuple, concentration: float, rate: float, dtype):
    """Gamma(concentration, rate) draws of ``shape``, made by NumPy's generator seeded with the key's
    data. A concrete key draws directly; a traced one (under ``jit`` or ``vmap``) through a host
    callback, so that a key gives the same draw everywhere."""
    import jax
    import numpy as np

    def draw(data):
        data = np.asarray(data, np.uint32)
        out = np.empty(data.shape[:-1] + tuple(shape), dtype)
        for i in np.ndindex(data.shape[:-1]):
            rng = np.random.default_rng(np.random.SeedSequence([int(w) for w in data[i]]))
            out[i] = rng.gamma(concentration, 1.0 / rate, shape)
        return out

    data = jax.random.key_data(key)
    if isinstance(data, jax.core.Tracer):
        return jax.pure_callback(draw, jax.ShapeDtypeStruct(tuple(shape), dtype), data, vmap_method="expand_dims")
    return jax.device_put(draw(data))


def host_rng(key, *stream: int):
    """A NumPy generator seeded with a concrete key's words (and ``stream``): host draws that a key decides."""
    import jax
    import numpy as np

    return np.random.default_rng([*np.asarray(jax.random.key_data(key), np.uint32).ravel().tolist(), *stream])


def draws_on_host(family, key, num: int):
    """``num`` draws of each Normal, Gamma, Beta or Dirichlet family of the pytree ``family``, stacked on a
    leading axis, by NumPy's generator seeded with a concrete key's words; None where another family is
    in it."""
    import jax
    import numpy as np

    from vijax import expfam

    rng = host_rng(key, 1)  # a stream apart from the start checks' directions (stream 0)

    def draw(f):  # from the natural parameters, in NumPy (a family's properties would compile a program each)
        eta = [np.asarray(x, np.float64) for x in jax.tree_util.tree_leaves(f)]
        size = (num,) + eta[0].shape
        if type(f) is expfam.Normal:  # eta = (mu / sigma^2, -1 / (2 sigma^2))
            return rng.normal(-0.5 * eta[0] / eta[1], np.sqrt(-0.5 / eta[1]), size)
        if type(f) is expfam.Gamma:  # eta = (alpha - 1, -beta)
            return rng.gamma(eta[0] + 1.0, -1.0 / eta[1], size)
        if type(f) is expfam.Beta:  # eta = (a - 1, b - 1)
            return rng.beta(eta[0] + 1.0, eta[1] + 1.0, size)
        if type(f) is expfam.Dirichlet:  # eta = alpha - 1
            g = rng.gamma(eta[0] + 1.0, 1.0, size)
            return g / g.sum(-1, keepdims=True)
        return None

    fams = jax.tree_util.tree_leaves(family, is_leaf=expfam.is_family)
    out = [draw(f) for f in fams]
    if any(x is None for x in out):
        return None
    dtypes = [jax.numpy.result_type(*jax.tree_util.tree_leaves(f)) for f in fams]
    return jax.tree_util.tree_unflatten(
        jax.tree_util.tree_structure(family, is_leaf=expfam.is_family), [x.astype(d) for x, d in zip(out, dtypes)]
    )


__all__ = [
    "collection_paused",
    "EXTRA_OPTIONS",
    "draws_on_host",
    "FLAGS",
    "fast_cpu_compile",
    "gamma_on_host",
    "host_rng",
    "jit_or_eager",
    "setup_jit",
    "step_compile_options",
    "step_cpu_options",
    "step_gpu_options",
    "with_fast_cpu_compile",
]
