"""Kinematic bodies (addon/core/kinematic.py): a body moved by its path for some frames follows it
exactly with infinite mass, pushes the bodies it meets, and once released flies on with the velocity
and spin of its last moved frame; the kernels as the NumPy reference."""
from __future__ import annotations

import numpy as np
import pytest

from addon.core import Material, ModelBuilder, SimulationSettings
from addon.core.kinematic import KinematicPaths, kinematic_step, rotation_vector, turn_quaternion
from addon.core.rotations import axis_angle_quaternions
from addon.core.simulation import Simulation
from addon.core.shapes import cube_particles

RATE = 24.0
BACKENDS = ["reference", "opencl"]


def path(frames, velocity, spin, start=(0.0, 0.0, 0.5)):
    """Positions and orientations at frames 0..frames of a body moving at ``velocity`` and turning at
    ``spin`` (rad/s about z) from ``start``."""
    t = np.arange(frames + 1) / RATE
    positions = np.asarray(start) + t[:, None] * np.asarray(velocity)
    orientations = axis_angle_quaternions(np.array([0.0, 0.0, 1.0]), spin * t)
    return positions, orientations


def run(model, frames, backend, gravity=(0.0, 0.0, -9.81)):
    sim = Simulation(model, SimulationSettings(gravity=gravity, sleep_speed=0.0), frame_rate=RATE,
                     substeps_per_frame=10, backend=backend)
    states = []
    for frame in sim.frames(frames):
        state = sim.engine.body_state()
        states.append((frame.positions, frame.orientations, state.velocity, state.angular_velocity))
    return [np.array(s) for s in zip(*states)]


def pushing_scene(frames):
    """A kinematic cube at 2 m/s along x on the ground, a resting cube 1.6 m ahead of it."""
    builder = ModelBuilder(1 / 6)
    pusher = builder.add_body(cube_particles(1.0), density=1000.0, position=(0.0, 0.0, 0.5), corner_reach=1.0)
    builder.add_body(cube_particles(1.0), density=1000.0, position=(1.6, 0.0, 0.5), corner_reach=1.0,
                     material=Material(friction=0.3))
    builder.add_ground_plane(0.0, material=Material(friction=0.3))
    positions, orientations = path(frames, (2.0, 0.0, 0.0), 0.0)
    builder.set_kinematic_path(pusher, np.ones(frames + 1, dtype=bool), positions, orientations)
    return builder.finalize(), positions


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_kinematic_body_follows_its_path_and_pushes_a_dynamic_one(backend):
    model, expected = pushing_scene(24)
    positions, _, velocities, _ = run(model, 24, backend)
    # the path exactly, whatever it meets (float32 on the device)
    np.testing.assert_allclose(positions[:, 0], expected, atol=1e-9 if backend == "reference" else 2e-5)
    np.testing.assert_allclose(velocities[1:, 0], [[2.0, 0.0, 0.0]] * 24, atol=1e-6)
    # the pusher reached the cube after 0.3 s and has driven it since: a face ahead of the pusher
    # (one metre), at the pusher's speed
    pushed = positions[:, 1]
    assert pushed[-1, 0] - expected[-1, 0] == pytest.approx(1.0, abs=0.05)
    assert velocities[-1, 1, 0] == pytest.approx(2.0, abs=0.1)
    assert abs(pushed[-1, 2] - 0.5) < 0.01


def released_scene(frames, release_frame, velocity, spin):
    builder = ModelBuilder(1 / 6)
    body = builder.add_body(cube_particles(1.0), density=1000.0, position=(0.0, 0.0, 5.0), corner_reach=1.0)
    positions, orientations = path(frames, velocity, spin, start=(0.0, 0.0, 5.0))
    moved = np.arange(frames + 1) < release_frame  # moved in the steps that end at frames 1..release - 1
    builder.set_kinematic_path(body, moved, positions, orientations)
    return builder.finalize(), positions


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_released_body_flies_on_with_its_paths_velocity_and_spin(backend):
    velocity, spin, release, frames = np.array([3.0, 0.0, 1.0]), 2.0, 6, 18
    model, expected = released_scene(frames, release, velocity, spin)
    positions, orientations, velocities, spins = run(model, frames, backend)
    g = 9.81
    np.testing.assert_allclose(positions[:release, 0], expected[:release], atol=1e-9 if backend == "reference" else 2e-5)
    # from frame release - 1 on, a free flight from the path's last pose at its velocity: exact under
    # gravity (the half kick), the spin kept (a cube's inertia is isotropic)
    t = (np.arange(release - 1, frames + 1) - (release - 1)) / RATE
    flight = expected[release - 1] + t[:, None] * velocity + 0.5 * np.outer(t ** 2, [0.0, 0.0, -g])
    tolerance = 1e-9 if backend == "reference" else 1e-4
    np.testing.assert_allclose(positions[release - 1:, 0], flight, atol=tolerance)
    # (the engines report the velocity of the leapfrog's half substep, half a substep of gravity behind)
    np.testing.assert_allclose(velocities[-1, 0], velocity + [0.0, 0.0, -g * (t[-1] - 0.5 / (10 * RATE))], atol=1e-3)
    np.testing.assert_allclose(spins[release:, 0], [[0.0, 0.0, spin]] * (frames + 1 - release), atol=1e-4)
    turned = axis_angle_quaternions(np.array([0.0, 0.0, 1.0]), spin * np.arange(frames + 1) / RATE)
    dots = np.abs(np.einsum("fi,fi->f", orientations[:, 0], turned))
    np.testing.assert_allclose(dots, 1.0, atol=1e-6)


def test_the_kernels_push_as_the_reference_does():
    model, _ = pushing_scene(12)
    reference = run(model, 12, "reference")
    kernels = run(model, 12, "opencl")
    np.testing.assert_allclose(kernels[0], reference[0], atol=2e-4)  # positions
    np.testing.assert_allclose(kernels[2], reference[2], atol=5e-3)  # velocities


def test_a_step_moves_the_flagged_bodies_and_releases_those_it_no_longer_moves():
    positions = np.zeros((4, 2, 3))
    positions[:, 0, 0] = [0.0, 1.0, 2.0, 3.0]
    orientations = np.tile([1.0, 0.0, 0.0, 0.0], (4, 2, 1))
    orientations[2, 1] = turn_quaternion(np.array([[0.0, 0.5, 0.0]]))[0]
    moved = np.array([[True, True], [True, True], [False, True], [False, False]])
    paths = KinematicPaths(np.array([3, 5]), moved, positions, orientations)
    was = np.zeros(8, dtype=bool)
    first = kinematic_step(paths, was, 0, 0.5)
    assert list(first.moved) == [3, 5] and not len(first.released)
    np.testing.assert_allclose(first.velocity[0], [2.0, 0.0, 0.0])
    was[[3, 5]] = True
    second = kinematic_step(paths, was, 1, 0.5)
    assert list(second.moved) == [5] and list(second.released) == [3]
    np.testing.assert_allclose(second.angular_velocity[0], [0.0, 1.0, 0.0])
    was[3] = False
    assert list(kinematic_step(paths, was, 2, 0.5).released) == [5]
    np.testing.assert_allclose(rotation_vector(turn_quaternion(np.array([[0.3, -0.2, 0.1]]))), [[0.3, -0.2, 0.1]])


def test_a_path_must_be_finite_and_shaped_per_frame():
    builder = ModelBuilder(1 / 6)
    body = builder.add_body(cube_particles(1.0), density=1000.0)
    with pytest.raises(ValueError, match="a body's path must be finite"):
        builder.set_kinematic_path(body, [True, True], [[0, 0, 0], [np.nan, 0, 0]], [[1, 0, 0, 0]] * 2)
    with pytest.raises(ValueError, match="a path needs"):
        builder.set_kinematic_path(body, [True, True], [[0, 0, 0]], [[1, 0, 0, 0]] * 2)
