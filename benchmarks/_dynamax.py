"""dynamax's Baum-Welch as the benchmarks run it (``hmm.py``, ``time_to_quality.py``): its model
started at given parameters and one iteration of its own ``fit_em`` body. No side effects at
import (``hmm.py`` turns on float64; ``time_to_quality.py`` runs in float32)."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def dynamax_em(kind, start, obs):
    """dynamax's HMM of ``kind`` started at ``start`` (priors as flat as its API allows), the data
    as it takes them, and one iteration of its ``fit_em`` body: ``(hmm, params, props, y,
    em_step)`` with ``em_step((params, m_step_state)) -> ((params, m_step_state), log joint)``."""
    from dynamax.hidden_markov_model import CategoricalHMM as DCat
    from dynamax.hidden_markov_model import DiagonalGaussianHMM as DGauss

    k = start.initial_probs.shape[0]
    if kind == "categorical":
        v = start.emissions.probs.shape[1]
        hmm = DCat(
            k,
            1,
            v,
            initial_probs_concentration=1.0,
            transition_matrix_concentration=1.0,
            emission_prior_concentration=1.0,
        )
        params, props = hmm.initialize(
            jax.random.PRNGKey(0),
            initial_probs=start.initial_probs,
            transition_matrix=start.transition_matrix,
            emission_probs=start.emissions.probs[:, None, :],
        )
        y = obs[..., None]
    else:
        d = start.emissions.means.shape[1]
        hmm = DGauss(
            k,
            d,
            initial_probs_concentration=1.0,
            transition_matrix_concentration=1.0,
            emission_prior_mean_concentration=1e-8,
            emission_prior_concentration=1e-8,
            emission_prior_scale=1e-8,
        )
        params, props = hmm.initialize(
            jax.random.PRNGKey(0),
            initial_probs=start.initial_probs,
            transition_matrix=start.transition_matrix,
            emission_means=start.emissions.means,
            emission_scale_diags=jnp.sqrt(start.emissions.variances),
        )
        y = obs

    # per iteration: fit_em's own EM step (a vmapped e_step, log_prior, m_step)
    def em_step(carry):
        prm, mstate = carry
        stats, lls = jax.vmap(lambda e: hmm.e_step(prm, e))(y)
        lp = hmm.log_prior(prm) + lls.sum()
        return hmm.m_step(prm, props, stats, mstate), lp

    return hmm, params, props, y, em_step
