"""Static triangle-mesh colliders: closest points, and the triangle grid the engines look up.

A particle touches a triangle when the closest point of the triangle is nearer than the particle
radius. Where a particle touches several triangles of a flat or convex surface near a shared edge,
only one contact may count, or the particle gets pushed twice (or sideways, by an edge of the
neighbouring triangle). The rule, identical in the reference and the kernels:
  1. contacts whose closest point lies inside a triangle's face all count;
  2. only when there is none, edge and vertex contacts count, each distinct closest point once
     (the first triangle in lookup order wins).
Lookup order: the large triangles (listed for every particle), then the particle's grid bucket,
each in ascending triangle index.

Triangles are binned on the host, once for static meshes and once per output frame for animated
ones (over the frame's swept bounds), then uploaded: binning happens at most once per frame, not
per substep, and numpy does it in milliseconds for typical colliders.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

FACE_REGION = 0
EDGE_OR_VERTEX_REGION = 1
# Triangles whose (swept, expanded) bounds cover more cells than this are checked by every
# particle instead of being binned (a 200 m ground quad would otherwise fill 10^5 cells).
LARGE_TRIANGLE_CELLS = 64
DUPLICATE_POINT_TOLERANCE = 1e-3  # of the particle radius
HASH_PRIMES = (73856093, 19349663, 83492791)


def closest_point_on_triangle(p, a, b, c):
    """(closest point, barycentric weights (3,), region) for point p and triangle abc.

    Ericson, Real-Time Collision Detection, 5.1.5. The kernel's closest_point_on_triangle mirrors it.
    """
    ab, ac, ap = b - a, c - a, p - a
    d1, d2 = ab @ ap, ac @ ap
    if d1 <= 0 and d2 <= 0:
        return a, np.array([1.0, 0, 0]), EDGE_OR_VERTEX_REGION
    bp = p - b
    d3, d4 = ab @ bp, ac @ bp
    if d3 >= 0 and d4 <= d3:
        return b, np.array([0, 1.0, 0]), EDGE_OR_VERTEX_REGION
    vc = d1 * d4 - d3 * d2
    if vc <= 0 and d1 >= 0 and d3 <= 0:
        v = d1 / (d1 - d3)
        return a + v * ab, np.array([1 - v, v, 0]), EDGE_OR_VERTEX_REGION
    cp = p - c
    d5, d6 = ab @ cp, ac @ cp
    if d6 >= 0 and d5 <= d6:
        return c, np.array([0, 0, 1.0]), EDGE_OR_VERTEX_REGION
    vb = d5 * d2 - d1 * d6
    if vb <= 0 and d2 >= 0 and d6 <= 0:
        w = d2 / (d2 - d6)
        return a + w * ac, np.array([1 - w, 0, w]), EDGE_OR_VERTEX_REGION
    va = d3 * d6 - d5 * d4
    if va <= 0 and (d4 - d3) >= 0 and (d5 - d6) >= 0:
        w = (d4 - d3) / ((d4 - d3) + (d5 - d6))
        return b + w * (c - b), np.array([0, 1 - w, w]), EDGE_OR_VERTEX_REGION
    denom = va + vb + vc
    if denom == 0:  # degenerate (zero-area) triangle
        return a, np.array([1.0, 0, 0]), EDGE_OR_VERTEX_REGION
    v, w = vb / denom, vc / denom
    return a + ab * v + ac * w, np.array([1 - v - w, v, w]), FACE_REGION


def hash_cells(cells: np.ndarray, mask: int) -> np.ndarray:
    """Bucket of integer cells (N, 3), as the kernel's triangle_bucket computes it (uint32 wrap)."""
    c = cells.astype(np.int64).astype(np.uint32)
    h = (c[:, 0] * np.uint32(HASH_PRIMES[0])) ^ (c[:, 1] * np.uint32(HASH_PRIMES[1])) ^ (c[:, 2] * np.uint32(HASH_PRIMES[2]))
    return (h & np.uint32(mask)).astype(np.uint32)


def triangle_cell_size(vertices: np.ndarray, triangles: np.ndarray, particle_radius: float) -> float:
    """Cell edge of the triangle grid: most triangles cover one to eight cells, never below a diameter."""
    d = 2.0 * particle_radius
    if len(triangles) == 0:
        return d
    tri = vertices[triangles]
    extent = (tri.max(axis=1) - tri.min(axis=1)).max(axis=1)
    return float(max(d, np.percentile(extent, 75)))


@dataclass
class TriangleGrid:
    """Host-built lookup: large triangles, and a hashed table of the others' cells."""

    cell: float
    large: np.ndarray  # (L,) int32 ascending
    bucket_start: np.ndarray  # (table + 1,) uint32
    items: np.ndarray  # (E,) int32, ascending within each bucket

    @property
    def mask(self) -> int:
        return len(self.bucket_start) - 2

    def candidates(self, p: np.ndarray) -> np.ndarray:
        """Triangles a particle at p is tested against, in lookup order."""
        cell = np.floor(np.asarray(p, dtype=np.float64) / self.cell).astype(np.int64)[None, :]
        h = int(hash_cells(cell, self.mask)[0])
        return np.concatenate([self.large, self.items[self.bucket_start[h]:self.bucket_start[h + 1]]])


class ColliderMotion:
    """Where the mesh colliders are during the current output frame, for both engines.

    Vertices move linearly from their position at frame k to frame k+1; ``tau`` is the time since
    frame k. Static meshes are binned once; animated ones each frame over their swept bounds.
    """

    def __init__(self, model, reach: float):
        """``reach``: how far from a particle's centre a triangle's face can touch it (the particle
        radius, or more for voxels: voxel_corners.collider_reach); edges and vertices touch within the
        radius. See ``triangle_growth``."""
        self.model = model
        self.radius = model.particle_radius
        self.reach = max(reach, self.radius)
        self.cell = triangle_cell_size(model.mesh_vertices, model.mesh_triangles, self.radius)
        self.is_large = large_triangles(model.mesh_vertices, model.mesh_triangles, self.cell, self.radius,
                                        self.reach)
        self.vertices = model.mesh_vertices.copy()
        self.velocities = np.zeros_like(self.vertices)
        self.tau = 0.0
        self.grid = build_triangle_grid(self.vertices, self.vertices, model.mesh_triangles, self.is_large,
                                        self.cell, self.radius, self.reach)
        self.bounds = triangle_bounds(self.vertices, self.vertices, model.mesh_triangles, self.radius, self.reach)
        self.frame = 0

    @property
    def animated(self) -> bool:
        return self.model.mesh_vertex_frames is not None

    @property
    def moving(self) -> bool:
        """Whether any collider vertex moves during the current frame."""
        return bool(self.model.triangle_count and np.any(self.velocities))

    def set_frame(self, frame: int, frame_duration: float) -> bool:
        """Move to output frame ``frame``; returns True when vertices or the grid changed."""
        self.tau = 0.0
        if not self.animated:
            return False
        self.frame = frame
        start = self.model.collider_vertices_at(frame)
        end = self.model.collider_vertices_at(frame + 1)
        self.vertices = start.copy()
        self.velocities = (end - start) / frame_duration
        self.grid = build_triangle_grid(start, end, self.model.mesh_triangles, self.is_large, self.cell,
                                        self.radius, self.reach)
        self.bounds = triangle_bounds(start, end, self.model.mesh_triangles, self.radius, self.reach)
        return True

    def vertices_now(self) -> np.ndarray:
        return self.vertices + self.tau * self.velocities


def triangle_growth(tri0: np.ndarray, tri1: np.ndarray, radius: float, reach: float | None = None) -> np.ndarray:
    """(T, 3) how far each triangle's box must grow per axis to hold every particle centre that can
    touch it, for triangles (T, 3, 3) moving from ``tri0`` to ``tri1``. Edges and vertices touch a
    particle's sphere (within ``radius``); a face touches its voxel (within ``reach``) only where the
    centre's closest point is inside the face, i.e. straight along the normal: so the box grows by
    reach x |normal component| per axis, at least by the radius. A floor's triangles then grow
    sideways by the radius only (a cubic growth by the reach made twice the substep time on a dense
    floor mesh)."""
    reach = radius if reach is None else max(reach, radius)
    along = np.zeros(tri0.shape[:1] + (3,))
    for tri in (tri0, tri1):
        normal = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
        length = np.linalg.norm(normal, axis=1, keepdims=True)
        unit = np.divide(np.abs(normal), length, out=np.ones_like(normal), where=length > 0)
        along = np.maximum(along, unit)
    return np.maximum(radius, reach * along)


def triangle_bounds(start_vertices: np.ndarray, end_vertices: np.ndarray, triangles: np.ndarray,
                    radius: float, reach: float | None = None) -> np.ndarray:
    """(T, 2, 4) float32 lower and upper corners of each triangle's box, swept from the start to the
    end vertices and grown as ``triangle_growth`` says (and a little, for rounding): a particle
    outside it cannot touch the triangle, so the kernel skips the closest-point test. Large
    triangles are tested by every particle; a ground box's side faces are then rejected with two
    loads."""
    bounds = np.zeros((len(triangles), 2, 4), dtype=np.float32)
    if len(triangles):
        tri0, tri1 = start_vertices[triangles], end_vertices[triangles]
        grow = triangle_growth(tri0, tri1, radius, reach) * 1.001 + 1e-6
        bounds[:, 0, :3] = np.minimum(tri0.min(axis=1), tri1.min(axis=1)) - grow
        bounds[:, 1, :3] = np.maximum(tri0.max(axis=1), tri1.max(axis=1)) + grow
    return bounds


def large_triangles(vertices: np.ndarray, triangles: np.ndarray, cell: float, radius: float,
                    reach: float | None = None) -> np.ndarray:
    """Boolean (T,) of triangles too large to bin, decided once from their rest shape."""
    if len(triangles) == 0:
        return np.zeros(0, dtype=bool)
    tri = vertices[triangles]
    grow = triangle_growth(tri, tri, radius, reach)
    lo = np.floor((tri.min(axis=1) - grow) / cell)
    hi = np.floor((tri.max(axis=1) + grow) / cell)
    cells = np.prod(hi - lo + 1, axis=1)
    return cells > LARGE_TRIANGLE_CELLS


def build_triangle_grid(start_vertices: np.ndarray, end_vertices: np.ndarray, triangles: np.ndarray,
                        is_large: np.ndarray, cell: float, radius: float, reach: float | None = None) -> TriangleGrid:
    """Bin triangles over their bounds swept from ``start_vertices`` to ``end_vertices``, grown as
    ``triangle_growth`` says."""
    small = np.flatnonzero(~is_large)
    large = np.flatnonzero(is_large).astype(np.int32)
    if len(small) == 0:
        return TriangleGrid(cell, large, np.zeros(64 + 1, dtype=np.uint32), np.zeros(0, dtype=np.int32))
    tri0 = start_vertices[triangles[small]]
    tri1 = end_vertices[triangles[small]]
    grow = triangle_growth(tri0, tri1, radius, reach)
    lo = np.floor((np.minimum(tri0.min(axis=1), tri1.min(axis=1)) - grow) / cell).astype(np.int64)
    hi = np.floor((np.maximum(tri0.max(axis=1), tri1.max(axis=1)) + grow) / cell).astype(np.int64)
    span = hi - lo + 1
    counts = np.prod(span, axis=1)
    total = int(counts.sum())
    owner = np.repeat(np.arange(len(small)), counts)
    local = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    sx, sy = span[owner, 0], span[owner, 1]
    offset = np.stack([local % sx, (local // sx) % sy, local // (sx * sy)], axis=1)
    cells = lo[owner] + offset
    table = 1 << max(6, math.ceil(math.log2(max(2 * total, 1))))
    buckets = hash_cells(cells, table - 1).astype(np.int64)
    tri_index = small[owner].astype(np.int64)
    # one entry per (bucket, triangle): two cells of a triangle may share a bucket
    key = np.unique(buckets * (len(triangles) + 1) + tri_index)
    buckets, tri_index = key // (len(triangles) + 1), key % (len(triangles) + 1)
    start = np.zeros(table + 1, dtype=np.uint32)
    np.cumsum(np.bincount(buckets, minlength=table), out=start[1:])
    return TriangleGrid(cell, large, start, tri_index.astype(np.int32))
