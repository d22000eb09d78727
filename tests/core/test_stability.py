"""Stacks stand and piles come to rest: the seed's failures (ch. 7.1) fixed."""
import os
from contextlib import nullcontext

import numpy as np
import pytest

from addon.core import Material, ModelBuilder
from addon.core.contact_geometry import CONTACT_GEOMETRY
from addon.core.device import POCL_PLATFORM, choose_device
from addon.core.rotations import quaternion_to_matrix
from addon.core.shapes import box_particles
from tests.core.helpers import CUBE_SIDE, RADIUS, add_cube, engine_for, fastest_motion, run_for
from tests.known_failures import KnownFailure, known_failure
from tests.skip_reasons import XFAIL_POCL_STACK_ROCKS


@pytest.mark.parametrize("contact_geometry, sleeping", [("voxels", False), ("voxels", True), ("particles", False),
                                                        ("particles", True)],
                         ids=["voxels-awake", "voxels-sleeping", "particles-awake", "particles-sleeping"])
def test_tower_of_ten_cubes_stands_for_ten_seconds(contact_geometry, sleeping):
    """Awake (no sleeping), creep of any speed would show; with sleeping, the tower must also come
    to a complete stop (sleeping's point: a settled stack costs nothing and stays exactly put)."""
    builder = ModelBuilder(RADIUS)
    material = Material(friction=0.5, restitution=0.1)
    gap = 0.002  # placed a hair apart, as a user would
    for level in range(10):
        add_cube(builder, (0.0, 0.0, CUBE_SIDE / 2 + level * (CUBE_SIDE + gap)), material=material)
    builder.add_ground_plane(0.0, material=material)
    engine = engine_for(builder, sleep_speed=0.02 if sleeping else 0.0, contact_geometry=contact_geometry)
    top_start = engine.model.body_position[-1].copy()
    heights = []
    for _ in range(10):
        state = run_for(engine, 1.0)
        heights.append(state.position[-1, 2])
        assert np.all(np.isfinite(state.position))
    drift = np.linalg.norm(state.position[-1, :2] - top_start[:2])
    assert drift < 0.02 * CUBE_SIDE, drift
    # still a tower: every cube above the previous one, levels about one side apart
    z = state.position[:, 2]
    assert np.all(np.diff(z) > 0.95 * CUBE_SIDE)
    assert abs(heights[-1] - heights[4]) < 1e-3  # settled, not sinking or oscillating
    assert np.all(np.linalg.norm(state.velocity, axis=1) < 1e-2)
    if sleeping:
        assert np.all(state.velocity == 0.0) and np.all(state.angular_velocity == 0.0)
        return
    overlaps = np.concatenate([[CUBE_SIDE / 2 - z[0]], CUBE_SIDE - np.diff(z)])
    if not CONTACT_GEOMETRY[contact_geometry].springs:
        # solved contacts: each interface a little past the slop under the soft step's give (0.23-0.89 mm
        # measured on PoCL, the most under the second cube), none open
        assert np.all((overlaps > 0) & (overlaps < 2e-3 * CUBE_SIDE)), overlaps
        return
    # README, stiffness from a target: a particle under a column of material ten bodies tall sinks
    # at most target x radius. The bottom cube carries ten cubes' weight on its face's 9 ground
    # contacts, each the column of particles above it: by design it sinks exactly the target
    # (1 % for float32 and the settling); the contact under level k carries (10 - k) / 10 of that.
    sink = engine.settings.target_penetration * RADIUS
    assert CUBE_SIDE / 2 - z[0] <= 1.01 * sink
    np.testing.assert_allclose(overlaps, sink * np.arange(10, 0, -1) / 10, rtol=0.01, atol=1e-3 * sink)


@pytest.mark.parametrize("contact_geometry", ["particles", "voxels"])
def test_a_cube_offset_on_another_stops_moving(contact_geometry):
    """The upper cube sits a particle radius off in x and y. With particle contacts its bottom
    particles drop into the hollows between the lower cube's: 20-odd contacts instead of a face's
    9. At restitution 0 their summed dashpots used to exceed the explicit step's limit and both
    cubes rang at the substep rate forever (5 cm/s, 0.08 rad/s) until the damping was capped
    (DAMPING_LIMIT). With voxel contacts it rests on the face, box against box."""
    builder = ModelBuilder(RADIUS)
    material = Material(friction=0.5, restitution=0.0)
    add_cube(builder, (0.0, 0.0, CUBE_SIDE / 2 + 0.01), material=material)
    add_cube(builder, (RADIUS, RADIUS, 1.45 * CUBE_SIDE), material=material)
    builder.add_ground_plane(0.0, material=material)
    # nothing may be put to sleep: it must settle
    engine = engine_for(builder, sleep_speed=0.0, contact_geometry=contact_geometry)
    state = run_for(engine, 2.0 if contact_geometry == "particles" else 3.0)
    if contact_geometry == "particles":
        # each pair is listed from both sides; face on face would be 2 x 9
        assert len(engine.contact_pairs()) >= 2 * 15
    else:
        # the 4 bottom voxels of the upper cube over the face each on 4 of the lower cube's top
        # voxels, the 4 half over it on 2, the 1 on its corner on 1, on the lower body's side only
        # (25 pairs, a corner one or two lifted by the tilt under the off-centre load)
        assert 22 <= len(engine.contact_pairs()) <= 25
    speed, spin = fastest_motion(engine)
    assert speed < 1e-3 and spin < 1e-3, (speed, spin)
    state = engine.body_state()
    gap = state.position[1, 2] - state.position[0, 2] - CUBE_SIDE
    if contact_geometry == "particles":
        assert gap < -0.04 * CUBE_SIDE  # it sank into the hollows
    else:
        # on the face, within 3 mm: the lower cube's tilt under the off-centre load
        assert -3e-3 * CUBE_SIDE < gap < 0, gap


# (at rest at 5 s, at rest at 8 s, the fastest at 8 s in m/s; issue 33's pile target: 85 % at rest
# at 5 s). Rigid Voxels (PoCL): 92-98 % at rest at 5 s; at 8 s about one pile in six has a body
# over 0.5 m/s, a stack rocking or a cube tipping off one (seeds 1-18 at e 0.2: 2 of 18, 3 of 18
# before plane records held the point a turning voxel touches next). Particles' cubes still slide
# off each other's rounded edges at 8 s (their piles flow: one at 0.77 m/s on the H100 at e 0.2,
# under 0.5 on PoCL)
AT_REST = {"particles": (0.90, 0.99, 1.0), "voxels": (0.85, 0.95, 0.5)}
ON_A_GPU = os.environ.get("PRB_OPENCL_DEVICE", "cpu") != "cpu"  # tools/gpu_tests.py sets it
# the tests' CPU device is PoCL (Intel's runtime, tried first where installed, is not there)
ON_POCL = not ON_A_GPU and POCL_PLATFORM in choose_device("cpu", announce=False).platform_name
# Rigid Voxels at restitution 0 on PoCL: a stack at the pile's edge still rocks at 8 s, its top
# cube at 0.646 m/s (+- 0.05; the pile is chaotic: any change to the floats moves the figure).
# Intel's CPU runtime 2024.2 rounds differently and that pile comes to rest (under 0.5 m/s at 8 s)
STACK_ROCKS_AT = (0.646, 0.05)
STACK_ROCKS = pytest.mark.xfail(ON_POCL, strict=True, raises=KnownFailure, reason=XFAIL_POCL_STACK_ROCKS)


@pytest.mark.parametrize("contact_geometry, restitution", [("voxels", 0.2), pytest.param("voxels", 0.0, marks=STACK_ROCKS),
                                                           ("particles", 0.2), ("particles", 0.0)])
def test_five_hundred_cubes_come_to_rest_in_a_pile(contact_geometry, restitution):
    """500 randomly oriented cubes dropped from up to 7 m. The issue asks for every body below
    1 cm/s after 5 s; a few percent are still moving then, so this checks AT_REST's fractions at rest
    after 5 s and 8 s, with none of the rest faster than AT_REST's (see the issue notes). Rigid
    Voxels (PoCL): 96 % at 8 s at e 0.2, 89 % at 5 s at e 0. Particles: the
    stragglers are cubes sliding off the rounded edges that 27 spheres give a cube against another
    body, and the neighbours they jostle (docs/experiments/pile-rest-time.md; Bullet on this scene:
    71 % at 5 s).
    At restitution 0 this failed before the damping cap (80 % at 5 s, 90 % at 8 s: nested cubes
    ringing). The pile is chaotic and the last stragglers differ by device, build and seed: PoCL
    92-99 % at 5 s over seeds 1-6 (this seed 92 %), all at 6-8 s; with round particles against the
    ground instead of voxels (corner_reach 0) 86-94 %."""
    rng = np.random.default_rng(5)
    builder = ModelBuilder(RADIUS)
    material = Material(friction=0.5, restitution=restitution)
    side, spacing = 13, 2.0  # > sqrt(3) + jitter: no two cubes overlap at the start
    for k in range(500):
        layer, cell = divmod(k, side * side)
        ix, iy = divmod(cell, side)
        position = (spacing * (ix - (side - 1) / 2) + rng.uniform(-0.1, 0.1),
                    spacing * (iy - (side - 1) / 2) + rng.uniform(-0.1, 0.1), 1.0 + spacing * layer)
        add_cube(builder, position, material=material, orientation=rng.normal(size=4),
                 angular_velocity=rng.normal(size=3))
    builder.add_ground_plane(0.0, material=material)
    engine = engine_for(builder, contact_geometry=contact_geometry)
    at_rest = AT_REST[contact_geometry]
    start = engine.model.body_position.copy()
    for _ in range(5):
        state = run_for(engine, 1.0)
        assert np.all(np.isfinite(state.position)) and np.all(np.isfinite(state.velocity))
    speeds = np.linalg.norm(state.velocity, axis=1)
    assert np.mean(speeds < 0.01) >= at_rest[0], (np.mean(speeds < 0.01), np.sort(speeds)[-30:])
    state = run_for(engine, 3.0)
    speeds = np.linalg.norm(state.velocity, axis=1)
    assert np.mean(speeds < 0.01) >= at_rest[1], (np.mean(speeds < 0.01), np.sort(speeds)[-10:])
    rocking = ON_POCL and (contact_geometry, restitution) == ("voxels", 0.0)
    with known_failure(fastest=(speeds.max(), *STACK_ROCKS_AT)) if rocking else nullcontext():
        assert speeds.max() < at_rest[2], np.sort(speeds)[-5:]
    # nobody left the pile at speed: all on the ground or on each other, none thrown far out
    assert np.all(state.position[:, 2] > 0.3)
    spread = np.linalg.norm(state.position[:, :2], axis=1).max()
    assert spread < np.linalg.norm(start[:, :2], axis=1).max() + 8.0, spread


def test_a_running_bond_wall_stands():
    """Five courses of 2 x 1 x 1 m bricks, each course half a brick over the one below (running
    bond), placed on the ground: after 5 s every brick is where it was put within 5 mm and the top
    course within 5 mm of its height (PoCL: 2.1 mm at most, the top course 2.2 mm lower: each joint a
    little past the slop), none moving faster than 2 cm/s (9 mm/s: Rigid Voxels do not sleep)."""
    builder = ModelBuilder(RADIUS)
    material = Material(friction=0.6, restitution=0.1)
    brick = box_particles((6, 3, 3), 2 * RADIUS)
    for course in range(5):
        for k in range(4):
            builder.add_body(brick, density=2000.0, position=(-4.0 + (course % 2) + 2.0 * k, 0.0, 0.5 + course),
                             material=material, corner_reach=1.0)
    builder.add_ground_plane(0.0, material=material)
    engine = engine_for(builder)
    start = engine.model.body_position.copy()
    state = run_for(engine, 5.0)
    assert np.abs(state.position - start).max() < 5e-3, np.abs(state.position - start).max()
    assert np.abs(state.position[-4:, 2] - 4.5).max() < 5e-3
    assert np.linalg.norm(state.velocity, axis=1).max() < 0.02


def test_dominoes_fall_one_after_another():
    """Eight 0.2 x 1 x 2 m dominoes 1.2 m apart, the first tipped over: each falls past 45 degrees
    after the one before it (PoCL: at 1.1, 1.5, 1.9, 2.2, 2.5, 2.7, 3.0, 3.2 s), and by 4 s all lie
    on their neighbours (80 degrees) or the ground."""
    radius = 0.05
    builder = ModelBuilder(radius)
    material = Material(friction=0.5, restitution=0.1)
    tile = box_particles((2, 10, 20), 2 * radius)
    for k in range(8):
        builder.add_body(tile, density=700.0, position=(1.2 * k, 0.0, 1.0), material=material, corner_reach=1.0,
                         angular_velocity=(0.0, 2.0, 0.0) if k == 0 else (0.0, 0.0, 0.0))
    builder.add_ground_plane(0.0, material=material)
    engine = engine_for(builder)
    fell_at = {}
    while engine.time < 4.0:
        state = run_for(engine, 0.05)
        up = quaternion_to_matrix(state.orientation).reshape(-1, 3, 3)[:, 2, 2]  # the body's z . world z
        for k in np.flatnonzero(up < np.cos(np.radians(45))):
            fell_at.setdefault(int(k), engine.time)
    assert sorted(fell_at) == list(range(8)), fell_at
    times = [fell_at[k] for k in range(8)]
    assert all(later > earlier for earlier, later in zip(times, times[1:])), times
    assert np.all(up < np.cos(np.radians(70))), np.degrees(np.arccos(up))
