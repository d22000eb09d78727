"""Tests of addon.core.voxelize (no bpy): fill, shell, volumes, robustness, limits."""
from __future__ import annotations

import math

import numpy as np
import pytest

from addon.core import ModelBuilder
from addon.core import voxelize as vox


def box_mesh(size=(1, 1, 1), centre=(0, 0, 0)):
    s = np.asarray(size, float) / 2
    v = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float) * s + centre
    # vertex index = 4*(x>0) + 2*(y>0) + (z>0); faces outward, counter-clockwise
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    t = []
    for a, b, c, d in quads:
        t += [(a, b, c), (a, c, d)]
    return v, np.array(t)

def uv_sphere(radius=1.0, segments=32, rings=16):
    verts = [(0, 0, -radius)]
    for i in range(1, rings):
        th = np.pi * i / rings - np.pi / 2
        for j in range(segments):
            ph = 2 * np.pi * j / segments
            verts.append((radius * np.cos(th) * np.cos(ph), radius * np.cos(th) * np.sin(ph), radius * np.sin(th)))
    verts.append((0, 0, radius))
    tris = []
    top = len(verts) - 1
    ring = lambda i, j: 1 + (i - 1) * segments + (j % segments)
    for j in range(segments):
        tris.append((0, ring(1, j + 1), ring(1, j)))
        tris.append((top, ring(rings - 1, j), ring(rings - 1, j + 1)))
    for i in range(1, rings - 1):
        for j in range(segments):
            a, b, c, d = ring(i, j), ring(i, j + 1), ring(i + 1, j + 1), ring(i + 1, j)
            tris += [(a, b, c), (a, c, d)]
    return np.array(verts, float), np.array(tris)

def torus(major=1.0, minor=0.25, segments=48, sides=24):
    verts = []
    for i in range(segments):
        u = 2 * np.pi * i / segments
        for j in range(sides):
            w = 2 * np.pi * j / sides
            verts.append(((major + minor * np.cos(w)) * np.cos(u), (major + minor * np.cos(w)) * np.sin(u), minor * np.sin(w)))
    idx = lambda i, j: (i % segments) * sides + (j % sides)
    tris = []
    for i in range(segments):
        for j in range(sides):
            a, b, c, d = idx(i, j), idx(i + 1, j), idx(i + 1, j + 1), idx(i, j + 1)
            tris += [(a, b, c), (a, c, d)]
    return np.array(verts, float), np.array(tris)


def octahedron(h=1.0):
    v = np.array([[h, 0, 0], [-h, 0, 0], [0, h, 0], [0, -h, 0], [0, 0, h], [0, 0, -h]], float)
    t = np.array([[0, 2, 4], [2, 1, 4], [1, 3, 4], [3, 0, 4], [2, 0, 5], [1, 2, 5], [3, 1, 5], [0, 3, 5]])
    return v, t


def inside_convex(v, t, points, margin):
    """Independent oracle for convex meshes: inside all face planes by more than ``margin``,
    outside one by more than ``margin`` (else ambiguous -> None)."""
    a, b, c = v[t[:, 0]], v[t[:, 1]], v[t[:, 2]]
    n = np.cross(b - a, c - a)
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    dist = np.einsum("pfk,fk->pf", points[:, None, :] - a[None], n)
    worst = dist.max(axis=1)
    return worst < -margin, worst > margin


def all_centres(v, spacing):
    grid = vox.grid_for(v, spacing, padding=1)
    idx = np.argwhere(np.ones(grid.shape, bool))
    return grid, grid.centres(idx)


def test_cube_of_three_diameters_gives_the_seed_27_particles():
    d = 0.2
    v, t = box_mesh((3 * d, 3 * d, 3 * d), centre=(5.0, -2.0, 1.0))
    res = vox.voxelize(v, t, d)
    assert res.mode == "filled" and res.closed
    assert len(res.points) == 27
    expected = np.array([[x, y, z] for x in (-d, 0, d) for y in (-d, 0, d) for z in (-d, 0, d)]) + (5.0, -2.0, 1.0)
    got = res.points[np.lexsort(res.points.T[::-1])]
    assert np.allclose(got, expected[np.lexsort(expected.T[::-1])])
    assert math.isclose(res.volume, 27 * d**3, rel_tol=1e-12)


def test_voxels_of_a_box_are_solid_to_their_corners_and_a_sphere_s_surface_ones_are_not():
    """corner_reach (core.voxel_corners): 1 where the voxel's eight corners are inside the mesh."""
    v, t = box_mesh((0.6, 0.6, 0.6), centre=(1.0, 2.0, 3.0))
    assert np.all(vox.voxelize(v, t, 0.2).corner_reach == 1.0)
    spacing = 0.25
    v, t = uv_sphere(1.0, 48, 24)
    res = vox.voxelize(v, t, spacing)
    corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]) * 0.5 * spacing
    points = (res.points[:, None, :] + vox.CORNER_TEST_FRACTION * corners[None]).reshape(-1, 3)
    inside, outside = inside_convex(v, t, points, 1e-6 * spacing)
    all_inside = inside.reshape(-1, 8).all(axis=1)
    some_outside = outside.reshape(-1, 8).any(axis=1)
    assert all_inside.sum() > 0.3 * len(res.points) and some_outside.sum() > 0.3 * len(res.points)
    assert np.all(res.corner_reach[all_inside] == 1.0) and np.all(res.corner_reach[some_outside] == 0.0)
    # an open mesh is a shell of spheres
    assert np.all(vox.voxelize(v, t[:-10], spacing).corner_reach == 0.0)


def test_float32_sizes_do_not_add_a_layer():
    d = 0.2
    v, t = box_mesh((0.6, 0.6, 0.6))
    v = v.astype(np.float32).astype(np.float64) * np.float32(1.0000001)
    assert len(vox.voxelize(v, t, d).points) == 27


def test_box_inertia_matches_analytic_box():
    d = 0.1
    size = np.array([3 * d, 2 * d, 1 * d])
    v, t = box_mesh(size)
    res = vox.voxelize(v, t, d)
    assert len(res.points) == 6
    mass = 2.5
    builder = ModelBuilder(particle_radius=d / 2)
    builder.add_body(res.points, mass=mass)
    inertia = builder.finalize().body_inertia_local[0]
    a, b, c = size
    analytic = mass / 12 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b])
    assert np.allclose(inertia, analytic, rtol=1e-9, atol=1e-15)


@pytest.mark.parametrize("spacing,tolerance", [(0.25, 0.06), (0.125, 0.03), (0.0625, 0.015)])
def test_uv_sphere_volume_and_exact_classification(spacing, tolerance):
    v, t = uv_sphere(1.0, 48, 24)
    res = vox.voxelize(v, t, spacing)
    assert res.mode == "filled"
    mesh_volume = vox.signed_volume(v, t)
    assert abs(len(res.points) * spacing**3 - mesh_volume) / mesh_volume < tolerance
    assert abs(mesh_volume - 4 / 3 * math.pi) / (4 / 3 * math.pi) < 0.01
    if spacing < 0.1:
        return  # the brute-force oracle below is slow on fine grids
    # every unambiguous grid centre is classified like the half-space oracle says
    grid, centres = all_centres(v, spacing)
    inside, outside = inside_convex(v, t, centres, 1e-6 * spacing)
    mask = vox.fill_mask(v, t, grid)
    flat = mask.reshape(-1)
    assert np.all(flat[inside]) and not np.any(flat[outside])


def test_rays_through_vertices_and_edges():
    # odd grids: the middle column runs exactly through the octahedron's apexes and the edges
    # of its equator lie on grid lines; the sphere's poles too.
    for v, t, d in [(*octahedron(1.0), 0.4), (*octahedron(1.0), 0.2), (*uv_sphere(1.0, 32, 16), 0.4)]:
        grid, centres = all_centres(v, d)
        inside, outside = inside_convex(v, t, centres, 1e-9)
        flat = vox.fill_mask(v, t, grid).reshape(-1)
        assert np.all(flat[inside]) and not np.any(flat[outside])


def test_torus_volume_and_empty_hole():
    major, minor = 1.0, 0.3
    v, t = torus(major, minor, 96, 48)
    d = 0.1
    res = vox.voxelize(v, t, d)
    assert res.mode == "filled"
    analytic = 2 * math.pi**2 * major * minor**2
    assert abs(len(res.points) * d**3 - analytic) / analytic < 0.04
    radial = np.hypot(res.points[:, 0], res.points[:, 1])
    assert radial.min() > major - minor - 1e-9  # nothing in the hole
    tube = np.hypot(radial - major, res.points[:, 2])
    assert tube.max() < minor


def test_mirrored_and_inconsistent_meshes_still_fill():
    d = 0.2
    v, t = box_mesh((0.6, 0.6, 0.6))
    assert len(vox.voxelize(v, t[:, ::-1], d).points) == 27  # all normals inward (negative scale)
    flipped = t.copy()
    flipped[::3] = flipped[::3, ::-1]
    assert vox.edge_topology(flipped) == (True, False)
    assert len(vox.voxelize(v, flipped, d).points) == 27  # even-odd rule


def test_overlapping_closed_parts_fill_their_union():
    d = 0.1
    v1, t1 = box_mesh((0.6, 0.6, 0.6))
    v2, t2 = box_mesh((0.6, 0.6, 0.6), centre=(0.3, 0.0, 0.0))
    v = np.concatenate([v1, v2])
    t = np.concatenate([t1, t2 + len(v1)])
    res = vox.voxelize(v, t, d)
    # union is 0.9 x 0.6 x 0.6 -> 9 x 6 x 6 cells
    assert len(res.points) == 9 * 6 * 6


def test_open_mesh_gets_a_shell_along_its_surface():
    d = 0.1
    v, t = box_mesh((1.0, 1.0, 1.0))
    t = t[2:]  # remove one face (x = -0.5): an open box
    assert vox.edge_topology(t) == (False, False)
    res = vox.voxelize(v, t, d)
    assert res.mode == "shell" and res.filled_count == 0
    # every particle sits on the surface (within half a cell diagonal), the inside stays empty
    p = res.points
    dist_to_box = 0.5 - np.abs(p).max(axis=1)
    assert np.all(np.abs(dist_to_box) <= math.sqrt(3) / 2 * d + 1e-9)
    # the surface is covered: every sample of it is within half a cell diagonal of a particle
    samples = np.concatenate(list(vox.surface_samples(v, t, d / 3)))
    nearest = np.min(np.linalg.norm(samples[:, None, :] - p[None, :, :], axis=2), axis=1)
    assert nearest.max() <= math.sqrt(3) / 2 * d + 1e-9
    # about one layer: 5 faces of 10 x 10 cells, allowing for edges and rounding
    assert 400 <= len(p) <= 700


def test_flat_and_thin_objects_collide_through_a_shell():
    d = 0.1
    plane_v = np.array([[-0.5, -0.5, 0], [0.5, -0.5, 0], [0.5, 0.5, 0], [-0.5, 0.5, 0]], float)
    plane_t = np.array([[0, 1, 2], [0, 2, 3]])
    res = vox.voxelize(plane_v, plane_t, d)
    assert res.mode == "shell"
    assert 100 <= len(res.points) <= 121 * 2 and np.ptp(res.points[:, 2]) <= d + 1e-12
    # closed, but much thinner than a cell, and off the grid's middle plane (bounding box of the
    # mesh from z = 0 to 0.265): no centre lies inside it, the shell keeps it collidable
    v, t = box_mesh((1.0, 1.0, 0.03), centre=(0, 0, 0.25))
    v = np.concatenate([v, [[0, 0, 0.0]]])  # a loose vertex: grid centres at z = 0.0325, 0.1325, 0.2325
    res = vox.voxelize(v, t, d)
    assert res.closed and res.filled_count == 0 and res.mode == "shell"
    assert 100 <= len(res.points) <= 2 * 121
    assert np.all(np.abs(res.points[:, 2] - 0.25) <= d)


def test_sharp_tip_thinner_than_a_cell_gets_shell_particles():
    d = 0.1
    # a long thin spike on a cube: the cube fills, the spike (too thin for any centre) gets a shell
    v, t = box_mesh((0.6, 0.6, 0.6))
    spike_v, spike_t = box_mesh((0.02, 0.02, 0.6), centre=(0.0, 0.0, 0.6))
    res = vox.voxelize(np.concatenate([v, spike_v]), np.concatenate([t, spike_t + 8]), d)
    assert res.mode == "filled+shell" and res.shell_count >= 3
    assert res.points[:, 2].max() > 0.7


def test_limits_refuse_before_allocating():
    v, t = box_mesh((1.0, 1.0, 1.0))
    est = vox.estimate_particle_count(v, t, 1e-3)
    assert est == 10**9
    with pytest.raises(ValueError, match="more than the limit"):
        vox.voxelize(v, t, 1e-3, max_particles=20_000_000)
    with pytest.raises(ValueError, match="too large"):
        vox.fill_mask(v, t, vox.grid_for(v, 1e-3))
    with pytest.raises(ValueError, match="no faces"):
        vox.voxelize(np.zeros((3, 3)), [[0, 1, 2]], 0.1)


def test_polar_decomposition():
    rng = np.random.default_rng(3)
    m = rng.normal(size=(5, 3, 3))
    m[0] = np.diag([-1.0, 2.0, 3.0])
    rot, stretch = vox.polar_decomposition(m)
    assert np.allclose(rot @ stretch, m)
    assert np.allclose(rot @ np.swapaxes(rot, 1, 2), np.eye(3))
    assert np.allclose(stretch, np.swapaxes(stretch, 1, 2))
    assert np.all(np.linalg.eigvalsh(stretch) > 0)
    assert np.linalg.det(rot[0]) < 0
