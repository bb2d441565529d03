"""A probe of vijax's public entry points with hostile inputs, as a new user would give them,
generated from the registries: every model class of ``vijax.models`` (its constructor's float
and size arguments), every algorithm of ``vijax.inference.ALGORITHMS`` (its factory's arguments,
and its step fed corrupted batches and states that are not states, eagerly and under
``jax.jit``), the file readers of ``vijax.data`` (malformed, truncated, binary, non-UTF-8 and non-regular files), and every
registered experiment's config (each numeric key out of its range or of the wrong type, unknown
keys, YAML read differently from what was written), the entry points for a user's own model
(``from_numpyro``, ``from_tfp``, ``predictive``, ``log_likelihood``, ``complete_conditional``, the
start of ``bbvi`` and ``ngvi``: ``interop_cases``), the families, the functions over a fitted
state and the metrics (``evaluation_cases``), the front end on odd models (``from_numpyro`` and
``from_tfp``, ``conjugate_sites``, ``complete_conditional``, ``conjugate_split``, ``predictive``,
``to_arviz(target=...)``: ``frontend_cases``), the components (a user's ``Component``,
``Mixture``, ``HMM``, the GMMs, LDA and the VAE on degenerate data, ``data_parallel``:
``component_cases``; an experiment whose corpus files are empty: ``corpus_cases``) and the grids
and combinators (``hyperparameter_grid``, ``factory_grid``, ``replace_elbo``, ``lock_step``,
``restarts``: ``combinator_cases``), and ``vijax.fit`` of each kind of model with its posterior's methods
(``fit_cases``).

Where the right behaviour may be to work (a vague prior found conjugate, ``conjugate_split`` on a
model whose every site is conjugate, a fit on extreme but valid data), a case carries a check of
its result: ``check(out)`` is None for a correct answer, else a description of what is wrong.

Each input is classified as one of:

- ``clear``: refused with a ValueError (or a JaxRuntimeError carrying one) whose message names
  the argument, the config key, the file or the batch; also ``jax.jit``'s own TypeError for a
  string array, which names the argument ``batch`` before any vijax code runs;
- ``handled``: a step returned with ``info.accepted`` False (the non-finite update rejected, the
  state kept), a family's ``log_prob`` returned -inf at points outside its support (the
  density there), or a case with a check got a correct answer;
- ``obscure``: another exception, or a ValueError that does not name what is wrong, or no answer
  within ``TIMEOUT_S`` seconds;
- ``silent``: accepted as if it were fine (for a case with a check: an answer the check finds
  wrong, such as a step accepted to a non-finite state or to a positive ELBO on discrete data).

Each row of the JSON keeps what the input did (``detail``: the error's first line, or what was
accepted).

    python benchmarks/probe_hostile.py     # prints the tally by category, writes benchmarks/results/probe_hostile.json
    python benchmarks/probe_hostile.py /tmp/p.json --only frontend component combinator --verbose

It exits with status 1 when any input is ``obscure`` or ``silent`` (after writing the JSON).
"""

from __future__ import annotations

import argparse
import dataclasses
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
CATEGORIES = (
    "constructor",
    "algorithm",
    "step",
    "reader",
    "config",
    "interop",
    "evaluation",
    "data",
    "frontend",
    "component",
    "combinator",
    "fit",
)
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


def classify(call: Callable[[], Any], names: tuple, accepted_of=None, check=None) -> str:
    """The outcome of ``call()``: ``clear`` when it raises a ValueError naming one of ``names``."""
    return classify_detail(call, names, accepted_of, check)[0]


def classify_detail(call: Callable[[], Any], names: tuple, accepted_of=None, check=None) -> tuple[str, str]:
    """(the outcome of ``call()``, what it did: the error's first line, or what was accepted).

    With ``check`` (a case whose right behaviour may be to work), a return is ``handled`` when
    ``check(out)`` is None and ``silent`` (``check``'s description of what is wrong) otherwise."""
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TIMEOUT_S)
    try:
        out = call()
        jax.block_until_ready(out)
        if check is not None:
            problem = check(out)
    except _Timeout:
        return "obscure", f"no answer within {TIMEOUT_S} s"
    except ValueError as e:
        return ("clear" if any(n in str(e) for n in names) else "obscure"), _first_line(e)
    except TypeError as e:  # jax.jit's own refusal of a non-array argument names it ("... at path batch")
        return ("clear" if "at path batch" in str(e) else "obscure"), _first_line(e)
    except jax.errors.JaxRuntimeError as e:
        clear = "ValueError: " in str(e) and any(n in str(e) for n in names)
        return ("clear" if clear else "obscure"), _first_line(e)
    except Exception as e:  # noqa: BLE001 -- anything else is an obscure failure
        return "obscure", _first_line(e)
    finally:
        signal.alarm(0)
    if check is not None:
        if problem is not None:
            return "silent", problem
        accepted = getattr(out[1], "accepted", None) if isinstance(out, tuple) and len(out) == 2 else None
        rejected = accepted is not None and not bool(np.all(np.asarray(accepted)))
        return "handled", "rejected" if rejected else "worked"
    if accepted_of is not None:
        accepted = getattr(accepted_of(out), "accepted", None)
        if accepted is not None and not bool(np.all(np.asarray(accepted))):
            return "handled", "rejected"
    return "silent", "accepted"


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


# ------------------------------------------------------------------------------- a correct answer
# A case whose right behaviour is to work carries a check of its result: ``check(out)`` returns None
# for a correct answer (``handled``) or a description of what is wrong with it (``silent``).
def _first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0] if lines else ''}"[:300]


def _nonfinite(tree) -> list:
    """The paths of the float leaves of ``tree`` that hold a NaN or an infinity."""
    bad = []
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        a = np.asarray(leaf) if hasattr(leaf, "dtype") or isinstance(leaf, (float, np.ndarray)) else None
        if a is not None and np.issubdtype(a.dtype, np.inexact) and not np.all(np.isfinite(a)):
            bad.append(jax.tree_util.keystr(path))
    return bad


def WORKS(out) -> None:  # noqa: N802 -- a check that any answer passes: the call had to work
    return None


def finite_result(out) -> str | None:
    """None when every float leaf of ``out`` is finite."""
    bad = _nonfinite(out)
    return f"returned non-finite values at {bad[:3]}" if bad else None


def step_result(discrete: bool = False):
    """A check of a step's ``(state, info)``: None when the step was rejected (``info.accepted``
    False, the state kept) or accepted with a finite state and ELBO (for discrete data, an ELBO
    <= 0, as log p(x) <= 0)."""

    def check(out):
        state, info = out
        accepted = getattr(info, "accepted", None)
        accepted = np.ones((), bool) if accepted is None else np.asarray(accepted)
        if not np.any(accepted):
            return None
        if np.all(accepted):  # a grid's or restarts' state: checked when every point's step is accepted
            bad = _nonfinite(state)
            if bad:
                return f"accepted a step to a non-finite state at {bad[:3]}"
        elbo = getattr(info, "elbo", None)
        if elbo is None and isinstance(info, dict):
            elbo = info.get("elbo")
        if elbo is not None:
            e = np.broadcast_to(np.asarray(elbo, np.float64), np.broadcast_shapes(np.shape(elbo), accepted.shape))
            e = e[np.broadcast_to(accepted, e.shape)]
            if not np.all(np.isfinite(e)):
                return f"accepted a step with ELBO {e.tolist()}"
            if discrete and np.any(e > 1e-3 * np.abs(e) + 1e-3):  # the tolerance of tests/test_hostile_inputs.py
                return f"accepted a step with ELBO {e.tolist()} > 0 on discrete data (log p(x) <= 0)"
        return None

    return check


def _steps(alg, batch, num: int = 2, init_batch=None, jit: bool = False):
    """``num`` steps of ``alg`` from its start on ``batch``: the last (state, info)."""
    state = alg.init(jax.random.PRNGKey(1), batch if init_batch is None else init_batch)
    step = jax.jit(alg.step) if jit else alg.step
    out = None
    for t in range(num):
        out = step(jax.random.PRNGKey(2 + t), state, batch)
        state = out[0]
    return out


# ------------------------------------------------------------------------------- the front end
def _np():
    import numpyro
    import numpyro.distributions as dist

    return numpyro, dist


Y4 = np.array([0.1, -0.3, 0.5, 1.2])
K5 = np.array([3.0, 1.0, 4.0, 1.0, 5.0])


def _poisson_model(k, a=2.0, b=1.0):
    numpyro, dist = _np()
    rate = numpyro.sample("rate", dist.Gamma(a, b))
    with numpyro.plate("data", k.shape[0]):
        numpyro.sample("k", dist.Poisson(rate), obs=k)


def _discrete_z(target) -> str | None:
    """None where a discrete site 'z' not summed out is listed in the target's ``discrete`` (discrete_bbvi's)."""
    return None if "z" in target.discrete else f"site 'z' not in the target's discrete sites {list(target.discrete)}"


def _target_works(target, batch=None) -> str | None:
    """None when a target's start has a finite log-density (what bbvi's and ngvi's init need)."""
    value = target.log_density(target.init_params, batch)
    if not np.isfinite(float(value)):
        return f"a target whose start has log-density {float(value)}"
    return finite_result(target.init_params)


def _numpyro_models() -> dict:
    """label -> (model, args, kwargs, the names a refusal must give, a check of the target or None
    where the model must be refused)."""
    numpyro, dist = _np()
    from numpyro import handlers
    from numpyro.distributions import constraints

    def normal(y, prior=None, scale=None, mask=None, plate_size=None, subsample_size=None, factor=None, det=False):
        mu = numpyro.sample("mu", prior if prior is not None else dist.Normal(0.0, 1.0))
        if det:
            numpyro.deterministic("twice_mu", 2.0 * mu)
        if factor is not None:
            numpyro.factor("f", factor * mu)
        n = y.shape[0] if plate_size is None else plate_size
        with numpyro.plate("n", n, subsample_size=subsample_size) as idx:
            obs = y if subsample_size is None else y[idx]
            site = lambda: numpyro.sample("y", dist.Normal(mu, 1.0), obs=obs)  # noqa: E731
            if scale is not None:
                with handlers.scale(scale=scale):
                    site()
            elif mask is not None:
                with handlers.mask(mask=mask):
                    site()
            else:
                site()

    def discrete(y, enumerate_=False):
        p = numpyro.sample("p", dist.Beta(1.0, 1.0))
        with numpyro.plate("n", y.shape[0]):
            z = numpyro.sample("z", dist.Bernoulli(p), infer={"enumerate": "parallel"} if enumerate_ else {})
            numpyro.sample("y", dist.Normal(jnp.where(z == 1, 1.0, -1.0), 1.0), obs=y)

    def only_observed(y):
        with numpyro.plate("n", y.shape[0]):
            numpyro.sample("y", dist.Normal(0.0, 1.0), obs=y)

    def only_latent():
        numpyro.sample("mu", dist.Normal(0.0, 1.0))

    def counts(k, family):
        rate = numpyro.sample("rate", dist.Beta(2.0, 2.0))
        with numpyro.plate("n", k.shape[0]):
            numpyro.sample("k", dist.Poisson(rate) if family == "poisson" else dist.Bernoulli(rate), obs=k)

    y10 = np.linspace(-1.0, 1.0, 10)
    works = _target_works
    return {
        "an improper prior (ImproperUniform)": (
            normal,
            (Y4,),
            {"prior": dist.ImproperUniform(constraints.real, (), ())},
            ("'mu'",),
            works,
        ),
        "a vague prior Gamma(1e-3, 1e-3)": (_poisson_model, (K5,), {"a": 1e-3, "b": 1e-3}, ("'rate'",), works),
        "a prior Uniform(-inf, inf)": (normal, (Y4,), {"prior": dist.Uniform(-jnp.inf, jnp.inf)}, ("'mu'",), works),
        "a discrete site, not enumerated": (discrete, (Y4,), {}, ("'z'",), _discrete_z),
        "a discrete site, enumerated": (discrete, (Y4,), {"enumerate_": True}, ("'z'",), works),
        "a deterministic site": (normal, (Y4,), {"det": True}, (), works),
        "a mask handler": (normal, (Y4,), {"mask": np.array([True, False, True, True])}, (), works),
        "a scale handler (2)": (normal, (Y4,), {"scale": 2.0}, (), works),
        "a scale handler (-1)": (normal, (Y4,), {"scale": -1.0}, ("scale", "'y'"), None),
        "a scale handler (nan)": (normal, (Y4,), {"scale": float("nan")}, ("scale", "'y'"), None),
        "numpyro.factor (finite)": (normal, (Y4,), {"factor": 0.5}, (), works),
        "numpyro.factor (nan)": (normal, (Y4,), {"factor": float("nan")}, ("'f'",), None),
        "a plate smaller than the data": (normal, (Y4,), {"plate_size": 3}, ("'y'", "'n'"), None),
        "a plate larger than the data": (normal, (Y4,), {"plate_size": 6}, ("'y'", "'n'"), None),
        "a subsampled plate": (
            normal,
            (y10,),
            {"subsample_size": 4},
            (),
            lambda target: _target_works(target, {"n": jnp.arange(4)}),
        ),
        "plate subsample_size > size": (normal, (y10,), {"subsample_size": 20}, ("'n'", "subsample_size"), None),
        "NaN observed outside the first minibatch": (
            normal,
            (_with_nan(y10, 8),),
            {"subsample_size": 4},
            ("'y'",),
            None,
        ),
        "no latent site": (only_observed, (Y4,), {}, ("model", "latent"), None),
        "no observed site": (only_latent, (), {}, (), works),
        "observed Poisson 0.5": (counts, (np.array([1.0, 0.5, 2.0]),), {"family": "poisson"}, ("'k'",), None),
        "observed Bernoulli 2": (counts, (np.array([1.0, 2.0, 0.0]),), {"family": "bernoulli"}, ("'k'",), None),
        "observed Poisson float32 NumPy": (_poisson_model, (K5.astype(np.float32),), {}, (), works),
    }


def _with_nan(a, i):
    a = np.array(a, np.float64)
    a[i] = np.nan
    return a


def _joint(one_draw=False, scale=False):
    from tensorflow_probability.substrates import jax as tfp

    tfd = tfp.distributions
    if scale:
        return tfd.JointDistributionNamed(
            dict(mu=tfd.Normal(0.0, 1.0), s=tfd.HalfNormal(1.0), x=lambda s, mu: tfd.Sample(tfd.Normal(mu, s), 4))
        )
    if one_draw:  # log_prob per coordinate: no Independent around the observed part
        return tfd.JointDistributionNamed(dict(mu=tfd.Normal(0.0, 1.0), x=lambda mu: tfd.Normal(jnp.full(4, mu), 1.0)))
    return tfd.JointDistributionNamed(dict(mu=tfd.Normal(0.0, 1.0), x=lambda mu: tfd.Sample(tfd.Normal(mu, 1.0), 4)))


def _count_joint(family):
    from tensorflow_probability.substrates import jax as tfp

    tfd = tfp.distributions
    like = (
        (lambda r: tfd.Sample(tfd.Poisson(rate=r), 3))
        if family == "poisson"
        else (lambda r: tfd.Sample(tfd.Bernoulli(probs=r, dtype=jnp.float32), 3))
    )
    return tfd.JointDistributionNamed(dict(r=tfd.Beta(2.0, 2.0), k=like))


def frontend_cases():
    """(label, call, names, check): ``from_numpyro`` on odd models (improper and vague priors,
    discrete sites with and without enumeration, deterministic sites, the ``mask``, ``scale`` and
    subsampling handlers, ``numpyro.factor``, plates that do not match the data, no latent or no
    observed site, observed values outside the support); ``from_tfp`` without observed values, with
    observed values of another shape or outside the support, and a joint written for one draw;
    ``conjugate_sites``, ``complete_conditional``, ``conjugate_split``, ``predictive`` and
    ``to_arviz(target=...)`` where they must work and where they must refuse."""
    import vijax
    from vijax.inference import conjugate_split
    from vijax.interop import complete_conditional, conjugate_sites

    for what, (model, args, kwargs, names, check) in _numpyro_models().items():
        yield f"from_numpyro[{what}]", (lambda m=model, a=args, k=kwargs: vijax.from_numpyro(m, *a, **k)), names, check

    # a subsampled plate's indices as a Python list, and beyond the plate's size
    def subsampled(idx):
        def call():
            numpyro, dist = _np()

            def model(y):
                mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
                with numpyro.plate("n", y.shape[0], subsample_size=2) as i:
                    numpyro.sample("y", dist.Normal(mu, 1.0), obs=y[i])

            target = vijax.from_numpyro(model, np.linspace(-1.0, 1.0, 10))
            return target.log_density(target.init_params, {"n": idx})

        return call

    yield "from_numpyro: batch indices as a Python list", subsampled([0, 3]), ("'n'", "batch"), finite_result
    yield "from_numpyro: batch indices as a NumPy array", subsampled(np.array([0, 3])), ("'n'", "batch"), finite_result
    yield "from_numpyro: batch indices beyond the plate", subsampled(jnp.array([0, 30])), ("'n'", "batch"), None

    joint = _joint()
    y = jnp.asarray(Y4)
    yield "from_tfp[no observed]", lambda: vijax.from_tfp(joint), ("observed",), _target_works
    yield (
        "from_tfp[observed of another shape (3,)]",
        lambda: vijax.from_tfp(joint, observed={"x": y[:3]}),
        ("'x'",),
        None,
    )
    yield (
        "from_tfp[observed of another shape (4, 2)]",
        lambda: vijax.from_tfp(joint, observed={"x": jnp.stack([y, y], -1)}),
        ("'x'",),
        None,
    )
    yield (
        "from_tfp[a joint written for one draw]",
        lambda: vijax.from_tfp(_joint(True), observed={"x": y}),
        ("'x'", "joint_dist"),
        None,
    )
    yield (
        "from_tfp[observed Poisson 0.5]",
        lambda: vijax.from_tfp(_count_joint("poisson"), observed={"k": jnp.array([1.0, 0.5, 2.0])}),
        ("'k'",),
        None,
    )
    yield (
        "from_tfp[observed Bernoulli 2]",
        lambda: vijax.from_tfp(_count_joint("bernoulli"), observed={"k": jnp.array([1.0, 2.0, 0.0], jnp.float32)}),
        ("'k'",),
        None,
    )

    # conjugate_sites: it must find a Poisson rate conjugate under any Gamma prior and any float data
    def found_conjugate(site):
        return lambda report: None if report[site].conjugate else f"{site} not found conjugate: {report[site].reason}"

    yield (
        "conjugate_sites[float32 NumPy data]",
        lambda: conjugate_sites(_poisson_model, KEY, K5.astype(np.float32)),
        (),
        found_conjugate("rate"),
    )
    for a in (1e-3, 0.1):
        yield (
            f"conjugate_sites[a vague prior Gamma({a}, {a})]",
            lambda a=a: conjugate_sites(_poisson_model, KEY, K5, a=a, b=a),
            (),
            found_conjugate("rate"),
        )
    yield (
        "conjugate_sites[force a site the model lacks]",
        lambda: conjugate_sites(_poisson_model, KEY, K5, force=["nope"]),
        ("force",),
        None,
    )

    # complete_conditional: improper, inside jit, a float32 target
    def improper(k):
        numpyro, dist = _np()
        rate = numpyro.sample("rate", dist.Gamma(2.0, 1.0))
        numpyro.factor("push", 10.0 * rate)  # rate's coefficient 1 - 10 - N < 0: an improper conditional
        with numpyro.plate("data", k.shape[0]):
            numpyro.sample("k", dist.Poisson(rate), obs=k)

    yield (
        "complete_conditional[an improper conditional]",
        lambda: complete_conditional(improper, "rate", {}, K5[:2]),
        ("'rate'", "rate"),
        None,
    )

    def two_sites(k):
        numpyro, dist = _np()
        rate = numpyro.sample("rate", dist.Gamma(2.0, 1.0))
        scale = numpyro.sample("scale", dist.Gamma(2.0, 2.0))
        with numpyro.plate("data", k.shape[0]):
            numpyro.sample("k", dist.Poisson(rate * scale), obs=k)

    two = vijax.from_numpyro(two_sites, K5)
    yield (
        "complete_conditional[inside jax.jit]",
        lambda: jax.jit(lambda s: complete_conditional(two, "rate", {"scale": s}))(jnp.ones(2)),
        (),
        finite_result,
    )
    yield (
        "complete_conditional[float32 NumPy data]",
        lambda: complete_conditional(_poisson_model, "rate", {}, K5.astype(np.float32)),
        (),
        finite_result,
    )
    yield (
        "complete_conditional[draws of another shape]",
        lambda: complete_conditional(two, "rate", {"scale": jnp.ones((2, 3))}),
        ("draws",),
        None,
    )

    # conjugate_split: an all-conjugate model must work (nothing left for the rest: no rest)
    def split(model, *args):
        def call():
            target = vijax.from_numpyro(model, *args)
            alg = conjugate_split(target, conjugate_sites(target, KEY))
            state = alg.init(KEY)
            return alg.step(jax.random.PRNGKey(1), state, None)

        return call

    yield "conjugate_split[an all-conjugate model]", split(_poisson_model, K5), (), step_result()
    yield ("conjugate_split[float32 NumPy data]", split(two_sites, K5.astype(np.float32)), (), step_result())

    def squared(k):  # rate enters as rate ** 2: not conjugate to its Gamma prior here
        numpyro, dist = _np()
        rate = numpyro.sample("rate", dist.Gamma(2.0, 1.0))
        w = numpyro.sample("w", dist.Normal(0.0, 1.0))
        with numpyro.plate("data", k.shape[0]):
            numpyro.sample("k", dist.Poisson(rate**2 * jnp.exp(w)), obs=k)

    yield (
        "conjugate_split[the report of another model (rate conjugate there, not here)]",
        lambda: conjugate_split(vijax.from_numpyro(squared, K5), conjugate_sites(_poisson_model, KEY, K5)),
        ("conjugate",),
        None,
    )

    # predictive and to_arviz(target=...)
    def deterministic(y):
        numpyro, dist = _np()
        mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
        numpyro.deterministic("twice", 2.0 * mu)
        with numpyro.plate("n", y.shape[0]):
            numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)

    det = vijax.from_numpyro(deterministic, Y4)
    draws = {"mu": jnp.linspace(-1.0, 1.0, 6)}
    yield (
        "predictive[a deterministic site]",
        lambda: vijax.predictive(det, draws, KEY, sites=["twice"]),
        (),
        finite_result,
    )
    yield "predictive[key None]", lambda: vijax.predictive(det, draws, None), ("key",), None
    yield (
        "predictive[sites the model lacks]",
        lambda: vijax.predictive(det, draws, KEY, sites=["nope"]),
        ("sites",),
        None,
    )
    yield (
        "predictive[a TFP target, draws of unequal leading shapes]",
        lambda: vijax.predictive(
            vijax.from_tfp(_joint(scale=True), observed={"x": y}), {"mu": jnp.ones(6), "s": jnp.ones((6, 2))}, KEY
        ),
        ("draws",),
        None,
    )
    yield (
        "predictive[an enumerated site]",
        lambda: vijax.predictive(
            vijax.from_numpyro(_numpyro_models()["a discrete site, enumerated"][0], Y4, enumerate_=True),
            {"p": jnp.full((3,), 0.5)},
            KEY,
        ),
        (),
        finite_result,
    )

    def to_arviz(target, d, **kw):
        def call():
            out = vijax.to_arviz(d, kw.pop("key", KEY), target=target, **kw)
            return {g: out[g] for g in out.groups()} and None

        return call

    yield "to_arviz[target, a deterministic site]", to_arviz(det, draws), (), WORKS
    only_latent = vijax.from_numpyro(_numpyro_models()["no observed site"][0])
    yield "to_arviz[target without an observed site]", to_arviz(only_latent, draws), ("target",), None
    yield "to_arviz[target, key None]", to_arviz(det, draws, key=None), ("key",), None
    yield "to_arviz[target, names given]", to_arviz(det, draws, names=["m"]), ("names",), None
    yield "to_arviz[target, draws of a NaN]", to_arviz(det, {"mu": draws["mu"].at[2].set(jnp.nan)}), ("mu",), None
    yield (
        "to_arviz[target, families]",
        to_arviz(det, {"mu": expfam.Normal.from_mean_variance(0.0, 1.0)}),
        ("q_or_draws",),
        None,
    )
    yield ("to_arviz[target, draws of bbvi]", lambda: _arviz_of_fit(det), (), WORKS)


def _arviz_of_fit(target):
    import vijax
    from vijax.inference import bbvi, sample

    alg = bbvi(target, num_samples=2)
    state, _ = _steps(alg, None)
    vijax.to_arviz(sample(alg, KEY, state, 8), KEY, target=target)
    return None


# ------------------------------------------------------------------------------- components
@dataclasses.dataclass(frozen=True)
class _UserExponential(vm.Component):
    """A user's own component (docs/components.md): x_d ~ Exponential(lambda_d), lambda_d ~
    Gamma(a0, b0); ``hostile`` makes it wrong in one way: ``"nan stats"`` (NaN statistics),
    ``"one array"`` (statistics not a tuple like the prior's natural parameters), ``"array prior"``
    (a prior that is an array, not a family)."""

    dim: int
    a0: float = 2.0
    b0: float = 1.0
    hostile: str = ""

    def prior(self, num):
        full = lambda v: jnp.full((num, self.dim), v)  # noqa: E731
        if self.hostile == "array prior":
            return full(self.a0)
        return expfam.Gamma.from_shape_rate(full(self.a0), full(self.b0))

    def suff_stats(self, x):
        if self.hostile == "one array":
            return -x
        if self.hostile == "nan stats":
            return jnp.full_like(x, jnp.nan), -x
        return jnp.ones_like(x), -x


XPOS = jnp.abs(X2) + 0.5


def component_cases():
    """(label, call, names, check): a user's ``Component`` that is wrong (NaN statistics, a Gamma
    prior of shape -1, statistics of another structure, a prior that is an array) fitted in a
    ``Mixture`` and an ``HMM``; data of 1e20 in a ``Mixture`` and an ``HMM``; GMM data of one point
    or a constant column; an LDA batch of empty documents and LDA started at ``init_scale`` 1.5e35;
    a VAE whose encoder holds a NaN; CAVI's state stepped on another batch; a corpus whose files are
    empty; ``data_parallel`` given a device name."""
    from vijax.inference import aevb, cavi, data_parallel, svi

    for what, kw in (
        ("NaN statistics", {"hostile": "nan stats"}),
        ("a Gamma prior of shape -1", {"a0": -1.0}),
        ("statistics not a tuple", {"hostile": "one array"}),
        ("prior() an array", {"hostile": "array prior"}),
    ):
        names = ("suff_stats", "prior", "a0", "component", "emissions")
        yield (
            f"Mixture(user Component: {what})",
            lambda kw=kw: _steps(cavi(vm.Mixture(_UserExponential(2, **kw), vm.DirichletWeights(2))), XPOS),
            names,
            step_result(),
        )
        yield (
            f"HMM(user Component: {what})",
            lambda kw=kw: _steps(cavi(vm.HMM(2, _UserExponential(2, **kw))), XPOS[None]),
            names,
            step_result(),
        )
    big = jnp.asarray(X2) * 1e20
    names = ("x", "obs", "batch")
    yield (
        "Mixture(NormalGammaDiagonal)[data 1e20]",
        lambda: _steps(cavi(vm.Mixture(vm.NormalGammaDiagonal(2), vm.DirichletWeights(2))), big),
        names,
        step_result(),
    )
    yield (
        "Mixture(GammaPoisson)[counts 1e20]",
        lambda: _steps(cavi(vm.Mixture(vm.GammaPoisson(2), vm.DirichletWeights(2))), jnp.round(jnp.abs(big))),
        names,
        step_result(),
    )
    yield (
        "HMM(NormalGammaDiagonal)[data 1e20]",
        lambda: _steps(cavi(vm.HMM(2, vm.NormalGammaDiagonal(2))), big[None]),
        names,
        step_result(),
    )
    yield (
        "HMM(GammaPoisson)[counts 1e20]",
        lambda: _steps(cavi(vm.HMM(2, vm.GammaPoisson(2))), jnp.round(jnp.abs(big))[None]),
        names,
        step_result(),
    )
    for model in ("DiagonalGMM", "FullGMM"):
        make = getattr(vm, model)
        yield (
            f"{model}[one data point]",
            lambda make=make: _steps(cavi(make(2, 2)), X2[:1]),
            ("x", "num_components"),
            step_result(),
        )
        yield (
            f"{model}[a constant column]",
            lambda make=make: _steps(cavi(make(2, 2)), X2.at[:, 1].set(0.3)),
            ("x",),
            step_result(),
        )
    yield (
        "cavi(DiagonalGMM) stepped on a batch of other points",
        lambda: _steps(cavi(vm.DiagonalGMM(2, 2)), X2[:3] + 0.1, init_batch=X2),
        ("batch", "state"),
        step_result(),
    )
    yield (
        "cavi(DiagonalGMM) stepped on a batch of another width",
        lambda: _steps(cavi(vm.DiagonalGMM(2, 2)), jnp.concatenate([X2, X2[:, :1]], 1), init_batch=X2),
        ("batch", "x"),
        None,
    )
    empty = BOW._replace(counts=jnp.zeros_like(BOW.counts))
    yield (
        "LDA svi[a batch of empty documents]",
        lambda: _steps(svi(vm.LDA(2, 6), num_data=3, schedule=0.5), empty),
        ("batch", "count"),
        step_result(discrete=True),
    )
    yield (
        "LDA cavi[a batch of empty documents]",
        lambda: _steps(cavi(vm.LDA(2, 6)), empty),
        ("batch", "count"),
        step_result(discrete=True),
    )
    yield (
        "LDA(init_scale=1.5e35) svi step",
        lambda: _steps(svi(vm.LDA(2, 6, init_scale=1.5e35), num_data=3, schedule=0.5), BOW),
        ("init_scale",),
        step_result(discrete=True),
    )
    nan_encoder = vm.mlp(jax.random.PRNGKey(1), (4, 8, 4))
    nan_encoder = vm.Network(nan_encoder.apply, _set(nan_encoder.params, np.nan))
    yield (
        "VAE[an encoder holding a NaN]",
        lambda: _steps(
            aevb(vm.VAE(nan_encoder, vm.mlp(jax.random.PRNGKey(2), (2, 8, 4)), 2, 4), num_data=4, schedule=0.01),
            Y01[:, :2].repeat(2, 1)[:, :4],
        ),
        ("encoder",),
        None,
    )
    yield "data_parallel[devices=['cpu']]", lambda: data_parallel(vm.LDA(2, 6), devices=["cpu"]), ("devices",), None
    yield "data_parallel[devices=[]]", lambda: data_parallel(vm.LDA(2, 6), devices=[]), ("devices",), None


def corpus_cases(folder: str):
    """(label, call, names, check): an experiment whose corpus files are all empty."""
    from vijax.run import build_experiment

    import_builtin_experiments()
    path, vocab = os.path.join(folder, "empty.ldac"), os.path.join(folder, "empty_vocab.txt")
    for p in (path, vocab):
        open(p, "wb").close()
    yield (
        "lda_corpus[every file empty]",
        lambda: build_experiment(load_config({"experiment": "lda_corpus", "data": {"path": path, "vocab": vocab}})),
        ("data.path", "data.vocab"),
        None,
    )
    yield (
        "lda_corpus[an empty corpus, no vocabulary]",
        lambda: build_experiment(load_config({"experiment": "lda_corpus", "data": {"path": path, "vocab": ""}})),
        ("data.path",),
        None,
    )


# -------------------------------------------------------------------------------------- fit
def _fit_models():
    numpyro, dist = _np()

    def counts(exposure, k):
        rate = numpyro.sample("rate", dist.Gamma(2.0, 1.0))
        with numpyro.plate("data", exposure.shape[0]):
            numpyro.sample("k", dist.Poisson(rate * exposure), obs=k)

    def correlated(y):  # a site whose transform makes arrays of the default dtype (CorrCholesky's zeros)
        numpyro.sample(
            "y", dist.MultivariateNormal(jnp.zeros(2), scale_tril=numpyro.sample("L", dist.LKJCholesky(2))), obs=y
        )

    return counts, correlated


def _plan_route(route: str):
    return lambda plan: None if plan.route == route else f"planned route {plan.route!r}, not {route!r}"


def _density_mean(post) -> str | None:
    """None where a log-density fitted with its batch (N(batch, 1)) has its mean at the batch's 1.5."""
    mean = float(post.summary(num_samples=2000)["z"]["mean"])
    return None if abs(mean - 1.5) < 0.3 else f"the fit's mean {mean:.3g}, not 1.5: the batch was not read"


def fit_cases():
    """(label, call, names, check): ``vijax.fit`` and ``plan_fit`` as a user calls them (a NumPyro model, a TFP
    joint, a log-density, a ``vijax.models`` model) with settings out of range, data that are not finite or do not
    fit the model, options the route does not read, a continuation of other data; a posterior's methods with a key
    of None, no draws, an unknown site and new arguments that do not fit; and where they must work (a site whose
    transform makes default-dtype arrays, a log-density's batch)."""
    import vijax
    from vijax.run import plan_fit

    counts, correlated = _fit_models()
    e, k = jnp.array([1.0, 0.5, 2.0, 1.5, 1.0]), jnp.asarray(K5)
    quiet = dict(progress=False, max_steps=10, eval_every=10)

    def fit(*args, **kwargs):
        return lambda: vijax.fit(*args, **{**quiet, **kwargs})

    for setting, value in (
        ("route", "nuts"),
        ("tol", 0.0),
        ("max_steps", 0),
        ("eval_every", -1),
        ("patience", 0),
        ("seed", -1),
        ("init", "state"),
        ("learning_rate", 0.1),  # every site in closed form: no step size read
        ("family", "meanfield"),
    ):
        yield f"fit[{setting}={value!r}]", fit(counts, e, k, **{setting: value}), (setting,), None
    yield "fit[model 42]", fit(42, e, k), ("model",), None
    yield "fit[an argument the model does not take]", fit(counts, e, k, bogus=1), ("model",), None
    yield "fit[NaN counts]", fit(counts, e, k.at[2].set(jnp.nan)), ("'k'",), None
    yield "fit[a NaN exposure]", fit(counts, e.at[1].set(jnp.nan), k), ("exposure",), None
    yield "fit[counts as a Python list]", fit(counts, e, K5.tolist()), ("k",), None
    yield "fit[counts of another length]", fit(counts, e[:3], k), ("'k'",), None
    yield "fit[a TFP joint, observed an array]", fit(_joint(), observed=jnp.asarray(Y4)), ("observed",), None

    def log_density(params, batch):
        return -0.5 * jnp.sum((params["z"] - batch) ** 2)

    z = {"z": jnp.zeros(())}
    yield "fit[a log-density, two arguments]", fit(log_density, 1.5, 2.0, params=z), ("args",), None
    yield "fit[a log-density, NaN params]", fit(log_density, 1.5, params={"z": jnp.nan}), ("params",), None
    yield "fit[a log-density, int params]", fit(log_density, 1.5, params={"z": 0}), ("params",), None
    density = dict(params=z, max_steps=600, eval_every=100, tol=None)
    yield "fit[a log-density with its batch]", fit(log_density, jnp.float32(1.5), **density), (), _density_mean
    gmm = vm.UnivariateGMM(num_components=2)
    yield "fit[a vijax model, NaN data]", fit(gmm, jnp.asarray(X1).at[0].set(jnp.nan)), ("x",), None
    yield "fit[a vijax model, batch_size 0]", fit(gmm, jnp.asarray(X1), batch_size=0), ("batch_size",), None
    y2 = jnp.asarray(np.random.default_rng(1).normal(size=(20, 2)), jnp.float32)
    yield "plan_fit[an LKJCholesky site]", lambda: plan_fit(correlated, y2), (), _plan_route("bbvi")

    post = vijax.fit(counts, e, k, **quiet)
    yield "fit[init of other data]", fit(counts, e, k + 1.0, init=post), ("init",), None
    yield "fit[init with another route]", fit(counts, e, k, init=post, route="bbvi"), ("route",), None
    yield "Posterior.sample[key None]", lambda: post.sample(None, 5), ("key",), None
    yield "Posterior.sample[0 draws]", lambda: post.sample(KEY, 0), ("num_samples",), None
    yield "Posterior.predictive[an unknown site]", lambda: post.predictive(KEY, 5, sites=["x"]), ("sites",), None
    yield "Posterior.log_likelihood[3 exposures]", lambda: post.log_likelihood(KEY, 5, e[:3]), ("args",), None
    yield "Posterior.psis[1 draw]", lambda: post.psis(KEY, num_samples=1), ("num_samples",), None


# ------------------------------------------------------------------------------- combinators
def combinator_cases():
    """(label, call, names, check): ``hyperparameter_grid`` with values outside a model's domain
    and extreme ones, ``factory_grid`` over an int argument, ``replace_elbo`` with an ``elbo_fn``
    that is not one or an algorithm whose info has no ELBO field, ``lock_step`` with a name that is
    not a string, ``restarts`` with none."""
    from vijax.inference import bbvi, factory_grid, hyperparameter_grid, lock_step, replace_elbo, restarts, svi

    model = vm.LDA(2, 6)
    lda = svi(model, num_data=3, schedule=0.5)
    for what, values, check in (  # a value LDA refuses must be refused; an extreme valid one, fitted
        ("alpha=[-1, 0.5]", {"alpha": [-1.0, 0.5]}, None),
        ("alpha=[0, 0.5]", {"alpha": [0.0, 0.5]}, None),
        ("eta=[1e30, 0.5]", {"eta": [1e30, 0.5]}, step_result(discrete=True)),
        ("alpha=[1e-30, 0.5]", {"alpha": [1e-30, 0.5]}, step_result(discrete=True)),
    ):
        yield (
            f"hyperparameter_grid(LDA svi, {what})",
            lambda values=values: _steps(hyperparameter_grid(lda, model, **values), BOW),
            tuple(values),
            check,
        )
    glm = lambda **kw: bbvi(_glm_density, init_params=jnp.zeros(2), num_data=4, **kw)  # noqa: E731
    yield (
        "factory_grid(bbvi, num_samples=[1, 2])",
        lambda: _steps(factory_grid(lambda num_samples: glm(num_samples=num_samples), num_samples=[1, 2]), XY),
        ("num_samples",),
        None,
    )
    yield (
        "factory_grid(bbvi, init_scale=[0.1, 1.0])",
        lambda: _steps(factory_grid(lambda init_scale: glm(init_scale=init_scale), init_scale=[0.1, 1.0]), XY),
        ("init_scale",),  # a refusal naming it, or the grid fitted
        step_result(),
    )
    yield (
        "factory_grid(bbvi, init_scale=[-1, 1.0])",
        lambda: _steps(factory_grid(lambda init_scale: glm(init_scale=init_scale), init_scale=[-1.0, 1.0]), XY),
        ("init_scale",),
        None,
    )
    gmm = make_algorithm("cavi", vm.UnivariateGMM(2))
    for what, fn in (
        ("not callable", 3),
        ("None", None),
        ("vector-valued", lambda s: jnp.ones(3)),
        ("returning a string", lambda s: "elbo"),
    ):
        yield f"replace_elbo[elbo_fn {what}]", lambda fn=fn: _steps(replace_elbo(gmm, fn), X1), ("elbo_fn",), None
    both = lock_step({"a": gmm, "b": gmm})
    yield (
        "replace_elbo[a lock_step algorithm]",
        lambda: _steps(replace_elbo(both, lambda s: jnp.zeros(())), X1),
        ("alg",),
        step_result(),
    )
    yield "replace_elbo[alg None]", lambda: replace_elbo(None, lambda s: 0.0), ("alg",), None
    yield "lock_step[{1: alg}]", lambda: _steps(lock_step({1: gmm}), X1, jit=True), ("algorithms",), step_result()
    yield (
        "lock_step[info_fields a string]",
        lambda: _steps(lock_step({"a": gmm}, info_fields="elbo"), X1),
        ("info_fields",),
        lambda out: None if "elbo" in out[1]["a"] else f"kept info fields {sorted(out[1]['a'])} for info_fields='elbo'",
    )
    yield "restarts[num_restarts=0]", lambda: restarts(gmm, 0), ("num_restarts",), None


# ------------------------------------------------------------------------------- main
def main(argv=None) -> dict:
    global TIMEOUT_S
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "out", nargs="?", default=os.path.join(os.path.dirname(__file__), "results", "probe_hostile.json")
    )
    parser.add_argument("--only", nargs="+", choices=CATEGORIES, default=CATEGORIES, help="probe these categories only")
    parser.add_argument(
        "--timeout", type=int, default=TIMEOUT_S, help="seconds an input may take before it counts as obscure"
    )
    parser.add_argument("--verbose", action="store_true", help="print each input's outcome as it is probed")
    add_device_argument(parser)
    args = parser.parse_args(argv)
    TIMEOUT_S = args.timeout
    use_device(args.device)
    missing = sorted(set(ALGORITHMS) - set(ALGORITHM_CASES))
    if missing:
        raise SystemExit(f"add the registered algorithm(s) {missing} to ALGORITHM_CASES in {__file__}")
    tally: dict = {}
    rows = []

    def record(category, label, outcome, detail=""):
        tally.setdefault(category, dict.fromkeys(OUTCOMES, 0))[outcome] += 1
        rows.append({"category": category, "input": label, "outcome": outcome, "detail": detail})
        if args.verbose:
            print(f"  {outcome:8s} {category:12s} {label}: {detail}", flush=True)

    def probe(category, label, call, names, accepted_of=None, check=None):
        record(category, label, *classify_detail(call, names, accepted_of, check))

    only = set(args.only)
    if "constructor" in only:
        for label, call, names in constructor_cases():
            probe("constructor", label, call, names)
    if "algorithm" in only:
        for label, call, names in algorithm_cases():
            probe("algorithm", label, call, names, accepted_of=lambda out: out[1])
    if "step" in only:
        for label, call, names in step_cases():
            probe("step", label, call, names, accepted_of=lambda out: out[1])
    with tempfile.TemporaryDirectory() as folder:
        if "reader" in only:
            for label, call, names in reader_cases(folder):
                outcome, detail = classify_detail(call, names)
                reader, what = label[:-1].split("[", 1)
                if outcome == "silent" and _is_silent_ok(reader, what):
                    continue  # a valid input for that reader
                record("reader", label, outcome, detail)
        if "config" in only:
            for label, call, names in config_cases():
                probe("config", label, call, names)
        if "data" in only:
            for label, call, names, check in corpus_cases(folder):
                probe("data", label, call, names, check=check)
    if "interop" in only:
        for label, call, names in interop_cases():
            probe("interop", label, call, names)
    if "evaluation" in only:
        for label, call, names, returns in evaluation_cases():
            probe("evaluation", label, call, names, accepted_of=(lambda out: out) if returns else None)
    for category, cases in (
        ("frontend", frontend_cases),
        ("component", component_cases),
        ("combinator", combinator_cases),
        ("fit", fit_cases),
    ):
        if category in only:
            for label, call, names, check in cases():
                probe(category, label, call, names, check=check)

    total = {k: sum(t[k] for t in tally.values()) for k in OUTCOMES}
    n = sum(total.values())
    print(f"{n} hostile inputs: " + ", ".join(f"{k} {v}" for k, v in total.items()))
    print(f"{'category':12s} " + " ".join(f"{k:>8s}" for k in OUTCOMES))
    for category, t in tally.items():
        print(f"{category:12s} " + " ".join(f"{t[k]:8d}" for k in OUTCOMES))
    bad = [r for r in rows if r["outcome"] in ("obscure", "silent")]
    for r in bad:
        print(f"  {r['outcome']:8s} {r['category']:12s} {r['input']}: {r['detail']}")
    res = {"total": total, "by_category": tally, "rows": rows}
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    if bad:
        raise SystemExit(f"{len(bad)} of {n} hostile inputs are obscure or silent (listed above)")
    return res


if __name__ == "__main__":
    main()
