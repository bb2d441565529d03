"""A regression guard on the size of the programs the configs compile: the lowered text
(``jax.jit(step).lower(...).as_text()``, StableHLO) of each algorithm x model step below must stay
under a stated bound. Compile time grows with the program (docs/design.md, "Compile time and program
size"); an E-step loop unrolled per length bucket once made LDA's step 0.69 MB (and 11-21 s to compile).

The size depends on the program's structure, not on the data's size, so the steps are built at
tiny sizes and only lowered (never compiled). Each bound is about 1.5x the size measured when it
was set (the measurement is in the comment), so that it fails on a structural regression (a loop
unrolled again, a branch duplicated), not on a small change.

Covered: LDA's E-steps (mean-field with and without SQUAREM, CVB0, Gibbs) and global updates (SVI,
SSVI-A, SSVI) of configs/lda_ssvi.yaml, data-parallel SVI (configs/lda_synthetic.yaml); the
Bernoulli mixture's four methods of configs/dp_bernoulli.yaml (the default experiment). Not (yet)
covered: the steps of the CTM, GaP-NMF, GMM, GP-classification, BBVI and VAE configs.
"""

import jax
import jax.numpy as jnp
import pytest

from vijax.data import BowBatch
from vijax.inference import M_STEPS, data_parallel, make_algorithm, schedules
from vijax.models import LDA, BernoulliMixture, bernoulli_collapsed_gibbs

KB = 1000

# (M-step, E-step, accelerate) -> bound in kB, about 1.5x the size measured when it was set (jax 0.10.2,
# float32, these tiny sizes; at configs/lda_synthetic.yaml's sizes the first was 231 kB, and 688 kB
# before the E-step ran in tiles of one shape)
LDA_BOUNDS = {
    ("meanfield", "meanfield", True): 340,  # 228 kB
    ("meanfield", "meanfield", False): 260,  # 171 kB
    ("meanfield", "cvb0", True): 230,  # 155 kB
    ("meanfield", "gibbs", True): 275,  # 183 kB
    ("ssvi_a", "meanfield", True): 360,  # 238 kB
    ("ssvi", "meanfield", True): 400,  # 265 kB
}
DATA_PARALLEL_BOUND = 340  # svi x mean-field with SQUAREM under shard_map: 228 kB
BERNOULLI_BOUNDS = {"meanfield": 225, "ssvi_a": 215, "ssvi": 295, "gibbs": 85}  # 149, 142, 197, 55 kB


def _lda_batch(s=8, length=40, v=30):
    ids = jnp.arange(s * length, dtype=jnp.int32).reshape(s, length) % v
    return BowBatch(ids, jnp.ones((s, length), jnp.float32))


def _size(alg, batch, init_batch=None):
    key = jax.random.PRNGKey(0)
    state = jax.eval_shape(lambda k: alg.init(k) if init_batch is None else alg.init(k, init_batch), key)
    return len(jax.jit(alg.step).lower(state, batch, key).as_text())


def _lda_alg(model, m_step, local):
    return make_algorithm(
        M_STEPS[m_step], model, num_data=100, schedule=schedules.robbins_monro(1.0, tau=1.0, kappa=0.7), local=local
    )


@pytest.mark.parametrize("m_step, local, accelerate", sorted(LDA_BOUNDS))
def test_lda_step_program_size(m_step, local, accelerate):
    model = LDA(3, 30, accelerate=accelerate, gibbs_sweeps=4, gibbs_burn_in=2)
    size = _size(_lda_alg(model, m_step, local), _lda_batch())
    assert size < LDA_BOUNDS[m_step, local, accelerate] * KB, f"{size / KB:.0f} kB"


def test_lda_data_parallel_step_program_size():
    size = _size(_lda_alg(data_parallel(LDA(3, 30)), "meanfield", "meanfield"), _lda_batch())
    assert size < DATA_PARALLEL_BOUND * KB, f"{size / KB:.0f} kB"


def test_lda_program_does_not_grow_with_the_padded_length():
    """The tiles have one shape whatever the mix of lengths: a batch padded to 1024 slots lowers to
    about the program of one padded to 40 (the buckets once made it grow with the length)."""
    alg = _lda_alg(LDA(3, 30), "meanfield", "meanfield")
    short, long = _size(alg, _lda_batch(length=40)), _size(alg, _lda_batch(length=1024))
    assert long < 1.05 * short, (short, long)


@pytest.mark.parametrize("method", sorted(BERNOULLI_BOUNDS))
def test_bernoulli_mixture_step_program_size(method):
    model = BernoulliMixture(6, 8, alpha=4.0)
    y = (jnp.arange(40 * 8).reshape(40, 8) % 3 == 0).astype(jnp.float32)
    if method == "gibbs":
        alg = bernoulli_collapsed_gibbs(model, burn_in=5)
    else:
        alg = make_algorithm(
            M_STEPS[method],
            model,
            num_data=40,
            schedule=schedules.robbins_monro(1.0, tau=1.0, kappa=0.75),
            local="exact",
        )
    size = _size(alg, y, init_batch=y)
    assert size < BERNOULLI_BOUNDS[method] * KB, f"{size / KB:.0f} kB"
