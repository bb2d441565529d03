"""Evaluation metrics."""
from vijax.metrics._lda import DocumentCompletion, corpus_document_completion, document_completion, perplexity
from vijax.metrics._predictive import mean_log_predictive, match_components
from vijax.metrics._topics import TopicRecovery, top_words, topic_recovery

__all__ = [
    "DocumentCompletion",
    "TopicRecovery",
    "corpus_document_completion",
    "document_completion",
    "match_components",
    "mean_log_predictive",
    "perplexity",
    "top_words",
    "topic_recovery",
]
