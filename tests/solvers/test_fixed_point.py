"""The per-row fixed-point iterations (``vijax.solvers.iterate_per_row``, ``squarem_per_row``) on
linear contractions with known fixed points: each row stops at its own convergence whatever its
companions, the update cap holds, SQUAREM reaches the fixed point in far fewer updates than the
plain iteration and never lowers the objective. LDA's use of both:
tests/models/test_lda.py."""

import jax
import jax.numpy as jnp
import numpy as np

from vijax.solvers import iterate_per_row, squarem_per_row

RATES = jnp.array([0.2, 0.9, 0.99])  # per-row contraction rates: fast, slow, very slow
TARGET = jnp.array([[1.0, 2.0], [3.0, -1.0], [0.5, 0.5]])  # per-row fixed points


def _update(x):
    return TARGET + RATES[:, None] * (x - TARGET)


def _update_and_objective(x):
    """F and f(x) = -|x - x*|^2, which a contraction towards x* never lowers."""
    return _update(x), -jnp.sum((x - TARGET) ** 2, axis=-1)


def _row_update(x, i):
    """``_update_and_objective`` of row i alone, x (1, 2)."""
    target, rate = TARGET[i : i + 1], RATES[i : i + 1, None]
    return target + rate * (x - target), -jnp.sum((x - target) ** 2, axis=-1)


def test_iterate_per_row_freezes_each_row_on_its_own():
    x0 = jnp.zeros((3, 2))
    out = iterate_per_row(_update, lambda x: x, x0, 1e-6, 10_000)
    np.testing.assert_allclose(out, TARGET, atol=1e-3)
    for i in range(3):  # a row's result does not depend on the rows it is computed with
        alone = iterate_per_row(lambda x, i=i: _row_update(x, i)[0], lambda x: x, x0[i : i + 1], 1e-6, 10_000)
        np.testing.assert_allclose(out[i], alone[0], rtol=1e-13)
    np.testing.assert_allclose(iterate_per_row(_update, lambda x: x, x0, 0.0, 1), _update(x0), rtol=1e-13)


def test_iterate_per_row_stops_on_the_summary():
    """The stopping rule looks at ``summary``: a state whose summary does not change stops after
    one update, whatever the state does."""
    x0 = jnp.zeros((3, 2))
    out = iterate_per_row(_update, lambda x: jnp.zeros((x.shape[0], 1)), x0, 1e-6, 10_000)
    np.testing.assert_allclose(out, _update(x0), rtol=1e-13)


def test_squarem_accelerates_and_never_lowers_the_objective():
    x0 = jnp.zeros((3, 2))
    plain = iterate_per_row(_update, lambda x: x, x0, 0.0, 30)
    fast = squarem_per_row(_update_and_objective, x0, 0.0, 30, -10.0)
    err_plain = np.abs(np.asarray(plain - TARGET)).max(axis=-1)
    err_fast = np.abs(np.asarray(fast - TARGET)).max(axis=-1)
    assert np.all(err_fast[1:] < err_plain[1:] / 100), (err_fast, err_plain)  # rates 0.9, 0.99
    assert np.all(err_fast <= err_plain + 1e-12)
    objective = [
        np.asarray(_update_and_objective(squarem_per_row(_update_and_objective, x0, 0.0, i, -10.0))[1])
        for i in range(3, 31, 3)
    ]
    assert np.all(np.diff(objective, axis=0) >= -1e-12)
    np.testing.assert_allclose(squarem_per_row(_update_and_objective, x0, 1e-10, 10_000, -10.0), TARGET, atol=1e-8)


def test_squarem_rows_are_independent():
    x0 = jnp.zeros((3, 2))
    out = squarem_per_row(_update_and_objective, x0, 1e-9, 300, 0.25)
    for i in range(3):
        alone = squarem_per_row(lambda x, i=i: _row_update(x, i), x0[i : i + 1], 1e-9, 300, 0.25)
        np.testing.assert_allclose(out[i], alone[0], rtol=1e-13)


def test_squarem_jits_and_vmaps():
    x0 = jnp.zeros((3, 2))
    f = jax.jit(lambda x: squarem_per_row(_update_and_objective, x, 1e-9, 300, -10.0))
    np.testing.assert_allclose(f(x0), squarem_per_row(_update_and_objective, x0, 1e-9, 300, -10.0), rtol=1e-13)
    starts = jnp.stack([x0, x0 + 1.0])
    np.testing.assert_allclose(jax.vmap(f)(starts), jnp.stack([TARGET, TARGET]), atol=1e-6)
