"""The algorithm registry: one name -> factory table that configs, experiments and tests share. The
conjugate-model rows are the E-step x M-step matrix of Hoffman and Blei (2015, §2.5, appendix D): the
M-steps ``svi``, ``ssvi``, ``ssvi_a`` and ``map``, each with any ``local`` in ``model.local_methods``.
"""

from __future__ import annotations

import inspect
from typing import Callable, NamedTuple, Optional

from vijax.inference._aevb import aevb
from vijax.inference._bbvi import bbvi
from vijax.inference._cavi import cavi
from vijax.inference._em import em
from vijax.inference._map import map_em
from vijax.inference._ngvi import ngvi
from vijax.inference._optax_vi import OPTIMIZER_SETTINGS, optax_vi
from vijax.inference._prox_svi import prox_svi
from vijax.inference._ssvi import ssvi, ssvi_a
from vijax.inference._svi import svi
from vijax.inference.base import VIAlgorithm
from vijax._validate import ArgumentError


class AlgorithmSpec(NamedTuple):
    """A registered algorithm: ``factory(model, *, num_data, [schedule,] **settings) -> VIAlgorithm``, the
    keyword ``settings`` it takes besides ``num_data`` and ``schedule``, whether it ``takes_schedule`` (a
    step size; CAVI has none) and a one-line ``description`` for listings."""

    factory: Callable[..., VIAlgorithm]
    settings: tuple[str, ...]
    takes_schedule: bool = True
    description: str = ""


ALGORITHMS: dict[str, AlgorithmSpec] = {}

# the M-steps of Hoffman and Blei's (2015, §2.5) matrix -> the registered algorithm of each
M_STEPS: dict[str, str] = {"meanfield": "svi", "ssvi_a": "ssvi_a", "ssvi": "ssvi", "map": "map"}


def register_algorithm(
    name: str, factory: Callable[..., VIAlgorithm], *, description: str = "", settings: Optional[tuple[str, ...]] = None
) -> None:
    """Registers ``factory`` under ``name`` (replacing it), its settings read from its signature: its keyword
    parameters after the model other than ``num_data`` and ``schedule`` (plus ``OPTIMIZER_SETTINGS`` with ``**hyper``).

    Args:
      name: the name configs use (``algorithm.name``).
      factory: ``factory(model, *, num_data, [schedule,] **settings) -> VIAlgorithm``.
      description: one line for listings.
      settings: only to restrict the signature's settings (None: all of them).
    """
    if not isinstance(name, str) or not name:
        raise ArgumentError("name", f"name must be a non-empty string, got {name!r}", value=name)
    params = list(inspect.signature(factory).parameters.values())[1:]
    kinds = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    names = [p.name for p in params if p.kind in kinds and p.name not in ("num_data", "schedule")]
    if any(p.kind == p.VAR_KEYWORD for p in params):
        names += [n for n in OPTIMIZER_SETTINGS if n not in names]
    settings = tuple(names) if settings is None else tuple(settings)
    ALGORITHMS[name] = AlgorithmSpec(factory, settings, any(p.name == "schedule" for p in params), description)


def make_algorithm(name: str, model, *, num_data=None, schedule=None, **settings) -> VIAlgorithm:
    """The registered algorithm ``name`` for ``model``.

    Args:
      name: a key of ``ALGORITHMS``.
      model: the model (each algorithm checks the protocol it needs).
      num_data: N, the number of data points minibatches are drawn from.
      schedule: the step size (a number or ``count -> step``); None: the default (or none).
      **settings: the algorithm's own settings (``AlgorithmSpec.settings``).

    Raises:
      ValueError: an unknown ``name`` or setting, a schedule without a step size, or what the factory rejects.

    Examples:
        >>> from vijax.models import LDA
        >>> alg = make_algorithm("ssvi_a", LDA(3, 30), num_data=100, local="cvb0")
        >>> make_algorithm("ssvi", LDA(3, 30), num_data=100, local="exact")
        Traceback (most recent call last):
        ...
        vijax._validate.ArgumentError: local='exact' is not offered by LDA; choose one of ('meanfield', 'cvb0', 'gibbs')
    """
    if name not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {name!r}; registered: {sorted(ALGORITHMS)}")
    spec = ALGORITHMS[name]
    unknown = sorted(set(settings) - set(spec.settings))
    if unknown:
        raise ValueError(f"algorithm {name!r} takes the settings {spec.settings}; got unknown {unknown}")
    if not spec.takes_schedule:
        if schedule is not None:
            raise ValueError(f"algorithm {name!r} has no step size: schedule must be None, got {schedule!r}")
        return spec.factory(model, num_data=num_data, **settings)
    return spec.factory(model, num_data=num_data, schedule=schedule, **settings)


for _name, _factory, _description in (
    ("cavi", cavi, "coordinate ascent VI on the whole data (Blei et al. 2017, §4.2)"),
    ("em", em, "maximum-likelihood / MAP EM for a model with an E-step and an M-step (Dempster et al. 1977)"),
    ("svi", svi, "natural-gradient SVI, the mean-field M-step (Blei et al. 2017, §4.3)"),
    ("ssvi", ssvi, "structured SVI with the V matrix (Hoffman and Blei 2015, eq. 11)"),
    ("ssvi_a", ssvi_a, "structured SVI without V, SSVI-A (Hoffman and Blei 2015, eq. 10)"),
    ("map", map_em, "stochastic MAP-EM: a point estimate of the globals (Hoffman and Blei 2015, §2.5)"),
    ("prox_svi", prox_svi, "proximal-gradient SVI for non-conjugate models (Khan et al. 2016)"),
    ("optax", optax_vi, "gradient VI on a model's parameters with an optax optimizer"),
    ("bbvi", bbvi, "black-box VI on any log-density with an optax optimizer (Blei et al. 2017, §5)"),
    ("aevb", aevb, "auto-encoding variational Bayes, a point or mean-field Bayesian decoder (Kingma and Welling 2014)"),
    ("ngvi", ngvi, "natural-gradient (conjugate-computation) VI on any log-density (Khan et al. 2016)"),
):
    # ssvi's mode is not a setting: the registered names "ssvi" and "ssvi_a" are the modes
    register_algorithm(
        _name, _factory, description=_description, settings=("local", "ramp") if _name == "ssvi" else None
    )
