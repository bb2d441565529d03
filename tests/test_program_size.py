"""A regression guard on the size of the programs the configs compile: the lowered text
(``jax.jit(step).lower(...).as_text()``, StableHLO) of each algorithm x model step below must stay
under a stated bound, so that a structural regression (a loop unrolled, a branch duplicated) fails.

The size depends on the program's structure, not on the data's size, so the steps are built at
tiny sizes and only lowered (never compiled). Each bound is about 1.5x the size measured when it
was set (in the comment).

Covered: LDA's E-steps (mean-field with and without SQUAREM, CVB0, Gibbs) and global updates (SVI,
SSVI-A, SSVI), data-parallel SVI; the Bernoulli mixture's four methods; and one step per model x
algorithm of every other config, as the runner's chunk program (``vijax.run.lower_run``). Also
counted in the jaxpr: the Gamma sampler's random calls and the Gibbs sampler's copies of its sweep.
"""

import functools
import pathlib

import re

import jax
import jax.numpy as jnp
import pytest

from vijax.data import BowBatch
from vijax.inference import M_STEPS, data_parallel, lock_step, make_algorithm, optax_vi, prox_svi, restarts, schedules
from vijax.models import (
    CTM,
    LDA,
    VAE,
    ARDRegression,
    BernoulliMixture,
    CategoricalHMM,
    DiagonalGMM,
    DPMixture,
    GaPNMF,
    GaussianMixtureEM,
    GPClassification,
    HMMData,
    bernoulli_collapsed_gibbs,
    mlp,
)
from vijax.run import build_experiment, import_builtin_experiments, load_config, lower_run
from vijax.testing import primitive_counts

import_builtin_experiments()
ROOT = pathlib.Path(__file__).resolve().parents[1]

KB = 1000

# (M-step, E-step, accelerate) -> bound in kB, about 1.5x the size measured when it was set (jax 0.10.2,
# float32, these tiny sizes; at configs/lda_synthetic.yaml's sizes the first was 231 kB, and 688 kB
# before the E-step ran in tiles of one shape)
LDA_BOUNDS = {
    ("meanfield", "meanfield", True): 340,  # 228 kB
    ("meanfield", "meanfield", False): 260,  # 171 kB
    ("meanfield", "cvb0", True): 230,  # 155 kB
    ("meanfield", "gibbs", True): 275,  # 183 kB
    ("ssvi_a", "meanfield", True): 360,  # 238 kB
    ("ssvi", "meanfield", True): 400,  # 265 kB
}
DATA_PARALLEL_BOUND = 340  # svi x mean-field with SQUAREM under shard_map: 228 kB
BERNOULLI_BOUNDS = {"meanfield": 225, "ssvi_a": 215, "ssvi": 295, "gibbs": 85}  # 149, 142, 197, 55 kB


def _lda_batch(s=8, length=40, v=30):
    ids = jnp.arange(s * length, dtype=jnp.int32).reshape(s, length) % v
    return BowBatch(ids, jnp.ones((s, length), jnp.float32))


def _size(alg, batch, init_batch=None):
    key = jax.random.PRNGKey(0)
    state = jax.eval_shape(lambda k: alg.init(k) if init_batch is None else alg.init(k, init_batch), key)
    return len(jax.jit(alg.step).lower(key, state, batch).as_text())


def _lda_alg(model, m_step, local):
    return make_algorithm(
        M_STEPS[m_step], model, num_data=100, schedule=schedules.robbins_monro(1.0, tau=1.0, kappa=0.7), local=local
    )


@pytest.mark.parametrize("m_step, local, accelerate", sorted(LDA_BOUNDS))
def test_lda_step_program_size(m_step, local, accelerate):
    model = LDA(3, 30, accelerate=accelerate, gibbs_sweeps=4, gibbs_burn_in=2)
    size = _size(_lda_alg(model, m_step, local), _lda_batch())
    assert size < LDA_BOUNDS[m_step, local, accelerate] * KB, f"{size / KB:.0f} kB"


def test_lda_data_parallel_step_program_size():
    size = _size(_lda_alg(data_parallel(LDA(3, 30)), "meanfield", "meanfield"), _lda_batch())
    assert size < DATA_PARALLEL_BOUND * KB, f"{size / KB:.0f} kB"


def test_lda_program_does_not_grow_with_the_padded_length():
    """The tiles have one shape whatever the mix of lengths: a batch padded to 1024 slots lowers to
    the program of one padded to 40 and the text of the larger shapes, about 9 kB (the buckets
    once made it grow with the length, a copy of the E-step per bucket)."""
    alg = _lda_alg(LDA(3, 30), "meanfield", "meanfield")
    short, long = _size(alg, _lda_batch(length=40)), _size(alg, _lda_batch(length=1024))
    assert long - short < 12 * KB, (short, long)


@pytest.mark.parametrize("method", sorted(BERNOULLI_BOUNDS))
def test_bernoulli_mixture_step_program_size(method):
    model = BernoulliMixture(6, 8, alpha=4.0)
    y = (jnp.arange(40 * 8).reshape(40, 8) % 3 == 0).astype(jnp.float32)
    if method == "gibbs":
        alg = bernoulli_collapsed_gibbs(model, burn_in=5)
    else:
        alg = make_algorithm(
            M_STEPS[method],
            model,
            num_data=40,
            schedule=schedules.robbins_monro(1.0, tau=1.0, kappa=0.75),
            local="exact",
        )
    size = _size(alg, y, init_batch=y)
    assert size < BERNOULLI_BOUNDS[method] * KB, f"{size / KB:.0f} kB"


# ----------------------------------------------------------------------------- the other configs
# The chunk program a run compiles (vijax.run.lower_run: a lax.scan of steps, the batch function's
# arrays as arguments; chunk_size 2, on which the size does not depend), lowered with the init only
# traced. Steps whose experiment builds quickly are built as `vijax run` builds them
# (vijax.run.build_experiment) at tiny sizes; the others are the same model x algorithm made here
# as their experiment makes it, at tiny sizes.


def _chunk_size(alg, batch, init=None):
    low = lower_run(
        alg,
        jax.random.PRNGKey(0),
        batch_fn=lambda key, t: batch,
        init_state=(lambda key: alg.init(key, batch)) if init is None else init,
        chunk_size=2,
    )
    return len(low.as_text())


def _points(n=20, d=2):
    return jnp.sin(jnp.arange(n * d, dtype=jnp.float64).reshape(n, d)) * 3.0


def _ard():
    x = _points(20, 4)
    return make_algorithm("cavi", ARDRegression(dim=4), num_data=20), (x, x[:, 0] - x[:, 1])


def _gmm_cavi():  # gmm_simulation, gmm_histograms: CAVI with vmapped restarts
    x = _points()
    return restarts(make_algorithm("cavi", DiagonalGMM.from_data(x, 3), local="meanfield"), 2), x


def _gmm_em():
    return make_algorithm("em", GaussianMixtureEM(3, 2)), _points()


def _dp_mixture(truncation):
    x = _points()
    return make_algorithm("cavi", DPMixture.gaussian_from_data(x, 3, truncation=truncation), local="meanfield"), x


def _hmm_em():
    obs = jnp.arange(6 * 8, dtype=jnp.int32).reshape(6, 8) % 10
    return make_algorithm("em", CategoricalHMM(5, 10)), HMMData(obs, jnp.full((6,), 8, jnp.int32))


def _gap_nmf():  # lock step of mean-field SVI and SSVI-A from one q
    model = GaPNMF(4, 6, max_iters=10)
    schedule = schedules.robbins_monro(1.0, tau=1.0, kappa=0.7)
    algs = {
        m: make_algorithm(M_STEPS[m], model, num_data=8, schedule=schedule, local="meanfield")
        for m in ("meanfield", "ssvi_a")
    }
    frames = 1.0 + (jnp.arange(8 * 6, dtype=jnp.float64).reshape(8, 6) % 5)
    return lock_step(algs, primary="meanfield", info_fields=("elbo", "num_damped")), frames


def _ctm():
    return make_algorithm("prox_svi", CTM(3, 30), num_data=100, schedule=0.001), _lda_batch(s=2)


def _vae():
    k1, k2 = jax.random.split(jax.random.PRNGKey(1))
    model = VAE(mlp(k1, [16, 8, 4], "tanh"), mlp(k2, [2, 8, 16], "tanh"), latent_dim=2, data_dim=16)
    alg = make_algorithm("aevb", model, num_data=20, schedule=0.003, optimizer="adam")
    return alg, (jnp.arange(10 * 16).reshape(10, 16) % 3 == 0).astype(jnp.float64)


def _gpc(method):
    return _gpc_n(method, 12)


def _gpc_n(method, n):
    x = _points(n, 3)
    model = GPClassification(x, jnp.where(x[:, 0] > 0, 1, -1), 0.0, 0.0, jitter=1e-6, quadrature=method == "gd")
    if method == "prox_svi":
        alg = prox_svi(model, num_data=n, schedule=0.1, num_samples=4)
    else:
        alg = optax_vi(model, optimizer=method, schedule=0.01, **({} if method == "gd" else {"num_samples": 4}))
    return alg, jnp.arange(n)


# name -> (the step's algorithm and batch, bound in kB: about 1.5x the size measured when it was set,
# jax 0.10.2, float64, these sizes; the runner's chunk, whose value checks are checkify checks: 0-70%
# larger than with host callbacks, docs/design.md "Checked steps")
MADE = {
    "ard_regression/cavi": (_ard, 215),  # 141 kB
    "gmm_simulation/cavi": (_gmm_cavi, 240),  # 160 kB
    "gmm_em/em": (_gmm_em, 65),  # 43 kB
    "dp_mixture_truncation/blei_jordan": (lambda: _dp_mixture("blei_jordan"), 255),  # 170 kB
    "dp_mixture_truncation/kurihara": (lambda: _dp_mixture("kurihara"), 270),  # 178 kB
    "hmm_categorical/em": (_hmm_em, 145),  # 95 kB
    "gap_nmf/meanfield+ssvi_a": (_gap_nmf, 485),  # 323 kB
    "ctm_synthetic/prox_svi": (_ctm, 370),  # 244 kB
    "vae_synthetic/aevb": (_vae, 195),  # 130 kB
    "gpc/prox_svi": (lambda: _gpc("prox_svi"), 150),  # 100 kB
    "gpc/adam": (lambda: _gpc("adam"), 160),  # 105 kB
    "gpc/gd": (lambda: _gpc("gd"), 130),  # 86 kB
}


@pytest.mark.parametrize("name", sorted(MADE))
def test_config_step_program_size(name):
    make, bound = MADE[name]
    size = _chunk_size(*make())
    assert size < bound * KB, f"{size / KB:.0f} kB"


# built by the experiment's builder at tiny sizes (these overrides): (config, run) -> bound in kB,
# about 1.5x the size measured when it was set
TINY = {
    "bayes_last_layer": ["model.hidden=[4, 3]"],
    "bbvi_logistic": ["data.dataset=synthetic", "data.num_data=20", "data.num_features=3"],
    "plsa": ["model.num_topics=3", "data.num_docs=20", "data.vocab_size=30", "data.true_topics=3", "data.eval_batch=4"],
    "student_t_mixture": ["data.num_train=20", "data.num_test=10", "algorithm.num_restarts=2"],
}
BUILT_BOUNDS = {
    ("bayes_last_layer", "run"): 495,  # 330 kB
    ("bayes_last_layer", "point"): 400,  # 268 kB
    ("bbvi_logistic", "run"): 120,  # 81 kB
    ("bbvi_logistic", "ngvi-fullrank"): 185,  # 122 kB
    ("plsa", "run"): 110,  # 71 kB
    ("plsa", "lda_cavi"): 465,  # 307 kB
    ("student_t_mixture", "run"): 135,  # 88 kB
    ("student_t_mixture", "gmm_cavi"): 395,  # 263 kB
}


@functools.lru_cache(maxsize=None)
def _built(config):
    cfg = load_config(str(ROOT / "configs" / f"{config}.yaml"), TINY[config])
    exp = build_experiment(cfg)
    runs = {"run": (exp.algorithm, exp.batch_fn, exp.init_state)}
    runs.update({b.name: (b.algorithm, b.batch_fn, b.init_state) for b in exp.baselines})
    return runs


@pytest.mark.parametrize("config, run", sorted(BUILT_BOUNDS))
def test_built_config_step_program_size(config, run):
    alg, batch_fn, init_state = _built(config)[run]
    low = lower_run(alg, jax.random.PRNGKey(0), batch_fn=batch_fn, init_state=init_state, chunk_size=2)
    size = len(low.as_text())
    assert size < BUILT_BOUNDS[config, run] * KB, f"{size / KB:.0f} kB"


def test_gpc_program_does_not_grow_with_the_data():
    """GPClassification's steps close over K and its Cholesky factor (N x N each): the runner makes
    a step's large captured arrays arguments of its chunk, so the program stays the same size (it
    grew as N^2: 6.8 MB of text at breast_cancer's N = 456, 19 MB at usps's)."""
    for method in ("prox_svi", "adam"):
        small, large = (_chunk_size(*_gpc_n(method, n)) for n in (12, 48))
        assert large < 1.05 * small, (method, small, large)


def test_gamma_sampler_makes_one_random_call_per_round():
    """Each random call is a threefry program of its own for XLA (about 0.1 s of compile in the
    SSVI chunks): the rejection sampler folds the round into the key and draws all its uniforms
    at once, two random primitives in all (it had six)."""
    from vijax.expfam import sample_log_gamma

    counts = primitive_counts(sample_log_gamma, jax.random.PRNGKey(0), jnp.ones((3, 4)))
    calls = {p: c for p, c in counts.items() if p in ("random_bits", "random_split", "random_fold_in")}
    assert calls == {"random_bits": 1, "random_fold_in": 1}, calls


def test_gibbs_sampler_holds_one_copy_of_the_sweep():
    """The initialization pass is the sweep loop's first iteration, not a second copy of the sweep
    (whose chunk loop is the one ``while`` of the program; it had two)."""
    from vijax.solvers import collapsed_gibbs_allocations

    def alloc(logb, n, key):
        return collapsed_gibbs_allocations(logb, n, key, 0.3, sweeps=3, burn_in=1)

    counts = primitive_counts(alloc, jnp.zeros((2, 5, 3)), jnp.ones((2, 5)), jax.random.PRNGKey(0))
    assert counts.get("while") == 1, counts


def test_svi_step_computes_the_digamma_series_of_the_topics_once():
    """The local step's mean parameters of q(beta) and the ELBO's KL (which the non-finite guard
    tests) take psi and log Gamma of the K x V topics from one series (``Dirichlet.mean_params``
    and ``kl`` both call ``digamma_and_gammaln`` on [a, sum a]): the compiled program holds no log
    more than the KL alone."""
    from vijax import expfam

    q = expfam.Dirichlet.from_concentration(jnp.full((3, 37), 2.0))
    p = expfam.Dirichlet.from_concentration(jnp.full((3, 37), 0.5))

    def logs(fn):
        return len(re.findall(r"\blog\(", jax.jit(fn).lower(q, p).compile().as_text()))

    assert logs(lambda q, p: (q.mean_params(), q.kl(p))) == logs(lambda q, p: q.kl(p))
