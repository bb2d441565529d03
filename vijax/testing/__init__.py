"""Helpers for testing vijax and code built on it."""
from vijax.testing._asserts import assert_trees_close, mc_mean_and_stderr

__all__ = ["assert_trees_close", "mc_mean_and_stderr"]
