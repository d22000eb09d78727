"""Support spheres (addon/core/support_spheres.py, voxel_corners.sphere_patch_support): a converted
ball meets planes and triangle faces as the ball, so it rolls down a slope instead of sliding over
the staircase of its voxels."""
import math

import numpy as np
import pytest

from addon.core import Material, ModelBuilder, SimulationSettings
from addon.core import voxelize as vox
from addon.core.rotations import quaternion_to_matrix
from addon.core.support_spheres import support_spheres
from addon.core.voxel_corners import SUPPORT_SPHERE_REACH, voxel_support
from bench.contact_figures import rolling_on, slope_mesh
from tests.core.helpers import assert_kernels_follow_the_solve_reference, axis_angle_quaternion
from tests.core.test_voxelize import box_mesh, uv_sphere


@pytest.mark.parametrize("segments,rings", [(16, 8), (32, 16), (64, 32)])
def test_every_voxel_near_a_uv_sphere_has_the_ball_as_its_support_sphere(segments, rings):
    v, t = uv_sphere(0.5, segments, rings)
    result = vox.voxelize(v + [0.3, -0.2, 0.1], t, 0.1)
    spheres = result.support_spheres
    has = spheres[:, 3] > 0
    # every round (surface) voxel, and the whole ones just inside them
    assert has[result.corner_reach == 0].all()
    assert np.allclose(spheres[has, 3], 0.5, atol=1e-9)
    assert np.allclose(result.points[has] + spheres[has, :3], [0.3, -0.2, 0.1], atol=1e-9)
    # none deep inside: the patch reaches SUPPORT_SPHERE_REACH radii from the voxel's centre
    depth_inside = 0.5 - np.linalg.norm(result.points - [0.3, -0.2, 0.1], axis=1)
    assert not has[depth_inside > SUPPORT_SPHERE_REACH * 0.05 + 0.05].any()


def test_a_box_s_voxels_have_none():
    """Flat faces and sharp edges: the voxels meet colliders as they did (reach 0 where the box's
    size is not a whole number of voxels)."""
    v, t = box_mesh((1.05, 0.73, 0.5))
    result = vox.voxelize(v, t, 0.1)
    assert (result.corner_reach == 0).any()
    assert not result.support_spheres.any()


def cylinder_mesh(radius, height, segments=32, rings=6):
    """A closed cylinder along z: ``rings`` bands of quads round it, fans on its caps."""
    verts, tris = [], []
    for k in range(rings + 1):
        z = -height / 2 + height * k / rings
        verts += [(radius * math.cos(2 * math.pi * j / segments), radius * math.sin(2 * math.pi * j / segments), z)
                  for j in range(segments)]
    for k in range(rings):
        for j in range(segments):
            a, b = k * segments + j, k * segments + (j + 1) % segments
            tris += [(a, b, b + segments), (a, b + segments, a + segments)]
    bottom, top = len(verts), len(verts) + 1
    verts += [(0, 0, -height / 2), (0, 0, height / 2)]
    last = rings * segments
    for j in range(segments):
        tris += [(bottom, (j + 1) % segments, j), (top, last + j, last + (j + 1) % segments)]
    return np.array(verts), np.array(tris)


def test_a_cylinder_s_side_voxels_have_its_radius_and_axis_and_its_caps_none():
    """The largest principal curvature: a sphere of the cylinder's radius centred on its axis, inside
    it; none by the caps' sharp rims nor on the flat caps."""
    v, t = cylinder_mesh(0.4, 1.2)
    result = vox.voxelize(v, t, 0.1)
    spheres = result.support_spheres
    has = spheres[:, 3] > 0
    centres = result.points[has] + spheres[has, :3]
    assert has.sum() > 50
    assert np.allclose(spheres[has, 3], 0.4, atol=1e-9)
    assert np.allclose(centres[:, :2], 0.0, atol=1e-9)
    # within a band's height of a cap the surface point's triangle touches the sharp rim
    assert np.abs(result.points[has, 2]).max() < 0.6 - 0.1
    by_cap = (np.abs(result.points[:, 2]) > 0.5) & (np.linalg.norm(result.points[:, :2], axis=1) < 0.3)
    assert by_cap.any() and not has[by_cap].any()


def test_sphere_patch_support_is_the_sphere_where_its_point_is_the_voxel_s():
    r = 0.05
    centre, radius = np.array([0.01, -0.02, 0.45]), 0.5
    rng = np.random.default_rng(4)
    inside = outside = 0
    for _ in range(400):
        # about the direction away from the sphere's centre, where the voxel's patch is
        u = -centre / np.linalg.norm(centre) + 0.3 * rng.normal(size=3)
        u /= np.linalg.norm(u)
        depth, arm = voxel_support(u, 0.0, np.eye(3), r, (centre, radius))
        tip = centre + radius * u
        assert np.allclose(arm, tip)
        if np.linalg.norm(tip) <= SUPPORT_SPHERE_REACH * r:
            inside += 1
            assert depth == pytest.approx(centre @ u + radius)
            # the gradient of the depth under a turn of the voxel is the arm (energy kept)
            axis = rng.normal(size=3)
            axis /= np.linalg.norm(axis)
            h = 1e-6
            turn = quaternion_to_matrix(axis_angle_quaternion(axis, h))
            plus = voxel_support(u, 0.0, np.eye(3), r, (turn @ centre, radius))[0]
            minus = voxel_support(u, 0.0, np.eye(3), r, (turn.T @ centre, radius))[0]
            assert (plus - minus) / (2 * h) == pytest.approx(np.cross(axis, centre) @ u, abs=1e-7)
        else:
            outside += 1
            assert depth == -np.inf  # another voxel's patch holds that point
    assert inside > 20 and outside > 20
    # no sphere: the voxel by its reach, as before
    assert voxel_support(np.array([0.0, 0.0, -1.0]), 0.0, np.eye(3), r, (centre, 0.0))[0] == r


def ball_on_slope(floor: str, degrees=20.0, radius=0.3, particle_radius=0.05):
    v, t = uv_sphere(radius, 24, 12)
    result = vox.voxelize(v, t, 2 * particle_radius)
    theta = math.radians(degrees)
    normal = np.array([0.0, -math.sin(theta), math.cos(theta)])
    builder = ModelBuilder(particle_radius)
    material = Material(friction=0.5)
    if floor == "plane":
        builder.add_ground_plane(normal=normal, point=(0, 0, 0), material=material)
    else:
        builder.add_static_mesh(*slope_mesh(normal, size=4.0, cells=8), material=material)
    builder.add_body(result.points, density=1000.0, position=normal * (radius + 0.002), corner_reach=result.corner_reach,
                     support_spheres=result.support_spheres, material=material)
    return builder.finalize()


@pytest.mark.parametrize("floor", ["plane", "mesh"])
def test_kernels_follow_the_reference_with_support_spheres(floor):
    reference, solved = assert_kernels_follow_the_solve_reference(ball_on_slope(floor), SimulationSettings(), 60)
    assert solved > 0.0
    # the ball touched at its lowest point: every record's contact point is the ball's, R below its centre
    records = [record for records in reference.records.values() for record in records]
    assert records
    for record in records:
        assert record[2] @ record[0] == pytest.approx(0.3, abs=1e-6)


@pytest.mark.parametrize("floor", ["plane", "mesh"])
def test_a_converted_ball_rolls_down_a_slope(floor):
    """Issue 33: a voxelized UV sphere on a 20 degree slope, a plane or a triangle mesh, under the
    default settings (Rigid Voxels) accelerates at (5/7) g sin theta within 10 % and does not slip.
    On its voxels' spheres it went at 0.62 of it, its contact point slipping at 0.16 m/s."""
    figures = rolling_on(floor, {})
    assert figures["acceleration_over_rolling"] == pytest.approx(1.0, abs=0.1)
    assert abs(figures["slip_speed_at_1s_mps"]) < 0.02 * figures["speed_at_1s_mps"]
