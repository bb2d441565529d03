"""LDA refuses an init_scale whose ELBO cannot be represented, so that a step does not report a
non-finite ELBO with ``accepted`` True: the steps' guard tests the new state and the ELBO's data
term (cheap), and the one term it leaves out, the KL of the old q(beta) from the prior, is finite
at every start LDA makes (and stays so along the steps, which move q towards the data)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax.data import sample_lda_corpus
from vijax.inference import map_em, ssvi, ssvi_a, svi
from vijax.models import LDA

K, V = 3, 30
F32 = jnp.float32  # JAX's default float (the tests run with x64 enabled)
ALGORITHMS = {"svi": svi, "ssvi": ssvi, "ssvi_a": ssvi_a, "map_em": map_em}


@pytest.fixture(scope="module")
def batch():
    return sample_lda_corpus(0, num_docs=8, num_topics=K, vocab_size=V, alpha=0.5).corpus.batch(range(8))


def test_lda_refuses_an_init_scale_whose_elbo_overflows():
    """init_scale = 1e37 (float32, K = 3, V = 30): the KL of the initial topics was NaN (log Gamma
    of 3e38 is inf) and svi reported a NaN ELBO with accepted True. The bound fmax / (2 K V log
    fmax) = 2.13e34 is 15x below the first scale that overflows here (3.2e35, found by a search
    in steps of 10^0.5)."""
    with pytest.raises(ValueError, match=r"^init_scale must be a finite number in \(0, 2\.13075e\+34\], got 1e\+37"):
        LDA(K, V, init_scale=1e37, dtype=F32)
    LDA(K, V, init_scale=2.1e34, dtype=F32)
    LDA(K, V, init_scale=1e37, dtype=jnp.float64)  # representable in float64


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_at_the_largest_init_scale_every_accepted_step_reports_a_finite_elbo(batch, name):
    alg = ALGORITHMS[name](LDA(K, V, init_scale=2.1e34, dtype=F32), num_data=8, schedule=0.5)
    state = alg.init(jax.random.PRNGKey(0))
    for t in range(2):
        state, info = alg.step(state, batch, jax.random.PRNGKey(t + 1))
        assert bool(info.accepted) and np.isfinite(float(info.elbo)), (t, float(info.elbo))
