"""Glue: breakable bonds between touching pieces, found from their voxels at conversion.

Blender users glue fractured pieces with *Connect* (``rigidbody.connect``): one constraint object per
pair, which takes hours at 8,000 pieces. Here two pieces of one glue group that touch are bonded by
one FIXED joint (core.joints), stored as arrays (``ModelBuilder.add_bonds``): 100,000 pieces bond in
seconds without an object per bond.

Touching: a particle of one piece and a particle of another lie within ``2 r + tolerance`` of each
other (centre to centre: their voxels share a face, or face each other across a gap of at most the
tolerance). The pairs are found on a grid of cells one reach wide (the particles sorted by cell key,
each cell's particles met with those of its own cell and of 13 of its 26 neighbours), chunked so
that memory stays bounded; no Python loop per body or per bond.

A bond joins the two pieces of every touching pair (body_a < body_b). Its pivot is the centroid of
its touching pairs' midpoints (the glued face's centre). Its contact area is the area the two
pieces' voxel faces share: each pair adds the overlap of its two voxels' facing squares, measured
along the first piece's voxel lattice (the largest offset is across the face, the two others
sideways). Counting pairs would not do: each object is voxelized on its own grid, centred on its
bounding box, so two pieces' lattices are offset along the face and a voxel faces one, two or four
across it. Where the lattices overlap across the face, so that a second layer comes within reach,
each voxel counts its nearest layer only, and at most one voxel face. Boxes of sizes that are not
voxel multiples, face to face, bond over 0.8 to 1.05 times the overlap of their voxels' faces (the
voxelized pieces stand out of their meshes by up to half a voxel, so small faces come out up to
1.8 times their mesh's area). For the same reason such boxes sharing only an edge overlap there by
a strip of voxels and bond over it (1 to 4 voxel faces); pieces of whole voxels lined up do not.

Strength is a stress (Pa, N/m^2): a bond breaks under a steady pull or shear of strength x area
newtons along one of its axes (the world's at the start, turning with the pieces: its rows). Blender's ``breaking_threshold`` is an impulse per Bullet substep and constraint row
(core.joints), so the bond's threshold is strength x area x bullet_substep (``breaking_thresholds``):
the same load breaks it whatever the world's substeps. Bullet applies that one threshold to the
angular rows as well, in N m s: a bond breaks in bending when the bending moment in N m reaches
strength x area (as if over a lever of 1 m), the same rule as Blender's own constraints, so a glued
piece and a piece held by Blender's constraint of the same threshold break alike.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# How far apart (centre to centre, beyond 2 r) two particles of different pieces may be and still
# be touching, in voxels (2 r). 0.3 voxel takes a face whose two voxel lattices are offset across it
# (half a voxel sideways along both face axes puts the nearest particles sqrt(6) r = 2.45 r apart)
# and a gap of up to 0.3 voxel straight across (fractured pieces: none to a fraction of a voxel),
# and stays clear of pieces that only share an edge on one lattice, whose nearest particles are
# 2 sqrt(2) r = 2.83 r apart, with 0.23 r to spare for the rounding of world transforms.
GAP_TOLERANCE = 0.3
# Glue strength's default: 100 kPa (0.1 MPa), the bond strength of a weak mortar (lime mortar
# bonds at about 0.1-0.5 MPa; concrete itself holds 2-5 MPa in tension). A piece of density
# 1000 kg/m^3 hangs from a glued face of its own width up to 10 m long (strength / (density g)),
# so a glued wall or tower stands, while a heavy impact, whose impulse is thousands of times a
# piece's weight per substep, breaks it. It is also what Blender's Connect gives: its default
# threshold 10 at Blender's default 240 substeps per second is 2,400 N, 100 kPa over a 15 cm square.
DEFAULT_GLUE_STRENGTH = 100_000.0
# Touching candidates examined at once (about 100 bytes each while examined)
CHUNK_PAIRS = 4_000_000
# the cell offsets each cell's particles are met with besides its own: one of each opposite pair, the
# one after it in key order (_candidate_pairs)
_HALF_NEIGHBOURS = np.array([(i, j, k) for i in (-1, 0, 1) for j in (-1, 0, 1) for k in (-1, 0, 1)
                             if (i, j, k) > (0, 0, 0)], dtype=np.int64)


@dataclass(frozen=True)
class GlueSettings:
    """One object's glue (``Object.prb`` / ``Collection.prb_glue`` in Blender; its defaults are these)."""

    enabled: bool = False  # bond this piece to the touching pieces of its group
    strength: float = DEFAULT_GLUE_STRENGTH  # Pa: a bond breaks under strength x contact area newtons
    group: str = ""  # only pieces of one group bond ("": the Blender layer names the object's collection)

    def __post_init__(self):
        if self.enabled and not (self.strength > 0 and math.isfinite(self.strength)):
            raise ValueError(f"glue strength must be a finite number of pascals above 0, got {self.strength}")


@dataclass
class Bonds:
    """The bonds between touching pieces (B of them), body_a < body_b."""

    body_a: np.ndarray  # (B,) int32
    body_b: np.ndarray  # (B,) int32
    pivot: np.ndarray  # (B, 3) world: the centroid of the touching pairs' midpoints
    area: np.ndarray  # (B,) m^2
    pair_count: np.ndarray  # (B,) touching particle pairs

    @property
    def count(self) -> int:
        return int(self.body_a.shape[0])


def _cell_keys(cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(key (N,) int64, strides (3,)) of integer cells (N, 3): neighbouring cells' keys differ by the
    offset's dot product with the strides. Each axis's occupied coordinates are packed first (a gap
    of more than one empty cell kept as one), so a sparse scene does not overflow the key."""
    packed = np.empty_like(cells)
    for axis in range(3):
        values, inverse = np.unique(cells[:, axis], return_inverse=True)
        steps = np.minimum(np.diff(values), 2)
        packed[:, axis] = np.concatenate([[1], 1 + np.cumsum(steps)])[inverse.reshape(-1)]
    dims = packed.max(axis=0) + 2  # one empty cell beyond each end: no key wraps to another row
    if float(dims[0]) * float(dims[1]) * float(dims[2]) >= 2.0**62:
        raise ValueError("the glued pieces span too many particle sizes across the scene to find their "
                         "bonds: use a larger particle radius")
    strides = np.array([dims[1] * dims[2], dims[2], 1], dtype=np.int64)
    return packed @ strides, strides


def _candidate_pairs(cell_a, cell_b, starts, counts):
    """Chunks of (sorted index a, sorted index b), a < b, of every particle of cell_a's cells with
    every one of cell_b's: cell_b is cell_a or comes after it in key order (a half neighbour), so
    a < b is the one test needed to meet each pair of one cell once."""
    start_a, start_b, width = starts[cell_a], starts[cell_b], counts[cell_b]
    sizes = counts[cell_a] * width
    ends = np.cumsum(sizes)
    total = int(ends[-1]) if len(ends) else 0
    edges = np.concatenate([[0], np.searchsorted(ends, np.arange(CHUNK_PAIRS, total, CHUNK_PAIRS), side="right"),
                            [len(sizes)]])
    for lo, hi in zip(edges[:-1], edges[1:]):
        if hi <= lo:
            continue
        size = sizes[lo:hi]
        which = np.repeat(np.arange(lo, hi), size)
        row, column = np.divmod(np.arange(int(size.sum())) - np.repeat(np.cumsum(size) - size, size), width[which])
        a = start_a[which] + row
        b = start_b[which] + column
        keep = a < b
        yield a[keep], b[keep]


def touching_pairs(positions, particle_body, particle_group, radius: float,
                   tolerance: float = GAP_TOLERANCE) -> tuple[np.ndarray, np.ndarray]:
    """(particle a, particle b) of every pair of particles of different bodies of one group (>= 0;
    -1: not glued) whose centres are at most 2 radius (1 + tolerance) apart."""
    positions = np.asarray(positions, dtype=np.float64).reshape(-1, 3)
    particle_body = np.asarray(particle_body, dtype=np.int64).reshape(-1)
    particle_group = np.asarray(particle_group, dtype=np.int64).reshape(-1)
    reach = 2.0 * radius * (1.0 + tolerance)
    glued = np.flatnonzero(particle_group >= 0)
    empty = (np.zeros(0, dtype=np.int64),) * 2
    if len(glued) < 2:
        return empty
    points = positions[glued]
    key, strides = _cell_keys(np.floor((points - points.min(axis=0)) / reach).astype(np.int64))
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    cells, starts, counts = np.unique(sorted_key, return_index=True, return_counts=True)
    particle = glued[order]  # the particles in cell order
    body = particle_body[particle]
    # one label per (group, body): a candidate counts when the labels differ but not their groups (the
    # group in the high bits); the float32 offsets from the first corner round by 6e-8 of the scene's
    # size, 0.006 r across 100,000 radii, inside the 0.23 r that keeps an edge apart (GAP_TOLERANCE)
    label = (particle_group[particle] << 32) | body
    point = (points[order] - points.min(axis=0)).astype(np.float32)
    one_group = bool(particle_group[glued].min() == particle_group[glued].max())
    # a cell whose particles are all of one body meets another such cell of the same body for nothing
    one_body = np.where(np.minimum.reduceat(body, starts) == np.maximum.reduceat(body, starts), body[starts], -1)
    found_a, found_b = [], []
    offsets = np.concatenate([[0], _HALF_NEIGHBOURS @ strides])
    # a block of cells at a time with all of its neighbours: the memory stays bounded and what one
    # block reads lies close together in cell order
    block_cells = max(1, CHUNK_PAIRS // 32)
    for lo in range(0, len(cells), block_cells):
        block = np.arange(lo, min(lo + block_cells, len(cells)))
        target = (cells[block][None, :] + offsets[:, None]).reshape(-1)
        where = np.minimum(np.searchsorted(cells, target), len(cells) - 1)
        present = cells[where] == target
        cell_a, cell_b = np.tile(block, len(offsets))[present], where[present]
        useful = (one_body[cell_a] < 0) | (one_body[cell_a] != one_body[cell_b])
        for a, b in _candidate_pairs(cell_a[useful], cell_b[useful], starts, counts):
            label_a, label_b = label[a], label[b]
            keep = label_a != label_b
            if not one_group:
                keep &= (label_a >> 32) == (label_b >> 32)
            a, b = a[keep], b[keep]
            gap = point[a] - point[b]
            keep = np.einsum("ij,ij->i", gap, gap) <= np.float32(reach * reach)
            found_a.append(particle[a[keep]])
            found_b.append(particle[b[keep]])
    if not found_a:
        return empty
    return np.concatenate(found_a), np.concatenate(found_b)


def _across_and_overlap(offset, lattice, voxel):
    """((N,) how far apart across the face, (N,) the area their facing squares share) of voxel pairs:
    ``offset`` (N, 3) from one particle to the other, turned into ``lattice`` (N, 4), the first's
    voxel lattice (w, x, y, z), where its largest component is across the face and the two others
    are sideways, each sharing voxel - |offset| of the squares' sides."""
    w, axis = lattice[:, :1], -lattice[:, 1:]  # the inverse rotation
    turned = np.sort(np.abs(offset + 2.0 * np.cross(axis, np.cross(axis, offset) + w * offset)), axis=1)
    return turned[:, 2], np.prod(np.clip(voxel - turned[:, :2], 0.0, None), axis=1)


def _per_voxel(bond, particle, particles: int):
    """(each (bond, particle)'s bond, each pair's (bond, particle) index) of one side of the pairs."""
    key, inverse = np.unique(bond.astype(np.int64) * particles + particle, return_inverse=True)
    return key // particles, inverse.reshape(-1)


def _shared_area(bond, a, b, across, overlap, voxel, particles: int, count: int):
    """Each bond's contact area: the squares its voxels share with those across, counting for each
    voxel only the pairs of the nearest layer across (where two lattices overlap, the second layer
    of one side comes within reach too) and at most one voxel face each; the smaller side's sum."""
    sides = [_per_voxel(bond, side, particles) for side in (a, b)]
    nearest = np.ones(len(bond), dtype=bool)
    for _, inverse in sides:
        least = np.full(inverse.max(initial=-1) + 1, np.inf)
        np.minimum.at(least, inverse, across)
        nearest &= across <= least[inverse] + 0.5 * voxel
    sums = [np.bincount(owner, weights=np.minimum(np.bincount(inverse, weights=overlap * nearest,
                                                              minlength=len(owner)), voxel**2), minlength=count)
            for owner, inverse in sides]
    return np.minimum(*sums)


def find_bonds(positions, particle_body, body_group, radius: float, tolerance: float = GAP_TOLERANCE,
               body_lattice=None) -> Bonds:
    """The bonds between the touching bodies of each glue group: ``positions`` (P, 3) the particles'
    world positions, ``particle_body`` (P,) their bodies, ``body_group`` (bodies,) each body's glue
    group (an integer >= 0; -1: not glued), ``radius`` the particles', ``body_lattice`` (bodies, 4)
    each body's voxel lattice axes in the world (None: the world's). See the module's docstring."""
    if not (radius > 0 and math.isfinite(radius)):
        raise ValueError(f"particle radius must be a positive number, got {radius}")
    if not (tolerance >= 0 and 2.0 * (1.0 + tolerance) < 2.0 * math.sqrt(2.0)):
        raise ValueError(f"the gap tolerance must be 0 or more and keep pieces that share an edge apart "
                         f"(under {math.sqrt(2.0) - 1.0:.3f} voxel), got {tolerance}")
    positions = np.asarray(positions, dtype=np.float64).reshape(-1, 3)
    particle_body = np.asarray(particle_body, dtype=np.int64).reshape(-1)
    body_group = np.asarray(body_group, dtype=np.int64).reshape(-1)
    if len(particle_body) != len(positions):
        raise ValueError(f"one body per particle: {len(positions)} particles, {len(particle_body)} bodies")
    if not np.all(np.isfinite(positions)):
        raise ValueError("particle positions must be finite")
    lattice = (np.tile([1.0, 0.0, 0.0, 0.0], (len(body_group), 1)) if body_lattice is None
               else np.asarray(body_lattice, dtype=np.float64).reshape(len(body_group), 4))
    a, b = touching_pairs(positions, particle_body, body_group[particle_body], radius, tolerance)
    swap = particle_body[a] > particle_body[b]
    a, b = np.where(swap, b, a), np.where(swap, a, b)
    body_count = max(len(body_group), 1)
    bond_key, bond = np.unique(particle_body[a] * body_count + particle_body[b], return_inverse=True)
    bond = bond.reshape(-1)
    count = len(bond_key)
    pair_count = np.bincount(bond, minlength=count)
    middle = 0.5 * (positions[a] + positions[b])
    pivot = np.stack([np.bincount(bond, weights=middle[:, axis], minlength=count) for axis in range(3)], axis=1)
    pivot = pivot.astype(np.float64) / np.maximum(pair_count, 1)[:, None]
    voxel = 2.0 * radius
    across, overlap = _across_and_overlap(positions[b] - positions[a], lattice[particle_body[a]], voxel)
    area = _shared_area(bond, a, b, across, overlap, voxel, len(positions), count)
    return Bonds((bond_key // body_count).astype(np.int32), (bond_key % body_count).astype(np.int32), pivot,
                 area.astype(np.float64), pair_count.astype(np.int64))


def breaking_thresholds(strength, area, bullet_substep: float) -> np.ndarray:
    """Blender's breaking_threshold (an impulse per Bullet substep and row, core.joints) of bonds of
    ``strength`` (Pa) over ``area`` (m^2): strength x area newtons for one Bullet substep."""
    return np.asarray(strength, dtype=np.float64) * np.asarray(area, dtype=np.float64) * float(bullet_substep)


def glue_bodies(builder, body_group, body_strength) -> Bonds:
    """Find the bonds between the touching bodies of ``builder`` (a ModelBuilder whose bodies are all
    added) of each glue group and add them (ModelBuilder.add_bonds): ``body_group`` (bodies,) an
    integer per body (-1: not glued), ``body_strength`` (bodies,) each body's glue strength (Pa); a
    bond holds the weaker of its two pieces' strengths. Thresholds use ``builder.bullet_substep``:
    set it first."""
    body_group = np.asarray(body_group, dtype=np.int64).reshape(-1)
    body_strength = np.broadcast_to(np.asarray(body_strength, dtype=np.float64), body_group.shape)
    if len(body_group) != builder.body_count:
        raise ValueError(f"one glue group per body: {builder.body_count} bodies, {len(body_group)} groups")
    glued = body_group >= 0
    if not np.all((body_strength[glued] > 0) & np.isfinite(body_strength[glued])):
        raise ValueError("glue strengths must be finite numbers of pascals above 0")
    positions, particle_body = builder.particle_positions()
    bonds = find_bonds(positions, particle_body, body_group, builder.particle_radius,
                       body_lattice=builder.lattice_orientations())
    strength = np.minimum(body_strength[bonds.body_a], body_strength[bonds.body_b])
    builder.add_bonds(bonds.body_a, bonds.body_b, bonds.pivot,
                      breaking_thresholds(strength, bonds.area, builder.bullet_substep))
    return bonds
