"""The non-finite guard of svi, ssvi and ssvi_a is complete: an accepted step never reports a
non-finite ELBO, while a step whose info is unused still skips the KL of LDA's topics wherever a
comparison per parameter proves it finite (``expfam.tree_kl_is_certified``, ``models.kl_guard``)."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax import expfam
from vijax.data import BowBatch
from vijax.inference import make_algorithm
from vijax.models import LDA, kl_guard


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_certified_dirichlet_kl_is_finite_at_every_corner_of_the_range(dtype):
    """Every mix of the range's ends (1/c, or eps where larger, and c, c = fmax^(1/3)) in q and in the prior, over a
    batch of Dirichlets: certified, and the KL computed in ``dtype`` is finite; 100 c is not
    certified."""
    assert jax.config.jax_enable_x64  # tests/conftest.py: float64 is available
    lo, hi = expfam.kl_certified_range(dtype)
    # a Dirichlet holds alpha - 1: the smallest concentration it can hold apart from 0 is about eps
    lo = max(lo, float(jnp.finfo(dtype).eps))
    corners = np.array(list(itertools.product([lo, hi], repeat=4)), dtype)  # (16, 4): 16 Dirichlets of 4
    for q_rows, p_rows in [(corners, corners[::-1]), (corners, np.full_like(corners, lo)), (corners, corners)]:
        q = expfam.Dirichlet.from_concentration(jnp.asarray(q_rows))
        p = expfam.Dirichlet.from_concentration(jnp.asarray(p_rows))
        assert bool(expfam.tree_kl_is_certified(q, p))
        assert np.isfinite(float(expfam.tree_kl(q, p)))
    far = expfam.Dirichlet.from_concentration(jnp.asarray(corners * 100))
    assert not bool(expfam.tree_kl_is_certified(far, p))


def test_families_without_a_certificate_compute_the_kl():
    """A Gamma has no cheap certificate: kl_guard computes its KL (0 when finite, NaN when not)."""
    p = expfam.Gamma.from_shape_rate(jnp.ones(3), jnp.ones(3))
    q = expfam.Gamma.from_shape_rate(jnp.array([2.0, 3.0, 4.0]), jnp.ones(3))
    assert not bool(expfam.tree_kl_is_certified(q, p))
    assert float(kl_guard(p, q)) == 0.0
    big = float(jnp.finfo(q.dtype).max)  # log Gamma of the largest float overflows
    inf = expfam.Gamma.from_shape_rate(jnp.array([2.0, 3.0, big]), jnp.ones(3))
    assert np.isnan(float(kl_guard(p, inf)))


@pytest.mark.parametrize("name", ["svi", "ssvi_a", "ssvi"])
def test_an_accepted_step_never_reports_a_non_finite_elbo(name):
    """LDA in float32 from states of topic mass 1 to 1e38 (the KL overflows from about 1e34): each
    step either reports a finite ELBO or is rejected with the state kept."""
    batch = BowBatch(jnp.array([[0, 1, 2, 3], [4, 5, 0, 1], [2, 3, 4, 5]], jnp.int32), jnp.ones((3, 4), jnp.float32))
    alg = make_algorithm(name, LDA(2, 6, dtype=jnp.float32), num_data=3, schedule=0.5)
    state = alg.init(jax.random.PRNGKey(1))
    step = jax.jit(alg.step)
    outcomes = []
    for scale in [1.0, 1e10, 1e20, 1e30, 1e35, 1e37, 1e38]:
        q = jax.tree_util.tree_map(lambda a: jnp.full_like(a, scale), state.q_global)
        new, info = step(jax.random.PRNGKey(2), state._replace(q_global=q), batch)
        accepted = bool(info.accepted)
        assert (not accepted) or np.isfinite(float(info.elbo)), (scale, float(info.elbo))
        if not accepted:
            for a, b in zip(jax.tree_util.tree_leaves(new.q_global), jax.tree_util.tree_leaves(q)):
                np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        outcomes.append(accepted)
    assert outcomes[0] and not outcomes[-1], outcomes  # both branches of the guard were taken
