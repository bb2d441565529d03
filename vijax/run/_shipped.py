"""The experiment configs vijax ships (the repository's ``configs/*.yaml``, copied into the wheel as
``vijax/run/configs`` by ``setup.py``) and how ``vijax run NAME`` finds one."""

from __future__ import annotations

import os
import pathlib
from typing import Optional

from ._config import ConfigError


def shipped_config_dir() -> Optional[pathlib.Path]:
    """The folder of the configs vijax ships (the papers' experiments, ``configs/*.yaml``): inside an
    installed wheel ``vijax/run/configs``; in a checkout the repository's ``configs/``; None where
    neither exists."""
    here = pathlib.Path(__file__).resolve().parent  # vijax/run
    for folder in (here / "configs", here.parents[1] / "configs"):
        if folder.is_dir() and any(folder.glob("*.yaml")):
            return folder
    return None


def shipped_configs() -> list[str]:
    """The names of the shipped configs (``vijax run NAME`` runs ``NAME.yaml``), sorted."""
    folder = shipped_config_dir()
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder is not None else []


def resolve_config(arg: str) -> str:
    """The file ``vijax run ARG`` reads: ``ARG`` itself where it exists; else, for a name
    (``gmm_simulation``, ``gmm_simulation.yaml``) or a path into a ``configs/`` folder that is not
    here (``configs/gmm_simulation.yaml`` from the README, run outside a checkout), the shipped
    config of that name. ConfigError naming the argument and the shipped configs otherwise."""
    if os.path.exists(arg):
        return arg
    head, name = os.path.split(os.path.normpath(arg))
    stem = name[: -len(".yaml")] if name.endswith(".yaml") else name
    folder = shipped_config_dir()
    if head in ("", "configs") and folder is not None and (folder / f"{stem}.yaml").is_file():
        return str(folder / f"{stem}.yaml")
    if head == "" and not name.endswith((".yaml", ".yml")):  # a name, not a file's path
        raise ConfigError(
            f"config: no file {arg!r} here and no shipped config of that name; shipped: {', '.join(shipped_configs())}"
        )
    return arg  # load_config names the missing file


__all__ = ["resolve_config", "shipped_config_dir", "shipped_configs"]
