"""The lda_ssvi_restarts experiment (SVI restarted from each method's solution, Hoffman & Blei 2015,
Figure 3; SGRLD beside): the two-phase program hands the source's final lambda to SVI bit for bit and
then takes exactly SVI's step from it; bad configs are refused before anything compiles; end to end
(slow) every source's training ELBO and held-out score are finite before and after the restart and
summarised as the paper does (mean and range over restarts)."""

import json

import jax
import numpy as np
import pytest

from vijax.data import sample_lda_corpus
from vijax.inference import init_from, svi
from vijax.models import LDA
from vijax.run import load_config, run_experiment
from vijax.run.experiments.lda_ssvi import then


def _equal(a, b):
    return all(np.array_equal(x, y) for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)))


def _two_phases():
    docs = sample_lda_corpus(0, num_docs=24, num_topics=2, vocab_size=8, alpha=0.2, doc_length_mean=10.0).corpus
    model = LDA(2, 8, alpha=0.2, eta=0.1, max_iters=10)
    first = svi(model, num_data=24, schedule=0.5, local="meanfield")
    second = svi(model, num_data=24, schedule=0.3, local="meanfield")
    batches = [docs.batch(np.arange(8 * t, 8 * t + 8)) for t in range(3)]
    keys = [jax.random.PRNGKey(10 + t) for t in range(3)]
    return first, second, then(first, second, at=2), batches, keys


@pytest.mark.slow
def test_restart_starts_from_the_sources_final_lambda_exactly():
    """then(first, second, at=2) on LDA: two steps of first, then second from first's final q. The
    hand-off is exact: on a batch without documents SVI's step keeps lambda bit for bit (rho_t taken
    as 0), so after step 3 second's lambda is first's final lambda to the bit (count 1), and first's
    state is left as it was; on a real batch step 3 moves it."""
    first, second, alg, batches, keys = _two_phases()
    step = jax.jit(alg.step)
    state = alg.init(jax.random.PRNGKey(0))
    for t in range(2):
        state, info = step(keys[t], state, batches[t])
        assert int(info.phase) == 0 and int(state.first.count) == t + 1 and int(state.second.count) == 0
    assert _equal(state.q_global, state.first.q_global)
    empty = batches[2]._replace(counts=np.zeros_like(batches[2].counts))
    handed, info = step(keys[2], state, empty)
    assert int(info.phase) == 1 and int(handed.count) == 3 and int(handed.second.count) == 1
    np.testing.assert_array_equal(handed.second.q_global.eta, state.first.q_global.eta)
    assert not np.array_equal(state.second.q_global.eta, state.first.q_global.eta)  # not the unstarted state's
    assert _equal(handed.first, state.first)
    stepped, _ = step(keys[2], state, batches[2])
    assert not np.allclose(stepped.q_global.eta, state.first.q_global.eta)


@pytest.mark.slow  # CI time budget (three more compiled steps)
def test_each_phase_is_its_algorithms_step():
    """Steps 1-2 are first's steps with the step key's first half; step 3 is second's step from
    init_from(second, the key's second half, first's final q) (rtol 1e-12: one program against another)."""
    first, second, alg, batches, keys = _two_phases()
    step, first_step, second_step = jax.jit(alg.step), jax.jit(first.step), jax.jit(second.step)
    state = alg.init(jax.random.PRNGKey(0))
    ref = first.init(jax.random.split(jax.random.PRNGKey(0))[0])
    assert _equal(state.first, ref)
    for t in range(2):
        state, _ = step(keys[t], state, batches[t])
        ref, _ = first_step(jax.random.split(keys[t])[0], ref, batches[t])
        np.testing.assert_allclose(state.q_global.concentration, ref.q_global.concentration, rtol=1e-12)
    k_step, k_init = jax.random.split(keys[2])
    want, _ = second_step(k_step, init_from(second, k_init, state.first.q_global), batches[2])
    state, _ = step(keys[2], state, batches[2])
    np.testing.assert_allclose(state.second.q_global.concentration, want.q_global.concentration, rtol=1e-12)
    np.testing.assert_allclose(state.q_global.concentration, want.q_global.concentration, rtol=1e-12)


TINY = {
    "experiment": "lda_ssvi_restarts",
    "model": {
        "num_topics": 3,
        "alpha": 0.1,
        "eta": 0.1,
        "max_iters": 20,
        "cvb0_iters": 10,
        "gibbs_sweeps": 2,
        "gibbs_burn_in": 1,
    },
    "algorithm": {
        "sources": ["meanfield/meanfield", "ssvi/cvb0"],
        "restarts": 2,
        "batch_size": 20,
        "tau": 4.0,
        "restart_steps": 3,
    },
    "data": {
        "num_docs": 200,
        "vocab_size": 30,
        "true_topics": 3,
        "doc_length_mean": 15.0,
        "max_test_docs": 20,
        "test_fraction": 0.1,
    },
    "run": {"num_steps": 6, "chunk_size": 3, "eval_every": 3, "progress": False},
}


@pytest.mark.parametrize(
    "override, match",
    [
        ({"algorithm": {"sources": ["svi/meanfield"]}}, "sources"),
        ({"algorithm": {"sources": ["meanfield"]}}, "sources"),
        ({"algorithm": {"sources": ["ssvi/exact"]}}, "sources"),
        ({"algorithm": {"sources": []}}, "sources"),
        ({"algorithm": {"restart_steps": 6}}, "restart_steps"),
        ({"algorithm": {"restart_steps": 2}}, "restart_steps"),  # the switch at step 4: not an evaluation step
        ({"data": {"corpus": "nips"}}, "corpus"),
    ],
)
def test_bad_config_is_refused(tmp_path, override, match):
    raw = {k: dict(v) if isinstance(v, dict) else v for k, v in TINY.items()}
    for section, values in override.items():
        raw[section] = dict(raw[section], **values)
    with pytest.raises(ValueError, match=match):
        run_experiment(load_config(dict(raw, output={"dir": str(tmp_path)})))


@pytest.mark.slow  # CI time budget (three programs compiled): run by `make test-slow`
def test_restarts_end_to_end(tmp_path):
    """SVI and SSVI (CVB0) as sources, 3 steps each, SVI's restart for 3 more, SGRLD beside; two
    restarts each."""
    _, metrics = run_experiment(load_config(dict(TINY, output={"dir": str(tmp_path)})))
    out = json.loads((tmp_path / "restarts.json").read_text())
    assert out["switch_step"] == 3 and [r["label"] for r in out["runs"]] == ["SVI", "ssvi/cvb0", "SGRLD"]
    for r in out["runs"]:
        assert [e["step"] for e in r["evals"]] == [3, 6]
        keys = ("heldout", "train_elbo") if r["kind"] == "source" else ("heldout",)
        for e in r["evals"]:
            for key in keys:
                each = [e[f"{key}_r{i}"] for i in range(2)]
                assert np.all(np.isfinite(each))
                np.testing.assert_allclose(e[f"{key}_mean"], np.mean(each), rtol=1e-12)
                assert (e[f"{key}_min"], e[f"{key}_max"]) == (min(each), max(each))  # the paper's error bars
            assert e["heldout_mean"] > -np.log(30)  # better than uniform topics over V = 30 words
        if r["kind"] == "source":
            row = metrics["summary"][r["label"]]["train_elbo"]
            assert row["before"][0] == r["evals"][0]["train_elbo_mean"]
            assert row["after"][0] == r["evals"][1]["train_elbo_mean"]
            assert row["after"][0] < 0  # an ELBO per token of a discrete model: a log probability bound
        else:
            assert "train_elbo_mean" not in r["evals"][0]
    assert (tmp_path / "restarts_synthetic.png").stat().st_size > 0
