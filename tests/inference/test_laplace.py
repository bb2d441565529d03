"""``map_estimate`` and ``laplace`` on a target, against closed forms and NumPyro's own guides.

A Bayesian linear regression with known noise has a Gaussian posterior, which the Laplace
approximation is: its mean and covariance in closed form (rtol 1e-6). On a logistic regression with a
positive slope (not conjugate; the slope's Jacobian matters), the points found are NumPyro's: at them
``AutoDelta``'s and ``AutoLaplaceApproximation``'s ``Trace_ELBO`` losses equal minus the reported
objective, their gradients vanish, and ``AutoLaplaceApproximation.get_posterior`` gives the same
covariance (rtol 1e-5).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

numpyro = pytest.importorskip("numpyro")
dist = numpyro.distributions

import vijax  # noqa: E402
from vijax._validate import ArgumentError  # noqa: E402
from vijax.inference import fitted_params, laplace, laplace_gaussian, map_estimate, sample  # noqa: E402

X = jnp.array([[1.0, -1.2], [1.0, 0.3], [1.0, 0.8], [1.0, -0.4], [1.0, 1.9], [1.0, -2.1]])
Y = jnp.array([-0.9, 0.6, 1.1, -0.2, 2.3, -1.7])
LABELS = jnp.array([0.0, 0.0, 1.0, 0.0, 1.0, 0.0])  # not separable: the mode is finite


def linear(x, y):
    w = numpyro.sample("w", dist.Normal(jnp.zeros(2), 2.0).to_event(1))
    numpyro.sample("y", dist.Normal(x @ w, 0.5), obs=y)


def logistic(x, t):
    a = numpyro.sample("a", dist.Normal(0.0, 2.0))
    b = numpyro.sample("b", dist.Gamma(2.0, 1.0))  # a positive slope
    numpyro.sample("t", dist.Bernoulli(logits=a + b * x), obs=t)


def _run(alg, steps=30):
    state = alg.init(jax.random.PRNGKey(0))
    body = lambda s, k: alg.step(k, s, None)
    state, infos = jax.jit(lambda s, ks: jax.lax.scan(body, s, ks))(
        state, jax.random.split(jax.random.PRNGKey(1), steps)
    )
    return state, jax.tree_util.tree_map(lambda a: a[-1], infos)


def test_laplace_is_the_exact_gaussian_posterior_of_a_linear_regression():
    precision = X.T @ X / 0.25 + jnp.eye(2) / 4.0
    cov = np.linalg.inv(precision)
    mean = cov @ (X.T @ Y / 0.25)
    target = vijax.from_numpyro(linear, X, Y)
    alg = laplace(target)
    state, info = _run(alg)
    assert int(state.num_rejected) == 0
    q, unravel = laplace_gaussian(alg, state)
    np.testing.assert_allclose(q.mean, mean, rtol=1e-6)
    np.testing.assert_allclose(q.covariance, cov, rtol=1e-6)
    assert unravel(q.mean)["w"].shape == (2,)
    draws = sample(alg, jax.random.PRNGKey(2), state, 4000)["w"]
    se = np.sqrt(np.diag(cov) / 4000)
    np.testing.assert_array_less(np.abs(draws.mean(0) - mean), 5 * se)  # 5 standard errors


def _numpyro_loss(guide, params, model, *args):
    from numpyro.infer import Trace_ELBO

    return Trace_ELBO().loss(jax.random.PRNGKey(0), params, model, guide, *args)


@pytest.mark.slow  # two L-BFGS programs and three of NumPyro's: about 20 s of CPU
@jax.numpy_rank_promotion("allow")  # NumPyro's guides broadcast by rank promotion
def test_points_and_hessian_are_numpyros_autodelta_and_autolaplace():
    from numpyro.infer.autoguide import AutoDelta, AutoLaplaceApproximation

    target = vijax.from_numpyro(logistic, X[:, 1], LABELS)
    # AutoDelta: the mode of log p at constrained values; its params are those values
    state, info = _run(map_estimate(target))
    point = target.constrain(state.q_global)
    guide = AutoDelta(logistic)
    numpyro.handlers.seed(guide, 0)(X[:, 1], LABELS)  # sets up the guide's prototype
    params = {f"{n}_auto_loc": point[n] for n in ("a", "b")}
    loss, grads = jax.jit(jax.value_and_grad(lambda p: _numpyro_loss(guide, p, logistic, X[:, 1], LABELS)))(params)
    np.testing.assert_allclose(-loss, info.elbo, rtol=1e-10)
    np.testing.assert_allclose(np.concatenate([np.ravel(g) for g in grads.values()]), 0.0, atol=1e-6)
    # AutoLaplaceApproximation: the mode on the unconstrained space (Jacobian included), then its Hessian
    alg = laplace(target)
    state, info = _run(alg)
    q, _ = laplace_gaussian(alg, state)
    guide = AutoLaplaceApproximation(logistic)
    numpyro.handlers.seed(guide, 0)(X[:, 1], LABELS)
    params = {"auto_loc": q.mean}  # ravel_pytree order: the sites' names sorted, as vijax's
    loss, grad = jax.jit(jax.value_and_grad(lambda p: _numpyro_loss(guide, p, logistic, X[:, 1], LABELS)))(params)
    np.testing.assert_allclose(-loss, info.elbo, rtol=1e-10)
    np.testing.assert_allclose(grad["auto_loc"], 0.0, atol=1e-6)
    cov = jax.jit(lambda p: guide.get_posterior(p).covariance_matrix)(params)
    np.testing.assert_allclose(q.covariance, cov, rtol=1e-5)
    assert not np.allclose(state.q_global["b"], jnp.log(point["b"]), atol=1e-3)  # the two modes differ (Jacobian)


def test_bad_arguments_are_named():
    with pytest.raises(ArgumentError, match="target"):
        laplace(lambda p, b: 0.0)
    target = vijax.from_numpyro(linear, X, Y)
    with pytest.raises(ArgumentError, match="optimizer"):
        map_estimate(target, optimizer="newton")
    with pytest.raises(ArgumentError, match="alg"):
        laplace_gaussian(map_estimate(target), None)

    def subsampled(x, y):
        w = numpyro.sample("w", dist.Normal(jnp.zeros(2), 2.0).to_event(1))
        with numpyro.plate("data", 6, subsample_size=3) as idx:
            numpyro.sample("y", dist.Normal(x[idx] @ w, 0.5), obs=y[idx])

    with pytest.raises(ArgumentError, match="subsample"):
        laplace(vijax.from_numpyro(subsampled, X, Y))


def test_map_estimate_maximizes_a_param_with_the_point():
    """A numpyro.param noise scale sigma beside the weights: the joint maximum satisfies
    w = (X'X / sigma^2 + I / 4)^-1 X'y / sigma^2 and sigma^2 = mean((y - X w)^2) (rtol 1e-6)."""

    def noise_param(x, y):
        sigma = numpyro.param("sigma", 1.0, constraint=dist.constraints.positive)
        w = numpyro.sample("w", dist.Normal(jnp.zeros(2), 2.0).to_event(1))
        numpyro.sample("y", dist.Normal(x @ w, sigma), obs=y)

    alg = map_estimate(vijax.from_numpyro(noise_param, X, Y))
    state, _ = _run(alg, 60)
    w, sigma = state.q_global["w"], fitted_params(alg, state)["sigma"]
    s2 = sigma**2
    np.testing.assert_allclose(w, np.linalg.solve(X.T @ X / s2 + np.eye(2) / 4.0, X.T @ Y / s2), rtol=1e-6)
    np.testing.assert_allclose(s2, np.mean((Y - X @ w) ** 2), rtol=1e-6)
    assert list(sample(alg, jax.random.PRNGKey(0), state, 3)) == ["w"]
