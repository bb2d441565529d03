"""HMM parameters and dtypes at every public entry point: the models' methods (log_likelihood,
posterior, pairwise_marginals, viterbi, e_step, log_prior), an EM step from a hand-built EMState
(eagerly, under ``jit`` and ``jit_step``) and ``vijax.data.sample_hmm`` refuse bad parameters with a
ValueError naming the field, the value and where it is; half precision is refused by name."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax.data import sample_hmm
from vijax._validate import value_checks
from vijax.inference import EMState, em, jit_step, with_value_checks
from vijax.models import CategoricalEmissions, CategoricalHMM, GaussianEmissions, GaussianHMM, HMMParams

OBS = jnp.array([[0, 1, 1, 0], [1, 0, 0, 1]])
GOOD = HMMParams(
    jnp.array([0.5, 0.5]),
    jnp.array([[0.9, 0.1], [0.2, 0.8]]),
    CategoricalEmissions(jnp.array([[0.7, 0.3], [0.4, 0.6]])),
)
GAUSS = HMMParams(GOOD.initial_probs, GOOD.transition_matrix, GaussianEmissions(jnp.zeros((2, 1)), jnp.ones((2, 1))))
X = jnp.zeros((2, 4, 1))

# (bad parameters, the error's words): rows off the simplex, negative entries, a shape for 3 states
BAD = {
    "row sum": (
        GOOD._replace(transition_matrix=jnp.array([[0.9, 0.1], [0.8, 1.0]])),
        r"params.transition_matrix row sum 1.8 at \[1\] is not 1",
    ),
    "negative": (
        GOOD._replace(transition_matrix=jnp.array([[1.1, -0.1], [0.2, 0.8]])),
        r"params.transition_matrix -0.1 at \[0, 1\] is not a finite number >= 0",
    ),
    "initial sum": (
        GOOD._replace(initial_probs=jnp.array([0.5, 0.4])),
        r"params.initial_probs sum 0.9 at \[\] is not 1",
    ),
    "emissions of 3 states": (
        GOOD._replace(emissions=CategoricalEmissions(jnp.full((3, 2), 0.5))),
        r"params.emissions.probs must have shape \(2, 2\)",
    ),
    "emission row": (
        GOOD._replace(emissions=CategoricalEmissions(jnp.array([[0.7, 0.3], [0.4, 0.4]]))),
        r"params.emissions.probs row sum 0.8 at \[1\] is not 1",
    ),
    "nan": (
        GOOD._replace(initial_probs=jnp.array([jnp.nan, 0.5])),
        r"params.initial_probs nan at \[0\] is not a finite",
    ),
    "half precision": (
        jax.tree_util.tree_map(lambda a: a.astype(jnp.bfloat16), GOOD),
        "params.initial_probs must be float32 or float64 .*got bfloat16",
    ),
    "emissions type": (
        GOOD._replace(emissions=(GOOD.emissions.probs,)),
        "params.emissions must be CategoricalEmissions.*, got tuple",
    ),
    "not HMMParams": (tuple(GOOD), "params must be HMMParams"),
}

MODEL = CategoricalHMM(2, 2)
ENTRY_POINTS = {
    "log_likelihood": lambda p: MODEL.log_likelihood(p, OBS),
    "posterior": lambda p: MODEL.posterior(p, OBS),
    "pairwise_marginals": lambda p: MODEL.pairwise_marginals(p, OBS),
    "viterbi": lambda p: MODEL.viterbi(p, OBS),
    "e_step": lambda p: MODEL.e_step(p, OBS),
    "log_prior": lambda p: MODEL.log_prior(p),
    "check_params": lambda p: MODEL.check_params(p),
    "em step from an EMState": lambda p: em(MODEL).step(
        jax.random.PRNGKey(0), EMState(p, jnp.zeros((), jnp.int32)), OBS
    ),
    "sample_hmm": lambda p: sample_hmm(jax.random.PRNGKey(0), p, num_sequences=2, length=3),
}


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
@pytest.mark.parametrize("bad", sorted(BAD))
def test_every_entry_point_refuses_bad_parameters(entry, bad):
    params, words = BAD[bad]
    if entry == "sample_hmm" and bad == "emissions of 3 states":
        words = r"params.emissions.probs must have shape \(2, 2\) \(K, from params.initial_probs\), got \(3, 2\)"
    with pytest.raises(ValueError, match=words):
        ENTRY_POINTS[entry](params)


def test_good_parameters_pass():
    """The same calls with good parameters return finite results (the inference methods, e_step and
    EM steps with good parameters: test_hmm.py)."""
    for entry in ("log_likelihood", "log_prior", "sample_hmm"):
        leaves = jax.tree_util.tree_leaves(ENTRY_POINTS[entry](GOOD))
        assert all(np.all(np.isfinite(np.asarray(a, np.float64))) for a in leaves), entry
    assert MODEL.check_params(GOOD) is None
    with pytest.raises(ValueError, match="params.emissions must be GaussianEmissions, got CategoricalEmissions"):
        GaussianHMM(2, 1).log_likelihood(GOOD, X)


def test_gaussian_parameters():
    g = GaussianHMM(2, 1)
    zero_var = GAUSS._replace(emissions=GaussianEmissions(jnp.zeros((2, 1)), jnp.array([[1.0], [0.0]])))
    with pytest.raises(ValueError, match=r"params.emissions.variances 0.0 at \[1, 0\] is not in \[2.22507e-308, inf\]"):
        g.e_step(zero_var, X)
    nan_mean = GAUSS._replace(emissions=GaussianEmissions(jnp.array([[0.0], [jnp.nan]]), jnp.ones((2, 1))))
    with pytest.raises(ValueError, match=r"params.emissions.means nan at \[1, 0\] is not finite"):
        g.log_likelihood(nan_mean, X)
    with pytest.raises(ValueError, match=r"params.emissions.variances must have shape \(2, 1\)"):
        sample_hmm(
            jax.random.PRNGKey(0),
            GAUSS._replace(emissions=GaussianEmissions(jnp.zeros((2, 1)), jnp.ones((2, 2)))),
            num_sequences=1,
            length=2,
        )
    with pytest.raises(ValueError, match="params.emissions must be GaussianEmissions"):
        g.e_step(GOOD, X)


@pytest.mark.slow
def test_traced_parameters_are_checked_in_the_compiled_step():
    """Under a plain ``jit`` the check is a host callback (its error carries the same words); under
    ``jit_step`` (the runner's) a ValueError; off under ``value_checks(False)``."""
    params, words = BAD["row sum"]
    state = EMState(params, jnp.zeros((), jnp.int32))
    alg = em(MODEL)
    with pytest.raises(ValueError, match=words):
        jit_step(alg.step)(jax.random.PRNGKey(0), state, OBS)
    with pytest.raises(Exception, match=words):
        jax.block_until_ready(jax.jit(MODEL.e_step)(params, OBS))
    with value_checks(False):  # the trace-time scope that with_value_checks and jit_step enter
        jax.block_until_ready(jax.jit(lambda p, x: MODEL.e_step(p, x))(params, OBS))
    jax.block_until_ready(jax.jit(with_value_checks(alg, False).step)(jax.random.PRNGKey(0), state, OBS))


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_half_precision_is_refused_by_name(dtype):
    name = jnp.dtype(dtype).name
    with pytest.raises(ValueError, match=f"dtype must be float32 or float64 .*got {name}"):
        GaussianHMM(2, 1, dtype=dtype)
    with pytest.raises(ValueError, match=f"dtype must be float32 or float64 .*got {name}"):
        CategoricalHMM(2, 2, dtype=dtype)
    with pytest.raises(ValueError, match=f"obs must be float32 or float64 .*got {name}"):
        GaussianHMM(2, 1).log_likelihood(GAUSS, X.astype(dtype))
    with pytest.raises(ValueError, match=f"obs must be float32 or float64 .*got {name}"):
        em(GaussianHMM(2, 1)).step(jax.random.PRNGKey(0), EMState(GAUSS, jnp.zeros((), jnp.int32)), X.astype(dtype))
    half = jax.tree_util.tree_map(lambda a: a.astype(dtype), GAUSS)
    with pytest.raises(ValueError, match=f"params.initial_probs must be float32 or float64 .*got {name}"):
        sample_hmm(jax.random.PRNGKey(0), half, num_sequences=1, length=2)


def test_float32_parameters_run_in_the_models_dtype():
    """Parameters of another float dtype are cast to the model's: float32 parameters in a float64
    model give float64 results equal to those of the float64 parameters (to float32's rounding of
    the parameters, here exact: 0.5, 0.75, 0.25)."""
    p64 = HMMParams(
        jnp.array([0.5, 0.5]),
        jnp.array([[0.75, 0.25], [0.25, 0.75]]),
        CategoricalEmissions(jnp.array([[0.75, 0.25], [0.25, 0.75]])),
    )
    p32 = jax.tree_util.tree_map(lambda a: a.astype(jnp.float32), p64)
    m = CategoricalHMM(2, 2, dtype=jnp.float64)
    got, want = m.log_likelihood(p32, OBS), m.log_likelihood(p64, OBS)
    assert got.dtype == jnp.float64
    np.testing.assert_allclose(got, want, rtol=1e-15)
