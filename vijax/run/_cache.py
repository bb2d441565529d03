"""JAX's persistent compilation cache: on for the ``vijax`` command, opt-in for a library call of ``run``.
Its folder, first match wins: the run setting ``compile_cache`` (``false``: off); ``$VIJAX_COMPILE_CACHE``
(``0``/``off``/``false``/``no``/``none``/empty: off); JAX's current folder; ``$XDG_CACHE_HOME/vijax/jax``,
else ``~/.cache/vijax/jax``. The cache is trusted code: do not point it at a folder others can write.
"""

from __future__ import annotations

import os
import warnings
from typing import Optional, Union

import jax

ENV_VAR = "VIJAX_COMPILE_CACHE"
MIN_COMPILE_TIME_S = 0.01  # programs compiled faster are not written (JAX's default: 1 s)
_JAX_DEFAULT_MIN_COMPILE_TIME_S = 1.0
_OFF = frozenset({"", "0", "off", "false", "no", "none"})


def default_compile_cache_dir() -> str:
    """``$XDG_CACHE_HOME/vijax/jax``, or ``~/.cache/vijax/jax`` when that variable is unset or empty."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "vijax", "jax")


def compile_cache_dir(setting: Union[bool, str, None] = True) -> Optional[str]:
    """The cache folder for ``setting`` (``True``, ``False``, a folder, or None: a library call's default), or
    None when it is off."""
    if isinstance(setting, str):
        if not setting.strip():
            raise ValueError("compile_cache: expected true, false or a folder, got an empty string")
        return os.path.abspath(os.path.expanduser(setting))
    if setting is False:
        return None
    if setting is not True and setting is not None:
        raise ValueError(f"compile_cache: expected true, false or a folder, got {setting!r}")
    env = os.environ.get(ENV_VAR)
    if env is not None:
        return None if env.strip().lower() in _OFF else os.path.abspath(os.path.expanduser(env.strip()))
    current = jax.config.jax_compilation_cache_dir or None
    return current if setting is None or current else default_compile_cache_dir()


def enable_compile_cache(setting: Union[bool, str] = True) -> Optional[str]:
    """Points JAX's persistent compilation cache at ``compile_cache_dir(setting)``, or turns it off; returns the
    folder in use, or None."""
    from jax.experimental.compilation_cache import compilation_cache as cc

    path = compile_cache_dir(setting)
    current = jax.config.jax_compilation_cache_dir
    if path == current:
        return path
    if path is not None:
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as e:
            warnings.warn(
                f"vijax: no persistent compilation cache ({e}); programs compile on every start", stacklevel=2
            )
            path = None
            if current is None:
                return None
    cc.reset_cache()  # JAX opens its cache folder once; forget the old one
    jax.config.update("jax_compilation_cache_dir", path)
    if path is not None and jax.config.jax_persistent_cache_min_compile_time_secs == _JAX_DEFAULT_MIN_COMPILE_TIME_S:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_TIME_S)  # a user's own value stays
    return path
