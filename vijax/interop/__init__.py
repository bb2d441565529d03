"""Models written in NumPyro or as a TFP ``JointDistribution``, as targets for vijax's algorithms.

``from_numpyro(model, *args, **kwargs)`` and ``from_tfp(joint_dist, observed=...)`` build a
:class:`Target` on the libraries' own machinery (NumPyro's handlers, ``initialize_model``,
``biject_to`` and ``potential_energy``; TFP's ``experimental_pin`` and
``experimental_default_event_space_bijector``): the log-joint at constrained values, the
log-density on the unconstrained space (Jacobian included), the map between them, the latent sites
(name, shape, support) and a starting point. ``vijax.inference.bbvi`` and ``ngvi`` take a target in
place of a log-density; ``vijax.inference.auto_family`` matches an exponential family to each
site's support. At draws of a fit, ``predictive``, ``log_likelihood`` and ``observed_data`` give
the posterior predictive draws, the pointwise log-likelihood and the observed values, by site name
(``site_dims``: their axes' names),
through the library's own machinery (``vijax.to_arviz(draws, key, target=target)`` gathers them for
ArviZ).

A target is a model, so the package sits at the models' level of the layers (docs/design.md): it
imports ``vijax.types`` and the argument checks only, and NumPyro and TFP at first use (``import vijax`` loads neither);
the algorithms in ``vijax.inference`` import it.
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
