"""Where a benchmark's JAX code runs: the ``--device`` switch every benchmark takes.

``--device cpu`` (the default) pins JAX to the CPU and adds XLA's fast CPU compile settings, as
``vijax run`` starts (``vijax.run.fast_cpu_compile``); ``--device gpu`` (or ``tpu``) runs JAX on
the accelerator and stops with a clear message when JAX sees none. Peers that are not JAX
(scikit-learn, gensim, hmmlearn) run on the CPU whatever the switch; JAX peers (NumPyro, dynamax)
run where JAX runs. Call ``use_device`` after parsing the arguments and before the first JAX
computation: JAX reads its platform once, when it starts its backends.
"""

from __future__ import annotations

import argparse
import os

import jax

from vijax.run import fast_cpu_compile

DEVICES = ("cpu", "gpu", "tpu")
# the CPU stays listed after an accelerator (the accelerator is the default device): a host callback
# (jax.debug.callback, e.g. a value check deeper than a step) needs a CPU device to place its inputs on
_PLATFORMS = {"cpu": "cpu", "gpu": "cuda,cpu", "tpu": "tpu,cpu"}


def add_device_argument(parser: argparse.ArgumentParser) -> None:
    """Adds ``--device {cpu,gpu,tpu}`` (default cpu) to ``parser``."""
    parser.add_argument(
        "--device",
        choices=DEVICES,
        default="cpu",
        help="where JAX runs (default cpu; the peers that are not JAX stay on the CPU)",
    )


def use_device(device: str, fast_cpu: bool = True) -> str:
    """Pins JAX to ``device`` (before its first computation), on the CPU with XLA's fast compile
    settings unless ``fast_cpu`` is False, and returns a description of it, e.g. ``"cpu (cpu)"``
    or ``"gpu (NVIDIA H100 80GB HBM3)"``, for the benchmark's JSON."""
    if device not in DEVICES:
        raise SystemExit(f"--device must be one of {', '.join(DEVICES)}, got {device!r}")
    jax.config.update("jax_platforms", _PLATFORMS[device])
    if device == "cpu" and fast_cpu:
        fast_cpu_compile()  # XLA's CPU compile settings of `vijax run`, before anything runs
    try:
        devices = jax.devices(_PLATFORMS[device].split(",")[0])
    except Exception as e:  # a RuntimeError, or an AssertionError where no plugin for it is installed
        raise SystemExit(
            f"--device {device}: JAX sees no {device.upper()} ({e}); install the matching jax "
            "(e.g. jax[cuda12]) or use --device cpu"
        ) from e
    return f"{device} ({devices[0].device_kind})"


def child_env(device: str) -> dict:
    """The environment for a benchmark's child process that should run JAX on ``device``."""
    return dict(os.environ, JAX_PLATFORMS=_PLATFORMS[device])


def machine(device: str, load_at_start) -> dict:
    """The machine a benchmark ran on, for its JSON: platform, CPU count, JAX's version, ``device``
    (``use_device``'s description) and the load average at the start and now."""
    import platform

    return {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "jax": jax.__version__,
        "device": device,
        "loadavg_1_5_15_min_at_start": list(load_at_start),
        "loadavg_1_5_15_min_at_end": list(os.getloadavg()),
    }
