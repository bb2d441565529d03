"""Names of the package for type checkers and the lazy loader (vijax._lazy.attach_stub)."""

from vijax._validate import (
    ValueCheck as ValueCheck,
    finite_nonnegative as finite_nonnegative,
    finite_values as finite_values,
    ids_in_range as ids_in_range,
    values_in_interval as values_in_interval,
    values_in_set as values_in_set,
)
from vijax.models._base import (
    BatchChecked as BatchChecked,
    ConditionallyConjugateModel as ConditionallyConjugateModel,
    EMModel as EMModel,
    BlockedGlobalsModel as BlockedGlobalsModel,
    HyperparameterModel as HyperparameterModel,
    PaddedBatchModel as PaddedBatchModel,
    LocalResult as LocalResult,
    conjugate_elbo as conjugate_elbo,
    conjugate_elbo_terms as conjugate_elbo_terms,
    conjugate_posterior as conjugate_posterior,
    check_step_batch as check_step_batch,
)
from vijax.models._bernoulli_gibbs import (
    collapsed_gibbs as bernoulli_collapsed_gibbs,
    point_estimates as bernoulli_gibbs_point_estimates,
)
from vijax.models.ard import ARDPosterior as ARDPosterior, ARDRegression as ARDRegression
from vijax.models.bernoulli_mixture import BernoulliMixture as BernoulliMixture
from vijax.models.dp_mixture import DPMixture as DPMixture
from vijax.models._components import (
    BetaBernoulli as BetaBernoulli,
    Component as Component,
    DirichletCategorical as DirichletCategorical,
    GammaPoisson as GammaPoisson,
    NormalGammaDiagonal as NormalGammaDiagonal,
    NormalWishartFull as NormalWishartFull,
    PointEstimateComponent as PointEstimateComponent,
)
from vijax.models._pytree import (
    PytreeModel as PytreeModel,
    filter_jit as filter_jit,
    split_arrays as split_arrays,
    static_float as static_float,
)
from vijax.models.mixture import (
    DirichletWeights as DirichletWeights,
    Mixture as Mixture,
    StickBreaking as StickBreaking,
)
from vijax.models._nonconjugate import (
    AEVBModel as AEVBModel,
    GradientProxModel as GradientProxModel,
    ParamsModel as ParamsModel,
    ProxModel as ProxModel,
    ProxUpdate as ProxUpdate,
    StructuredProxModel as StructuredProxModel,
    kl_prox_update as kl_prox_update,
    structured_prox_update as structured_prox_update,
)
from vijax.models.ctm import CTM as CTM, CTMGlobals as CTMGlobals
from vijax.models.derived import (
    DerivedConjugateModel as DerivedConjugateModel,
    Local as Local,
    conjugate_model as conjugate_model,
)
from vijax.models._network import (
    ACTIVATIONS as ACTIVATIONS,
    Network as Network,
    check_network as check_network,
    from_equinox as from_equinox,
    mlp as mlp,
)
from vijax.models.expfam_prox import (
    NoisyDirichletMultinomial as NoisyDirichletMultinomial,
    PoissonGammaSoftplus as PoissonGammaSoftplus,
)
from vijax.models.gap_nmf import GaPNMF as GaPNMF
from vijax.models.glm import GLM as GLM
from vijax.models.gp_classification import (
    GPClassification as GPClassification,
    GPGradient as GPGradient,
    GPPosterior as GPPosterior,
)
from vijax.models.gmm import DiagonalGMM as DiagonalGMM, FullGMM as FullGMM, UnivariateGMM as UnivariateGMM
from vijax.models.gmm_em import GaussianMixtureEM as GaussianMixtureEM, GMMParams as GMMParams, GMMStats as GMMStats
from vijax.models.hmm import (
    HMM as HMM,
    CategoricalEmissions as CategoricalEmissions,
    CategoricalHMM as CategoricalHMM,
    GaussianEmissions as GaussianEmissions,
    GaussianHMM as GaussianHMM,
    HMMData as HMMData,
    HMMParams as HMMParams,
)
from vijax.models.lda import LDA as LDA
from vijax.models.plsa import PLSA as PLSA, PLSAParams as PLSAParams
from vijax.models.smm import SMM as SMM, SMMParams as SMMParams, SMMStats as SMMStats
from vijax.models.student_t_mixture import (
    StudentTMixture as StudentTMixture,
    StudentTMixtureParams as StudentTMixtureParams,
)
from vijax.models.vae import LIKELIHOODS as VAE_LIKELIHOODS, VAE as VAE

__all__ = [
    "ValueCheck",
    "finite_nonnegative",
    "finite_values",
    "ids_in_range",
    "values_in_interval",
    "values_in_set",
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
    "bernoulli_collapsed_gibbs",
    "bernoulli_gibbs_point_estimates",
    "ARDPosterior",
    "ARDRegression",
    "BernoulliMixture",
    "DPMixture",
    "BetaBernoulli",
    "Component",
    "DirichletCategorical",
    "GammaPoisson",
    "NormalGammaDiagonal",
    "NormalWishartFull",
    "PointEstimateComponent",
    "PytreeModel",
    "filter_jit",
    "split_arrays",
    "static_float",
    "DirichletWeights",
    "Mixture",
    "StickBreaking",
    "AEVBModel",
    "GradientProxModel",
    "ParamsModel",
    "ProxModel",
    "ProxUpdate",
    "StructuredProxModel",
    "kl_prox_update",
    "structured_prox_update",
    "CTM",
    "CTMGlobals",
    "DerivedConjugateModel",
    "Local",
    "conjugate_model",
    "ACTIVATIONS",
    "Network",
    "check_network",
    "from_equinox",
    "mlp",
    "NoisyDirichletMultinomial",
    "PoissonGammaSoftplus",
    "GaPNMF",
    "GLM",
    "GPClassification",
    "GPGradient",
    "GPPosterior",
    "DiagonalGMM",
    "FullGMM",
    "UnivariateGMM",
    "GaussianMixtureEM",
    "GMMParams",
    "GMMStats",
    "HMM",
    "CategoricalEmissions",
    "CategoricalHMM",
    "GaussianEmissions",
    "GaussianHMM",
    "HMMData",
    "HMMParams",
    "LDA",
    "PLSA",
    "PLSAParams",
    "SMM",
    "SMMParams",
    "SMMStats",
    "StudentTMixture",
    "StudentTMixtureParams",
    "VAE_LIKELIHOODS",
    "VAE",
]
