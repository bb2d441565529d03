"""Evaluation metrics."""

from vijax.metrics._calibration import Reliability, expected_calibration_error, reliability
from vijax.metrics._lda import DocumentCompletion, corpus_document_completion, document_completion, perplexity
from vijax.metrics._mixture import KLEstimate, bernoulli_mixture_kl, bernoulli_mixture_kl_exact, cluster_purity
from vijax.metrics._mixture import components_used, count_distinct
from vijax.metrics._nmf import dictionary_correlations, gap_nmf_components_used
from vijax.metrics._psis import KHAT_THRESHOLD, PSIS_MIN_DRAWS, PSISResult, psis
from vijax.metrics._arviz import to_arviz
from vijax.metrics._predictive import mean_log_predictive, match_components
from vijax.metrics._topics import TopicRecovery, top_words, topic_recovery

__all__ = [
    "DocumentCompletion",
    "Reliability",
    "expected_calibration_error",
    "reliability",
    "KHAT_THRESHOLD",
    "PSIS_MIN_DRAWS",
    "PSISResult",
    "psis",
    "to_arviz",
    "KLEstimate",
    "TopicRecovery",
    "bernoulli_mixture_kl",
    "bernoulli_mixture_kl_exact",
    "cluster_purity",
    "components_used",
    "corpus_document_completion",
    "count_distinct",
    "dictionary_correlations",
    "document_completion",
    "gap_nmf_components_used",
    "match_components",
    "mean_log_predictive",
    "perplexity",
    "top_words",
    "topic_recovery",
]
