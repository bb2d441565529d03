"""Synthetic magnitude spectrograms for the GaP-KL-NMF experiment (Hoffman & Blei 2015, §4.3, figure 4), whose
dictionary "resembles the magnitude spectra of speech sounds": each column a voiced sound, a harmonic comb under a
four-formant envelope (the paper does not say how its W was made)."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from vijax._validate import check_draw_args
from vijax.types import Array, PRNGKey

# Formant ranges (Hz) for F1..F4 and their bandwidths (Hz): typical adult vowel values.
_FORMANT_RANGES = ((300.0, 900.0), (900.0, 2400.0), (2300.0, 3300.0), (3300.0, 4500.0))
_BANDWIDTH_RANGE = (60.0, 200.0)
_FORMANT_GAINS = (1.0, 0.7, 0.4, 0.25)
_F0_RANGE = (90.0, 260.0)
_FLOOR_DB = -50.0


class SpectrogramData(NamedTuple):
    """A synthetic spectrogram with the dictionary and activations that generated it."""

    y: Array  # (F, T) Poisson counts (float); the model takes y.T, one frame per row
    w: Array  # (F, K) the dictionary, one magnitude spectrum per column
    h: Array  # (K, T) the activations
    f0: Array  # (K,) the fundamental of each column, in Hz


def _sizes(num_freqs, num_atoms) -> dict:
    return {"num_freqs": (num_freqs, 2), "num_atoms": num_atoms}


def speech_like_dictionary(
    key: PRNGKey,
    num_freqs: int = 257,
    num_atoms: int = 50,
    *,
    sample_rate: float = 16000.0,
    peak: float = 20.0,
    dtype=None,
) -> tuple[Array, Array]:
    """A (num_freqs, num_atoms) dictionary of voiced-speech magnitude spectra. Column k is ``peak * s_k / max(s_k)`` with

        s_k(f) = max( e_k(f) sum_j exp(-(f - j f0_k)^2 / (2 sigma^2)),  10^(-50/20) ),
        e_k(f) = sum_i g_i / (1 + ((f - F_ik) / B_ik)^2)  /  (1 + f / 500 Hz),

    f0_k ~ Uniform(90, 260) Hz, F_ik uniform in the i-th formant range, B_ik ~ Uniform(60, 200) Hz,
    sigma = 0.4 bins, j = 1, 2, ... up to the Nyquist frequency.

    Args:
      num_freqs: F >= 2, the number of frequency bins from 0 to sample_rate / 2.
      sample_rate: in Hz (> 0).
      peak: the largest entry of every column (> 0).

    Returns:
      (W (F, K), f0 (K,)).
    """
    dt = check_draw_args(_sizes(num_freqs, num_atoms), dict(sample_rate=sample_rate, peak=peak), dtype)
    nyquist = sample_rate / 2.0
    bin_hz = nyquist / (num_freqs - 1)
    freqs = jnp.arange(num_freqs, dtype=dt) * bin_hz  # (F,)
    k_f0, k_fmt, k_bw = jax.random.split(key, 3)
    f0 = jax.random.uniform(k_f0, (num_atoms,), dt, *_F0_RANGE)
    lo, hi = jnp.asarray(_FORMANT_RANGES, dt).T
    formants = lo[None] + (hi - lo)[None] * jax.random.uniform(k_fmt, (num_atoms, len(_FORMANT_RANGES)), dt)
    bandwidths = jax.random.uniform(k_bw, (num_atoms, len(_FORMANT_RANGES)), dt, *_BANDWIDTH_RANGE)
    gains = jnp.asarray(_FORMANT_GAINS, dt)
    resonances = gains[None, None] / (1.0 + ((freqs[:, None, None] - formants[None]) / bandwidths[None]) ** 2)
    envelope = jnp.sum(resonances, axis=-1) / (1.0 + freqs[:, None] / 500.0)  # (F, K)
    max_harmonics = int(np.ceil(nyquist / _F0_RANGE[0]))
    partials = jnp.arange(1, max_harmonics + 1, dtype=dt)[None, :] * f0[:, None]  # (K, J)
    partials = jnp.where(partials <= nyquist, partials, jnp.inf)  # partials above Nyquist vanish
    sigma = 0.4 * bin_hz
    comb = jnp.sum(jnp.exp(-0.5 * ((freqs[:, None, None] - partials[None]) / sigma) ** 2), axis=-1)  # (F, K)
    s = envelope * comb
    s = s / jnp.max(s, axis=0, keepdims=True)
    s = jnp.maximum(s, 10.0 ** (_FLOOR_DB / 20.0))
    return (peak * s).astype(dt), f0


def sample_speech_spectrogram(
    key: PRNGKey,
    num_freqs: int = 257,
    num_atoms: int = 50,
    num_frames: int = 1000,
    *,
    shape: float = 0.2,
    rate: float = 0.2,
    peak: float = 20.0,
    sample_rate: float = 16000.0,
    dtype=None,
) -> SpectrogramData:
    """The synthetic data of Hoffman & Blei 2015, §4.3: W from :func:`speech_like_dictionary`,
    H_kt ~ Gamma(shape, rate) independently, Y_ft ~ Poisson(sum_k W_fk H_kt).

    The defaults are the paper's (257 x 50 dictionary, 1000 frames, Gamma(0.2, 0.2)); ``peak`` sets the counts' scale.

    Returns:
      :class:`SpectrogramData` with y (F, T), w (F, K), h (K, T), f0 (K,).

    Examples:
        >>> data = sample_speech_spectrogram(jax.random.PRNGKey(0), 65, 4, 30)
        >>> data.y.shape, data.w.shape, data.h.shape
        ((65, 30), (65, 4), (4, 30))
    """
    positive = dict(shape=shape, rate=rate, sample_rate=sample_rate, peak=peak)
    dt = check_draw_args({**_sizes(num_freqs, num_atoms), "num_frames": num_frames}, positive, dtype, key=key)
    sizes = (num_freqs, num_atoms, num_frames)
    return _draw(key, sizes, float(shape), float(rate), float(peak), float(sample_rate), dt)


@functools.partial(jax.jit, static_argnums=(1, 2, 3, 4, 5, 6))
def _draw(key, sizes, shape, rate, peak, sample_rate, dt) -> SpectrogramData:
    num_freqs, num_atoms, num_frames = sizes
    k_w, k_h, k_y = jax.random.split(key, 3)
    w, f0 = speech_like_dictionary(k_w, num_freqs, num_atoms, sample_rate=sample_rate, peak=peak, dtype=dt)
    h = jax.random.gamma(k_h, jnp.asarray(shape, dt), (num_atoms, num_frames), dtype=dt) / rate
    y = jax.random.poisson(k_y, w @ h).astype(dt)
    return SpectrogramData(y, w, h, f0)
