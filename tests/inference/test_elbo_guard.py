"""The non-finite guard of svi, ssvi and ssvi_a is complete: it tests both terms of the ELBO, so
an accepted step never reports a non-finite ELBO."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax.data import BowBatch
from vijax.inference import make_algorithm
from vijax.models import LDA


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
