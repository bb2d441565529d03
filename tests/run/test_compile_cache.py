"""JAX's persistent compilation cache: where ``vijax.run`` puts it, how it is turned off, and that a
run writes its compiled chunk there (and the command line's flags)."""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.run.test_cli import write_config
from vijax.inference import VIAlgorithm
from vijax.run import RunConfig, main, run
from vijax.run._cache import ENV_VAR, compile_cache_dir, default_compile_cache_dir, enable_compile_cache


@pytest.fixture
def restore_cache_dir():
    """Puts JAX's cache folder (the suite's temporary one) back after the test."""
    before = jax.config.jax_compilation_cache_dir
    yield
    enable_compile_cache(before if before else False)


def test_folder_resolution(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_compile_cache_dir() == str(tmp_path / "xdg" / "vijax" / "jax")
    monkeypatch.setenv("XDG_CACHE_HOME", "")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_compile_cache_dir() == str(tmp_path / "home" / ".cache" / "vijax" / "jax")
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "env"))
    assert compile_cache_dir(True) == str(tmp_path / "env")
    assert compile_cache_dir(str(tmp_path / "mine")) == str(tmp_path / "mine")  # the setting wins
    assert compile_cache_dir(False) is None
    for off in ("0", "off", "False", "none", ""):
        monkeypatch.setenv(ENV_VAR, off)
        assert compile_cache_dir(True) is None
    with pytest.raises(ValueError, match="compile_cache"):
        compile_cache_dir(3)
    with pytest.raises(ValueError, match="run.compile_cache"):
        RunConfig.from_dict({"compile_cache": " "})
    with pytest.raises(ValueError, match="run.compile_cache"):
        RunConfig.from_dict({"compile_cache": 1})


def _toy_run(**settings):
    step = lambda k, x, b: (x + 0.5 * (b - x) + 1e-3 * jnp.sin(x).sum(), {"elbo": -((x - b) ** 2).sum()})
    alg = VIAlgorithm(init=lambda key: jnp.zeros(3), step=step)
    return run(
        alg,
        jax.random.PRNGKey(0),
        batch_fn=lambda k, t: jnp.ones(3),
        num_steps=4,
        chunk_size=2,
        progress=False,
        **settings,
    )


def test_run_writes_the_cache_where_told_and_not_when_off(tmp_path, monkeypatch, restore_cache_dir):
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    try:
        folder = tmp_path / "cache"
        _toy_run(compile_cache=str(folder))
        assert jax.config.jax_compilation_cache_dir == str(folder)
        assert any(name.startswith("jit_chunk") for name in os.listdir(folder))
        jax.clear_caches()
        _toy_run(compile_cache=False)
        assert jax.config.jax_compilation_cache_dir is None
        monkeypatch.setenv(ENV_VAR, "off")
        _toy_run()  # the default setting, the environment says off
        assert jax.config.jax_compilation_cache_dir is None
        monkeypatch.setenv(ENV_VAR, str(tmp_path / "env"))
        _toy_run()
        assert jax.config.jax_compilation_cache_dir == str(tmp_path / "env")
        # a library call without the setting or the variable leaves JAX's setting (writes nothing unasked)
        monkeypatch.delenv(ENV_VAR)
        enable_compile_cache(False)
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        _toy_run()
        assert jax.config.jax_compilation_cache_dir is None and not (tmp_path / "xdg").exists()
    finally:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)


def test_command_line_flags(tmp_path, monkeypatch, restore_cache_dir):
    config = write_config(tmp_path)
    out = tmp_path / "out"
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    enable_compile_cache(False)
    assert main(["run", config, "--out", str(out), "--no-progress", "--set", "run.num_steps=40"]) == 0
    assert jax.config.jax_compilation_cache_dir == str(tmp_path / "xdg" / "vijax" / "jax")  # on for the command
    assert "compile_cache: true" in (out / "config.yaml").read_text()
    assert (
        main(
            [
                "run",
                config,
                "--out",
                str(out),
                "--no-progress",
                "--set",
                "run.num_steps=40",
                "--compile-cache",
                str(tmp_path / "c"),
            ]
        )
        == 0
    )
    assert jax.config.jax_compilation_cache_dir == str(tmp_path / "c")
    assert (
        main(["run", config, "--out", str(out), "--no-progress", "--set", "run.num_steps=40", "--no-compile-cache"])
        == 0
    )
    assert jax.config.jax_compilation_cache_dir is None
    assert "compile_cache: false" in (out / "config.yaml").read_text()
    with pytest.raises(SystemExit):
        main(["run", config, "--no-compile-cache", "--compile-cache", str(tmp_path)])


def test_a_checked_step_s_chunk_is_cached(tmp_path, restore_cache_dir):
    """A step with value checks (here CAVI on a Gaussian mixture) traced by the runner has no host
    callback (its checks are outputs of the chunk, vijax._validate.collected_value_checks), so JAX's
    persistent cache stores its chunk: it stores no program with a host callback, and the second
    start of a run would compile again. (A bad batch still fails the run naming the value, its
    position and the step: tests/test_hostile_inputs.py, test_value_check_under_jit_and_in_the_runner.)"""
    from vijax.inference import cavi
    from vijax.models import DiagonalGMM

    x = jnp.asarray(np.random.default_rng(0).normal(size=(40, 2)))
    alg = cavi(DiagonalGMM.from_data(x, num_components=2))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    try:
        folder = tmp_path / "cache"
        run(alg, jax.random.PRNGKey(0), batch_fn=lambda k, t: x, compile_cache=str(folder), num_steps=2, progress=False)
        assert any(name.startswith("jit_chunk") for name in os.listdir(folder))
    finally:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)


def test_small_programs_are_cached_too_unless_the_user_chose_a_threshold(tmp_path, restore_cache_dir):
    """JAX writes only programs that took at least 1 s to compile by default; vijax lowers that to
    MIN_COMPILE_TIME_S (an LDA init's Gamma draws compile in 0.6-1 s) but keeps a user's own value."""
    from vijax.run._cache import MIN_COMPILE_TIME_S

    before = jax.config.jax_persistent_cache_min_compile_time_secs
    try:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)  # JAX's default
        enable_compile_cache(str(tmp_path / "a"))
        assert jax.config.jax_persistent_cache_min_compile_time_secs == MIN_COMPILE_TIME_S < 1.0
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 3.0)  # the user's
        enable_compile_cache(str(tmp_path / "b"))
        assert jax.config.jax_persistent_cache_min_compile_time_secs == 3.0
    finally:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", before)
