"""The run-layer tests drive the built-in experiments, which register on import."""

import vijax.run.experiments  # noqa: F401
