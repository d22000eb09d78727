"""Manifolds of a few points per body pair (addon/core/manifold.py, kernels/61_pair_colouring.cl
reduce_pair_records, 62_pair_solve.cl's points in sequence with friction at each manifold's centre):
Box3D's choice of points, the kernels against the NumPy reference (the manifolds of a tumbling
scene: test_rigid_step.py), and what the points in sequence hold at the defaults."""
import numpy as np
import pytest

from addon.core import Material, ModelBuilder, SimulationSettings
from addon.core.manifold import MANIFOLD_POINTS, reduce_manifold
from addon.core.reference import ReferenceEngine
from addon.core.shapes import cube_particles
from bench.contact_figures import column, momentum
from tests.core.helpers import assert_kernels_follow_the_solve_reference
from tests.core.test_rigid_step import tumbling_bodies

R = 1 / 6


def face(side):
    """Points of a side x side face of voxel contacts 2 R apart, normal +z."""
    points = np.array([[x, y, 0.0] for x in np.arange(side) * 2 * R for y in np.arange(side) * 2 * R])
    return np.tile([0.0, 0.0, 1.0], (len(points), 1)), points


@pytest.mark.parametrize("side", [3, 5])
def test_a_face_keeps_its_four_corners(side):
    normals, points = face(side)
    depths = np.full(len(points), 1e-3) + np.random.default_rng(side).normal(0.0, 1e-5, len(points))
    kept = reduce_manifold(normals, points, depths, 4, R)
    corners = {0, side - 1, side * (side - 1), side * side - 1}
    assert set(kept) == corners
    # the depths wobbling by a hundredth of a radius keep the same points (the warm start's ids)
    wobbled = depths + np.random.default_rng(7).normal(0.0, 1e-2 * R, len(points))
    assert reduce_manifold(normals, points, wobbled, 4, R) == kept


def test_each_direction_keeps_its_own_manifold_and_fewer_points_are_kept_on_request():
    normals, points = face(4)
    wall = np.array([[0.0, 0.0, z] for z in np.arange(1, 7) * 2 * R])
    all_normals = np.vstack([normals, np.tile([1.0, 0.0, 0.0], (len(wall), 1))])
    all_points = np.vstack([points, wall])
    depths = np.full(len(all_points), 1e-3)
    kept = reduce_manifold(all_normals, all_points, depths, 4, R)
    assert len([t for t in kept if t < 16]) == 4
    # a line of points has no area: its two ends
    assert [t for t in kept if t >= 16] == [16, 21]
    assert len(reduce_manifold(all_normals, all_points, depths, 2, R)) == 4
    assert len(reduce_manifold(all_normals, all_points, depths, 1, R)) == 2


@pytest.mark.parametrize("substeps_per_detection", [1, 4])
def test_kernels_match_the_reference_centre_friction(substeps_per_detection):
    """Friction and twist at each manifold's centre: two cubes spinning and sliding, one on the
    ground and one on the other (rigid contacts: the soft step switches at the slop, where float32
    and float64 may take different sides)."""
    builder = ModelBuilder(particle_radius=R)
    material = Material(friction=0.5, restitution=0.0)
    builder.add_body(cube_particles(1.0), density=1000.0, position=(0, 0, 0.5), velocity=(0.3, 0, 0),
                     angular_velocity=(0, 0, 2.0), material=material, corner_reach=1.0)
    builder.add_body(cube_particles(1.0), density=1000.0, position=(0.1, 0, 1.5), angular_velocity=(0, 0, -1.0),
                     material=material, corner_reach=1.0)
    builder.add_ground_plane(0.0, material=material)
    model = builder.finalize()
    settings = SimulationSettings(substeps_per_detection=substeps_per_detection, solve_hertz_fraction=0.0)
    reference, solved = assert_kernels_follow_the_solve_reference(model, settings, 60)
    assert solved > 0.0
    spin = reference.body_state().angular_velocity[:, 2]
    assert abs(spin[0]) < 1.0  # the twist slowed the spin


def dropped_on_a_cube(restitution, speed):
    """A cube resting on another on the ground, a third dropped on them at ``speed`` m/s. The two
    start 1 mm deep, so their soft contacts settle from above the slop and do not cross it, where
    the solve switches between soft and rigid (float noise in the depths would pick a side)."""
    builder = ModelBuilder(particle_radius=R)
    material = Material(friction=0.5, restitution=restitution)
    for k in range(2):
        builder.add_body(cube_particles(1.0), density=1000.0, position=(0.02 * k, 0, 0.499 + 0.999 * k),
                         material=material, corner_reach=1.0)
    builder.add_body(cube_particles(1.0), density=1000.0, position=(0.1, 0, 2.55), velocity=(0, 0, -speed),
                     angular_velocity=(0.3, 0, 0), material=material, corner_reach=1.0)
    builder.add_ground_plane(0.0, material=material)
    return builder.finalize()


@pytest.mark.parametrize("substeps_per_detection", [1, 4])
def test_kernels_match_the_reference_restitution_passes(substeps_per_detection):
    """The restitution passes at each detection's last substep (gated by the normal impulse a point
    carried since its detection) agree: a cube dropped on a stack of two, rebounding, over the 30
    substeps of the impact and the rebound. (It lands back at substep 31, its contact crossing the
    slop, where the soft step switches on: float32 and float64 may take different sides there.)"""
    settings = SimulationSettings(substeps_per_detection=substeps_per_detection)
    rising = []

    def top_speed(reference, _):
        rising.append(reference.body_state().velocity[2, 2])

    reference, solved = assert_kernels_follow_the_solve_reference(dropped_on_a_cube(0.6, 3.0), settings, 30, top_speed)
    assert solved > 0.0
    # it rebounded: from 3 m/s at e 0.6 the top parts from the stack at 1.5 m/s, but the passes
    # leave the stack sinking with it (rigid-step.md, X3): after 10 substeps 0.44 m/s detected every
    # substep, 0.38 every 4 (the impact lands in a step's last substep, detected a step early)
    assert max(rising) > 0.3


def test_a_forty_cube_column_stands_straight():
    """Points solved in sequence, every other substep last to first: the 40-cube column's top stays
    within 1 mm of its axis after 3 s and 0.5 % of its height (measured on PoCL: 0.16 mm, 0.18 %;
    always first to last it crept 10 cm; issue 22 asks 1 %)."""
    stack = column({})
    assert stack["top_drift_m"] < 1e-3
    assert stack["height_lost_fraction"] < 5e-3


def test_the_scene_has_pairs_of_more_than_four_records_and_they_are_reduced():
    """What the reduction is tested on (test_rigid_step.py's agreement scene): some pair's records
    number more than 4, and its manifolds keep fewer of them."""
    reference = ReferenceEngine(tumbling_bodies(), SimulationSettings())
    body = reference.model.particle_body
    most = 0
    reduced = False
    for _ in range(60):
        reference.step()
        found = {}
        for i, records in reference.records.items():
            for record in records:
                key = (int(body[i]), int(record[1]))
                found[key] = found.get(key, 0) + 1
        most = max([most, *found.values()])
        kept = {(int(b), int(c)): len(listed)
                for b, c, listed in zip(reference.pairs.pair_body, reference.pairs.pair_other, reference.pair_records)}
        reduced |= any(kept.get(key, 0) < count for key, count in found.items() if count > MANIFOLD_POINTS)
    assert most > MANIFOLD_POINTS
    assert reduced


@pytest.mark.parametrize("every", [1, 4])
def test_a_glancing_impact_keeps_its_momentum_with_manifolds(every):
    """A spinning cube glancing off a turned box (no gravity, friction 0.6), detected every substep
    and every 4: linear and angular momentum within 1e-3 (issue 22's gate). Each impulse acts on
    both bodies at one world point (62_pair_solve.cl SolveBody.arms_now); with each side at its own
    arm from the detection the pair lost 3-5 % of its angular momentum."""
    figures = momentum({"substeps_per_detection": every})
    assert figures["linear_change"] < 1e-3
    assert abs(figures["angular_change"]) < 1e-3
