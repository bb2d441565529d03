"""Metrics of NMF fits (``vijax.metrics``): dictionary correlations (Hoffman and Blei 2015, figure
5) and the components a GaP-NMF fit uses."""

import jax
import numpy as np
import pytest

from vijax.data import sample_speech_spectrogram
from vijax.metrics import dictionary_correlations, gap_nmf_components_used
from vijax.models import GaPNMF


def test_dictionary_correlations():
    rng = np.random.default_rng(0)
    w = rng.gamma(1.0, size=(30, 3))
    est = np.concatenate([2.0 * w[:, ::-1], np.ones((30, 1))], axis=1)  # permuted, scaled, one constant column
    np.testing.assert_allclose(dictionary_correlations(w, est), 1.0, rtol=1e-12)
    c = dictionary_correlations(w, np.ones((30, 2)))
    np.testing.assert_array_equal(c, 0.0)
    ref = max(np.corrcoef(w[:, 0], w[:, j])[0, 1] for j in (1, 2))
    np.testing.assert_allclose(dictionary_correlations(w[:, :1], w[:, 1:]), [ref], rtol=1e-12)


@pytest.mark.slow
def test_gap_nmf_components_used_counts_shares():
    """At any q every component explains a positive share of the counts (so min_share 0 counts
    all K), none explains more than all of them, and the count falls as min_share grows."""
    data = sample_speech_spectrogram(jax.random.PRNGKey(0), 17, 3, 40)
    frames = data.y.T
    model = GaPNMF(6, 17)
    q = model.init_globals(jax.random.PRNGKey(1), frames)
    assert gap_nmf_components_used(model, q, frames, min_share=0.0) == 6
    assert gap_nmf_components_used(model, q, frames, min_share=1.0 + 1e-9) == 0
    counts = [gap_nmf_components_used(model, q, frames, min_share=m) for m in (1e-3, 0.1, 0.2, 0.5)]
    assert counts == sorted(counts, reverse=True) and 1 <= counts[0] <= 6
