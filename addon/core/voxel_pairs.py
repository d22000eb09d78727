"""Voxel against voxel between bodies (SimulationSettings.contact_geometry "voxels").

With particle contacts two bodies meet sphere against sphere. A face of 3 x 3 spheres resting on
another is a field of bumps: a body nests into the hollows between the spheres below, sinks across
a joint and slides off a row's edge, and a pile of such cubes flows like one of marbles whatever
the solver (docs/experiments/contact-solve.md, E10: Bullet's rigid solver on cubes of our 27 spheres
gives our pile; on cubes of 27 voxels, Newton's).

Here a pair of whole voxels (corner reach 1 on both sides: a solid's inside, see voxel_corners) of
two bodies meets as two cubes of side 2 r along their bodies' lattices, box against box by
separating axes: the three face axes of each and their nine cross products. The contact is along
the axis of least overlap among the axes where both voxels present an exposed face (a face with no
voxel of the same body beyond it, ``exposed_faces``): a voxel cannot be pushed out through a face it
shares with its own neighbour, which is what made the staircase of particle contacts. Its depth is
that overlap, its point halfway between the two voxels' deepest points along it, and a face
contact counts for the part of the face the other voxel covers (a face of 3 x 3 voxels on another,
in any lateral offset, carries 9 full contacts, as a flat face should).

Both sides of a pair compute it in one order (the lower body's voxel first) and get the same axis,
depth, point and share: the two forces are equal, opposite and act at one point, so momentum is
kept with friction. Other pairs (a sphere-like voxel on either side, a static particle) stay
particle contacts. Mirrored by voxel_pair in kernels/34_voxel_pairs.cl.
"""
from __future__ import annotations

import math

import numpy as np

from .model import STATIC_BODY, Model
from .rotations import quaternion_to_matrix, vector_cross

# Two voxels touch corner to corner with centres 2 sqrt(3) r apart: the pair reach, in radii.
VOXEL_PAIR_REACH = 2.0 * math.sqrt(3.0)
# A voxel at least this solid (corner reach) meets another such as a cube; below, as its sphere.
WHOLE_VOXEL_REACH = 1.0
# An edge axis wins over a face axis only when its overlap is this much smaller: resting faces stay
# faces when a body is turned by a hair.
EDGE_AXIS_BIAS = 1.05
# Lattice axes whose component along the contact axis is at least this fraction of the largest
# one are the voxel's faces the contact presses on; each must be exposed (a body tilted by up to
# 35 degrees presses on its bottom face alone, an edge contact at 45 degrees on both faces of the edge).
FACE_COMPONENT_FRACTION = 0.7
# Cross products of lattice axes shorter than this are parallel axes: no edge axis.
PARALLEL_EDGES = 1e-3
# Push-out. With springs 16x stiffer than particle contacts (E12) a cube started 11 cm inside
# another was thrown 9.5 m up at 13 m/s; the velocity solve pushes out at its own limit too. How deep a pair's spring may push starts at
# PUSH_OUT_BIRTH_LOAD times the stiffness target's depth (the depth under the design load) and grows
# by the pair's closing speed plus PUSH_OUT_SPEED (m/s) per second, so a pair that came together by
# moving, or was loaded gradually (a tall column), never reaches it; a pair born deeper pushes only
# that deep, and not at all while parting faster than PUSH_OUT_SPEED (tests/core/test_voxel_pairs.py).
PUSH_OUT_SPEED = 1.0
PUSH_OUT_BIRTH_LOAD = 1.0


def exposed_faces(model: Model) -> np.ndarray:
    """(P,) uint8: bit 2k is set when particle p's voxel has no particle of its own body one
    diameter away along +lattice axis k, bit 2k + 1 along -k (the lattice: the body's
    body_lattice_orientation). Static particles: 0. Particles off any lattice of one diameter have
    all six faces exposed."""
    m = model
    out = np.zeros(m.particle_count, dtype=np.uint8)
    n = m.dynamic_particle_count
    if n == 0:
        return out
    body = m.particle_body[:n].astype(np.int64)
    lattice = quaternion_to_matrix(m.body_lattice_orientation).reshape(-1, 3, 3)
    # lattice coordinates in diameters, from each body's first particle
    local = np.einsum("pji,pj->pi", lattice[body], m.particle_offset[:n]) / (2.0 * m.particle_radius)
    local -= local[m.body_first_particle[body]]
    cell = np.rint(local)
    on_lattice = np.abs(local - cell).max(axis=1) < 0.05
    cell = cell.astype(np.int64)
    low = cell.min(axis=0) - 1
    size = cell.max(axis=0) - low + 2
    if float(m.body_count) * float(np.prod(size.astype(np.float64))) >= 2.0 ** 62:
        return np.where(np.arange(m.particle_count) < n, 0x3F, 0).astype(np.uint8)

    def key(c):
        c = c - low
        return ((body * size[0] + c[:, 0]) * size[1] + c[:, 1]) * size[2] + c[:, 2]

    present = np.sort(key(cell)[on_lattice])
    faces = np.zeros(n, dtype=np.uint8)
    for k in range(3):
        for bit, sign in ((2 * k, 1), (2 * k + 1, -1)):
            step = np.zeros(3, dtype=np.int64)
            step[k] = sign
            probe = key(cell + step)
            at = np.clip(np.searchsorted(present, probe), 0, max(len(present) - 1, 0))
            covered = (present[at] == probe) & on_lattice if len(present) else np.zeros(n, bool)
            faces |= np.where(covered, 0, 1 << bit).astype(np.uint8)
    out[:n] = faces
    return out


def _presses_on_exposed_faces(axis, frame, faces) -> bool:
    """Whether the voxel (lattice axes: frame's columns) pushed along -axis, i.e. touching along
    +axis, presses only on faces it exposes."""
    c = frame.T @ axis
    biggest = np.abs(c).max()
    for k in range(3):
        if abs(c[k]) >= FACE_COMPONENT_FRACTION * biggest:
            bit = 2 * k if c[k] > 0 else 2 * k + 1
            if not (faces >> bit) & 1:
                return False
    return True


def _support(centre, frame, r, direction):
    """The voxel's deepest point along direction: a corner, or the middle of an edge or face on a tie."""
    s = frame.T @ direction
    sign = np.where(s > 1e-3, 1.0, np.where(s < -1e-3, -1.0, 0.0))
    return centre + frame @ (r * sign)


def voxel_pair(p_i, frame_i, faces_i, p_j, frame_j, faces_j, r, margin=0.0, dv=None, growth=None):
    """Voxels of side 2 r at p_i and p_j (lattice axes the columns of frame_i, frame_j; exposed face
    bits faces_i, faces_j) as box against box: None if apart by ``margin`` or more (a speculative
    contact's depth is the gap, negative), also after an axis closes by growth(closing speed along
    it) with i's centre moving at dv relative to j's; else (n from i towards j, depth, contact
    point, share)."""
    d = p_j - p_i
    # Gottschalk's box test: every axis's reaches, and the centres' offset and relative velocity
    # along it, from the 3x3 products of the two lattices' axes (34_voxel_pairs.cl voxel_pair, where
    # this took a PoCL call from 152 to 86 ns against fifteen generic axes)
    R = frame_i.T @ frame_j
    ad, bd = frame_i.T @ d, frame_j.T @ d
    av, bv = (frame_i.T @ dv, frame_j.T @ dv) if dv is not None else (np.zeros(3), np.zeros(3))
    # the axes' arithmetic in Python floats: numpy's on single elements, each product, sum (left
    # to right, as numpy sums three) and abs rounded alike, at a fraction of the cost per element
    Rl = R.tolist()
    AR = [[abs(x) for x in row] for row in Rl]
    ad_l, bd_l, av_l, bv_l = ad.tolist(), bd.tolist(), av.tolist(), bv.tolist()
    best = math.inf
    found = None
    for k in range(15):
        if k < 3:
            row = AR[k]
            reach_i, reach_j, along, moving = r, r * (row[0] + row[1] + row[2]), ad_l[k], av_l[k]
        elif k < 6:
            m = k - 3
            reach_i, reach_j, along, moving = r * (AR[0][m] + AR[1][m] + AR[2][m]), r, bd_l[m], bv_l[m]
        else:
            a, b = divmod(k - 6, 3)
            a1, a2, b1, b2 = (a + 1) % 3, (a + 2) % 3, (b + 1) % 3, (b + 2) % 3
            length = math.sqrt(max(1.0 - Rl[a][b] * Rl[a][b], 0.0))  # |A_a x B_b|
            if length < PARALLEL_EDGES:
                continue
            # (A_a x B_b) . A_n and . B_n are +-R's entries of the other two axes
            reach_i = r * (AR[a1][b] + AR[a2][b]) / length
            reach_j = r * (AR[a][b1] + AR[a][b2]) / length
            along = (Rl[a1][b] * ad_l[a2] - Rl[a2][b] * ad_l[a1]) / length
            moving = (Rl[a1][b] * av_l[a2] - Rl[a2][b] * av_l[a1]) / length
        overlap = reach_i + reach_j - abs(along)
        swept = overlap
        if growth is not None:
            swept += growth(float(moving) if along >= 0.0 else -float(moving))
        if swept <= -margin:
            return None  # a separating axis (by the margin, after closing for the speculative time)
        biased = overlap if k < 6 else overlap * EDGE_AXIS_BIAS + 1e-6 * r
        if biased >= best:
            continue
        if k < 3:
            axis = frame_i[:, k]
        elif k < 6:
            axis = frame_j[:, k - 3]
        else:
            axis = vector_cross(frame_i[:, (k - 6) // 3], frame_j[:, (k - 6) % 3])
            axis = axis / np.linalg.norm(axis)
        oriented = axis if along >= 0.0 else -axis
        if not (_presses_on_exposed_faces(oriented, frame_i, faces_i)
                and _presses_on_exposed_faces(-oriented, frame_j, faces_j)):
            continue
        best = biased
        found = (oriented, overlap, 0 if k < 3 else (1 if k < 6 else 2))
    if found is None:
        return None
    n, depth, kind = found
    point = 0.5 * (_support(p_i, frame_i, r, n) + _support(p_j, frame_j, r, -n))
    share = 1.0
    if kind != 2:
        # the part of the face (side 2 r) that the other voxel's extent covers, along the face's two axes
        face, other = (frame_i, frame_j) if kind == 0 else (frame_j, frame_i)
        for m in range(3):
            u = face[:, m]
            if abs(u @ n) > 0.7:
                continue
            lateral = r * np.abs(other.T @ u).sum() + r - abs(u @ d)
            share *= min(max(lateral / (2.0 * r), 0.0), 1.0)
    if share <= 0.0:
        return None
    return n, depth, point, share


def voxel_pair_reach(margin: float = 0.0) -> float:
    """How far apart (radii) two voxels' centres may be and still meet: corner to corner, plus the
    speculative margin (radii)."""
    return VOXEL_PAIR_REACH + margin


def is_voxel_pair(model: Model, i: int, j: int) -> bool:
    """Whether particles i and j (of two bodies) meet as voxels: both dynamic whole voxels."""
    return (model.particle_body[j] != STATIC_BODY and model.particle_body[i] != STATIC_BODY
            and model.particle_corner_reach[i] >= WHOLE_VOXEL_REACH
            and model.particle_corner_reach[j] >= WHOLE_VOXEL_REACH)
