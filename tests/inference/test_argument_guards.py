"""Bad arguments get a ValueError that names them: LDA's init_scale beyond what its ELBO can
represent; for the black-box algorithms and the combinators, num_data below the minibatch, a
log-density whose gradient is exactly zero (not differentiable) or that is not finite at any draw
of the initial q, another algorithm's state, a
prior shaped unlike q, a non-algorithm in lock_step, and restarts that cannot fit in memory
(checked before anything is allocated)."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import vijax._validate._args as args_module
from vijax import expfam
from vijax.expfam import Normal
from vijax.inference import bbvi, lock_step, ngvi, restarts, svi
from vijax.models import LDA

Q0 = Normal.from_mean_variance(jnp.zeros(2), jnp.ones(2))
KEY = jax.random.PRNGKey(0)


def _quadratic(params, batch):
    return -0.5 * jnp.sum((params["z"] - 1.0) ** 2)


# ------------------------------------------------------------------ an LDA start whose ELBO overflows


def test_lda_refuses_an_init_scale_whose_elbo_overflows():
    """init_scale = 1e37 (float32, K = 3, V = 30): the KL of the initial topics was NaN (log Gamma of
    3e38 is inf) and svi, ssvi and ssvi_a reported a NaN ELBO with accepted True (their guard
    leaves that KL out, so that a step whose info is unused does not compute it). The bound is
    the precision one, 2^-10 / eps (``largest_precise_concentration``; tests/models/test_lda.py),
    far below overflow: at it that KL is finite, beyond the overflow NaN."""
    with pytest.raises(ValueError, match=r"^init_scale must be a finite number in \[6\.10352e-05, 8192\], got 1e\+37"):
        LDA(3, 30, init_scale=1e37, dtype=jnp.float32)
    kl = jax.jit(expfam.tree_kl)
    at_bound = LDA(3, 30, init_scale=8192.0, dtype=jnp.float32)
    assert np.isfinite(float(kl(at_bound.init_globals(KEY), at_bound.prior())))
    beyond = LDA(3, 30, dtype=jnp.float32)
    object.__setattr__(beyond, "init_scale", 1e37)  # past the check (a frozen dataclass): the reported case
    assert np.isnan(float(kl(beyond.init_globals(KEY), beyond.prior())))


# ------------------------------------------------------------------ num_data below the minibatch


def test_bbvi_and_ngvi_refuse_num_data_below_the_batch_at_trace_time():
    """M = 10 > N = 3 would weight the likelihood by N / M = 0.3 (before: silently)."""
    x = jnp.ones(10)
    alg = bbvi(lambda p, b: -0.5 * jnp.sum((p["z"] - b) ** 2), init_params={"z": jnp.zeros(())}, num_data=3)
    with pytest.raises(ValueError, match=r"^num_data = 3 is smaller than the batch's 10 data points"):
        jax.jit(alg.step)(KEY, alg.init(KEY), x)
    alg = ngvi(lambda z, b: -0.5 * jnp.sum((z - b[:2]) ** 2), family=Q0, num_data=3)
    with pytest.raises(ValueError, match=r"^num_data = 3 is smaller than the batch's 10 data points"):
        jax.jit(alg.step)(KEY, alg.init(KEY), x)


# ------------------------------------------------------------------ non-differentiable log-densities

FLAT = {"round": jnp.round, "floor": jnp.floor, "stop_gradient": jax.lax.stop_gradient}


@pytest.mark.parametrize("op", sorted(FLAT))
def test_a_log_density_with_zero_gradient_is_refused_at_init(op):
    """Before: every step accepted, the mean never moved and the scale grew. The gradient is tested
    at 4 draws of q, not at its centre (which may be a mode)."""
    f = FLAT[op]
    alg = bbvi(lambda p, b: -0.5 * jnp.sum((f(p["z"]) - 1.0) ** 2), init_params={"z": jnp.zeros(2)})
    with pytest.raises(ValueError, match=r"^log_density: its gradient with respect to the parameters is exactly zero"):
        alg.init(KEY)
    alg = ngvi(lambda z, b: -0.5 * jnp.sum((f(z) - 1.0) ** 2), family=Q0)
    with pytest.raises(ValueError, match=r"^log_density: its gradient with respect to the parameters is exactly zero"):
        alg.init(KEY)


def test_a_log_density_not_finite_at_any_start_draw_is_refused_at_init():
    """A NaN in the data a log-density closes over (no batch given to init) made every step's update
    non-finite: each was rejected and the fit stood still without a word. Not finite at any of the
    start's draws of q, it is refused; finite at some of them, it passes."""
    data = jnp.array([0.3, jnp.nan, 1.0])
    nan_data = lambda p, b: -0.5 * jnp.sum((data - p["z"][0]) ** 2)  # noqa: E731
    message = r"^log_density is not finite at any of the 4 draws of the initial q \(\[nan nan nan nan\]\)"
    with pytest.raises(ValueError, match=message):
        bbvi(nan_data, init_params={"z": jnp.zeros(2)}).init(KEY)
    with pytest.raises(ValueError, match=message):
        ngvi(lambda z, b: nan_data({"z": z}, b), family=Q0).init(KEY)
    mostly = lambda z, b: jnp.where(z[0] > -2.0, -0.5 * jnp.sum(z**2), jnp.nan)  # noqa: E731 - NaN at 2% of q
    ngvi(mostly, family=Q0).init(KEY)


def test_zero_gradient_cases_that_are_not_errors():
    """A start at the mode (zero gradient at q's centre only) passes; the score-function estimator
    does not differentiate the log-density; with a prior the fit returns it: a warning."""
    bbvi(_quadratic, init_params={"z": jnp.ones(2)}).init(KEY)  # centre at the mode
    bbvi(
        lambda p, b: jnp.sum(jnp.round(p["z"])), init_params={"z": jnp.zeros(2)}, estimator="score", num_samples=2
    ).init(KEY)
    alg = bbvi(
        lambda p, b: jnp.sum(jnp.round(p["z"])),
        init_params={"z": jnp.zeros(2)},
        log_prior=lambda p: -jnp.sum(p["z"] ** 2),
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        alg.init(KEY)
    assert any("only the prior moves q" in str(w.message) for w in caught)


def test_the_start_checks_the_gradient_along_random_directions():
    """bbvi's and ngvi's start checks take the derivative along a random direction at each draw: a
    log-density of z1 - z2 alone (zero derivative along (1, 1), a non-zero gradient) passes; with a
    prior and a likelihood of rounded values, ngvi warns that only the prior moves q."""
    ngvi(lambda z, b: -0.5 * (z[0] - z[1] - 1.0) ** 2, family=Q0).init(KEY)
    bbvi(lambda p, b: -0.5 * (p["z"][0] - p["z"][1] - 1.0) ** 2, init_params={"z": jnp.zeros(2)}).init(KEY)
    alg = ngvi(lambda z, b: jnp.sum(jnp.round(z)), family=Q0, log_prior=lambda z: -0.5 * jnp.sum(z**2))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        alg.init(KEY)
    assert any("only the prior moves q" in str(w.message) for w in caught)


# ------------------------------------------------------------------ another algorithm's state, a mis-shaped prior


def test_bbvi_refuses_another_bbvis_state():
    meanfield = bbvi(_quadratic, init_params={"z": jnp.zeros(2)})
    state = meanfield.init(KEY)
    fullrank = bbvi(_quadratic, init_params={"z": jnp.zeros(2)}, family="fullrank")
    with pytest.raises(ValueError, match=r"^state\.q_global must have the pytree structure"):
        fullrank.step(KEY, state, None)
    three = bbvi(_quadratic, init_params={"z": jnp.zeros(3)})
    with pytest.raises(ValueError, match=r"^state\.q_global\['loc'\] must have shape \(3,\) .* got \(2,\)"):
        jax.jit(three.step)(KEY, state, None)


def test_ngvi_refuses_a_prior_of_another_shape_and_another_ngvis_state():
    with pytest.raises(ValueError, match=r"^prior\.eta1 must have shape \(2,\) \(as in family\), got \(3,\)"):
        ngvi(lambda z, b: -0.5 * jnp.sum(z**2), family=Q0, prior=Normal.from_mean_variance(jnp.zeros(3), jnp.ones(3)))
    other = ngvi(lambda z, b: -0.5 * jnp.sum(z**2), family=Normal.from_mean_variance(jnp.zeros(3), jnp.ones(3)))
    alg = ngvi(lambda z, b: -0.5 * jnp.sum(z**2), family=Q0)
    with pytest.raises(ValueError, match=r"^state\.q_global.* must have shape \(2,\)"):
        alg.step(KEY, other.init(KEY), None)


# ------------------------------------------------------------------ combinators


def test_lock_step_names_a_value_that_is_not_an_algorithm():
    with pytest.raises(ValueError, match=r"^algorithms\['a'\] must be an algorithm .* got 3"):
        lock_step({"a": 3})
    with pytest.raises(ValueError, match=r"^algorithms must be a non-empty dict"):
        lock_step([svi(LDA(2, 5), num_data=4)])


def test_restarts_that_cannot_fit_in_memory_are_refused_before_allocating(monkeypatch):
    """10**30 restarts: refused at construction (their keys alone). 10**7 restarts of LDA(3, 30)'s
    368-byte state with the machine's memory taken as 1 GiB: refused at init, from the shape of one
    restart's state (jax.eval_shape), before the vmapped init allocates 7.4 GB."""
    alg = svi(LDA(3, 30), num_data=10)
    with pytest.raises(ValueError, match=r"^num_restarts \(the key of each restart\) asks for .*\(8e\+30 bytes\)"):
        restarts(alg, 10**30)
    with pytest.raises(ValueError, match=r"^num_restarts must be an integer"):
        restarts(alg, 1e8)
    with pytest.raises(ValueError, match=r"^alg must be an algorithm"):
        restarts(LDA(3, 30), 2)
    monkeypatch.setattr(args_module, "physical_memory_bytes", lambda: 2**30)
    many = restarts(alg, 10**7)
    with pytest.raises(ValueError, match=r"^num_restarts \(10000000 restarts of a \d+-byte state, twice\) asks for"):
        many.init(KEY)


def test_a_string_batch_is_refused_naming_batch():
    alg = bbvi(lambda p, b: -0.5 * jnp.sum((p["z"] - b) ** 2), init_params={"z": jnp.zeros(())}, num_data=3)
    state = alg.init(jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="^batch must be a pytree of numeric arrays, got an array of dtype <U1$"):
        alg.step(jax.random.PRNGKey(1), state, np.array(["a", "b"]))


def test_optimizer_algorithms_name_schedule_for_a_bad_learning_rate():
    from vijax.inference import make_algorithm
    from vijax.models import GPClassification

    x = jnp.array([[1.0], [-1.0], [0.5]])
    model = GPClassification(x, jnp.array([1, 0, 1]), log_lengthscale=0.0, log_scale=0.0)
    for bad in (0.0, float("nan"), "0.1"):
        with pytest.raises(ValueError, match=r"^schedule must be a finite number > 0"):
            make_algorithm("optax", model, num_data=3, optimizer="adam", schedule=bad)
    with pytest.raises(ValueError, match=r"^schedule must be a finite number > 0"):
        bbvi(lambda p, b: -jnp.sum(p**2), init_params=jnp.zeros(2), num_data=3, schedule=-1.0)
    # num_data below the batch: refused at step, as in every stochastic algorithm
    alg = make_algorithm("optax", model, num_data=1, optimizer="adam", schedule=0.1)
    with pytest.raises(ValueError, match=r"^num_data = 1 is smaller than the batch's 3 data points"):
        alg.step(jax.random.PRNGKey(1), alg.init(jax.random.PRNGKey(0)), jnp.arange(3))


def test_learning_rate_by_its_optax_name_is_refused_naming_it():
    """``bbvi(..., learning_rate=0.01)``, optax's name for the rate, met a TypeError about a
    duplicate argument inside make_optimizer; the rate is ``schedule`` here."""
    with pytest.raises(ValueError, match=r"^learning_rate: this algorithm takes its learning rate as schedule=") as err:
        bbvi(lambda p, b: -jnp.sum(p**2), init_params=jnp.zeros(2), learning_rate=0.01)
    assert err.value.argument == "learning_rate"
    alg = bbvi(lambda p, b: -jnp.sum(p**2), init_params=jnp.zeros(2), schedule=0.01)  # the way that works
    assert np.isfinite(float(alg.step(jax.random.PRNGKey(1), alg.init(KEY), None)[1].elbo))


def test_init_from_refuses_a_q_outside_its_domain_and_sample_names_state_and_key():
    from vijax.inference import init_from, log_weights, sample

    alg = ngvi(_quadratic, family={"z": Q0}, num_samples=2)
    negative_variance = {"z": Normal(jnp.zeros(2), jnp.array([0.5, 0.5]))}  # eta2 > 0
    with pytest.raises(ValueError, match=r"^q_global\['z'\]: a Normal with natural parameters outside its domain"):
        init_from(alg, KEY, negative_variance)
    with pytest.raises(ValueError, match=r"^q_global\['z'\] has NaN or infinite entries"):
        init_from(alg, KEY, {"z": Normal(jnp.array([jnp.nan, 0.0]), jnp.array([-0.5, -0.5]))})
    state = init_from(alg, KEY, {"z": Normal.from_mean_variance(jnp.ones(2), jnp.ones(2))})  # a valid q passes
    with pytest.raises(ValueError, match=r"^state must be an algorithm's state"):  # was an AttributeError
        sample(alg, KEY, None, 3)
    with pytest.raises(ValueError, match=r"^state: got the \(state, info\) pair that a step returns"):
        log_weights(alg, KEY, alg.step(KEY, state, None), None, 3)
    with pytest.raises(ValueError, match=r"^key must be a PRNG key"):
        sample(alg, None, state, 3)
    assert sample(alg, KEY, state, 3)["z"].shape == (3, 2)
