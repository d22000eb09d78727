"""Voxels against colliders (addon/core/voxel_corners.py): a box of particles meets the ground with
sharp edges and corners, as a box does, instead of the particles' rounded ones."""
import math

import numpy as np
import pytest

from addon.core import Material, ModelBuilder
from addon.core.rotations import quaternion_to_matrix
from addon.core.shapes import cube_particles
from addon.core.colliders import triangle_growth
from addon.core.voxel_corners import CORNER_SOFTNESS, voxel_support
from tests.core.test_triangles import grid_mesh
from tests.core.helpers import CUBE_SIDE, RADIUS, add_cube, axis_angle_quaternion, engine_for, run_for

G = 9.81


def test_support_depths_of_a_face_an_edge_and_a_corner():
    r, e = RADIUS, CORNER_SOFTNESS
    identity = np.eye(3)
    down = np.array([0.0, 0.0, -1.0])
    edge = np.array([1.0, 0.0, -1.0]) / math.sqrt(2)
    corner = np.array([1.0, -1.0, -1.0]) / math.sqrt(3)
    assert voxel_support(down, 1.0, identity, r)[0] == pytest.approx(r, rel=1e-12)  # a face: as the sphere
    assert voxel_support(edge, 1.0, identity, r)[0] == pytest.approx(r * (math.sqrt(2) - e / 2), rel=1e-12)
    assert voxel_support(corner, 1.0, identity, r)[0] == pytest.approx(r * (math.sqrt(3) - e), rel=1e-12)
    depth, arm = voxel_support(corner, 1.0, identity, r)
    assert np.allclose(arm, r * np.array([1.0, -1.0, -1.0]) + r * e / 2 * corner)  # the corner, a little rounded
    # no reach: the particle's sphere, touching on the line of centres
    for u in (down, edge, corner):
        depth, arm = voxel_support(u, 0.0, identity, r)
        assert depth == r and np.allclose(arm, r * u)
    # half a reach lies between
    assert r < voxel_support(corner, 0.5, identity, r)[0] < voxel_support(corner, 1.0, identity, r)[0]


def test_support_point_is_the_gradient_of_the_depth():
    """The force acts at the support point, so it is the gradient of a potential: turning the voxel
    changes the depth by arm . (axis x u) per radian, everywhere (soft zone included)."""
    rng = np.random.default_rng(3)
    for case in range(200):
        reach = rng.choice([1.0, 0.6])
        rotation = quaternion_to_matrix(axis_angle_quaternion(rng.normal(size=3), rng.uniform(0, np.pi)))
        u = rng.normal(size=3)
        if case % 4 == 0:  # close to a face: inside the soft zone
            u = rotation @ np.array([rng.uniform(-0.03, 0.03), rng.uniform(-0.03, 0.03), 1.0])
        u /= np.linalg.norm(u)
        axis = rng.normal(size=3)
        axis /= np.linalg.norm(axis)
        depth, arm = voxel_support(u, reach, rotation, RADIUS)
        h = 1e-6
        turned = quaternion_to_matrix(axis_angle_quaternion(axis, h))
        # the voxel turns by h about axis: u seen from it turns by -h
        plus = voxel_support(u, reach, turned @ rotation, RADIUS)[0]
        minus = voxel_support(u, reach, turned.T @ rotation, RADIUS)[0]
        assert (plus - minus) / (2 * h) == pytest.approx(-arm @ np.cross(axis, u), abs=1e-7)


def touching_height(tilt, reach):
    """Height of a cube's centre tilted by ``tilt`` about y with its lowest voxel just touching z = 0."""
    rotation = quaternion_to_matrix(axis_angle_quaternion((0, 1, 0), tilt))
    offsets = cube_particles(CUBE_SIDE)
    offsets = offsets - offsets.mean(axis=0)
    return max(voxel_support((0.0, 0.0, -1.0), reach, rotation, RADIUS)[0] - (rotation @ p)[2] for p in offsets)


@pytest.mark.parametrize("reach,floor", [(1.0, "plane"), (1.0, "mesh"), (0.0, "plane")])
def test_cube_stands_on_its_edge_at_a_box_s_height(reach, floor):
    """Balanced on an edge (unstable, held by symmetry) a box's centre is side / sqrt 2 up, on a
    plane as on a triangulated floor (whose triangles must then be found sqrt 2 radii away from the
    edge voxels' centres, see colliders.triangle_growth). The particles' rounded edge puts it 10 %
    lower: side / 3 sqrt 2 + radius."""
    builder = ModelBuilder(RADIUS)
    material = Material(friction=0.8, restitution=0.0)
    add_cube(builder, (0.0, 0.0, touching_height(math.pi / 4, reach)), material=material,
             orientation=axis_angle_quaternion((0, 1, 0), math.pi / 4), corner_reach=reach)
    if floor == "plane":
        builder.add_ground_plane(0.0, material=material)
    else:
        builder.add_static_mesh(*grid_mesh(4.0, 12), material=material)
    state = run_for(engine_for(builder), 1.0)
    height = state.position[0, 2]
    box = CUBE_SIDE / math.sqrt(2)
    if reach:
        assert abs(height - box) < 0.01 * box, height  # the soft zone and the penetration: 0.9 %
    else:
        assert abs(height - (CUBE_SIDE * math.sqrt(2) / 3 + RADIUS)) < 0.005
    assert np.linalg.norm(state.velocity) < 1e-3
    assert abs(state.position[0, 0]) < 1e-3  # held by symmetry, not toppling


@pytest.mark.parametrize("reach", [1.0, 0.0])
def test_cube_falls_off_its_edge_like_a_box_pivoting_on_it(reach):
    """Released at 20 degrees on an edge, a box pivots on it: at angle theta its angular speed is
    sqrt(2 g dh / I_edge), dh = side / 2 (cos 20 + sin 20 - cos theta - sin theta), I_edge = 2/3 m side^2.
    Checked at 5 degrees, before the face lands (the contacts' compliance takes about 2.5 % of the
    energy). The particles' rounded edge falls from a lower centre, onto a narrower base: 10 % slower."""
    tilt = math.radians(20)
    builder = ModelBuilder(RADIUS)
    material = Material(friction=0.8, restitution=0.0)
    add_cube(builder, (0.0, 0.0, touching_height(tilt, reach)), material=material,
             orientation=axis_angle_quaternion((0, 1, 0), tilt), corner_reach=reach)
    builder.add_ground_plane(0.0, material=material)
    engine = engine_for(builder, sleep_speed=0.0)
    angle = tilt
    while angle > math.radians(5):
        state = run_for(engine, 0.002)
        q = state.orientation[0]
        angle = 2 * math.atan2(np.linalg.norm(q[1:]), abs(q[0]))
        assert engine.time < 1.0
    drop = CUBE_SIDE / 2 * (math.cos(tilt) + math.sin(tilt) - math.cos(angle) - math.sin(angle))
    box = math.sqrt(2 * G * drop / (2 / 3 * CUBE_SIDE**2))
    speed = abs(state.angular_velocity[0, 1])
    if reach:
        assert abs(speed - box) < 0.05 * box, (speed, box)
    else:
        assert speed < 0.92 * box, (speed, box)


def test_builder_checks_corner_reach_and_lattice():
    builder = ModelBuilder(RADIUS)
    cube = cube_particles(CUBE_SIDE)
    for bad in (1.5, -0.1, np.nan, np.ones(5)):
        with pytest.raises(ValueError, match="corner reach"):
            builder.add_body(cube, mass=1.0, corner_reach=bad)
    with pytest.raises(ValueError, match="lattice orientation"):
        builder.add_body(cube, mass=1.0, lattice_orientation=(0, 0, 0, 0))
    with pytest.raises(ValueError, match="lattice orientations"):
        builder.add_bodies(np.stack([cube, cube]), masses=1.0, lattice_orientations=np.ones((3, 4)))
    # per particle, and per body of a batch
    builder.add_body(cube, mass=1.0, corner_reach=np.linspace(0, 1, len(cube)))
    builder.add_bodies(np.stack([cube, cube]), masses=1.0, corner_reach=np.array([[0.0] * 27, [1.0] * 27]),
                       lattice_orientations=[(1, 0, 0, 0), (0, 0, 0, 2)])
    model = builder.finalize()
    assert model.particle_corner_reach.shape == (81,)
    assert np.allclose(model.particle_corner_reach[27:54], 0.0) and np.allclose(model.particle_corner_reach[54:], 1.0)
    assert np.allclose(model.body_lattice_orientation[2], (0, 0, 0, 1))


def test_triangle_boxes_grow_by_the_reach_only_along_the_normal():
    """A face touches a voxel only straight along its normal (the centre's closest point is inside
    the face), edges and vertices touch the sphere: a floor triangle's box grows sideways by the
    radius, up and down by the reach; a tilted one in between; a degenerate one by the reach."""
    floor = np.array([[[0.0, 0, 0], [1, 0, 0], [0, 1, 0]]])
    wall = np.array([[[0.0, 0, 0], [0, 1, 0], [0, 0, 1]]])
    tilted = np.array([[[0.0, 0, 0], [1, 0, 1], [0, 1, 0]]])
    needle = np.array([[[0.0, 0, 0], [1, 0, 0], [2, 0, 0]]])
    r, reach = 0.1, 0.17
    assert np.allclose(triangle_growth(floor, floor, r, reach), [[r, r, reach]])
    assert np.allclose(triangle_growth(wall, wall, r, reach), [[reach, r, r]])
    assert np.allclose(triangle_growth(tilted, tilted, r, reach), [[reach / math.sqrt(2), r, reach / math.sqrt(2)]])
    assert np.allclose(triangle_growth(needle, needle, r, reach), [[reach, reach, reach]])
    # a moving triangle: the larger of its two normals' components
    assert np.allclose(triangle_growth(floor, wall, r, reach), [[reach, r, reach]])


def test_kernels_match_reference_for_a_cube_on_an_edge_over_floor_triangle_edges():
    """The edge voxels sit right over the grid line of a triangulated floor, where only the
    face-like edge contacts (FACE_LIKE_COSINE) hold them: kernels and reference agree."""
    from addon.core import SimulationSettings
    from addon.core.opencl_engine import OpenCLEngine
    from addon.core.reference import ReferenceEngine

    builder = ModelBuilder(RADIUS)
    material = Material(friction=0.8, restitution=0.0)
    tilt = math.pi / 4 + 0.05  # falling off the edge, slowly
    add_cube(builder, (0.0, 0.0, touching_height(tilt, 1.0)), material=material,
             orientation=axis_angle_quaternion((0, 1, 0), tilt))
    builder.add_static_mesh(*grid_mesh(4.0, 12), material=material)
    model = builder.finalize()
    reference, kernels = ReferenceEngine(model), OpenCLEngine(model)
    edge_keys = 0
    for _ in range(6):
        reference.step(20)
        kernels.step(20)
        edge_keys += sum(1 for _, key in kernels.contact_keys() if key <= -2)
        # float32 may put a point on the shared edge inside both faces (one push more), as for spheres:
        # the tolerance of the other triangle tests
        np.testing.assert_allclose(kernels.body_state().position, reference.body_state().position, atol=2e-4)
        np.testing.assert_allclose(kernels.body_state().angular_velocity, reference.body_state().angular_velocity,
                                   atol=5e-3)
    assert edge_keys >= 6 * 3
    assert reference.body_state().position[0, 2] > touching_height(tilt, 0.0) + 0.03  # not on the spheres
