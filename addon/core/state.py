"""Body state as engines report it, and quantities derived from it (shared by both engines)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .rotations import quaternion_to_matrix


@dataclass
class BodyState:
    position: np.ndarray  # (B, 3) centre of mass, world
    orientation: np.ndarray  # (B, 4) (w, x, y, z)
    velocity: np.ndarray  # (B, 3)
    angular_velocity: np.ndarray  # (B, 3) world


class StateMixin:
    """Conservation quantities computed from ``body_state()``; needs ``self.model``."""

    def linear_momentum(self) -> np.ndarray:
        s = self.body_state()
        return (self.model.body_mass[:, None] * s.velocity).sum(axis=0)

    def angular_momentum(self, about=(0.0, 0.0, 0.0)) -> np.ndarray:
        """Total angular momentum about the point ``about``: sum(I_w w + (x - about) x M v)."""
        s = self.body_state()
        rot = quaternion_to_matrix(s.orientation)
        inertia_world = rot @ self.model.body_inertia_local @ np.swapaxes(rot, 1, 2)
        spin = np.einsum("bij,bj->bi", inertia_world, s.angular_velocity)
        orbital = np.cross(s.position - np.asarray(about), self.model.body_mass[:, None] * s.velocity)
        return (spin + orbital).sum(axis=0)

    def kinetic_energy(self) -> float:
        s = self.body_state()
        rot = quaternion_to_matrix(s.orientation)
        inertia_world = rot @ self.model.body_inertia_local @ np.swapaxes(rot, 1, 2)
        spin = np.einsum("bi,bij,bj->b", s.angular_velocity, inertia_world, s.angular_velocity)
        return float(0.5 * (self.model.body_mass * (s.velocity**2).sum(axis=1)).sum() + 0.5 * spin.sum())
