"""The stochastic conjugate update pinned to its formula with rho < 1 and N / S != 1:

    lambda' = (1 - rho_t) lambda + rho_t (eta + (N_t / S) s),     rho_t = scale (t + tau)^-kappa,

computed independently of the algorithms' code, in closed form on a one-component Gaussian model
(every responsibility is 1, so s = (sum x, -S / 2) for q(mu) = N(m, v) with natural parameters
(m / v, -1 / (2 v))); LDA's SVI step: tests/inference/test_minibatch_scale.py. A prior weighted by
N / S, a statistic weighted by 1, or rho_t taken at t + 1 fails these."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax.inference import map_em, schedules, ssvi_a, svi
from vijax.models import UnivariateGMM

SIGMA2, N = 4.0, 50
X = np.array([0.3, -1.2, 2.5, 0.7])  # S = 4, N / S = 12.5


def _expected_normal(m, v, rho, scale):
    """(mean, variance) of q(mu) after the update, by hand."""
    prec = (1.0 - rho) / v + rho * (1.0 / SIGMA2 + scale * X.size)
    lin = (1.0 - rho) * m / v + rho * scale * X.sum()
    return lin / prec, 1.0 / prec


@pytest.mark.parametrize("factory", [svi, ssvi_a, map_em], ids=["svi", "ssvi_a", "map_em"])
@pytest.mark.parametrize(("ramp", "count"), [(False, 0), (False, 5), (True, 0), (True, 2)])
def test_one_step_of_a_one_component_gaussian_is_the_closed_form(factory, ramp, count):
    """rho_t = 0.9 (t + 2.5)^-0.6 at t = count (rtol 1e-6: float32); N_t / S = N / S, or
    min(t + 1, N / S) with ramp; q's mean and variance in float64 to rtol 1e-12."""
    schedule = schedules.robbins_monro(0.9, tau=2.5, kappa=0.6)
    model = UnivariateGMM(num_components=1, prior_variance=SIGMA2)
    alg = factory(model, num_data=N, schedule=schedule, ramp=ramp)
    state = alg.init(jax.random.PRNGKey(0))._replace(count=jnp.asarray(count, jnp.int32))
    q = state.q_global
    m, v = float(q.mean[0]), float(q.variance[0])
    new, info = alg.step(jax.random.PRNGKey(1), state, jnp.asarray(X))
    # the schedule computes in float32 (rtol 1e-6); the update is then pinned at the rho it used
    np.testing.assert_allclose(float(info.step_size), 0.9 * (count + 2.5) ** -0.6, rtol=1e-6)
    rho = float(info.step_size)
    scale = min(count + 1.0, N / X.size) if ramp else N / X.size
    mean, var = _expected_normal(m, v, rho, scale)
    np.testing.assert_allclose(float(new.q_global.mean[0]), mean, rtol=1e-12)
    np.testing.assert_allclose(float(new.q_global.variance[0]), var, rtol=1e-12)


@pytest.mark.parametrize(("scale", "tau", "kappa"), [(0.9, 2.5, 0.6), (1.0, 1.0, 0.7), (3.0, 9.0, 1.0)])
def test_robbins_monro_values(scale, tau, kappa):
    """rho_t = scale (t + tau)^-kappa at t = 0, 1, 2, 7, 100, 12345 (float64 reference; the
    schedule computes in float32: rtol 1e-6). t + 1 + tau in place of t + tau is off by >= 4e-5
    relative even at t = 12345."""
    sched = schedules.robbins_monro(scale, tau=tau, kappa=kappa)
    for t in (0, 1, 2, 7, 100, 12345):
        want = scale * (t + tau) ** -kappa
        np.testing.assert_allclose(float(sched(jnp.asarray(t, jnp.int32))), want, rtol=1e-6, err_msg=f"t = {t}")
    default = schedules.default_schedule()
    np.testing.assert_allclose([float(default(t)) for t in (0, 1, 3)], [1.0, 2**-0.7, 4**-0.7], rtol=1e-6)
