"""Numerical algorithms that models share: per-row fixed-point iterations (:func:`iterate_per_row`,
safeguarded SQUAREM :func:`squarem_per_row`), rows of unequal length packed into tiles of one shape
(:func:`by_length_tiles`) and collapsed Gibbs sampling of token allocations
(:func:`collapsed_gibbs_allocations`). This layer imports neither models nor anything above them.
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
