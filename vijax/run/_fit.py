"""``fit``: one call from a model to its posterior. It reads the model's structure, chooses a route per site, runs
the route's step with the one runner (``vijax.run.run``) and returns a :class:`Posterior`.

**Routes.** For a NumPyro model or a TFP joint (through its target), by ``route="auto"``:

1. ``"conjugate"`` where ``vijax.conjugate_sites`` finds a conditionally conjugate site: those sites in closed form
   (a CAVI sweep at full batch; a Robbins–Monro natural-gradient step where a plate is subsampled, Hoffman et al.
   2013, eq. 24), the rest by ``ngvi`` where each rest
   site's support has a family, else by ``bbvi`` (``conjugate_split``);
2. ``"ngvi"`` where every site's support has an exponential family (``auto_family``);
3. ``"bbvi"`` otherwise: a Gaussian on the unconstrained space, full-rank up to ``FULLRANK_MAX_SIZE`` coordinates,
   mean-field above.

**Subsampled plates.** Their minibatches come in passes over the data, each in a fresh random order
(``vijax.data.epoch_batches``), and q is the average of the iterates (``vijax.inference.averaged``; Polyak and
Juditsky 1992), on every route but ``"laplace"`` and ``"map"``: a minibatch's noise cancels over a pass in the
average, where the last iterate keeps a noise floor set by its step size.

A model with a continuous latent site inside a subsampled plate (local: one value per data point) takes
``"amortized"``, and no other route: ``vijax.inference.amortized``, an MLP encoder of each point's observed values for
the local sites and a Gaussian for the global ones, as ``"bbvi"`` chooses it (Kingma and Welling 2014).

A model with a discrete latent site not summed out (``Target.discrete``: Bernoulli, Categorical or Poisson support)
takes ``"score"``, and no other route: ``vijax.inference.discrete_bbvi``, Rao-Blackwellized score-function gradients
for the discrete sites' q (Ranganath et al. 2014, §3) and a Gaussian for the continuous ones, as ``"bbvi"`` chooses it.

Asked for: ``"flow"``, ``bbvi`` with ``auto_flow``'s flowjax flow (Monte Carlo entropy); ``"laplace"`` and ``"map"``,
``vijax.inference.laplace`` and ``map_estimate``. A ``vijax.models`` model takes its own CAVI (full batch) or SVI
(``batch_size``); a log-density with ``params`` (and its batch, ``fit(log_density, batch, params=...)``, passed whole to
each step), ``bbvi``. A forced route that a site cannot take is refused, naming the site.

**Stopping** (Kucukelbir et al. 2017, "Automatic Differentiation Variational Inference", §3.3, Stan's
``tol_rel_obj``): every ``eval_every`` steps the mean ELBO over those steps, L_c; the fit stops once
|L_c − L_{c−1}| / |L_c| < ``tol`` at ``patience`` boundaries in a row (the runner's rule; Stan stops when the mean or
the median of these changes is below ``tol``), or after ``max_steps``. Where every site is in closed form at full
batch, each step is a CAVI sweep (Blei, Kucukelbir and McAuliffe 2017, §2.4), near its fixed point within a few: the
rule is checked every ``SWEEP_EVAL_EVERY`` sweeps, at most ``SWEEP_MAX_STEPS``. Where a plate is subsampled, the rule
may stop the fit only after ``MIN_PASSES`` passes over the data (by default at most twice that, or ``MAX_STEPS``): the
ELBO of the iterates levels off within a pass, while the error of their average, in posterior sds, falls as one over
the square root of the passes made, whatever N and M.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import io
import math
import pickle
import types
from typing import Any, Callable, Mapping, NamedTuple, Optional, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from vijax import expfam
from vijax._validate import ArgumentError, check_bool, check_choice, check_float_tree, check_int, check_key
from vijax._validate import check_scalar, implements
from vijax.inference import amortized, auto_flow, bbvi, cavi, conjugate_split, discrete_bbvi, laplace, log_weights
from vijax.inference import empirical_bayes, fitted_params, map_estimate, ngvi, sample
from vijax.data import epoch_batches
from vijax.inference import ESTIMATORS, averaged, schedules, svi
from vijax.interop import Target, conjugate_sites, from_numpyro, from_tfp, log_likelihood, predictive
from vijax.models import ConditionallyConjugateModel
from vijax.metrics import PSIS_MIN_DRAWS, psis, to_arviz
from vijax.types import Array, PRNGKey, PyTree
from ._runner import run

ROUTES = ("auto", "conjugate", "ngvi", "bbvi", "flow", "laplace", "map", "amortized", "score")
POINT_ROUTES = ("laplace", "map")  # the routes that maximize the model's numpyro.param sites with their point
FULLRANK_MAX_SIZE = 100  # the most unconstrained coordinates whose Gaussian is full-rank by default
MAX_STEPS = 10_000  # the default most steps (Stan's ADVI: 10,000 iterations)
SWEEP_MAX_STEPS = 200  # ... where every site is updated in closed form at full batch (CAVI sweeps)
EVAL_EVERY = 100  # the default steps between two checks of the stopping rule
SWEEP_EVAL_EVERY = 10  # ... between two checks where the steps are CAVI sweeps (each one near the fixed point)
MIN_PASSES = 20  # passes over the data before the rule may stop a subsampled fit (its average: error ~ passes^-1/2)


class PlanRow(NamedTuple):
    """One latent site: its name, q's family, the route it takes and why."""

    site: str
    family: str
    route: str
    reason: str


class Plan(NamedTuple):
    """The route of a fit (``"conjugate"``, ``"ngvi"``, ``"bbvi"``, ``"flow"``, ``"amortized"``, ``"score"``, ``"cavi"``,
    ``"svi"``, ...) and one :class:`PlanRow` per site; ``str(plan)`` is a table."""

    route: str
    rows: tuple

    def __str__(self) -> str:
        head = ("site", "family", "route", "why")
        rows = [head] + [tuple(r) for r in self.rows]
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        lines = [f"vijax.fit: route {self.route!r}"]
        lines += ["  " + "  ".join(r[i].ljust(widths[i]) for i in range(3)) + "  " + r[3] for r in rows]
        return "\n".join(lines)


class Summary(dict):
    """site -> ``{"mean", "sd", "q5", "q50", "q95"}`` (arrays of the site's shape); ``str(summary)`` is a table with
    one row per element (``theta[3]``)."""

    def __str__(self) -> str:
        lines = [f"{'':<16}{'mean':>11}{'sd':>11}{'5%':>11}{'50%':>11}{'95%':>11}"]
        for name, s in self.items():
            mean = np.asarray(s["mean"])
            for idx in np.ndindex(mean.shape):
                label = name + (f"[{', '.join(map(str, idx))}]" if idx else "")
                vals = [np.asarray(s[k])[idx] for k in ("mean", "sd", "q5", "q50", "q95")]
                lines.append(f"{label:<16}" + "".join(f"{float(v):>11.4g}" for v in vals))
        return "\n".join(lines)


class _Fitted:
    """A posterior's static part: the algorithm, the target (or model, or log-density), its full-batch data and the
    plan, built by ``_build`` from ``fit``'s arguments ``given``. Two are equal when ``fit`` was given the same model
    (the same function object), data of the same dtypes, shapes and contents, route and settings (so that posteriors of
    several seeds stack, loaded ones too). It pickles as ``given``: loading calls ``_build`` again (a trace, no fit)."""

    def __init__(self, kind: str, alg, target, model, data, plan: Plan, given: tuple):
        self.kind, self.alg, self.target, self.model, self.data, self.plan = kind, alg, target, model, data, plan
        self.given = given  # (model, args, kwargs, observed, params, batch_size, route, options, key)
        self.programs = {}  # the runner's compiled chunk, kept for continuations (``run``'s ``programs``)

    @functools.cached_property
    def _batches(self) -> tuple[Callable, Optional[int]]:
        if self.kind == "model":
            return _model_batches(self.data, self.given[5], self.given[-1])
        return _batch_fn(self.target, self.data, self.given[-1])

    @property
    def batch_fn(self) -> Callable:
        """The fit's ``(key, t) -> batch``: one function object, so that a continuation's chunk is the kept one."""
        return self._batches[0]

    @property
    def pass_steps(self) -> Optional[int]:
        """The steps of a pass over the data where the minibatches come in passes and q is their iterates' average (a
        subsampled plate, a ``vijax.models`` model's ``batch_size``: ``epoch_batches``' own); None: full batches."""
        return None if self.plan.route in POINT_ROUTES else self._batches[1]

    @functools.cached_property
    def identity(self) -> tuple:
        model, args, kwargs, observed, params, batch_size, route, options, _ = self.given
        settings = (route, batch_size, _digest(params), tuple((k, _digest(v)) for k, v in options.items()))
        return self.kind, self.plan, _fingerprint(model, args, kwargs, observed), settings

    def __eq__(self, other):
        return isinstance(other, _Fitted) and self.identity == other.identity

    def __hash__(self):
        return hash(self.identity)

    def __copy__(self):
        return self  # immutable

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):
        model, args, kwargs, observed, params, *_, options, _ = self.given
        model = _fresh(model, observed)
        parts = [("model", model), *((f"argument {i}", a) for i, a in enumerate(args))]
        parts += [(f"argument {k!r}", v) for k, v in kwargs.items()] + [("observed", observed), ("params", params)]
        for name, value in parts + list(options.items()):
            try:
                _Pickler(digest=False).dump(value)
            except Exception as e:
                raise TypeError(
                    f"Posterior: the {name} cannot be pickled ({e}); a Posterior pickles fit's arguments, to build the "
                    "fit again when loaded: define functions at module level, not as lambdas or closures (a TFP joint: "
                    "a JointDistributionCoroutine)"
                ) from e
        return _build, (model, *self.given[1:])


class _Pickler(pickle.Pickler):
    """Pickles to memory with each array as its dtype, shape and (``digest``) content hash; ``digest``: each function
    as its identity too (a function defined again under its name is another model), and none local."""

    def __init__(self, digest: bool):
        self.out, self.digest = io.BytesIO(), digest
        super().__init__(self.out, protocol=pickle.HIGHEST_PROTOCOL)

    def persistent_id(self, obj):
        if isinstance(obj, (np.ndarray, jax.Array)):
            if not self.digest:
                return "array"
            x = np.ascontiguousarray(obj)
            return str(x.dtype), x.shape, hashlib.blake2b(x.tobytes()).hexdigest()
        if self.digest and isinstance(obj, types.FunctionType):
            if "<" in obj.__qualname__:  # a lambda or a closure: the identity of what holds it (``_digest``)
                raise pickle.PicklingError(obj.__qualname__)
            return id(obj)
        return None


def _digest(obj, fresh: Any = None) -> Any:
    """A hash of ``obj``'s value (of ``fresh``, its fresh copy, where given) by ``_Pickler``, or its identity where it
    does not pickle."""
    pickler = _Pickler(digest=True)
    try:
        pickler.dump(obj if fresh is None else fresh)
    except Exception:
        return "id", id(obj)
    return hashlib.blake2b(pickler.out.getvalue()).hexdigest()


def _fresh(model, observed):
    """``model``, or a TFP joint built again from its parameters (a used one holds TFP's caches, which do not
    pickle)."""
    return type(model)(**model.parameters) if observed is not None and hasattr(model, "experimental_pin") else model


def _fingerprint(model, args, kwargs, observed) -> tuple:
    """The model and data ``fit`` was given, by ``_digest``: ``init=`` continues a posterior of equal ones."""
    return (
        _digest(model, _fresh(model, observed)),
        tuple(map(_digest, args)),
        tuple((k, _digest(v)) for k, v in sorted(kwargs.items())),
        _digest(observed),
    )


class _WrapsAlgorithm(Protocol):
    """An algorithm's extras around another's (``empirical_bayes``, ``averaged``): the inner algorithm's state."""

    alg: Any

    def inner_state(self, state: PyTree) -> PyTree: ...


@functools.partial(
    jax.tree_util.register_dataclass,
    data_fields=["state", "elbo", "num_steps", "converged", "key"],
    meta_fields=["fitted"],
)
@dataclasses.dataclass(frozen=True)
class Posterior:
    """What :func:`fit` returns: a pytree (jit, vmap, save) whose leaves are the fitted state, the ELBO trace, the
    number of steps, whether the stopping rule met and the fit's key; its static part, the algorithm and the target.

    Methods that draw take a key; ``summary``, ``to_arviz`` and ``psis`` default to one derived from the fit's key.

    It pickles where what ``fit`` was given does: a model or log-density defined at module level (pickled by name,
    so the loading process imports it), data by value; a TFP joint as a ``JointDistributionCoroutine`` of such a
    function. Loading builds the fit's algorithm again from them (a trace, no fitting): the loaded posterior gives the
    same numbers for the same key, and ``fit(model, data, init=loaded)`` continues it, ``init`` taking the same model
    and data of equal dtypes, shapes and values. A lambda or a closure raises a TypeError naming what does not pickle.

    Attributes:
      state: the fitted state, to continue from (``fit(..., init=posterior)``).
      elbo: (num_steps,) the ELBO estimate at each step.
      num_steps: int32 steps taken (over continuations).
      converged: whether the stopping rule stopped the fit.
      key: the fit's PRNG key.
    """

    state: PyTree
    elbo: Array
    num_steps: Array
    converged: Array
    key: Array
    fitted: _Fitted

    @property
    def plan(self) -> Plan:
        """The routes taken, per site."""
        return self.fitted.plan

    @property
    def target(self) -> Optional[Target]:
        """The model's target (None for a ``vijax.models`` model or a log-density)."""
        return self.fitted.target

    @property
    def params(self) -> dict:
        """The model's ``numpyro.param`` sites at their fitted values (constrained), by name; {} where it has none."""
        target = self.fitted.target
        return fitted_params(self.fitted.alg, self.state) if target is not None and target.params else {}

    def _with_params(self, batch):
        """``batch`` with the fitted params' values under their names (the model's batch at the fit)."""
        params = self.params
        return {**(batch or {}), **params} if params else batch

    def _q_state(self):
        """The state of q's algorithm (inside ``averaged``'s, at the averaged iterates, and ``empirical_bayes``'s,
        where the model's params are fitted by it)."""
        extras, state = self.fitted.alg.extras, self.state
        while implements(extras, _WrapsAlgorithm):
            extras, state = extras.alg.extras, extras.inner_state(state)
        return state

    def _key(self, key: Optional[PRNGKey], tag: int) -> PRNGKey:
        return jax.random.fold_in(self.key, tag) if key is None else key

    def sample(self, key: PRNGKey, num_samples: int) -> PyTree:
        """``num_samples`` draws of q on a leading axis: constrained values by site name (a model: q's families'
        draws, structured like its ``prior()``). Route ``"amortized"``: the global sites only; a local site has one
        q per data point (:meth:`local_q`)."""
        check_key("key", key)
        num_samples = check_int("num_samples", num_samples)
        if self.fitted.kind == "model":
            return expfam.reparam_sample(self.state.q_global, key, num_samples)
        return sample(self.fitted.alg, key, self.state, num_samples)

    def local_q(self, batch: Mapping) -> dict:
        """Route ``"amortized"``: site -> (loc, scale), q(z_i | x_i) of each local site on its unconstrained space
        at the points of ``batch`` (``{plate: indices}``, the model's subsample size of them)."""
        if self.fitted.plan.route != "amortized":
            raise ArgumentError("self", f"local_q: a fit of route 'amortized', not {self.fitted.plan.route!r}")
        return self.fitted.alg.extras.local_q(self.state, batch)

    def _target(self, what: str) -> Target:
        if self.fitted.target is None:
            raise ArgumentError("self", f"{what} needs a NumPyro model or a TFP joint; this fit has no target")
        if self.fitted.plan.route == "amortized":
            raise ArgumentError(
                "self", f"{what}: not offered for route 'amortized' (its local sites have no draws: local_q)"
            )
        return self.fitted.target

    def _batch(self, args: tuple, kwargs: dict):
        """The target's batch of new arguments: ``args`` by the model's argument order, ``kwargs`` by name; none: the
        fit's data, each subsampled plate at all its points (``_whole_data``)."""
        target = self._target("new arguments")
        if not args and not kwargs:
            return self._with_params(_whole_data(target))
        keys = target.batch_keys or ()
        if len(args) > len(keys):
            raise ArgumentError("args", f"args: {len(args)} given; the model takes {list(keys)}")
        for plate in target.plates:
            if plate not in kwargs:
                raise ArgumentError(
                    plate,
                    f"{plate}: the model subsamples plate {plate!r}; with new arguments, give the indices of the "
                    f"points to draw at as {plate}= (jnp.arange(n) for all n of them)",
                )
        return self._with_params({**dict(zip(keys, args)), **kwargs})

    def _on_batch(self, what: str, fn: Callable, args: tuple, kwargs: dict):
        """``fn(batch)`` of the new arguments; where the model fails on them (shapes that do not fit: JAX's
        TypeError), an ArgumentError naming ``args`` and the arguments kept from the fit."""
        batch = self._batch(args, kwargs)
        try:
            return fn(batch)
        except TypeError as err:
            if not args and not kwargs:
                raise
            given = set(kwargs) | set((self.fitted.target.batch_keys or ())[: len(args)])
            kept = [k for k in self.fitted.target.batch_keys or () if k not in given]
            raise ArgumentError(
                "args",
                f"args: the model fails on the new arguments of {what} ({err}); the arguments not given keep the "
                f"fit's values ({', '.join(kept) or 'none'}): give each that must change with them",
            ) from err

    def predictive(self, key: PRNGKey, num_samples: int, *args, sites=None, **kwargs) -> dict:
        """Draws of the observed sites (or ``sites``) given ``num_samples`` draws of q; ``args``, ``kwargs``: new
        arguments of the model (``vijax.predictive``'s batch), e.g. new inputs with ``y=None``."""
        target = self._target("predictive")
        check_key("key", key)
        k_q, k_pred = jax.random.split(key)
        draws = self.sample(k_q, num_samples)
        return self._on_batch("predictive", lambda b: predictive(target, draws, k_pred, b, sites=sites), args, kwargs)

    def log_likelihood(self, key: PRNGKey, num_samples: int, *args, **kwargs) -> dict:
        """(num_samples, ...) the pointwise log-likelihood of the observed sites at draws of q."""
        target = self._target("log_likelihood")
        draws = self.sample(key, num_samples)
        return self._on_batch("log_likelihood", lambda b: log_likelihood(target, draws, b), args, kwargs)

    def to_arviz(self, key: Optional[PRNGKey] = None, num_samples: int = 1000):
        """An ``arviz.InferenceData``: posterior, posterior_predictive, log_likelihood, observed_data (a target), or
        the posterior alone; ``key`` defaults to one derived from the fit's."""
        k_q, k_pred = jax.random.split(self._key(key, 1))
        draws = self.sample(k_q, num_samples)
        if self.fitted.target is None or self.fitted.plan.route == "amortized":
            return to_arviz(draws)
        return to_arviz(draws, k_pred, target=self.fitted.target, batch=self._with_params(_whole_data(self.target)))

    def summary(self, key: Optional[PRNGKey] = None, num_samples: int = 4000) -> Summary:
        """Each site's mean, sd and 5%, 50%, 95% quantiles over ``num_samples`` (>= 2) draws of q (:class:`Summary`)."""
        draws = self.sample(self._key(key, 2), check_int("num_samples", num_samples, minimum=2))  # one draw: sd 0
        leaves = jax.tree_util.tree_flatten_with_path(draws)[0]
        out = Summary()
        for path, x in leaves:
            x = np.asarray(x)
            name = jax.tree_util.keystr(path, simple=True, separator=".") or "params"
            q5, q50, q95 = np.quantile(x, [0.05, 0.5, 0.95], axis=0)
            out[name] = {"mean": x.mean(0), "sd": x.std(0), "q5": q5, "q50": q50, "q95": q95}
        return out

    def psis(self, key: Optional[PRNGKey] = None, num_samples: int = 1000):
        """PSIS k-hat of q against the model (``vijax.metrics.psis`` of log p(x, z) − log q(z), z ~ q): k-hat
        ≤ 0.7 says q is close enough for importance-weighted estimates (Yao et al. 2018, "Yes, but did it work?")."""
        key = self._key(key, 3)
        num_samples = check_int("num_samples", num_samples, minimum=PSIS_MIN_DRAWS)
        route = self.fitted.plan.route
        target = self.fitted.target
        whole = self.fitted.data if target is None else self._with_params(_whole_data(target))  # a log-density's batch
        if route in ("bbvi", "flow", "ngvi", "score", "laplace"):  # laplace: a Gaussian on the unconstrained vector
            return psis(log_weights(self.fitted.alg, key, self.state, whole, num_samples))
        rest = self._q_state().rest if route == "conjugate" else None
        if route == "map":
            raise ArgumentError(
                "route",
                "psis: route 'map' is a point estimate, with no q to weigh draws of (route "
                "'laplace' gives a Gaussian around the mode)",
            )
        if route == "amortized":
            raise ArgumentError(
                "route",
                "psis: not offered for route 'amortized': its q has a factor per data point "
                "(local_q), and the weights would be over every point's local values at once",
            )
        if route != "conjugate" or not (rest is None or hasattr(rest, "q_global")):
            raise ArgumentError(
                "route", f"psis: not offered for route {route!r} (a q whose density vijax does not give)"
            )
        q = dict(self._q_state().q_global)
        if rest is not None:
            q.update(rest.q_global)
        z = self.sample(key, num_samples)

        def log_w(draw):
            log_q = sum(jnp.sum(q[n].log_prob(draw[n])) for n in q)
            return target.log_prob(draw, whole) - log_q

        return psis(jax.vmap(log_w)(z))


# ----------------------------------------------------------------------------- the plan


def _whole_data(target: Optional[Target]) -> Optional[dict]:
    """The target's batch of the data it was built with, each subsampled plate at all its points (None: no plate):
    a posterior's predictive, log-likelihood and PSIS are of the whole data, where its steps read minibatches."""
    if target is None or not target.plates:
        return None
    return {plate: jnp.arange(size) for plate, (size, _) in target.plates.items()}


def _support_rows(target: Target) -> list:
    return [PlanRow(n, "summed out", "enumerated", "discrete, marked to be summed out") for n in target.enumerated]


def _report(target: Target, key: PRNGKey, batch) -> dict:
    """``conjugate_sites``' report, or ``{"": why}`` where the check cannot run."""
    try:
        return conjugate_sites(target, key, **({} if batch is None else batch))
    except (ArgumentError, ValueError, NotImplementedError) as e:
        return {"": str(e)}


def _size(target: Target) -> int:
    return sum(math.prod(s.unconstrained_shape) for s in target.sites.values())


_FAMILY_OF = {"real": "Normal", "positive": "Gamma", "unit_interval": "Beta", "simplex": "Dirichlet"}

_OPTIONS = ("family", "objective", "num_samples", "learning_rate")  # fit's options of a route's q and its steps
_READS = {  # the options each route reads; "conjugate" reads more for the sites it does not update in closed form
    "bbvi": _OPTIONS,
    "flow": _OPTIONS,
    "ngvi": ("family", "num_samples"),
    "conjugate": ("num_samples",),
    "amortized": ("family", "num_samples", "learning_rate"),
    "score": ("family", "num_samples", "learning_rate"),
    "laplace": ("learning_rate",),
    "map": ("learning_rate",),
}


def _check_options(plan: Plan, options: dict, params: bool = False) -> None:
    """ArgumentError naming the first option given (not None) that the plan's route does not read: ``family`` and
    ``learning_rate`` on the conjugate route only with a site fitted by ``ngvi`` or ``bbvi`` (``learning_rate``:
    ``bbvi``), ``learning_rate`` wherever the model's ``numpyro.param`` sites (``params``) are fitted by empirical
    Bayes; a ``vijax.models`` model's CAVI and SVI read none."""
    reads = set(_READS.get(plan.route, ()))
    rest = {r.route for r in plan.rows} & {"ngvi", "bbvi"} if plan.route == "conjugate" else set()
    reads |= {"family"} if rest else set()
    reads |= {"learning_rate"} if "bbvi" in rest or (params and plan.route not in POINT_ROUTES) else set()
    for name in _OPTIONS:
        if options[name] is not None and name not in reads:
            what = f"route {plan.route!r}" + (
                ", every site in closed form" if plan.route == "conjugate" and not rest else ""
            )
            if plan.route in ("cavi", "svi"):
                what = f"a vijax.models model's own {plan.route.upper()}, its q the model's families"
            raise ArgumentError(
                name,
                f"{name}: this fit does not read it ({what}; it reads "
                f"{', '.join(n for n in _OPTIONS if n in reads) or 'none of ' + ', '.join(_OPTIONS)}): drop it, or "
                "force a route that reads it (route=...)",
                value=options[name],
            )


def _global_family(target: Target, family: Any) -> str:
    """bbvi's Gaussian of the global sites: ``family``, or by their size."""
    if isinstance(family, str):
        return family
    return "fullrank" if _size(target) <= FULLRANK_MAX_SIZE else "meanfield"


def _amortized_plan(target: Target, route: str, family: Any) -> Plan:
    """Route ``"amortized"`` (module docstring); ArgumentError naming ``route`` where another is forced, naming
    ``family`` where it is not a Gaussian kind."""
    name, (_, plate) = next(iter(target.locals.items()))
    if route not in ("auto", "amortized"):
        raise ArgumentError(
            "route",
            f"route={route!r}: site {name!r} is local to the subsampled plate {plate!r} (one value per data point); "
            "only route 'amortized' fits it (an encoder of each point)",
            value=route,
        )
    if family is not None and not isinstance(family, str):
        raise ArgumentError("family", "family: route 'amortized' takes a Gaussian kind for the global sites")
    fam = f"Gaussian ({_global_family(target, family)})"
    rows = [PlanRow(n, fam, "amortized", "global: one q, ascended with the encoder") for n in target.sites]
    rows += [
        PlanRow(n, "Gaussian (encoder)", "amortized", f"local to subsampled plate {p!r}: q(z_i | x_i) of an MLP")
        for n, (_, p) in target.locals.items()
    ]
    return Plan("amortized", tuple(rows))


_Q_OF = {"binary": "Bernoulli", "finite": "Categorical", "count": "Poisson"}


def _score_plan(target: Target, route: str, family: Any) -> Plan:
    """Route ``"score"`` (module docstring); ArgumentError naming ``route`` where another is forced, naming ``family``
    where it is not a Gaussian kind."""
    name, site = next(iter(target.discrete.items()))
    if route not in ("auto", "score"):
        raise ArgumentError(
            "route",
            f"route={route!r}: site {name!r} is discrete (support {site.support!r}) and not summed out; only route "
            "'score' fits it (score-function gradients)"
            + (", or sum it out: mark it infer={'enumerate': 'parallel'}" if site.support != "count" else ""),
            value=route,
        )
    if family is not None and not isinstance(family, str):
        raise ArgumentError("family", "family: route 'score' takes a Gaussian kind for the continuous sites")
    fam = f"Gaussian ({_global_family(target, family)})"
    rows = [
        PlanRow(n, fam, "bbvi (reparam)", "continuous: reparameterized, at the discrete draws") for n in target.sites
    ]
    for n, s in target.discrete.items():
        why = "discrete, not summed out: its Markov blanket's terms, a leave-one-out baseline"
        if s.support != "count":
            why += " (summing it out, enumerate='parallel', is exact)"
        rows.append(PlanRow(n, _Q_OF[s.support], "score (Rao-Blackwellized)", why))
    return Plan("score", tuple(rows))


def _plan(target: Target, route: str, report: dict, family: Any) -> Plan:
    """The route of each site (module docstring); ArgumentError naming ``route`` where a forced one cannot go."""
    if target.discrete or route == "score":
        if not target.discrete:
            raise ArgumentError(
                "route", "route='score': the model has no discrete latent site that is not summed out", value=route
            )
        return _score_plan(target, route, family)
    if target.locals or route == "amortized":
        if not target.locals:
            raise ArgumentError(
                "route",
                "route='amortized': the model has no local latent site (a latent site inside a subsampled plate)",
                value=route,
            )
        return _amortized_plan(target, route, family)
    sites = target.sites
    unmatched = [n for n, s in sites.items() if s.support not in _FAMILY_OF]
    conj = [n for n in sites if n in report and report[n].conjugate]

    def why_not(n):
        if "" in report:
            return f"not in closed form: {report['']}"
        return report[n].reason if n in report and report[n].reason else "not conjugate"

    if route == "auto":
        route = "conjugate" if conj else "ngvi" if not unmatched else "bbvi"
    if route == "conjugate" and not conj:
        first = next(iter(sites))
        raise ArgumentError(
            "route", f"route='conjugate': no site is conjugate; site {first!r}: {why_not(first)}", value=route
        )
    if route == "ngvi" and unmatched:
        n = unmatched[0]
        raise ArgumentError(
            "route",
            f"route='ngvi': site {n!r} has a support no exponential family matches ({sites[n].constraint}); "
            "use route='bbvi'",
            value=route,
        )
    rows = []
    if route == "conjugate":
        rest = "bbvi" if any(n not in conj for n in unmatched) else "ngvi"
        for n in sites:
            if n in conj:
                rows.append(
                    PlanRow(n, report[n].family, "closed form", "conjugate: complete conditional in closed form")
                )
            elif rest == "ngvi":
                rows.append(PlanRow(n, _FAMILY_OF[sites[n].support], "ngvi", why_not(n)))
            else:
                fam = (
                    "given"
                    if family is not None and not isinstance(family, str)
                    else f"Gaussian ({family or 'meanfield'})"
                )
                rows.append(PlanRow(n, fam, "bbvi", why_not(n)))
    elif route == "ngvi":
        for n, s in sites.items():
            reason = f"support {s.support!r}: {_FAMILY_OF[s.support]}" + ("" if n in conj else f"; {why_not(n)}")
            rows.append(PlanRow(n, _FAMILY_OF[s.support], "ngvi", reason))
    else:
        if route in ("flow", "laplace", "map"):
            fam = {"flow": "flow (auto_flow)", "laplace": "Gaussian at the mode", "map": "point (MAP)"}[route]
        elif isinstance(family, str):
            fam = f"Gaussian ({family})"
        else:
            fam = "Gaussian (fullrank)" if _size(target) <= FULLRANK_MAX_SIZE else "Gaussian (meanfield)"
        for n, s in sites.items():
            if route == "bbvi" and n in unmatched:
                reason = f"support {s.support!r}: no exponential family"
            elif route == "bbvi" and unmatched:
                reason = f"one q with site {unmatched[0]!r}"
            else:
                reason = "asked for"
            rows.append(PlanRow(n, fam, route, reason))
    return Plan(route, tuple(rows + _support_rows(target)))


# ----------------------------------------------------------------------------- the algorithm of each route


def _target_algorithm(target: Target, plan: Plan, report: dict, key: PRNGKey, options: dict):
    family, objective, num_samples, lr = (options[k] for k in ("family", "objective", "num_samples", "learning_rate"))
    route = plan.route
    if route == "conjugate":
        rest = next((r.route for r in plan.rows if r.route in ("ngvi", "bbvi")), "ngvi")
        subsampled = bool(target.plates)
        rho = schedules.robbins_monro(1.0, tau=1.0, kappa=0.7) if subsampled else None
        settings = dict(rest=rest, num_samples=num_samples or 8, schedule=rho)
        if rest == "bbvi":
            settings.update(learning_rate=lr, family=family)
        elif family is not None:
            settings.update(family=family)
        return conjugate_split(target, report, **settings)
    if route == "ngvi":
        return ngvi(target, family=family, num_samples=num_samples or 8)
    if route == "score":
        family = _global_family(target, family)
        return discrete_bbvi(target, family=family, num_samples=num_samples or 8, schedule=0.01 if lr is None else lr)
    if route == "amortized":
        family = _global_family(target, family)
        return amortized(target, family=family, num_samples=num_samples or 8, schedule=0.01 if lr is None else lr)
    if route in ("laplace", "map"):
        return (laplace if route == "laplace" else map_estimate)(target, schedule=lr)
    if route == "flow":
        family = auto_flow(target, key) if family is None else family
        settings = dict(family=family, entropy="mc")
    else:
        default = "fullrank" if _size(target) <= FULLRANK_MAX_SIZE else "meanfield"
        settings = dict(family=default if family is None else family)
    settings.update(estimator=objective or "reparam", num_samples=num_samples or 8)
    return bbvi(target, schedule=0.01 if lr is None else lr, **settings)


def _params_schedule():
    """The default step size of ``empirical_bayes`` on the params, 0.01 ((t + 100) / 100)^-0.7: Adam's steps at a
    constant size leave the params jittering by its noisy gradients (E_q of a few draws); decaying, they settle."""
    return schedules.robbins_monro(0.01 * 100.0**0.7, tau=100.0, kappa=0.7)


def _batch_fn(target: Optional[Target], data=None, key: Optional[PRNGKey] = None) -> tuple[Callable, Optional[int]]:
    """``(batch_fn, steps of a pass)``: full batches (``data``: None, or the model's data arrays; no passes), or each
    subsampled plate's indices: minibatches of passes over its points in a random order each (``epoch_batches``,
    keyed by ``key``: every point once a pass, so that the averaged iterates' minibatch noise cancels pass by pass;
    the longest plate's pass)."""
    if target is None or not target.plates:
        return (lambda key, t: data), None
    plates = [epoch_batches(n, m, jax.random.fold_in(key, i)) for i, (n, m) in enumerate(target.plates.values())]

    def batch_fn(key, t):
        return {name: plate(key, t) for name, (plate, _) in zip(target.plates, plates)}

    return batch_fn, max(steps for _, steps in plates)


# ----------------------------------------------------------------------------- fit


def _as_target(model, args, kwargs, observed, params):
    """(target, log-density) of what ``fit`` was given; a ``vijax.models`` model gives (None, None)."""
    if isinstance(model, Target):
        if args or kwargs:
            raise ArgumentError("args", "a target carries its data: give no model arguments with it")
        return model, None
    if observed is not None:
        return from_tfp(model, observed=observed, **kwargs), None
    if params is not None:
        return None, model
    if implements(model, ConditionallyConjugateModel):
        return None, None
    if hasattr(model, "experimental_pin"):  # a TFP joint distribution: its data are the observed parts
        raise ArgumentError("observed", "observed: a TFP joint needs its observed parts (observed={name: value})")
    if not callable(model):
        raise ArgumentError(
            "model",
            "model: a NumPyro model, a TFP joint with observed=, a vijax.models model with its data, a vijax target "
            f"or a log-density with params=; got {type(model).__name__}",
        )
    return from_numpyro(model, *args, **kwargs), None


def fit(
    model: Any,
    *args: Any,
    route: str = "auto",
    family: Any = None,
    objective: Optional[str] = None,
    num_samples: Optional[int] = None,
    learning_rate: Any = None,
    max_steps: Optional[int] = None,
    tol: Optional[float] = 0.01,
    eval_every: Optional[int] = None,
    patience: int = 3,
    seed: Any = 0,
    init: Optional[Posterior] = None,
    observed: Optional[Mapping] = None,
    params: PyTree = None,
    batch_size: Optional[int] = None,
    progress: bool = True,
    compile_cache: bool | str = True,
    **kwargs: Any,
) -> Posterior:
    """Fits a model's posterior by variational inference, choosing the route from the model's structure.

    Args:
      model: a NumPyro model (``args``, ``kwargs``: its arguments and data), a TFP joint distribution (with
        ``observed``), a ``vijax.models`` conditionally conjugate model (``args[0]``: its data), a target
        (``vijax.from_numpyro``, ``vijax.from_tfp``) or a log-density ``(params, batch) -> scalar`` (with ``params``;
        ``args[0]``: its batch, else None).
      route: ``"auto"`` (the module docstring's rule), or one of ``ROUTES`` to force it.
      family: q's family for the route: ``bbvi``'s (``"meanfield"``, ``"fullrank"``, ``"lowrank"`` or a flowjax
        flow), a dict of site -> ``vijax.expfam`` family for ``ngvi`` (and the conjugate route's ``ngvi`` rest), the
        Gaussian kind of ``amortized``'s and ``score``'s global sites.
      objective: the estimator of ``bbvi`` and ``flow`` (``vijax.inference.ESTIMATORS``: ``"reparam"``, ``"stl"``,
        ``"renyi"``, ...).
      num_samples: Monte Carlo draws per step (default 8).
      learning_rate: ``bbvi``'s, ``amortized``'s and ``discrete_bbvi``'s Adam step (a number or ``count -> rate``;
        default 0.01), ``laplace``'s and ``map``'s, and that of the model's ``numpyro.param`` sites under
        ``empirical_bayes`` (default 0.01 ((t + 100) / 100)^-0.7).
      max_steps: the most steps (>= 1); None: ``MAX_STEPS``, or ``SWEEP_MAX_STEPS`` where every site is updated in
        closed form at full batch (where q is not the exact posterior, its ELBO estimate at one draw may be too noisy
        for ``tol`` to stop it),
        or ``2 * MIN_PASSES`` passes over the data where a plate is subsampled and that is more.
      tol: the relative ELBO change of the stopping rule (> 0), or None to run ``max_steps``; where a plate is
        subsampled the rule is checked from ``MIN_PASSES`` passes over the data on (counting a continued fit's).
      eval_every: steps between two checks of the rule (the runner's chunk); None: ``EVAL_EVERY``, or
        ``SWEEP_EVAL_EVERY`` for CAVI sweeps (as for ``max_steps``: a sweep lands near its fixed point within a few).
      patience: checks in a row below ``tol`` needed to stop.
      seed: an int or a PRNG key.
      init: a :class:`Posterior` of the same model and equal data to continue from (its route, settings, state and
        compiled step; another route or setting given beside it is refused by name), or one loaded from a pickle.
      observed: a TFP joint's observed parts, name -> value.
      params: with a log-density, its parameter pytree (structure, shapes, q's start).
      batch_size: with a ``vijax.models`` model, SVI on minibatches of this size (None: CAVI on the whole data).
      progress: print the plan and show a progress bar.
      compile_cache: JAX's persistent compilation cache, as ``vijax run`` keeps it (``vijax.run.RunConfig``): True
        (``$VIJAX_COMPILE_CACHE``, else ``~/.cache/vijax/jax``), a folder, or False (off). A fit's steps compile
        once per model and shape: a second run of a script, or a continuation, loads them.
      **kwargs: the model's keyword arguments.

    Returns:
      A :class:`Posterior`.

    Raises:
      ArgumentError: naming the argument: an unknown ``route``, or a forced one a site cannot take (the site
        named), a bad ``tol``, ``max_steps``, ``eval_every``, ``patience`` or ``init``, a model of no known kind; an
        option (``family``, ``objective``, ``num_samples``, ``learning_rate``) of a bad value, or one the fit's route
        does not read (a family where every site is in closed form, a step size for ``ngvi``).

    Examples:
        >>> import jax.numpy as jnp, numpyro, numpyro.distributions as dist
        >>> import vijax
        >>> def model(k):
        ...     rate = numpyro.sample("rate", dist.Gamma(2.0, 1.0))
        ...     with numpyro.plate("data", k.shape[0]):
        ...         numpyro.sample("k", dist.Poisson(rate), obs=k)
        >>> post = vijax.fit(model, jnp.array([3.0, 1.0, 4.0]), progress=False)
        >>> post.plan.route, round(float(post.summary()["rate"]["mean"]), 1)   # Gamma(10, 4): mean 2.5
        ('conjugate', 2.5)
    """
    route = check_choice("route", route, ROUTES)
    if max_steps is not None:
        max_steps = check_int("max_steps", max_steps)
    if eval_every is not None:
        eval_every = check_int("eval_every", eval_every)
    patience = check_int("patience", patience)
    progress = check_bool("progress", progress)
    if tol is not None:
        tol = check_scalar("tol", tol, low=0.0)
    if num_samples is not None:
        num_samples = check_int("num_samples", num_samples)
    if objective is not None:
        objective = check_choice("objective", objective, ESTIMATORS)
    if learning_rate is not None and not callable(learning_rate):
        learning_rate = check_scalar("learning_rate", learning_rate, low=0.0)
    key = _key_of(seed)
    if init is not None and not isinstance(init, Posterior):
        raise ArgumentError("init", f"init: a Posterior of vijax.fit to continue from, got {type(init).__name__}")
    k_plan, k_run = jax.random.split(key)
    options = dict(family=family, objective=objective, num_samples=num_samples, learning_rate=learning_rate)
    if init is not None:
        fitted = init.fitted
        if fitted.identity[2] != _fingerprint(model, args, kwargs, observed):
            raise ArgumentError(
                "init", "init: a Posterior of this model and data (the same model, equal data) to continue from"
            )
        _check_continued(fitted, route, batch_size, params, options)
        k_run = jax.random.fold_in(k_run, int(init.num_steps))
    else:
        fitted = _build(model, args, kwargs, observed, params, batch_size, route, options, k_plan)
    sweep = fitted.kind == "target" and not fitted.target.plates and fitted.plan.route == "conjugate"
    sweep = sweep and all(r.route in ("closed form", "enumerated") for r in fitted.plan.rows)
    pass_steps = fitted.pass_steps
    min_steps = 0 if pass_steps is None else MIN_PASSES * pass_steps  # the averaged q's, over the fit's passes
    if max_steps is None:
        max_steps = SWEEP_MAX_STEPS if sweep else max(MAX_STEPS, 2 * min_steps)
    if eval_every is None:
        eval_every = SWEEP_EVAL_EVERY if sweep else EVAL_EVERY
    if progress:
        print(fitted.plan)
    alg, data = fitted.alg, fitted.data
    batch_fn = fitted.batch_fn
    if init is not None:
        init_state = init.state
    elif fitted.kind == "model":
        init_state = lambda k: alg.init(k, data)  # noqa: E731 (the model's start reads its data)
    elif fitted.plan.route == "conjugate" and fitted.target.plates:  # the closed-form start reads a minibatch

        def init_state(key):
            k_init, k_batch = jax.random.split(key)
            return alg.init(k_init, batch_fn(k_batch, 0))

    else:
        init_state = None
    res = run(
        alg,
        k_run,
        batch_fn=batch_fn,
        init_state=init_state,
        num_steps=max_steps,
        chunk_size=eval_every,
        tol=tol,
        patience=patience,
        min_steps=max(min_steps - (0 if init is None else int(init.num_steps)), 0),
        progress=progress,
        compile_cache=compile_cache,
        programs=fitted.programs,
    )
    elbo = jnp.asarray(np.asarray(res.trace["elbo"], np.float64).reshape(res.num_steps, -1).sum(axis=1))
    steps = res.num_steps
    if init is not None:
        elbo, steps = jnp.concatenate([init.elbo, elbo.astype(init.elbo.dtype)]), steps + int(init.num_steps)
    return Posterior(res.state, elbo, jnp.int32(steps), jnp.asarray(res.converged), key, fitted)


def _check_continued(fitted: _Fitted, route: str, batch_size, params, options: dict) -> None:
    """ArgumentError naming the first of a continuation's route and settings (given, not default) that differs from
    those of the fit it continues: ``init`` keeps its own, and ignoring another would be a silent change."""
    _, _, _, _, params0, batch0, route0, options0, _ = fitted.given
    if route not in ("auto", route0, fitted.plan.route):
        raise ArgumentError(
            "route",
            f"route={route!r}: init continues a fit of route {fitted.plan.route!r}, which it keeps",
            value=route,
        )
    for name, value, kept in [("batch_size", batch_size, batch0), ("params", params, params0)] + [
        (n, options[n], options0[n]) for n in _OPTIONS
    ]:
        if value is not None and value is not kept and _digest(value) != _digest(kept):
            raise ArgumentError(
                name,
                f"{name}: init continues a fit with its own {name} ({'the default' if kept is None else repr(kept)}), "
                "which it keeps; give another to a new fit (no init)",
                value=value,
            )


def plan_fit(
    model: Any,
    *args: Any,
    route: str = "auto",
    family: Any = None,
    seed: Any = 0,
    observed: Optional[Mapping] = None,
    params: PyTree = None,
    batch_size: Optional[int] = None,
    **kwargs: Any,
) -> Plan:
    """The :class:`Plan` that :func:`fit` with the same arguments follows, without fitting (its arguments)."""
    route = check_choice("route", route, ROUTES)
    options = dict(family=family, objective=None, num_samples=None, learning_rate=None)
    k_plan = jax.random.split(_key_of(seed))[0]
    return _build(model, args, kwargs, observed, params, batch_size, route, options, k_plan, make_alg=False).plan


def _key_of(seed) -> PRNGKey:
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        return jax.random.PRNGKey(check_int("seed", seed, minimum=0))
    check_key("seed", seed)
    return seed


def _model_batches(data, batch_size, key) -> tuple[Callable, Optional[int]]:
    """``(batch_fn, steps of a pass)`` of a ``vijax.models`` model's data: whole, or in ``epoch_batches``' passes."""
    if batch_size is None:
        return (lambda key, t: data), None
    indices, steps = epoch_batches(jax.tree_util.tree_leaves(data)[0].shape[0], batch_size, key)

    def batch_fn(key, t):
        idx = indices(key, t)
        return jax.tree.map(lambda x: x[idx], data)

    return batch_fn, steps


def _build(model, args, kwargs, observed, params, batch_size, route, options, key, make_alg=True) -> _Fitted:
    """The algorithm and plan of a new fit."""
    given = (model, args, kwargs, observed, params, batch_size, route, options, key)
    target, log_density = _as_target(model, args, kwargs, observed, params)
    if target is not None:
        if batch_size is not None:
            raise ArgumentError(
                "batch_size", "batch_size: a NumPyro model subsamples by its own plate's subsample_size"
            )
        skip = target.locals or target.discrete or route in ("amortized", "score")
        report = {} if skip else _report(target, key, _batch_fn(target, None, key)[0](key, 0))
        plan = _plan(target, route, report, options["family"])
        if target.params and plan.route in ("amortized", "score"):
            raise ArgumentError(
                "model",
                f"site {next(iter(target.params))!r}: a numpyro.param, which fit fits by empirical Bayes on the routes "
                f"whose q draws every site; route {plan.route!r} (local or discrete sites) does not: give the site a "
                "prior, or its value as an argument of the model",
            )
        if target.params:
            how = ("with the point", "") if plan.route in POINT_ROUTES else ("empirical Bayes", ": maximizes the ELBO")
            rows = tuple(PlanRow(n, "point", how[0], f"numpyro.param{how[1]}") for n in target.params)
            plan = plan._replace(rows=plan.rows + rows)
        _check_options(plan, options, bool(target.params))
        if not make_alg:
            return _Fitted("target", None, target, None, None, plan, given)
        alg = _target_algorithm(target, plan, report, key, options)
        if target.params and plan.route not in POINT_ROUTES:
            lr = options["learning_rate"]
            alg = empirical_bayes(alg, target, schedule=_params_schedule() if lr is None else lr)
        if target.plates and plan.route not in POINT_ROUTES:
            alg = averaged(alg)  # the average of the minibatches' iterates: past the steps' noise floor
        return _Fitted("target", alg, target, None, None, plan, given)
    if log_density is not None:
        if route not in ("auto", "bbvi"):
            raise ArgumentError("route", f"route={route!r}: a log-density is fitted by 'bbvi' only", value=route)
        if len(args) > 1 or kwargs:
            raise ArgumentError(
                "args",
                "args: a log-density takes one argument beside params, its batch: fit(log_density, batch, params=...)",
            )
        check_float_tree("params", params)
        size = sum(np.size(x) for x in jax.tree_util.tree_leaves(params))
        default = "fullrank" if size <= FULLRANK_MAX_SIZE else "meanfield"
        family = options["family"] or default
        num = options["num_samples"] or 8
        lr = 0.01 if options["learning_rate"] is None else options["learning_rate"]
        estimator = options["objective"] or "reparam"
        alg = bbvi(log_density, init_params=params, family=family, schedule=lr, num_samples=num, estimator=estimator)
        rows = tuple(
            PlanRow(
                jax.tree_util.keystr(p, simple=True, separator=".") or "params",
                f"Gaussian ({family})",
                "bbvi",
                "a log-density",
            )
            for p, _ in jax.tree_util.tree_flatten_with_path(params)[0]
        )
        return _Fitted("density", alg, None, log_density, args[0] if args else None, Plan("bbvi", rows), given)
    if route != "auto":
        raise ArgumentError("route", f"route={route!r}: a vijax.models model takes its own CAVI or SVI", value=route)
    if len(args) != 1 or kwargs:
        raise ArgumentError("args", "a vijax.models model takes one argument, its data: fit(model, data)")
    data = args[0]
    _check_options(Plan("svi" if batch_size is not None else "cavi", ()), options)
    if batch_size is None:
        alg, name, why = cavi(model), "cavi", "conditionally conjugate model, whole data"
    else:
        n = jax.tree_util.tree_leaves(data)[0].shape[0]
        batch_size = check_int("batch_size", batch_size, maximum=n)
        alg, name, why = averaged(svi(model, num_data=n)), "svi", f"minibatches of {batch_size} of {n}, averaged"
    rows = tuple(
        PlanRow(jax.tree_util.keystr(p, simple=True, separator=".") or "q", type(f).__name__, name, why)
        for p, f in jax.tree_util.tree_flatten_with_path(model.prior(), is_leaf=expfam.is_family)[0]
    )
    return _Fitted("model", alg, None, model, data, Plan(name, rows), given)


__all__ = [
    "EVAL_EVERY",
    "FULLRANK_MAX_SIZE",
    "MAX_STEPS",
    "MIN_PASSES",
    "ROUTES",
    "SWEEP_EVAL_EVERY",
    "SWEEP_MAX_STEPS",
    "Plan",
    "PlanRow",
    "Posterior",
    "Summary",
    "fit",
    "plan_fit",
]
