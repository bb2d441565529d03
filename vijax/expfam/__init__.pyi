"""Names of the package for type checkers and the lazy loader (vijax._lazy.attach_stub)."""

from vijax.expfam._base import (
    CAPABILITIES as CAPABILITIES,
    AbstractExpFamily as AbstractExpFamily,
    GammaBased as GammaBased,
    HasMode as HasMode,
    NormalBased as NormalBased,
    Reparameterizable as Reparameterizable,
    autodiff_fisher_vp as autodiff_fisher_vp,
    check_in_domain as check_in_domain,
    dense_fisher as dense_fisher,
    floored_log as floored_log,
    implements as implements,
    inner as inner,
    is_family as is_family,
    register_family as register_family,
    standard_normal as standard_normal,
    tree_from_natural as tree_from_natural,
    tree_inner as tree_inner,
    tree_is_valid as tree_is_valid,
    tree_kl as tree_kl,
    tree_mean_params as tree_mean_params,
    tree_natural_params as tree_natural_params,
)
from vijax.expfam._bernoulli import Bernoulli as Bernoulli
from vijax.expfam._beta import Beta as Beta
from vijax.expfam._categorical import Categorical as Categorical
from vijax.expfam._dirichlet import Dirichlet as Dirichlet
from vijax.expfam._gamma import Gamma as Gamma
from vijax.expfam._interpolate import (
    conjugate_update as conjugate_update,
    euclidean_natural_grad_step as euclidean_natural_grad_step,
    kl_prox_closed_form as kl_prox_closed_form,
    kl_prox_target as kl_prox_target,
    mean_param_grad as mean_param_grad,
    prox_objective as prox_objective,
    tree_interpolate as tree_interpolate,
)
from vijax.expfam._inversion import (
    check_invertible as check_invertible,
    reparam_sample as reparam_sample,
    reparam_sample_and_stats as reparam_sample_and_stats,
    reparam_stats as reparam_stats,
    sample_log_gamma as sample_log_gamma,
    standard_log_gamma as standard_log_gamma,
    stats_and_v_product as stats_and_v_product,
    tree_inv_fisher_vp as tree_inv_fisher_vp,
)
from vijax.expfam._mvn import MultivariateNormal as MultivariateNormal
from vijax.expfam._normal import Normal as Normal
from vijax.expfam._normal_gamma import NormalGamma as NormalGamma
from vijax.expfam._normal_wishart import NormalWishart as NormalWishart
from vijax.expfam._poisson import Poisson as Poisson
from vijax.expfam._special import (
    digamma as digamma,
    digamma_and_gammaln as digamma_and_gammaln,
    digamma_and_gammaln_with_total as digamma_and_gammaln_with_total,
    trigamma as trigamma,
)

__all__ = [
    "CAPABILITIES",
    "AbstractExpFamily",
    "GammaBased",
    "HasMode",
    "NormalBased",
    "Reparameterizable",
    "autodiff_fisher_vp",
    "check_in_domain",
    "dense_fisher",
    "floored_log",
    "implements",
    "inner",
    "is_family",
    "register_family",
    "standard_normal",
    "tree_from_natural",
    "tree_inner",
    "tree_is_valid",
    "tree_kl",
    "tree_mean_params",
    "tree_natural_params",
    "Bernoulli",
    "Beta",
    "Categorical",
    "Dirichlet",
    "Gamma",
    "conjugate_update",
    "euclidean_natural_grad_step",
    "kl_prox_closed_form",
    "kl_prox_target",
    "mean_param_grad",
    "prox_objective",
    "tree_interpolate",
    "check_invertible",
    "reparam_sample",
    "reparam_sample_and_stats",
    "reparam_stats",
    "sample_log_gamma",
    "standard_log_gamma",
    "stats_and_v_product",
    "tree_inv_fisher_vp",
    "MultivariateNormal",
    "Normal",
    "NormalGamma",
    "NormalWishart",
    "Poisson",
    "digamma",
    "digamma_and_gammaln",
    "digamma_and_gammaln_with_total",
    "trigamma",
]
