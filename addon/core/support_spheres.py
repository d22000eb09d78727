"""Support spheres of the voxels near a curved surface: the mesh's curvature under each voxel, so
that a converted ball meets planes and triangles as the ball it is, not as the staircase of its
voxels.

A voxel whose cube is not wholly solid (corner reach 0, core.voxelize) touches colliders with the
particle's sphere of radius r. On a curved surface those spheres stick out of the mesh by up to a
radius, one voxel further out than its neighbour: a ball resting on them rocks over the steps, and
on a slope it takes a micro-impact at each, so it slides instead of rolling
(docs/experiments/contact-solve.md, E9 and E17). Here each solid voxel within SUPPORT_SPHERE_REACH
radii of a curved part of the surface (the round surface voxels, and the whole voxels just inside
them, which the ball's surface also passes near) gets the osculating sphere of the mesh at the
surface point nearest to it: centre c = p_s - R n(p_s), radius R = 1 / kappa, with kappa the
surface's largest principal curvature there (the smallest radius, so that the sphere stays inside a
cylinder or an ellipsoid). Every support sphere of a converted UV sphere is then the ball itself.
core.voxel_corners.voxel_support says how a collider meets it.

From the mesh, per vertex (the mesh as a smooth surface through its vertices, as Blender's smooth
shading shows it):
- its normal n_k: towards the centre of the sphere that best fits it and its neighbours (exact on
  any mesh of a sphere, along the normal plane of symmetry on a cylinder), or where they lie in a
  plane, the angle-weighted mean of its faces' normals;
- its curvature kappa_k: the largest normal curvature along its edges, 2 n_k . (v_k - v_j) /
  |v_k - v_j|^2 (the circle through v_j tangent at v_k to the plane normal to n_k), exactly 1 / R
  on every vertex of a UV sphere of radius R;
- whether it is sharp: on an edge whose faces' normals differ by more than SMOOTH_DIHEDRAL_DEGREES,
  or on an open or non-manifold edge.
A voxel's surface point is the nearest of a dense sampling of the triangles (SAMPLE_GAP), in the
triangle abc with barycentric weights b; the sphere is R = 1 / max(kappa_a, kappa_b, kappa_c) and
c = sum b_k (v_k - R n_k) (the centres each vertex's normal gives at that radius, interpolated: the
ball's centre on a UV sphere wherever the point lies, and a point of the axis on a cylinder). No
sphere (today's particle sphere): a vertex of the triangle is sharp (a box's edges and corners), the
surface is flat there (R beyond MAX_SUPPORT_RADIUS radii: a box's faces), it is curved tighter than
the particle (R under a radius), or the surface point lies beyond SUPPORT_SPHERE_REACH radii.
"""
from __future__ import annotations

import math

import numpy as np

from .voxel_corners import SUPPORT_SPHERE_REACH

# Edges whose two faces turn by more than this are sharp (a box's 90 degrees; a cylinder of 8
# segments, 45): no support sphere next to them. A UV sphere of 16 x 8 segments turns by 22.5.
SMOOTH_DIHEDRAL_DEGREES = 40.0
# Flatter than this (radius of curvature in particle radii): a flat face, no sphere. float32 keeps a
# sphere's depth to about 1e-4 radii at this size.
MAX_SUPPORT_RADIUS = 1000.0
# Spacing of the surface samples the nearest surface point is taken from, in particle radii. The
# sphere's centre hardly depends on where in a triangle the point lies (it is the same point for
# every point of a UV sphere), so samples do.
SAMPLE_GAP = 1.0
# A vertex's 1-ring fits a sphere where its points span all three directions: the smallest
# eigenvalue of the fit's normal matrix over the largest above this (a flat ring has 0)
FIT_CONDITION = 1e-10


def _edges(triangles):
    """(E, 2) undirected edges (low, high), and per edge the faces using it: (E,) count, and the
    first two faces (-1 where missing)."""
    t = triangles
    directed = np.concatenate([t[:, [0, 1]], t[:, [1, 2]], t[:, [2, 0]]])
    face = np.tile(np.arange(len(t)), 3)
    key = np.sort(directed, axis=1)
    edges, inverse, counts = np.unique(key, axis=0, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    order = np.argsort(inverse, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    first = face[order[starts]]
    second = np.where(counts > 1, face[order[np.minimum(starts + 1, len(order) - 1)]], -1)
    return edges, counts, first, second


def vertex_curvature(vertices, triangles):
    """Per vertex: unit normal (V, 3), largest normal curvature along its edges (V,) (0 or less:
    flat or saddle-like), and whether it is sharp (V,) bool. See the module's docstring."""
    v = np.asarray(vertices, dtype=np.float64)
    t = np.asarray(triangles, dtype=np.int64)
    a, b, c = v[t[:, 0]], v[t[:, 1]], v[t[:, 2]]
    cross = np.cross(b - a, c - a)
    length = np.linalg.norm(cross, axis=1)
    face_normal = cross / np.maximum(length, 1e-300)[:, None]
    # angle-weighted normals: the normal where the 1-ring is flat, and the side the fit's points to
    mean_normal = np.zeros_like(v)
    for k in range(3):
        p, q, s = v[t[:, k]], v[t[:, (k + 1) % 3]], v[t[:, (k + 2) % 3]]
        e1, e2 = q - p, s - p
        cosine = np.einsum("ij,ij->i", e1, e2) / np.maximum(np.linalg.norm(e1, axis=1) * np.linalg.norm(e2, axis=1),
                                                            1e-300)
        angle = np.arccos(np.clip(cosine, -1.0, 1.0))
        np.add.at(mean_normal, t[:, k], angle[:, None] * face_normal)
    mean_normal /= np.maximum(np.linalg.norm(mean_normal, axis=1), 1e-300)[:, None]
    edges, counts, first, second = _edges(t)
    turn = np.einsum("ij,ij->i", face_normal[first], face_normal[np.maximum(second, 0)])
    sharp_edge = (counts != 2) | (turn < math.cos(math.radians(SMOOTH_DIHEDRAL_DEGREES)))
    sharp = np.zeros(len(v), dtype=bool)
    sharp[edges[sharp_edge].reshape(-1)] = True
    # the sphere through each vertex that fits its 1-ring best: 2 d . w = |d|^2 for each edge d from
    # the vertex (w: the centre less the vertex), rows divided by |d|; exact on any mesh of a sphere
    # (a UV sphere's angle-weighted normals miss its centre by up to a tenth of the radius)
    ends = np.concatenate([edges, edges[:, ::-1]])
    d = v[ends[:, 1]] - v[ends[:, 0]]
    size = np.maximum(np.linalg.norm(d, axis=1), 1e-300)
    row = 2.0 * d / size[:, None]
    normal_matrix = np.zeros((len(v), 3, 3))
    np.add.at(normal_matrix, ends[:, 0], np.einsum("ei,ej->eij", row, row))
    right = np.zeros((len(v), 3))
    np.add.at(right, ends[:, 0], row * size[:, None])
    eigenvalues = np.linalg.eigvalsh(normal_matrix)
    fitted = eigenvalues[:, 0] > FIT_CONDITION * np.maximum(eigenvalues[:, 2], 1e-300)
    normals = mean_normal.copy()
    if fitted.any():
        centre = np.linalg.solve(normal_matrix[fitted], right[fitted][:, :, None])[:, :, 0]
        direction = -centre / np.maximum(np.linalg.norm(centre, axis=1), 1e-300)[:, None]
        # concave: the centre lies outside; the normal still points to the side the faces face
        direction *= np.where(np.einsum("ij,ij->i", direction, mean_normal[fitted]) < 0.0, -1.0, 1.0)[:, None]
        normals[fitted] = direction
    curvature = np.full(len(v), -np.inf)
    kappa = -2.0 * np.einsum("ij,ij->i", normals[ends[:, 0]], d) / (size * size)
    np.maximum.at(curvature, ends[:, 0], kappa)
    return normals, curvature, sharp


def _samples(vertices, triangles, gap):
    """Points on every triangle no farther than ``gap`` apart: (points (S, 3), triangle (S,),
    barycentric weights (S, 3))."""
    v, t = vertices, triangles
    a, b, c = v[t[:, 0]], v[t[:, 1]], v[t[:, 2]]
    longest = np.max(np.stack([np.linalg.norm(b - a, axis=1), np.linalg.norm(c - b, axis=1),
                               np.linalg.norm(a - c, axis=1)]), axis=0)
    levels = np.maximum(1, np.ceil(longest / gap)).astype(np.int64)
    points, owner, weights = [], [], []
    for n in np.unique(levels):
        idx = np.flatnonzero(levels == n)
        i, j = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
        keep = i + j <= n
        bary = np.stack([1.0 - (i[keep] + j[keep]) / n, i[keep] / n, j[keep] / n], axis=1)
        points.append(np.einsum("sk,tkj->tsj", bary, v[t[idx]]).reshape(-1, 3))
        owner.append(np.repeat(idx, len(bary)))
        weights.append(np.tile(bary, (len(idx), 1)))
    return np.concatenate(points), np.concatenate(owner), np.concatenate(weights)


def _nearest_samples(queries, samples, cell, reach):
    """Index of the nearest sample to each query within ``reach`` (-1 if none). Samples binned in
    cubic cells of side ``cell``; each query searches the cells within reach."""
    origin = np.minimum(queries.min(axis=0), samples.min(axis=0)) - reach
    key_of = lambda cells: (cells[:, 0] * 1_000_003 + cells[:, 1]) * 1_000_033 + cells[:, 2]  # noqa: E731
    sample_cells = np.floor((samples - origin) / cell).astype(np.int64)
    keys = key_of(sample_cells)
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    span = int(math.ceil(reach / cell))
    offsets = np.array([(x, y, z) for x in range(-span, span + 1) for y in range(-span, span + 1)
                        for z in range(-span, span + 1)])
    query_cells = np.floor((queries - origin) / cell).astype(np.int64)
    best = np.full(len(queries), -1)
    best_d2 = np.full(len(queries), reach * reach)
    for offset in offsets:
        k = key_of(query_cells + offset)
        lo = np.searchsorted(sorted_keys, k, side="left")
        hi = np.searchsorted(sorted_keys, k, side="right")
        count = hi - lo
        if not count.any():
            continue
        q = np.repeat(np.arange(len(queries)), count)
        s = order[np.repeat(lo, count) + np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)]
        gap = samples[s] - queries[q]
        d2 = np.einsum("ij,ij->i", gap, gap)
        # the nearest per query among this cell's samples, then against the best so far
        by = np.lexsort((d2, q))
        q, s, d2 = q[by], s[by], d2[by]
        head = np.concatenate([[True], q[1:] != q[:-1]])
        q, s, d2 = q[head], s[head], d2[head]
        better = d2 < best_d2[q]
        best[q[better]] = s[better]
        best_d2[q[better]] = d2[better]
    return best


def support_spheres(vertices, triangles, points, candidates, radius: float) -> np.ndarray:
    """(N, 4) per particle: its support sphere's centre less the particle's centre (x, y, z, in the
    frame of ``vertices``) and its radius (0: none). ``candidates`` (N,) bool: the particles that
    may have one (the solid's voxels of a closed mesh)."""
    v = np.asarray(vertices, dtype=np.float64)
    t = np.asarray(triangles, dtype=np.int64)
    points = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    out = np.zeros((len(points), 4))
    query = np.flatnonzero(candidates)
    if len(query) == 0 or len(t) == 0:
        return out
    normals, curvature, sharp = vertex_curvature(v, t)
    samples, owner, bary = _samples(v, t, SAMPLE_GAP * radius)
    reach = SUPPORT_SPHERE_REACH * radius
    nearest = _nearest_samples(points[query], samples, 0.5 * reach, reach)
    found = nearest >= 0
    query, nearest = query[found], nearest[found]
    corners = t[owner[nearest]]  # (Q, 3) the triangle's vertices
    weights = bary[nearest]
    kappa = curvature[corners].max(axis=1)
    smooth = ~sharp[corners].any(axis=1)
    sphere_radius = 1.0 / np.maximum(kappa, 1e-300)
    keep = smooth & (kappa > 0) & (sphere_radius >= radius) & (sphere_radius <= MAX_SUPPORT_RADIUS * radius)
    query, corners, weights, sphere_radius = query[keep], corners[keep], weights[keep], sphere_radius[keep]
    centres = np.einsum("qk,qkj->qj", weights, v[corners] - sphere_radius[:, None, None] * normals[corners])
    out[query, :3] = centres - points[query]
    out[query, 3] = sphere_radius
    return out
