"""XLA's CPU compiler settings that vijax's own processes start with: ``fast_cpu_compile``.

On a CPU, XLA compiles each fused kernel of a program with LLVM, and most of a vijax step's
compile time is there. Two of XLA's CPU settings about halve it (every config's chunk:
``benchmarks/compile_time.py --compare-flags``) and ran the LDA SVI step 11% faster
(``benchmarks/xla_flags.py``, the one step timed with and without them; shared 2-core x86_64 VM,
docs/design.md, "Compile time and program size"):

- ``--xla_cpu_use_fusion_emitters=false``: the classic elemental kernel emitter instead of the
  MLIR fusion emitters;
- ``xla_cpu_disable_loop_unrolling`` (in ``--xla_backend_extra_options``): LLVM does not unroll
  the kernels' loops (the tiled E-step's small static loops were unrolled into kernels of up to
  0.5 MB of IR).

Both affect only how XLA compiles for the CPU (not the results of a step beyond floating-point
rounding, nor GPU/TPU programs). XLA reads ``XLA_FLAGS`` once, when JAX starts its backends, so
they must be set before the first JAX computation of the process: ``vijax run`` does it
(``RunConfig.fast_cpu_compile``, on by default), and so may a user's program, first thing.

They are flags of the jaxlib versions vijax supports (below 0.11). jaxlib 0.11 no longer knows
``--xla_cpu_use_fusion_emitters``, and XLA stops the whole process at a flag it does not know
(seen with jaxlib 0.11.2: "Unknown flag in XLA_FLAGS"), so with a newer jaxlib nothing is added.
"""

from __future__ import annotations

import os

FLAGS = ("--xla_cpu_use_fusion_emitters=false",)
KNOWN_BELOW = (0, 11)  # the jaxlib versions whose XLA knows these flags
EXTRA_OPTIONS = ("xla_cpu_disable_loop_unrolling",)
_EXTRA = "--xla_backend_extra_options="


def _extra_options(tokens) -> list:
    return [o for t in tokens if t.startswith(_EXTRA) for o in t[len(_EXTRA) :].split(",") if o]


def _missing(xla_flags: str) -> tuple[list, list]:
    """The fast-compile flags and backend extra options that ``xla_flags`` does not set (a flag it
    sets to another value counts as set: the user's choice stays)."""
    tokens = xla_flags.split()
    names = {t.split("=", 1)[0] for t in tokens}
    extra = {o.split("=", 1)[0] for o in _extra_options(tokens)}
    return [f for f in FLAGS if f.split("=", 1)[0] not in names], [o for o in EXTRA_OPTIONS if o not in extra]


def with_fast_cpu_compile(xla_flags: str) -> str:
    """``xla_flags`` (an ``XLA_FLAGS`` value) with the fast-compile settings added; a flag the
    value already sets keeps its value, and backend extra options already given are kept
    (``--xla_backend_extra_options`` takes one comma-separated list)."""
    tokens = xla_flags.split()
    flags, options = _missing(xla_flags)
    if not flags and not options:
        return xla_flags
    extra = _extra_options(tokens) + options
    return " ".join([t for t in tokens if not t.startswith(_EXTRA)] + flags + [_EXTRA + ",".join(extra)])


def _jaxlib_version() -> tuple:
    from jaxlib import version  # the installed jaxlib's version, read without starting JAX

    return tuple(int(p) for p in version.__version__.split(".")[:2])


def _backends_started() -> bool:
    from jax._src import xla_bridge  # no public API says whether the backends have started

    return bool(xla_bridge.backends_are_initialized())


def fast_cpu_compile() -> bool:
    """Adds XLA's fast CPU compile settings (this module's docstring) to ``XLA_FLAGS``, for this
    process and the processes it starts, keeping any flag already there. About halves the compile
    time of vijax's steps on a CPU (the LDA SVI step, the one timed at steady state, ran 11% faster).

    Call it before the first JAX computation (``vijax run`` does, through
    ``RunConfig.apply_process_settings``); later it changes nothing, since XLA has read its flags.

    Returns:
      Whether the settings are in force: True when they were added before JAX started its
      backends or were already in ``XLA_FLAGS``, False when JAX had started without them or
      the installed jaxlib does not know them (0.11 and newer: nothing is added).

    Examples:
      >>> import vijax.run
      >>> vijax.run.fast_cpu_compile()  # doctest: +SKIP
      True
    """
    before = os.environ.get("XLA_FLAGS", "")
    if _jaxlib_version() >= KNOWN_BELOW:
        return False  # an unknown flag would stop the process when JAX starts
    if _missing(before) == ([], []):
        return True
    if _backends_started():
        return False
    os.environ["XLA_FLAGS"] = with_fast_cpu_compile(before)
    return True


__all__ = ["fast_cpu_compile", "with_fast_cpu_compile"]
