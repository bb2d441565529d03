"""Test-wide JAX settings: float64 available, strict rank promotion (no silent broadcasting
of mismatched ranks). Tests that need float32 ask for it explicitly.

Compiled programs are released after each test module: XLA's CPU backend maps a few memory
regions per compiled kernel, and the whole suite in one process would otherwise reach Linux's
default limit of mappings per process (``vm.max_map_count``).

``vijax.run.run`` turns on JAX's persistent compilation cache, by default in the user's cache
folder; the suite points it at a temporary folder of its own instead (``VIJAX_COMPILE_CACHE``),
removed at the end, so that tests never write into the user's home.

The suite opts in to quicker CPU compiles, as ``vijax run`` does (``vijax.run.fast_cpu_compile``):
most of its time is compilation."""

import atexit
import gc
import os
import shutil
import tempfile

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
from vijax.run import fast_cpu_compile  # noqa: E402

if os.environ.get("JAX_PLATFORMS", "cpu") == "cpu":  # not on an accelerator (JAX_PLATFORMS=cuda, ...)
    fast_cpu_compile()  # before JAX starts
_COMPILE_CACHE = tempfile.mkdtemp(prefix="vijax-test-compile-cache-")
os.environ["VIJAX_COMPILE_CACHE"] = _COMPILE_CACHE
atexit.register(shutil.rmtree, _COMPILE_CACHE, ignore_errors=True)

import jax  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")

DTYPES = ["float32", "float64"]


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """After each test module: drop JAX's compilation caches so that its executables (and their
    memory mappings) are freed; a module's own tests still share their compilations."""
    yield
    jax.clear_caches()
    gc.collect()


@pytest.fixture(params=DTYPES)
def dtype(request):
    return request.param


def tol(dtype, f64=1e-6, f32=1e-5):
    """Exact-identity tolerances of STYLE.md: rtol 1e-6 in float64, 1e-5 in float32."""
    return f64 if str(dtype) == "float64" else f32
