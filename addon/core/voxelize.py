"""Triangle mesh -> particles of one radius: a filled grid for closed meshes, a surface shell otherwise.

numpy only (no bpy), so it is tested on its own and reused by the Blender layer and its preview.

Grid: voxel centres ``spacing`` (= particle diameter) apart, axis-aligned in the frame the vertices
are given in, centred on the mesh's bounding box, so a cube of side 3 spacings gets exactly the
seed's 3 x 3 x 3 particles. A centre belongs to a closed mesh if it lies inside it:

- One ray per grid column (+z), hits found for all triangles at once (a 2D point-in-triangle test
  over the columns each triangle's bounding box covers, vectorized). Columns are shifted by a tiny
  irrational fraction of the spacing for the ray test only, so rays do not run through vertices or
  edges of meshes built on the same grid (poles of UV spheres, cube edges).
- Consistently oriented closed meshes use the nonzero winding rule (so overlapping closed parts,
  e.g. two intersecting cubes in one mesh, stay filled); closed meshes with inconsistent normals
  use the even-odd rule.

Open meshes (and flat ones) get a shell: the grid cells the surface passes through. A closed mesh
that is thinner than a cell somewhere (a thin plate, a sharp tip) gets shell cells there as well,
where no filled cell is within one cell, so every part of it still collides.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .support_spheres import support_spheres

# Column shift for the ray test, as a fraction of the spacing (irrational, tiny).
_JITTER = (math.sqrt(2.0) * 1e-6, math.sqrt(3.0) * 1e-6)
# Largest number of (triangle, column) pairs or surface samples handled at once.
_CHUNK = 2_000_000
# Largest dense voxel grid (cells) this module allocates (1 byte each).
MAX_GRID_CELLS = 400_000_000


@dataclass
class VoxelResult:
    points: np.ndarray  # (N, 3) particle centres, in the frame of the input vertices
    mode: str  # 'filled', 'shell' or 'filled+shell'
    closed: bool  # the mesh is watertight (every edge shared by an even number of triangles)
    volume: float  # enclosed volume of a closed mesh (0 for open ones)
    area: float  # surface area
    filled_count: int  # particles inside the volume
    shell_count: int  # particles added on the surface
    # (N,) per particle: 1 where the whole voxel cube around it is solid (its corners are inside the
    # mesh), else 0 (a sphere); what Model.particle_corner_reach takes (see core.voxel_corners)
    corner_reach: np.ndarray | None = None
    # (N, 4) per particle: a voxel's support sphere near a curved surface (centre less the particle's centre,
    # radius; 0: none), what Model.particle_support_sphere takes (see core.support_spheres)
    support_spheres: np.ndarray | None = None


def _as_mesh(vertices, triangles):
    v = np.asarray(vertices, dtype=np.float64).reshape(-1, 3)
    t = np.asarray(triangles, dtype=np.int64).reshape(-1, 3)
    if len(t) and (t.min() < 0 or t.max() >= len(v)):
        raise ValueError("triangle indices out of range")
    return v, t


def weld(vertices, triangles, tolerance: float | None = None):
    """Merge vertices closer than ``tolerance`` (default 1e-7 of the mesh size) and drop triangles
    that become degenerate. Imported meshes often have split vertices that make them look open."""
    v, t = _as_mesh(vertices, triangles)
    if len(v) == 0:
        return v, t
    if tolerance is None:
        size = float(np.ptp(v, axis=0).max()) if len(v) else 0.0
        tolerance = max(size, 1e-30) * 1e-7
    key = np.round((v - v.min(axis=0)) / tolerance).astype(np.int64)
    _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    t = inverse[t]
    keep = (t[:, 0] != t[:, 1]) & (t[:, 1] != t[:, 2]) & (t[:, 0] != t[:, 2])
    return v[first], t[keep]


def triangle_areas(vertices, triangles) -> np.ndarray:
    v, t = _as_mesh(vertices, triangles)
    a, b, c = v[t[:, 0]], v[t[:, 1]], v[t[:, 2]]
    return 0.5 * np.linalg.norm(np.cross(b - a, c - a), axis=1)


def surface_area(vertices, triangles) -> float:
    return float(triangle_areas(vertices, triangles).sum())


def signed_volume(vertices, triangles) -> float:
    """Signed enclosed volume (divergence theorem); positive for outward-facing triangles."""
    v, t = _as_mesh(vertices, triangles)
    if len(t) == 0:
        return 0.0
    centre = v.mean(axis=0)  # subtract for accuracy far from the origin
    a, b, c = v[t[:, 0]] - centre, v[t[:, 1]] - centre, v[t[:, 2]] - centre
    return float(np.einsum("ij,ij->i", a, np.cross(b, c)).sum() / 6.0)


def edge_topology(triangles) -> tuple[bool, bool]:
    """(closed, oriented): closed when every undirected edge is used by an even number (>0) of
    triangles; oriented when every edge is used as often in one direction as in the other."""
    t = np.asarray(triangles, dtype=np.int64).reshape(-1, 3)
    if len(t) == 0:
        return False, False
    directed = np.concatenate([t[:, [0, 1]], t[:, [1, 2]], t[:, [2, 0]]])
    lo, hi = directed.min(axis=1), directed.max(axis=1)
    n = int(t.max()) + 1
    key = lo * n + hi
    forward = (directed[:, 0] == lo).astype(np.int64)
    uniq, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
    forward_counts = np.bincount(inverse.reshape(-1), weights=forward, minlength=len(uniq))
    closed = bool(np.all(counts % 2 == 0))
    oriented = closed and bool(np.all(2 * forward_counts == counts))
    return closed, oriented


@dataclass
class Grid:
    """Voxel centres origin + index * spacing, index in [0, shape)."""

    origin: np.ndarray  # (3,) centre of cell (0, 0, 0)
    spacing: float
    shape: tuple  # (nx, ny, nz)

    @property
    def cells(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def centres(self, index) -> np.ndarray:
        return self.origin + np.asarray(index, dtype=np.float64) * self.spacing


def grid_for(vertices, spacing: float, padding: int = 0) -> Grid:
    """Grid centred on the bounding box of ``vertices``, covering it, plus ``padding`` cells per side."""
    v = np.asarray(vertices, dtype=np.float64).reshape(-1, 3)
    lo, hi = v.min(axis=0), v.max(axis=0)
    extent = hi - lo
    # a tolerance (Blender stores float32) so that a cube of 3 spacings gets 3 cells, not 4
    n = np.maximum(1, np.ceil(extent / spacing - 1e-4)).astype(np.int64) + 2 * padding
    centre = 0.5 * (lo + hi)
    origin = centre - 0.5 * (n - 1) * spacing
    return Grid(origin, float(spacing), tuple(int(x) for x in n))


def estimate_particle_count(vertices, triangles, spacing: float) -> int:
    """Cheap estimate of the particles ``voxelize`` makes, computed before allocating any grid:
    enclosed volume / cell for closed meshes, surface cells for open ones."""
    v, t = _as_mesh(vertices, triangles)
    if len(t) == 0:
        return 0
    closed, _ = edge_topology(t)
    if closed:
        volume = abs(signed_volume(v, t))
        if volume > 0:
            return int(math.ceil(volume / spacing**3))
    # a surface crosses about |n_x| + |n_y| + |n_z| cells per spacing^2 of area (at most sqrt 3)
    return int(math.ceil(1.5 * surface_area(v, t) / spacing**2)) + 1


def _check_grid(grid: Grid):
    if grid.cells > MAX_GRID_CELLS:
        raise ValueError(
            f"voxel grid of {grid.shape[0]} x {grid.shape[1]} x {grid.shape[2]} cells is too large "
            f"(more than {MAX_GRID_CELLS:,}); use a larger particle radius")


def _column_hits(v, t, grid: Grid):
    """Crossings of the +z rays through every grid column with the triangles.

    Returns (column index (K,), z of the hit (K,), sign (K,): +1 where the triangle faces -z,
    i.e. the ray enters an outward-oriented solid, -1 where it leaves).
    """
    nx, ny, _ = grid.shape
    d = grid.spacing
    ox = grid.origin[0] + _JITTER[0] * d
    oy = grid.origin[1] + _JITTER[1] * d
    a, b, c = v[t[:, 0]], v[t[:, 1]], v[t[:, 2]]
    area2 = (b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (b[:, 1] - a[:, 1]) * (c[:, 0] - a[:, 0])
    xs = np.stack([a[:, 0], b[:, 0], c[:, 0]], axis=1)
    ys = np.stack([a[:, 1], b[:, 1], c[:, 1]], axis=1)
    i0 = np.clip(np.ceil((xs.min(axis=1) - ox) / d), 0, nx).astype(np.int64)
    i1 = np.clip(np.floor((xs.max(axis=1) - ox) / d), -1, nx - 1).astype(np.int64)
    j0 = np.clip(np.ceil((ys.min(axis=1) - oy) / d), 0, ny).astype(np.int64)
    j1 = np.clip(np.floor((ys.max(axis=1) - oy) / d), -1, ny - 1).astype(np.int64)
    ni = np.maximum(i1 - i0 + 1, 0)
    nj = np.maximum(j1 - j0 + 1, 0)
    counts = ni * nj
    counts[area2 == 0] = 0  # triangles seen edge-on from the ray do not cross it
    live = np.flatnonzero(counts)
    cols, zs, signs = [], [], []
    start = 0
    while start < len(live):
        # take as many triangles as fit in one chunk of (triangle, column) pairs
        csum = np.cumsum(counts[live[start:]])
        stop = start + max(1, int(np.searchsorted(csum, _CHUNK, side="right")))
        tri = live[start:stop]
        start = stop
        cnt = counts[tri]
        rep = np.repeat(np.arange(len(tri)), cnt)
        k = np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        tr = tri[rep]
        ci = i0[tr] + k // nj[tr]
        cj = j0[tr] + k % nj[tr]
        px = ox + ci * d
        py = oy + cj * d
        ax, ay, bx, by, cx, cy = a[tr, 0], a[tr, 1], b[tr, 0], b[tr, 1], c[tr, 0], c[tr, 1]
        # edge functions: weights of the opposite vertices (barycentric * area2)
        wa = (bx - px) * (cy - py) - (by - py) * (cx - px)
        wb = (cx - px) * (ay - py) - (cy - py) * (ax - px)
        wc = (ax - px) * (by - py) - (ay - py) * (bx - px)
        s = area2[tr]
        inside = np.where(s > 0, (wa >= 0) & (wb >= 0) & (wc >= 0), (wa <= 0) & (wb <= 0) & (wc <= 0))
        tr = tr[inside]
        z = (wa[inside] * a[tr, 2] + wb[inside] * b[tr, 2] + wc[inside] * c[tr, 2]) / s[inside]
        cols.append(ci[inside] * ny + cj[inside])
        zs.append(z)
        signs.append(np.where(s[inside] > 0, -1, 1).astype(np.int32))
    if not cols:
        return np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int32)
    return np.concatenate(cols), np.concatenate(zs), np.concatenate(signs)


def fill_mask(vertices, triangles, grid: Grid, rule: str = "nonzero") -> np.ndarray:
    """(nx, ny, nz) bool: voxel centres inside the closed mesh (rule 'nonzero' or 'evenodd')."""
    v, t = _as_mesh(vertices, triangles)
    _check_grid(grid)
    nx, ny, nz = grid.shape
    mask = np.zeros((nx * ny, nz), dtype=bool)
    col, z, sign = _column_hits(v, t, grid)
    if len(col) == 0:
        return mask.reshape(nx, ny, nz)
    # a crossing at height z changes the state of every voxel centre above it
    k = np.clip(np.ceil((z - grid.origin[2]) / grid.spacing), 0, nz).astype(np.int64)
    used, local = np.unique(col, return_inverse=True)
    local = local.reshape(-1)
    flat = local * (nz + 1) + k
    if rule == "nonzero":
        delta = np.bincount(flat, weights=sign, minlength=len(used) * (nz + 1))
        inside = np.cumsum(delta.reshape(len(used), nz + 1), axis=1)[:, :nz] != 0
    elif rule == "evenodd":
        delta = np.bincount(flat, minlength=len(used) * (nz + 1))
        inside = np.cumsum(delta.reshape(len(used), nz + 1), axis=1)[:, :nz] % 2 == 1
    else:
        raise ValueError(f"unknown fill rule {rule!r}")
    mask[used] = inside
    return mask.reshape(nx, ny, nz)


def surface_samples(vertices, triangles, max_gap: float):
    """Points on every triangle no farther than ``max_gap`` apart (a barycentric lattice per
    triangle), yielded in chunks so that huge meshes do not need one huge array."""
    v, t = _as_mesh(vertices, triangles)
    a, b, c = v[t[:, 0]], v[t[:, 1]], v[t[:, 2]]
    longest = np.max(np.stack([np.linalg.norm(b - a, axis=1), np.linalg.norm(c - b, axis=1),
                               np.linalg.norm(a - c, axis=1)]), axis=0)
    levels = np.maximum(1, np.ceil(longest / max_gap)).astype(np.int64)
    for n in np.unique(levels):
        idx = np.flatnonzero(levels == n)
        i, j = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
        keep = i + j <= n
        u = (i[keep] / n).astype(np.float64)
        w = (j[keep] / n).astype(np.float64)
        per = max(1, _CHUNK // len(u))
        for s in range(0, len(idx), per):
            sel = idx[s:s + per]
            ea = (b[sel] - a[sel])[:, None, :]
            eb = (c[sel] - a[sel])[:, None, :]
            pts = a[sel][:, None, :] + u[None, :, None] * ea + w[None, :, None] * eb
            yield pts.reshape(-1, 3)


def shell_mask(vertices, triangles, grid: Grid) -> np.ndarray:
    """(nx, ny, nz) bool: cells whose centre is the nearest grid centre to some point of the surface."""
    _check_grid(grid)
    shape = np.array(grid.shape)
    mask = np.zeros(grid.shape, dtype=bool)
    for pts in surface_samples(vertices, triangles, 0.5 * grid.spacing):
        idx = np.rint((pts - grid.origin) / grid.spacing).astype(np.int64)
        idx = np.clip(idx, 0, shape - 1)
        mask[idx[:, 0], idx[:, 1], idx[:, 2]] = True
    return mask


def _dilate(mask: np.ndarray) -> np.ndarray:
    """Cells within one cell (26-neighbourhood) of a True cell; separable over the axes."""
    out = mask.copy()
    for axis in range(3):
        src = out.copy()
        lo = [slice(None)] * 3
        hi = [slice(None)] * 3
        lo[axis] = slice(0, -1)
        hi[axis] = slice(1, None)
        out[tuple(lo)] |= src[tuple(hi)]
        out[tuple(hi)] |= src[tuple(lo)]
    return out


# Where a voxel's corners are tested, as a fraction of the way from its centre: just inside the
# corner, so that the corners of a box voxelized along its edges count as inside.
CORNER_TEST_FRACTION = 0.9


def solid_corners(vertices, triangles, grid: Grid, filled: np.ndarray, rule: str) -> np.ndarray:
    """(nx, ny, nz) bool: filled cells whose eight corners (at CORNER_TEST_FRACTION) are inside the
    mesh as well. Eight fills of the grid shifted towards each corner."""
    solid = filled.copy()
    half = 0.5 * CORNER_TEST_FRACTION * grid.spacing
    for sx in (-1, 1):
        for sy in (-1, 1):
            for sz in (-1, 1):
                shifted = Grid(grid.origin + half * np.array([sx, sy, sz]), grid.spacing, grid.shape)
                solid &= fill_mask(vertices, triangles, shifted, rule)
    return solid


def voxelize(vertices, triangles, spacing: float, *, mode: str = "auto", max_particles: int | None = None,
             weld_vertices: bool = True) -> VoxelResult:
    """Particles of diameter ``spacing`` representing the mesh.

    mode: 'auto' (closed meshes filled, with shell cells where the solid is thinner than a cell;
    open meshes as a shell), 'fill' or 'shell'. Raises ValueError before allocating anything when
    the estimate exceeds ``max_particles``.
    """
    if not (spacing > 0 and math.isfinite(spacing)):
        raise ValueError(f"spacing must be positive, got {spacing}")
    v, t = _as_mesh(vertices, triangles)
    if not np.all(np.isfinite(v)):
        raise ValueError("vertex positions must be finite")
    if weld_vertices:
        v, t = weld(v, t)
    area = surface_area(v, t)
    if len(t) == 0 or area <= 0:
        raise ValueError("the mesh has no faces of non-zero area")
    closed, oriented = edge_topology(t)
    volume = abs(signed_volume(v, t)) if closed else 0.0
    if max_particles is not None:
        estimate = estimate_particle_count(v, t, spacing)
        if estimate > max_particles:
            raise ValueError(f"about {estimate:,} particles, more than the limit of {max_particles:,}")
    grid = grid_for(v, spacing, padding=1)
    _check_grid(grid)
    want_fill = mode == "fill" or (mode == "auto" and closed and volume > 0)
    want_shell = mode == "shell" or mode == "auto"
    if mode not in ("auto", "fill", "shell"):
        raise ValueError(f"unknown voxelize mode {mode!r}")
    rule = "nonzero" if oriented else "evenodd"
    filled = fill_mask(v, t, grid, rule) if want_fill else None
    shell = shell_mask(v, t, grid) if want_shell else None
    if filled is not None and filled.any():
        if shell is not None and mode == "auto":
            shell &= ~_dilate(filled)
        final_mode = "filled+shell" if (shell is not None and shell.any()) else "filled"
    else:
        final_mode = "shell" if shell is not None else "filled"
        if filled is not None and mode == "auto":
            filled = None
    n_fill = int(filled.sum()) if filled is not None else 0
    n_shell = int(shell.sum()) if shell is not None else 0
    mask = np.zeros(grid.shape, dtype=bool)
    if filled is not None:
        mask |= filled
    if shell is not None:
        mask |= shell
    cells = np.argwhere(mask)
    points = grid.centres(cells)
    corner_reach = np.zeros(len(points))
    spheres = np.zeros((len(points), 4))
    if filled is not None and n_fill:
        solid = solid_corners(v, t, grid, filled, rule)
        corner_reach[solid[cells[:, 0], cells[:, 1], cells[:, 2]]] = 1.0
        # the solid's voxels near a curved surface (not the shell's, a thin part): the mesh's
        # curvature under them
        spheres = support_spheres(v, t, points, filled[cells[:, 0], cells[:, 1], cells[:, 2]], 0.5 * spacing)
    return VoxelResult(points=points, mode=final_mode, closed=closed, volume=volume, area=area,
                       filled_count=n_fill, shell_count=n_shell, corner_reach=corner_reach,
                       support_spheres=spheres)


def polar_decomposition(matrix3) -> tuple[np.ndarray, np.ndarray]:
    """M = R @ S with R orthogonal (det -1 for mirrored objects) and S symmetric positive
    semi-definite (scale and shear). Works on (3, 3) or (N, 3, 3)."""
    m = np.asarray(matrix3, dtype=np.float64)
    u, s, vt = np.linalg.svd(m)
    rot = u @ vt
    stretch = np.swapaxes(vt, -1, -2) @ (s[..., :, None] * vt)
    return rot, stretch
