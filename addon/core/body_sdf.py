"""Signed-distance fields of the bodies' shapes, for contacts between bodies (contact_geometry "sdf").

Between bodies made of sphere particles the contact normal is the line between two particle
centres, so a cube resting on another's face settles into the hollows between the particles below
(a cube across the joint of two sinks 45 mm, 0.27 of a particle radius); no solve over those
contacts changes that (docs/experiments/contact-solve.md). With SDF contacts a particle of body A
meets body B's surface instead: the distance phi_B of its centre to B's voxel set, the normal the
gradient of phi_B, so flat faces meet flat.

One field per distinct shape: bodies whose particles form the same voxel set (linked duplicates,
the cubes of a pile) share it. A field is stored in the shape's lattice frame (where the voxels are
axis-aligned cubes of side one particle diameter, centred on the body's centre of mass) on a grid
of spacing one particle radius, so the voxel faces lie on grid planes and trilinear interpolation
is exact on the flat parts of the surface. Each sample holds phi, the signed distance to the union
of the voxel cubes (> 0 outside), clamped at FIELD_REACH voxels (only values within a radius of the
surface are used).

A contact found on B's field is one-sided (particle p of A knows it), yet B must feel its reaction
without scattering forces between work-items. It is shared out over the pairs (p, j), j the
particles of B in the lattice layer just below p along the face's axis, with the weight of a
bilinear hat over B's lattice in the face's plane (``pair_weight``): over a face the shares sum to 1
exactly, at a face's edge to the part of p's footprint the face covers. Both bodies of a pair
compute the same share from the same inputs, so each pair's forces are equal and opposite at one
point. Bodies whose particles lie on no lattice of one diameter get no field (body_shape -1): their
contacts stay particle against particle.

numpy only; addon/core/reference.py and kernels/40_contacts.cl read the fields.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .model import Model
from .rotations import quaternion_to_matrix

# Pairs of particles whose centres are closer than PAIR_REACH particle radii share the contact of
# one with the other's surface: a particle just touching a face above the hollow between four of
# the face's particles is 2.45 radii from each of them; pairs farther than 3.2 radii carry at most
# 1.4 % of a share, and only while the contact is just touching.
PAIR_REACH = 3.2
# A particle keeps its contacts with the surfaces of this many bodies it touches between the pairs
# that share them (and their friction springs between substeps); with more, the others' springs
# restart every substep (in the 1000-cube pile no particle touches more than 5 things, ground included).
SURFACE_CONTACTS_KEPT = 4
# Samples per particle radius are 1 (grid spacing = radius); the grid reaches GRID_PAD radii beyond
# the voxels, so a point within a radius of the surface has all eight corners of its cell inside.
GRID_PAD = 2
# Voxels searched around a sample for its distance: beyond this many voxels phi is clamped.
FIELD_REACH = 2
# Points whose lattice coordinates are this far (in voxels) from whole numbers are not on a lattice.
LATTICE_TOLERANCE = 1e-3


def pair_weight(delta, lattice_normal, radius: float) -> float:
    """Share of a particle's contact with a body's surface carried by the pair with the body's particle
    at lattice-frame offset ``delta`` (particle minus the body's particle), given the surface's
    normal in the lattice frame: the body's particle must lie in the layer just below along the
    normal's main axis (0 <= offset along it < one diameter); then the product of hats 1 - |d| / 2r
    over the two other axes. Over a face the shares sum to 1 (a partition of unity on the lattice).
    Mirrors pair_weight in kernels/40_contacts.cl."""
    axis = int(np.argmax(np.abs(lattice_normal)))
    along = delta[axis] if lattice_normal[axis] >= 0 else -delta[axis]
    d = 2 * radius
    if not (0.0 <= along < d):
        return 0.0
    a, b = (axis + 1) % 3, (axis + 2) % 3
    return max(1.0 - abs(delta[a]) / d, 0.0) * max(1.0 - abs(delta[b]) / d, 0.0)


@dataclass
class BodyFields:
    """The shapes' fields as flat arrays, and which shape each body uses."""

    body_shape: np.ndarray  # (B,) int32 shape index, -1: no field (particles on no lattice)
    body_frame: np.ndarray  # (B, 4) (w, x, y, z): rotation from the body's frame to its shape's lattice frame
    shape_origin: np.ndarray  # (S, 3) lattice-frame position of sample (0, 0, 0)
    shape_dims: np.ndarray  # (S, 3) int32 samples per axis
    shape_offset: np.ndarray  # (S,) int32 first sample of the shape in ``values``
    cell: float  # sample spacing (the particle radius)
    values: np.ndarray  # (total samples,) float64 phi; x fastest, then y, then z

    @property
    def shape_count(self) -> int:
        return len(self.shape_offset)

    def sample(self, shape: int, y: np.ndarray):
        """Trilinear phi and its gradient at lattice-frame point ``y`` of ``shape``; None outside the
        grid. Mirrors sdf_sample in kernels/40_contacts.cl."""
        dims = self.shape_dims[shape]
        g = (np.asarray(y, dtype=np.float64) - self.shape_origin[shape]) / self.cell
        if np.any(g < 0) or np.any(g >= dims - 1):
            return None
        c = np.floor(g).astype(np.int64)
        t = g - c
        base = self.shape_offset[shape]
        phi = np.empty((2, 2, 2))  # [dz, dy, dx]
        for dz in (0, 1):
            for dy in (0, 1):
                for dx in (0, 1):
                    phi[dz, dy, dx] = self.values[base + ((c[2] + dz) * dims[1] + (c[1] + dy)) * dims[0] + c[0] + dx]
        tx, ty, tz = t
        x0 = phi[:, :, 0] * (1 - tx) + phi[:, :, 1] * tx  # [dz, dy]
        y0 = x0[:, 0] * (1 - ty) + x0[:, 1] * ty  # [dz]
        value = y0[0] * (1 - tz) + y0[1] * tz
        gx = ((phi[0, 0, 1] - phi[0, 0, 0]) * (1 - ty) + (phi[0, 1, 1] - phi[0, 1, 0]) * ty) * (1 - tz) \
            + ((phi[1, 0, 1] - phi[1, 0, 0]) * (1 - ty) + (phi[1, 1, 1] - phi[1, 1, 0]) * ty) * tz
        gy = ((phi[0, 1, 0] - phi[0, 0, 0]) * (1 - tx) + (phi[0, 1, 1] - phi[0, 0, 1]) * tx) * (1 - tz) \
            + ((phi[1, 1, 0] - phi[1, 0, 0]) * (1 - tx) + (phi[1, 1, 1] - phi[1, 0, 1]) * tx) * tz
        gz = y0[1] - y0[0]
        return value, np.array([gx, gy, gz]) / self.cell


def _lattice_coordinates(points: np.ndarray, spacing: float):
    """Integer voxel coordinates of ``points`` (N, 3) on a lattice of ``spacing``, and the offset of
    voxel (0, 0, 0)'s centre; None if they are not on one."""
    u = points / spacing
    shift = u[0] - np.round(u[0])
    k = np.round(u - shift)
    if np.abs(u - shift - k).max() > LATTICE_TOLERANCE:
        return None
    k = k.astype(np.int64)
    return k, shift * spacing


def _on_lattice(points: np.ndarray, spacing: float) -> np.ndarray:
    """(K,) whether each of K bodies' points (K, N, 3) lie on a lattice of ``spacing`` in this frame."""
    u = points / spacing
    shift = u[:, :1] - np.round(u[:, :1])
    w = u - shift
    return np.abs(w - np.round(w)).max(axis=(1, 2)) <= LATTICE_TOLERANCE


def _shape_keys(points: np.ndarray, spacing: float) -> np.ndarray:
    """(K, N + 3) integer keys of K bodies' points (K, N, 3): equal rows, equal voxel sets at the
    same place about the centre of mass (the points' sorted lattice positions relative to their
    lowest corner, then that corner)."""
    q = np.round(points / spacing * 64.0).astype(np.int64)
    q -= q.min(axis=1, keepdims=True)
    span = int(q.max()) + 1 if q.size else 1
    keys = (q[..., 0] * span + q[..., 1]) * span + q[..., 2]
    keys.sort(axis=1)
    anchor = np.round(points.min(axis=1) / spacing * 64.0).astype(np.int64)
    return np.concatenate([keys, anchor], axis=1)


def _field(points: np.ndarray, radius: float):
    """(origin, dims, values) of one shape: lattice-frame points (N, 3) on a lattice of 2 * radius."""
    spacing = 2 * radius
    voxels, shift = _lattice_coordinates(points, spacing)
    low, high = voxels.min(axis=0), voxels.max(axis=0)
    margin = FIELD_REACH + 2  # samples reach a voxel beyond the set, and look FIELD_REACH further
    size = high - low + 1 + 2 * margin
    occupied = np.zeros(size, dtype=bool)
    occupied[tuple((voxels - low + margin).T)] = True
    # samples: voxel faces at (low - 1/2) * spacing + shift, one sample per radius
    origin = (low - 0.5) * spacing + shift - GRID_PAD * radius
    dims = (high - low + 1) * 2 + 1 + 2 * GRID_PAD
    axes = [origin[a] + radius * np.arange(dims[a]) for a in range(3)]
    # Squared distance to the nearest voxel of a set is a minimum over voxels of a sum over the axes
    # of max(|sample - centre| - r, 0)^2: taken one axis at a time (x, then y, then z), each over
    # the FIELD_REACH voxels either side of the sample's own (beyond them the distance exceeds the
    # cap), for the occupied voxels (outside) and the empty ones (inside).
    outside = np.where(occupied, 0.0, np.inf)
    inside = np.where(occupied, np.inf, 0.0)
    for axis in range(3):
        home = np.floor((axes[axis] - shift[axis]) / spacing + 0.5).astype(np.int64) - low[axis] + margin
        centre_of = lambda index: (index + low[axis] - margin) * spacing + shift[axis]  # noqa: E731
        best_outside = best_inside = None
        for k in range(-FIELD_REACH, FIELD_REACH + 1):
            index = home + k
            gap = np.maximum(np.abs(axes[axis] - centre_of(index)) - radius, 0.0) ** 2
            shape = [1, 1, 1]
            shape[axis] = len(gap)
            gap = gap.reshape(shape)
            candidate_outside = np.take(outside, index, axis=axis) + gap
            candidate_inside = np.take(inside, index, axis=axis) + gap
            best_outside = candidate_outside if best_outside is None else np.minimum(best_outside, candidate_outside)
            best_inside = candidate_inside if best_inside is None else np.minimum(best_inside, candidate_inside)
        outside, inside = best_outside, best_inside
    outside = np.sqrt(outside).reshape(-1)  # (x, y, z) sample order, x slowest
    inside = np.sqrt(inside).reshape(-1)
    cap = FIELD_REACH * spacing
    phi = np.where(outside > 0, np.minimum(outside, cap), -np.minimum(inside, cap))
    # x fastest: reorder from meshgrid's ij (x slowest)
    values = phi.reshape(dims[0], dims[1], dims[2]).transpose(2, 1, 0).reshape(-1)
    return origin, dims.astype(np.int32), values


def build_body_fields(model: Model) -> BodyFields:
    """One field per distinct voxel set among the model's bodies whose particles lie on a lattice of
    one particle diameter (in the body's lattice frame, else in its own); no field (-1) otherwise."""
    r = model.particle_radius
    spacing = 2 * r
    body_count = model.body_count
    counts = model.body_particle_count
    first = model.body_first_particle
    lattice = quaternion_to_matrix(model.body_lattice_orientation).reshape(-1, 3, 3)
    body_frame = np.array(model.body_lattice_orientation, dtype=np.float64).reshape(-1, 4).copy()
    body_shape = np.zeros(body_count, dtype=np.int32)
    shapes: list[np.ndarray] = []
    known: dict[bytes, int] = {}
    for n in np.unique(counts):
        bodies = np.flatnonzero(counts == n)
        index = first[bodies][:, None] + np.arange(n)[None, :]
        offsets = model.particle_offset[index]  # (K, n, 3) body frame
        local = np.einsum("kni,kij->knj", offsets, lattice[bodies])  # lattice frame: L^T o
        off_lattice = ~_on_lattice(local, spacing)
        if off_lattice.any():
            # particles given on the body's own axes, not the lattice's
            local[off_lattice] = offsets[off_lattice]
            body_frame[bodies[off_lattice]] = (1.0, 0.0, 0.0, 0.0)
        stray = ~_on_lattice(local, spacing)
        body_shape[bodies[stray]] = -1
        bodies, local = bodies[~stray], local[~stray]
        if len(bodies) == 0:
            continue
        keys = _shape_keys(local, spacing)
        unique, first_member, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        shape_of_unique = np.empty(len(unique), dtype=np.int32)
        for u in range(len(unique)):
            key = unique[u].tobytes()
            if key not in known:
                known[key] = len(shapes)
                shapes.append(local[first_member[u]])
            shape_of_unique[u] = known[key]
        body_shape[bodies] = shape_of_unique[inverse]
    origins, dims, offsets, values = [], [], [], []
    total = 0
    for points in shapes:
        origin, d, v = _field(points, r)
        origins.append(origin)
        dims.append(d)
        offsets.append(total)
        values.append(v)
        total += len(v)
    return BodyFields(
        body_shape=body_shape, body_frame=body_frame,
        shape_origin=np.array(origins, dtype=np.float64).reshape(-1, 3),
        shape_dims=np.array(dims, dtype=np.int32).reshape(-1, 3),
        shape_offset=np.array(offsets, dtype=np.int32),
        cell=r,
        values=np.concatenate(values) if values else np.zeros(0),
    )


__all__ = ["PAIR_REACH", "SURFACE_CONTACTS_KEPT", "BodyFields", "build_body_fields", "pair_weight"]
