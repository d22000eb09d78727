"""Sleeping (deactivation): still bodies stop exactly, and wake when hit or when their support goes.
Particles sleep body by body; Rigid Voxels by islands of touching bodies (kernels/63_islands.cl)."""
import numpy as np
import pytest

from addon.core import Material, ModelBuilder, SimulationSettings
from addon.core.opencl_engine import OpenCLEngine
from addon.core.reference import ReferenceEngine
from addon.core.settings import derive_solver_parameters
from addon.core.shapes import cube_particles
from helpers import RADIUS, add_cube, engine_for, run_for

MATERIAL = Material(friction=0.5, restitution=0.1)
PARTICLES = "particles"
GEOMETRIES = (PARTICLES, "voxels")


@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_a_settled_cube_falls_asleep_and_a_sliding_cube_wakes_it(geometry):
    builder = ModelBuilder(RADIUS)
    add_cube(builder, (0.0, 0.0, 0.55), material=MATERIAL)
    # a second cube slides along the ground towards the first and arrives after it fell asleep
    add_cube(builder, (-5.0, 0.0, 0.51), material=Material(friction=0.0), velocity=(3.0, 0.0, 0.0))
    builder.add_ground_plane(0.0, material=MATERIAL)
    engine = engine_for(builder, sleep_speed=0.02, sleep_time=0.3, contact_geometry=geometry)
    state = run_for(engine, 0.6)
    assert np.all(state.velocity[0] == 0.0) and np.all(state.angular_velocity[0] == 0.0)  # asleep
    asleep_at = state.position[0].copy()
    state = run_for(engine, 0.4)
    assert np.all(state.position[0] == asleep_at)  # stays exactly put while asleep
    state = run_for(engine, 1.5)
    # hit: woken and pushed along x
    assert state.position[0, 0] - asleep_at[0] > 0.05, state.position[0]
    state = run_for(engine, 3.0)
    assert np.all(np.linalg.norm(state.velocity, axis=1) == 0.0)  # both asleep again


@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_a_sleeping_cube_falls_when_its_support_is_knocked_away(geometry):
    builder = ModelBuilder(RADIUS)
    add_cube(builder, (0.0, 0.0, 0.55), material=MATERIAL)  # bottom
    add_cube(builder, (0.0, 0.0, 1.6), material=MATERIAL)  # top, resting on the bottom one
    # a heavy cube slides in and knocks the bottom one out from under the top one
    builder.add_body(cube_particles(1.0), density=8000.0,
                     position=(-5.0, 0.0, 0.51), velocity=(5.0, 0.0, 0.0), material=Material(friction=0.0))
    builder.add_ground_plane(0.0, material=MATERIAL)
    engine = engine_for(builder, sleep_speed=0.02, sleep_time=0.2, contact_geometry=geometry)
    state = run_for(engine, 0.7)  # the hit comes at 0.8 s
    assert np.all(state.velocity[:2] == 0.0)  # the stack is asleep before the hit
    state = run_for(engine, 3.0)
    # the top cube came down to the ground (about half a side), not left hanging in the air
    assert state.position[1, 2] < 0.8, state.position[1]


def test_kernels_match_the_reference_while_bodies_fall_asleep():
    builder = ModelBuilder(RADIUS)
    rng = np.random.default_rng(2)
    for k in range(4):
        add_cube(builder, (1.3 * k, 0.0, 0.52), material=MATERIAL, velocity=(0.0, 0.0, -0.05 * k),
                 orientation=[1.0, *rng.uniform(-0.01, 0.01, 3)])
    builder.add_ground_plane(0.0, material=MATERIAL)
    model = builder.finalize()
    settings = SimulationSettings(sleep_speed=0.05, sleep_time=0.05, contact_geometry=PARTICLES)
    reference, kernels = ReferenceEngine(model, settings), OpenCLEngine(model, settings)
    reference.step(300)
    kernels.step(300)
    expected, got = reference.body_state(), kernels.body_state()
    assert np.all(expected.velocity == 0.0)  # all asleep in the reference...
    np.testing.assert_array_equal(got.velocity, 0.0)  # ...and in the kernels
    np.testing.assert_allclose(got.position, expected.position, atol=3e-6)  # 5x the 5.6e-7 m measured


@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_sleeping_can_be_turned_off(geometry):
    builder = ModelBuilder(RADIUS)
    add_cube(builder, (0.0, 0.0, 0.55), material=MATERIAL)
    builder.add_ground_plane(0.0, material=MATERIAL)
    state = run_for(engine_for(builder, sleep_speed=0.0, contact_geometry=geometry), 2.0)
    assert np.any(state.velocity != 0.0)  # still integrating (tiny speeds, never exactly zero)
    assert np.linalg.norm(state.velocity) < 1e-2


def test_kernels_match_the_reference_when_a_sleeping_cube_is_hit():
    builder = ModelBuilder(RADIUS)
    add_cube(builder, (0.0, 0.0, 0.5), material=MATERIAL)
    add_cube(builder, (-1.5, 0.0, 0.5), material=Material(friction=0.0), velocity=(2.0, 0.0, 0.0))
    builder.add_ground_plane(0.0, material=MATERIAL)
    model = builder.finalize()
    settings = SimulationSettings(sleep_speed=0.05, sleep_time=0.05, contact_geometry=PARTICLES)
    reference, kernels = ReferenceEngine(model, settings), OpenCLEngine(model, settings)
    for engine in (reference, kernels):
        engine.step(100)  # 0.17 s: the first cube sleeps, the second is on its way (hit at ~0.25 s)
        assert np.all(engine.body_state().velocity[0] == 0.0)
        engine.step(400)
    expected, got = reference.body_state(), kernels.body_state()
    assert expected.position[0, 0] > 0.02  # woken and pushed
    np.testing.assert_allclose(got.position, expected.position, atol=1.2e-4)  # 5x the 2.3e-5 m measured


def _stack_and_neighbour(builder, neighbour_height=0.5):
    """Two cubes stacked and a third beside the bottom one, 0.2 m apart: islands {0, 1} and {2}."""
    add_cube(builder, (0.0, 0.0, 0.5), material=MATERIAL)
    add_cube(builder, (0.0, 0.0, 1.5), material=MATERIAL)
    add_cube(builder, (1.2, 0.0, neighbour_height), material=MATERIAL)


def test_rigid_voxels_sleep_by_islands():
    """Box2D's islands: bodies that touch fall asleep at the same substep, once all of them have
    been still for sleep_time, and lie exactly still while they sleep; a body on its own sleeps on
    its own count."""
    builder = ModelBuilder(RADIUS)
    _stack_and_neighbour(builder, neighbour_height=0.55)  # the neighbour lands a little later
    builder.add_ground_plane(0.0, material=MATERIAL)
    engine = engine_for(builder, sleep_time=0.3)
    asleep_at = np.full(3, -1)
    for substep in range(int(1.0 / engine.params.substep)):
        engine.step(1)
        still = np.all(engine.body_state().velocity == 0.0, axis=1)
        asleep_at[(asleep_at < 0) & still] = substep
    assert np.all(asleep_at >= 0), asleep_at
    assert asleep_at[0] == asleep_at[1], asleep_at  # the stack as one
    assert asleep_at[2] != asleep_at[0], asleep_at  # the neighbour, which landed later, on its own
    # not before sleep_time of stillness (the settling takes time too)
    assert asleep_at.min() * engine.params.substep >= 0.3
    at = engine.body_state().position
    run_for(engine, 0.5)
    np.testing.assert_array_equal(engine.body_state().position, at)


def test_kernels_match_the_reference_while_rigid_islands_sleep_and_wake():
    """The islands' counts, the moment they sleep, and a sliding cube waking the stack it hits,
    kernels against the reference over the whole run."""
    builder = ModelBuilder(RADIUS)
    _stack_and_neighbour(builder)
    add_cube(builder, (-4.0, 0.0, 0.5), material=Material(friction=0.0), velocity=(3.0, 0.0, 0.0))
    builder.add_ground_plane(0.0, material=MATERIAL)
    model = builder.finalize()
    settings = SimulationSettings(sleep_time=0.3)
    reference, kernels = ReferenceEngine(model, settings), OpenCLEngine(model, settings)
    worst = 0.0
    for _ in range(45):  # 1.5 s: asleep at 0.33 s, hit at 1.0 s (woken a detection before)
        for engine in (reference, kernels):
            engine.step(8)
        expected, got = reference.body_state(), kernels.body_state()
        np.testing.assert_array_equal(np.all(got.velocity == 0.0, axis=1), np.all(expected.velocity == 0.0, axis=1))
        worst = max(worst, np.abs(got.position - expected.position).max())
        if reference.time < 0.95:
            assert np.all(expected.velocity[:3] == 0.0) or reference.time < 0.34
    assert expected.position[0, 0] > 0.05  # woken and pushed
    assert worst < 1e-3, worst


@pytest.mark.parametrize("start", [-7.0, -7.02, -7.04, -7.06, -7.08])
def test_a_sleeping_cube_takes_its_impact_awake(start):
    """Box2D wakes an island in the collide phase of the step a contact begins: a sleeper the
    records of an awake body reach is woken before that step's solve, not held like static ground
    for it. Held, it stopped a cube arriving at 6 m/s dead and took the whole of its momentum at
    its waking (6 and 0 m/s instead of 3 and 3) whenever the impact fell in the detection that
    first recorded the contact, as it does from start -7.06."""
    builder = ModelBuilder(RADIUS)
    frictionless = Material(friction=0.0, restitution=0.0)
    add_cube(builder, (0.0, 0.0, 0.5), material=frictionless)
    add_cube(builder, (start, 0.0, 0.5), material=frictionless, velocity=(6.0, 0.0, 0.0))
    builder.add_ground_plane(0.0, material=frictionless)
    engine = engine_for(builder, sleep_time=0.3)
    state = run_for(engine, 0.9)
    assert np.all(state.velocity[0] == 0.0)  # asleep before the hit at 1 s
    state = run_for(engine, 0.4)
    # an inelastic impact between equal masses: both at half the speed
    np.testing.assert_allclose(state.velocity[:, 0], [3.0, 3.0], rtol=0.01)


@pytest.mark.parametrize("engine_class", [OpenCLEngine, ReferenceEngine])
def test_a_hit_wakes_a_sleeping_row_four_contacts_deep_in_its_detection(engine_class):
    """Six cubes asleep in a row, face to face, and a cube sliding into the first: at the detection
    whose records first reach the row, the first WAKE_PASSES = 4 cubes wake (each woken pass
    computes the contacts of the sleepers the last one reached) and the last two at the next, four
    contacts further (40_contacts.cl woken_pass; the reference's _detect)."""
    builder = ModelBuilder(RADIUS)
    frictionless = Material(friction=0.0, restitution=0.0)
    for k in range(6):
        add_cube(builder, (1.0 * k, 0.0, 0.5), material=frictionless)
    add_cube(builder, (-3.0, 0.0, 0.5), material=frictionless, velocity=(3.0, 0.0, 0.0))
    builder.add_ground_plane(0.0, material=frictionless)
    engine = engine_class(builder.finalize(), SimulationSettings(sleep_time=0.3))
    every = engine.settings.substeps_per_detection

    def asleep():
        quiet = engine.quiet if engine_class is ReferenceEngine else engine._read(
            engine.arguments["body_quiet"], (engine.body_count,))
        return quiet[:6] >= engine.sleep[1]

    engine.step(int(round(0.5 / engine.params.substep / every)) * every)
    assert asleep().all()  # the row sleeps before the hit (at 0.67 s)
    woken = []
    while asleep().any() and engine.time < 1.0:
        engine.step(every)
        if not asleep().all():
            woken.append(list(~asleep()))
    assert woken[0] == [True, True, True, True, False, False], woken[0]
    assert woken[1] == [True] * 6, woken[1]


def test_sleep_argument_counts_substeps_with_the_solve_and_stops_while_colliders_move():
    builder = ModelBuilder(RADIUS)
    add_cube(builder, (0.0, 0.0, 0.5), material=MATERIAL)
    builder.add_ground_plane(0.0, material=MATERIAL)
    engine = engine_for(builder, sleep_speed=0.05, sleep_time=0.5)
    assert engine.sleep[0] == np.float32(0.05)
    assert engine.sleep[1] == round(0.5 / engine.params.substep)  # substeps, counted exactly
    moving = engine.params.sleep_argument(colliders_moving=True)
    assert moving[0] == 0.0  # a moving collider would not wake a sleeper: no sleeping
    springs = derive_solver_parameters(engine.model, SimulationSettings(contact_geometry=PARTICLES, sleep_speed=0.05,
                                                                        sleep_time=0.5))
    assert springs.sleep_argument(colliders_moving=False)[1] == np.float32(0.5)  # seconds
