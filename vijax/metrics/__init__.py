"""Evaluation metrics."""
from vijax.metrics._predictive import mean_log_predictive, match_components
from vijax.metrics._topics import TopicRecovery, top_words, topic_recovery

__all__ = ["TopicRecovery", "match_components", "mean_log_predictive", "top_words", "topic_recovery"]
