"""What the experiments share: the bounds and memory of a ``data`` section sampled into a training and a
test set, minibatches of indices, the best of a fit's restarts, a mixture's density, Markdown tables, and
the extras an experiment needs (``needs``)."""

from __future__ import annotations

from typing import Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from vijax.inference import select_restart
from vijax.data import epoch_batches
from vijax.run import ConfigError, float_bytes, MemoryNeed, SEED_BOUND


SKLEARN_DATASETS = ("breast_cancer", "digits_3v5", "digits")  # the data sets loaded from scikit-learn


def needs(extras: Mapping[str, str] | Callable[[Mapping], Mapping[str, str]]) -> Callable:
    """Declares the extras a builder needs, ``{extra: what needs it}``, or a function of the config's
    sections giving them: ``vijax run`` imports their modules before any work and, where one is missing,
    exits naming its ``pip install "vijax-toolkit[extra]"`` line. Put it under ``register_experiment``.

    Examples:
      >>> build = needs({"numpyro": "its NUTS baseline"})(lambda sections, seed: None)
      >>> build.extras({})
      {'numpyro': 'its NUTS baseline'}
    """
    table = extras if callable(extras) else (lambda sections: dict(extras))

    def mark(build):
        build.extras = table
        return build

    return mark


def dataset_extras(name: str) -> dict[str, str]:
    """``{"datasets": ...}`` where the data set ``name`` is scikit-learn's, else ``{}``."""
    return {"datasets": f"its data set {name} (scikit-learn's)"} if name in SKLEARN_DATASETS else {}


def train_test_bounds(**data: str) -> dict[str, str]:
    """The bounds of a ``data`` section: ``data.num_train`` and ``data.num_test`` at least 1, then
    ``data.<key>: bound`` for each keyword (in its order), then ``data.seed``.

    Examples:
      >>> list(train_test_bounds(dim=">= 1"))
      ['data.num_train', 'data.num_test', 'data.dim', 'data.seed']
    """
    return {
        "data.num_train": ">= 1",
        "data.num_test": ">= 1",
        **{f"data.{key}": bound for key, bound in data.items()},
        "data.seed": SEED_BOUND,
    }


def train_test_need(config: Mapping, copies: int = 1) -> MemoryNeed:
    """``copies`` arrays of the data, each (data.num_train + data.num_test) x data.dim floats."""
    d = config["data"]
    return MemoryNeed(
        "the data ((data.num_train + data.num_test) x data.dim)",
        ("data.num_train", "data.num_test", "data.dim"),
        copies * (d["num_train"] + d["num_test"]) * d["dim"] * float_bytes(config),
    )


def index_batches(n: int, batch_size, key) -> Callable:
    """``(key, step) -> indices`` of the data: all ``n`` at every step (``batch_size`` None), or the
    minibatches of ``vijax.data.epoch_batches`` (a ConfigError naming ``data.batch_size`` for a bad size)."""
    if batch_size is None:
        return lambda key, t: jnp.arange(n)
    try:
        return epoch_batches(n, batch_size, key)[0]
    except ValueError as e:
        raise ConfigError(f"data.batch_size: {e}") from None


def best_restart(score: Callable) -> Callable:
    """A jitted ``q -> its restart with the highest score(restart)`` (``q``'s leaves: a leading restart axis)."""
    return jax.jit(lambda q: select_restart(q, jnp.argmax(jax.vmap(score)(q))))


def diag_mixture_log_density(w, mu, sd, x):
    """(N,) log sum_k w_k prod_d N(x_nd | mu_kd, sd_kd^2) of the rows of ``x``."""
    lp = jnp.sum(jax.scipy.stats.norm.logpdf(x[:, None, :], mu[None], sd[None]), axis=-1)
    return jax.scipy.special.logsumexp(jnp.log(w)[None, :] + lp, axis=-1)


def cell(v, fmt=None) -> str:
    """A table cell: "—" for None or NaN, ``fmt(v)`` for a float (by default 4 significant digits),
    ``str(v)`` for anything else."""
    if v is None or (isinstance(v, float) and v != v):
        return "—"
    return (fmt or (lambda x: f"{x:.4g}"))(v) if isinstance(v, (float, np.floating)) else str(v)


def md_table(rows: list[dict], cols: list[str], fmt=None) -> str:
    """A Markdown table of ``rows`` (dicts) with the columns ``cols``, each value a ``cell``.

    Examples:
      >>> print(md_table([{"a": 1, "b": 0.123456}], ["a", "b"]), end="")
      | a | b |
      |---|---|
      | 1 | 0.1235 |
    """
    head = "| " + " | ".join(cols) + " |\n|" + "---|" * len(cols) + "\n"
    return head + "".join("| " + " | ".join(cell(r.get(c), fmt) for c in cols) + " |\n" for r in rows)
