"""Scene builders shared by the engine tests."""
import numpy as np

from addon.core import Material, ModelBuilder, SimulationSettings
from addon.core.opencl_engine import OpenCLEngine
from addon.core.rotations import axis_angle_quaternions as axis_angle_quaternion  # noqa: F401 (tests import it from here)
from addon.core.shapes import cube_particles

CUBE_SIDE = 1.0
RADIUS = CUBE_SIDE / 6.0  # 27-particle cubes, as in the seed


def add_cube(builder, position, material=None, **kwargs):
    """A solid cube: its voxels reach their corners (sharp against planes and triangle faces)."""
    kwargs.setdefault("corner_reach", 1.0)
    return builder.add_body(cube_particles(CUBE_SIDE), density=1000.0, position=position,
                            material=material or Material(), **kwargs)


def engine_for(builder, **settings):
    return OpenCLEngine(builder.finalize(), SimulationSettings(**settings))


def run_for(engine, seconds):
    """At least one substep: a loop stepping less than half a substep at a time would not advance."""
    steps = max(1, int(round(seconds / engine.params.substep)))
    engine.step(steps)
    return engine.body_state()


def column_of_cubes(count):
    """``count`` unit cubes stacked on the ground plane, face on face."""
    builder = ModelBuilder(RADIUS)
    for k in range(count):
        add_cube(builder, (0.0, 0.0, 0.5 + k))
    builder.add_ground_plane(0.0)
    return builder


def fastest_motion(engine, substeps=20):
    """(largest speed, largest spin) of any body over the next ``substeps`` substeps."""
    speed = spin = 0.0
    for _ in range(substeps):
        engine.step(1)
        state = engine.body_state()
        speed = max(speed, np.linalg.norm(state.velocity, axis=1).max())
        spin = max(spin, np.linalg.norm(state.angular_velocity, axis=1).max())
    return speed, spin


def joint_sink(**settings):
    """How far a cube resting across the joint of two cubes on the ground sinks below its ideal
    height after 3 s (issue 22's joint scene)."""
    builder = ModelBuilder(RADIUS)
    for x in (-0.5, 0.5):
        add_cube(builder, (x, 0.0, 0.5))
    add_cube(builder, (0.0, 0.0, 1.5))
    builder.add_ground_plane(0.0)
    engine = engine_for(builder, **settings)
    z = run_for(engine, 3.0).position[:, 2]
    return z[:2].mean() + CUBE_SIDE - z[2]


def half_offset_row_errors(seconds, **settings):
    """Five rows of cubes, each half a cube off the row below (8, 7, ... 4 cubes): after ``seconds``,
    each row's mean height's distance from its ideal (issue 22's rows scene)."""
    builder = ModelBuilder(RADIUS)
    for row in range(5):
        for i in range(8 - row):
            add_cube(builder, (i + 0.5 * row, 0.0, 0.5 + row))
    builder.add_ground_plane(0.0)
    z = run_for(engine_for(builder, **settings), seconds).position[:, 2]
    errors, first = [], 0
    for row in range(5):
        count = 8 - row
        errors.append(abs(0.5 + row - z[first:first + count].mean()))
        first += count
    return errors


def glancing_cubes(friction):
    """A spinning cube glancing off a turned one, in zero gravity (the collision the momentum tests
    of each contact geometry use)."""
    builder = ModelBuilder(RADIUS)
    material = Material(restitution=0.5, friction=friction)
    add_cube(builder, (-1.2, 0.0, 0.0), velocity=(3.0, 0.2, 0.0), angular_velocity=(0, 0, 1.0), material=material)
    add_cube(builder, (1.2, 0.25, 0.1), velocity=(-2.0, 0.0, 0.0), material=material,
             orientation=axis_angle_quaternion((1, 1, 0), 0.7))
    return builder


def assert_lists_miss_no_contact(engine, substeps, expected_contacts, contacts_seen):
    """Every fourth of ``substeps`` substeps (at a detection: the substeps per detection divide 4),
    the contacts the kernels found (``contacts_seen(engine)``) against brute force
    (``expected_contacts(state, positions)``: the contacts and those within float rounding of
    either side, from the poses the detection saw); returns how many checks had contacts."""
    every = engine.settings.substeps_per_detection
    assert 4 % every == 0, every
    with_contacts = 0
    for step in range(0, substeps, every):
        before = engine.body_state()  # the poses the detection sees
        engine.step(1)
        if step % 4 == 0:
            expected, borderline = expected_contacts(before, engine.particle_positions())
            got = contacts_seen(engine)
            missed = (expected - got) - borderline
            extra = (got - expected) - borderline
            assert not missed and not extra, f"substep {step}: missed {sorted(missed)[:5]}, extra {sorted(extra)[:5]}"
            with_contacts += len(expected) > 0
        engine.step(every - 1)
    return with_contacts


def assert_kernels_follow_the_solve_reference(model, settings, substeps, each_block=None):
    """Step the NumPy reference and the kernels ``substeps`` substeps, 10 at a time, asserting after
    each block that the bodies' states agree as the velocity solve's tests ask (3e-5 m, 5e-3 m/s,
    6e-3 rad/s, orientations within 1e-6); ``each_block(reference, kernels)`` adds its own checks.
    Returns the reference engine and the sum of the normal impulses its records ended the blocks
    with (> 0: the solve gave impulses)."""
    from addon.core.reference import ReferenceEngine
    reference = ReferenceEngine(model, settings)
    kernels = OpenCLEngine(model, settings)
    solved = 0.0
    for _ in range(substeps // 10):
        reference.step(10)
        kernels.step(10)
        solved += sum(record[10] for records in reference.records.values() for record in records)
        if each_block is not None:
            each_block(reference, kernels)
        expected, got = reference.body_state(), kernels.body_state()
        np.testing.assert_allclose(got.position, expected.position, rtol=0, atol=3e-5)
        np.testing.assert_allclose(got.velocity, expected.velocity, rtol=0, atol=5e-3)
        np.testing.assert_allclose(got.angular_velocity, expected.angular_velocity, rtol=0, atol=6e-3)
        dots = np.abs(np.einsum("bi,bi->b", got.orientation, expected.orientation))
        np.testing.assert_allclose(dots, 1.0, atol=1e-6)
    return reference, solved
