"""Particle layouts of simple shapes, in the body's own frame (centred on the origin)."""
from __future__ import annotations

import numpy as np


def box_particles(counts=(3, 3, 3), spacing: float = 1.0) -> np.ndarray:
    """Particles on a regular grid, ``counts`` along x, y, z, ``spacing`` apart, centred on 0.

    A cube of side s filled at spacing s/3 gives the seed's 27-particle cube (fig. 5.1).
    """
    axes = [(np.arange(n) - (n - 1) / 2.0) * spacing for n in counts]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1)
    return grid.reshape(-1, 3)


def cube_particles(side: float = 1.0, per_edge: int = 3) -> np.ndarray:
    """The seed's particle cube: ``per_edge``^3 particles of diameter side/per_edge filling the cube."""
    return box_particles((per_edge,) * 3, side / per_edge)
