"""A probe of vijax's public entry points with hostile inputs, as a new user would give them,
generated from the registries: every model class of ``vijax.models`` (its constructor's float
and size arguments), every algorithm of ``vijax.inference.ALGORITHMS`` (its factory's arguments,
and its step fed corrupted batches and states that are not states, eagerly and under
``jax.jit``), the file readers of ``vijax.data`` (malformed, truncated, binary, non-UTF-8 and non-regular files), and every
registered experiment's config (each numeric key out of its range or of the wrong type, unknown
keys, YAML read differently from what was written), the entry points for a user's own model
(``from_numpyro``, ``from_tfp``, ``predictive``, ``log_likelihood``, ``complete_conditional``, the
start of ``bbvi`` and ``ngvi``: ``interop_cases``), and the families, the functions over a fitted
state and the metrics (``evaluation_cases``).

Each input is classified as one of:

- ``clear``: refused with a ValueError (or a JaxRuntimeError carrying one) whose message names
  the argument, the config key, the file or the batch; also ``jax.jit``'s own TypeError for a
  string array, which names the argument ``batch`` before any vijax code runs;
- ``handled``: a step returned with ``info.accepted`` False (the non-finite update rejected, the
  state kept), or a family's ``log_prob`` returned -inf at points outside its support (the
  density there);
- ``obscure``: another exception, or a ValueError that does not name what is wrong, or no answer
  within ``TIMEOUT_S`` seconds;
- ``silent``: accepted as if it were fine.

    python benchmarks/probe_hostile.py     # prints the tally by category, writes benchmarks/results/probe_hostile.json

It exits with status 1 when any input is ``obscure`` or ``silent`` (after writing the JSON).
"""

from __future__ import annotations

import argparse
import gzip
import inspect
import json
import os
import signal
import tempfile
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import vijax.models as vm
from vijax import expfam
from vijax.data import BowBatch, Corpus, load_vocabulary, prepare_corpus, read_ldac, read_uci_bow, read_word_list
from vijax.inference import ALGORITHMS, make_algorithm
from vijax.run import EXPERIMENTS, import_builtin_experiments, load_config
from _device import add_device_argument, use_device  # this folder's --device switch

TIMEOUT_S = 60
OUTCOMES = ("clear", "handled", "obscure", "silent")
KEY = jax.random.PRNGKey(0)
X = jnp.array([[1.0, 0.5, 0.1], [-1.0, 0.2, 0.3], [0.3, -0.4, 0.2], [0.9, 1.0, -0.5]])
Y = jnp.array([1.0, 0.0, 1.0, 0.0])
X1 = jnp.array([-2.0, -1.5, 1.5, 2.0, 0.1])
X2 = jnp.array([[-2.0, 0.1], [-1.5, 0.3], [1.5, -0.2], [2.0, 0.0], [0.1, 0.2]])
Y01 = jnp.array([[0.0, 1.0, 1.0], [1.0, 0.0, 1.0], [1.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
XY = (jnp.array([[1.0, 0.5], [-1.0, 0.2], [0.3, -0.4], [0.9, 1.0]]), jnp.array([1.0, 0.0, 1.0, 0.0]))
BOW = BowBatch(jnp.array([[0, 1, 2, 3], [4, 5, 0, 1], [2, 3, 4, 5]], jnp.int32), jnp.ones((3, 4), jnp.float32))
OBS = jnp.array([[0, 1, 1, 0], [1, 1, 0, 0]], jnp.int32)


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def classify(call: Callable[[], Any], names: tuple, accepted_of=None) -> str:
    """The outcome of ``call()``: ``clear`` when it raises a ValueError naming one of ``names``."""
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TIMEOUT_S)
    try:
        out = call()
        jax.block_until_ready(out)
    except _Timeout:
        return "obscure"
    except ValueError as e:
        return "clear" if any(n in str(e) for n in names) else "obscure"
    except TypeError as e:  # jax.jit's own refusal of a non-array argument names it ("... at path batch")
        return "clear" if "at path batch" in str(e) else "obscure"
    except jax.errors.JaxRuntimeError as e:
        return "clear" if "ValueError: " in str(e) and any(n in str(e) for n in names) else "obscure"
    except Exception:  # noqa: BLE001 -- anything else is an obscure failure
        return "obscure"
    finally:
        signal.alarm(0)
    if accepted_of is not None:
        accepted = getattr(accepted_of(out), "accepted", None)
        if accepted is not None and not bool(np.all(np.asarray(accepted))):
            return "handled"
    return "silent"


# ------------------------------------------------------------------------------- constructors
def _network(shape):
    return vm.Network(lambda p, x: p @ x, jnp.ones(shape))


# model class -> a constructor with valid required arguments (every dimension 3), given by keyword so
# that a case can replace any of them
def _kw(cls, **required):
    return lambda **kw: cls(**{**required, **kw})


MODELS = {
    "ARDRegression": _kw(vm.ARDRegression, dim=3),
    "BernoulliMixture": _kw(vm.BernoulliMixture, num_components=3, dim=3),
    "CTM": _kw(vm.CTM, num_topics=3, vocab_size=3),
    "CategoricalHMM": _kw(vm.CategoricalHMM, num_states=3, num_symbols=3),
    "DiagonalGMM": _kw(vm.DiagonalGMM, num_components=3, dim=3),
    "DPMixture": lambda **kw: vm.DPMixture(vm.DiagonalGMM(3, 3), **kw),
    "FullGMM": _kw(vm.FullGMM, num_components=3, dim=3),
    "GLM": _kw(vm.GLM, dim=3),
    "GPClassification": _kw(vm.GPClassification, x=X, y=Y, log_lengthscale=0.0, log_scale=0.0),
    "GaPNMF": _kw(vm.GaPNMF, num_components=3, num_freqs=3),
    "GaussianHMM": _kw(vm.GaussianHMM, num_states=3, dim=3),
    "GaussianMixtureEM": _kw(vm.GaussianMixtureEM, num_components=3, dim=3),
    "LDA": _kw(vm.LDA, num_topics=3, vocab_size=3),
    "NoisyDirichletMultinomial": _kw(vm.NoisyDirichletMultinomial, num_categories=3),
    "PLSA": _kw(vm.PLSA, num_topics=3, vocab_size=3),
    "PoissonGammaSoftplus": _kw(vm.PoissonGammaSoftplus, dim=3),
    "StudentTMixture": _kw(vm.StudentTMixture, num_components=3, dim=3),
    "UnivariateGMM": _kw(vm.UnivariateGMM, num_components=3),
    "VAE": _kw(vm.VAE, encoder=_network((4, 3)), decoder=_network((3, 2)), latent_dim=2, data_dim=3),
}
BAD_FLOATS = {"str": "1.0", "bytes": b"1.0", "bool": True, "nan": float("nan"), "inf": float("inf")}
BAD_SIZES = {"zero": 0, "negative": -1, "fraction": 2.5, "str": "3", "absurd": 10**30}


def constructor_cases():
    """(label, call, names): every float argument given each of BAD_FLOATS, and every size argument
    (an int without a default, or named like a size) each of BAD_SIZES."""
    for name, make in MODELS.items():
        for p in inspect.signature(getattr(vm, name)).parameters.values():
            default = p.default
            if isinstance(default, float):
                for what, value in BAD_FLOATS.items():
                    yield f"{name}({p.name}={what})", (lambda m=make, a=p.name, v=value: m(**{a: v})), (p.name,)
            is_size = (default is inspect.Parameter.empty and p.annotation in ("int", int)) or (
                isinstance(default, int) and not isinstance(default, bool) and p.name.endswith(("_iters", "_steps"))
            )
            if is_size and name not in ("GPClassification",):
                for what, value in BAD_SIZES.items():
                    if what == "zero" and p.name.endswith("_iters"):
                        continue
                    yield f"{name}({p.name}={what})", (lambda m=make, a=p.name, v=value: m(**{a: v})), (p.name,)


# ------------------------------------------------------------------------------- algorithms
# algorithm -> (model, valid batch, valid settings)
ALGORITHM_CASES = {
    "cavi": (lambda: vm.UnivariateGMM(2), X1, {}),
    "em": (lambda: vm.CategoricalHMM(2, 2), OBS, {}),
    "svi": (lambda: vm.LDA(2, 6), BOW, {"num_data": 3, "schedule": 0.5}),
    "ssvi": (lambda: vm.LDA(2, 6), BOW, {"num_data": 3, "schedule": 0.5}),
    "ssvi_a": (lambda: vm.LDA(2, 6), BOW, {"num_data": 3, "schedule": 0.5}),
    "map": (lambda: vm.LDA(2, 6), BOW, {"num_data": 3, "schedule": 0.5}),
    "prox_svi": (lambda: vm.GLM(2), XY, {"num_data": 4, "schedule": 0.1}),
    "optax": (
        lambda: vm.GPClassification(*XY, log_lengthscale=0.0, log_scale=0.0),
        jnp.array([0, 1, 2], jnp.int32),
        {"num_data": 4, "optimizer": "adam", "schedule": 0.01},
    ),
    "aevb": (
        lambda: vm.VAE(vm.mlp(jax.random.PRNGKey(1), (4, 8, 4)), vm.mlp(jax.random.PRNGKey(2), (2, 8, 4)), 2, 4),
        Y01[:, :2].repeat(2, 1)[:, :4],
        {"num_data": 4, "schedule": 0.01},
    ),
}


def _glm_density(w, batch):
    x, y = batch
    logits = x @ w
    return jnp.sum(y * logits - jnp.logaddexp(0.0, logits)) - 0.5 * jnp.sum(w**2)


ALGORITHM_CASES["bbvi"] = (lambda: _glm_density, XY, {"num_data": 4, "init_params": jnp.zeros(2)})
ALGORITHM_CASES["ngvi"] = (
    lambda: _glm_density,
    XY,
    {"num_data": 4, "family": expfam.Normal.from_mean_variance(jnp.zeros(2), jnp.ones(2))},
)

BAD_SETTINGS = {
    "num_data": {"zero": 0, "negative": -1, "fraction": 2.5, "str": "4", "below the batch": 1},
    "schedule": {"zero": 0.0, "negative": -0.1, "nan": float("nan"), "str": "0.1"},
}


def algorithm_cases():
    """(label, call, names): each registered algorithm's factory given bad settings (num_data below
    the batch is refused at the step), and an unknown keyword."""
    for name, (make, batch, settings) in ALGORITHM_CASES.items():
        for key, bad in BAD_SETTINGS.items():
            if key not in settings:
                continue
            for what, value in bad.items():

                def call(make=make, batch=batch, settings=settings, key=key, value=value, name=name):
                    alg = make_algorithm(name, make(), **{**settings, key: value})
                    state = alg.init(jax.random.PRNGKey(1), batch)
                    return alg.step(jax.random.PRNGKey(2), state, batch)

                yield f"{name}({key}={what})", call, (key,)
        yield (
            f"{name}(no_such_setting=1)",
            lambda make=make, settings=settings, name=name: make_algorithm(name, make(), **settings, no_such_setting=1),
            ("no_such_setting",),
        )


def _set(tree, value, field=0):
    """``tree`` with its ``field``-th leaf's first entry set to ``value``."""
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    leaf = leaves[field]
    leaves[field] = leaf.at[(0,) * leaf.ndim].set(jnp.asarray(value, leaf.dtype))
    return jax.tree_util.tree_unflatten(treedef, leaves)


def _corruptions(batch) -> dict:
    """Corrupted copies of a valid batch: a NaN, an infinity, an out-of-range id (int leaves), a
    negative value, one more trailing axis, a string array."""
    out = {}
    for i, leaf in enumerate(jax.tree_util.tree_leaves(batch)):
        if jnp.issubdtype(leaf.dtype, jnp.integer):
            out[f"leaf {i} id 10**6"] = _set(batch, 10**6, i)
            out[f"leaf {i} id -1"] = _set(batch, -1, i)
        else:
            out[f"leaf {i} nan"] = _set(batch, np.nan, i)
            out[f"leaf {i} inf"] = _set(batch, np.inf, i)
    out["one more axis"] = jax.tree_util.tree_map(lambda a: jnp.stack([a, a], -1), batch)
    out["strings"] = np.array(["a", "b"])
    return out


def step_cases():
    """(label, call, names, accepted_of): each registered algorithm's step (eagerly and under
    jit) fed each corruption of its valid batch, and a state that is not one."""
    for name, (make, batch, settings) in ALGORITHM_CASES.items():
        alg = make_algorithm(name, make(), **settings)
        state = alg.init(jax.random.PRNGKey(1), batch)
        jitted = jax.jit(alg.step)
        for what, bad in _corruptions(batch).items():
            if what == "one more axis" and name in ("bbvi", "ngvi"):
                continue  # a user's log-density defines its batch's shape: vijax cannot call another one wrong
            for mode, fn in (("eager", alg.step), ("jit", jitted)):
                yield (
                    f"{name}.step[{what}, {mode}]",
                    lambda fn=fn, state=state, bad=bad: fn(jax.random.PRNGKey(2), state, bad),
                    ("batch", "obs", " x ", "y ", "count", "word id", "symbol", "index", "label", "num_data", "must"),
                )
        # a state that is not one: the (state, info) pair a step returns, None, its q alone
        for what, bad in (("(state, info)", (state, None)), ("None", None), ("q alone", (state.q_global,))):
            for mode, fn in (("eager", alg.step), ("jit", jitted)):
                yield (
                    f"{name}.step[state {what}, {mode}]",
                    lambda fn=fn, bad=bad: fn(jax.random.PRNGKey(2), bad, batch),
                    ("state",),
                )


# ------------------------------------------------------------------------------- readers
READERS = {
    "read_uci_bow": lambda p: read_uci_bow(p),
    "read_ldac": lambda p: read_ldac(p, vocab_size=5),
    "read_word_list": read_word_list,
    "load_vocabulary": load_vocabulary,
    "Corpus.load_npz": lambda p: Corpus.load_npz(p),
    "prepare_corpus": lambda p: prepare_corpus(p, "ldac", os.path.join(os.path.dirname(p), "out.npz"), vocab_size=5),
}
FILES = {
    "empty": b"",
    "binary": bytes(range(256)),
    "not UTF-8": b"3\n5\n2\n1 1 \xff\n",
    "truncated gzip": gzip.compress(b"2 0:1 3:2\n1 4:1\n" * 50)[:40],
    "text": b"x y z\n",
    "negative count": b"1 0:-3\n",
    "repeated word": b"apple\npear\napple\n",
}


def reader_cases(folder: str):
    """(label, call, names): each reader given each malformed file, a folder and /dev/zero."""
    for reader, read in READERS.items():
        for what, content in FILES.items():
            path = os.path.join(folder, f"{reader}_{what.replace(' ', '_')}" + (".gz" if "gzip" in what else ""))
            with open(path, "wb") as f:
                f.write(content)
            yield f"{reader}[{what}]", (lambda read=read, path=path: read(path)), (os.path.basename(path),)
        yield f"{reader}[a folder]", (lambda read=read: read(folder)), (folder,)
        yield f"{reader}[/dev/zero]", (lambda read=read: read("/dev/zero")), ("/dev/zero",)


def _is_silent_ok(reader: str, what: str) -> bool:
    """Inputs a reader may legitimately accept (a word list of words that happen to be text)."""
    return (reader in ("read_word_list", "load_vocabulary") and what in ("text", "negative count")) or (
        reader == "read_word_list" and what == "repeated word"
    )


# ------------------------------------------------------------------------------- configs
def config_cases():
    """(label, call, names): every registered experiment's config with an unknown key per section,
    each numeric key given a string and NaN (and -1 for an int key), and YAML read differently from
    what was written (a key given twice, an alias bomb)."""
    import_builtin_experiments()
    for name, spec in sorted(EXPERIMENTS.items()):
        for section in ("model", "data", "algorithm", "run"):
            key = f"{section}.no_such_key"
            yield (
                f"{name}: {key}",
                lambda name=name, section=section: load_config({"experiment": name, section: {"no_such_key": 1}}),
                (key,),
            )
        for section in ("model", "data", "algorithm"):
            for key, default in spec.defaults.get(section, {}).items():
                if isinstance(default, bool) or not isinstance(default, (int, float)):
                    continue
                values = {"str": "x", "nan": float("nan")}
                if isinstance(default, int):
                    values["negative"] = -1
                for what, value in values.items():
                    yield (
                        f"{name}: {section}.{key}={what}",
                        lambda name=name, section=section, key=key, value=value: load_config(
                            {"experiment": name, section: {key: value}}
                        ),
                        (f"{section}.{key}",),
                    )
    yield (
        "yaml: a key given twice",
        lambda: load_config(_yaml("experiment: gmm_simulation\nseed: 1\nseed: 2\n")),
        ("seed",),
    )
    bomb = "experiment: gmm_simulation\na: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefgh", "bcdefghi")
    )
    yield "yaml: an alias bomb", lambda: load_config(_yaml(bomb)), ("aliases",)


def _normal_model(y=None):
    import numpyro
    import numpyro.distributions as dist

    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    s = numpyro.sample("s", dist.HalfNormal(1.0))
    with numpyro.plate("n", 4):
        numpyro.sample("y", dist.Normal(mu, s), obs=y)


def interop_cases():
    """(label, call, names): a NumPyro model and a TFP joint given non-finite observed values;
    ``predictive``, ``log_likelihood`` and ``complete_conditional`` given draws that are not
    finite, outside a site's support, missing a site, of another shape or of a site the model
    lacks; ``bbvi``'s and ``ngvi``'s start on a log-density that closes over a NaN."""
    from tensorflow_probability.substrates import jax as tfp

    import vijax
    from vijax.inference import bbvi, ngvi

    tfd = tfp.distributions
    joint = tfd.JointDistributionNamed(dict(mu=tfd.Normal(0.0, 1.0), x=lambda mu: tfd.Sample(tfd.Normal(mu, 1.0), 4)))
    y = jnp.array([0.1, -0.3, 0.5, 1.2])
    cases = []
    for what, value in (("nan", jnp.nan), ("inf", jnp.inf)):
        bad = y.at[1].set(value)
        cases.append((f"from_numpyro[observed {what}]", lambda b=bad: vijax.from_numpyro(_normal_model, y=b), ("'y'",)))
        cases.append((f"from_tfp[observed {what}]", lambda b=bad: vijax.from_tfp(joint, observed={"x": b}), ("['x']",)))
    target = vijax.from_numpyro(_normal_model, y=y)
    draws = {"mu": jnp.zeros(3), "s": jnp.ones(3)}
    bad_draws = {
        "nan": ({**draws, "mu": draws["mu"].at[0].set(jnp.nan)}, "draws['mu']"),
        "outside the support": ({**draws, "s": -draws["s"]}, "draws['s']"),
        "a site missing": ({"mu": draws["mu"]}, "draws"),
        "another shape": ({**draws, "s": jnp.ones((3, 2))}, "draws"),
        "a site the model lacks": ({**draws, "z": jnp.zeros(3)}, "draws"),
    }
    for what, (d, name) in bad_draws.items():
        cases.append((f"predictive[draws {what}]", lambda d=d: vijax.predictive(target, d, KEY), (name,)))
        cases.append((f"log_likelihood[draws {what}]", lambda d=d: vijax.interop.log_likelihood(target, d), (name,)))
    cases.append(
        (
            "complete_conditional[draws outside the support]",
            lambda: vijax.interop.complete_conditional(target, "mu", {"s": -draws["s"]}),
            ("draws['s']",),
        )
    )
    data = jnp.array([0.3, jnp.nan])
    cases.append(
        (
            "bbvi.init[a log-density closing over a NaN]",
            lambda: bbvi(lambda p, b: -jnp.sum((data - p["z"]) ** 2), init_params={"z": jnp.zeros(())}).init(KEY),
            ("log_density",),
        )
    )
    family = expfam.Normal.from_mean_variance(0.0, 1.0)
    cases.append(
        (
            "ngvi.init[a log-density closing over a NaN]",
            lambda: ngvi(lambda z, b: -jnp.sum((data - z) ** 2), family=family).init(KEY),
            ("log_density",),
        )
    )
    return cases


class _Answer(NamedTuple):
    accepted: bool


def _minus_inf(call: Callable[[], Any]) -> Callable[[], _Answer]:
    """A family's log_prob at points outside its support, ``handled`` when every value is -inf
    (the density there, as scipy.stats gives it), ``silent`` otherwise (NaN, or a finite value)."""
    return lambda: _Answer(not bool(np.all(np.isneginf(np.asarray(call())))))


def evaluation_cases():
    """(label, call, names, accepted_of): the exponential families' constructors and log_prob at
    points outside the support or of another shape, ``kl`` between families that do not
    broadcast; ``init_from`` given a q outside its domain; ``sample`` and ``log_weights`` given no
    state or key; a black-box algorithm given optax's ``learning_rate``; the metrics given mixture
    weights off the simplex or log-weights that are all -inf; the runner given no algorithm, no
    key, an ``eval_fn`` that returns no dict, or a progress field the trace lacks."""
    from vijax.inference import bbvi, init_from, log_weights, ngvi, sample
    from vijax.metrics import bernoulli_mixture_kl_exact, psis

    cases = []
    for label, q, x in [
        ("Gamma", expfam.Gamma.from_shape_rate(2.0, 1.0), jnp.array([-1.0, -0.5])),
        ("Beta", expfam.Beta.from_concentrations(2.0, 2.0), jnp.array([-0.1, 1.5])),
        ("Dirichlet", expfam.Dirichlet.from_concentration(jnp.ones(3)), jnp.array([[0.5, 0.5, 0.5], [0.6, 0.6, -0.2]])),
        ("Poisson", expfam.Poisson.from_rate(2.0), jnp.array([-1.0, 1.5])),
        ("Bernoulli", expfam.Bernoulli.from_probs(0.3), jnp.array([2.0, 0.5])),
        ("Categorical", expfam.Categorical.from_probs(jnp.array([0.5, 0.5])), jnp.array([2, -1])),
        ("NormalGamma", expfam.NormalGamma.from_params(0.0, 1.0, 2.0, 1.0), jnp.array([[0.0, -1.0]])),
    ]:
        cases.append((f"{label}.log_prob[outside the support]", _minus_inf(lambda q=q, x=x: q.log_prob(x)), (), True))
    gamma3 = expfam.Gamma.from_shape_rate(jnp.ones(3), jnp.ones(3))
    cases += [
        ("Gamma.log_prob[x without the batch shape]", lambda: gamma3.log_prob(jnp.ones(2)), ("x must",), False),
        (
            "tree_kl[families that do not broadcast]",
            lambda: expfam.tree_kl(gamma3, expfam.Gamma.from_shape_rate(jnp.ones(2), jnp.ones(2))),
            ("other",),
            False,
        ),
        (
            "NormalWishart.from_params[scale of another D]",
            lambda: expfam.NormalWishart.from_params(jnp.zeros(3), 1.0, jnp.eye(2), 5.0),
            ("scale",),
            False,
        ),
    ]
    alg = ngvi(lambda z, b: -0.5 * jnp.sum(z["z"] ** 2), family={"z": expfam.Normal.from_mean_variance(0.0, 1.0)})
    state = alg.init(KEY)
    for what, q in (
        ("NaN", expfam.Normal(jnp.array(jnp.nan), jnp.array(-0.5))),
        ("a negative variance", expfam.Normal(jnp.array(0.0), jnp.array(0.5))),
    ):
        cases.append(
            (f"init_from[q with {what}]", lambda q=q: init_from(alg, KEY, {"z": q}), ("q_global['z']",), False)
        )
    cases += [
        ("sample[state None]", lambda: sample(alg, KEY, None, 3), ("state",), False),
        (
            "log_weights[the (state, info) pair]",
            lambda: log_weights(alg, KEY, alg.step(KEY, state, None), None, 3),
            ("state",),
            False,
        ),
        ("sample[key None]", lambda: sample(alg, None, state, 3), ("key",), False),
        (
            "bbvi[learning_rate=]",
            lambda: bbvi(lambda p, b: -jnp.sum(p**2), init_params=jnp.zeros(2), learning_rate=0.01),
            ("learning_rate",),
            False,
        ),
        (
            "bernoulli_mixture_kl_exact[weights summing to 1.4]",
            lambda: bernoulli_mixture_kl_exact(
                jnp.array([0.7, 0.7]), jnp.full((2, 3), 0.5), jnp.array([0.5, 0.5]), jnp.full((2, 3), 0.5)
            ),
            ("true_weights",),
            False,
        ),
        ("psis[log-weights all -inf]", lambda: psis(np.full(50, -np.inf)), ("log_weights",), False),
    ]
    from vijax.run import run

    def fit(algorithm=alg, key=KEY, **kw):  # a run of four steps, one argument replaced
        return lambda: run(algorithm, key, batch_fn=lambda k, t: None, num_steps=4, chunk_size=2, progress=False, **kw)

    from vijax.data import (
        Minibatcher,
        build_vocabulary,
        corpus_from_texts,
        sample_ctm_corpus,
        sample_gmm,
        sample_lda_corpus,
        tokenize,
    )

    small_corpus = sample_lda_corpus(0, 20, 3, 30, doc_length_mean=10.0).corpus

    q1 = expfam.Gamma.from_shape_rate(1.0, 1.0)
    cases += [
        (
            "tree_interpolate[rho = 2]",
            lambda: expfam.tree_interpolate(q1, expfam.tree_natural_params(q1), 2.0),
            ("rho",),
            False,
        ),
        (
            "corpus_from_texts[one string]",
            lambda: corpus_from_texts("hello world", ["hello", "world"]),
            ("texts",),
            False,
        ),
        ("build_vocabulary[one string]", lambda: build_vocabulary("a b c"), ("texts",), False),
        ("corpus_from_texts[an empty vocabulary]", lambda: corpus_from_texts(["hello"], []), ("vocabulary",), False),
        ("tokenize[None]", lambda: tokenize(None), ("text",), False),
        ("sample_gmm[key None]", lambda: sample_gmm(None, 10, 2, 3), ("key",), False),
        ("sample_ctm_corpus[seed None]", lambda: sample_ctm_corpus(None, 5, 3, 10), ("seed",), False),
        ("from_equinox[not a module]", lambda: vm.from_equinox(3), ("module",), False),
        (
            "Minibatcher[batch_size beyond memory]",
            lambda: Minibatcher(small_corpus, 10**12, seed=0),
            ("batch_size",),
            False,
        ),
    ]
    cases += [
        ("run[alg not an algorithm]", fit(algorithm=3), ("alg",), False),
        ("run[key None]", fit(key=None), ("key",), False),
        ("run[eval_fn returning a number]", fit(eval_fn=lambda s: 1.0, eval_every=2), ("eval_fn",), False),
        ("run[progress_fields misspelt]", fit(progress_fields=["elbo", "step_sise"]), ("progress_fields",), False),
    ]
    return cases


def _yaml(text: str) -> str:
    fd, path = tempfile.mkstemp(suffix=".yaml")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


# ------------------------------------------------------------------------------- main
def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "out", nargs="?", default=os.path.join(os.path.dirname(__file__), "results", "probe_hostile.json")
    )
    add_device_argument(parser)
    args = parser.parse_args(argv)
    use_device(args.device)
    missing = sorted(set(ALGORITHMS) - set(ALGORITHM_CASES))
    if missing:
        raise SystemExit(f"add the registered algorithm(s) {missing} to ALGORITHM_CASES in {__file__}")
    tally: dict = {}
    rows = []

    def record(category, label, outcome):
        tally.setdefault(category, dict.fromkeys(OUTCOMES, 0))[outcome] += 1
        rows.append({"category": category, "input": label, "outcome": outcome})

    for label, call, names in constructor_cases():
        record("constructor", label, classify(call, names))
    for label, call, names in algorithm_cases():
        record("algorithm", label, classify(call, names, accepted_of=lambda out: out[1]))
    for label, call, names in step_cases():
        record("step", label, classify(call, names, accepted_of=lambda out: out[1]))
    with tempfile.TemporaryDirectory() as folder:
        for label, call, names in reader_cases(folder):
            outcome = classify(call, names)
            reader, what = label[:-1].split("[", 1)
            if outcome == "silent" and _is_silent_ok(reader, what):
                continue  # a valid input for that reader
            record("reader", label, outcome)
    for label, call, names in config_cases():
        record("config", label, classify(call, names))
    for label, call, names in interop_cases():
        record("interop", label, classify(call, names))
    for label, call, names, returns in evaluation_cases():
        record("evaluation", label, classify(call, names, accepted_of=(lambda out: out) if returns else None))

    total = {k: sum(t[k] for t in tally.values()) for k in OUTCOMES}
    n = sum(total.values())
    print(f"{n} hostile inputs: " + ", ".join(f"{k} {v}" for k, v in total.items()))
    print(f"{'category':12s} " + " ".join(f"{k:>8s}" for k in OUTCOMES))
    for category, t in tally.items():
        print(f"{category:12s} " + " ".join(f"{t[k]:8d}" for k in OUTCOMES))
    bad = [r for r in rows if r["outcome"] in ("obscure", "silent")]
    for r in bad:
        print(f"  {r['outcome']:8s} {r['category']:12s} {r['input']}")
    res = {"total": total, "by_category": tally, "rows": rows}
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    if bad:
        raise SystemExit(f"{len(bad)} of {n} hostile inputs are obscure or silent (listed above)")
    return res


if __name__ == "__main__":
    main()
