"""The synthetic-data samplers and the value checks on concrete values run as one compiled program
each (op by op, every operation was a compilation of its own: ``vijax run``'s data set-up of the
HMM experiment compiled 130 programs), with the values of the operations run one by one."""

import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax._validate import ValueCheck, enforce_value_checks, finite_nonnegative
from vijax.data import (
    sample_gmm,
    sample_histogram_mixture,
    sample_hmm,
    sample_sparse_regression,
    sample_speech_spectrogram,
)
from vijax.data import _hmm, _spectra, synthetic
from vijax.models import CategoricalEmissions, GaussianEmissions, HMMParams


def _compiled(caplog, fn):
    """(fn's result, the names of the programs XLA compiled while it ran)."""
    caplog.clear()
    with jax.log_compiles(True), caplog.at_level(logging.DEBUG):
        out = jax.block_until_ready(fn())
    names = [r.getMessage().split()[4] for r in caplog.records if "Finished XLA compilation" in r.getMessage()]
    return out, names


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
FLOAT = jnp.result_type(float)  # the process's default float type
# (public call, the same draws operation by operation, the program's name in JAX's log)
CASES = {
    "gmm": (
        lambda: sample_gmm(KEY, 301, 4, 3, spread=6.0),
        lambda: synthetic._gmm(KEY, 301, 4, 3, 6.0, (0.5, 1.5), 5.0, FLOAT),
        "synthetic_data",
    ),
    "histograms": (
        lambda: sample_histogram_mixture(KEY, 37, 5, bins=12, pixels=90),
        lambda: synthetic._histograms(KEY, 37, 5, 3, 12, 90, 0.1, FLOAT),
        "synthetic_data",
    ),
    "regression": (
        lambda: sample_sparse_regression(KEY, 203, 7, 3, correlation=0.4),
        lambda: synthetic.RegressionData(*synthetic._regression(KEY, 203, 7, 3, 0.5, 0.4, jnp.float32), 0.5),
        "synthetic_data",
    ),
    "hmm": (
        lambda: sample_hmm(KEY, _params(False), num_sequences=23, length=17, min_length=5),
        lambda: _hmm._draw(KEY, _params(False), 23, 17, 5),
        "sample_hmm",
    ),
    "hmm_gaussian": (
        lambda: sample_hmm(KEY, _params(True), num_sequences=19, length=13),
        lambda: _hmm._draw(KEY, _params(True), 19, 13, None),
        "sample_hmm",
    ),
    "spectrogram": (lambda: sample_speech_spectrogram(KEY, 33, 3, 21), None, "sample_speech_spectrogram"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_sampler_is_one_program_with_the_op_by_op_values(case, caplog):
    sample, op_by_op, name = CASES[case]
    out, names = _compiled(caplog, sample)
    # its own program and, for an HMM, its parameters' value checks (both at most once: another
    # test of this process may have compiled them already)
    allowed = {f"jit({name})", "jit(value_checks)"}
    assert set(names) <= allowed and len(names) <= 2, names
    if op_by_op is None:  # the spectrogram: its Gamma and Poisson draws, checked against themselves under jit
        with jax.disable_jit():
            expected = _spectra.sample_speech_spectrogram(KEY, 33, 3, 21)
    else:
        expected = op_by_op()
    for got, want in zip(jax.tree_util.tree_leaves(out), jax.tree_util.tree_leaves(expected)):
        got, want = np.asarray(got), np.asarray(want)
        assert got.shape == want.shape and got.dtype == want.dtype
        if np.issubdtype(got.dtype, np.integer):
            np.testing.assert_array_equal(got, want)
        else:  # the same draws; a fused kernel may round a product-sum once instead of twice
            np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)


def test_a_sampler_inside_a_callers_jit_is_part_of_its_program():
    direct = sample_gmm(KEY, 50, 2, 2)
    inside = jax.jit(lambda k: sample_gmm(k, 50, 2, 2).x)(KEY)
    np.testing.assert_allclose(inside, direct.x, rtol=2e-6, atol=1e-6)
    z = jax.jit(lambda k: sample_hmm(k, _params(False), num_sequences=4, length=6).states)(KEY)
    np.testing.assert_array_equal(z, sample_hmm(KEY, _params(False), num_sequences=4, length=6).states)


def test_concrete_value_checks_are_one_program_and_name_the_first_failure(caplog):
    x = np.array([[0.5, 1.0, 2.0], [3.0, -4.0, np.nan]], np.float32)  # first failure: -4 at [1, 1]
    ids = np.array([0, 7, 2], np.int32)

    def checks():
        return [finite_nonnegative("x", x), ValueCheck("ids", ids, ids >= 5, "is out of range [0, 5)")]

    with pytest.raises(ValueError, match=r"x -4\.0 at \[1, 1\]") as err:
        _compiled(caplog, lambda: enforce_value_checks(checks))
    names = [r.getMessage().split()[4] for r in caplog.records if "Finished XLA compilation" in r.getMessage()]
    assert set(names) <= {"jit(value_checks)"}, names
    assert "in step" not in str(err.value)
    with pytest.raises(ValueError, match=r"ids 7 at \[1\] is out of range \[0, 5\) \(in step 4\)"):
        enforce_value_checks(checks()[1:], count=3)  # a list of concrete checks, a step's count
    enforce_value_checks([finite_nonnegative("x", np.abs(np.nan_to_num(x)))])  # passes: nothing raised
    enforce_value_checks([])
