"""Conjugate updates derived by autodiff from a log-joint (``vijax.models.conjugate_model``) equal the
hand-written ones of the univariate GMM, the diagonal GMM and LDA, run with CAVI, SVI and SSVI
through the registry, and a log-joint that is not conjugate, or a prior on the wrong support,
is named."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.special import gammaln

from vijax import expfam
from vijax.data import BowBatch
from vijax.inference import make_algorithm
from vijax.models import LDA, ConditionallyConjugateModel, DiagonalGMM, Local, UnivariateGMM, conjugate_model

K, D = 3, 2
RNG = np.random.default_rng(0)
X1 = jnp.asarray(np.concatenate([RNG.normal(-4, 1, 20), RNG.normal(0, 1, 20), RNG.normal(5, 1, 20)]))
X2 = jnp.asarray(RNG.normal(size=(60, D)) * 2.0)


def close(a, b, rtol=1e-9, atol=1e-9):
    jax.tree_util.tree_map(lambda u, v: np.testing.assert_allclose(u, v, rtol=rtol, atol=atol), a, b)


# ---------------------------------------------------------------- the three models as log-joints
def gmm1_log_joint(g, l, x):
    """Blei et al. 2017, §3: log p(x, c | mu) in t(mu_k) = (mu_k, mu_k^2) and t(c) = one-hot."""
    (mu, mu2), (z,) = g["mu"], l["z"]
    return jnp.sum(z * (x * mu - 0.5 * mu2)) - 0.5 * x**2 - 0.5 * jnp.log(2 * jnp.pi) - jnp.log(K)


def categorical_local(k):
    return lambda x: {"z": Local(expfam.Categorical.from_logits(jnp.zeros(k)))}


def gmm2_log_joint(g, l, x):
    """Blei et al. 2017, appendix B, in t(pi) = log pi, t(mu, tau) = (tau mu, tau mu^2, tau, log tau)."""
    (log_pi,), (tm, tm2, t, logt), (z,) = g["pi"], g["theta"], l["z"]
    per_k = log_pi + jnp.sum(0.5 * logt - 0.5 * t * x[None, :] ** 2 + x[None, :] * tm - 0.5 * tm2, -1)
    return jnp.sum(z * per_k) - 0.5 * D * jnp.log(2 * jnp.pi)


TOPICS, VOCAB, ALPHA = 4, 30, 0.3


def lda_log_joint(g, l, doc):
    """Blei et al. 2003: log p(w_d, z_d, theta_d | beta) in t(beta) = log beta, t(theta) = log theta,
    t(z_dn) = one-hot; the tokens of one word share q(z) (weight = their count)."""
    (log_beta,), (log_theta,), (z,) = g["topics"], l["theta"], l["z"]
    lb = log_beta[:, doc.word_ids].T
    prior = jnp.sum((ALPHA - 1) * log_theta) + gammaln(TOPICS * ALPHA) - TOPICS * gammaln(ALPHA)
    return prior + jnp.sum(doc.counts[:, None] * z * (log_theta[None, :] + lb))


def lda_locals(doc):
    n = jnp.sum(doc.counts)
    return {
        "z": Local(expfam.Categorical.from_logits(jnp.zeros((doc.word_ids.shape[0], TOPICS))), weight=doc.counts),
        "theta": Local(expfam.Dirichlet.from_concentration(ALPHA + n / TOPICS * jnp.ones(TOPICS))),
    }


def lda_batch():
    rng = np.random.default_rng(1)
    ids = np.stack([rng.choice(VOCAB, 8, replace=False) for _ in range(10)])
    counts = rng.integers(0, 4, ids.shape).astype(float)
    counts[:, -2:] = 0.0  # padding
    counts[3] = 0.0  # an empty document
    return BowBatch(jnp.asarray(ids, jnp.int32), jnp.asarray(counts))


def gmm1_pair():
    hand = UnivariateGMM(K, 10.0)
    derived = conjugate_model(
        gmm1_log_joint,
        priors={"mu": hand.prior()},
        locals=categorical_local(K),
        init=lambda key, b: {"mu": hand.init_globals(key, b)},
        example=X1,
    )
    return hand, derived


def gmm2_pair():
    hand = DiagonalGMM(K, D, alpha0=0.5, b0=2.0)
    pi, theta = hand.prior()
    derived = conjugate_model(
        gmm2_log_joint,
        priors={"pi": pi, "theta": theta},
        locals=categorical_local(K),
        init=lambda key, b: dict(zip(("pi", "theta"), hand.init_globals(key, b))),
        example=X2,
    )
    return hand, derived


# ---------------------------------------------------------------- derived == hand-written
def test_univariate_gmm_local_step_equals_the_hand_written_one():
    hand, derived = gmm1_pair()
    assert isinstance(derived, ConditionallyConjugateModel)
    view = hand.init_globals(jax.random.key(0), X1).mean_params()
    a, b = hand.local_step(view, X1), derived.local_step({"mu": view}, X1)
    close(a.suff_stats, b.suff_stats["mu"])
    close(a.local_terms, b.local_terms)
    close(a.local_params, b.local_params["z"].probs)


def test_diagonal_gmm_local_step_equals_the_hand_written_one():
    hand, derived = gmm2_pair()
    view = expfam.tree_mean_params(hand.init_globals(jax.random.key(0), X2))
    a, b = hand.local_step(view, X2), derived.local_step({"pi": view[0], "theta": view[1]}, X2)
    close(a.suff_stats, (b.suff_stats["pi"], b.suff_stats["theta"]))
    close(a.local_terms, b.local_terms)
    close(a.local_params, b.local_params["z"].probs)


def test_lda_local_step_equals_the_hand_written_mean_field_step_at_convergence():
    """Both iterate the same fixed point (Blei et al. 2003, eq. 6-7) to a mean absolute change of
    1e-13; the derived one by gradients of the log-joint, the hand-written one without forming phi."""
    batch = lda_batch()
    hand = LDA(TOPICS, VOCAB, alpha=ALPHA, eta=0.1, accelerate=False, tol=1e-13, max_iters=5000)
    derived = conjugate_model(
        lda_log_joint, priors={"topics": hand.prior()}, locals=lda_locals, tol=1e-13, max_iters=5000, example=batch
    )
    view = hand.init_globals(jax.random.key(2)).mean_params()
    a, b = hand.local_step(view, batch), derived.local_step({"topics": view}, batch)
    close(a.suff_stats[0], b.suff_stats["topics"][0], rtol=1e-8, atol=1e-10)
    close(a.local_terms, b.local_terms, rtol=1e-10)
    close(a.local_params, b.local_params["theta"].concentration, rtol=1e-8)


@pytest.mark.parametrize("name", ["cavi", "svi", "ssvi", "ssvi_a"])
def test_cavi_svi_and_ssvi_run_on_the_derived_model_as_on_the_hand_written_one(name):
    """Three steps of each algorithm from the same start and keys give the same q and ELBOs."""
    hand, derived = gmm1_pair()
    kwargs = {} if name == "cavi" else dict(num_data=X1.shape[0], schedule=0.5)
    algs = [make_algorithm(name, m, **kwargs) for m in (hand, derived)]
    states = [alg.init(jax.random.key(3), X1) for alg in algs]
    steps = [jax.jit(alg.step) for alg in algs]
    for t in range(3):
        key = jax.random.key(10 + t)
        (states[0], i0), (states[1], i1) = (steps[0](key, states[0], X1), steps[1](key, states[1], X1))
        close(i0.elbo, i1.elbo, rtol=1e-9)
    close(states[0].q_global.natural_params, states[1].q_global["mu"].natural_params, rtol=1e-9)


@pytest.mark.slow  # over CI's per-test budget: the derived diagonal GMM's local step equals the hand-written one in CI
def test_cavi_on_the_derived_diagonal_gmm_matches_and_never_decreases():
    hand, derived = gmm2_pair()
    algs = [make_algorithm("cavi", m) for m in (hand, derived)]
    states = [alg.init(jax.random.key(4), X2) for alg in algs]
    steps = [jax.jit(alg.step) for alg in algs]
    elbos = []
    for t in range(5):
        out = [step(jax.random.key(t), s, X2) for step, s in zip(steps, states)]
        states = [o[0] for o in out]
        close(out[0][1].elbo, out[1][1].elbo, rtol=1e-9)
        elbos.append(float(out[1][1].elbo))
    assert np.all(np.diff(elbos) >= -1e-9), elbos


def test_default_start_breaks_the_symmetry_and_is_a_valid_posterior():
    _, derived = gmm1_pair()
    bare = conjugate_model(gmm1_log_joint, priors=derived.priors, locals=categorical_local(K))
    q = bare.init_globals(jax.random.key(0), X1)
    assert bool(jnp.all(q["mu"].is_valid()))
    assert float(jnp.std(q["mu"].mean)) > 1e-3  # components differ
    assert bare.init_globals(jax.random.key(0)) is bare.priors  # no data: the prior


# ---------------------------------------------------------------- bad input, named
def test_a_log_joint_not_conjugate_in_a_global_is_named():
    def squared_mean(g, l, x):  # E[mu]^2 where E[mu^2] belongs: quadratic in t(mu)
        (mu, _), (z,) = g["mu"], l["z"]
        return jnp.sum(z * (x * mu - 0.5 * mu**2))

    with pytest.raises(ValueError, match="not conjugate in global variable 'mu'"):
        conjugate_model(squared_mean, priors={"mu": UnivariateGMM(K).prior()}, locals=categorical_local(K), example=X1)


def test_a_log_joint_not_conjugate_in_a_local_is_named():
    def softmax_of_z(g, l, x):
        (mu, mu2), (z,) = g["mu"], l["z"]
        return jnp.sum(z**2 * (x * mu - 0.5 * mu2))

    model = conjugate_model(softmax_of_z, priors={"mu": UnivariateGMM(K).prior()}, locals=categorical_local(K))
    with pytest.raises(ValueError, match="not conjugate in local variable 'z'"):
        model.init_globals(jax.random.key(0), X1)  # checked on the first data the model sees


def test_a_prior_on_the_wrong_support_is_named():
    """A coin's probability p written in Beta's statistics (log p, log(1 - p)) under a Gamma prior:
    the derived 'rate' -b + sum(1 - x) leaves the Gamma domain."""
    x = jnp.asarray((RNG.random(50) < 0.3).astype(float))

    def coin(g, l, x):  # no local variables: l is {}
        (t0, t1) = g["p"]
        return x * t0 + (1 - x) * t1

    loc = None
    ok = conjugate_model(coin, priors={"p": expfam.Beta.from_concentrations(2.0, 2.0)}, locals=loc, example=x)
    assert float(ok.local_step(expfam.tree_mean_params(ok.priors), x).suff_stats["p"][0]) == float(jnp.sum(x))
    with pytest.raises(ValueError, match="global variable 'p' leaves its prior family Gamma's domain"):
        conjugate_model(coin, priors={"p": expfam.Gamma.from_shape_rate(2.0, 1.0)}, locals=loc, example=x)


def test_statistics_that_do_not_fit_the_log_joint_are_named():
    with pytest.raises(ValueError, match="log_joint failed .*mu: Dirichlet with statistics of shapes \\[\\(3,\\)\\]"):
        conjugate_model(
            gmm1_log_joint,
            priors={"mu": expfam.Dirichlet.from_concentration(jnp.ones(3))},
            locals=categorical_local(K),
            example=X1,
        )


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(priors={}), "priors must be a non-empty dict"),
        (dict(priors={"mu": 3.0}), "priors\\['mu'\\] must be a vijax.expfam family"),
        (dict(max_iters=0), "max_iters"),
        (dict(tol=-1.0), "tol"),
        (dict(locals=lambda x: {"z": expfam.Categorical.from_logits(jnp.zeros(K))}), "Local\\(q0, weight\\)"),
    ],
)
def test_bad_arguments_are_named(kwargs, match):
    args = dict(priors={"mu": UnivariateGMM(K).prior()}, locals=categorical_local(K), example=X1) | kwargs
    with pytest.raises(ValueError, match=match):
        conjugate_model(gmm1_log_joint, **args)


def test_bad_data_are_named_at_init():
    _, derived = gmm1_pair()
    alg = make_algorithm("cavi", derived)
    with pytest.raises(ValueError, match="batch must be finite"):
        alg.init(jax.random.key(0), X1.at[3].set(jnp.nan))


def normal_gamma_priors():
    return {
        "mu": expfam.Normal.from_mean_variance(jnp.asarray(0.0), 10.0),
        "tau": expfam.Gamma.from_shape_rate(2.0, 2.0),
    }


def gaussian_log_joint(g, l, x):
    """log N(x | mu, 1/tau) in t(mu) = (mu, mu^2), t(tau) = (log tau, tau): mu and tau interact."""
    (mu, mu2), (log_tau, tau) = g["mu"], g["tau"]
    return 0.5 * log_tau - 0.5 * jnp.log(2 * jnp.pi) - 0.5 * tau * (x**2 - 2 * x * mu + mu2)


@pytest.mark.parametrize(
    "term, why",
    [
        (lambda mu: jnp.abs(mu), "depends on them"),  # zero Hessian, but its gradient is sign(mu)
        (lambda mu: jnp.maximum(mu, 0.0), "depends on them"),
        (lambda mu: jnp.floor(mu), "along a random line"),  # a zero gradient: only the secant test sees it
    ],
    ids=["abs", "max", "floor"],
)
def test_a_non_smooth_term_is_not_conjugate(term, why):
    def log_joint(g, l, x):
        return gaussian_log_joint(g, l, x) - term(g["mu"][0])

    with pytest.raises(ValueError, match=f"not conjugate in global variable 'mu'.*{why}"):
        conjugate_model(log_joint, priors=normal_gamma_priors(), example=X1)


@pytest.mark.parametrize("name", ["cavi", "svi"])
def test_a_log_joint_that_is_not_conjugate_is_refused_at_the_first_step_after_a_start_without_data(name):
    """No data at construction nor at init: the first (jitted) step reads the log-joint's structure
    from the batch's shapes and refuses it before any update."""

    def log_joint(g, l, x):
        return gaussian_log_joint(g, l, x) - jnp.abs(g["mu"][0])

    model = conjugate_model(log_joint, priors=normal_gamma_priors())
    alg = make_algorithm(name, model, **({} if name == "cavi" else dict(num_data=X1.shape[0])))
    state = alg.init(jax.random.key(0))
    with pytest.raises(ValueError, match="log_joint is not conjugate in global variable 'mu'"):
        jax.jit(alg.step)(jax.random.key(1), state, X1)


def test_the_domain_of_the_global_update_is_checked_on_all_the_data():
    """A Gamma prior (rate 20) on a coin's probability in Beta's statistics: the derived rate
    20 - sum(1 - x) is positive on the first 8 data (all heads) and negative on all 60."""
    x = jnp.concatenate([jnp.ones(8), jnp.asarray((RNG.random(52) < 0.3).astype(float))])
    assert float(jnp.sum(1 - x[:8])) == 0.0 and float(jnp.sum(1 - x)) > 20

    def coin(g, l, x):
        (t0, t1) = g["p"]
        return x * t0 + (1 - x) * t1

    with pytest.raises(ValueError, match="global variable 'p' leaves its prior family Gamma's domain"):
        conjugate_model(coin, priors={"p": expfam.Gamma.from_shape_rate(2.0, 20.0)}, example=x)


def test_a_nan_prior_is_named_as_the_prior():
    """A NaN natural parameter passes Normal's domain test (eta2 < 0): named, not blamed on z."""
    prior = expfam.Normal(jnp.array([0.0, jnp.nan, 0.0]), -0.05 * jnp.ones(3))
    with pytest.raises(ValueError, match="^priors\\['mu'\\] has NaN or infinite entries$"):
        conjugate_model(gmm1_log_joint, priors={"mu": prior}, locals=categorical_local(K), example=X1)


@pytest.mark.parametrize(
    "init, match",
    [
        (lambda p: {"mu": p["mu"]}, "^init must have the structure of priors: expected \\{'mu': Normal .*'tau': Gamma"),
        (
            lambda p: {**p, "tau": expfam.Gamma.from_shape_rate(jnp.ones(2), 1.0)},
            "^init must have the structure of priors",
        ),
        (lambda p: (p["mu"], p["tau"]), "^init must have the structure of priors: .* got tuple"),
        (
            lambda p: {**p, "mu": expfam.Normal(jnp.asarray(jnp.nan), jnp.asarray(-0.5))},
            "^init\\(key, batch\\)\\['mu'\\] has NaN",
        ),
    ],
    ids=["a name missing", "other shapes", "a tuple", "NaN"],
)
def test_an_init_unlike_the_priors_is_named(init, match):
    priors = normal_gamma_priors()
    model = conjugate_model(gaussian_log_joint, priors=priors, init=lambda key, batch: init(priors))
    with pytest.raises(ValueError, match=match):
        make_algorithm("cavi", model).init(jax.random.key(0))


def test_globals_that_do_not_interact_share_one_block():
    """The diagonal GMM's weights and components: one block, the usual CAVI step (one local step)."""
    pi, theta = DiagonalGMM(K, D).prior()
    derived = conjugate_model(gmm2_log_joint, priors={"pi": pi, "theta": theta}, locals=categorical_local(K))
    assert derived.global_blocks(X2) == ({"pi": True, "theta": True},)
    model = conjugate_model(gaussian_log_joint, priors=normal_gamma_priors())
    assert model.global_blocks(X1) == ({"mu": True, "tau": False}, {"mu": False, "tau": True})
