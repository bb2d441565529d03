"""``auto_flow``: a flowjax normalizing flow over a target's flat unconstrained vector, sized from its dimension d
as NumPyro's ``AutoIAFNormal`` and ``AutoBNAFNormal`` size theirs, for ``bbvi(target, family=auto_flow(...))``.

- ``"iaf"``: an inverse autoregressive flow (Kingma et al. 2016, *Improved Variational Inference with Inverse
  Autoregressive Flow*, §4): 3 affine autoregressive layers, each a MADE of two hidden layers of d units (at
  least ``MIN_WIDTH``), the order reversed between layers; drawn in one pass (flowjax's ``invert=False``).
- ``"bnaf"``: a block neural autoregressive flow (De Cao, Titov and Aziz 2019, *Block Neural Autoregressive
  Flow*, §3): one layer of two hidden blocks of 8 units per coordinate (NumPyro's ``hidden_factors=[8, 8]``).
"""

from __future__ import annotations

import math
from typing import Any, Optional

import jax
import jax.numpy as jnp

from vijax._validate import ArgumentError, check_choice, check_int, check_key, require
from vijax.interop import Target
from vijax.types import PRNGKey

FLOWS = ("iaf", "bnaf")
MIN_WIDTH = 8  # NumPyro's d hidden units, but no fewer than this (a 2-D target's MADE of 2 units bends too little)


def auto_flow(
    target: Target, key: PRNGKey, *, kind: str = "iaf", num_layers: Optional[int] = None, width: Optional[int] = None
) -> Any:
    """A flowjax flow for ``bbvi`` over ``target``'s unconstrained sites (module docstring).

    Args:
      target: ``vijax.from_numpyro(...)`` or ``vijax.from_tfp(...)``: d is the size of its unconstrained sites.
      key: the key of the flow's initial weights.
      kind: ``"iaf"`` or ``"bnaf"``.
      num_layers: the number of flow layers (default 3 for ``"iaf"``, 1 for ``"bnaf"``).
      width: hidden units per layer (``"iaf"``, default max(d, ``MIN_WIDTH``)) or per block and coordinate
        (``"bnaf"``, default 8).

    Returns:
      An unconditional flowjax distribution of shape (d,), the ``family`` of ``bbvi(target, family=...,
      estimator="stl")`` (or ``entropy="mc"``).

    Raises:
      ArgumentError: naming ``target``, ``key``, ``kind``, ``num_layers`` or ``width``.
      ImportError: without flowjax (``pip install flowjax``).

    Examples:
        >>> import jax, jax.numpy as jnp, numpyro, numpyro.distributions as dist
        >>> import vijax
        >>> def model():
        ...     numpyro.sample("z", dist.Normal(jnp.zeros(3), 1.0).to_event(1))
        >>> flow = auto_flow(vijax.from_numpyro(model), jax.random.PRNGKey(0))
        >>> flow.shape
        (3,)
    """
    if not isinstance(target, Target):
        raise ArgumentError(
            "target", f"target: auto_flow takes a target (vijax.from_numpyro), got {type(target).__name__}"
        )
    check_key("key", key)
    kind = check_choice("kind", kind, FLOWS)
    require("flowjax", "flows", "vijax.inference.auto_flow")
    import flowjax.distributions as fd
    import flowjax.flows as ff

    d = sum(math.prod(site.unconstrained_shape) for site in target.sites.values())
    if d < 2:
        raise ArgumentError(
            "target", "target: one unconstrained coordinate; a flow over it is a 1-D bijection (use family='meanfield')"
        )
    layers = check_int("num_layers", (3 if kind == "iaf" else 1) if num_layers is None else num_layers)
    dtype = jax.eval_shape(lambda: jnp.zeros(())).dtype
    base = fd.Normal(jnp.zeros(d, dtype))
    if not jnp.issubdtype(key.dtype, jax.dtypes.prng_key):  # flowjax takes a typed key
        key = jax.random.wrap_key_data(key)
    with jax.numpy_rank_promotion("allow"):  # flowjax relies on NumPy's broadcasting
        if kind == "iaf":
            hidden = check_int("width", max(d, MIN_WIDTH) if width is None else width)
            return ff.masked_autoregressive_flow(
                key, base_dist=base, invert=False, flow_layers=layers, nn_width=hidden, nn_depth=2
            )
        block = check_int("width", 8 if width is None else width)
        return ff.block_neural_autoregressive_flow(
            key, base_dist=base, invert=False, flow_layers=layers, nn_block_dim=block, nn_depth=2
        )
