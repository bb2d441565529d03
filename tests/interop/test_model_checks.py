"""What ``vijax.from_numpyro`` and ``vijax.from_tfp`` check of a user's model at construction, each
refusal naming the site, plate or argument: observed values (all the data a subsampled plate draws
from, the likelihood's support, the shape the model gives a site), a subsampled plate's size, a
start that is not finite; and what they accept: a TFP joint with no observed part (its prior), a
joint written for one draw, a minibatch's indices as a Python list, and the odd NumPyro models
that fit (improper priors, summed-out sites, deterministic sites, mask and scale handlers,
``numpyro.factor``, no observed site)."""

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from numpyro import handlers

import vijax
from vijax._validate import ArgumentError
from vijax.types import tfp_jax

Y = jnp.array([0.3, -0.2, 1.1, 0.5])


def subsampled(y, subsample_size=2):
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    with numpyro.plate("data", 8, subsample_size=subsample_size) as idx:
        numpyro.sample("y", dist.Normal(mu, 1.0), obs=y[idx])


def counts(k):
    rate = numpyro.sample("rate", dist.Gamma(2.0, 1.0))
    with numpyro.plate("data", k.shape[0]):
        numpyro.sample("k", dist.Poisson(rate), obs=k)


def coins(c):
    p = numpyro.sample("p", dist.Beta(2.0, 2.0))
    with numpyro.plate("data", c.shape[0]):
        numpyro.sample("c", dist.Bernoulli(p), obs=c)


def proportions(w):
    a = numpyro.sample("a", dist.Gamma(2.0, 1.0))
    numpyro.sample("w", dist.Dirichlet(a * jnp.ones(3)), obs=w)


def plate_of_three(y):
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    with numpyro.plate("obs_plate", 3):
        numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)


def plate_of_six(y):
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    with numpyro.plate("obs_plate", 6):
        numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)


def scaled_by(y, scale):
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    with numpyro.plate("data", y.shape[0]), handlers.scale(scale=scale):
        numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)


def unbounded_uniform(y):
    m = numpyro.sample("m", dist.Uniform(-jnp.inf, jnp.inf))
    numpyro.sample("y", dist.Normal(m, 1.0), obs=y)


def impossible_factor(y):
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    numpyro.factor("penalty", jnp.where(mu < 100.0, -jnp.inf, 0.0))


def undeclared_discrete(y):
    z = numpyro.sample("z", dist.DiscreteUniform(1, 3))  # not summed out, and no q family for {1, 2, 3}
    numpyro.sample("y", dist.Normal(z, 1.0), obs=y)


def local_off_axis(y):
    with numpyro.plate("data", 8, subsample_size=2, dim=-1) as idx:
        with numpyro.plate("k", 3, dim=-2):
            numpyro.sample("z", dist.Normal(0.0, 1.0))  # shape (3, 2): the subsampled plate second
        numpyro.sample("y", dist.Normal(0.0, 1.0), obs=y[idx])


def local_in_two_plates(y):
    with numpyro.plate("rows", 8, subsample_size=2, dim=-2), numpyro.plate("cols", 4, subsample_size=2, dim=-1):
        numpyro.sample("z", dist.Normal(0.0, 1.0))
    numpyro.sample("y", dist.Normal(0.0, 1.0), obs=y)


def all_observed(y):
    numpyro.sample("y", dist.Normal(0.0, 1.0), obs=y)


@pytest.mark.parametrize(
    "model, args, match",
    [
        (subsampled, (jnp.zeros(8), 12), r"^plate 'data': subsample_size=12 where the plate has 8 elements"),
        (subsampled, (jnp.zeros(8), 0), r"^plate 'data': subsample_size=0 where the plate has 8 elements"),
        (counts, (jnp.array([1.0, 0.5, 2.0]),), r"^site 'k': 1 of its observed values lies outside .*Poisson.* 0\.5"),
        (coins, (jnp.array([1.0, 0.0, 2.0]),), r"^site 'c': 1 of its observed values lies outside .*Bernoulli"),
        (proportions, (jnp.array([0.5, 0.6, 0.1]),), r"^site 'w': 1 of its observed values lies outside .*Dirichlet"),
        (plate_of_three, (Y,), r"^site 'y': observed values of shape \(4,\) do not fit the shape \(3,\) .*'obs_plate'"),
        (plate_of_six, (Y,), r"^site 'y': observed values of shape \(4,\) do not fit the shape \(6,\) .*'obs_plate'"),
        (scaled_by, (Y, float("nan")), r"^site 'y': its scale factor \(handlers.scale\) is nan; .* finite factor > 0"),
        (scaled_by, (Y, float("inf")), r"^site 'y': its scale factor \(handlers.scale\) is inf; .* finite factor > 0"),
        (unbounded_uniform, (Y[0],), r"^site 'm': its start is not finite: .* Uniform prior is nan"),
        (impossible_factor, (Y,), r"^site 'penalty': its log-likelihood at the start .* is -inf"),
        (undeclared_discrete, (Y[0],), r"^site 'z': a discrete latent site"),
        (all_observed, (Y,), r"^model: it has no continuous latent sample site"),
        (local_off_axis, (jnp.zeros(8),), r"^site 'z': a local latent site whose subsampled plate 'data' is not its"),
        (local_in_two_plates, (Y,), r"^site 'z': a latent site inside the subsampled plates \['cols', 'rows'\]"),
    ],
)
def test_from_numpyro_refuses_naming_the_site_or_plate(model, args, match):
    """Each was accepted and fitted wrongly (a subsample of 12 of 8 scaled each step by 8/12, a
    Poisson count of 0.5 fitted by the Gamma-function extension of its density, a ``handlers.scale``
    of NaN or infinity, which NumPyro takes where it refuses one <= 0) or failed with a traceback of
    NumPyro's or JAX's that named no site (a plate of 3 or 6 over 4 observations: 'Incompatible
    shapes'; a prior whose draws are NaN: 'Normal distribution got invalid loc parameter')."""
    with pytest.raises(ArgumentError, match=match):
        vijax.from_numpyro(model, *args)


def test_a_subsampled_plates_data_are_checked_in_full():
    """The start traces a subsampled plate with all its indices, so a NaN anywhere in the data is
    refused at construction, at its index in the full data, not only where the start's random
    minibatch happens to hold it (the steps whose minibatch held it were rejected without a word)."""
    y = jnp.arange(8.0).at[6].set(jnp.nan)
    with pytest.raises(ArgumentError, match=r"^site 'y': its observed values hold 1 non-finite entry .*index 6\)"):
        vijax.from_numpyro(subsampled, y, 1)


def test_a_start_that_underflows_in_float32_moves_off_the_boundary():
    """Gamma(1e-3, 1e-3): most of its float32 draws underflow to 0, so the median of 15 draws is 0,
    on the support's boundary (-inf on the unconstrained space, formerly blamed on ``init_params``
    by ``bbvi``'s init); the start is the nearest point of the box [-2, 2] of NumPyro's
    ``init_to_uniform``, and the log-joint there is finite."""

    def precision(y):
        t = numpyro.sample("t", dist.Gamma(1e-3, 1e-3))
        numpyro.sample("y", dist.Normal(0.0, 1.0 / jnp.sqrt(t)), obs=y)

    with jax.enable_x64(False):
        target = vijax.from_numpyro(precision, jnp.float32(0.5))
        assert float(target.init_params["t"]) == -2.0
        assert np.isfinite(float(target.log_density(target.init_params, None)))


@pytest.mark.parametrize("indices", [[1, 5], np.array([1, 5]), np.array([1, 5], np.int32)])
def test_a_minibatch_of_indices_may_be_a_python_list_or_numpy_array(indices):
    """A NumPy array of indices failed in NumPyro's plate with a bare AssertionError (it takes a
    JAX array); it is converted, as a list is."""
    target = vijax.from_numpyro(subsampled, jnp.arange(8.0))
    params = {"mu": jnp.asarray(0.3)}
    expected = target.log_prob(params, {"data": jnp.array([1, 5])})
    np.testing.assert_allclose(target.log_prob(params, {"data": indices}), expected, rtol=1e-12)
    np.testing.assert_allclose(
        target.log_density(target.unconstrain(params), {"data": indices}),
        target.log_density(target.unconstrain(params), {"data": jnp.array([1, 5])}),
        rtol=1e-12,
    )


@pytest.mark.parametrize("indices", [jnp.array([0, 30]), np.array([-1, 2]), [3, 8]])
def test_concrete_indices_past_the_plate_are_refused_naming_the_batch(indices):
    """Concrete indices outside [0, 8) failed in the model's own indexing with an IndexError that
    named nothing (or indexed from the end: -1); they are refused naming ``batch['data']``, as a
    step's traced check words it."""
    target = vijax.from_numpyro(subsampled, jnp.arange(8.0))
    with pytest.raises(ArgumentError, match=r"^batch\['data'\] index -?\d+ at \[\d\] is out of range \[0, 8\)") as e:
        target.log_density(target.init_params, {"data": indices})
    assert e.value.argument == "batch"


def improper(y):
    m = numpyro.sample("m", dist.ImproperUniform(dist.constraints.real, (), ()))
    s = numpyro.sample("s", dist.ImproperUniform(dist.constraints.positive, (), ()))
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Normal(m, s), obs=y)


def with_deterministic(y):
    m = numpyro.sample("m", dist.Normal(0.0, 1.0))
    shift = numpyro.deterministic("shift", 2.0 * m)
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Normal(shift, 1.0), obs=y)


def masked(y):
    m = numpyro.sample("m", dist.Normal(0.0, 1.0))
    with numpyro.plate("data", y.shape[0]), handlers.mask(mask=jnp.isfinite(y)):
        numpyro.sample("y", dist.Normal(m, 1.0), obs=jnp.where(jnp.isfinite(y), y, jnp.nan))


def scaled(y):
    m = numpyro.sample("m", dist.Normal(0.0, 1.0))
    with numpyro.plate("data", y.shape[0]), handlers.scale(scale=2.0):
        numpyro.sample("y", dist.Normal(m, 1.0), obs=y)


def with_factor(y):
    m = numpyro.sample("m", dist.Normal(0.0, 1.0))
    numpyro.factor("fit", -0.5 * jnp.sum((y - m) ** 2))


def prior_only():
    numpyro.sample("m", dist.Normal(0.0, 1.0))
    numpyro.sample("s", dist.Gamma(2.0, 1.0))


def log_joint(m, s, y):
    """log p(m, s, y) of ``improper`` and the others at constrained values (by hand)."""
    return jnp.sum(-0.5 * ((y - m) / s) ** 2 - jnp.log(s) - 0.5 * jnp.log(2 * jnp.pi))


@pytest.mark.parametrize(
    "model, args, params, expected",
    [
        (improper, (Y,), {"m": 0.2, "s": 1.5}, log_joint(0.2, 1.5, Y)),
        (with_deterministic, (Y,), {"m": 0.2}, log_joint(0.4, 1.0, Y) + log_joint(0.0, 1.0, 0.2)),
        (
            masked,
            (Y.at[1].set(jnp.nan),),
            {"m": 0.2},
            log_joint(0.2, 1.0, Y[jnp.array([0, 2, 3])]) + log_joint(0.0, 1.0, 0.2),
        ),
        (scaled, (Y,), {"m": 0.2}, 2.0 * log_joint(0.2, 1.0, Y) + log_joint(0.0, 1.0, 0.2)),
        (with_factor, (Y,), {"m": 0.2}, -0.5 * jnp.sum((Y - 0.2) ** 2) + log_joint(0.0, 1.0, 0.2)),
        (prior_only, (), {"m": 0.2, "s": 1.5}, log_joint(0.0, 1.0, 0.2) + jnp.log(1.5) - 1.5),
    ],
)
def test_odd_numpyro_models_are_their_log_joint(model, args, params, expected):
    """Improper priors (flat: log-density 0), a deterministic site, a mask and a scale handler, a
    factor, and a model with no observed site (its prior: Gamma(2, 1)'s log-density log s - s):
    the target's log_prob is the model's log-joint, written out here (rtol 1e-6)."""
    target = vijax.from_numpyro(model, *args)
    assert sorted(target.sites) == sorted(params)
    got = target.log_prob({n: jnp.asarray(v) for n, v in params.items()})
    np.testing.assert_allclose(got, expected, rtol=1e-6)


# ------------------------------------------------------------------------------------------------ TFP
def _normal_mean_joint():
    tfd = tfp_jax().distributions
    return tfd.JointDistributionNamed(
        dict(mu=tfd.Normal(jnp.float64(0.0), 1.0), y=lambda mu: tfd.Sample(tfd.Normal(mu, 1.0), 4))
    )


@pytest.mark.parametrize("value", [1.0, jnp.zeros(3), jnp.zeros((2, 4))])
def test_from_tfp_refuses_observed_values_of_another_shape(value):
    """A scalar was taken as four observations, three values failed with 'Incompatible shapes', a
    (2, 4) array as a batch shape of the log-joint: each is refused naming ``observed['y']`` and
    the shape the joint draws."""
    with pytest.raises(
        ArgumentError, match=r"^observed\['y'\]: shape .* the joint draws its part 'y' with shape \(4,\)"
    ):
        vijax.from_tfp(_normal_mean_joint(), observed={"y": value})


@pytest.mark.parametrize(
    "part, value, match",
    [
        ("poisson", jnp.array([1.0, 0.5, 2.0]), "Poisson"),
        pytest.param("bernoulli", jnp.array([1.0, 0.0, 2.0]), "Bernoulli", marks=pytest.mark.slow),
        pytest.param("gamma", jnp.array([1.0, -1.0, 2.0]), "Gamma", marks=pytest.mark.slow),
    ],
)
def test_from_tfp_refuses_observed_values_outside_the_support(part, value, match):
    tfd = tfp_jax().distributions
    likelihood = {
        "poisson": lambda r: tfd.Sample(tfd.Poisson(r), 3),
        "bernoulli": lambda r: tfd.Sample(tfd.Bernoulli(probs=r / (1.0 + r), dtype=jnp.float64), 3),
        "gamma": lambda r: tfd.Sample(tfd.Gamma(2.0, r), 3),
    }[part]
    joint = tfd.JointDistributionNamed(dict(r=tfd.Gamma(jnp.float64(2.0), 1.0), x=likelihood))
    with pytest.raises(ArgumentError, match=rf"^observed\['x'\]: values outside the support of the part's {match}"):
        vijax.from_tfp(joint, observed={"x": value})
    vijax.from_tfp(joint, observed={"x": jnp.array([1.0, 0.0, 1.0]) + (part == "gamma")})  # in the support


def test_from_tfp_without_observed_fits_the_prior():
    """``observed`` is optional: without it the target is the joint's prior over all its parts
    (its log_prob is the joint's, at every part)."""
    joint = _normal_mean_joint()
    target = vijax.from_tfp(joint)
    assert list(target.sites) == ["mu", "y"] and target.sites["y"].shape == (4,)
    params = {"mu": jnp.asarray(0.3), "y": jnp.linspace(-1.0, 1.0, 4)}
    with jax.numpy_rank_promotion("allow"):
        expected = joint.log_prob(params)
    np.testing.assert_allclose(target.log_prob(params), expected, rtol=1e-12)


def test_from_tfp_starts_a_joint_written_for_one_draw():
    """A joint whose parts broadcast a draw against fixed shapes (``zeros(4) + mu``) supports one
    draw at a time, not ``sample(15)`` (formerly: 'incompatible shapes (15,), (4,)'); the start
    draws one sample per key."""
    tfd = tfp_jax().distributions
    joint = tfd.JointDistributionNamed(
        dict(
            mu=tfd.Normal(jnp.float64(0.0), 1.0),
            s=lambda mu: tfd.Independent(tfd.Normal(jnp.zeros(4) + mu, 1.0), 1),
            y=lambda s: tfd.Independent(tfd.Normal(s, 1.0), 1),
        )
    )
    target = vijax.from_tfp(joint, observed={"y": jnp.zeros(4)})
    assert target.init_params["s"].shape == (4,)
    assert np.all(np.isfinite(np.asarray(target.log_density(target.init_params))))
