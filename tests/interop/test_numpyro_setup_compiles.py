"""What a first ``vijax.from_numpyro`` and a first ``ngvi``/``bbvi`` set-up compile: the target's
start (NumPyro's init-to-median trace, the unconstrained start, the supports) as one program, shared
by a second target of the same model and data shapes; ``auto_family`` and the algorithms' start
checks one program each. Each JAX operation run on concrete values outside a program is a
compilation of its own, so these counts are what a fresh process pays. The program's start is the
op-by-op start's (NumPyro's own run of the same trace) to float rounding."""

import logging

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

import vijax
from vijax.inference import bbvi, ngvi
from vijax.interop import _numpyro

from tests.interop._models import SIGMA, Y, eight_schools


def _compiled(caplog, fn):
    """(fn's result, the names of the programs XLA compiled while it ran)."""
    caplog.clear()
    with jax.log_compiles(True), caplog.at_level(logging.DEBUG):
        out = fn()
    names = [r.getMessage() for r in caplog.records if "Finished XLA compilation" in r.getMessage()]
    return out, names


def _small(y):
    """A real, a positive and a simplex site; the observed site's scale traced (no NumPyro argument
    check of the data runs op by op)."""
    mu = numpyro.sample("mu", dist.Normal(0.0, 3.0))
    tau = numpyro.sample("tau", dist.HalfNormal(2.0))
    w = numpyro.sample("w", dist.Dirichlet(jnp.ones(4)))
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Normal(mu + w[0], tau), obs=y)


def test_first_target_and_set_up_compile_one_program_each(caplog):
    """from_numpyro: one program (op by op: 19 compilations on eight schools), none for a second
    target of the same model; ngvi's construction and init: auto_family's program and the start
    check; bbvi's init: the start check (draws, centre and gradients) and at most optax's init."""
    y = jnp.asarray(np.random.default_rng(0).normal(size=13), jnp.float32)  # a size no other test uses
    jax.block_until_ready(y)
    key = jax.random.PRNGKey(0)
    target, names = _compiled(caplog, lambda: vijax.from_numpyro(_small, y))
    assert len(names) == 1 and "from_numpyro_start" in names[0], names
    again, names = _compiled(caplog, lambda: vijax.from_numpyro(_small, y))
    assert names == []
    jax.tree_util.tree_map(np.testing.assert_array_equal, again.init_params, target.init_params)
    _, names = _compiled(caplog, lambda: ngvi(target).init(key))
    assert len(names) == 2 and "auto_family_checked" in names[0], names
    _, names = _compiled(caplog, lambda: bbvi(target).init(key))
    assert 1 <= len(names) <= 4 and sum("jit(compiled)" in n for n in names) == 1, names


def _hierarchical(group, num_groups, y=None):
    a = numpyro.sample("a", dist.Gamma(2.0, 1.0))
    b = numpyro.sample("b", dist.Gamma(2.0, 1.0))
    with numpyro.plate("groups", num_groups):
        rate = numpyro.sample("rate", dist.Gamma(a, b))
    with numpyro.plate("data", group.shape[0]):
        numpyro.sample("y", dist.Poisson(rate[group]), obs=y)


def _mixture(x):
    weights = numpyro.sample("weights", dist.Dirichlet(jnp.ones(2)))
    locs = numpyro.sample("locs", dist.Normal(jnp.zeros(2), 5.0).to_event(1))
    with numpyro.plate("data", x.shape[0]):
        z = numpyro.sample("z", dist.Categorical(weights), infer={"enumerate": "parallel"})
        numpyro.sample("x", dist.Normal(locs[z], 1.0), obs=x)


def _bounded(x):
    """A Uniform whose bounds the model computes from its data (traced in the program: the support
    comes out of it) and a LogNormal."""
    p = numpyro.sample("p", dist.Uniform(jnp.min(x) * 0.0, jnp.max(x) * 0.0 + 1.0))
    s = numpyro.sample("s", dist.LogNormal(0.0, 1.0))
    with numpyro.plate("data", x.shape[0]):
        numpyro.sample("x", dist.Normal(p, s), obs=x)


_GROUP = jnp.array([0, 1, 2, 0, 1, 2, 3, 3])
_CASES = {
    "eight_schools": (eight_schools, (SIGMA,), {"y": Y}),
    "hierarchical": (_hierarchical, (_GROUP, 4), {"y": jnp.array([1.0, 0.0, 3.0, 2.0, 1.0, 4.0, 0.0, 2.0])}),
    "mixture": (_mixture, (jnp.array([-2.0, -1.5, 1.8, 2.2, 2.0]),), {}),
    "bounded": (_bounded, (jnp.array([0.2, 0.4, 0.5]),), {}),
}


# funsor's case takes about 4 s to compile and run both ways: outside CI
@pytest.mark.parametrize(
    "case", ["bounded", "eight_schools", "hierarchical", pytest.param("mixture", marks=pytest.mark.slow)]
)
def test_program_start_is_the_op_by_op_start(case, monkeypatch):
    """The target from the compiled start equals the one from NumPyro's op-by-op run of the same
    trace (the fallback, forced): the same sites, supports and constraints, the same start bit for
    bit (each site's draws kept apart from the rest of the program by optimization barriers, as in
    their own programs; fused with it, a Gamma site's start differed by a few ulp), the same
    log-density there."""
    model, args, kwargs = _CASES[case]
    target = vijax.from_numpyro(model, *args, **kwargs)

    def untraceable(program, name):
        raise TypeError("forced: the op-by-op start")

    monkeypatch.setattr(_numpyro, "one_program", untraceable)
    eager = vijax.from_numpyro(model, *args, **kwargs)
    assert [(s.name, s.shape, s.unconstrained_shape, s.support, repr(s.constraint)) for s in target.sites.values()] == [
        (s.name, s.shape, s.unconstrained_shape, s.support, repr(s.constraint)) for s in eager.sites.values()
    ]
    assert target.plates == eager.plates and target.enumerated == eager.enumerated
    for name in target.sites:
        np.testing.assert_array_equal(target.init_params[name], eager.init_params[name])
    np.testing.assert_array_equal(
        target.log_density(target.init_params, None), eager.log_density(eager.init_params, None)
    )
    if case == "bounded":
        assert target.sites["p"].support == "unit_interval"


def test_a_model_that_needs_concrete_values_runs_op_by_op():
    """A plate size read from the data (``int`` of a computed array) cannot be traced: the start
    falls back to NumPyro's op-by-op run and the target is the same."""

    def model(group, y):
        rate = numpyro.sample("rate", dist.Gamma(2.0, 1.0).expand([int(jnp.max(group)) + 1]).to_event(1))
        with numpyro.plate("data", group.shape[0]):
            numpyro.sample("y", dist.Poisson(rate[group]), obs=y)

    target = vijax.from_numpyro(model, _GROUP, jnp.ones(8))
    assert target.sites["rate"].shape == (4,)
    assert np.all(np.isfinite(np.asarray(target.init_params["rate"])))


def test_numpyro_still_refuses_an_invalid_traced_parameter():
    """NumPyro checks a distribution's arguments at construction but skips traced ones; the
    program returns those checks and a failed one reruns the start op by op, where NumPyro
    raises its own error."""

    def model():
        s = numpyro.sample("s", dist.Normal(0.0, 0.1))
        numpyro.sample("x", dist.Normal(0.0, s - 10.0), obs=1.0)

    try:  # NumPyro's own check of a concrete value (NumPyro 0.21 has none at construction)
        dist.Normal(0.0, jnp.array(-9.9))
    except ValueError:
        with pytest.raises(ValueError, match="Normal distribution got invalid scale parameter"):
            vijax.from_numpyro(model)
    else:  # nothing to refuse: the start is NumPyro's, invalid scale and all
        assert set(vijax.from_numpyro(model).init_params) == {"s"}


def test_a_shared_program_takes_the_new_data():
    """The program kept for a model is keyed by its trace with the captured arrays as arguments:
    the same model closing over other values gives the start at those values."""
    box = {"loc": jnp.array(0.0)}

    def model():
        numpyro.sample("m", dist.Normal(box["loc"], 1e-3))

    first = vijax.from_numpyro(model)
    box["loc"] = jnp.array(5.0)
    second = vijax.from_numpyro(model)
    assert abs(float(first.init_params["m"])) < 0.01 and abs(float(second.init_params["m"]) - 5.0) < 0.01


def test_gaussian_guide_start_is_the_jnp_start():
    """bbvi's Gaussian guide builds its start with numpy (nothing to compile): the flat centre is
    ``ravel_pytree``'s and the inverse softplus of the scale is ``jnp``'s to float rounding."""
    from jax.flatten_util import ravel_pytree

    from vijax.inference._guides import GaussianGuide, _softplus_inv

    template = {"a": jnp.arange(3.0), "b": jnp.array(2.5), "c": jnp.ones((2, 2))}
    for scale in (0.1, 0.3, 1e-3, 2.0):
        g = GaussianGuide(template, "lowrank", init_scale=scale, rank=2)
        v = g.init()
        np.testing.assert_array_equal(v["loc"], ravel_pytree(template)[0])
        np.testing.assert_allclose(v["scale"], _softplus_inv(jnp.full((8,), scale)), rtol=1e-6)
        assert v["factor"].shape == (8, 2) and not np.any(np.asarray(v["factor"]))
        jax.tree_util.tree_map(np.testing.assert_array_equal, g._unravel(v["loc"]), template)


def _twins():
    a = numpyro.sample("a", dist.Normal(jnp.zeros(3), 1.0).to_event(1))
    b = numpyro.sample("b", dist.Normal(jnp.zeros(3), 1.0).to_event(1))
    numpyro.sample("y", dist.Normal(a + b, 1.0), obs=jnp.zeros(3))


def test_the_start_keys_each_site_without_splitting_a_key():
    """The start's i-th site draws with ``jax.random.key(i)``: its program splits no key (NumPyro's
    ``seed`` splits one key per site, a hash the program would compile once per site), and two
    sites of the same prior start at different values (medians of draws of independent streams)."""
    target = vijax.from_numpyro(_twins)
    from vijax import _compile

    program = next(reversed(_compile._PROGRAMS))[0]  # the text of the start's jaxpr, the last compiled
    assert "random_bits[" in program and "random_split" not in program and "random_fold_in" not in program
    a, b = np.asarray(target.init_params["a"]), np.asarray(target.init_params["b"])
    assert not np.allclose(a, b)
    from vijax.interop._prior_draws import prior_median

    np.testing.assert_array_equal(a, prior_median(dist.Normal(jnp.zeros(3), 1.0).to_event(1), jax.random.key(1)))


def test_traced_log_density_runs_the_model_once_with_the_same_values():
    """Under a transformation (grad, vmap, the Hessian) the target's log-density replays one jaxpr
    of the model per parameter shapes: the model's Python runs once for every later trace, and the
    values and derivatives are NumPyro's own log_density's."""
    from numpyro.infer.util import log_density

    calls = []

    def counted(sigma, y=None):
        calls.append(1)
        eight_schools(sigma, y)

    target = vijax.from_numpyro(counted, SIGMA, y=Y)
    params = {"mu": jnp.array(1.5), "tau": jnp.array(2.0), "theta_tilde": jnp.linspace(-1.0, 1.0, 8)}
    batched = jax.tree.map(lambda x: jnp.stack([x, 0.5 * x]), params)
    calls.clear()
    ours = (
        jax.grad(target.log_prob)(params),
        jax.vmap(jax.hessian(target.log_prob))(batched),
        jax.jit(jax.vmap(target.log_prob))(batched),
    )
    assert len(calls) == 1  # once traced, three transformations replayed it

    def theirs(p):
        return log_density(eight_schools, (SIGMA,), {"y": Y}, p)[0]

    expected = (jax.grad(theirs)(params), jax.vmap(jax.hessian(theirs))(batched), jax.jit(jax.vmap(theirs))(batched))
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6), ours, expected)
    # concrete values still run the model itself (NumPyro's checks see them), a batch too
    calls.clear()
    np.testing.assert_allclose(target.log_prob(params), theirs(params), rtol=1e-6)
    target.log_prob(params, {"y": Y + 1.0})
    assert len(calls) == 2


def test_a_target_built_under_jit_gives_the_same_gradient():
    """A target built inside the caller's jit (its data traced) differentiates as one built
    outside."""

    def fit(y):
        target = vijax.from_numpyro(eight_schools, SIGMA, y=y)
        params = {"mu": jnp.array(1.5), "tau": jnp.array(2.0), "theta_tilde": jnp.zeros(8)}
        return jax.grad(target.log_prob)(params)["mu"]

    np.testing.assert_allclose(jax.jit(fit)(Y), fit(Y), rtol=1e-6)
