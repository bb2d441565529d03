"""The synthetic-data samplers draw the same inside a caller's ``jit``; value checks on concrete
values name the first failure."""

import jax
import numpy as np
import pytest

from vijax._validate import ValueCheck, enforce_value_checks, finite_nonnegative
from vijax.data import (
    sample_bernoulli_mixture,
    sample_gmm,
    sample_histogram_mixture,
    sample_hmm,
    sample_sparse_regression,
    sample_speech_spectrogram,
)
from vijax.models import CategoricalEmissions, GaussianEmissions, HMMParams


def _params(gaussian: bool) -> HMMParams:
    pi = np.array([0.5, 0.3, 0.2], np.float32)
    a = np.array([[0.8, 0.1, 0.1], [0.2, 0.7, 0.1], [0.1, 0.2, 0.7]], np.float32)
    if gaussian:
        em = GaussianEmissions(
            np.array([[-2.0, 0.0], [0.0, 1.0], [3.0, -1.0]], np.float32), np.ones((3, 2), np.float32)
        )
    else:
        em = CategoricalEmissions(np.array([[0.6, 0.3, 0.1], [0.1, 0.8, 0.1], [0.2, 0.2, 0.6]], np.float32))
    return HMMParams(pi, a, em)


KEY = jax.random.PRNGKey(3)
CASES = {
    "gmm": lambda k: sample_gmm(k, 301, 4, 3, spread=6.0),
    "histograms": lambda k: sample_histogram_mixture(k, 37, 5, bins=12, pixels=90),
    "regression": lambda k: sample_sparse_regression(k, 203, 7, 3, correlation=0.4),
    "bernoulli": lambda k: sample_bernoulli_mixture(k, 40, 5, 6, alpha=2.0),
    "hmm": lambda k: sample_hmm(k, _params(False), num_sequences=23, length=17, min_length=5),
    "hmm_gaussian": lambda k: sample_hmm(k, _params(True), num_sequences=19, length=13),
    "spectrogram": lambda k: sample_speech_spectrogram(k, 33, 3, 21),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.slow
def test_a_sampler_inside_a_callers_jit_draws_the_same(case):
    out = CASES[case](KEY)
    inside = jax.jit(CASES[case])(KEY)
    for got, want in zip(jax.tree_util.tree_leaves(inside), jax.tree_util.tree_leaves(out)):
        got, want = np.asarray(got), np.asarray(want)
        assert got.shape == want.shape and got.dtype == want.dtype
        if np.issubdtype(got.dtype, np.integer):
            np.testing.assert_array_equal(got, want)
        else:  # the same draws; a fused kernel may round a product-sum once instead of twice
            np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)
    assert jax.tree_util.tree_structure(inside) == jax.tree_util.tree_structure(out)


def test_concrete_value_checks_name_the_first_failure():
    x = np.array([[0.5, 1.0, 2.0], [3.0, -4.0, np.nan]], np.float32)  # first failure: -4 at [1, 1]
    ids = np.array([0, 7, 2], np.int32)

    def checks():
        return [finite_nonnegative("x", x), ValueCheck("ids", ids, ids >= 5, "is out of range [0, 5)")]

    with pytest.raises(ValueError, match=r"x -4\.0 at \[1, 1\]") as err:
        enforce_value_checks(checks)
    assert "in step" not in str(err.value)
    with pytest.raises(ValueError, match=r"ids 7 at \[1\] is out of range \[0, 5\) \(in step 4\)"):
        enforce_value_checks(checks()[1:], count=3)  # a list of concrete checks, a step's count
    enforce_value_checks([finite_nonnegative("x", np.abs(np.nan_to_num(x)))])  # passes: nothing raised
    enforce_value_checks([])
