"""Models: priors, local steps, expected sufficient statistics, ELBOs and predictives."""

from vijax._validate import (
    ValueCheck,
    finite_nonnegative,
    finite_values,
    ids_in_range,
    values_in_interval,
    values_in_set,
)

from vijax.models._base import (
    BatchChecked,
    ConditionallyConjugateModel,
    EMModel,
    BlockedGlobalsModel,
    HyperparameterModel,
    PaddedBatchModel,
    LocalResult,
    conjugate_elbo,
    conjugate_elbo_terms,
    kl_guard,
    conjugate_posterior,
    check_step_batch,
)
from vijax.models._bernoulli_gibbs import collapsed_gibbs as bernoulli_collapsed_gibbs
from vijax.models._bernoulli_gibbs import point_estimates as bernoulli_gibbs_point_estimates
from vijax.models.ard import ARDPosterior, ARDRegression
from vijax.models.bernoulli_mixture import BernoulliMixture
from vijax.models.dp_mixture import DPMixture
from vijax.models._components import Component
from vijax.models._pytree import PytreeModel, filter_jit, split_arrays, static_float
from vijax.models._components_discrete import BetaBernoulli, DirichletCategorical, GammaPoisson
from vijax.models._components_gaussian import NormalGammaDiagonal, NormalWishartFull
from vijax.models.mixture import DirichletWeights, Mixture, StickBreaking
from vijax.models._nonconjugate import (
    AEVBModel,
    GradientProxModel,
    ParamsModel,
    ProxModel,
    ProxUpdate,
    StructuredProxModel,
    kl_prox_update,
    structured_prox_update,
)
from vijax.models.ctm import CTM, CTMGlobals
from vijax.models.derived import DerivedConjugateModel, Local, conjugate_model
from vijax.models._network import ACTIVATIONS, Network, check_network, from_equinox, mlp
from vijax.models.expfam_prox import NoisyDirichletMultinomial, PoissonGammaSoftplus
from vijax.models.gap_nmf import GaPNMF
from vijax.models.glm import GLM
from vijax.models.gp_classification import GPClassification, GPGradient, GPPosterior
from vijax.models.gmm import DiagonalGMM, UnivariateGMM
from vijax.models.full_gmm import FullGMM
from vijax.models.gmm_em import GaussianMixtureEM, GMMParams, GMMStats
from vijax.models.hmm import (
    HMM,
    CategoricalEmissions,
    CategoricalHMM,
    GaussianEmissions,
    GaussianHMM,
    HMMData,
    HMMParams,
)
from vijax.models.lda import LDA
from vijax.models.plsa import PLSA, PLSAParams
from vijax.models.smm import SMM, SMMParams, SMMStats
from vijax.models.student_t_mixture import StudentTMixture, StudentTMixtureParams
from vijax.models.vae import LIKELIHOODS as VAE_LIKELIHOODS
from vijax.models.vae import VAE

__all__ = [
    "PytreeModel",
    "filter_jit",
    "split_arrays",
    "static_float",
    "BetaBernoulli",
    "Component",
    "DirichletCategorical",
    "DirichletWeights",
    "GammaPoisson",
    "Mixture",
    "NormalGammaDiagonal",
    "NormalWishartFull",
    "StickBreaking",
    "FullGMM",
    "GaussianMixtureEM",
    "GMMParams",
    "GMMStats",
    "ARDPosterior",
    "ARDRegression",
    "DerivedConjugateModel",
    "Local",
    "conjugate_model",
    "AEVBModel",
    "VAE",
    "VAE_LIKELIHOODS",
    "ACTIVATIONS",
    "Network",
    "check_network",
    "from_equinox",
    "mlp",
    "BernoulliMixture",
    "CTM",
    "CTMGlobals",
    "GLM",
    "GPClassification",
    "GPGradient",
    "GPPosterior",
    "GaPNMF",
    "NoisyDirichletMultinomial",
    "PoissonGammaSoftplus",
    "GradientProxModel",
    "BlockedGlobalsModel",
    "HyperparameterModel",
    "PaddedBatchModel",
    "ParamsModel",
    "ProxModel",
    "ProxUpdate",
    "StructuredProxModel",
    "kl_prox_update",
    "structured_prox_update",
    "bernoulli_collapsed_gibbs",
    "bernoulli_gibbs_point_estimates",
    "BatchChecked",
    "check_step_batch",
    "ValueCheck",
    "finite_nonnegative",
    "finite_values",
    "ids_in_range",
    "values_in_interval",
    "values_in_set",
    "ConditionallyConjugateModel",
    "EMModel",
    "DiagonalGMM",
    "DPMixture",
    "LDA",
    "PLSA",
    "PLSAParams",
    "SMM",
    "SMMParams",
    "SMMStats",
    "StudentTMixture",
    "StudentTMixtureParams",
    "CategoricalEmissions",
    "CategoricalHMM",
    "GaussianEmissions",
    "GaussianHMM",
    "HMM",
    "HMMData",
    "HMMParams",
    "LocalResult",
    "UnivariateGMM",
    "conjugate_elbo",
    "conjugate_elbo_terms",
    "kl_guard",
    "conjugate_posterior",
]
