"""data_parallel: a local step split across (simulated) CPU devices gives the single-device
result; every algorithm that calls ``model.local_step`` works with it unchanged.

conftest.py starts JAX with two host devices, so ``jax.devices()`` has two here."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax import expfam
from vijax.data import sample_lda_corpus
from vijax.inference import cavi, data_parallel, make_algorithm, restarts, schedules, ssvi, svi
from vijax.models import LDA, DiagonalGMM
from vijax.testing import assert_trees_close

DEVICES = jax.devices()


@pytest.fixture(scope="module")
def docs():
    return sample_lda_corpus(0, num_docs=24, num_topics=3, vocab_size=40, alpha=0.2, doc_length_mean=30).corpus


def test_two_devices_are_simulated():
    assert len(DEVICES) == 2
    assert data_parallel(LDA(3, 40)).num_devices == 2


@pytest.mark.parametrize("local", ["meanfield", "cvb0"])
def test_lda_local_step_split_equals_whole(docs, local):
    """Statistics and local terms are sums over documents; gamma comes back in the batch's order."""
    model = LDA(3, 40, alpha=0.2, eta=0.1, dtype="float64")
    q = model.init_globals(jax.random.PRNGKey(0))
    view = (q.mean_params()[0],)
    batch = docs.batch(range(24))
    whole = model.local_step(view, batch, method=local)
    split = data_parallel(model).local_step(view, batch, method=local)
    assert_trees_close(split, whole, rtol=1e-10, atol=1e-10)


@pytest.mark.slow
def test_svi_step_with_hyperparameters_split_equals_whole(docs):
    model = LDA(3, 40, alpha=0.5, eta=0.3, dtype="float64")
    plain = svi(model, num_data=240, hyper_step=1.0, ramp=True)
    par = svi(data_parallel(model), num_data=240, hyper_step=1.0, ramp=True)
    state = plain.init(jax.random.PRNGKey(0))
    batch = docs.batch(range(24))
    (s1, i1), (s2, i2) = (jax.jit(a.step)(jax.random.PRNGKey(1), state, batch) for a in (plain, par))
    assert_trees_close(s2, s1, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(i2.elbo, i1.elbo, rtol=1e-10)
    assert float(i1.hyper["alpha"]) != 0.5  # the hyperparameter step ran (and matched)


@pytest.mark.slow
def test_gmm_cavi_and_svi_split_equal_whole():
    r = np.random.default_rng(0)
    x = jnp.asarray(np.concatenate([r.normal(-2, 1, (30, 2)), r.normal(3, 0.7, (30, 2))]))
    model = DiagonalGMM.from_data(np.asarray(x), 3)
    for make in (lambda m: cavi(m), lambda m: svi(m, num_data=60, schedule=schedules.constant(0.5))):
        a, b = make(model), make(data_parallel(model))
        state = a.init(jax.random.PRNGKey(0), x)
        (s1, _), (s2, _) = a.step(jax.random.PRNGKey(1), state, x), b.step(jax.random.PRNGKey(1), state, x)
        assert_trees_close(s2.q_global, s1.q_global, rtol=1e-10, atol=1e-10)


@pytest.mark.slow  # CI time budget: run by `make test-slow`
def test_ssvi_and_restarts_split_equal_whole(docs):
    """SSVI samples beta outside the local step, so the same key gives the same update; restarts
    (a vmap over the step) compose with the shard_map inside it."""
    model = LDA(3, 40, alpha=0.2, eta=0.1, dtype="float64")
    batch = docs.batch(range(24))
    for make in (lambda m: ssvi(m, num_data=240, mode="full"), lambda m: restarts(svi(m, num_data=240), 3)):
        a, b = make(model), make(data_parallel(model))
        state = a.init(jax.random.PRNGKey(0))
        (s1, _), (s2, _) = (jax.jit(alg.step)(jax.random.PRNGKey(2), state, batch) for alg in (a, b))
        assert_trees_close(s2, s1, rtol=1e-8, atol=1e-8)


@pytest.mark.slow
def test_gibbs_on_one_device_reproduces_the_model_and_on_two_is_a_valid_estimate(docs):
    model = LDA(3, 40, alpha=0.2, eta=0.1, gibbs_sweeps=4, gibbs_burn_in=2, dtype="float64")
    q = model.init_globals(jax.random.PRNGKey(0))
    view = (q.mean_params()[0],)
    batch = docs.batch(range(24))
    key = jax.random.PRNGKey(3)
    whole = model.local_step(view, batch, key, method="gibbs")
    one = data_parallel(model, devices=DEVICES[:1]).local_step(view, batch, key, method="gibbs")
    assert_trees_close(one, whole, rtol=0, atol=0)
    two = data_parallel(model).local_step(view, batch, key, method="gibbs")
    # different draws, the same token counts per document and per word
    np.testing.assert_allclose(jnp.sum(two.local_params, -1), jnp.sum(whole.local_params, -1), rtol=1e-12)
    np.testing.assert_allclose(jnp.sum(two.suff_stats[0], 0), jnp.sum(whole.suff_stats[0], 0), rtol=1e-12)
    assert not np.allclose(two.suff_stats[0], whole.suff_stats[0])


def test_matrix_algorithm_and_delegation(docs):
    model = data_parallel(LDA(3, 40))
    assert model.num_topics == 3 and model.local_methods == LDA(3, 40).local_methods
    alg = make_algorithm("ssvi_a", model, num_data=240, local="cvb0")
    state, info = jax.jit(alg.step)(jax.random.PRNGKey(1), alg.init(jax.random.PRNGKey(0)), docs.batch(range(24)))
    assert np.isfinite(float(info.elbo))
    assert isinstance(state.q_global, expfam.Dirichlet)


def test_bad_input_is_named(docs):
    model = data_parallel(LDA(3, 40))
    q = model.init_globals(jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match=r"batch size \(23\) must be a multiple of the number of devices \(2\)"):
        model.local_step((q.mean_params()[0],), docs.batch(range(23)))
    with pytest.raises(ValueError, match="already data_parallel"):
        data_parallel(model)
    with pytest.raises(ValueError, match="local_step"):
        data_parallel(object())
    with pytest.raises(ValueError, match="at least one device"):
        data_parallel(LDA(3, 40), devices=[])


@pytest.mark.parametrize(
    "devices, match",
    [
        (["cpu"], r"^devices\[0\] must be a jax.Device, got 'cpu' \(str\); .*jax.devices\(\"cpu\"\)"),
        ("cpu", r"^devices must be a sequence of jax.Device objects, got the string 'cpu'; pass jax.devices\('cpu'\)"),
        (DEVICES[0], r"^devices must be a sequence of jax.Device objects"),
        ([DEVICES[0], DEVICES[0]], r"^devices must be distinct: .* is listed 2 times"),
    ],
    ids=["platform-in-list", "platform", "one-device", "twice"],
)
def test_devices_that_are_not_distinct_device_objects_are_named(devices, match):
    """A platform name, a lone device or a device listed twice is refused at construction, naming
    ``devices`` (a string met an AttributeError inside ``Mesh``)."""
    with pytest.raises(ValueError, match=match):
        data_parallel(LDA(3, 40), devices=devices)
    assert data_parallel(LDA(3, 40), devices=tuple(DEVICES)).num_devices == 2


def test_a_run_from_a_replicated_state_compiles_its_step_once_also_on_resume(tmp_path):
    """A step's states sit on the mesh: started there (``model.replicate``), the run's chunk traces the step
    once; a resumed run places the loaded checkpoint where its init state sits and traces it once too."""
    from vijax.run import run

    model = data_parallel(DiagonalGMM(2, 1))
    alg = svi(model, num_data=8, schedule=0.5)
    x = np.random.default_rng(0).normal(size=(8, 1)).astype(np.float32)
    traces = []

    def step(*args):
        traces.append(1)
        return alg.step(*args)

    state = model.replicate(alg.init(jax.random.PRNGKey(0)))
    assert all(
        leaf.sharding.is_fully_replicated and len(leaf.sharding.device_set) == 2 for leaf in jax.tree.leaves(state)
    )
    kw = dict(batch_fn=lambda k, t: jnp.asarray(x), chunk_size=2, checkpoint_every=2, checkpoint_dir=str(tmp_path))
    kw.update(init_state=lambda k: model.replicate(alg.init(k)), progress=False)
    run(alg._replace(step=step), jax.random.PRNGKey(1), num_steps=4, **kw)
    assert len(traces) == 1
    traces.clear()
    resumed = run(alg._replace(step=step), jax.random.PRNGKey(1), num_steps=8, resume=True, **kw)
    assert len(traces) == 1 and int(resumed.num_steps) == 8
