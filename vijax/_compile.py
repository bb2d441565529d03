"""Programs that run once, compiled quickly: ``setup_jit``.

A set-up (``from_numpyro``'s start, ``conjugate_sites``' checks, ``auto_family``, ``ngvi``'s start
probe, a TFP joint's prior draws) is a program that runs once on small arrays: its compile time is
all a user waits for, its run time is negligible. On a CPU, XLA spends that time on each fused
kernel (the MLIR fusion emitters, then LLVM's optimisation passes), so such a program is compiled
with the classic kernel emitter and LLVM at ``-O0`` (``SETUP_CPU_OPTIONS``, passed as the program's
own ``compiler_options``, so nothing else in the process changes; ``benchmarks/numpyro_models.py``
times the set-ups). A step, which runs many times, is compiled as a user's ``jax.jit`` compiles it.

Where the options cannot apply, the program is the plain ``jax.jit``: on another backend than the
CPU, called inside a trace (JAX takes ``compiler_options`` only at the top level: a nested call is
part of the caller's program), or with an XLA that does not know an option (it raises "No such
compile option"; the plain program is used from then on).
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable

import jax

SETUP_CPU_OPTIONS = {"xla_cpu_use_fusion_emitters": False, "xla_backend_optimization_level": 0}
_OPTIONS_KNOWN = [True]  # False once XLA has refused an option: every later call is the plain jit


def _trace_state():
    import jax.extend.core  # loads JAX's Pallas modules: at the first call, not at import

    return jax.extend.core.get_opaque_trace_state(convention="vijax")


@functools.lru_cache(maxsize=1)
def _eager_state():
    """The trace state with no trace under way: read in a fresh thread (JAX's trace state is the
    thread's), so that a first call inside a trace reads the right one."""
    box = []
    thread = threading.Thread(target=lambda: box.append(_trace_state()))
    thread.start()
    thread.join()
    return box[0]


def _at_top_level() -> bool:
    return _trace_state() == _eager_state()


class SetupJit:
    """``fn`` under ``jax.jit(fn, **jit_kwargs)``, compiled with ``SETUP_CPU_OPTIONS`` where they
    apply (module docstring). ``_cache_size()`` counts the programs of both compilations."""

    def __init__(self, fn: Callable, **jit_kwargs: Any):
        self.plain = jax.jit(fn, **jit_kwargs)
        self.quick = jax.jit(fn, compiler_options=SETUP_CPU_OPTIONS, **jit_kwargs)
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _OPTIONS_KNOWN[0] and jax.default_backend() == "cpu" and _at_top_level():
            try:
                return self.quick(*args, **kwargs)
            except jax.errors.JaxRuntimeError as e:  # raised by the compiler: nothing has run
                if "No such compile option" not in str(e):
                    raise
                _OPTIONS_KNOWN[0] = False
        return self.plain(*args, **kwargs)

    def _cache_size(self) -> int:
        return self.quick._cache_size() + self.plain._cache_size()


def setup_jit(fn: Callable = None, **jit_kwargs: Any):
    """``SetupJit(fn, **jit_kwargs)``; usable as a decorator, with or without keyword arguments
    (``@setup_jit``, ``@setup_jit(static_argnums=0)``)."""
    if fn is None:
        return lambda f: SetupJit(f, **jit_kwargs)
    return SetupJit(fn, **jit_kwargs)


__all__ = ["SETUP_CPU_OPTIONS", "SetupJit", "setup_jit"]
