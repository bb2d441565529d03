"""Exponential families as registered pytrees of natural parameters.

Every family offers the same pure methods (``log_normalizer``, ``mean_params``, ``fisher_vp``,
``inv_fisher_vp``, ``sufficient_stats``, ``log_prob``, ``entropy``, ``kl``, ``sample``,
``is_valid``, ``to_tfp``) and, where it has them, the optional capabilities that algorithms ask
for by name (``implements(family, name)``), each a Protocol a family satisfies by defining its
methods: ``HasMode`` (``mode``, ``mode_stats``; MAP-EM), ``Reparameterizable``
(``reparam_sample_and_stats``; SSVI) and ``GammaBased`` (``log_gamma_shapes``,
``from_log_gammas``: draws made of Gamma variables, pooled over a pytree). Functions named ``tree_*`` map over pytrees of families.
``digamma``, ``digamma_and_gammaln`` (and ``digamma_and_gammaln_with_total``, of [a, sum a]) and ``trigamma`` are the fast elementwise special functions that
the families' mean parameters and Fisher products and the models' inner loops (LDA, ARD, Student-t
mixtures) evaluate.
"""

from vijax.expfam._base import (
    CAPABILITIES,
    AbstractExpFamily,
    GammaBased,
    HasMode,
    NormalBased,
    Reparameterizable,
    autodiff_fisher_vp,
    check_in_domain,
    dense_fisher,
    floored_log,
    implements,
    inner,
    is_family,
    register_family,
    standard_normal,
    tree_from_natural,
    tree_inner,
    tree_is_valid,
    tree_kl,
    tree_mean_params,
    tree_natural_params,
)
from vijax.expfam._bernoulli import Bernoulli
from vijax.expfam._beta import Beta
from vijax.expfam._categorical import Categorical
from vijax.expfam._dirichlet import Dirichlet
from vijax.expfam._gamma import Gamma
from vijax.expfam._interpolate import conjugate_update, tree_interpolate
from vijax.expfam._prox import (
    euclidean_natural_grad_step,
    kl_prox_closed_form,
    kl_prox_target,
    mean_param_grad,
    prox_objective,
)
from vijax.expfam._inversion import (
    check_invertible,
    reparam_sample,
    reparam_sample_and_stats,
    reparam_stats,
    sample_log_gamma,
    standard_log_gamma,
    stats_and_v_product,
    tree_inv_fisher_vp,
)
from vijax.expfam._mvn import MultivariateNormal
from vijax.expfam._normal import Normal
from vijax.expfam._normal_gamma import NormalGamma
from vijax.expfam._normal_wishart import NormalWishart
from vijax.expfam._poisson import Poisson
from vijax.expfam._special import digamma, digamma_and_gammaln, digamma_and_gammaln_with_total, trigamma

__all__ = [
    "mean_param_grad",
    "kl_prox_target",
    "kl_prox_closed_form",
    "prox_objective",
    "euclidean_natural_grad_step",
    "CAPABILITIES",
    "AbstractExpFamily",
    "GammaBased",
    "HasMode",
    "NormalBased",
    "Reparameterizable",
    "Bernoulli",
    "Beta",
    "Categorical",
    "Dirichlet",
    "Gamma",
    "MultivariateNormal",
    "Normal",
    "NormalGamma",
    "NormalWishart",
    "Poisson",
    "autodiff_fisher_vp",
    "check_in_domain",
    "check_invertible",
    "conjugate_update",
    "dense_fisher",
    "digamma",
    "digamma_and_gammaln",
    "digamma_and_gammaln_with_total",
    "trigamma",
    "floored_log",
    "implements",
    "inner",
    "is_family",
    "register_family",
    "reparam_sample",
    "reparam_sample_and_stats",
    "reparam_stats",
    "sample_log_gamma",
    "standard_normal",
    "standard_log_gamma",
    "stats_and_v_product",
    "tree_from_natural",
    "tree_inner",
    "tree_interpolate",
    "tree_inv_fisher_vp",
    "tree_is_valid",
    "tree_kl",
    "tree_mean_params",
    "tree_natural_params",
]
