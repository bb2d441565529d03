"""Models: priors, local steps, expected sufficient statistics, ELBOs and predictives."""

from vijax._lazy import exported, lazy_names

# name -> the module it is read from at its first use (vijax._lazy): a program loads only what it uses
_MODULES = {
    "vijax._validate": (
        "ValueCheck",
        "finite_nonnegative",
        "finite_values",
        "ids_in_range",
        "values_in_interval",
        "values_in_set",
    ),
    "vijax.models._base": (
        "BatchChecked",
        "ConditionallyConjugateModel",
        "EMModel",
        "BlockedGlobalsModel",
        "HyperparameterModel",
        "PaddedBatchModel",
        "LocalResult",
        "conjugate_elbo",
        "conjugate_elbo_terms",
        "conjugate_posterior",
        "check_step_batch",
    ),
    "vijax.models._bernoulli_gibbs": (
        "bernoulli_collapsed_gibbs=collapsed_gibbs",
        "bernoulli_gibbs_point_estimates=point_estimates",
    ),
    "vijax.models.ard": ("ARDPosterior", "ARDRegression"),
    "vijax.models.bernoulli_mixture": ("BernoulliMixture",),
    "vijax.models.dp_mixture": ("DPMixture",),
    "vijax.models._components": (
        "BetaBernoulli",
        "Component",
        "DirichletCategorical",
        "GammaPoisson",
        "NormalGammaDiagonal",
        "NormalWishartFull",
        "PointEstimateComponent",
    ),
    "vijax.models._pytree": ("PytreeModel", "filter_jit", "split_arrays", "static_float"),
    "vijax.models.mixture": ("DirichletWeights", "Mixture", "StickBreaking"),
    "vijax.models._nonconjugate": (
        "AEVBModel",
        "GradientProxModel",
        "ParamsModel",
        "ProxModel",
        "ProxUpdate",
        "StructuredProxModel",
        "kl_prox_update",
        "structured_prox_update",
    ),
    "vijax.models.ctm": ("CTM", "CTMGlobals"),
    "vijax.models.derived": ("DerivedConjugateModel", "Local", "conjugate_model"),
    "vijax.models._network": ("ACTIVATIONS", "Network", "check_network", "from_equinox", "mlp"),
    "vijax.models.expfam_prox": ("NoisyDirichletMultinomial", "PoissonGammaSoftplus"),
    "vijax.models.gap_nmf": ("GaPNMF",),
    "vijax.models.glm": ("GLM",),
    "vijax.models.gp_classification": ("GPClassification", "GPGradient", "GPPosterior"),
    "vijax.models.gmm": ("DiagonalGMM", "FullGMM", "UnivariateGMM"),
    "vijax.models.gmm_em": ("GaussianMixtureEM", "GMMParams", "GMMStats"),
    "vijax.models.hmm": (
        "HMM",
        "CategoricalEmissions",
        "CategoricalHMM",
        "GaussianEmissions",
        "GaussianHMM",
        "HMMData",
        "HMMParams",
    ),
    "vijax.models.lda": ("LDA",),
    "vijax.models.plsa": ("PLSA", "PLSAParams"),
    "vijax.models.smm": ("SMM", "SMMParams", "SMMStats"),
    "vijax.models.student_t_mixture": ("StudentTMixture", "StudentTMixtureParams"),
    "vijax.models.vae": ("VAE_LIKELIHOODS=LIKELIHOODS", "VAE"),
}

__all__ = exported(_MODULES)

__getattr__, __dir__ = lazy_names(__name__, _MODULES, __all__)
