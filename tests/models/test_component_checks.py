"""The checks of a component a Mixture, a DP mixture or an HMM is built over (its prior at
construction, its statistics of the data at ``init`` / ``check_data``): each refusal names the
component's class and the argument (``component``, ``emissions``, or the data), before any step."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax import expfam
from vijax import models as vm
from vijax.inference import cavi, em


@dataclasses.dataclass(frozen=True)
class WrongExponential(vm.Component):
    """x ~ Exponential(lambda), lambda ~ Gamma(a0, b0) (docs/components.md), made wrong in one way."""

    dim: int
    a0: float = 2.0
    b0: float = 1.0
    wrong: str = ""

    def prior(self, num):
        full = lambda v: jnp.full((num, self.dim), v, jnp.float64)  # noqa: E731
        if self.wrong == "array prior":
            return full(self.a0)
        return expfam.Gamma.from_shape_rate(full(self.a0), full(self.b0))

    def suff_stats(self, x):
        if self.wrong == "one statistic":
            return (-x,)
        if self.wrong == "nan statistics":
            return jnp.full_like(x, jnp.nan), -x
        return jnp.ones_like(x), -x


X = jnp.asarray(np.random.default_rng(0).exponential(1.0, (6, 2)))
STRUCTURES = {
    "mixture": (lambda c: vm.Mixture(c, vm.DirichletWeights(2)), X, "component"),
    "dp mixture": (lambda c: vm.DPMixture(c, truncation_level=3), X, "component"),
    "hmm": (lambda c: vm.HMM(2, c), X[None], "emissions"),
}


def _refusal(call):
    with pytest.raises(ValueError) as info:
        call()
    return info.value


@pytest.mark.parametrize("structure", sorted(STRUCTURES))
@pytest.mark.parametrize(
    "kw, what",
    [
        ({"a0": -1.0}, "prior"),
        ({"wrong": "array prior"}, "expfam family"),
        ({"wrong": "one statistic"}, "suff_stats"),
        ({"wrong": "nan statistics"}, "NaN"),
    ],
)
def test_a_wrong_component_is_refused_naming_it(structure, kw, what):
    build, data, name = STRUCTURES[structure]
    err = _refusal(lambda: cavi(build(WrongExponential(2, **kw))).init(jax.random.PRNGKey(0), data))
    assert err.argument == name
    assert "WrongExponential" in str(err) and what in str(err)


def test_data_that_make_the_posterior_improper_are_refused_naming_them():
    model = vm.Mixture(WrongExponential(2), vm.DirichletWeights(2))
    err = _refusal(lambda: cavi(model).init(jax.random.PRNGKey(0), -3.0 * X))  # outside the support
    assert err.argument == "x" and "improper" in str(err) and "row 0" in str(err)


@pytest.mark.parametrize(
    "make, data, name",
    [
        (lambda: cavi(vm.Mixture(vm.NormalGammaDiagonal(2, dtype=jnp.float32), vm.DirichletWeights(2))), 2, "x"),
        (lambda: cavi(vm.HMM(2, vm.NormalGammaDiagonal(2, dtype=jnp.float32))), 3, "obs"),
        (lambda: em(vm.GaussianHMM(2, 2, dtype=jnp.float32)), 3, "obs"),
    ],
)
def test_data_whose_statistics_overflow_the_dtype_are_refused_naming_them(make, data, name):
    """Squares of 1e20 are infinite in float32: the data are named, not the parameters EM fits."""
    big = jnp.asarray(X * 1e20, jnp.float32)
    err = _refusal(lambda: make().init(jax.random.PRNGKey(0), big if data == 2 else big[None]))
    assert err.argument == name and "overflows float32" in str(err)
