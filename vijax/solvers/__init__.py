"""Solvers: numerical algorithms that models share, independent of any one model.

- Per-row fixed-point iterations, each row frozen at its own convergence: the plain iteration
  (:func:`iterate_per_row`) and safeguarded SQUAREM (:func:`squarem_per_row`; Varadhan and
  Roland 2008), for local steps that solve one small problem per datum.
- Rows of unequal length packed into tiles of one fixed shape, so that an iteration over them
  compiles once: :func:`by_length_tiles` (:class:`Tile`, :func:`tile_shape`, :func:`tile_sum`,
  :func:`tile_spread`).
- Collapsed Gibbs sampling of token allocations with Dirichlet proportions integrated out and
  fixed component weights (:func:`collapsed_gibbs_allocations`), LDA's Gibbs E-step.

This layer sits between ``vijax.expfam`` and ``vijax.models``: it imports neither models nor
anything above them.
"""

from vijax.solvers._blocks import Tile, by_length_tiles, tile_shape, tile_spread, tile_sum
from vijax.solvers._fixed_point import iterate_per_row, squarem_per_row
from vijax.solvers._gibbs import GIBBS_CHUNK, collapsed_gibbs_allocations

__all__ = [
    "GIBBS_CHUNK",
    "Tile",
    "by_length_tiles",
    "collapsed_gibbs_allocations",
    "iterate_per_row",
    "squarem_per_row",
    "tile_shape",
    "tile_spread",
    "tile_sum",
]
