"""A conditionally conjugate model written here, in a test file only, runs with every registered
algorithm for conjugate models: what "a new model is one file" means.

The model: counts x_n ~ Poisson(lambda), lambda ~ Gamma(a, b). With t(lambda) = (log lambda,
lambda), log p(x_n | lambda) = <(x_n, -1), t(lambda)> - log x_n!, so the local step has no latent
variable and returns s = (sum x_n, -N) and the local terms -sum log x_n!; the exact posterior is
Gamma(a + sum x_n, b + N) (Blei, Kucukelbir and McAuliffe 2017, §4.2: the conjugate update
eta + sum s_n).
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.special import gammaln

from vijax import expfam
from vijax.inference import ALGORITHMS, M_STEPS, data_parallel, make_algorithm
from vijax.models import ConditionallyConjugateModel, LocalResult, finite_nonnegative


@dataclasses.dataclass(frozen=True)
class PoissonGamma:
    a: float = 2.0
    b: float = 1.0
    local_methods = ("meanfield",)

    def prior(self):
        return expfam.Gamma.from_shape_rate(jnp.asarray(self.a), jnp.asarray(self.b))

    def init_globals(self, key, batch=None):
        return expfam.Gamma.from_shape_rate(self.a * jnp.exp(0.1 * jax.random.normal(key)), jnp.asarray(self.b))

    def local_step(self, globals_view, x, key=None, method="meanfield"):
        x = jnp.asarray(x, jnp.result_type(float))
        stats = (jnp.sum(x), -jnp.asarray(x.shape[0], x.dtype))
        return LocalResult(stats, -jnp.sum(gammaln(x + 1.0)), None)

    def check_data(self, x):  # shapes and dtypes: a step runs it on abstract values
        if jnp.ndim(x) != 1:
            raise ValueError("x must be a 1-D array of counts")

    def batch_checks(self, x):  # values: at once for a concrete batch, inside the compiled step for a traced one
        return [finite_nonnegative("x", x)]


X = jnp.asarray(np.random.default_rng(0).poisson(3.0, 200), jnp.float64)
KEY = jax.random.PRNGKey(0)
CONJUGATE = [name for name in ALGORITHMS if name in ("cavi",) + tuple(M_STEPS.values())]


def test_it_is_a_conditionally_conjugate_model():
    assert isinstance(PoissonGamma(), ConditionallyConjugateModel)
    assert set(CONJUGATE) == {"cavi", "svi", "ssvi", "ssvi_a", "map"}


@pytest.mark.parametrize("name", CONJUGATE)
def test_every_conjugate_algorithm_runs_on_it(name):
    """One step with rho = 1 on all the data lands on the exact posterior (CAVI, SVI, SSVI-A and
    MAP-EM: their local step ignores the view here) or on the SSVI update, which differs only by V."""
    model = PoissonGamma()
    schedule = None if name == "cavi" else 1.0
    alg = make_algorithm(name, model, num_data=200, schedule=schedule)
    state, info = jax.jit(alg.step)(KEY, alg.init(KEY, X), X)
    q = state.q_global
    assert np.isfinite(float(info.elbo)) and bool(q.is_valid())
    if name != "ssvi":
        np.testing.assert_allclose(q.concentration, 2.0 + jnp.sum(X), rtol=1e-12)
        np.testing.assert_allclose(q.rate, 1.0 + 200, rtol=1e-12)


def test_cavi_elbo_is_the_log_evidence_at_the_exact_posterior():
    """With the exact posterior the ELBO equals log p(x) (closed form of the Poisson-Gamma)."""
    model = PoissonGamma()
    alg = make_algorithm("cavi", model, num_data=200)
    _, info = alg.step(KEY, alg.init(KEY, X), X)
    a, b, n, s = 2.0, 1.0, 200, float(jnp.sum(X))
    log_evidence = (
        a * np.log(b) - gammaln(a) + gammaln(a + s) - (a + s) * np.log(b + n) - float(jnp.sum(gammaln(X + 1.0)))
    )
    np.testing.assert_allclose(info.elbo, log_evidence, rtol=1e-10)


def test_and_with_data_parallel_and_minibatches():
    model = data_parallel(PoissonGamma())
    alg = make_algorithm("svi", model, num_data=200, schedule=0.5)
    state, _ = jax.jit(alg.step)(KEY, alg.init(KEY, X), X[:50])
    q0 = PoissonGamma().init_globals(KEY)
    want_a = 0.5 * q0.concentration + 0.5 * (2.0 + 4.0 * jnp.sum(X[:50]))
    np.testing.assert_allclose(state.q_global.concentration, want_a, rtol=1e-12)


def test_its_declared_checks_run_at_every_step_eager_or_compiled():
    """BatchChecked: check_data (shapes) and batch_checks (values) are the model's only declaration;
    a negative count is named with its position and the step, eagerly and from the compiled step."""
    from vijax.inference import jit_step
    from vijax.models import BatchChecked

    model = PoissonGamma()
    assert isinstance(model, BatchChecked)
    alg = make_algorithm("svi", model, num_data=200, schedule=0.5)
    state = alg.init(KEY, X)
    bad = X[:50].at[7].set(-1.0)
    for step in (alg.step, jit_step(alg.step)):
        with pytest.raises(ValueError, match=r"^x -1\.0 at \[7\] is not a finite number >= 0 \(in step 1\)"):
            step(KEY, state, bad)
    with pytest.raises(ValueError, match="x must be a 1-D array of counts"):
        alg.step(KEY, state, X[:50, None])


def test_a_check_data_that_reads_values_is_refused_by_name():
    class ReadsValues(PoissonGamma):
        def check_data(self, x):
            if np.any(np.asarray(x) < 0):
                raise ValueError("x must be non-negative")

    alg = make_algorithm("svi", ReadsValues(), num_data=200, schedule=0.5)
    with pytest.raises(TypeError, match="^ReadsValues.check_data must check shapes and dtypes only"):
        alg.step(KEY, alg.init(KEY, X), X[:50])
