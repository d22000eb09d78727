"""Benchmark scenes built directly with the core (no Blender): N 27-particle cubes falling into a pile."""
from __future__ import annotations

import math

import numpy as np

from addon.core import Material, ModelBuilder
from addon.core.rotations import axis_angle_quaternions, quaternion_to_matrix
from addon.core.shapes import cube_particles


def cube_pile(count: int, side: float = 1.0, spacing: float = 1.6, seed: int = 0, ground: bool = True,
              per_edge: int = 3, per_row: int | None = None):
    """``count`` cubes of ``per_edge``^3 particles in a block about as wide as tall (or ``per_row``
    cubes a side: a wide one lands as a field of debris), slightly tilted, above a ground plane.

    Spacing 1.6 side: a cube tilted by up to 0.25 rad and shifted by 0.1 never overlaps a neighbour.
    """
    rng = np.random.default_rng(seed)
    if per_row is None:
        per_row = max(1, math.ceil((count / 2) ** (1 / 3) * 1.26))  # footprint a bit wider than the height
    idx = np.arange(count)
    layer, cell = np.divmod(idx, per_row * per_row)
    ix, iy = np.divmod(cell, per_row)
    centre = (per_row - 1) / 2
    positions = np.stack([(ix - centre) * spacing, (iy - centre) * spacing, side * 0.6 + layer * spacing], 1)
    positions[:, :2] += rng.uniform(-0.1, 0.1, size=(count, 2)) * side
    # small random tilt so the block tumbles into a pile rather than landing as a block
    axis = rng.normal(size=(count, 3))
    angle = rng.uniform(-0.25, 0.25, size=count)
    quats = axis_angle_quaternions(axis, angle)
    local = cube_particles(side, per_edge)
    # rotate the particle layout of every cube (world-space particles for add_bodies)
    rot = quaternion_to_matrix(quats)
    points = np.matmul(local[None], rot.transpose(0, 2, 1)) + positions[:, None, :]
    material = Material(friction=0.5, restitution=0.2)
    builder = ModelBuilder(side / (2 * per_edge))
    # solid cubes: voxels reach their corners, along each cube's turned lattice (as a conversion gives)
    builder.add_bodies(points, masses=np.full(count, 1000.0 * side**3), materials=[material] * count,
                       corner_reach=1.0, lattice_orientations=quats)
    if ground:
        builder.add_ground_plane(0.0, material=material)
    return builder.finalize()


def uv_sphere(radius: float, segments: int = 32, rings: int = 16):
    """A UV sphere's vertices and triangles (wound outwards), as Blender's primitive makes it: the
    ball the benchmarks voxelize (bench/impacts.py, bench/contact_figures.py)."""
    verts = [(0.0, 0.0, -radius)]
    for i in range(1, rings):
        th = math.pi * i / rings - math.pi / 2
        for j in range(segments):
            ph = 2 * math.pi * j / segments
            verts.append((radius * math.cos(th) * math.cos(ph), radius * math.cos(th) * math.sin(ph),
                          radius * math.sin(th)))
    verts.append((0.0, 0.0, radius))
    top = len(verts) - 1

    def ring(i, j):
        return 1 + (i - 1) * segments + (j % segments)

    tris = []
    for j in range(segments):
        tris += [(0, ring(1, j + 1), ring(1, j)), (top, ring(rings - 1, j), ring(rings - 1, j + 1))]
    for i in range(1, rings - 1):
        for j in range(segments):
            a, b, c, d = ring(i, j), ring(i, j + 1), ring(i + 1, j + 1), ring(i + 1, j)
            tris += [(a, b, c), (a, c, d)]
    return np.array(verts), np.array(tris)
