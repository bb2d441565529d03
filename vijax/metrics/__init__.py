"""Evaluation metrics."""
from vijax.metrics._predictive import mean_log_predictive, match_components

__all__ = ["match_components", "mean_log_predictive"]
