"""``vijax.run.fast_cpu_compile``: quicker CPU compile settings merged into ``XLA_FLAGS`` without
overriding the user's, set only before JAX starts its backends, and in force in a process that
then computes the same as one without them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from vijax.run import RunConfig
from vijax._compile import EXTRA_OPTIONS, FLAGS, with_fast_cpu_compile

OURS = f"{' '.join(FLAGS)} --xla_backend_extra_options={','.join(EXTRA_OPTIONS)}"


@pytest.mark.parametrize(
    "before, after",
    [
        ("", OURS),
        ("--xla_force_host_platform_device_count=2", "--xla_force_host_platform_device_count=2 " + OURS),
        (OURS, OURS),  # idempotent
        # the user's value of a flag stays, and their extra options are kept in the one list
        (
            "--xla_cpu_use_fusion_emitters=true --xla_backend_extra_options=a=1,b",
            "--xla_cpu_use_fusion_emitters=true --xla_backend_extra_options=a=1,b," + ",".join(EXTRA_OPTIONS),
        ),
        (
            f"--xla_backend_extra_options={EXTRA_OPTIONS[0]}",
            f"{' '.join(FLAGS)} --xla_backend_extra_options={EXTRA_OPTIONS[0]}",
        ),
    ],
)
def test_flags_are_merged_into_the_users(before, after):
    assert with_fast_cpu_compile(before) == after


_CHILD = """
import json, os, sys
import jax, jax.numpy as jnp
from vijax.run import fast_cpu_compile
if sys.argv[1] == "late":
    jax.devices()  # the backends start before the call
ok = fast_cpu_compile()
x = jnp.linspace(0.1, 3.0, 64)
y = float(jnp.sum(jax.scipy.special.digamma(x) * jnp.log(x)))
print(json.dumps({"ok": ok, "flags": os.environ.get("XLA_FLAGS", ""), "y": y}))
"""


def _child(when: str, xla_flags: str) -> dict:
    env = dict(os.environ, XLA_FLAGS=xla_flags, JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, "-c", _CHILD, when], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_set_before_the_backends_start_and_not_after():
    early, late = _child("early", ""), _child("late", "")
    assert early["ok"] and early["flags"] == OURS
    assert not late["ok"] and late["flags"] == ""  # too late: left as it was, and said so
    assert abs(early["y"] - late["y"]) <= 1e-5 * abs(late["y"])  # the same result, compiled either way
    assert _child("late", OURS)["ok"]  # already in force


def test_nothing_is_added_for_a_jaxlib_that_does_not_know_the_flags(monkeypatch):
    # jaxlib 0.11 stops the process at --xla_cpu_use_fusion_emitters (unknown to it)
    from vijax import _compile

    monkeypatch.setattr(_compile, "_jaxlib_version", lambda: (0, 11))
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
    assert _compile.fast_cpu_compile() is False
    assert os.environ["XLA_FLAGS"] == "--xla_force_host_platform_device_count=2"
    monkeypatch.undo()
    assert _compile._jaxlib_version() < _compile.KNOWN_BELOW  # the installed one (pinned below 0.11)


def test_step_options_apply_on_a_cpu_unless_the_process_chose_the_emitter(monkeypatch):
    from vijax import _compile

    monkeypatch.setenv("XLA_FLAGS", "")
    assert _compile.step_cpu_options() == {"xla_cpu_use_fusion_emitters": False, "xla_backend_optimization_level": 2}
    monkeypatch.setenv("XLA_FLAGS", OURS)  # fast_cpu_compile's (or the user's) choice stays in force
    assert _compile.step_cpu_options() is None
    monkeypatch.setenv("XLA_FLAGS", "")
    monkeypatch.setattr(_compile, "_jaxlib_version", lambda: (0, 11))  # an XLA that does not know the option
    assert _compile.step_cpu_options() is None


def test_run_config_setting():
    assert RunConfig().fast_cpu_compile is True
    with pytest.raises(ValueError, match="run.fast_cpu_compile"):
        RunConfig.from_dict({"fast_cpu_compile": "yes"})
