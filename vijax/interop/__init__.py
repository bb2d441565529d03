"""Models written in NumPyro or as a TFP ``JointDistribution``, as targets for vijax's algorithms.

``from_numpyro(model, *args, **kwargs)`` and ``from_tfp(joint_dist, observed=...)`` build a :class:`Target` on the
libraries' own machinery: the log-joint at constrained values, the log-density on the unconstrained space, the map
between them, the latent sites and a starting point. ``vijax.inference.bbvi`` and ``ngvi`` take a target in place of
a log-density. At draws of a fit, ``predictive``, ``log_likelihood``, ``observed_data`` and ``site_dims`` give what
``vijax.to_arviz(draws, key, target=target)`` gathers for ArviZ. A target is a model: the package sits at the
models' layer (docs/design.md), and imports NumPyro and TFP at first use.
"""

from vijax.interop._conjugate_sites import (
    SiteConjugacy,
    check_report,
    complete_conditional,
    complete_conditionals,
    conjugate_sites,
)
from vijax.interop._numpyro import from_numpyro
from vijax.interop._predictive import log_likelihood, observed_data, predictive, site_dims
from vijax.interop._target import SUPPORTS, Site, Target
from vijax.interop._tfp import from_tfp

__all__ = [
    "SUPPORTS",
    "Site",
    "SiteConjugacy",
    "Target",
    "check_report",
    "complete_conditional",
    "complete_conditionals",
    "conjugate_sites",
    "from_numpyro",
    "from_tfp",
    "log_likelihood",
    "observed_data",
    "predictive",
    "site_dims",
]
