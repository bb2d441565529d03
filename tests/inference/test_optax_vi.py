"""The optax baselines of Khan et al. 2016, appendix G: each named optimizer against its update written out
by hand, the minibatch/Monte Carlo objective, convergence of batch GD to the PG optimum, the JAX
contract and bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from vijax.inference import OPTIMIZERS, make_optimizer, optax_vi
from vijax.models.gp_classification import GPClassification

N = 5


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(N, 2))
    return GPClassification(x, (x[:, 1] > 0).astype(int), log_lengthscale=0.0, log_scale=0.3, jitter=1e-2)


def _manual(name, lr, grads_fn, params, steps, **h):
    """Appendix G's updates (ascent on the ELBO), written out with numpy on flat vectors."""
    eps = h.get("eps", 1e-8)
    p = params.copy()
    s = np.zeros_like(p)
    d = np.zeros_like(p)
    mu = np.zeros_like(p)
    for k in range(steps):
        g = grads_fn(p)
        if name == "gd":
            p = p + lr * g
        elif name == "sgd":
            p = p + lr * (k + 1.0) ** (-h.get("kappa", 0.6)) * g
        elif name == "adagrad":
            s = s + g * g
            p = p + lr * np.where(s > 0, g / np.sqrt(s + eps), 0.0)
        elif name == "rmsprop":
            rho = h.get("decay", 0.9)
            s = rho * s + (1 - rho) * g * g
            p = p + lr * g / np.sqrt(s + eps)
        elif name == "adadelta":
            rho = h.get("rho", 0.9)
            s = rho * s + (1 - rho) * g * g
            u = lr * np.sqrt(d + eps) / np.sqrt(s + eps) * g  # the reference code's form
            d = rho * d + (1 - rho) * u * u
            p = p + u
        elif name == "adam":
            b1, b2 = h.get("b1", 0.9), h.get("b2", 0.999)
            mu = b1 * mu + (1 - b1) * g
            s = b2 * s + (1 - b2) * g * g
            p = p + lr * (mu / (1 - b1 ** (k + 1))) / (np.sqrt(s / (1 - b2 ** (k + 1))) + eps)
    return p


@pytest.mark.parametrize(
    "name,lr,hyper",
    [
        ("gd", 0.01, {}),
        ("sgd", 0.02, {"kappa": 0.7}),
        ("adagrad", 0.1, {}),
        ("rmsprop", 0.05, {"decay": 0.99}),
        ("adadelta", 0.5, {"rho": 0.95}),
        ("adam", 0.05, {}),
    ],
)
def test_named_optimizers_follow_appendix_g(model, name, lr, hyper):
    alg = optax_vi(model, optimizer=name, schedule=lr, **hyper)
    state = alg.init(jax.random.PRNGKey(0))
    batch = jnp.arange(N)
    flat0, unravel = jax.flatten_util.ravel_pytree(state.q_global)
    grad = jax.jit(lambda f: jax.flatten_util.ravel_pytree(jax.grad(model.elbo_params)(unravel(f), batch))[0])
    step = jax.jit(alg.step)
    for _ in range(4):
        state, info = step(jax.random.PRNGKey(0), state, batch)
    want = _manual(name, lr, lambda p: np.asarray(grad(jnp.asarray(p))), np.asarray(flat0), 4, **hyper)
    np.testing.assert_allclose(jax.flatten_util.ravel_pytree(state.q_global)[0], want, rtol=1e-8, atol=1e-10)
    assert int(state.count) == 4 and np.isfinite(info.elbo)


def test_batch_gd_converges_to_the_pg_optimum(model):
    """GD on (m, L) with exact gradients and batch PG (beta = 1) reach the same ELBO maximum
    (1e-6 relative; 3000 GD steps at alpha = 0.05, 300 PG steps)."""
    batch = jnp.arange(N)
    gd = optax_vi(model, optimizer="gd", schedule=0.05)
    run = jax.jit(
        lambda s: jax.lax.scan(lambda s, _: (gd.step(jax.random.PRNGKey(0), s, batch)[0], None), s, None, length=3000)[
            0
        ]
    )
    params = run(gd.init(jax.random.PRNGKey(0))).q_global
    q = jax.jit(lambda q: jax.lax.fori_loop(0, 300, lambda i, q: model.prox_step(q, batch, None, 1.0, None), q))(
        model.init_variational(None)
    )
    np.testing.assert_allclose(model.elbo_params(params), model.elbo(q), rtol=1e-6)
    np.testing.assert_allclose(params["m"], q.mean, atol=1e-4)


def test_minibatch_objective_is_unbiased(model):
    """E over uniform single-example minibatches of the N/M-scaled ELBO = the full ELBO."""
    params = model.init_params(None)
    vals = [model.elbo_params(params, jnp.array([i])) for i in range(N)]
    np.testing.assert_allclose(np.mean(vals), model.elbo_params(params), rtol=1e-10)


def test_jit_once_and_vmap_over_keys(model):
    alg = optax_vi(model, optimizer="adam", schedule=0.1, num_samples=8)
    state = alg.init(jax.random.PRNGKey(0))
    n_traces = []

    def f(s, k):
        n_traces.append(1)
        return alg.step(k, s, jnp.array([0, 2]))

    jf = jax.jit(f)
    s1, _ = jf(state, jax.random.PRNGKey(0))
    jf(s1, jax.random.PRNGKey(1))
    assert len(n_traces) == 1
    states, infos = jax.jit(jax.vmap(f, in_axes=(None, 0)))(state, jax.random.split(jax.random.PRNGKey(2), 3))
    assert infos.elbo.shape == (3,) and len(set(np.asarray(infos.elbo).tolist())) == 3


def test_bad_input(model):
    with pytest.raises(ValueError, match="'nesterov'"):
        optax_vi(model, optimizer="nesterov")
    with pytest.raises(ValueError, match="learning_rate"):
        make_optimizer("adam", learning_rate=-1.0)
    with pytest.raises(ValueError, match="momentum"):
        make_optimizer("adam", momentum=0.9)
    with pytest.raises(ValueError, match="num_samples"):
        optax_vi(model, optimizer="adam", num_samples=0)
    with pytest.raises(ValueError, match="offers no init_params"):
        optax_vi(object(), optimizer="adam")
    assert set(OPTIMIZERS) == {"gd", "sgd", "adagrad", "rmsprop", "adadelta", "adam"}
    assert isinstance(optax_vi(model, optimizer=optax.sgd(0.1)).init(jax.random.PRNGKey(0)).q_global, dict)


def test_one_default_learning_rate_per_optimizer():
    """optax_vi, bbvi and aevb take a named optimizer through one helper, with the optimizer's own
    default rate: one Adam step from the same gradient moves a parameter by the same amount."""
    from vijax.inference import DEFAULT_LEARNING_RATES, resolve_optimizer

    g = {"w": jnp.array([2.0, -3.0])}
    for name, rate in DEFAULT_LEARNING_RATES.items():
        by_default = resolve_optimizer(name)
        explicit = make_optimizer(name, rate)
        u1, _ = by_default.update(g, by_default.init(g), g)
        u2, _ = explicit.update(g, explicit.init(g), g)
        np.testing.assert_allclose(u1["w"], u2["w"], rtol=1e-12, err_msg=name)
    u, _ = resolve_optimizer("adam").update(g, resolve_optimizer("adam").init(g), g)
    np.testing.assert_allclose(jnp.abs(u["w"]), 1e-3, rtol=1e-4)  # Adam's first step: the rate itself
    with pytest.raises(ValueError, match="schedule: a learning rate"):
        resolve_optimizer(optax.sgd(0.1), 0.5)
    with pytest.raises(ValueError, match="b1: a learning rate"):
        resolve_optimizer(optax.sgd(0.1), b1=0.5)
    with pytest.raises(ValueError, match="optimizer must be a name"):
        resolve_optimizer(3)
