"""The reference engine's bodies (kernels/50_bodies.cl integrate_bodies, 63_islands.cl): the
integration, the rotation step, sleeping."""
from __future__ import annotations

import numpy as np

from .kinematic import turn_quaternion
from .rotations import quaternion_multiply, vector_cross
from .settings import ROTATION_SWEEPS


class ReferenceBodies:
    """ReferenceEngine's integration and sleeping (a mixin: needs its model, parameters and state)."""

    def _integrate(self, force, torque, offset_world):
        m = self.model
        pr = self.params
        substep = pr.substep
        materials = pr.materials
        for b in range(m.body_count):
            if self.kinematic[b]:  # along its path: a straight line at its velocity, a turn at its spin
                self.x[b] += self.P[b] / m.body_mass[b] * substep
                q = quaternion_multiply(turn_quaternion((self.kinematic_omega[b] * substep)[None])[0], self.q[b])
                self.q[b] = q / np.linalg.norm(q)
                continue
            first, count = m.body_first_particle[b], m.body_particle_count[b]
            sl = slice(first, first + count)
            total_force = force[sl].sum(axis=0) + m.body_mass[b] * pr.gravity
            total_torque = np.cross(offset_world[sl], force[sl]).sum(axis=0) + torque[sl].sum(axis=0)
            # sleeping (SimulationSettings.sleep_speed): a still body stays put until accelerated
            rot = self._rotation(b)
            inv_inertia_world = rot @ m.body_inv_inertia_local[b] @ rot.T
            acceleration = (np.linalg.norm(total_force) / m.body_mass[b]
                            + np.linalg.norm(inv_inertia_world @ total_torque) * self.extent[b])
            accelerated = acceleration >= pr.wake_acceleration
            if self.solving:
                # with the solve (50_bodies.cl): still from the velocities the last substep's solve
                # left, counted in substeps up to one short of sleep[1]; islands put bodies to sleep
                # (_sleep_islands); an awake body's records reaching a sleeper wake it (_detect)
                ready = self.sleep[1] - 1.0
                if self._is_asleep(self.quiet[b]):
                    if not self.reached[b]:
                        continue  # held still until an awake body's records reach it
                    self.quiet[b] = 0.0
                elif self.sleep[0] > 0:
                    still = self._fastest_point_speed(b) < self.sleep[0]
                    self.quiet[b] = min(self.quiet[b] + 1.0, ready) if still else 0.0
            elif self._is_asleep(self.quiet[b]):
                contacts_skipped = self.sleepers_skip() and not self.touched[b]
                if contacts_skipped or not accelerated:
                    self._stop(b)
                    continue
                self.quiet[b] = 0.0
            self.P[b] += total_force * substep
            self.L[b] += total_torque * substep
            lin_damp, ang_damp = materials[m.body_material[b], 2:4]
            if lin_damp > 0:
                self.P[b] *= (1 - lin_damp) ** substep
            if ang_damp > 0:
                self.L[b] *= (1 - ang_damp) ** substep
            if pr.terminal_speed > 0:
                speed = np.linalg.norm(self.P[b]) / m.body_mass[b]
                if speed > pr.terminal_speed:
                    self.P[b] *= pr.terminal_speed / speed
            self.x[b] += self.P[b] / m.body_mass[b] * substep
            self.q[b] = self._rotation_step(b, substep)
            if self.solving:
                continue
            still = self.sleep[0] > 0 and not accelerated and self._fastest_point_speed(b) < self.sleep[0]
            self.quiet[b] = self.quiet[b] + substep if still else 0.0
            if self._is_asleep(self.quiet[b]):
                self._stop(b)  # falls asleep now

    def _fastest_point_speed(self, b):
        """An upper bound on how fast any point of body b moves: what sleeping compares with
        sleep_speed (50_bodies.cl)."""
        return np.linalg.norm(self.P[b]) / self.model.body_mass[b] + np.linalg.norm(self._omega(b)) * self.extent[b]

    def _rotation_step(self, b, substep):
        """Body b's orientation after a torque-free substep with its angular momentum L: implicit
        midpoint on the body-frame momentum Pi = R^T L (Pi_m = Pi - substep/2 w_m x Pi_m, w_m = I^-1 Pi_m,
        ROTATION_SWEEPS fixed-point sweeps) and the Cayley rotation by substep w_m, applied in the body
        frame. The new body-frame momentum is then the midpoint rule's: |L| and the kinetic energy
        are kept up to the sweeps' residual and the step is time-reversible (rotation_step in the
        kernels)."""
        inv_inertia = self.model.body_inv_inertia_local[b]
        momentum = self._rotation(b).T @ self.L[b]
        midpoint = momentum
        for _ in range(ROTATION_SWEEPS):
            midpoint = momentum - 0.5 * substep * vector_cross(inv_inertia @ midpoint, midpoint)
        half_turn = 0.5 * substep * inv_inertia @ midpoint
        dq = np.concatenate([[1.0], half_turn]) / np.sqrt(1.0 + half_turn @ half_turn)
        q = quaternion_multiply(self.q[b], dq)
        return q / np.linalg.norm(q)

    def _is_asleep(self, quiet):
        """Whether bodies still for ``quiet`` sleep (scalar or array; is_asleep in the kernels)."""
        return (quiet >= self.sleep[1]) & (self.sleep[0] > 0)

    def _sleep_islands(self):
        """Islands of touching bodies sleep together (63_islands.cl): each pair the detection listed
        lowers both bodies' still counts to the lesser as listed (a sleeping partner is woken by
        the records that reach it, _detect); then every awake body at the top of the count
        sleeps."""
        listed = self.quiet_listed
        asleep = self._is_asleep(listed)
        for b, c in zip(self.pairs.pair_body, self.pairs.pair_other):
            b, c = int(b), int(c)
            if c < 0:
                continue
            if asleep[c]:
                continue
            self.quiet[b] = min(self.quiet[b], listed[c])
            self.quiet[c] = min(self.quiet[c], listed[b])
        for b in np.flatnonzero(~self._is_asleep(self.quiet) & (self.quiet >= self.sleep[1] - 1.0)):
            self.quiet[b] = self.sleep[1]  # falls asleep now, with its whole island
            self._stop(b)

    def sleepers_skip(self) -> bool:
        """Sleeping bodies skip their contacts, except while colliders move (those would not wake them)."""
        return not (self.colliders.moving or self.model.has_kinematic_bodies)

    def _stop(self, b):
        self.P[b] = 0.0
        self.L[b] = 0.0
