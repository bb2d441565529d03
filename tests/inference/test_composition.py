"""vijax inside larger JAX programs (docs/composition.md): a vijax step inside a user's jitted
training step next to an optax update, a Bayesian last layer trained end to end with the network,
and one program that vmaps whole fits over seeds.

The three programs of docs/composition.md are executed here as written (read from the file), so
the documentation cannot drift from what is tested. Oracles: the exact marginal likelihood of
Bayesian linear regression (type-II ML sigma), the closed-form ELBO of a Gaussian head and its
gradient, finite differences, the conjugate Gaussian posterior of the head on fixed features, and
per-seed runs for the vmapped program. Tolerances are stated at each check.
"""

import pathlib
import re

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.flatten_util import ravel_pytree

from vijax import inference
from vijax.inference import bayesian_last_layer, bbvi
from vijax.models import from_equinox, mlp

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "composition.md"


def _run_snippet(heading: str) -> dict:
    """Executes the first Python block under the doc's section ``heading``; returns its globals."""
    text = DOC.read_text()
    section = text[text.index(heading) :]
    block = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    scope = {}
    exec(compile(block, str(DOC), "exec"), scope)
    return scope


def _allclose(a, b, rtol):
    chex.assert_trees_all_close(a, b, rtol=rtol, atol=rtol)


# ---- 1. a vijax step next to an optax update in the user's jitted train_step -----------------------


@pytest.fixture(scope="module")
def pattern1():
    return _run_snippet("## 1. ")


def _type2_ml_sigma(x, y):
    """argmax_sigma log N(y | 0, X X^T + sigma^2 I) (w ~ N(0, I) integrated out), on a fine grid,
    through the eigendecomposition X X^T = V diag(l) V^T."""
    lam, v = np.linalg.eigh(np.asarray(x) @ np.asarray(x).T)
    r2 = (v.T @ np.asarray(y)) ** 2
    sigmas = np.linspace(0.3, 0.8, 5001)
    c = np.maximum(lam, 0.0)[None, :] + sigmas[:, None] ** 2
    log_ml = -0.5 * np.sum(np.log(c) + r2[None, :] / c, axis=1)
    return sigmas[int(np.argmax(log_ml))]


def test_pattern1_learns_the_type2_ml_noise_scale(pattern1):
    # 3000 coordinate steps, Adam(0.02) on log sigma with S = 4 draws: its stationary noise is
    # about 1% of sigma (measured over seeds); q is full-rank, so at the optimum the ELBO is the
    # log marginal likelihood and sigma its maximiser.
    s = pattern1
    sigma_hat = _type2_ml_sigma(s["x"], s["y"])
    assert abs(float(s["sigma"]) / sigma_hat - 1.0) < 0.03, (float(s["sigma"]), sigma_hat)
    assert s["elbos"].shape == (3000,) and np.all(np.isfinite(s["elbos"]))


def test_pattern1_compiles_once_and_equals_stepping_separately(pattern1):
    s = pattern1
    traces = []

    def counted(key, carry, batch):
        traces.append(1)
        return s["train_step"](key, carry, batch)

    step = jax.jit(counted)
    keys = jax.random.split(jax.random.PRNGKey(5), 6)
    batch = (s["x"], s["y"])
    carry = s["carry0"]
    for k in keys:
        carry, _ = step(k, carry, batch)
    assert len(traces) == 1  # the second and later calls reuse the compiled program

    # the same updates as two separately jitted pieces: the vijax step, then the optax step
    vi, hyper_opt = s["vi"], s["hyper_opt"]
    vi_step = jax.jit(vi.step)

    @jax.jit
    def hyper_step(vi_state, log_sigma, opt_state, key):
        grad = jax.grad(lambda ls: -inference.elbo(vi, key, vi_state.q_global, (s["x"], s["y"], ls)))(log_sigma)
        updates, opt_state = hyper_opt.update(grad, opt_state)
        return optax.apply_updates(log_sigma, updates), opt_state

    vi_state, log_sigma, opt_state = s["carry0"]
    for k in keys:
        k_vi, k_hyper = jax.random.split(k)
        vi_state, _ = vi_step(k_vi, vi_state, (s["x"], s["y"], log_sigma))
        log_sigma, opt_state = hyper_step(vi_state, log_sigma, opt_state, k_hyper)
    _allclose(carry, (vi_state, log_sigma, opt_state), rtol=1e-9)  # float64, different fusions


# ---- BBVI.elbo: the step's objective, differentiable in the batch ------------------------------------


def _hyper_density(w, batch):
    x, y, log_sigma = batch
    r = (y - x @ w) / jnp.exp(log_sigma)
    return jnp.sum(-0.5 * r**2 - log_sigma) - 0.5 * jnp.sum(w**2)


def test_elbo_is_the_steps_objective_and_reaches_the_batch_for_every_estimator():
    x = jax.random.normal(jax.random.PRNGKey(0), (20, 2))
    y = x @ jnp.array([1.0, -0.5])
    key = jax.random.PRNGKey(3)
    grads = {}
    for estimator in ("reparam", "score", "iwae"):
        vi = bbvi(_hyper_density, family="fullrank", init_params=jnp.ones(2), estimator=estimator, num_samples=3)
        state = vi.init(jax.random.PRNGKey(1))

        @jax.jit
        def check(state, log_sigma):
            _, info = vi.step(key, state, (x, y, log_sigma))
            value, grad = jax.value_and_grad(lambda ls: inference.elbo(vi, key, state.q_global, (x, y, ls)))(log_sigma)
            return info.elbo, value, grad

        reported, value, grads[estimator] = check(state, jnp.asarray(0.1))
        # the value is the ELBO estimate the step reports, at the same key
        np.testing.assert_allclose(value, reported, rtol=1e-12)
    # the same draws (same key): the batch gradient is (1/S) sum_s d log p(x, z_s)/d log_sigma for
    # the estimators of the ELBO (the score function's stopped f_s would give zero here) ...
    assert abs(float(grads["reparam"])) > 1.0
    np.testing.assert_allclose(grads["score"], grads["reparam"], rtol=1e-10)
    # ... and the self-normalised importance-weighted one for the IWAE bound
    assert np.isfinite(grads["iwae"]) and abs(float(grads["iwae"] - grads["reparam"])) > 1e-6


# ---- 2. a Bayesian last layer --------------------------------------------------------------------


def test_pattern2_end_to_end_training_improves_held_out_log_predictive():
    s = _run_snippet("## 2. ")
    # XOR on 200 points: the untrained network is at chance (log 0.5 = -0.69); measured after 1500
    # Adam steps: -0.18
    assert float(s["before"]) < -0.6 and float(s["after"]) < 0.0
    assert float(s["after"]) > float(s["before"]) + 0.35, (float(s["before"]), float(s["after"]))


def _exact_gaussian_elbo(net, theta, vparams, guide, x, y, noise, prior_scale):
    """The ELBO of the Gaussian head in closed form, written here independently of vijax:
    sum_n [log N(y_n | m^T u_n, sigma^2) - u_n^T Sigma u_n / (2 sigma^2)] - KL(N(m, Sigma) || N(0, s^2 I))
    with u_n = (1, phi(x_n)) (the flat vector of {"b", "w"} puts b first)."""
    q = guide.to_tfp(vparams)
    m, cov = q.mean(), q.covariance()
    phi = jax.vmap(net.apply, (None, 0))(theta, x)
    u = jnp.concatenate([jnp.ones((x.shape[0], 1)), phi], axis=1)
    r = y - u @ m
    quad = jnp.einsum("ni,ij,nj->n", u, cov, u)
    ell = jnp.sum(-0.5 * (r**2 + quad) / noise**2 - jnp.log(noise) - 0.5 * jnp.log(2 * jnp.pi))
    d = m.shape[0]
    kl = 0.5 * (
        jnp.trace(cov) / prior_scale**2
        + m @ m / prior_scale**2
        - d
        + 2 * d * jnp.log(prior_scale)
        - jnp.linalg.slogdet(cov)[1]
    )
    return ell - kl


def _network(kind, key, sizes):
    if kind == "mlp":
        return mlp(key, sizes)
    import equinox as eqx

    return from_equinox(eqx.nn.MLP(sizes[0], sizes[-1], sizes[1], 1, activation=jnp.tanh, key=key))


def _gaussian_head(kind):
    """A Gaussian head on a 3 -> 6 -> 4 network, 20 data, and a correlated q (not q's start)."""
    k_net, k_x, k_y, k_q = jax.random.split(jax.random.PRNGKey(11), 4)
    net = _network(kind, k_net, [3, 6, 4])
    x = jax.random.normal(k_x, (20, 3))
    y = jax.random.normal(k_y, (20,))
    head = bayesian_last_layer(net, x[0], likelihood="gaussian", noise_scale=0.7, prior_scale=1.5)
    vparams = head.init(k_q)
    vparams = dict(vparams, chol=0.3 * jax.random.normal(k_q, vparams["chol"].shape))
    theta, unravel = ravel_pytree(net.params)

    def mc(th, key):  # the ELBO estimate as a function of the network's flat parameters
        return head.elbo(unravel(th), vparams, (x, y), key)

    return net, head, vparams, x, y, theta, unravel, mc


@pytest.mark.parametrize("kind", ["mlp", "equinox"])
def test_elbo_gradient_reaches_the_network_and_equals_a_finite_difference(kind):
    # at a fixed key the estimate is a smooth function of theta: a central difference along a
    # random direction agrees with jax.grad (float64, step 1e-5: agreement to ~1e-8 relative)
    *_, theta, _, mc = _gaussian_head(kind)
    key = jax.random.PRNGKey(12)
    d = jax.random.normal(jax.random.PRNGKey(13), theta.shape)
    eps = 1e-5

    @jax.jit
    def grad_and_difference(th, key):
        fd = (mc(th + eps * d, key) - mc(th - eps * d, key)) / (2 * eps)
        return jax.grad(mc)(th, key), fd

    g, fd = grad_and_difference(theta, key)
    assert float(jnp.linalg.norm(g)) > 0.1
    np.testing.assert_allclose(g @ d, fd, rtol=1e-6)


@pytest.mark.slow
def test_elbo_gradient_in_the_network_is_unbiased_for_the_closed_form_elbo():
    # over 2000 keys the estimate's gradient in theta averages to the gradient of the ELBO written
    # in closed form here (within 5 standard errors per coordinate), and so does its value
    net, head, vparams, x, y, theta, unravel, mc = _gaussian_head("mlp")
    exact = jax.jit(
        jax.value_and_grad(
            lambda th: _exact_gaussian_elbo(net, unravel(th), vparams, inference.guide(head.vi), x, y, 0.7, 1.5)
        )
    )
    keys = jax.random.split(jax.random.PRNGKey(14), 2000)
    vals, grads = jax.jit(jax.vmap(jax.value_and_grad(mc), (None, 0)))(theta, keys)
    exact_val, exact_grad = exact(theta)
    se = np.std(grads, 0) / np.sqrt(len(keys))
    assert float(np.linalg.norm(exact_grad)) > 0.1
    np.testing.assert_array_less(np.abs(np.mean(grads, 0) - exact_grad), 5 * se + 1e-9)
    assert abs(float(np.mean(vals) - exact_val)) < 5 * float(np.std(vals)) / np.sqrt(len(keys))


@pytest.mark.parametrize("estimator", ["stl", pytest.param("reparam", marks=pytest.mark.slow)])
def test_gaussian_head_on_fixed_features_reaches_the_conjugate_posterior(estimator):
    """q(W) fitted by head.vi.step on fixed features phi(x) is N(mu, Sigma) of the conjugate
    model: Sigma = (U^T U / sigma^2 + I / s^2)^-1, mu = Sigma U^T y / sigma^2, U = [1, phi].
    Two of the features correlate at -0.98 in the posterior. Measured after 5000 Adam steps (rate
    0.1, cosine decay to 0.001): STL's gradient vanishes at the exact posterior, so its q lands
    within 4e-5 sd of mu and 4e-4 (in sd x sd units) of Sigma; the reparameterization gradient
    (analytic KL) keeps Adam's noise: 0.035 sd and 0.09."""
    k_net, k_x, k_w, k_e, k_q, k_fit = jax.random.split(jax.random.PRNGKey(4), 6)
    net = mlp(k_net, [2, 8, 3])
    x = jax.random.normal(k_x, (40, 2))
    noise, prior_scale = 0.5, 1.0
    sched = optax.cosine_decay_schedule(0.1, 5000, 0.01)
    head = bayesian_last_layer(
        net,
        x[0],
        likelihood="gaussian",
        noise_scale=noise,
        prior_scale=prior_scale,
        estimator=estimator,
        num_samples=4,
        schedule=sched,
    )
    phi = head.features(net.params, x)
    u = np.concatenate([np.ones((40, 1)), np.asarray(phi)], axis=1)
    y = jnp.asarray(u @ np.asarray(jax.random.normal(k_w, (4,))) + noise * np.asarray(jax.random.normal(k_e, (40,))))
    prec = u.T @ u / noise**2 + np.eye(4) / prior_scale**2
    cov = np.linalg.inv(prec)
    mu = cov @ u.T @ np.asarray(y) / noise**2

    def fit(state, keys):
        return jax.lax.scan(lambda st, k: (head.vi.step(k, st, (phi, y))[0], None), state, keys)[0]

    state = head.vi.init(k_q)
    state = state._replace(q_global=head.init(k_q))  # a random start, away from the answer
    state = jax.jit(fit)(state, jax.random.split(k_fit, 5000))
    q = inference.guide(head.vi).to_tfp(state.q_global)
    sd = np.sqrt(np.diag(cov))
    tol_mean, tol_cov = (1e-3, 1e-3) if estimator == "stl" else (0.1, 0.25)
    np.testing.assert_array_less(np.abs(np.asarray(q.mean()) - mu) / sd, tol_mean)
    np.testing.assert_array_less(np.abs(np.asarray(q.covariance()) - cov) / np.outer(sd, sd), tol_cov)


def test_a_network_of_the_wrong_width_is_named():
    net = mlp(jax.random.PRNGKey(0), [3, 5, 4])
    with pytest.raises(ValueError, match=r"^net must map one datum of shape \(3,\) to shape \(6,\), got \(4,\)"):
        bayesian_last_layer(net, jnp.zeros(3), num_features=6)
    with pytest.raises(ValueError, match="^net: applying it"):
        bayesian_last_layer(net, jnp.zeros(7))
    with pytest.raises(ValueError, match="^net must be a vijax.models.Network"):
        bayesian_last_layer(lambda x: x, jnp.zeros(3))
    with pytest.raises(ValueError, match="^num_classes"):
        bayesian_last_layer(net, jnp.zeros(3), likelihood="categorical")
    with pytest.raises(ValueError, match="^num_classes"):
        bayesian_last_layer(net, jnp.zeros(3), num_classes=3)
    with pytest.raises(ValueError, match="^likelihood"):
        bayesian_last_layer(net, jnp.zeros(3), likelihood="poisson")
    with pytest.raises(ValueError, match="^noise_scale"):
        bayesian_last_layer(net, jnp.zeros(3), likelihood="gaussian", noise_scale=0.0)
    with pytest.raises(ValueError, match="^key"):
        bayesian_last_layer(net, jnp.zeros(3)).init(None)


@pytest.mark.slow
def test_categorical_head_shapes_and_probabilities():
    net = mlp(jax.random.PRNGKey(0), [3, 5, 4])
    head = bayesian_last_layer(net, jnp.zeros(3), likelihood="categorical", num_classes=3, family="meanfield")
    x, y = jax.random.normal(jax.random.PRNGKey(1), (6, 3)), jnp.array([0, 1, 2, 0, 1, 2])
    v = head.init(jax.random.PRNGKey(2))
    assert v["loc"].shape == (4 * 3 + 3,)
    key = jax.random.PRNGKey(3)
    p, lp = jax.jit(
        lambda v: (head.predict(net.params, v, x, key, 7), head.log_predictive(net.params, v, (x, y), key, 7))
    )(v)
    np.testing.assert_allclose(jnp.sum(p, -1), 1.0, rtol=1e-12)
    # the same draws: log of the averaged probability of the observed class
    np.testing.assert_allclose(lp, jnp.log(p[jnp.arange(6), y]), rtol=1e-10)


# ---- 3. many fits as one program -------------------------------------------------------------------


def test_pattern3_vmapped_fits_equal_per_seed_fits():
    s = _run_snippet("## 3. ")
    states, elbos = s["states"], s["elbos"]
    assert elbos.shape == (4, 500) and states.q_global["loc"].shape == (4, 2)
    one = jax.jit(s["fit"])
    for i, seed in enumerate(s["seeds"]):
        state_i, elbos_i = one(seed)
        # float64; vmap batches the same arithmetic, so the 500 steps agree to ~1e-12
        _allclose(jax.tree.map(lambda a: a[i], (states, elbos)), (state_i, elbos_i), rtol=1e-9)
    # the seeds' fits differ (their draws do) but agree on the posterior mean to Adam's noise
    locs = np.asarray(states.q_global["loc"])
    assert np.ptp(locs[:, 0]) > 0 and np.max(np.ptp(locs, 0)) < 0.3
