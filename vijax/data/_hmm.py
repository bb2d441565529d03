"""Sequences sampled from a hidden Markov model (Rabiner 1989, §III), padded to one length."""

from __future__ import annotations

import functools
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp

from vijax._validate import check_int, check_key, enforce_value_checks
from vijax.models import CategoricalEmissions, HMMData, HMMParams
from vijax.models.hmm import param_checks
from vijax.types import Array, PRNGKey


class HMMSample(NamedTuple):
    data: HMMData  # obs (B, T) ints or (B, T, D) floats, lengths (B,)
    states: Array  # (B, T) int32 hidden states, -1 at padded steps


def sample_hmm(
    key: PRNGKey, params: HMMParams, *, num_sequences: int, length: int, min_length: Optional[int] = None
) -> HMMSample:
    """Draws ``num_sequences`` sequences from the HMM ``params`` (categorical or diagonal-Gaussian emissions), of
    lengths uniform in [min_length, length] (or ``length``), padded to ``length`` with zeros.

    Examples:
        >>> import jax.numpy as jnp
        >>> from vijax.models import CategoricalEmissions, HMMParams
        >>> p = HMMParams(jnp.array([0.5, 0.5]), jnp.array([[0.9, 0.1], [0.2, 0.8]]),
        ...               CategoricalEmissions(jnp.array([[0.7, 0.3], [0.1, 0.9]])))
        >>> s = sample_hmm(jax.random.PRNGKey(0), p, num_sequences=3, length=5)
        >>> s.data.obs.shape, s.states.shape
        ((3, 5), (3, 5))
    """
    check_key("key", key)
    check_int("num_sequences", num_sequences)
    check_int("length", length)
    if min_length is not None:
        check_int("min_length", min_length, maximum=length)
    enforce_value_checks(lambda: param_checks(params))
    return _draw(key, params, num_sequences, length, min_length)


@functools.partial(jax.jit, static_argnums=(2, 3, 4))
def _draw(key: PRNGKey, params: HMMParams, num_sequences: int, length: int, min_length: Optional[int]) -> HMMSample:
    k_len, k_z0, k_z, k_x = jax.random.split(key, 4)
    log_pi, log_a = jnp.log(params.initial_probs), jnp.log(params.transition_matrix)
    z0 = jax.random.categorical(k_z0, log_pi, shape=(num_sequences,))

    def advance(z, k):
        nxt = jax.random.categorical(k, log_a[z])
        return nxt, nxt

    _, rest = jax.lax.scan(advance, z0, jax.random.split(k_z, length - 1))
    states = jnp.concatenate([z0[None], rest]).T.astype(jnp.int32)  # (B, T)
    em = params.emissions
    if isinstance(em, CategoricalEmissions):
        obs = jax.random.categorical(k_x, jnp.log(em.probs)[states]).astype(jnp.int32)
    else:
        noise = jax.random.normal(k_x, states.shape + em.means.shape[-1:], em.means.dtype)
        obs = jnp.asarray(em.means)[states] + jnp.sqrt(jnp.asarray(em.variances)[states]) * noise
    if min_length is None:
        lengths = jnp.full((num_sequences,), length, jnp.int32)
    else:
        lengths = jax.random.randint(k_len, (num_sequences,), min_length, length + 1).astype(jnp.int32)
    mask = jnp.arange(length)[None, :] < lengths[:, None]
    obs = jnp.where(mask if obs.ndim == 2 else mask[..., None], obs, 0)
    return HMMSample(HMMData(obs, lengths), jnp.where(mask, states, -1))
