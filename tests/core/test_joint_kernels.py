"""The joints in the kernels (kernels/65_joints.cl, core/joint_solve.py) against their NumPy
specification (reference_joints.py): every kind of row (locked, limited, springs, motors) on
pendulums, chains, sliders and wheels; breaking at Blender's threshold; joined bodies landing on the
ground with and without their contacts; islands of joined bodies falling asleep; a keyed enabled;
and the passes in one launch against a launch per colour, to the bit."""
import math

import numpy as np
import pytest

from addon.core import ModelBuilder, SimulationSettings
from addon.core.opencl_engine import OpenCLEngine
from addon.core.reference import ReferenceEngine
from addon.core.shapes import box_particles

R = 0.05  # 20 cm cubes of 2 x 2 x 2 particles
G = 9.81


def small_body(builder, position, mass=2.0, counts=(2, 2, 2)):
    return builder.add_body(box_particles(counts, 2 * R), mass=mass, position=position)


def every_kind_of_row():
    """Bodies far enough apart not to touch, each on a joint of another kind: a HINGE pendulum
    swinging into its limits, a POINT pendulum, a FIXED chain hanging from the world, a
    GENERIC_SPRING bobbing, a SLIDER falling onto its limit, a MOTOR spinning a wheel up, and two
    bodies joined by a HINGE (neither side the world)."""
    b = ModelBuilder(R)
    length, theta = 0.5, 0.3
    swinging = small_body(b, (length * math.sin(theta), 0.0, -length * math.cos(theta)))
    b.add_joint("HINGE", swinging, -1, (0.0, 0.0, 0.0), axis=(0.0, 1.0, 0.0), use_limit_ang=(False, False, True),
                limit_ang_lower=-0.15, limit_ang_upper=0.15)
    point = small_body(b, (1.0 + 0.3, 0.1, -0.4))
    b.add_joint("POINT", point, -1, (1.0, 0.0, 0.0))
    links = [small_body(b, (2.0, 0.0, -0.2 * (k + 0.5)), mass=1.0) for k in range(4)]
    b.add_joint("FIXED", links[0], -1, (2.0, 0.0, 0.0))
    for k in range(1, 4):
        b.add_joint("FIXED", links[k], links[k - 1], (2.0, 0.0, -0.2 * k))
    bob = small_body(b, (3.0, 0.0, -0.3))
    b.add_joint("GENERIC_SPRING", bob, -1, (3.0, 0.0, -0.3), use_spring=(True,) * 6, spring_stiffness=400.0,
                spring_damping=2.0)
    slider = small_body(b, (4.0, 0.0, 0.0))
    b.add_joint("SLIDER", slider, -1, (4.0, 0.0, 0.0), axis=(0.0, 0.0, 1.0), use_limit_lin=(True, False, False),
                limit_lin_lower=-0.05, limit_lin_upper=0.05)
    wheel = small_body(b, (5.0, 0.0, 0.0))
    b.add_joint("MOTOR", wheel, -1, (5.0, 0.0, 0.0), axis=(0.0, 1.0, 0.0), motor_ang_velocity=3.0,
                motor_ang_max_impulse=5.0)
    b.add_joint("POINT", wheel, -1, (5.0, 0.0, 0.0))
    upper = small_body(b, (6.0, 0.0, 0.0))
    lower = small_body(b, (6.2, 0.0, -0.1))
    b.add_joint("POINT", upper, -1, (6.0, 0.0, 0.1))
    b.add_joint("HINGE", lower, upper, (6.1, 0.0, 0.0), axis=(0.0, 1.0, 0.0))
    return b.finalize()


def glued_cubes_landing(disable_collisions):
    """Three cubes glued in a row by FIXED joints (touching), dropped 5 cm onto the ground tilted a
    little, and a loose cube beside them: contacts with the ground, with the loose cube, and between
    the glued ones unless the joints disable them."""
    b = ModelBuilder(R)
    side = 4 * R
    tilt = np.array([math.cos(0.05), math.sin(0.05), 0.0, 0.0])
    glued = [b.add_body(box_particles((2, 2, 2), 2 * R), mass=2.0, orientation=tilt,
                        position=(side * k, 0.0, 0.5 * side + 0.05 + 0.01 * k)) for k in range(3)]
    for k in range(1, 3):
        b.add_joint("FIXED", glued[k], glued[k - 1], (side * (k - 0.5), 0.0, 0.5 * side + 0.05),
                    disable_collisions=disable_collisions)
    small_body(b, (-side - 0.01, 0.0, 0.5 * side + 0.02))
    b.add_ground_plane(0.0)
    return b.finalize()


def hanging_cube(threshold_fraction, substeps_per_frame=10, fps=24):
    """A cube hanging from the world on a breakable FIXED joint whose threshold is this fraction of
    the impulse the cube's weight puts on it per Bullet substep."""
    b = ModelBuilder(R)
    b.bullet_substep = 1.0 / (fps * substeps_per_frame)
    mass = 2.0
    cube = small_body(b, (0.0, 0.0, -0.1), mass=mass)
    b.add_joint("FIXED", cube, -1, (0.0, 0.0, 0.0), breaking_threshold=threshold_fraction * mass * G * b.bullet_substep)
    return b.finalize()


def both_engines(model, **settings):
    settings = SimulationSettings(**settings)
    return ReferenceEngine(model, settings), OpenCLEngine(model, settings)


def assert_close_poses(reference, kernels, position_tolerance, rotation_tolerance=None):
    a, b = reference.body_state(), kernels.body_state()
    assert np.abs(a.position - b.position).max() < position_tolerance
    # q and -q are one rotation
    dots = np.abs(np.einsum("bi,bi->b", a.orientation, b.orientation))
    assert np.all(1.0 - dots < (rotation_tolerance or position_tolerance))


def test_every_kind_of_row_follows_the_reference():
    """Half a second (120 substeps): every body within 0.1 mm and 1e-4 of its reference pose (float32
    against float64), and everything moved (the limits, springs and motors did work)."""
    model = every_kind_of_row()
    reference, kernels = both_engines(model, sleep_time=0.0)
    assert kernels.joint_colour_count >= 2  # a body with two joints, a chain: colours
    for _ in range(4):
        reference.step(30)
        kernels.step(30)
        assert_close_poses(reference, kernels, 1e-4)
    state = kernels.body_state()
    motion = np.linalg.norm(state.velocity, axis=1) + np.linalg.norm(state.angular_velocity, axis=1)
    chain, slider, wheel = [2, 3, 4, 5], 7, 8
    assert np.all(motion[[0, 1, 6, 8, 9, 10]] > 1e-2)  # the pendulums, the spring, the wheel, the pair swing
    assert np.all(motion[chain] < 1e-4)  # the chain hangs still
    assert state.position[slider, 2] == pytest.approx(-0.05, abs=2e-3)  # the slider rests on its limit
    assert np.abs(state.position[slider, :2] - (4.0, 0.0)).max() < 1e-5
    # the motor drives body b (the world) relative to a at 3 rad/s: the wheel turns back at 3
    assert state.angular_velocity[wheel, 1] == pytest.approx(-3.0, abs=0.05)


@pytest.mark.parametrize("fraction, breaks", [(0.95, True), (1.05, False)])
def test_breaking_where_the_reference_breaks(fraction, breaks):
    """A steady load at 0.95 and 1.05 of Blender's threshold: the kernels break the joint (or keep it)
    where the reference does, in the same substep, count it, and the freed cube falls."""
    model = hanging_cube(fraction)
    reference, kernels = both_engines(model, sleep_time=0.0)
    reference.step(40)
    kernels.step(40)
    assert kernels.broken_joint_count == reference.broken_joint_count == int(breaks)
    assert list(kernels.joint_broken) == list(reference.joint_broken) == [breaks]
    assert_close_poses(reference, kernels, 1e-4)
    fallen = 0.1 - (-kernels.body_state().position[0, 2])
    assert (fallen < -0.01) == breaks


@pytest.mark.parametrize("disable_collisions", [True, False])
def test_glued_cubes_landing_follow_the_reference(disable_collisions):
    """Glued cubes landing on the ground beside a loose one, their contacts with each other left out
    (Blender's default) or kept: within 0.5 mm of the reference after a third of a second."""
    model = glued_cubes_landing(disable_collisions)
    reference, kernels = both_engines(model, sleep_time=0.0)
    for _ in range(4):
        reference.step(20)
        kernels.step(20)
        assert_close_poses(reference, kernels, 5e-4, 1e-3)
    assert kernels.body_state().position[0, 2] < 0.5 * 4 * R + 0.02  # landed


def test_joined_bodies_sleep_and_wake_as_the_reference():
    """The glued cubes settle and their island falls asleep in the substep the reference's does;
    releasing nothing, they stay asleep in both."""
    model = glued_cubes_landing(True)
    reference, kernels = both_engines(model)
    asleep = []
    for _ in range(12):
        reference.step(40)
        kernels.step(40)
        asleep.append((reference.body_state().velocity == 0.0).all(axis=1))
        assert np.array_equal(asleep[-1], (kernels.body_state().velocity == 0.0).all(axis=1))
        assert_close_poses(reference, kernels, 2e-3, 1e-3)
    assert asleep[-1].all()
    assert not asleep[0].any()


def test_a_keyed_enabled_releases_and_holds_as_the_reference():
    """set_joints_enabled: the hanging cube's joint turned off after 20 substeps and on again 20
    later (where the cube then is), in both engines: the cube falls free between, and hangs again."""
    model = hanging_cube(10.0)
    reference, kernels = both_engines(model, sleep_time=0.0)
    for engine in (reference, kernels):
        engine.step(20)
        engine.set_joints_enabled([False])
        engine.step(20)
    z_free = kernels.body_state().position[0, 2]
    assert z_free < -0.1 - 0.5 * G * (20 / 240) ** 2 * 0.9  # fell
    assert_close_poses(reference, kernels, 1e-4)
    with pytest.raises(ValueError, match=r"one flag per joint \(1\)"):
        kernels.set_joints_enabled([True, True])


def test_joints_in_one_launch_solve_as_a_launch_per_colour(monkeypatch):
    """The passes in one launch (solve_substep_passes: the joint colours before the contact colours,
    each behind the barrier) give the launch per colour's numbers to the bit."""
    for model, substeps in ((every_kind_of_row(), 60), (glued_cubes_landing(True), 60)):
        states = []
        for one_launch in ("1", "0"):
            monkeypatch.setenv("PRB_ONE_LAUNCH_PASSES", one_launch)
            engine = OpenCLEngine(model, SimulationSettings(sleep_time=0.0))
            assert engine.one_launch_passes == (one_launch == "1")
            engine.step(substeps)
            states.append(engine.body_state())
        assert np.array_equal(states[0].position, states[1].position)
        assert np.array_equal(states[0].orientation, states[1].orientation)


def test_the_memory_estimate_counts_the_joints_the_engine_allocates():
    """The estimate users see before simulating grows by the joints' buffers exactly as allocated."""
    from addon.core.device_buffers import DEVICE_BUFFERS, estimate_device_memory
    model = every_kind_of_row()
    engine = OpenCLEngine(model, SimulationSettings())
    particles, bodies, joints = model.particle_count, model.body_count, model.joints.count
    grown = estimate_device_memory(particles, bodies, "voxels", joints) - estimate_device_memory(particles, bodies,
                                                                                                "voxels")
    allocated = sum(engine.arguments[row.name].size for row in DEVICE_BUFFERS if row.joints_only)
    assert grown == allocated > 40 * joints


def glued_block(strength):
    """A 3 x 3 x 3 block of 20 cm cubes glued at their 54 faces (core.glue) and its centre cube
    joined to every other by a FIXED joint besides (26 joints on one body, 32 in all on it), dropped
    onto the ground tilted; the glue of ``strength`` Pa."""
    from addon.core.glue import glue_bodies
    b = ModelBuilder(R)
    cells = np.stack(np.meshgrid(*[np.arange(3)] * 3, indexing="ij"), axis=-1).reshape(-1, 3)
    tilt = np.array([math.cos(0.1), math.sin(0.1), 0.0, 0.0])
    rot = np.array([[1, 0, 0], [0, math.cos(0.2), -math.sin(0.2)], [0, math.sin(0.2), math.cos(0.2)]])
    centres = (cells - 1) * 4 * R @ rot.T + (0.0, 0.0, 0.4)
    bodies = [b.add_body(box_particles((2, 2, 2), 2 * R), mass=2.0, position=c, orientation=tilt,
                         lattice_orientation=tilt) for c in centres]
    glue_bodies(b, np.zeros(len(bodies), np.int64), strength)
    centre = 13
    for k in bodies:
        if k != centre:
            b.add_joint("FIXED", k, centre, 0.5 * (centres[k] + centres[centre]), breaking_threshold=2.0)
    b.add_ground_plane(0.0)
    return b.finalize()


def test_a_glued_block_with_many_joints_per_body_lands_as_the_reference():
    """54 glue bonds and 26 joints on one body: the landing breaks the same joints in both engines,
    and the pieces stay within 1 mm of the reference."""
    model = glued_block(2e4)
    assert model.joints.count == 80
    reference, kernels = both_engines(model, sleep_time=0.0)
    for _ in range(3):
        reference.step(12)
        kernels.step(12)
        assert np.array_equal(kernels.joint_broken, reference.joint_broken)
        assert_close_poses(reference, kernels, 1e-3, 1e-3)
    assert 0 < kernels.broken_joint_count < 80


def test_two_runs_of_a_breaking_glued_block_are_identical():
    """Re-runs stay bit-identical with joints breaking: the glued block's landing, twice."""
    model = glued_block(2e4)
    runs = []
    for _ in range(2):
        engine = OpenCLEngine(model, SimulationSettings())
        engine.step(40)
        runs.append((engine.body_state(), engine.joint_broken, engine.broken_joint_count))
    assert runs[0][2] > 0
    assert np.array_equal(runs[0][1], runs[1][1]) and runs[0][2] == runs[1][2]
    for field in ("position", "orientation", "velocity", "angular_velocity"):
        assert np.array_equal(getattr(runs[0][0], field), getattr(runs[1][0], field))
