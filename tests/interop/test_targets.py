"""NumPyro and TFP models as targets (``vijax.from_numpyro``, ``vijax.from_tfp``): the ELBO of bbvi
against NumPyro's own ``Trace_ELBO`` at the same parameters and draws, the constrained values
against NumPyro's ``constrain_fn``, the log-densities against the libraries' log-probabilities plus
a Jacobian taken by autodiff, and errors that name the site or argument. The algorithms' fits
through a target: ``test_fits.py``."""

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from jax.flatten_util import ravel_pytree
from numpyro import handlers
from numpyro.infer import Trace_ELBO
from numpyro.infer.autoguide import AutoLowRankMultivariateNormal, AutoMultivariateNormal, AutoNormal
from numpyro.infer.util import constrain_fn, potential_energy
from numpyro.infer.util import log_density as numpyro_log_density
from scipy import stats

import vijax
from vijax.inference import auto_family, bbvi, elbo, guide, ngvi, sample
from vijax.types import tfp_jax

from tests.interop._models import SIGMA, M, T, X, Y, eight_schools, every_support, normal_mean, regression


def _perturbed(q, key, scale=0.3):
    """Variational parameters away from the start (every leaf moved)."""
    leaves, tree = jax.tree_util.tree_flatten(q)
    keys = jax.random.split(key, len(leaves))
    return jax.tree_util.tree_unflatten(tree, [x + scale * jax.random.normal(k, x.shape) for x, k in zip(leaves, keys)])


def _numpyro_params(kind, q, unravel):
    """NumPyro's autoguide and its (constrained) parameters equal to vijax's q."""
    softplus = jax.nn.softplus
    if kind == "meanfield":
        loc, scale = unravel(q["loc"]), unravel(softplus(q["scale"]))
        params = {f"{n}_auto_loc": loc[n] for n in loc} | {f"{n}_auto_scale": scale[n] for n in scale}
        return AutoNormal(eight_schools), params
    if kind == "fullrank":
        unit = jnp.tril(q["chol"], -1) + jnp.eye(q["chol"].shape[0])
        return AutoMultivariateNormal(eight_schools), {
            "auto_loc": q["loc"],
            "auto_scale_tril": softplus(q["scale"])[:, None] * unit,
        }
    scale = softplus(q["scale"])  # NumPyro's covariance: diag(s^2) + (s * F)(s * F)^T
    return AutoLowRankMultivariateNormal(eight_schools, rank=2), {
        "auto_loc": q["loc"],
        "auto_cov_factor": q["factor"] / scale[:, None],
        "auto_scale": scale,
    }


@pytest.mark.parametrize("kind", ["meanfield", "fullrank", "lowrank"])
@pytest.mark.slow
def test_elbo_equals_numpyros_trace_elbo_at_the_same_parameters_and_draw(kind):
    """vijax's one-draw ELBO (entropy "mc") at vijax's draw z equals -Trace_ELBO's loss with NumPyro's
    AutoNormal / AutoMultivariateNormal / AutoLowRankMultivariateNormal at the same parameters, its
    guide's sample sites substituted by the same draw (rtol 1e-6, float64; 3 draws)."""
    target = vijax.from_numpyro(eight_schools, SIGMA, Y)
    alg = bbvi(target, family=kind, entropy="mc", rank=2)
    q = _perturbed(alg.init(jax.random.PRNGKey(0)).q_global, jax.random.PRNGKey(1))
    unravel = ravel_pytree(target.init_params)[1]
    numpyro_guide, params = _numpyro_params(kind, q, unravel)
    with jax.numpy_rank_promotion("allow"):  # NumPyro's own code broadcasts by rank promotion
        handlers.seed(numpyro_guide, 0)(SIGMA, Y)  # its prototype trace

    @jax.jit
    def both(key):
        ours = elbo(alg, key, q, None)
        z = guide(alg).sample(q, jax.random.split(key, 1)[0])  # the draw elbo takes (S = 1)
        # AutoNormal's sites hold the constrained values; the others draw one flat latent vector
        fixed = target.constrain(unravel(z)) if kind == "meanfield" else {"_auto_latent": z}
        with jax.numpy_rank_promotion("allow"):
            fixed_guide = handlers.substitute(numpyro_guide, data=fixed)
            loss = Trace_ELBO().loss(jax.random.PRNGKey(0), params, eight_schools, fixed_guide, SIGMA, Y)
        return ours, -loss

    for seed in range(3):
        ours, theirs = both(jax.random.PRNGKey(10 + seed))
        np.testing.assert_allclose(float(ours), float(theirs), rtol=1e-6)


def test_constrained_values_and_log_density_match_numpyro():
    """constrain equals NumPyro's constrain_fn; log_density equals -potential_energy and NumPyro's
    log_density at the constrained values plus log|det J| of the constraining map, J taken by
    jax.jacfwd on the sites whose map is elementwise and NumPyro's own transform for the simplex
    (rtol 1e-6); unconstrain inverts constrain."""
    from numpyro.distributions.transforms import biject_to

    y = jnp.array([0.3, -1.2, 2.0, 0.7])
    target = vijax.from_numpyro(every_support, y)
    assert {n: s.support for n, s in target.sites.items()} == {
        "mu": "real",
        "scale": "positive",
        "p": "unit_interval",
        "w": "simplex",
    }
    assert target.sites["w"].shape == (3,) and target.sites["w"].unconstrained_shape == (2,)
    u = _perturbed(target.init_params, jax.random.PRNGKey(2), 0.7)

    @jax.jit
    def ours_and_theirs(u):
        c, log_det = target.transform(u)
        ours = (c, log_det, target.log_density(u, None), target.log_prob(c, None), target.unconstrain(c))
        elementwise = 0.0
        for name in ("mu", "scale", "p"):
            flat = jnp.ravel(u[name])
            one = lambda v, name=name: jnp.ravel(target.constrain({**u, name: v.reshape(jnp.shape(u[name]))})[name])  # noqa: E731
            elementwise += jnp.linalg.slogdet(jax.jacfwd(one)(flat))[1]
        with jax.numpy_rank_promotion("allow"):  # NumPyro's own code broadcasts by rank promotion
            t = biject_to(target.sites["w"].constraint)
            theirs = (
                constrain_fn(every_support, (y,), {}, u),
                elementwise + t.log_abs_det_jacobian(u["w"], t(u["w"])),
                -potential_energy(every_support, (y,), {}, u),
                numpyro_log_density(every_support, (y,), {}, c)[0],
            )
        return ours, theirs

    (c, log_det, log_density, log_prob, back), (c_np, log_det_ad, log_density_np, log_prob_np) = ours_and_theirs(u)
    for name in target.sites:
        np.testing.assert_allclose(c[name], c_np[name], rtol=1e-6)
        np.testing.assert_allclose(back[name], u[name], rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(log_det, log_det_ad, rtol=1e-6)
    np.testing.assert_allclose(log_density, log_density_np, rtol=1e-6)
    np.testing.assert_allclose(log_prob, log_prob_np, rtol=1e-6)
    np.testing.assert_allclose(log_density, log_prob + log_det_ad, rtol=1e-6)


@pytest.mark.slow
def test_from_tfp_log_density_is_the_joint_log_prob_plus_the_bijectors_jacobian():
    """from_tfp: constrained values are the pinned joint's default event-space bijector's forward;
    log_density(u) = joint.log_prob(constrained, observed) + log|det J|, J by jax.jacfwd (rtol 1e-6)."""
    tfd = tfp_jax().distributions
    y = jnp.array([0.5, 1.5, 1.0, 2.5])
    joint = tfd.JointDistributionNamed(
        dict(
            mu=tfd.Normal(jnp.float64(0.0), 10.0),
            sigma=tfd.HalfNormal(jnp.float64(2.0)),
            p=tfd.Beta(jnp.float64(2.0), 2.0),
            y=lambda mu, sigma, p: tfd.Sample(tfd.Normal(mu * p, sigma), 4),
        )
    )
    target = vijax.from_tfp(joint, observed={"y": y})
    assert {n: s.support for n, s in target.sites.items()} == {"mu": "real", "sigma": "positive", "p": "unit_interval"}
    u = {"mu": jnp.float64(0.4), "sigma": jnp.float64(-0.3), "p": jnp.float64(0.8)}
    y2 = y + 1.0

    @jax.jit
    def ours_and_theirs(u):
        c = target.constrain(u)
        flat, unravel = ravel_pytree(u)
        jac = jax.jacfwd(lambda v: ravel_pytree(target.constrain(unravel(v)))[0])(flat)
        with jax.numpy_rank_promotion("allow"):  # TFP's own code broadcasts by rank promotion
            expected = joint.log_prob(mu=c["mu"], sigma=c["sigma"], p=c["p"], y=y) + jnp.linalg.slogdet(jac)[1]
            expected2 = joint.log_prob(mu=c["mu"], sigma=c["sigma"], p=c["p"], y=y2)
        return c, target.log_density(u, None), expected, target.log_prob(c, {"y": y2}), expected2

    c, ours, expected, ours2, expected2 = ours_and_theirs(u)
    np.testing.assert_allclose(c["sigma"], jax.nn.softplus(-0.3), rtol=1e-6)
    np.testing.assert_allclose(c["p"], jax.nn.sigmoid(0.8), rtol=1e-6)
    np.testing.assert_allclose(ours, expected, rtol=1e-6)
    np.testing.assert_allclose(ours2, expected2, rtol=1e-6)  # a batch replaces the observed values


# ---------------------------------------------------------------------------------------------- errors
def positive_count_latent():  # {1, 2, ...}: no q family (Poisson's support starts at 0)
    numpyro.sample("count", dist.ImproperUniform(dist.constraints.positive_integer, (), ()))


def shifted_finite_latent():
    numpyro.sample("coin", dist.DiscreteUniform(1, 3))


def sphere_latent():
    numpyro.sample("direction", dist.ImproperUniform(dist.constraints.sphere, (), (3,)))


def ordered_latent():
    cuts = numpyro.sample("cuts", dist.ImproperUniform(dist.constraints.ordered_vector, (), (3,)))
    numpyro.sample("obs", dist.Normal(cuts, 1.0).to_event(1), obs=jnp.array([-1.0, 0.0, 1.0]))


def with_param():
    s = numpyro.param("s", lambda key: 1.0)
    numpyro.sample("x", dist.Normal(0.0, s))


@pytest.mark.parametrize(
    "model, args, match",
    [
        (positive_count_latent, (), "site 'count': a discrete latent site .*infinite support.* has no q family"),
        (
            shifted_finite_latent,
            (),
            "site 'coin': a discrete latent site .*finite support.* has no q family.*enumerate",
        ),
        (sphere_latent, (), "site 'direction': NumPyro has no bijector onto its support"),
        (with_param, (), "site 's': a numpyro.param whose start is not an array"),
    ],
)
def test_from_numpyro_names_the_site_it_cannot_fit(model, args, match):
    with pytest.raises(ValueError, match=match):
        vijax.from_numpyro(model, *args)


def masked_normal(y, mask=None):
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Normal(mu, 1.0), obs=y, obs_mask=mask)


def test_from_numpyro_refuses_non_finite_observed_values_where_the_model_keeps_them():
    """A NaN or an infinity among a site's observed values made every step's ELBO NaN: each step was
    rejected and the fit stood still without a word. It is refused, naming the site, the count and
    the first entry; missing entries masked out by ``obs_mask`` (NumPyro imputes them) still pass."""
    with pytest.raises(ValueError, match=r"^site 'y': its observed values hold 1 non-finite entry \(the first, nan, "):
        vijax.from_numpyro(masked_normal, jnp.array([0.1, jnp.nan, 0.5]))
    with pytest.raises(
        ValueError, match=r"^site 'y': its observed values hold 2 non-finite entries \(the first, inf, "
    ):
        vijax.from_numpyro(masked_normal, jnp.array([0.1, jnp.inf, -jnp.inf]))
    target = vijax.from_numpyro(masked_normal, jnp.array([0.1, jnp.nan, 0.5]), jnp.array([True, False, True]))
    assert sorted(target.sites) == ["mu", "y_unobserved"]
    with pytest.raises(ValueError, match=r"^site 'y_observed': its observed values hold 1 non-finite entry"):
        vijax.from_numpyro(masked_normal, jnp.array([jnp.nan, 1.0, 0.5]), jnp.array([True, False, True]))


def test_from_tfp_refuses_non_finite_observed_values():
    tfd = tfp_jax().distributions
    joint = tfd.JointDistributionNamed(dict(mu=tfd.Normal(0.0, 1.0), x=lambda mu: tfd.Sample(tfd.Normal(mu, 1.0), 3)))
    with pytest.raises(ValueError, match=r"^observed\['x'\] must be finite, got NaN or infinite entries"):
        vijax.from_tfp(joint, observed={"x": jnp.array([0.1, jnp.nan, 0.3])})
    with pytest.raises(vijax.ArgumentError, match="^observed must be a dict of the observed parts' values by name"):
        vijax.from_tfp(joint, observed=jnp.array([0.1, 0.2, 0.3]))


def test_auto_family_names_a_support_it_cannot_match_and_bbvi_still_fits_it():
    target = vijax.from_numpyro(ordered_latent)
    assert target.sites["cuts"].support == "other"
    with pytest.raises(ValueError, match="site 'cuts': no exponential family"):
        auto_family(target)
    with pytest.raises(ValueError, match="site 'cuts': no exponential family"):
        ngvi(target)
    alg = bbvi(target, family="meanfield")  # through NumPyro's ordered transform
    draws = sample(alg, jax.random.PRNGKey(1), alg.init(jax.random.PRNGKey(0)), 3)
    assert bool(jnp.all(jnp.diff(draws["cuts"], axis=-1) > 0))


@pytest.mark.slow
def test_a_joint_distribution_sequential_is_the_same_target_as_its_named_twin():
    """A JointDistributionSequential's parts are named as TFP resolves them (the callables'
    argument names, ``x`` for the part no callable takes): its target has the named twin's sites,
    log-density, predictive draws, pointwise log-likelihood and conjugate sites; an unknown part
    name is refused with the resolved names."""
    tfd = tfp_jax().distributions
    y = jnp.linspace(-1.0, 2.0, 6)
    seq = tfd.JointDistributionSequential(
        [tfd.Normal(0.0, 1.0), tfd.Gamma(2.0, 2.0), lambda s, mu: tfd.Sample(tfd.Normal(mu, s), 6)]
    )
    named = tfd.JointDistributionNamed(
        dict(mu=tfd.Normal(0.0, 1.0), s=tfd.Gamma(2.0, 2.0), x=lambda s, mu: tfd.Sample(tfd.Normal(mu, s), 6))
    )
    ts, tn = (vijax.from_tfp(j, observed={"x": y}) for j in (seq, named))
    assert {n: s.support for n, s in ts.sites.items()} == {"mu": "real", "s": "positive"}
    assert {n: s.support for n, s in tn.sites.items()} == {"mu": "real", "s": "positive"}
    u = {"mu": jnp.array(0.3), "s": jnp.array(-0.2)}
    np.testing.assert_allclose(ts.log_density(u), tn.log_density(u), rtol=1e-6)
    assert jax.tree.all(jax.tree.map(lambda a, b: np.allclose(a, b, rtol=1e-6), ts.constrain(u), tn.constrain(u)))
    back = ts.unconstrain(ts.constrain(u))
    np.testing.assert_allclose([back["mu"], back["s"]], [0.3, -0.2], rtol=1e-5)
    draws = {"mu": jnp.array([0.1, 0.2]), "s": jnp.array([1.0, 1.5])}
    key = jax.random.PRNGKey(0)
    np.testing.assert_array_equal(vijax.predictive(ts, draws, key)["x"], vijax.predictive(tn, draws, key)["x"])
    np.testing.assert_allclose(
        vijax.interop.log_likelihood(ts, draws)["x"], vijax.interop.log_likelihood(tn, draws)["x"], rtol=1e-6
    )
    found = {n: r.conjugate for n, r in vijax.conjugate_sites(ts, key).items()}
    assert found == {n: r.conjugate for n, r in vijax.conjugate_sites(tn, key).items()} == {"mu": True, "s": False}
    with pytest.raises(
        ValueError, match=r"observed\['y'\]: the joint has no part 'y'; its parts are \['mu', 's', 'x'\]"
    ):
        vijax.from_tfp(seq, observed={"y": y})


def test_tfp_discrete_latent_and_unknown_observed_are_named():
    tfd = tfp_jax().distributions
    joint = tfd.JointDistributionNamed(dict(n=tfd.Poisson(3.0), y=lambda n: tfd.Normal(n, 1.0)))
    with pytest.raises(ValueError, match="site 'n': Poisson has no default event-space bijector"):
        vijax.from_tfp(joint, observed={"y": 1.0})
    with pytest.raises(ValueError, match=r"observed\['x'\]: the joint has no part 'x'"):
        vijax.from_tfp(joint, observed={"x": 1.0})


@pytest.mark.parametrize(
    "factory, kwargs, name",
    [
        (bbvi, {"num_data": 10}, "num_data"),
        (bbvi, {"init_params": {"w": jnp.zeros(2)}}, "init_params"),
        (bbvi, {"bijectors": {"noise": None}}, "bijectors"),
        (bbvi, {"log_prior": lambda p: 0.0}, "log_prior"),
        (ngvi, {"num_data": 10}, "num_data"),
        (ngvi, {"log_prior": lambda p: 0.0}, "log_prior"),
    ],
)
def test_arguments_a_target_carries_are_refused_by_name(factory, kwargs, name):
    target = vijax.from_numpyro(regression, X, T)
    with pytest.raises(ValueError, match=f"^{name}: a target"):
        factory(target, **kwargs)


def test_a_batch_the_model_cannot_take_is_named():
    mini = vijax.from_numpyro(regression, X, T, subsample_size=M)
    u = mini.init_params
    with pytest.raises(ValueError, match=r"batch\['data'\]: the model's plate 'data' subsamples 2 of 8"):
        mini.log_density(u, None)
    with pytest.raises(ValueError, match=r"batch\['y'\]: the model has no such argument"):
        mini.log_density(u, {"data": jnp.arange(2), "y": T})
    with pytest.raises(ValueError, match="batch must be None or a dict"):
        mini.log_prob(mini.constrain(u), jnp.arange(2))
    alg = bbvi(mini)
    with pytest.raises(ValueError, match=r"batch\['data'\]"):
        alg.step(jax.random.PRNGKey(1), alg.init(jax.random.PRNGKey(0)), None)
    # an argument of the model by name: the minibatch's data in place of the full data
    full = vijax.from_numpyro(regression, X, T)
    c = full.constrain(u)
    with jax.numpy_rank_promotion("allow"):
        expected = numpyro_log_density(regression, (X[:3], T[:3]), {}, c)[0]
    np.testing.assert_allclose(full.log_prob(c, {"x": X[:3], "t": T[:3]}), expected, rtol=1e-6)


def test_ngvi_refuses_a_family_shaped_unlike_the_sites():
    from vijax.expfam import Normal

    target = vijax.from_numpyro(normal_mean, jnp.zeros(3))
    with pytest.raises(ValueError, match="family"):
        ngvi(target, family={"mu": Normal.from_mean_variance(jnp.zeros(2), jnp.ones(2))})


def _init_to_median(fn, key, shape):
    from numpyro.infer import init_to_median

    site = {"type": "sample", "name": "s", "fn": fn, "is_observed": False, "value": None}
    site["kwargs"] = {"rng_key": key, "sample_shape": shape}
    with jax.numpy_rank_promotion("allow"):  # NumPyro's code broadcasts by rank promotion
        return init_to_median(site, num_samples=15)


@pytest.mark.slow
def test_prior_median_is_numpyros_init_to_median():
    """``prior_median`` (NumPyro's ``init_to_median``, from_numpyro's start) gives the strategy's own op-by-op value at the same key (rtol 1e-6) for sites whose sampler
    draws no Gamma variable, and for a site that does, the strategy's value on the draws of
    ``VectorGammaDraws`` (whose law the next test checks)."""
    from vijax.interop._numpyro import VectorGammaDraws, prior_median

    key = jax.random.PRNGKey(3)
    for fn, shape in [(dist.HalfNormal(2.0), (4,)), (dist.Normal(1.0, 2.0), ()), (dist.HalfCauchy(5.0), (2,))]:
        np.testing.assert_allclose(prior_median(fn, key, shape), _init_to_median(fn, key, shape), rtol=1e-6)
    for fn, shape in [(dist.Dirichlet(jnp.array([1.0, 2.0, 3.0])), ()), (dist.Gamma(2.0, 3.0), (4,))]:
        np.testing.assert_allclose(
            prior_median(fn, key, shape), _init_to_median(VectorGammaDraws(fn), key, shape), rtol=1e-6
        )


def test_the_starts_draws_keep_a_batch_of_keys():
    """A draw of several axes under ``vmap`` of keys is evaluated as the draw it replaces."""
    from vijax.interop._numpyro import _eval_vector_gamma

    keys = jax.random.split(jax.random.PRNGKey(0), 5)
    draw = jax.vmap(lambda k: jax.random.normal(k, (3, 4)))
    closed = jax.make_jaxpr(draw)(keys)
    np.testing.assert_array_equal(_eval_vector_gamma(closed.jaxpr, closed.consts, keys)[0], draw(keys))


@pytest.mark.parametrize(
    "fn, marginal",
    [
        (dist.Gamma(0.3, 2.0), stats.gamma(0.3, scale=0.5)),
        (dist.Gamma(4.0, 0.5), stats.gamma(4.0, scale=2.0)),
        (dist.Beta(2.0, 5.0), stats.beta(2.0, 5.0)),
        (dist.Dirichlet(jnp.array([0.5, 1.0, 3.0])), stats.beta(0.5, 4.0)),  # the first coordinate
        (dist.InverseGamma(3.0, 2.0), stats.invgamma(3.0, scale=2.0)),
        (dist.StudentT(4.0, 1.0, 2.0), stats.t(4.0, loc=1.0, scale=2.0)),
    ],
)
def test_the_starts_gamma_draws_have_the_distributions_law(fn, marginal):
    """``VectorGammaDraws`` (from_numpyro's start draws its Gamma variables by vijax's sampler):
    4,000 draws of each distribution (the first coordinate of a Dirichlet) against its law,
    a Kolmogorov-Smirnov test at the 0.1% level, one fixed key; and the draws are not NumPyro's
    own (another random stream), so the test sees the replacement."""
    from vijax.interop._numpyro import VectorGammaDraws

    key = jax.random.PRNGKey(7)
    draws = np.asarray(VectorGammaDraws(fn)(sample_shape=(4000,), rng_key=key)).reshape(4000, -1)[:, 0]
    assert stats.kstest(draws, marginal.cdf).pvalue > 1e-3
    assert not np.allclose(draws, np.asarray(fn(sample_shape=(4000,), rng_key=key)).reshape(4000, -1)[:, 0])


def test_traced_log_densities_skip_the_checks_the_start_made(monkeypatch):
    """Traced at latent values with the model's own data, ``log_prob`` and ``log_density`` build
    their distributions with NumPyro's validation off: the start checked those concrete values
    (the data, the constants), and each check run again would compile an operation of its own. A
    new batch, or concrete values, keep NumPyro's checks; the values are the same either way."""
    from numpyro.distributions.distribution import Distribution

    target = vijax.from_numpyro(eight_schools, SIGMA, y=Y)
    calls = []
    original = Distribution.validate_args
    monkeypatch.setattr(
        Distribution, "validate_args", lambda self, strict=True: calls.append(1) or original(self, strict)
    )
    params = target.constrain(target.init_params)
    traced = jax.jit(target.log_prob)(params)
    jax.jit(target.log_density)(target.init_params)
    assert not calls
    np.testing.assert_allclose(target.log_prob(params), traced, rtol=1e-6)
    assert calls, "concrete values are checked"
    calls.clear()
    jax.make_jaxpr(lambda p: target.log_prob(p, {"sigma": SIGMA, "y": Y}))(params)
    assert calls, "a new batch is checked"
