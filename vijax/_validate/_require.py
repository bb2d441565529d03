"""Optional packages, imported where first needed: ``require`` names the extra that installs a missing one;
``tfp_substrate`` imports TFP's JAX substrate and names the command that mends a broken TFP install."""

from __future__ import annotations

import functools
import importlib
import importlib.metadata as metadata
import re
import warnings
from types import ModuleType


# each extra of vijax-toolkit (pyproject.toml) -> the module whose import shows it is installed
EXTRA_MODULES = {
    "arviz": "arviz",
    "plots": "matplotlib",
    "numpyro": "numpyro",
    "datasets": "sklearn",
    "nn": "equinox",
    "flows": "flowjax",
}


def install_line(extra: str) -> str:
    """The command that installs vijax with ``extra``."""
    return f'pip install "vijax-toolkit[{extra}]"'


def require(module: str, extra: str, what: str) -> ModuleType:
    """``module`` imported, or an ImportError (its ``name`` the module) saying that ``what`` needs it and
    giving the command that installs the ``extra`` providing it.

    Examples:
      >>> require("math", "none", "this example").pi > 3
      True
    """
    try:
        return importlib.import_module(module)
    except ImportError as err:
        top = module.split(".")[0]
        if err.name is not None and err.name.split(".")[0] != top:  # installed, but one of its imports failed
            why = f"{module} is installed but fails to import ({err})"
        else:
            why = f"{what} needs {top}, which is not installed"
        raise ImportError(f"{why}: {install_line(extra)}", name=top) from err


# TFP's JAX substrate comes from tfp-nightly (pyproject.toml says why); the stable tensorflow-probability,
# which some environments preinstall, installs the same tensorflow_probability/ folder.
TFP_NIGHTLY, TFP_STABLE, _TFP = "tfp-nightly", "tensorflow-probability", "tensorflow_probability"


def _installed(distribution: str):
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def tfp_requirement() -> str:
    """vijax's requirement on tfp-nightly as pip takes it (``tfp-nightly<=...,>=...``), read from the
    installed vijax's metadata (``tfp-nightly`` where vijax's metadata is not found)."""
    try:
        requires = metadata.requires("vijax-toolkit") or []
    except metadata.PackageNotFoundError:
        requires = []
    for req in requires:
        if re.match(r"tfp[-_.]nightly\b", req, re.IGNORECASE) and ";" not in req:
            return req.replace(" ", "")
    return TFP_NIGHTLY


def tfp_fix() -> str:
    """The commands that leave exactly vijax's tfp-nightly in the environment."""
    return f'pip uninstall -y {TFP_STABLE} {TFP_NIGHTLY} && pip install "{tfp_requirement()}"'


@functools.cache  # checked once per process (an ImportError is not cached: a mended install imports)
def tfp_substrate() -> ModuleType:
    """``tensorflow_probability.substrates.jax``, or an ImportError that says what is wrong with the TFP
    install and the command that mends it. tfp-nightly and tensorflow-probability share one folder: with
    both installed, the files are those of whichever was installed last, and uninstalling either one
    deletes files the other needs, all while ``pip check`` stays clean. A working import beside both
    warns (the next pip command touching either may break it)."""
    nightly, stable = _installed(TFP_NIGHTLY), _installed(TFP_STABLE)
    try:
        tfp = importlib.import_module("tensorflow_probability.substrates.jax")
    except (ImportError, AttributeError) as err:
        if nightly is None and stable is None:
            raise ImportError(f"TFP is not installed (vijax needs {TFP_NIGHTLY}): {tfp_fix()}", name=_TFP) from err
        if nightly and stable:
            what = f"both {TFP_NIGHTLY} {nightly} and {TFP_STABLE} {stable} are installed, sharing one folder"
        elif stable:
            what = f"{TFP_STABLE} {stable} is installed where vijax needs {TFP_NIGHTLY}"
        else:
            what = f"{TFP_NIGHTLY} {nightly} is installed but its files are missing or not its own"
        raise ImportError(
            f"TFP's JAX substrate fails to import ({type(err).__name__}: {err}): {what}; run {tfp_fix()}", name=_TFP
        ) from err
    if nightly and stable:
        warnings.warn(
            f"both {TFP_NIGHTLY} {nightly} and {TFP_STABLE} {stable} are installed, sharing one folder: "
            f"TFP imports now, but reinstalling or uninstalling either breaks it; run {tfp_fix()}",
            stacklevel=4,
        )
    return tfp
