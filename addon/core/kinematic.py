"""Kinematic bodies: bodies moved by their animation for some frames, simulated for the others.

A Blender body that is *Animated* (or has *Dynamic* off) follows its animation with infinite mass:
it pushes the bodies it meets and nothing pushes it. When the flag goes off it is handed to the
simulation with the velocity the animation gave it in the last frame it was moved (Bullet's hand-off:
the velocity comes from the animation). ``Model.kinematic`` holds, per such body, its pose at every
output frame and whether it is moved in each frame's step; both engines (reference.py and the OpenCL
engine) take each frame's motion from ``kinematic_step``:

- in the step from output frame f to f + 1 a body is moved when ``moved[f + 1]`` (the flags of the
  frame the step arrives at, as Blender reads them before stepping Bullet to it); it starts the step
  at its pose of frame f and moves at constant velocity and spin to its pose of frame f + 1 (a
  straight line and a constant-axis turn, Bullet's interpolation of a kinematic body over substeps);
- while moved its inverse mass and inverse inertia are 0 for every contact, it takes no impulse or
  force, no gravity, damping or sleeping;
- a body moved in the last step and not in this one is released at this step's start: its mass comes
  back, and it keeps the velocity and spin of its last moved step.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .rotations import quaternion_multiply


@dataclass
class KinematicPaths:
    """The paths of the bodies that follow their animation for some frames (K of them, F output frames
    after the first)."""

    bodies: np.ndarray  # (K,) int32 body indices
    moved: np.ndarray  # (F + 1, K) bool: moved by its path in the step that ends at output frame f (row 0 unused)
    position: np.ndarray  # (F + 1, K, 3) centre of mass, world
    orientation: np.ndarray  # (F + 1, K, 4) (w, x, y, z), as Model.body_orientation

    @property
    def frame_count(self) -> int:
        return len(self.moved) - 1


@dataclass
class KinematicStep:
    """What one frame's step does to the kinematic bodies (``kinematic_step``)."""

    moved: np.ndarray  # (n,) body indices moved by their paths in this step
    position: np.ndarray  # (n, 3) their centres at the step's start
    orientation: np.ndarray  # (n, 4) (w, x, y, z) at the step's start
    velocity: np.ndarray  # (n, 3) constant over the step
    angular_velocity: np.ndarray  # (n, 3) world, constant over the step
    released: np.ndarray  # (r,) body indices handed to the simulation at the step's start


def rotation_vector(q: np.ndarray) -> np.ndarray:
    """(n, 3) axis times angle of unit quaternions (n, 4) (w, x, y, z), the shorter way round."""
    q = np.where(q[:, :1] < 0.0, -q, q)
    vector = q[:, 1:]
    sine = np.linalg.norm(vector, axis=1)
    angle = 2.0 * np.arctan2(sine, q[:, 0])
    scale = np.where(sine > 1e-12, angle / np.maximum(sine, 1e-300), 2.0)
    return vector * scale[:, None]


def turn_quaternion(rotation: np.ndarray) -> np.ndarray:
    """(n, 4) (w, x, y, z) unit quaternions of rotation vectors (n, 3) (axis times angle)."""
    angle = np.linalg.norm(rotation, axis=1)
    half = 0.5 * angle
    axis = rotation / np.maximum(angle, 1e-300)[:, None]
    return np.concatenate([np.cos(half)[:, None], axis * np.sin(half)[:, None]], axis=1)


def kinematic_step(paths: KinematicPaths | None, was_kinematic: np.ndarray, frame: int,
                   frame_duration: float) -> KinematicStep | None:
    """The kinematic bodies' motion in the step from output frame ``frame`` to the next one.
    ``was_kinematic``: (B,) bool, which bodies the last step moved. None when no body is moved or
    released (no paths, or all of them done). Past the paths' last frame nothing is moved."""
    if paths is None:
        return None
    arrive = frame + 1
    moved_now = paths.moved[arrive] if arrive <= paths.frame_count else np.zeros(len(paths.bodies), dtype=bool)
    moved = paths.bodies[moved_now]
    released = paths.bodies[~moved_now & was_kinematic[paths.bodies]]
    if not len(moved) and not len(released):
        return None
    start_position = paths.position[frame][moved_now]
    start_orientation = paths.orientation[frame][moved_now]
    if len(moved):
        end_position = paths.position[arrive][moved_now]
        end_orientation = paths.orientation[arrive][moved_now]
        velocity = (end_position - start_position) / frame_duration
        conjugate = start_orientation * np.array([1.0, -1.0, -1.0, -1.0])
        turn = quaternion_multiply(end_orientation, conjugate)
        angular_velocity = rotation_vector(turn) / frame_duration
    else:
        velocity = angular_velocity = np.zeros((0, 3))
    return KinematicStep(moved.astype(np.int64), start_position, start_orientation, velocity, angular_velocity,
                         released.astype(np.int64))
