"""The algorithm registry: one name -> factory table that configs, experiments and tests share.

Every factory takes the model first and keyword-only ``num_data``, ``schedule`` (where the
algorithm has a step size) and its own settings. ``make_algorithm(name, model, num_data=...,
schedule=..., **settings)`` checks the settings against the registered ones before anything is
built, so a config's ``algorithm.name`` reaches any registered algorithm the model qualifies for
(each factory checks the model's protocol and families and names what is missing).

The conjugate-model rows are the E-step x M-step matrix of Hoffman and Blei (2015, §2.5,
appendix D): the M-steps ``svi`` (mean-field), ``ssvi``, ``ssvi_a`` and ``map``, each with any
local step (E-step) in ``model.local_methods`` as the ``local`` setting.
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
    """A registered algorithm.

    Attributes:
      factory: ``factory(model, *, num_data, [schedule,] **settings) -> VIAlgorithm``.
      settings: the keyword settings it takes besides ``num_data`` and ``schedule``.
      takes_schedule: whether it has a step size (CAVI has none).
      description: one line for listings.
    """

    factory: Callable[..., VIAlgorithm]
    settings: tuple[str, ...]
    takes_schedule: bool = True
    description: str = ""


ALGORITHMS: dict[str, AlgorithmSpec] = {}

# The M-steps of Hoffman and Blei's (2015, §2.5) E-step x M-step matrix by the names the paper and
# the comparison experiments use, and the registered algorithm each one is.
M_STEPS: dict[str, str] = {"meanfield": "svi", "ssvi_a": "ssvi_a", "ssvi": "ssvi", "map": "map"}


def factory_settings(factory: Callable) -> tuple[tuple[str, ...], bool]:
    """(settings, takes_schedule) read from a factory's signature: its keyword parameters after the
    model other than ``num_data`` and ``schedule`` (plus ``make_optimizer``'s hyperparameters
    ``OPTIMIZER_SETTINGS`` when it takes ``**hyper``), and whether it has a ``schedule``."""
    params = list(inspect.signature(factory).parameters.values())[1:]
    names = [
        p.name
        for p in params
        if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name not in ("num_data", "schedule")
    ]
    if any(p.kind == p.VAR_KEYWORD for p in params):
        names += [n for n in OPTIMIZER_SETTINGS if n not in names]
    return tuple(names), any(p.name == "schedule" for p in params)


def register_algorithm(
    name: str, factory: Callable[..., VIAlgorithm], *, description: str = "", settings: Optional[tuple[str, ...]] = None
) -> None:
    """Registers ``factory`` under ``name`` (registering a name again replaces it). Its settings and
    whether it takes a step size are read from its signature (:func:`factory_settings`): a new
    algorithm is its module plus this one line.

    Args:
      name: the name configs use (``algorithm.name``).
      factory: ``factory(model, *, num_data, [schedule,] **settings) -> VIAlgorithm``.
      description: one line for listings.
      settings: only to restrict the signature's settings (None: all of them).
    """
    if not isinstance(name, str) or not name:
        raise ArgumentError("name", f"name must be a non-empty string, got {name!r}", value=name)
    found, takes_schedule = factory_settings(factory)
    ALGORITHMS[name] = AlgorithmSpec(
        factory, found if settings is None else tuple(settings), takes_schedule, description
    )


def make_algorithm(name: str, model, *, num_data=None, schedule=None, **settings) -> VIAlgorithm:
    """The registered algorithm ``name`` for ``model``.

    Args:
      name: a key of ``ALGORITHMS``.
      model: the model (each algorithm checks the protocol it needs).
      num_data: N, the number of data points minibatches are drawn from (optional for ``cavi``
        and ``optax``).
      schedule: the step size (a number or a callable ``count -> step``), None for the
        algorithm's default; must be None for an algorithm without one.
      **settings: the algorithm's own settings (``AlgorithmSpec.settings``).

    Raises:
      ValueError: naming the problem, before anything compiles: an unknown ``name``, a setting
        the algorithm does not take, a schedule for an algorithm without a step size, or whatever
        the factory rejects (a model lacking what the algorithm needs, a bad value).

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


register_algorithm("cavi", cavi, description="coordinate ascent VI on the whole data (Blei et al. 2017, §4.2)")
register_algorithm(
    "em", em, description="maximum-likelihood / MAP EM for a model with an E-step and an M-step (Dempster et al. 1977)"
)
register_algorithm("svi", svi, description="natural-gradient SVI, the mean-field M-step (Blei et al. 2017, §4.3)")
register_algorithm(
    "ssvi",
    ssvi,
    description="structured SVI with the V matrix (Hoffman and Blei 2015, eq. 11)",
    settings=("local", "ramp"),  # not ssvi's mode: the registered names "ssvi" and "ssvi_a" are the modes
)
register_algorithm("ssvi_a", ssvi_a, description="structured SVI without V, SSVI-A (Hoffman and Blei 2015, eq. 10)")
register_algorithm(
    "map", map_em, description="stochastic MAP-EM: a point estimate of the globals (Hoffman and Blei 2015, §2.5)"
)
register_algorithm(
    "prox_svi", prox_svi, description="proximal-gradient SVI for non-conjugate models (Khan et al. 2016)"
)
register_algorithm("optax", optax_vi, description="gradient VI on a model's parameters with an optax optimizer")
register_algorithm(
    "bbvi", bbvi, description="black-box VI on any log-density with an optax optimizer (Blei et al. 2017, §5)"
)
register_algorithm(
    "aevb",
    aevb,
    description="auto-encoding variational Bayes, a point or a mean-field Bayesian decoder (Kingma and Welling 2014)",
)
register_algorithm(
    "ngvi", ngvi, description="natural-gradient (conjugate-computation) VI on any log-density (Khan et al. 2016)"
)

__all__ = ["ALGORITHMS", "AlgorithmSpec", "M_STEPS", "factory_settings", "make_algorithm", "register_algorithm"]
