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

from vijax._lazy import exported, lazy_names

# name -> the module it is read from at its first use (vijax._lazy): a program loads only the
# families it uses (an LDA script: the Dirichlet), not every family and its special functions
_MODULES = {
    "vijax.expfam._base": (
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
    ),
    "vijax.expfam._bernoulli": ("Bernoulli",),
    "vijax.expfam._beta": ("Beta",),
    "vijax.expfam._categorical": ("Categorical",),
    "vijax.expfam._dirichlet": ("Dirichlet",),
    "vijax.expfam._gamma": ("Gamma",),
    "vijax.expfam._interpolate": (
        "conjugate_update",
        "euclidean_natural_grad_step",
        "kl_prox_closed_form",
        "kl_prox_target",
        "mean_param_grad",
        "prox_objective",
        "tree_interpolate",
    ),
    "vijax.expfam._inversion": (
        "check_invertible",
        "reparam_sample",
        "reparam_sample_and_stats",
        "reparam_stats",
        "sample_log_gamma",
        "standard_log_gamma",
        "stats_and_v_product",
        "tree_inv_fisher_vp",
    ),
    "vijax.expfam._mvn": ("MultivariateNormal",),
    "vijax.expfam._normal": ("Normal",),
    "vijax.expfam._normal_gamma": ("NormalGamma",),
    "vijax.expfam._normal_wishart": ("NormalWishart",),
    "vijax.expfam._poisson": ("Poisson",),
    "vijax.expfam._special": ("digamma", "digamma_and_gammaln", "digamma_and_gammaln_with_total", "trigamma"),
}
__all__ = exported(_MODULES)
__getattr__, __dir__ = lazy_names(__name__, _MODULES, __all__)
