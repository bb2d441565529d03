"""The documented conjugate workflows in a float32 process with NumPy data (float64 values, int64
indices from ``np.repeat``): ``conjugate_sites`` and ``complete_conditional`` run their checks in
float64, and JAX keeps one typed copy of each NumPy array whatever the mode that asks next, so the
checks must read copies of the model's data: the check, then ``conjugate_split``, a CAVI sweep and
``ngvi`` after it on the same target, and the checks again after those fits."""

import pytest

numpyro = pytest.importorskip("numpyro")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import numpyro.distributions as dist  # noqa: E402

import vijax  # noqa: E402
from vijax import expfam  # noqa: E402
from vijax.interop import complete_conditional, conjugate_sites  # noqa: E402


def counts(x, group, y):
    """docs/numpyro_tfp.md's model: per-group Gamma rates with a Gamma prior rate b, and a covariate's
    effect w (not conjugate)."""
    b = numpyro.sample("b", dist.Gamma(3.0, 1.5))
    w = numpyro.sample("w", dist.Normal(0.0, 1.0))
    with numpyro.plate("groups", 3):
        rates = numpyro.sample("rates", dist.Gamma(2.0, b))
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Poisson(rates[group] * jnp.exp(w * x)), obs=y)


@pytest.mark.slow
def test_a_float32_process_with_numpy_data_fits_before_and_after_the_checks():
    # NumPy data made here, read by no float64 test: float64 values, int64 indices
    x = np.array([0.1, -0.4, 0.3, 0.0, 0.2, -0.1])
    group = np.repeat(np.arange(3), [2, 3, 1])
    y = np.array([3.0, 1.0, 4.0, 2.0, 5.0, 0.0])
    assert (x.dtype, group.dtype) == (np.float64, np.int64)
    key = jax.random.PRNGKey(0)
    with jax.enable_x64(False):
        target = vijax.from_numpyro(counts, x, group, y)
        report = conjugate_sites(target, key)
        assert {n: s.conjugate for n, s in report.items()} == {"b": True, "w": False, "rates": True}

        alg = vijax.inference.conjugate_split(target, report, learning_rate=0.01, num_samples=2)
        state = alg.init(key)
        step = vijax.inference.jit_step(alg.step)
        for t in range(2):
            state, info = step(jax.random.PRNGKey(t + 1), state, None)
        assert np.isfinite(info.elbo) and info.elbo.dtype == jnp.float32

        @jax.jit
        def sweep(q_b):  # docs/numpyro_tfp.md's CAVI sweep, with w at 0
            q_rates = complete_conditional(target, "rates", {"b": q_b.mean_params()[1][None], "w": jnp.zeros(1)})
            rates = q_rates.mean_params()[1][None]
            return complete_conditional(target, "b", {"rates": rates, "w": jnp.zeros(1)}), q_rates

        q_b, q_rates = sweep(expfam.Gamma.from_shape_rate(3.0, 1.5))
        assert q_rates.concentration.dtype == jnp.float32
        np.testing.assert_allclose(q_rates.concentration, 2.0 + np.bincount(group, y), rtol=1e-5)

        ngvi = vijax.inference.ngvi(target, num_samples=2)  # ngvi after the report, on the same target
        state, info = vijax.inference.jit_step(ngvi.step)(key, ngvi.init(key), None)
        assert np.isfinite(info.elbo) and info.elbo.dtype == jnp.float32

        # the checks after those fits, on a fresh target of the same arrays and on the model
        assert conjugate_sites(vijax.from_numpyro(counts, x, group, y), key)["rates"].conjugate
        q = complete_conditional(counts, "rates", {"b": np.array([1.2]), "w": np.array([0.0])}, x, group, y)
    np.testing.assert_allclose(q.rate, 1.2 + np.bincount(group), rtol=1e-5)
