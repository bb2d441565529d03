"""The algorithm interface (optax/blackjax style): a factory builds ``VIAlgorithm(init, step)`` of pure functions::

    alg = vijax.inference.svi(model, num_data=N, schedule=0.5)
    state = alg.init(key, batch)               # batch optional
    state, info = alg.step(key, state, batch)  # jit-able; info.elbo, info.step_size, ...

Every state holds ``q_global`` and an int32 ``count``; keys are passed first and never reused. A module's
``step(key, state, batch, *, model, **settings)`` is the unguarded math under :func:`validated_step`; its factory
returns ``reject_non_finite(VIAlgorithm(init, step))``.
"""

from __future__ import annotations

import functools
import inspect
import types
import weakref
from typing import Any, Callable, Mapping, NamedTuple, Optional, Protocol, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from vijax._compile import collection_paused, step_compile_options
from vijax._validate import (
    ArgumentError,
    NestedValueCheck,
    check_bool,
    check_choice,
    check_key,
    collecting_checks,
    functional_value_checks,
    implements,
    is_tracer,
    protocol_members,
    raise_check_error,
    raise_collected,
    value_checks,
)
from vijax.expfam import check_in_domain
from vijax.models import check_step_batch
from vijax.types import Array, PRNGKey, PyTree


class InitFn(Protocol):
    def __call__(self, key: PRNGKey, batch: PyTree = None) -> PyTree:
        """Returns the initial state (``batch`` for data-dependent starts)."""


class StepFn(Protocol):
    def __call__(self, key: PRNGKey, state: PyTree, batch: PyTree) -> tuple[PyTree, Any]:
        """One jit-able update ``(key, state, batch) -> (new_state, info)``; ``info.elbo`` is the ELBO."""


class VIAlgorithm(NamedTuple):
    """A pair of pure functions; ``extras``: what it offers beyond them (``vijax.inference.sample``, ...)."""

    init: InitFn
    step: StepFn
    extras: Any = None


def check_no_options(options: dict, algorithm: str) -> None:
    """Raises ArgumentError naming the first of ``options``: ``algorithm``'s ``extras.elbo`` takes none."""
    if options:
        name = sorted(options)[0]
        raise ArgumentError(name, f"{name}: {algorithm}'s elbo takes no options (its settings are the factory's)")


def check_protocol(model: Any, protocol: type, algorithm: str) -> None:
    """Raises ValueError unless ``model`` satisfies ``protocol``, naming the members it lacks."""
    if not implements(model, protocol):
        missing = [m for m in protocol_members(protocol) if not hasattr(model, m)]
        raise ArgumentError(
            "model",
            f"{algorithm} needs a {protocol.__name__}: {type(model).__name__} offers no "
            f"{', '.join(missing) or 'member of it'}",
        )


def jit_step(step: Callable, *, check_values: bool = True, cpu_compile: str = "quick", **jit_kwargs) -> Callable:
    """``jax.jit(step)`` whose batch value checks are outputs of the program (a bad batch raises the step's ValueError).

    The first call or ``lower`` picks ``.check_mode()``: ``"collected"`` (bad entries as outputs, skipped while the
    inputs read are the arrays that passed last), ``"checkify"`` or ``"plain"`` (host callbacks); traced: ``jax.jit``.

    Args:
      step: a function whose checks are ``check_step_batch``'s (an algorithm's ``step``).
      check_values: whether the compiled step checks its batches' values (shapes and dtypes always).
      cpu_compile: ``"quick"`` (the platform's quick options, ``vijax._compile.step_compile_options``: on a CPU whose
        ``XLA_FLAGS`` leave the emitter open the classic one, on a GPU no autotuning) or ``"xla"`` (XLA's settings).
      **jit_kwargs: passed to ``jax.jit`` (``donate_argnums``, ``compiler_options``, ...).

    Returns:
      The compiled function, with ``.lower(...)``, ``.check_mode()`` and ``.compiler_options()`` (None: XLA's).

    Examples:
        >>> import jax, numpy as np
        >>> from vijax.inference import cavi, jit_step
        >>> from vijax.models import DiagonalGMM
        >>> x = np.random.default_rng(0).normal(size=(20, 1))
        >>> alg = cavi(DiagonalGMM.from_data(x, num_components=2))
        >>> state, info = jit_step(alg.step)(jax.random.PRNGKey(1), alg.init(jax.random.PRNGKey(0), x), x)
    """
    from jax.experimental import checkify

    check_values = check_bool("check_values", check_values)
    given = lambda *names: any(jit_kwargs.get(k) not in (None, (), []) for k in names)
    donated = given("donate_argnums", "donate_argnames")
    gated = not donated and not given("static_argnums", "static_argnames")
    options = None
    if check_choice("cpu_compile", cpu_compile, ("quick", "xla")) == "quick" and "compiler_options" not in jit_kwargs:
        options = step_compile_options()

    def functional(*args, **kwargs):
        with functional_value_checks():  # read while the step is traced
            return step(*args, **kwargs)

    checked_fn = checkify.checkify(functional, errors=checkify.user_checks)
    fns = {"collected": collecting_checks(step, locate=donated, gated=gated), "located": collecting_checks(step)}
    kw = {**jit_kwargs, **({} if options is None else {"compiler_options": options})}
    programs = {"plain": jax.jit(step, **kw)}
    for k, fn in {**fns, "checkify": checked_fn}.items():
        fn.__name__ = getattr(step, "__name__", "step")  # the program's (and its cache entry's) name
        programs[k] = jax.jit(fn, **kw)
    nested = jax.jit(step, **jit_kwargs)  # under a caller's trace: part of the caller's program
    mode, checked = [], []  # the way taken; [CheckedInputs] once collected and gated
    gate = lambda value=True: (np.bool_(value),) if gated else ()

    def choose(*args, **kwargs):
        if mode:
            return None
        try:
            traced = programs["collected"].trace(*args, *gate(), **kwargs)
            lowered = traced.lower()
            mode.append("collected")
            checked.extend([CheckedInputs.of_trace(traced, args, kwargs)] if gated else [])
            return lowered
        except NestedValueCheck:
            pass
        try:
            lowered = programs["checkify"].lower(*args, **kwargs)
        except Exception:  # noqa: BLE001 - checkify's own limits; a fault of the step raises again, from jax.jit's
            lowered = None
        mode.append("plain" if lowered is None or "manual_computation" in lowered.as_text() else "checkify")
        return lowered if mode[0] == "checkify" else None

    @functools.wraps(step)
    def call(*args, **kwargs):
        with value_checks(check_values), collection_paused(not mode):  # checks read where the programs are traced
            if any(is_tracer(x) for x in jax.tree.leaves((args, kwargs))):
                return nested(*args, **kwargs)
            choose(*args, **kwargs)
            if mode[0] == "plain":
                return programs["plain"](*args, **kwargs)
            if mode[0] == "checkify":
                error, out = programs["checkify"](*args, **kwargs)
                raise_check_error(error)
                return out
            leaves, treedef = jax.tree.flatten((args, kwargs)) if checked else ((), None)
            fresh = not checked or checked[0].needs_check(leaves, treedef)
            out, results = programs["collected"](*args, *gate(fresh), **kwargs)
            if fresh:  # else no check ran: nothing to read back (no wait for the device)
                raise_collected(results, lambda: programs["located"](*args, **kwargs)[1])
                if checked:
                    checked[0].remember(leaves, treedef)
            return out

    def lower(*args, **kwargs):
        with value_checks(check_values), collection_paused(not mode):
            lowered = choose(*args, **kwargs)
            extra = gate() if mode[0] == "collected" else ()
            return lowered if lowered is not None else programs[mode[0]].lower(*args, *extra, **kwargs)

    call.lower = lower
    call.check_mode = lambda: mode[0] if mode else None
    call.compiler_options = lambda: None if options is None else dict(options)
    return call


def inputs_read(jaxpr, outputs: Sequence) -> frozenset:
    """The positions of ``jaxpr``'s inputs that ``outputs`` depend on (each equation's outputs on all its inputs)."""
    from jax.extend.core import Literal  # jax.extend loads JAX's Pallas modules: not at import

    reads = {v: frozenset((i,)) for i, v in enumerate(jaxpr.invars)}
    for eqn in jaxpr.eqns:
        read = frozenset().union(*(reads.get(v, frozenset()) for v in eqn.invars if not isinstance(v, Literal)))
        for v in eqn.outvars:
            reads[v] = read
    return frozenset().union(*(reads.get(v, frozenset()) for v in outputs if not isinstance(v, Literal)))


class CheckedInputs:
    """The flat inputs a compiled step's value checks read, and weak references to the ``jax.Array``s that passed."""

    def __init__(self, positions: frozenset, treedef):
        self.positions, self.treedef = tuple(sorted(positions)), treedef  # of the traced call's inputs
        self.refs = None

    @classmethod
    def of_trace(cls, traced, args: tuple, kwargs: dict) -> "CheckedInputs":
        """The inputs read by the checks of ``traced`` (a collected program with a gate after ``args``)."""
        jaxpr, own = traced.jaxpr.jaxpr, len(jax.tree.leaves(args))  # own: the gate's position
        rows = jaxpr.outvars[len(jaxpr.outvars) - len(jax.tree.leaves(traced.out_info[1])) :]
        read = {p - (p > own) for p in inputs_read(jaxpr, rows) if p != own}
        return cls(frozenset(read), jax.tree.structure((args, kwargs)))

    def needs_check(self, leaves: Sequence, treedef) -> bool:
        """Whether the checks must run: unless every input they read is the array that passed last."""
        if self.refs is None or treedef != self.treedef:
            return True
        return any(ref is None or ref() is not leaves[i] for i, ref in zip(self.positions, self.refs))

    def remember(self, leaves: Sequence, treedef) -> None:
        """Records the inputs of a call whose checks passed."""
        if treedef == self.treedef:
            live = lambda x: isinstance(x, jax.Array) and not is_tracer(x) and not x.is_deleted()
            self.refs = [weakref.ref(leaves[i]) if live(leaves[i]) else None for i in self.positions]


def _step_with_value_checks(*args, inner: Callable, enabled: bool, **kwargs):
    with value_checks(enabled):  # read while the inner step is traced
        return inner(*args, **kwargs)


def with_value_checks(alg: VIAlgorithm, enabled: bool) -> VIAlgorithm:
    """``alg`` whose step checks its batches' values or not (``enabled``); shape and dtype checks always run.

    Examples:
        >>> import jax, numpy as np
        >>> from vijax.inference import cavi
        >>> from vijax.models import UnivariateGMM
        >>> x = np.linspace(-1.0, 1.0, 20)
        >>> alg = with_value_checks(cavi(UnivariateGMM(num_components=2)), False)
        >>> state = alg.init(jax.random.PRNGKey(0), x)
        >>> x[3] = np.nan
        >>> bool(alg.step(jax.random.PRNGKey(1), state, x)[1].accepted)
        False
    """
    enabled = check_bool("enabled", enabled)
    return alg._replace(step=bind_settings(_step_with_value_checks, inner=alg.step, enabled=enabled))


def init_from(alg: VIAlgorithm, key: PRNGKey, q_global: PyTree, batch: PyTree = None) -> PyTree:
    """``alg.init(key, batch)`` holding a given ``q_global`` (a fit to continue; Hoffman & Blei 2015, Fig. 3).

    Raises:
      ValueError: naming ``q_global`` unless it is shaped as the algorithm's q, finite and in its domain.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from vijax.inference import svi
        >>> from vijax.models import UnivariateGMM
        >>> alg = svi(UnivariateGMM(num_components=2), num_data=4)
        >>> q = UnivariateGMM(num_components=2).prior()
        >>> state = init_from(alg, jax.random.PRNGKey(0), q)
        >>> bool(jnp.all(state.q_global.eta1 == q.eta1)), int(state.count)
        (True, 0)
    """
    state = alg.init(key, batch)
    want = jax.tree_util.tree_structure(state.q_global)
    got = jax.tree_util.tree_structure(q_global)
    if want != got:
        raise ArgumentError("q_global", f"q_global must be structured as this algorithm's q ({want}), got {got}")
    for a, b in zip(jax.tree_util.tree_leaves(state.q_global), jax.tree_util.tree_leaves(q_global)):
        if jnp.shape(a) != jnp.shape(b) or jnp.result_type(a) != jnp.result_type(b):
            raise ArgumentError(
                "q_global",
                f"q_global must have this algorithm's shapes and dtypes: a leaf is {jnp.result_type(b)} "
                f"{jnp.shape(b)} where the algorithm's q has {jnp.result_type(a)} {jnp.shape(a)}",
            )
    check_in_domain("q_global", q_global)
    return state._replace(q_global=q_global)


def _is_state(x: Any) -> bool:
    return isinstance(x, GuardedState) or (isinstance(x, tuple) and "count" in getattr(x, "_fields", ()))


def check_step_state(state: Any) -> None:
    """Raises ValueError naming ``state`` unless it is a NamedTuple with a ``count`` field.

    Examples:
        >>> check_step_state((1.0, 2.0))
        Traceback (most recent call last):
        ...
        vijax._validate.ArgumentError: state must be an algorithm's state (from alg.init, or the first output of alg.step), got tuple
    """
    if _is_state(state):
        return
    if isinstance(state, tuple) and len(state) == 2 and _is_state(state[0]):
        raise ArgumentError(
            "state",
            "state: got the (state, info) pair that a step returns; pass its state on: "
            "state, info = alg.step(key, state, batch)",
        )
    got = type(state).__name__
    if "accepted" in getattr(state, "_fields", ()):
        got += " (a step's info)"
    raise ArgumentError(
        "state", f"state must be an algorithm's state (from alg.init, or the first output of alg.step), got {got}"
    )


class _Extended:
    """An algorithm's state or info (``inner``) with one more field (``EXTRA``), read as one NamedTuple."""

    __slots__ = ()
    EXTRA = ""

    def __init__(self, inner: Any, extra: Any):
        object.__setattr__(self, "inner", inner)
        object.__setattr__(self, self.EXTRA, extra)

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is immutable; use _replace")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    @property
    def _fields(self) -> tuple:
        return (*(_named_fields(self.inner) or ("inner",)), self.EXTRA)

    def _replace(self, **changes) -> "_Extended":
        extra = changes.pop(self.EXTRA, getattr(self, self.EXTRA))
        return type(self)(self.inner._replace(**changes) if changes else self.inner, extra)

    def _asdict(self) -> dict:
        return {f: getattr(self, f) for f in self._fields}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r}, {self.EXTRA}={getattr(self, self.EXTRA)!r})"

    def __reduce__(self):
        return type(self), (self.inner, getattr(self, self.EXTRA))


def _named_fields(x: Any) -> tuple:
    return x._fields if isinstance(x, tuple) and hasattr(type(x), "_fields") else ()


class GuardedState(_Extended):
    """The state of :func:`reject_non_finite`: the inner state and ``num_rejected`` (int32)."""

    __slots__ = ("inner", "num_rejected")
    EXTRA = "num_rejected"


class GuardedInfo(_Extended):
    """The info of :func:`reject_non_finite`: the inner info and ``accepted`` (bool)."""

    __slots__ = ("inner", "accepted")
    EXTRA = "accepted"


def _register_extended(cls: type) -> None:
    def flatten(x):
        names = _named_fields(x.inner)
        children = [(jax.tree_util.GetAttrKey(f), getattr(x.inner, f)) for f in names]
        if not names:
            children = [(jax.tree_util.GetAttrKey("inner"), x.inner)]
        children.append((jax.tree_util.GetAttrKey(cls.EXTRA), getattr(x, cls.EXTRA)))
        return children, (type(x.inner) if names else None)

    def unflatten(inner_type, children):
        *inner, extra = children
        return cls(inner_type(*inner) if inner_type is not None else inner[0], extra)

    jax.tree_util.register_pytree_with_keys(
        cls, flatten, unflatten, flatten_func=lambda x: ([c for _, c in flatten(x)[0]], flatten(x)[1])
    )


_register_extended(GuardedState)
_register_extended(GuardedInfo)


def _guarded_init(key: PRNGKey, batch: PyTree = None, *, inner: InitFn) -> GuardedState:
    return GuardedState(inner(key, batch), jax.device_put(np.int32(0)))


def _guarded_step(key: PRNGKey, state: PyTree, batch: PyTree, *, inner: StepFn, is_valid: Optional[Callable]):
    bare = not isinstance(state, GuardedState)  # a state made by hand: stepped and returned bare
    if bare:
        check_step_state(state)
        state = GuardedState(state, jnp.zeros((), jnp.int32))
    old = state.inner
    new, info = inner(key, old, batch)
    names = _named_fields(new)
    if names and type(old) is not type(new):  # another algorithm's state handed on: read as the new type
        old = new._replace(**{f: getattr(old, f) for f in names if f in _named_fields(old)})
    floats = [x for x in jax.tree.leaves((new, info)) if jnp.issubdtype(jnp.result_type(x), jnp.inexact)]
    ok = jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in floats])) if floats else jnp.array(True)
    if is_valid is not None:
        ok = ok & is_valid(state.inner, new, info)
    kept = jax.tree.map(lambda n, o: jnp.where(ok, n, o), new, old)
    if "count" in names:
        kept = kept._replace(count=safe_increment(state.inner.count))
    if bare:
        return kept, GuardedInfo(info, ok)
    return GuardedState(kept, state.num_rejected + (~ok).astype(jnp.int32)), GuardedInfo(info, ok)


def reject_non_finite(alg: VIAlgorithm, *, is_valid: Optional[Callable] = None) -> VIAlgorithm:
    """``alg`` whose steps are applied only where their result is finite (optax's ``apply_if_finite``).

    A step whose new state or info holds a non-finite float (or where ``is_valid`` is False) keeps the old state;
    ``count`` still advances. State and info are a :class:`GuardedState` and :class:`GuardedInfo`; a bare state of
    ``alg`` is returned bare, one of another algorithm with ``alg``'s fields read as ``alg``'s (CAVI after SVI).

    Args:
      alg: any ``VIAlgorithm`` whose state has an int32 ``count``.
      is_valid: optional ``(old_state, new_state, info) -> bool array`` (the inner states and info).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from typing import NamedTuple
        >>> class S(NamedTuple):
        ...     x: jax.Array
        ...     count: jax.Array
        >>> class I(NamedTuple):
        ...     elbo: jax.Array
        >>> def step(key, state, batch):
        ...     return S(jnp.log(state.x - batch), state.count + 1), I(-state.x)
        >>> alg = reject_non_finite(VIAlgorithm(lambda key, batch=None: S(jnp.ones(()), jnp.int32(0)), step))
        >>> state, info = alg.step(jax.random.PRNGKey(0), alg.init(jax.random.PRNGKey(0)), 2.0)
        >>> float(state.x), int(state.count), int(state.num_rejected), bool(info.accepted)
        (1.0, 1, 1, False)
    """
    return alg._replace(
        init=bind_settings(_guarded_init, inner=alg.init),
        step=bind_settings(_guarded_step, inner=alg.step, is_valid=is_valid),
    )


def checked_start(key: PRNGKey, batch: PyTree, model: Any) -> None:
    """An ``init``'s checks: ``key`` is a PRNG key and, where given, ``model.check_data(batch)``."""
    check_key("key", key)
    if batch is not None:
        model.check_data(batch)


def validated_step(math: Callable) -> Callable:
    """``math(key, state, batch, *, model, **settings)`` checking the key, the state and the batch first."""

    @functools.wraps(math)
    def step(key, state, batch, *, model, **settings):
        check_key("key", key)
        check_step_state(state)
        check_step_batch(model, batch, state.count)
        return math(key, state, batch, model=model, **settings)

    return step


class BoundFunction:
    """``func`` with a factory's settings bound as keywords: a pytree of the settings (:func:`bind_settings`)."""

    def __init__(self, func: Callable, keywords: Mapping[str, Any]):
        self.func, self.keywords = func, types.MappingProxyType(dict(keywords))
        functools.update_wrapper(self, func)

    def __call__(self, *args, **kwargs):
        return self.func(*args, **kwargs, **self.keywords)

    @property
    def __signature__(self) -> inspect.Signature:
        """``func``'s signature without the bound settings (so ``jax.jit``'s errors name ``batch``)."""
        sig = inspect.signature(self.func)
        return sig.replace(parameters=[p for name, p in sig.parameters.items() if name not in self.keywords])

    def __repr__(self) -> str:
        return f"bind_settings({getattr(self.func, '__qualname__', self.func)!r}, {', '.join(self.keywords)})"


jax.tree_util.register_pytree_with_keys(
    BoundFunction,
    lambda b: ([(jax.tree_util.GetAttrKey("keywords"), dict(b.keywords))], b.func),
    lambda func, children: BoundFunction(func, children[0]),
    flatten_func=lambda b: ([dict(b.keywords)], b.func),
)


def bind_settings(fn: Callable, **settings: Any) -> BoundFunction:
    """``fn`` with a factory's settings bound as keywords: a :class:`BoundFunction`, whose leaves are their arrays.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> step = bind_settings(lambda x, *, scale: x * scale, scale=jnp.arange(3.0))
        >>> step(2.0).tolist(), [leaf.tolist() for leaf in jax.tree_util.tree_leaves(step)]
        ([0.0, 2.0, 4.0], [[0.0, 1.0, 2.0]])
    """
    return BoundFunction(fn, settings)


def guarded_algorithm(
    init: Callable, step: Callable, init_settings: Sequence[str] = ("model",), extras: Any = None, **settings: Any
) -> VIAlgorithm:
    """``reject_non_finite(VIAlgorithm(init, step, extras))``; ``settings`` bound to step, ``init_settings`` to init."""
    init = bind_settings(init, **{k: settings[k] for k in init_settings})
    return reject_non_finite(VIAlgorithm(init, bind_settings(step, **settings), extras))


def safe_increment(count: Array) -> Array:
    """count + 1, saturating at the int32 maximum (as optax does)."""
    big = jnp.array(jnp.iinfo(jnp.int32).max, jnp.int32)
    return jnp.where(count < big, count + 1, big)


__all__ = [
    "InitFn",
    "StepFn",
    "VIAlgorithm",
    "GuardedInfo",
    "GuardedState",
    "init_from",
    "check_protocol",
    "check_step_batch",
    "BoundFunction",
    "bind_settings",
    "guarded_algorithm",
    "jit_step",
    "with_value_checks",
    "protocol_members",
    "reject_non_finite",
    "validated_step",
    "safe_increment",
]
