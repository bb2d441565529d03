"""Hostile inputs to every public entry point, generated from the registries (docs/design.md,
"Checked steps"): every model class exported by ``vijax.models`` (each paired with a tiny
valid-data factory in ``MODELS`` below), every algorithm of ``vijax.inference.ALGORITHMS`` (each
paired with a model in ``ALGORITHM_MODELS``), the readers of ``vijax.data``, the config loader and
resume. Each bad input must give a ValueError naming the problem (for a value: the argument, the
offending value and its position), or the documented handling (a rejected non-finite step).

A model or algorithm that lands without an entry here fails ``test_every_exported_model_has_a_factory``
/ ``test_every_registered_algorithm_is_covered`` with a message saying what to add.
"""

from __future__ import annotations

import functools
import inspect

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import vijax.models as vm
from vijax import expfam
from vijax.data import BowBatch, Corpus, prepare_corpus, read_ldac, read_uci_bow, read_word_list
from vijax.inference import ALGORITHMS, make_algorithm, with_value_checks
from vijax.run import CheckpointError, RunConfig, run

KEY = jax.random.PRNGKey(0)


def _bow():
    ids = jnp.array([[0, 1, 2, 3], [4, 5, 0, 1], [2, 3, 4, 5]], jnp.int32)
    return BowBatch(ids, jnp.ones((3, 4), jnp.float32))


def _glm_batch():
    return jnp.array([[1.0, 0.5], [-1.0, 0.2], [0.3, -0.4], [0.9, 1.0]]), jnp.array([1.0, 0.0, 1.0, 0.0])


def _gpc():
    x, y = _glm_batch()
    return vm.GPClassification(x, y, log_lengthscale=0.0, log_scale=0.0)


def _vae():
    k1, k2 = jax.random.split(KEY)
    return vm.VAE(vm.mlp(k1, (4, 8, 4)), vm.mlp(k2, (2, 8, 4)), latent_dim=2, data_dim=4)


def _derived():
    def log_joint(g, loc, x):
        (mu, mu2), (z,) = g["mu"], loc["z"]
        return jnp.sum(z * (x * mu - 0.5 * mu2)) - 0.5 * x**2

    return vm.conjugate_model(
        log_joint,
        priors={"mu": expfam.Normal.from_mean_variance(jnp.zeros(2), 10 * jnp.ones(2))},
        locals=lambda x: {"z": vm.Local(expfam.Categorical.from_logits(jnp.zeros(2)))},
    )


X1 = jnp.array([-2.0, -1.5, 1.5, 2.0, 0.1])
X2 = jnp.array([[-2.0, 0.1], [-1.5, 0.3], [1.5, -0.2], [2.0, 0.0], [0.1, 0.2]])
Y01 = jnp.array([[0.0, 1.0, 1.0], [1.0, 0.0, 1.0], [1.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
OBS = jnp.array([[0, 1, 1, 0], [1, 1, 0, 0]], jnp.int32)

# model class name -> (model factory, valid batch factory, algorithm whose step it runs,
#                      [(a bad value, ...)] as (batch transform, the words the error must contain))
MODELS = {
    "LDA": (
        lambda: vm.LDA(2, 6),
        _bow,
        "svi",
        [
            (
                lambda b: b._replace(word_ids=b.word_ids.at[1, 2].set(50)),
                "batch word id 50 at [1, 2] is out of range [0, 6)",
            ),
            (lambda b: b._replace(counts=b.counts.at[2, 0].set(-1.0)), "batch count -1.0 at [2, 0]"),
            (lambda b: b._replace(counts=b.counts.at[0, 3].set(jnp.nan)), "batch count nan at [0, 3]"),
        ],
    ),
    "CTM": (
        lambda: vm.CTM(2, 6, local_steps=2),
        _bow,
        "prox_svi",
        [(lambda b: b._replace(word_ids=b.word_ids.at[0, 0].set(-3)), "batch word id -3 at [0, 0] is out of range")],
    ),
    "UnivariateGMM": (
        lambda: vm.UnivariateGMM(num_components=2),
        lambda: X1,
        "cavi",
        [(lambda x: x.at[3].set(jnp.inf), "batch x inf at [3] is not finite")],
    ),
    "DiagonalGMM": (
        lambda: vm.DiagonalGMM(2, 2),
        lambda: X2,
        "svi",
        [(lambda x: x.at[4, 1].set(jnp.nan), "batch x nan at [4, 1] is not finite")],
    ),
    "FullGMM": (
        lambda: vm.FullGMM(2, 2),
        lambda: X2,
        "cavi",
        [(lambda x: x.at[0, 0].set(-jnp.inf), "batch x -inf at [0, 0] is not finite")],
    ),
    "BernoulliMixture": (
        lambda: vm.BernoulliMixture(2, 3),
        lambda: Y01,
        "cavi",
        [(lambda y: y.at[2, 1].set(2.0), "batch y 2.0 at [2, 1] is not in {0, 1}")],
    ),
    "DPMixture": (
        lambda: vm.DPMixture(vm.DiagonalGMM(3, 2)),
        lambda: X2,
        "cavi",
        [(lambda x: x.at[1, 0].set(jnp.nan), "batch x nan at [1, 0] is not finite")],
    ),
    "GaPNMF": (
        lambda: vm.GaPNMF(2, 3, max_iters=3),
        lambda: jnp.abs(Y01) + 0.5,
        "svi",
        [(lambda y: y.at[3, 2].set(-1.0), "batch (spectrogram frames) -1.0 at [3, 2]")],
    ),
    "ARDRegression": (
        lambda: vm.ARDRegression(2),
        _glm_batch,
        "cavi",
        [(lambda b: (b[0], b[1].at[2].set(jnp.nan)), "y nan at [2] is not finite")],
    ),
    "GLM": (
        lambda: vm.GLM(2),
        _glm_batch,
        "prox_svi",
        [
            (lambda b: (b[0], b[1].at[1].set(-1.0)), "batch label y -1.0 at [1] is not in {0, 1}"),
            (lambda b: (b[0].at[2, 1].set(jnp.inf), b[1]), "batch x inf at [2, 1] is not finite"),
        ],
    ),
    "GPClassification": (
        _gpc,
        lambda: jnp.array([0, 1, 2], jnp.int32),
        "optax",
        [(lambda b: b.at[1].set(7), "batch index 7 at [1] is out of range [0, 4)")],
    ),
    "PoissonGammaSoftplus": (
        lambda: vm.PoissonGammaSoftplus(2),
        lambda: (_glm_batch()[0], jnp.array([1.0, 0.0, 2.0, 3.0])),
        "prox_svi",
        [(lambda b: (b[0], b[1].at[3].set(-2.0)), "batch count y -2.0 at [3]")],
    ),
    "NoisyDirichletMultinomial": (
        lambda: vm.NoisyDirichletMultinomial(3),
        lambda: jnp.array([[1.0, 2.0, 0.0], [0.0, 1.0, 1.0]]),
        "prox_svi",
        [(lambda c: c.at[1, 2].set(jnp.nan), "batch count nan at [1, 2]")],
    ),
    "CategoricalHMM": (
        lambda: vm.CategoricalHMM(num_states=2, num_symbols=2),
        lambda: OBS,
        "em",
        [(lambda o: o.at[1, 3].set(5), "batch obs symbol 5 at [1, 3] is out of range [0, 2)")],
    ),
    "GaussianHMM": (
        lambda: vm.GaussianHMM(num_states=2, dim=1),
        lambda: OBS[..., None].astype(jnp.float32),
        "em",
        [(lambda o: o.at[0, 2, 0].set(jnp.nan), "batch obs nan at [0, 2, 0] is not finite")],
    ),
    "VAE": (
        _vae,
        lambda: Y01[:, :2].repeat(2, 1)[:, :4],
        "aevb",
        [(lambda x: x.at[0, 3].set(1.5), "batch x 1.5 at [0, 3] is not in [0, 1]")],
    ),
    "GaussianMixtureEM": (
        lambda: vm.GaussianMixtureEM(2, 2, covariance_type="diag"),
        lambda: X2,
        "em",
        [(lambda x: x.at[2, 1].set(jnp.nan), "batch x nan at [2, 1] is not finite")],
    ),
    "StudentTMixture": (
        lambda: vm.StudentTMixture(2, 2),
        lambda: X2,
        "em",
        [(lambda x: x.at[1, 0].set(jnp.inf), "batch x inf at [1, 0] is not finite")],
    ),
    "SMM": (
        lambda: vm.SMM(2, 4),
        lambda: jnp.array([0, 1, 3, 2, 2, 0]),
        "em",
        [(lambda x: x.at[2].set(7), "batch symbol 7 at [2] is out of range [0, 4)")],
    ),
    "PLSA": (
        lambda: vm.PLSA(2, 6),
        _bow,
        "em",
        [
            (
                lambda b: b._replace(word_ids=b.word_ids.at[2, 1].set(9)),
                "batch word id 9 at [2, 1] is out of range [0, 6)",
            ),
            (lambda b: b._replace(counts=b.counts.at[1, 3].set(-2.0)), "batch count -2.0 at [1, 3]"),
        ],
    ),
    "Mixture": (
        lambda: vm.Mixture(vm.GammaPoisson(3), vm.DirichletWeights(2)),
        lambda: Y01 * 3.0,
        "svi",
        [
            (lambda x: x.at[1, 2].set(-1.0), "batch x -1.0 at [1, 2] is not a finite number >= 0"),
            (lambda x: x.at[0, 1].set(0.5), "batch x 0.5 at [0, 1] is not an integer count"),
        ],
    ),
    "HMM": (
        lambda: vm.HMM(2, vm.GammaPoisson(1)),
        lambda: OBS[..., None].astype(jnp.float32),
        "cavi",
        [(lambda o: o.at[1, 2, 0].set(jnp.nan), "batch obs nan at [1, 2, 0] is not a finite number >= 0")],
    ),
    "DerivedConjugateModel": (
        _derived,
        lambda: X1,
        "cavi",
        [(lambda x: x.at[2].set(jnp.nan), "batch nan at [2] is not finite")],
    ),
}

# the exported classes that are not models (protocols, results, networks)
NOT_MODELS = {
    "PytreeModel",  # the base every model and component subclasses (tests/models/test_pytree.py)
    "ValueCheck",  # a value check's result, what batch_checks returns
    "Component",  # components and weights are parts of models (Mixture, HMM), tested through them
    "BetaBernoulli",
    "DirichletCategorical",
    "GammaPoisson",
    "NormalGammaDiagonal",
    "NormalWishartFull",
    "DirichletWeights",
    "StickBreaking",
    "LocalResult",
    "Local",
    "Network",
    "CTMGlobals",
    "GPGradient",
    "GPPosterior",
    "ARDPosterior",
    "ProxUpdate",
    "CategoricalEmissions",
    "GaussianEmissions",
    "HMMData",
    "HMMParams",
    "GMMParams",
    "GMMStats",
    "PLSAParams",
    "SMMParams",
    "SMMStats",
    "StudentTMixtureParams",
}

_SETTINGS = {
    "prox_svi": {"schedule": 0.1},
    "optax": {"optimizer": "adam", "schedule": 0.01},
    "aevb": {"schedule": 0.01},
    "svi": {"schedule": 0.5},
    "ssvi": {"schedule": 0.5},
    "ssvi_a": {"schedule": 0.5},
    "map": {"schedule": 0.5},
}


def _algorithm(name, model, num_data):
    if name in ("cavi", "em"):
        return make_algorithm(name, model)
    return make_algorithm(name, model, num_data=num_data, **_SETTINGS.get(name, {}))


def _num_data(batch):
    return jax.tree_util.tree_leaves(batch)[0].shape[0]


def test_every_exported_model_has_a_factory():
    exported = [
        n
        for n in vm.__all__
        if inspect.isclass(getattr(vm, n))
        and n not in NOT_MODELS
        and not getattr(getattr(vm, n), "_is_protocol", False)
    ]
    missing = [n for n in exported if n not in MODELS]
    assert not missing, (
        f"add a valid-data factory / batch checks for {missing} to MODELS in "
        "tests/test_hostile_inputs.py (docs/design.md, 'Checked steps': what a new model provides)"
    )
    for name in MODELS:
        assert hasattr(getattr(vm, name), "batch_checks"), f"{name} needs batch_checks(batch) (docs/design.md)"


@pytest.fixture(scope="module")
def started():
    """model name -> (model, algorithm, state after init on its valid batch, valid batch)."""
    out = {}
    for name, (make, data, alg_name, _) in MODELS.items():
        model, batch = make(), data()
        alg = _algorithm(alg_name, model, _num_data(batch))
        out[name] = (model, alg, _init(alg, batch), batch)
    return out


def _init(alg, batch):
    try:  # a start without data is cheaper (no data-dependent seeding), where the model has one
        return alg.init(jax.random.PRNGKey(1))
    except (TypeError, ValueError, AttributeError):
        return alg.init(jax.random.PRNGKey(1), batch)


CASES = [(name, i) for name, spec in MODELS.items() for i in range(len(spec[3]))]


@pytest.mark.parametrize("name,i", CASES, ids=[f"{n}-{i}" for n, i in CASES])
def test_bad_value_in_step_names_value_and_position(started, name, i):
    _, alg, state, batch = started[name]
    transform, words = MODELS[name][3][i]
    with pytest.raises(ValueError) as e:
        alg.step(jax.random.PRNGKey(2), state, transform(batch))
    assert words in str(e.value) and "(in step 1)" in str(e.value)


@pytest.mark.parametrize("name", list(MODELS))
def test_wrong_shape_or_dtype_fails_at_trace_time(started, name):
    """A batch of another shape (one more trailing axis) or a string dtype never reaches the step,
    also under the caller's jit (the error is raised while tracing: nothing compiles)."""
    _, alg, state, batch = started[name]
    wrong = jax.tree_util.tree_map(lambda a: jnp.stack([a, a], -1), batch)
    with pytest.raises(ValueError):
        jax.jit(alg.step)(jax.random.PRNGKey(2), state, wrong)
    with pytest.raises(ValueError, match="batch|must"):
        alg.step(jax.random.PRNGKey(2), state, np.array(["a", "b"]))


# algorithm -> the model of MODELS its step is checked with; every registered algorithm needs one
ALGORITHM_MODELS = {
    "cavi": "UnivariateGMM",
    "em": "CategoricalHMM",
    "svi": "LDA",
    "ssvi": "LDA",
    "ssvi_a": "LDA",
    "map": "LDA",
    "prox_svi": "GLM",
    "optax": "GPClassification",
    "aevb": "VAE",
    "bbvi": "GLM",
    "ngvi": "GLM",
}


class _GLMDensity:
    """A log-density that owns its data checks (a GLM's): bbvi and ngvi check the batch with them."""

    def __init__(self, model):
        self.model, self.check_data, self.batch_checks = model, model.check_data, model.batch_checks

    def __call__(self, w, batch):
        x, y = batch
        logits = x @ w
        return jnp.sum(y * logits - jnp.logaddexp(0.0, logits)) - 0.5 * jnp.sum(w**2)


def test_every_registered_algorithm_is_covered():
    missing = sorted(set(ALGORITHMS) - set(ALGORITHM_MODELS))
    assert not missing, f"add the registered algorithm(s) {missing} to ALGORITHM_MODELS in tests/test_hostile_inputs.py"


@pytest.mark.parametrize("alg_name", sorted(ALGORITHM_MODELS))
def test_every_algorithm_step_checks_values(alg_name):
    name = ALGORITHM_MODELS[alg_name]
    make, data, _, cases = MODELS[name]
    model, batch = make(), data()
    if alg_name in ("bbvi", "ngvi"):
        extra = (
            {"init_params": jnp.zeros(2)}
            if alg_name == "bbvi"
            else {"family": expfam.Normal.from_mean_variance(jnp.zeros(2), jnp.ones(2))}
        )
        alg = make_algorithm(alg_name, _GLMDensity(model), num_data=None, **extra)
    else:
        alg = _algorithm(alg_name, model, _num_data(batch))
    state = _init(alg, batch)
    transform, words = cases[0]
    with pytest.raises(ValueError, match="at \\["):
        alg.step(jax.random.PRNGKey(2), state, transform(batch))
    # a state that is not one is named before anything is computed: the (state, info) pair a step
    # returns, passed back whole (the commonest slip), None, and a q without its state
    with pytest.raises(ValueError, match="state: got the \\(state, info\\) pair"):
        alg.step(jax.random.PRNGKey(2), (state, None), batch)
    for bad in (None, (state.q_global,)):
        with pytest.raises(ValueError, match="state must be an algorithm's state"):
            jax.jit(alg.step)(jax.random.PRNGKey(2), bad, batch)


def test_value_check_under_jit_and_in_the_runner():
    """Under the caller's jit the check fires from the compiled step (JaxRuntimeError holding the
    message); in ``vijax.run.run`` it becomes a ValueError with the step number; with
    ``run.check_values`` false the run goes on and the non-finite steps are rejected."""
    _, alg, state, batch = (lambda m: (None, *m[1:]))(_started_gmm())
    bad = batch.at[3].set(jnp.inf)
    with pytest.raises(jax.errors.JaxRuntimeError, match="batch x inf at \\[3\\] is not finite"):
        jax.block_until_ready(jax.jit(alg.step)(jax.random.PRNGKey(2), state, bad))
    cfg = RunConfig(num_steps=4, chunk_size=4, progress=False, compile_cache=False)
    with pytest.raises(ValueError, match="batch x inf at \\[3\\] is not finite \\(in step 1\\)"):
        run(alg, KEY, batch_fn=lambda k, t: bad, config=cfg, init_state=state)
    with pytest.warns(RuntimeWarning, match="4 of 4 steps rejected"):
        res = run(alg, KEY, batch_fn=lambda k, t: bad, config=cfg.replace(check_values=False), init_state=state)
    assert np.all(np.isfinite(np.asarray(res.state.q_global.eta1))) and int(res.state.num_rejected) == 4


def _started_gmm():
    model = vm.UnivariateGMM(num_components=2)
    alg = make_algorithm("cavi", model)
    return model, alg, alg.init(jax.random.PRNGKey(1), X1), X1


@pytest.mark.parametrize("alg_name", ["cavi", "svi"])
def test_nonfinite_step_is_rejected_under_jit(alg_name):
    """The fast version of the test below: UnivariateGMM, value checks off, an infinite datum under
    jit: the state after the step is bit-identical to the one before, accepted False, one rejection."""
    model = vm.UnivariateGMM(num_components=2)
    alg = _algorithm(alg_name, model, 5)
    state = alg.init(jax.random.PRNGKey(1))
    new, info = jax.jit(with_value_checks(alg, False).step)(jax.random.PRNGKey(2), state, X1.at[0].set(jnp.inf))
    assert not bool(info.accepted) and int(new.num_rejected) == 1 and int(new.count) == 1
    chex.assert_trees_all_equal(new.q_global, state.q_global)


NONFINITE = ["cavi", "svi", "ssvi", "ssvi_a", "map", "em", "prox_svi", "optax"]


@pytest.mark.slow
@pytest.mark.parametrize("alg_name", NONFINITE)
def test_nonfinite_step_is_rejected_state_kept(alg_name):
    """A step fed a non-finite batch (value checks off) is rejected: the state is bit-identical to
    the one before, ``info.accepted`` False and ``state.num_rejected`` 1 (the state is selected by
    jnp.where, so no inf * 0 reaches it)."""
    name = {"em": "CategoricalHMM", "prox_svi": "GLM", "optax": "GPClassification", "map": "LDA"}.get(
        alg_name, "DiagonalGMM"
    )
    make, data, _, _ = MODELS[name]
    model, batch = make(), data()
    alg = _algorithm(alg_name, model, _num_data(batch))
    state = alg.init(jax.random.PRNGKey(1), batch)
    if alg_name == "em":  # symbols cannot be non-finite: a non-finite parameter gives the non-finite update
        state = state._replace(
            q_global=jax.tree_util.tree_map(
                lambda a: a.at[(0,) * a.ndim].set(jnp.nan) if jnp.issubdtype(a.dtype, jnp.floating) else a,
                state.q_global,
            )
        )
        bad = batch
    elif alg_name == "optax":
        state = state._replace(q_global=jax.tree_util.tree_map(lambda a: a + jnp.inf, state.q_global))
        bad = batch
    else:
        bad = jax.tree_util.tree_map(
            lambda a: a.at[(0,) * a.ndim].set(jnp.inf) if jnp.issubdtype(a.dtype, jnp.floating) else a, batch
        )
    new, info = with_value_checks(alg, False).step(jax.random.PRNGKey(2), state, bad)
    assert not bool(info.accepted) and int(new.num_rejected) == 1
    chex.assert_trees_all_equal(new.q_global, state.q_global)  # exact: the old state, kept


@pytest.mark.slow
@pytest.mark.parametrize("extreme", [1e-30, 1e30])
@pytest.mark.parametrize("name", ["LDA", "BernoulliMixture"])
def test_elbo_of_discrete_data_is_nonpositive_at_extreme_hyperparameters(name, extreme):
    """For discrete data log p(x) <= 0, so any ELBO must be <= 0: at hyperparameters the validators
    accept but that are extreme, a step gives a finite ELBO <= 0 or is rejected (never a positive
    or NaN ELBO with the state updated), unless the constructor refuses the value, naming it."""
    try:
        model = vm.LDA(2, 6, alpha=extreme, eta=extreme) if name == "LDA" else vm.BernoulliMixture(2, 3, alpha=extreme)
    except ValueError as e:
        assert str(e).startswith(("alpha", "eta")), str(e)
        return
    batch = _bow() if name == "LDA" else Y01
    alg = _algorithm("cavi", model, None)
    state = alg.init(jax.random.PRNGKey(1), batch)
    for t in range(2):
        state, info = alg.step(jax.random.PRNGKey(2 + t), state, batch)
        assert (not bool(info.accepted)) or float(info.elbo) <= 1e-3 * abs(float(info.elbo)) + 1e-3, float(info.elbo)


@pytest.mark.slow
def test_em_log_likelihood_nonpositive_at_extreme_concentration():
    """Categorical HMM (discrete): the EM objective log p(x | theta) <= 0 at an emission
    concentration of 1e30 (tolerance 1e-6 relative)."""
    model = vm.CategoricalHMM(num_states=2, num_symbols=2, emission_concentration=1e30)
    alg = make_algorithm("em", model)
    state = alg.init(jax.random.PRNGKey(1), OBS)
    _, info = alg.step(jax.random.PRNGKey(2), state, OBS)
    assert (not bool(info.accepted)) or float(info.log_likelihood) <= 1e-6 * abs(float(info.log_likelihood))


def test_empty_and_wrong_type_batches_at_init():
    """Empty data and a batch of the wrong type: a clear error at init naming the problem."""
    with pytest.raises(ValueError, match="empty|no documents|S = 0"):
        make_algorithm("cavi", vm.UnivariateGMM(num_components=2)).init(KEY, jnp.zeros((0,)))
    with pytest.raises(ValueError, match="BowBatch"):
        make_algorithm("svi", vm.LDA(2, 6), num_data=3).init(KEY, np.ones((3, 4)))


@pytest.mark.parametrize("hyper", [{"alpha": 0.0}, {"alpha": -1.0}, {"alpha": float("nan")}, {"eta": float("inf")}])
def test_bad_hyperparameters_named(hyper):
    with pytest.raises(ValueError, match=list(hyper)[0]):
        vm.LDA(2, 6, **hyper)


def test_unknown_config_key_and_bad_value_named():
    with pytest.raises(ValueError, match="run.no_such_key"):
        RunConfig.from_dict({"no_such_key": 1})
    with pytest.raises(ValueError, match="run.check_values"):
        RunConfig.from_dict({"check_values": "yes"})


@pytest.mark.parametrize("content", ["3\n5\n2\n1 1 2\n", "3\n5\n", "3\n5\n2\n1 1 2\n1 9 1\n", "x y z"])
def test_truncated_or_corrupt_uci_file_named(tmp_path, content):
    """A truncated or corrupt UCI docword file (fewer entries than its header says, an id past the
    vocabulary, text): a ValueError naming the file; nothing else is left in the folder."""
    path = tmp_path / "docword.txt"
    path.write_text(content)
    with pytest.raises(ValueError, match="docword.txt"):
        read_uci_bow(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docword.txt"]


# every reader of vijax.data (and `vijax prepare`'s prepare_corpus), each with malformed files:
# (reader, file name, content, the words the error must contain)
_READ_LDAC = lambda p: read_ldac(p, vocab_size=5)  # noqa: E731
READER_CASES = [
    (_READ_LDAC, "pairs.ldac", "3 0:1 1:2\n", "M = 3 but the line has 2"),
    (_READ_LDAC, "text.ldac", "2 0:1 x:y\n", "expected integers"),
    (_READ_LDAC, "negative.ldac", "1 0:-3\n", "count -3 out of range"),
    (_READ_LDAC, "huge.ldac", "1 99999999999999999999:1\n", "too large"),
    (_READ_LDAC, "beyond.ldac", "2 0:1 7:2\n", "word id 7 >= vocabulary size 5"),
    (read_word_list, "words.txt", "a\n\nb\n", "blank line 2"),
    (lambda p: Corpus.load_npz(p), "garbage.npz", "PK\x03\x04 not really an archive", "not a readable .npz"),
    (lambda p: Corpus.load_npz(p, mmap=False), "text.npz", "plain text", "not a readable .npz"),
    (
        lambda p: prepare_corpus(p, "ldac", p.parent / "out.npz", vocab_size=5),
        "bad.ldac",
        "1 0:1\n1 0:x\n",
        "expected integers",
    ),
]


@pytest.mark.parametrize("case", range(len(READER_CASES)))
def test_every_reader_names_the_file_of_a_malformed_input(tmp_path, case):
    """Each reader refuses a malformed file with a ValueError naming the file and the problem, and
    leaves nothing behind (prepare_corpus writes no partial output)."""
    reader, name, content, words = READER_CASES[case]
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(ValueError) as err:
        reader(path)
    assert words in str(err.value) and name in str(err.value), str(err.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


def test_a_truncated_npz_corpus_is_named(tmp_path):
    """A corpus archive cut short (a copy interrupted) is refused naming the file, with and without mmap."""
    good = tmp_path / "good.npz"
    read_ldac_text = tmp_path / "c.ldac"
    read_ldac_text.write_text("2 0:1 3:2\n1 4:1\n")
    read_ldac(read_ldac_text, vocab_size=5).save_npz(good)
    cut = tmp_path / "cut.npz"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    for mmap in (True, False):
        with pytest.raises(ValueError, match="cut.npz"):
            Corpus.load_npz(cut, mmap=mmap)


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_resume_from_a_damaged_checkpoint_names_the_file(tmp_path, damage):
    """A run of a registered algorithm (GMM CAVI) whose only checkpoint is truncated or overwritten:
    the resume stops with a CheckpointError naming the file; no half-written file is left."""
    _, alg, state, batch = _started_gmm()
    cfg = RunConfig(num_steps=2, chunk_size=2, progress=False, compile_cache=False)
    ckpt = tmp_path / "ckpt"
    run(alg, KEY, batch_fn=lambda k, t: batch, config=cfg, init_state=state, checkpoint_dir=str(ckpt))
    (path,) = list(ckpt.glob("*.npz"))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if damage == "truncate" else b"\0" * len(data))
    with pytest.warns(RuntimeWarning, match=path.name), pytest.raises(CheckpointError, match=path.name):
        run(
            alg,
            KEY,
            batch_fn=lambda k, t: batch,
            config=cfg.replace(num_steps=4),
            init_state=state,
            checkpoint_dir=str(ckpt),
            resume=True,
        )
    assert all(p.suffix in (".npz", ".corrupt") or p.name == ".vijax.lock" for p in ckpt.iterdir())


def test_model_own_step_paths_check_their_batch():
    """The steps a model offers besides the registry's (the Bernoulli mixture's collapsed Gibbs
    sampler) check their batch too: values eagerly, shapes while tracing."""
    sampler = vm.bernoulli_collapsed_gibbs(vm.BernoulliMixture(2, 3))
    state = sampler.init(jax.random.PRNGKey(0), Y01)
    with pytest.raises(ValueError, match="batch y 3.0 at \\[1, 1\\] is not in \\{0, 1\\}"):
        sampler.step(jax.random.PRNGKey(1), state, Y01.at[1, 1].set(3.0))
    with pytest.raises(ValueError, match="y must have 3 columns"):
        jax.jit(sampler.step)(jax.random.PRNGKey(1), state, Y01[:, :2])


def _experiment_names():
    from vijax.run import EXPERIMENTS, import_builtin_experiments

    import_builtin_experiments()
    return sorted(EXPERIMENTS)


@pytest.mark.parametrize("experiment", _experiment_names())
def test_every_experiment_config_refuses_unknown_keys_and_wrong_types(experiment):
    """Every registered experiment's config (the schema is its defaults): an unknown key in each
    section, and a value of the wrong type, are refused naming the dotted key."""
    from vijax.run import EXPERIMENTS, ConfigError, load_config

    defaults = EXPERIMENTS[experiment].defaults
    for section in ("model", "data", "algorithm", "run"):
        with pytest.raises((ValueError, ConfigError), match=rf"{section}\.no_such_key"):
            load_config({"experiment": experiment, section: {"no_such_key": 1}})
    for section in ("model", "data", "algorithm"):
        numeric = [
            k for k, v in defaults.get(section, {}).items() if isinstance(v, (int, float)) and not isinstance(v, bool)
        ]
        if numeric:
            with pytest.raises((ValueError, ConfigError), match=rf"{section}\.{numeric[0]}"):
                load_config({"experiment": experiment, section: {numeric[0]: "not a number"}})


def test_a_jitted_step_names_the_batch_for_a_string_array():
    """A bound step's signature leaves out its bound settings, so ``inspect`` shows what a caller
    passes and ``jax.jit``'s own refusal of a non-array argument names ``batch`` (not ``args[2]``)."""
    from vijax.inference import cavi
    from vijax.models import UnivariateGMM

    x = np.random.default_rng(0).normal(size=20)
    alg = cavi(UnivariateGMM(num_components=2))
    assert list(inspect.signature(alg.step).parameters) == ["key", "state", "batch"]
    state = alg.init(jax.random.PRNGKey(0), x)
    with pytest.raises(TypeError, match="at path batch"):
        jax.jit(alg.step)(jax.random.PRNGKey(1), state, np.array(["a", "b"]))


@pytest.mark.parametrize("alg_name", ["cavi", "svi", "ssvi", "map", "prox_svi"])
def test_a_state_of_another_model_size_is_named(alg_name):
    """A state made for the model with 6 topics (3 components, 3 features), stepped by the
    algorithm of the model with 5 (2, 2), is refused naming ``state.q_global`` and the shapes, before the local step (it met
    JAX's broadcasting TypeError, or named an internal argument)."""
    model = {"cavi": lambda k: vm.UnivariateGMM(num_components=k - 3), "prox_svi": lambda k: vm.GLM(k - 3)}.get(
        alg_name, lambda k: vm.LDA(k, 6)
    )
    batch = X1 if alg_name == "cavi" else _glm_batch() if alg_name == "prox_svi" else _bow()
    wide = (jnp.concatenate([batch[0], batch[0][:, :1]], 1), batch[1]) if alg_name == "prox_svi" else batch
    other = _algorithm(alg_name, model(6), _num_data(batch)).init(jax.random.PRNGKey(1), wide)
    alg = _algorithm(alg_name, model(5), _num_data(batch))
    with pytest.raises(ValueError, match=r"state\.q_global.* must have shape \([25].*got \([36]"):
        alg.step(jax.random.PRNGKey(2), other, batch)


# ----------------------------------------------------------------------------------- the front end
# a sample of benchmarks/probe_hostile.py's frontend, component and combinator cases (the probe runs
# them all): (label, call, the words the error must contain)
def _odd_numpyro_model(case):
    numpyro = pytest.importorskip("numpyro")
    import numpyro.distributions as dist

    y = jnp.array([0.1, -0.3, 0.5, 1.2])

    def discrete(y):
        p = numpyro.sample("p", dist.Beta(1.0, 1.0))
        with numpyro.plate("n", y.shape[0]):
            z = numpyro.sample("z", dist.DiscreteUniform(1, 3))  # no q family: {1, 2, 3}
            numpyro.sample("y", dist.Normal(jnp.where(z == 1, p, -p), 1.0), obs=y)

    def only_observed(y):
        with numpyro.plate("n", y.shape[0]):
            numpyro.sample("y", dist.Normal(0.0, 1.0), obs=y)

    def only_latent():
        numpyro.sample("mu", dist.Normal(0.0, 1.0))

    return {"discrete": (discrete, y), "no latent": (only_observed, y), "no observed": (only_latent,)}[case]


@functools.cache  # from_numpyro traces and checks the model: once for the three cases
def _poisson_target():
    numpyro = pytest.importorskip("numpyro")
    import numpyro.distributions as dist

    import vijax

    def model(k):
        rate = numpyro.sample("rate", dist.Gamma(2.0, 1.0))
        scale = numpyro.sample("scale", dist.Gamma(2.0, 2.0))
        with numpyro.plate("data", k.shape[0]):
            numpyro.sample("k", dist.Poisson(rate * scale), obs=k)

    return vijax.from_numpyro(model, jnp.array([3.0, 1.0, 4.0]))


def _front_end_case(label):
    import vijax
    from vijax.interop import complete_conditional, conjugate_sites

    if label == "from_numpyro[a discrete site of no q family, not enumerated]":
        return lambda: vijax.from_numpyro(*_odd_numpyro_model("discrete")), "site 'z': a discrete latent site"
    if label == "from_numpyro[no latent site]":
        return lambda: vijax.from_numpyro(*_odd_numpyro_model("no latent")), "model: it has no continuous latent"
    if label == "to_arviz[target without an observed site]":
        pytest.importorskip("arviz")
        target = vijax.from_numpyro(*_odd_numpyro_model("no observed"))
        return (
            lambda: vijax.to_arviz({"mu": jnp.zeros(4)}, KEY, target=target),
            "target: the model has no observed site",
        )
    target = _poisson_target()
    if label == "conjugate_sites[force a site the model lacks]":
        return lambda: conjugate_sites(target, KEY, force=["nope"]), "force: 'nope' is not a latent site"
    if label == "complete_conditional[draws of another shape]":
        return (
            lambda: complete_conditional(target, "rate", {"scale": jnp.ones((2, 3))}),
            "draws['scale']: shape (2, 3)",
        )
    assert label == "predictive[key None]"
    return lambda: vijax.predictive(target, {"rate": jnp.ones(2), "scale": jnp.ones(2)}, None), "key must be a PRNG key"


FRONT_END_CASES = [
    "from_numpyro[a discrete site of no q family, not enumerated]",
    "from_numpyro[no latent site]",
    "to_arviz[target without an observed site]",
    "conjugate_sites[force a site the model lacks]",
    "complete_conditional[draws of another shape]",
    "predictive[key None]",
]


@pytest.mark.parametrize("label", FRONT_END_CASES)
def test_front_end_refuses_naming_the_site_or_argument(label):
    """A NumPyro model that vijax cannot fit (a discrete site not marked for enumeration, no latent
    site), and bad arguments to the functions over a target: a ValueError naming the site or the
    argument."""
    call, words = _front_end_case(label)
    with pytest.raises(ValueError) as e:
        call()
    assert words in str(e.value), str(e.value)


def test_combinators_refuse_naming_the_argument():
    """A grid over an int argument of the factory (given as floats), restarts of none: refused
    naming the argument, before anything is traced."""
    from vijax.inference import bbvi, factory_grid, restarts

    def glm(num_samples):
        return bbvi(lambda w, b: -0.5 * jnp.sum(w**2), init_params=jnp.zeros(2), num_samples=num_samples)

    with pytest.raises(ValueError, match="^num_samples"):
        factory_grid(glm, num_samples=[1, 2])
    with pytest.raises(ValueError, match="num_restarts must be an integer >= 1, got 0"):
        restarts(make_algorithm("cavi", vm.UnivariateGMM(2)), 0)


def test_mixture_of_huge_counts_is_fitted_or_rejected():
    """Counts of 1e20 in a Poisson mixture: the step is rejected or gives a finite state and ELBO
    (never a NaN state accepted)."""
    alg = make_algorithm("cavi", vm.Mixture(vm.GammaPoisson(2), vm.DirichletWeights(2)))
    x = jnp.round(jnp.abs(X2) * 1e20)
    state = alg.init(jax.random.PRNGKey(1), x)
    new, info = jax.jit(alg.step)(jax.random.PRNGKey(2), state, x)  # one program: op by op compiles each primitive
    if bool(info.accepted):
        assert np.isfinite(float(info.elbo))
        assert all(np.all(np.isfinite(np.asarray(a))) for a in jax.tree_util.tree_leaves(new.q_global))
