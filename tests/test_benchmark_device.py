"""Every benchmark takes ``--device`` (``benchmarks/_device.py``), and one that asks for a device
JAX does not see stops with a message naming it, before any work."""

from __future__ import annotations

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p for p in (ROOT / "benchmarks").glob("*.py") if not p.name.startswith("_"))


def test_every_benchmark_has_the_device_switch():
    assert SCRIPTS
    missing = [p.name for p in SCRIPTS if "add_device_argument(" not in p.read_text()]
    assert not missing, f"benchmarks without --device: {missing}"


def test_a_device_jax_does_not_see_is_named():
    # no TPU on the machines the suite runs on; the script stops in use_device, before any work
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gmm_em.py"), "--device", "tpu"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode != 0
    assert "--device tpu: JAX sees no TPU" in out.stderr
