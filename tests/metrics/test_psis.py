"""PSIS k-hat (vijax.metrics.psis, ArviZ's psislw underneath) against the known tail of Gaussian
importance ratios, and on a fitted q."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax import inference as vi
from vijax.inference import bbvi
from vijax.metrics import KHAT_THRESHOLD, psis


def gaussian_ratio_log_weights(sigma, n=4000, seed=0):
    """q = N(0, 1), target N(0, sigma^2): w = p / q has a Pareto tail of shape k = 1 - 1 / sigma^2."""
    z = np.random.default_rng(seed).normal(size=n)
    return -0.5 * z**2 / sigma**2 + 0.5 * z**2


def test_khat_follows_the_tail_of_gaussian_ratios():
    ks = [psis(gaussian_ratio_log_weights(s)).khat for s in (1.2, 2.0, 4.0)]
    assert ks[0] < ks[1] < ks[2]
    assert ks[0] < 0.5 and psis(gaussian_ratio_log_weights(1.2)).ok
    # true k = 1 - 1/16 = 0.94: flagged
    assert ks[2] > KHAT_THRESHOLD and not psis(gaussian_ratio_log_weights(4.0)).ok
    assert abs(ks[2] - (1 - 1 / 16)) < 0.2  # finite-sample estimate of the limit, 4000 draws


def test_equal_weights_and_bad_input():
    r = psis(np.full(100, -3.0))
    assert r.khat == -np.inf and r.ok and r.ess == 100.0
    np.testing.assert_allclose(np.sum(np.exp(r.log_weights)), 1.0)
    # equal up to float64 rounding (a closed-form q of a log-joint of magnitude 1e3): equal, not a Pareto fit of
    # rounding errors (k-hat = inf); a spread above rounding is fitted
    jitter = np.random.default_rng(0).uniform(-1.0, 1.0, 200)
    r = psis(-1234.5 + 1e-12 * jitter)
    assert r.khat == -np.inf and r.ok and r.ess == 200.0
    assert np.isfinite(psis(-1234.5 + 1e-3 * jitter).khat)
    # float32 weights (a closed-form q's, the default dtype): equal up to a few of their own ulps; a real spread is fitted
    ulps = np.float32(-41.9) + np.spacing(np.float32(41.9)) * np.round(3.0 * jitter).astype(np.float32)
    assert ulps.dtype == np.float32 and np.ptp(ulps) > 1e-9 * 41.9  # above float64's rounding: the dtype decides
    r = psis(ulps)
    assert r.khat == -np.inf and r.ok and r.ess == 200.0
    assert np.isfinite(psis((-41.9 + 1e-2 * jitter).astype(np.float32)).khat)
    with pytest.raises(ValueError, match="NaN"):
        psis(np.array([0.0] * 20 + [np.nan]))
    with pytest.raises(ValueError, match="shape"):
        psis(np.zeros((10, 2)))
    with pytest.raises(ValueError, match="log_weights are all -inf"):  # was NaN weights and k-hat = inf
        psis(np.full(50, -np.inf))
    r = psis(np.concatenate([np.full(40, -np.inf), np.zeros(10)]))  # some draws of zero density: fine
    np.testing.assert_allclose(np.sum(np.exp(r.log_weights)), 1.0)


def test_a_q_equal_to_the_posterior_has_equal_weights_and_a_narrow_q_is_flagged():
    def target(p, batch):  # N(0, 2^2) in one coordinate
        return -0.5 * jnp.sum(p["z"] ** 2) / 4.0

    alg = bbvi(target, init_params={"z": jnp.zeros(1)}, init_scale=2.0)
    state = alg.init(jax.random.PRNGKey(0))
    exact = psis(vi.log_weights(alg, jax.random.PRNGKey(1), state, None, 500))
    assert exact.ok and exact.ess > 499
    # sigma ratio 8: k = 1 - 1/64; the estimate from 4000 draws varies by about 0.1, so average 4 fits
    narrow = bbvi(target, init_params={"z": jnp.zeros(1)}, init_scale=0.25)
    state = narrow.init(jax.random.PRNGKey(0))
    ks = [psis(vi.log_weights(narrow, jax.random.PRNGKey(i), state, None, 4000)).khat for i in range(4)]
    assert np.mean(ks) > KHAT_THRESHOLD
