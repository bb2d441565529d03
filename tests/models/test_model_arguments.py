"""Bad arguments to every model constructor exported by ``vijax.models``, generated from the
constructors' signatures: each float hyperparameter (a parameter whose default is a float, plus
the few float ones without a default) given a string, bytes, a list where a scalar is expected, a
bool, None, NaN or inf raises a ValueError that starts with the argument's name, at construction;
absurd sizes are refused before anything is allocated, naming the arguments; half-precision dtypes
and data are refused (docs/design.md, the rule on hyperparameters and dtypes).

Construction only (no step runs): the whole file takes a few seconds.
"""

from __future__ import annotations

import inspect
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import vijax.models as vm
from vijax import expfam
from vijax.data import BowBatch
from vijax.inference import cavi

X = jnp.array([[1.0, 0.5, 0.1], [-1.0, 0.2, 0.3], [0.3, -0.4, 0.2], [0.9, 1.0, -0.5]])
Y = jnp.array([1.0, 0.0, 1.0, 0.0])


def _vae(**kw):
    encoder = vm.Network(lambda p, x: p @ x, jnp.ones((4, 3)))  # linear maps: no compilation to build
    decoder = vm.Network(lambda p, z: p @ z, jnp.ones((3, 2)))
    return vm.VAE(encoder, decoder, latent_dim=2, data_dim=3, **kw)


def _derived(**kw):
    def log_joint(g, loc, x):
        (mu, mu2), (z,) = g["mu"], loc["z"]
        return jnp.sum(z * (x * mu - 0.5 * mu2)) - 0.5 * x**2

    priors = {"mu": expfam.Normal.from_mean_variance(jnp.zeros(2), 10 * jnp.ones(2))}
    return vm.DerivedConjugateModel(
        log_joint, priors, lambda x: {"z": vm.Local(expfam.Categorical.from_logits(jnp.zeros(2)))}, **kw
    )


# model class name -> its constructor with valid required arguments (every dimension 3, so that a
# list of two floats has the wrong shape also where an argument may be a (D,) array)
MODELS = {
    "ARDRegression": lambda **kw: vm.ARDRegression(3, **kw),
    "BernoulliMixture": lambda **kw: vm.BernoulliMixture(3, 3, **kw),
    "CTM": lambda **kw: vm.CTM(3, 3, **kw),
    "CategoricalHMM": lambda **kw: vm.CategoricalHMM(3, 3, **kw),
    "DerivedConjugateModel": _derived,
    "DiagonalGMM": lambda **kw: vm.DiagonalGMM(3, 3, **kw),
    "DPMixture": lambda **kw: vm.DPMixture(vm.DiagonalGMM(3, 3), **kw),
    "FullGMM": lambda **kw: vm.FullGMM(3, 3, **kw),
    "GLM": lambda **kw: vm.GLM(3, **kw),
    "GPClassification": lambda **kw: vm.GPClassification(
        X, Y, **{"log_lengthscale": 0.0, "log_scale": 0.0, "jitter": 1e-4, **kw}
    ),
    "GaPNMF": lambda **kw: vm.GaPNMF(3, 3, **kw),
    "GaussianHMM": lambda **kw: vm.GaussianHMM(3, 3, **kw),
    "GaussianMixtureEM": lambda **kw: vm.GaussianMixtureEM(3, 3, **kw),
    "LDA": lambda **kw: vm.LDA(3, 3, **kw),
    "NoisyDirichletMultinomial": lambda **kw: vm.NoisyDirichletMultinomial(3, **kw),
    "PLSA": lambda **kw: vm.PLSA(3, 3, **kw),
    "SMM": lambda **kw: vm.SMM(3, 3, **kw),
    "PoissonGammaSoftplus": lambda **kw: vm.PoissonGammaSoftplus(3, **kw),
    "StudentTMixture": lambda **kw: vm.StudentTMixture(3, 3, **kw),
    "UnivariateGMM": lambda **kw: vm.UnivariateGMM(3, **kw),
    "VAE": _vae,
    "HMM": lambda **kw: vm.HMM(3, vm.GammaPoisson(3), **kw),
    "BetaBernoulli": lambda **kw: vm.BetaBernoulli(3, **kw),
    "DirichletCategorical": lambda **kw: vm.DirichletCategorical(3, **kw),
    "GammaPoisson": lambda **kw: vm.GammaPoisson(3, **kw),
    "NormalGammaDiagonal": lambda **kw: vm.NormalGammaDiagonal(3, **kw),
    "NormalWishartFull": lambda **kw: vm.NormalWishartFull(3, **kw),
    "DirichletWeights": lambda **kw: vm.DirichletWeights(3, **kw),
    "StickBreaking": lambda **kw: vm.StickBreaking(3, **kw),
}

# exported classes that are not model constructors (protocols, parameter and result containers)
NOT_MODELS = {
    "PytreeModel",  # the base of models and components
    "Component",  # abstract
    "Mixture",  # its hyperparameters are its component's and weights' (listed above)
    "AEVBModel",
    "BatchChecked",  # a protocol
    "PointEstimateComponent",  # a protocol
    "ValueCheck",  # a validator's result
    "BlockedGlobalsModel",
    "ARDPosterior",
    "CTMGlobals",
    "CategoricalEmissions",
    "ConditionallyConjugateModel",
    "EMModel",
    "GMMParams",
    "GMMStats",
    "GPGradient",
    "GPPosterior",
    "GaussianEmissions",
    "GradientProxModel",
    "HMMData",
    "HMMParams",
    "HyperparameterModel",
    "Local",
    "LocalResult",
    "Network",
    "PLSAParams",
    "SMMParams",
    "SMMStats",
    "PaddedBatchModel",
    "ParamsModel",
    "ProxModel",
    "ProxUpdate",
    "StructuredProxModel",
    "StudentTMixtureParams",
}

# float hyperparameters without a float default: (model, name) -> whether None is allowed
EXTRA_FLOATS = {("GPClassification", "log_lengthscale"): False, ("GPClassification", "log_scale"): False}
EXTRA_FLOATS[("FullGMM", "dof0")] = True  # None: the default, nu0 = D
EXTRA_FLOATS[("NormalWishartFull", "dof0")] = True

BAD = {
    "str": "1.0",
    "bytes": b"1.0",
    "list": [1.0, 2.0],
    "bool": True,
    "None": None,
    "nan": float("nan"),
    "inf": float("inf"),
}


def _float_hyperparameters(name: str) -> list[tuple[str, bool]]:
    """(argument, None allowed) of every float hyperparameter of model ``name``: the parameters
    with a float default, and those of ``EXTRA_FLOATS``."""
    params = inspect.signature(getattr(vm, name)).parameters.values()
    found = [(p.name, False) for p in params if isinstance(p.default, float) and not isinstance(p.default, bool)]
    return found + [(arg, none_ok) for (model, arg), none_ok in EXTRA_FLOATS.items() if model == name]


CASES = [(name, arg, none_ok) for name in sorted(MODELS) for arg, none_ok in _float_hyperparameters(name)]


def test_every_exported_model_class_is_listed():
    classes = {n for n in vm.__all__ if inspect.isclass(getattr(vm, n))}
    missing = classes - set(MODELS) - NOT_MODELS
    assert not missing, f"add a constructor to MODELS in {__file__} (or the class to NOT_MODELS): {sorted(missing)}"
    assert set(MODELS) <= classes and NOT_MODELS <= classes


def test_every_listed_model_constructs_with_its_defaults():
    """The factories are valid (so each failure below is the bad argument's), and the registry
    finds the float hyperparameters (at least one per model but the derived one's ``tol``)."""
    for name, make in MODELS.items():
        make()
        assert _float_hyperparameters(name), name


@pytest.mark.parametrize("name, arg, none_ok", CASES, ids=[f"{n}-{a}" for n, a, _ in CASES])
def test_bad_float_hyperparameter_named_at_construction(name, arg, none_ok):
    """Each value of ``BAD`` (None only where it is not the default) raises a ValueError that
    starts with the argument's name."""
    not_refused = {}
    for what, value in BAD.items():
        if what == "None" and none_ok:
            continue
        try:
            MODELS[name](**{arg: value})
            not_refused[what] = "accepted"
        except ValueError as e:
            if not re.match(rf"{re.escape(arg)}\b", str(e)):
                not_refused[what] = f"ValueError not starting with {arg!r}: {e}"
        except Exception as e:  # noqa: BLE001 -- any other failure is an obscure one
            not_refused[what] = f"{type(e).__name__}: {e}"
    assert not not_refused, not_refused


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda: vm.LDA(10**30, 6), "num_topics * vocab_size asks for an array of 6e+30 entries"),
        (lambda: vm.LDA(10**8, 10**8), "num_topics * vocab_size"),
        (lambda: vm.PLSA(10**8, 10**8), "num_topics * vocab_size"),
        (lambda: vm.CTM(10**8, 10**8), "num_topics * vocab_size"),
        (lambda: vm.DiagonalGMM(10**8, 10**8), "num_components * dim"),
        (lambda: vm.FullGMM(10, 10**7), r"num_components \* dim\*\*2"),
        (lambda: vm.GaussianMixtureEM(10, 10**7), r"num_components \* dim\*\*2"),
        (lambda: vm.StudentTMixture(10, 10**7), r"num_components \* dim\*\*2"),
        (lambda: vm.BernoulliMixture(10**8, 10**8), "num_components * dim"),
        (lambda: vm.UnivariateGMM(10**16), "num_components"),
        (lambda: vm.GaPNMF(10**8, 10**8), "num_freqs * num_components"),
        (lambda: vm.ARDRegression(10**8), r"dim\*\*2"),
        (lambda: vm.GLM(10**8), r"dim\*\*2"),
        (lambda: vm.PoissonGammaSoftplus(10**16), "dim"),
        (lambda: vm.NoisyDirichletMultinomial(10**16), "num_categories"),
        (lambda: vm.CategoricalHMM(10**8, 10**8), "num_states * (num_states + num_symbols)"),
        (lambda: vm.GaussianHMM(10**8, 10**8), "num_states * (num_states + 2 * dim)"),
        (lambda: vm.FullGMM(3, 10**30), r"num_components \* dim\*\*2"),  # named before dof0's default
    ],
)
def test_absurd_sizes_refused_before_allocation(make, words):
    """1e16 entries (at least 4e16 bytes) or more: more memory than any machine has; refused at
    construction with the bytes needed and available, not an overflow or an abort in XLA."""
    with pytest.raises(ValueError, match="^" + (words if "\\" in words else re.escape(words))) as e:
        make()
    assert "bytes of memory available" in str(e.value)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", jnp.float16, jnp.bfloat16])
@pytest.mark.parametrize(
    "make",
    [
        lambda dt: vm.UnivariateGMM(2, dtype=dt),
        lambda dt: vm.DiagonalGMM(2, 2, dtype=dt),
        lambda dt: vm.FullGMM(2, 2, dtype=dt),
        lambda dt: vm.GaussianMixtureEM(2, 2, dtype=dt),
        lambda dt: vm.StudentTMixture(2, 2, dtype=dt),
        lambda dt: vm.BernoulliMixture(2, 2, dtype=dt),
        lambda dt: vm.ARDRegression(2, dtype=dt),
        lambda dt: vm.GaPNMF(2, 2, dtype=dt),
        lambda dt: vm.LDA(2, 2, dtype=dt),
        lambda dt: vm.PLSA(2, 2, dtype=dt),
        lambda dt: vm.GPClassification(X, Y, log_lengthscale=0.0, log_scale=0.0, dtype=dt),
    ],
)
def test_half_precision_dtype_refused(make, dtype):
    with pytest.raises(ValueError, match="^dtype must be float32 or float64 .half precision"):
        make(dtype)


def test_half_precision_networks_refused():
    half = vm.Network(lambda p, x: p @ x, jnp.ones((4, 3), jnp.float16))
    with pytest.raises(ValueError, match="^encoder.params must be float32 or float64 .half precision"):
        vm.VAE(half, vm.Network(lambda p, z: p @ z, jnp.ones((3, 2))), latent_dim=2, data_dim=3)


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_half_precision_data_refused_naming_the_data(dtype):
    """Eagerly and at trace time (the step's shape and dtype check): no silent overflow of x**2 in
    float16, no 'not numeric' for bfloat16."""
    x = jnp.asarray(X, dtype)
    for model in (vm.DiagonalGMM(2, 3), vm.FullGMM(2, 3), vm.GaussianMixtureEM(2, 3), vm.StudentTMixture(2, 3)):
        with pytest.raises(ValueError, match=r"^x must be float32 or float64 .* got (b)?float16"):
            model.check_data(x)
        with pytest.raises(ValueError, match=r"^x must be float32 or float64"):
            jax.eval_shape(model.check_data, x)
    with pytest.raises(ValueError, match=r"^x must be float32 or float64"):
        vm.UnivariateGMM(2).check_data(x[:, 0])
    ids, counts = jnp.array([[0, 1], [2, 0]]), jnp.array([[1.0, 2.0], [3.0, 0.0]], dtype)
    for model in (vm.LDA(2, 3), vm.PLSA(2, 3), vm.CTM(2, 3)):
        with pytest.raises(ValueError, match=r"^counts must be float32 or float64"):
            model.check_data(BowBatch(ids, counts))
    with pytest.raises(ValueError, match=r"^counts must be float32 or float64"):
        vm.NoisyDirichletMultinomial(2).check_data(counts)
    for model in (vm.GLM(3), vm.PoissonGammaSoftplus(3)):
        with pytest.raises(ValueError, match=r"^x must be float32 or float64"):
            model.check_data((x, jnp.asarray(Y)))
        with pytest.raises(ValueError, match=r"^y must be float32 or float64"):
            model.check_data((jnp.asarray(X), jnp.asarray(Y, dtype)))


def test_from_data_floors_a_constant_column_and_refuses_identical_points():
    """A constant column made the empirical prior's b0 = a0 var(x) zero: NaN at every step. The
    diagonal priors now take 1e-6 times the other columns' mean variance there (finite CAVI
    steps); identical points (every column constant) are refused, and so is a constant or
    dependent column for full covariances (the empirical covariance is singular)."""
    x = np.random.default_rng(0).normal(size=(40, 3))
    x[:, 1] = 5.0
    var = x.var(0)
    for make in (vm.DiagonalGMM.from_data, lambda x, k: vm.DPMixture.gaussian_from_data(x, k).components):
        model = make(x, 3)
        b0 = np.broadcast_to(np.asarray(model.b0, float), (3,))
        np.testing.assert_allclose(b0, model.a0 * np.array([var[0], 1e-6 * (var[0] + var[2]) / 2, var[2]]), rtol=1e-12)
    alg = cavi(vm.DiagonalGMM.from_data(x, 3))
    state = alg.init(jax.random.PRNGKey(0), jnp.asarray(x))
    for t in range(3):
        state, info = alg.step(jax.random.PRNGKey(t), state, jnp.asarray(x))
        assert bool(info.accepted) and np.isfinite(float(info.elbo))
    with pytest.raises(ValueError, match=r"^x column 1 is constant \(variance 0\)"):
        vm.FullGMM.from_data(x, 3)
    with pytest.raises(ValueError, match=r"^x has identical rows"):
        vm.DiagonalGMM.from_data(np.tile([[1.0, 2.0]], (20, 1)), 2)
    with pytest.raises(ValueError, match=r"^x has linearly dependent columns \(empirical covariance of rank 1 < 2"):
        vm.FullGMM.from_data(np.c_[x[:, 0], 2.0 * x[:, 0]], 2)


def _duplicates_and_far_cluster():
    rng = np.random.default_rng(1)
    return np.concatenate([np.tile([[1.0, 2.0]], (30, 1)), rng.normal(size=(30, 2)) + 100.0])


@pytest.mark.parametrize("covariance_type", ["full", "diag", "spherical"])
def test_em_singular_covariance_names_reg_covar(covariance_type):
    """30 duplicate points: with reg_covar = 0 their component's covariance is 0 to rounding
    (log-likelihood +28 to +141 reported, then NaN). Refused, naming reg_covar: at init (diag,
    spherical), from the compiled EM step (full), as scikit-learn's GaussianMixture refuses it (its
    Cholesky factorization fails; diag and spherical variances it refuses only when <= 0, which
    rounding decides: a positive 8e-13 passes there)."""
    from sklearn.mixture import GaussianMixture

    from vijax.inference import em
    from vijax.inference import EMState

    x = jnp.asarray(_duplicates_and_far_cluster())
    model = vm.GaussianMixtureEM(2, 2, covariance_type=covariance_type, reg_covar=0.0)
    if covariance_type != "full":  # at init (the component on the duplicates: k-means++ picks its index)
        with pytest.raises(ValueError, match=r"^reg_covar is too small: the M-step's covariance pivot"):
            model.init_params(jax.random.PRNGKey(0), x)
        return
    start = vm.GMMParams(jnp.array([0.5, 0.5]), jnp.array([[1.0, 2.0], [100.0, 100.0]]), jnp.eye(2)[None].repeat(2, 0))
    with pytest.raises(Exception, match=r"reg_covar is too small: the M-step's covariance pivot .* at \[0\]") as e:
        jax.block_until_ready(
            jax.jit(em(model).step)(jax.random.PRNGKey(1), EMState(start, jnp.zeros((), jnp.int32)), x)
        )
    assert isinstance(e.value, (ValueError, jax.errors.JaxRuntimeError))
    with pytest.raises(ValueError, match="ill-defined empirical covariance"):
        GaussianMixture(2, reg_covar=0.0, means_init=np.asarray(start.means)).fit(np.asarray(x))


def test_more_components_than_points_refused_at_init_with_data():
    """Seeding from the data (k-means++ or random rows) needs num_components <= N (scikit-learn's
    GaussianMixture refuses too). A DP mixture's truncation level is an upper bound: it may exceed N."""
    x = jnp.asarray(X)  # 4 points
    words = r"^num_components \(5\) must be <= the number of data points given to init \(4\)"
    for model in (vm.DiagonalGMM(5, 3), vm.FullGMM(5, 3)):
        with pytest.raises(ValueError, match=words):
            model.init_globals(jax.random.PRNGKey(0), x)
    for model in (vm.GaussianMixtureEM(5, 3), vm.GaussianMixtureEM(5, 3, init="random"), vm.StudentTMixture(5, 3)):
        with pytest.raises(ValueError, match=words):
            model.init_params(jax.random.PRNGKey(0), x)
    with pytest.raises(ValueError, match=words):
        vm.UnivariateGMM(5).init_globals(jax.random.PRNGKey(0), x[:, 0])
    sticks, comps = vm.DPMixture.gaussian(5, 3).init_globals(jax.random.PRNGKey(0), x)
    assert comps.loc.shape == (5, 3) and np.all(np.isfinite(np.asarray(comps.loc)))


@pytest.mark.parametrize(
    "make,name",
    [
        (lambda n: vm.LDA(2, 3, max_iters=n), "max_iters"),
        (lambda n: vm.LDA(2, 3, cvb0_iters=n), "cvb0_iters"),
        (lambda n: vm.LDA(2, 3, gibbs_sweeps=n), "gibbs_sweeps"),
        (lambda n: vm.CTM(2, 3, local_steps=n), "local_steps"),
        (lambda n: vm.CTM(2, 3, eval_local_steps=n), "eval_local_steps"),
        (lambda n: vm.GaPNMF(2, 3, max_iters=n), "max_iters"),
        (lambda n: vm.PLSA(2, 3, fold_in_iters=n), "fold_in_iters"),
        (lambda n: vm.StudentTMixture(2, 2, dof_steps=n), "dof_steps"),
    ],
)
def test_iteration_counts_beyond_int32_refused(make, name):
    """A lax loop counts in int32: 2**31 iterations would never stop (or wrap); 2**31 - 1 is accepted."""
    make(2**31 - 1)
    with pytest.raises(ValueError, match=rf"^{name} must be an integer in \[1, 2147483647\], got {10**30}$"):
        make(10**30)
