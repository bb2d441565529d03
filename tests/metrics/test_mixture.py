"""Metrics of mixture fits (``vijax.metrics``): the Monte Carlo KL between two finite mixtures of
Bernoulli vectors against exact enumeration, and cluster purity. (``components_used`` with the
model's MAP assignments: tests/models/test_bernoulli_mixture.py.)"""

import jax
import jax.numpy as jnp
import numpy as np

from vijax.metrics import bernoulli_mixture_kl, bernoulli_mixture_kl_exact, cluster_purity, count_distinct


def test_bernoulli_mixture_kl_matches_enumeration():
    rng = np.random.default_rng(24)
    truth_w, truth_p = jnp.asarray(rng.dirichlet(np.ones(4))), jnp.asarray(rng.beta(0.5, 0.5, (4, 6)))
    fit_w = jnp.array([0.5, 0.3, 0.2])
    fit_p = jax.random.uniform(jax.random.PRNGKey(25), (3, 6), minval=0.1, maxval=0.9)
    exact = float(bernoulli_mixture_kl_exact(truth_w, truth_p, fit_w, fit_p))
    est = bernoulli_mixture_kl(jax.random.PRNGKey(26), truth_w, truth_p, fit_w, fit_p, 20000)
    assert exact > 0.05
    assert abs(float(est.value) - exact) <= 4.5 * float(est.stderr)
    assert float(est.stderr) < 0.1 * exact
    self_kl = bernoulli_mixture_kl(jax.random.PRNGKey(27), truth_w, truth_p, truth_w, truth_p, 100)
    assert float(self_kl.value) == 0.0
    np.testing.assert_allclose(bernoulli_mixture_kl_exact(truth_w, truth_p, truth_w, truth_p), 0.0, atol=1e-12)


def test_cluster_purity_and_count_distinct():
    z_true = np.array([0, 0, 0, 1, 1, 2, 2, 2])
    np.testing.assert_allclose(cluster_purity(z_true, z_true + 10), 1.0)  # labels need not match
    assert cluster_purity(z_true, np.zeros(8, int)) == 3 / 8  # one cluster: its majority type
    assert cluster_purity(z_true, np.array([0, 0, 1, 1, 1, 2, 2, 3])) == 7 / 8  # cluster 1 holds a type-0 point
    assert count_distinct(z_true) == 3 and count_distinct(jnp.array([4, 4, 7])) == 2


def test_cluster_purity_names_bad_labels():
    import pytest

    with pytest.raises(ValueError, match="z_hat must have the shape"):
        cluster_purity(np.array([0, 1, 1]), np.array([0, 1]))
    with pytest.raises(ValueError, match="z_true"):
        cluster_purity(np.array([0.5, 1.0]), np.array([0, 1]))
    with pytest.raises(ValueError, match="z_true must hold non-negative"):
        cluster_purity(np.array([-1, 1]), np.array([0, 1]))
