"""``jit_step``'s record of the inputs whose values it has checked, so that a batch passed again
(the same immutable ``jax.Array`` objects: a full-batch algorithm's data at every step) is not
checked again: its checks would read every entry of the data again to find what they found at the
first call."""

from __future__ import annotations

import weakref
from typing import Sequence

import jax

from vijax._validate import is_tracer


def inputs_read(jaxpr, outputs: Sequence) -> frozenset:
    """The positions of ``jaxpr``'s inputs (a ``jax.extend.core.Jaxpr``) that ``outputs`` (some of
    its output variables) depend on, read off its equations in order; an equation with inner
    programs (``cond``, ``while``) counts every output of it as depending on every input of it."""
    from jax.extend.core import Literal  # jax.extend loads JAX's Pallas modules: not at import

    reads = {v: frozenset((i,)) for i, v in enumerate(jaxpr.invars)}
    for eqn in jaxpr.eqns:
        read = frozenset().union(*(reads.get(v, frozenset()) for v in eqn.invars if not isinstance(v, Literal)))
        for v in eqn.outvars:
            reads[v] = read
    return frozenset().union(*(reads.get(v, frozenset()) for v in outputs if not isinstance(v, Literal)))


class CheckedInputs:
    """Which flat inputs a compiled step's value checks read (``positions``), and weak references to
    the arrays at those positions when their checks last passed. Only ``jax.Array`` objects are
    remembered: they cannot change (a NumPy array can, in place, and is checked at every call).
    A weak reference: remembering an array never keeps it alive."""

    def __init__(self, positions: frozenset, treedef):
        self.positions, self.treedef = tuple(sorted(positions)), treedef  # of the traced call's inputs
        self.refs = None

    def needs_check(self, leaves: Sequence, treedef) -> bool:
        """Whether the checks must run for these flat inputs (of structure ``treedef``): unless they
        have the traced call's structure and every input the checks read is the very array whose
        checks passed last time."""
        if self.refs is None or treedef != self.treedef:
            return True
        return any(ref is None or ref() is not leaves[i] for i, ref in zip(self.positions, self.refs))

    def remember(self, leaves: Sequence, treedef) -> None:
        """Records the inputs of a call whose checks passed (only of the traced call's structure:
        the positions are that structure's)."""
        if treedef == self.treedef:
            self.refs = [_ref(leaves[i]) for i in self.positions]


def _ref(leaf):
    if isinstance(leaf, jax.Array) and not is_tracer(leaf) and not leaf.is_deleted():
        return weakref.ref(leaf)
    return None
