"""Models written in NumPyro or as a TFP ``JointDistribution``, as targets for vijax's algorithms.

``from_numpyro`` and ``from_tfp`` build a :class:`Target` (log-joint, unconstrained log-density, the map between
them, the latent sites, a start) on the libraries' own machinery; ``bbvi`` and ``ngvi`` take it in place of a
log-density. ``predictive``, ``log_likelihood``, ``observed_data`` and ``site_dims`` give what ``vijax.to_arviz``
gathers at draws of a fit. NumPyro and TFP are imported at first use.
"""

from vijax.interop._conjugate_sites import SiteConjugacy, check_report, conjugate_sites
from vijax.interop._conjugate_sites import complete_conditional, complete_conditionals
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
