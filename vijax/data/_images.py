"""Data for variational autoencoders: scikit-learn's 8 x 8 digits as images, and binary data drawn from
a fixed random decoder (a known latent-variable model of the VAE's own form)."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from vijax._validate import check_bool, check_draw_args, check_int, check_scalar
from vijax.data._uci import sklearn_datasets, split_train_test
from vijax.types import Array, PRNGKey


class ImageData(NamedTuple):
    """x_train (N, H*W) and x_test (P, H*W) in [0, 1], their labels y_train (N,), y_test (P,),
    ``image_shape`` (H, W) and ``name``."""

    x_train: np.ndarray
    x_test: np.ndarray
    y_train: np.ndarray
    y_test: np.ndarray
    image_shape: tuple
    name: str


def load_digits_images(
    seed: int = 0, test_fraction: float = 0.2, binarize: bool = False, threshold: float = 0.5
) -> ImageData:
    """scikit-learn's 8 x 8 digits (1,797 images of 64 pixels, bundled: no download), scaled to [0, 1].

    Args:
      seed: the seed of the split, stratified by digit.
      test_fraction: the fraction of each digit held out, in (0, 1).
      binarize: pixels > ``threshold`` (in (0, 1)) become 1, the others 0, for a Bernoulli likelihood.

    Examples:
        >>> d = load_digits_images(binarize=True)
        >>> d.x_train.shape, d.x_test.shape, d.image_shape, sorted(set(d.x_train.ravel().tolist()))
        ((1438, 64), (359, 64), (8, 8), [0.0, 1.0])
    """
    check_int("seed", seed, minimum=0)
    check_scalar("test_fraction", test_fraction, low=0.0, high=1.0, include_high=False)
    check_bool("binarize", binarize)
    check_scalar("threshold", threshold, low=0.0, high=1.0, include_high=False)
    d = sklearn_datasets().load_digits()
    x = d.data / 16.0
    if binarize:
        x = (x > threshold).astype(np.float64)
    xtr, ytr, xte, yte = split_train_test(x, d.target, seed, test_fraction)
    return ImageData(
        xtr, xte, ytr.astype(np.int64), yte.astype(np.int64), (8, 8), "digits_binary" if binarize else "digits"
    )


class LatentBernoulliData(NamedTuple):
    """x (N, D) in {0, 1}, the latents z (N, d) that made them, the pixel probabilities (N, D), and
    the generating decoder's weights ``decoder`` = {"w1" (d, H), "b1" (H,), "w2" (H, D)}."""

    x: Array
    z: Array
    probs: Array
    decoder: dict


def latent_bernoulli_log_prob(decoder: dict, x: Array, key: PRNGKey, num_samples: int = 10000) -> Array:
    """(N,) log p(x_n) under :func:`sample_latent_bernoulli`'s model (weights ``decoder``), by Monte Carlo over the
    prior: log (1/K) sum_k p(x_n | z_k), z_k ~ N(0, I)."""
    num_samples = check_int("num_samples", num_samples)
    return _prior_mc(decoder, jnp.asarray(x), key, num_samples)


@functools.partial(jax.jit, static_argnums=(3,))
def _prior_mc(decoder, x, key, num_samples):
    z = jax.random.normal(key, (num_samples, decoder["w1"].shape[0]), x.dtype)
    logits = jnp.tanh(z @ decoder["w1"] + decoder["b1"][None]) @ decoder["w2"]  # (K, D)
    ll = x @ jax.nn.log_sigmoid(logits).T + (1.0 - x) @ jax.nn.log_sigmoid(-logits).T  # (N, K)
    return jax.scipy.special.logsumexp(ll, axis=1) - np.log(num_samples)


def sample_latent_bernoulli(
    key: PRNGKey,
    num_points: int,
    dim: int,
    latent_dim: int = 2,
    hidden: int = 16,
    *,
    logit_scale: float = 3.0,
    dtype=None,
) -> LatentBernoulliData:
    """Binary data from a fixed random decoder (a VAE's generative model with known latents)::

        W1 ~ N(0, 1/d) (d x H), b1 ~ N(0, 1/4), W2 ~ N(0, c^2/H) (H x D),
        z_n ~ N(0, I_d),  x_n ~ Bernoulli(sigmoid(tanh(z_n W1 + b1) W2)),

    c = ``logit_scale`` > 0 (larger: pixels closer to deterministic given z).

    Examples:
        >>> data = sample_latent_bernoulli(jax.random.PRNGKey(0), 10, 16)
        >>> data.x.shape, data.z.shape
        ((10, 16), (10, 2))
    """
    dt = check_draw_args(
        dict(num_points=num_points, dim=dim, latent_dim=latent_dim, hidden=hidden), dtype=dtype, key=key
    )
    logit_scale = check_scalar("logit_scale", logit_scale, low=0.0)
    return _sample_latent(key, int(num_points), int(dim), int(latent_dim), int(hidden), logit_scale, dt)


@functools.partial(jax.jit, static_argnums=(1, 2, 3, 4, 5, 6))
def _sample_latent(key, num_points, dim, latent_dim, hidden, logit_scale, dt):
    k1, k2, k3, k4, k5 = jax.random.split(key, 5)
    w1 = jax.random.normal(k1, (latent_dim, hidden), dt) / np.sqrt(latent_dim)
    b1 = 0.5 * jax.random.normal(k2, (hidden,), dt)
    w2 = logit_scale * jax.random.normal(k3, (hidden, dim), dt) / np.sqrt(hidden)
    z = jax.random.normal(k4, (num_points, latent_dim), dt)
    probs = jax.nn.sigmoid(jnp.tanh(z @ w1 + b1[None]) @ w2)
    x = jax.random.bernoulli(k5, probs).astype(dt)
    return LatentBernoulliData(x, z, probs, {"w1": w1, "b1": b1, "w2": w2})
