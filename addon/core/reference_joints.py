"""The reference engine's joints (core.joints): Box2D v3's soft-step joint solver, in 3D, on Bullet's
6-DOF rows. The specification the kernels will be checked against.

Where they are solved (Box2D's b2SolverStep): in every pass of the substep's velocity solve, before
the contacts (Box2D solves each colour's joints, and the overflow's, before its contacts, so the
contacts see the joints' impulses and have the last word against penetration):
- "warm": each row's impulse of the last substep applied again (b2WarmStartJoint);
- "solve": the rows with their bias (useBias = true): LOCKED and LIMITED rows are soft constraints
  of 0.35 of the substep rate (core.joints.JOINT_HERTZ_FRACTION: stiffer than Box2D's constraintHertz,
  60 Hz capped at a quarter of the substep rate, to sag and break as Bullet's rigid rows do) and
  damping ratio 2, b2MakeSoft's bias rate / mass scale / impulse scale;
- "relax": the same rows without the bias (useBias = false: rigid, Cdot = 0), which removes the
  velocity the bias added so that the push back does not become motion (Box2D's relax iterations);
  springs and motors are solved in it too, as Box2D's, a spring at the stretch the solve read;
- "restitution": nothing (Box2D's b2ApplyRestitution is the contacts').
The separation and angles a "solve" pass reads are the bodies' poses as the substep started
(x_start, q_start: Box2D's bodies do not move until b2IntegratePositions, after the solve), those
of a "relax" pass the poses after it (Box2D relaxes after integrating the positions); impulses of
"warm" and "solve" passes move the bodies as if the substep had run with the new velocities
(ReferenceSolve._change_momenta, as the contacts' do), "relax" ones change only the velocities.

Each joint is six rows (core.joints): linear coordinates of b's anchor along frame a's axes
(Jacobian J = [-e, -(r_a + d) x e, e, r_b x e], the arm on a reaching b's anchor as Box2D's
prismatic joint's), and the XYZ Euler angles of frame b in frame a (Bullet's 6-DOF convention, matrixToEulerXYZ), their
rows J = [0, -a_k, 0, a_k] along the dual basis of the Euler axes so that each row's velocity is
exactly its angle's rate at any angle of the others (_joint_geometry), valid to the gimbal at y =
+-90 degrees, where no Blender type needs to go: HINGE turns about z, which may go round and round.
In a pass a joint's rows are solved in Box2D's revolute order, one after another on the velocities
they leave: springs (soft with the user's stiffness k and damping c: bias rate k / (c + h k), and
a2 = h (c + h k) / m_eff giving mass scale a2 / (1 + a2) and impulse scale 1 / (1 + a2), b2MakeSoft
written with k and c instead of hertz and ratio), motors (clamped accumulated impulse), limits
(one-sided, speculative when open as Box2D's: bias = C / h), then the LOCKED rows together as one
block (K = J M^-1 J^T solved, as Box2D's point and weld blocks: a FIXED joint is exact in one pass).

Breaking (Blender's meaning, which is Bullet's: btSequentialImpulseConstraintSolver clamps each row's
impulse to breaking_threshold in one Bullet substep and disables a constraint whose row reached it):
in every pass each row's accumulated impulse is kept within the threshold scaled from Bullet's
substep to this one (JointModel.bullet_substep), so that a bond passes on no more than that before
it breaks, and a row held there marks its joint; after the passes a marked joint breaks, as does one
whose row's impulse reached the threshold. Without the clamp the struck bonds of a glued wall passed
the impact on as far as 25 m before they broke, and the whole wall slid back with the ball's
momentum (docs/experiments/impact-breaking.md). A broken joint stays broken, takes part
in nothing more (its bodies' contacts come back) and is counted (``broken_joint_count``;
``joint_broken_substep`` says when).

A LOCKED row under a steady load sits where the soft step's spring puts it: load / (m_eff omega^2),
omega = 2 pi 84 Hz at Blender's 240 Hz substeps (0.035 mm for a body's own weight); ten 1 kg links
hanging from one another sag 3.5 mm in all (Bullet's, at Blender's defaults: 3.9 mm). A shorter
substep makes the glue stiffer with it.

Order: colour after colour (core.joints.joint_colouring: no two joints of a colour share a dynamic
body), in index order within a colour: the kernels' order, whose colours are solved side by side.

Sleep: the bodies a joint joins sleep together (at each detection each lowers its still count to
the other's as listed, a joint further each detection, as touching bodies do: 63_islands.cl) and
a sleeper joined to an awake body wakes before the passes.
"""
from __future__ import annotations

import math

import numpy as np

from .joints import LIMITED, LOCKED, ROWS, joint_colouring, joint_hertz
from .rotations import quaternion_to_matrix, vector_cross


def soft(hertz: float, zeta: float, h: float) -> tuple[float, float, float]:
    """Box2D's b2MakeSoft: (bias rate, mass scale, impulse scale) of a soft constraint."""
    if hertz == 0.0:
        return 0.0, 0.0, 0.0
    omega = 2.0 * math.pi * hertz
    a1 = 2.0 * zeta + h * omega
    a2 = h * omega * a1
    a3 = 1.0 / (1.0 + a2)
    return omega / a1, a2 * a3, a3


def euler_xyz(relative: np.ndarray) -> np.ndarray:
    """Bullet's matrixToEulerXYZ: the angles (x, y, z) of R = Rx(x) Ry(y) Rz(z)."""
    return np.array([math.atan2(-relative[1, 2], relative[2, 2]),
                     math.asin(min(max(relative[0, 2], -1.0), 1.0)),
                     math.atan2(-relative[0, 1], relative[0, 0])])


def _unit(v):
    n = np.linalg.norm(v)
    return v / n if n > 1e-12 else v


def _limited(old, impulse, limit):
    """(the accumulated impulse old + impulse kept within +-limit, the change to apply, whether it was
    held): Bullet's breaking, which clamps each row's impulse to the threshold (inf: unbreakable);
    the change is ``impulse`` itself, to the bit, within the limit."""
    now = old + impulse
    if abs(now) > limit:
        now = math.copysign(limit, now)
        return now, now - old, True
    return now, impulse, False


class ReferenceJoints:
    """ReferenceEngine's joints (a mixin: needs its model, parameters and state; before
    ReferenceContacts and ReferenceBodies in the bases, as it filters their pairs and islands)."""

    def _init_joints(self):
        joints = self.model.joints
        count = joints.count if joints is not None else 0
        if count and not self.solving:
            raise ValueError("joints need the velocity solve (Rigid Voxels contacts)")
        # each row's accumulated impulse this substep: the LOCKED block's, the limits' (>= 0), the
        # springs', the motors'
        self.joint_impulse = np.zeros((count, ROWS))
        self.joint_lower_impulse = np.zeros((count, ROWS))
        self.joint_upper_impulse = np.zeros((count, ROWS))
        self.joint_spring_impulse = np.zeros((count, ROWS))
        self.joint_motor_impulse = np.zeros((count, ROWS))
        # which joints are on now: the model's ``enabled`` until set_joints_enabled (a keyed Blender
        # ``enabled``) changes it; the Model itself is never changed
        self.joint_enabled = joints.enabled.copy() if count else np.zeros(0, dtype=bool)
        self.joint_broken = np.zeros(count, dtype=bool)
        self.joint_at_threshold = np.zeros(count, dtype=bool)  # a row held at the threshold this substep
        self.joint_broken_substep = np.full(count, -1, dtype=np.int64)  # the substep it broke in
        self.broken_joint_count = 0
        if count:  # each side's frame as a matrix in its body's frame (the world's for a static side)
            self.joint_frame_matrices = (quaternion_to_matrix(joints.frame_a), quaternion_to_matrix(joints.frame_b))
            self.joint_order = joint_colouring(joints.body_a, joints.body_b)[1]

    @property
    def _joint_count(self) -> int:
        return self.model.joints.count if self.model.joints is not None else 0

    def _active_joints(self):
        if not self._joint_count:
            return np.zeros(0, dtype=np.int64)
        order = self.joint_order
        return order[self.joint_enabled[order] & ~self.joint_broken[order]]

    def set_joints_enabled(self, mask) -> None:
        """Turn joints on or off from the next step on (Blender's ``enabled``, keyed): ``mask`` (J,) bool.
        A joint turned off forgets its impulses (turned on again it starts cold, its frames those of
        the model's start: Bullet keeps a constraint's frames when it is re-enabled), and the bodies
        of a joint that changed wake (one let go falls, one caught is pulled). A broken joint stays
        broken whatever the mask says."""
        mask = np.asarray(mask, dtype=bool).reshape(-1)
        if mask.shape != (self._joint_count,):
            raise ValueError(f"set_joints_enabled needs one flag per joint ({self._joint_count}), got {mask.shape[0]}")
        changed = mask != self.joint_enabled
        if not changed.any():
            return
        off = changed & ~mask
        for stored in (self.joint_impulse, self.joint_spring_impulse, self.joint_motor_impulse,
                       self.joint_lower_impulse, self.joint_upper_impulse):
            stored[off] = 0.0
        joints = self.model.joints
        for body in np.concatenate([joints.body_a[changed], joints.body_b[changed]]):
            if body >= 0:
                self.quiet[body] = 0.0
        self.joint_enabled = mask.copy()

    # -- hooks into the contacts and the islands ---------------------------------------------

    def find_particle_pairs(self, pos):
        """The contacts' particle pairs less those of two bodies an unbroken joint with
        disable_collisions joins (Bullet's checkCollideWithOverride)."""
        pairs = super().find_particle_pairs(pos)
        joints = self.model.joints
        if joints is None or not len(pairs):
            return pairs
        active = self._active_joints()
        active = active[joints.disable_collisions[active] & (joints.body_b[active] >= 0)]
        if not len(active):
            return pairs
        count = self.model.body_count
        a, b = joints.body_a[active].astype(np.int64), joints.body_b[active].astype(np.int64)
        skipped = np.concatenate([a * count + b, b * count + a])
        body = self.model.particle_body.astype(np.int64)
        bi, bj = body[pairs[:, 0]], body[pairs[:, 1]]
        keep = ~((bj >= 0) & np.isin(bi * count + bj, skipped))
        return pairs[keep]

    def _sleep_islands(self):
        """Joined bodies sleep together: each lowers its still count to the other's as the detection
        listed it, unless that one slept (woken before the passes, _solve_joints), as the contacts'
        pairs do (63_islands.cl spread_island_quiet); then the contacts' islands
        (ReferenceBodies._sleep_islands)."""
        joints = self.model.joints
        if joints is not None:
            listed = self.quiet_listed
            asleep = self._is_asleep(listed)
            for k in self._active_joints():
                a, b = int(joints.body_a[k]), int(joints.body_b[k])
                if b < 0:
                    continue
                for x, y in ((a, b), (b, a)):
                    if not asleep[y]:
                        self.quiet[x] = min(self.quiet[x], listed[y])
        super()._sleep_islands()

    # -- the solve ---------------------------------------------------------------------------

    def _solve_joints(self, kind):
        """One pass of the joints (kind as ReferenceSolve._solve_pairs': "warm", "solve", "relax",
        "restitution"), colour after colour (joint_colouring)."""
        if not self._joint_count or kind == "restitution":
            return
        asleep = self._is_asleep(self.quiet)
        if kind == "warm":
            # a sleeper joined to an awake body wakes (Box2D's islands link joined bodies)
            joints = self.model.joints
            for k in self._active_joints():
                a, b = joints.body_a[k], joints.body_b[k]
                if b >= 0 and asleep[a] != asleep[b]:
                    self.quiet[a] = self.quiet[b] = 0.0
            asleep = self._is_asleep(self.quiet)
        self.held = asleep | self.kinematic
        for k in self._active_joints():
            self._solve_joint(int(k), kind, asleep)

    def joint_coordinates(self, k: int, moved: bool = True):
        """Joint k's six coordinates now (moved) or as the substep started: b's anchor along frame
        a's axes (m) and the XYZ Euler angles of frame b in frame a (rad)."""
        return self._joint_geometry(k, moved)[0]

    def _joint_geometry(self, k, moved):
        """(coordinates (6,), Jacobian rows (6, 12) on (v_a, w_a, v_b, w_b))."""
        joints = self.model.joints
        x, q = (self.x, self.q) if moved else (self.x_start, self.q_start)
        a, b = joints.body_a[k], joints.body_b[k]
        local_a, local_b = self.joint_frame_matrices[0][k], self.joint_frame_matrices[1][k]
        rot_a = quaternion_to_matrix(q[a])
        arm_a = rot_a @ joints.anchor_a[k]
        frame_a = rot_a @ local_a
        if b >= 0:
            rot_b = quaternion_to_matrix(q[b])
            arm_b = rot_b @ joints.anchor_b[k]
            point_b = x[b] + arm_b
            frame_b = rot_b @ local_b
        else:
            arm_b = np.zeros(3)
            point_b = joints.anchor_b[k]
            frame_b = local_b
        d = point_b - (x[a] + arm_a)
        coordinates = np.concatenate([frame_a.T @ d, euler_xyz(frame_a.T @ frame_b)])
        jacobian = np.zeros((ROWS, 12))
        reach_a = arm_a + d  # a's arm to b's anchor (Box2D's prismatic joint)
        for row in range(3):
            e = frame_a[:, row]
            jacobian[row] = np.concatenate([-e, -vector_cross(reach_a, e), e, vector_cross(arm_b, e)])
        # each angle's rate: the relative spin w_b - w_a = x' u0 + y' u1 + z' u2 on the Euler axes
        # (a's x, a's y turned by x, b's z), so x' = w . (u1 x u2) / D, y' = w . u1, z' = w . (u0 x u1) / D
        # with D = u0 . (u1 x u2) = cos y: the dual basis (Bullet's 6-DOF constrains the same rates)
        u0, u2 = frame_a[:, 0], frame_b[:, 2]
        u1 = _unit(vector_cross(u2, u0))
        inverse_d = 1.0 / max(float(u0 @ vector_cross(u1, u2)), 1e-3)
        axes = (vector_cross(u1, u2) * inverse_d, u1, vector_cross(u0, u1) * inverse_d)
        for row, axis in enumerate(axes):
            jacobian[3 + row, 3:6], jacobian[3 + row, 9:12] = -axis, axis
        return coordinates, jacobian

    def _solve_joint(self, k, kind, asleep):
        joints = self.model.joints
        m = self.model
        h = self.params.substep
        a, b = int(joints.body_a[k]), int(joints.body_b[k])
        bodies = (a, b)
        # the inverse mass matrix and velocities (a held body: inverse mass 0; a sleeper still)
        inverse = np.zeros((12, 12))
        velocity = np.zeros(12)
        for side, body in enumerate(bodies):
            if body < 0:
                continue
            rot = quaternion_to_matrix(self.q[body])
            inverse_inertia = rot @ m.body_inv_inertia_local[body] @ rot.T
            if not self.held[body]:
                inverse[6 * side:6 * side + 3, 6 * side:6 * side + 3] = np.eye(3) / m.body_mass[body]
                inverse[6 * side + 3:6 * side + 6, 6 * side + 3:6 * side + 6] = inverse_inertia
            if not asleep[body]:
                velocity[6 * side:6 * side + 3] = self.P[body] / m.body_mass[body]
                velocity[6 * side + 3:6 * side + 6] = (self.kinematic_omega[body] if self.kinematic[body]
                                                       else inverse_inertia @ self.L[body])
        if not inverse.any():
            return  # both sides held
        velocity_before = velocity.copy()
        use_bias = kind == "solve"
        # Bullet's breaking: no row applies more than the threshold in a substep (convertJoint clamps
        # each row's limits to it), and a row held at it breaks the joint after the passes
        limit = joints.breaking_threshold[k] * h / joints.bullet_substep
        coordinates, jacobian = self._joint_geometry(k, moved=kind not in ("warm", "solve"))
        generalized = np.zeros(12)  # the pass's impulses on (a, b) as J^T lambda

        def apply(row_jacobian, impulse):
            nonlocal velocity, generalized
            change = row_jacobian.T @ impulse if np.ndim(impulse) else row_jacobian * impulse
            generalized = generalized + change
            velocity = velocity + inverse @ change

        def effective(row):
            return float(jacobian[row] @ inverse @ jacobian[row])

        mode = joints.mode[k]
        if kind == "warm":
            total = (self.joint_impulse[k] + self.joint_spring_impulse[k] + self.joint_motor_impulse[k]
                     + self.joint_lower_impulse[k] - self.joint_upper_impulse[k])
            apply(jacobian, total)
        else:
            # springs, towards the starting pose (soft with the user's stiffness and damping); a relax
            # pass reads them where the solve did, as the substep started: at the moved pose it would
            # push by h k times the velocity again, damping the spring by as much as the soft step
            # itself (which costs c + h k in all, against Box2D's c + 2 h k)
            sprung = np.flatnonzero((joints.spring_stiffness[k] > 0) | (joints.spring_damping[k] > 0))
            stretch = coordinates if kind == "solve" or not len(sprung) else self._joint_geometry(k, False)[0]
            for row in sprung:
                k_row = effective(row)
                if k_row <= 0:
                    continue
                stiffness, damping = joints.spring_stiffness[k, row], joints.spring_damping[k, row]
                a2 = h * (damping + h * stiffness) * k_row
                bias = stiffness / (damping + h * stiffness) * stretch[row]
                cdot = jacobian[row] @ velocity
                impulse = -(a2 / (1 + a2)) / k_row * (cdot + bias) - self.joint_spring_impulse[k, row] / (1 + a2)
                self.joint_spring_impulse[k, row], impulse, held = _limited(self.joint_spring_impulse[k, row], impulse,
                                                                            limit)
                self.joint_at_threshold[k] |= held
                apply(jacobian[row], impulse)
            # motors: the target relative velocity, the accumulated impulse capped
            for row in np.flatnonzero(joints.motor_max_impulse[k] > 0):
                k_row = effective(row)
                if k_row <= 0:
                    continue
                cap = joints.motor_max_impulse[k, row] * h  # a force in effect (core.joints)
                cdot = jacobian[row] @ velocity - joints.motor_velocity[k, row]
                old = self.joint_motor_impulse[k, row]
                now = min(max(old - cdot / k_row, -cap), cap)
                if abs(now) > limit:
                    now = math.copysign(limit, now)
                    self.joint_at_threshold[k] = True
                self.joint_motor_impulse[k, row] = now
                apply(jacobian[row], self.joint_motor_impulse[k, row] - old)
            hertz = joint_hertz(joints, h)
            bias_rate, mass_scale, impulse_scale = soft(hertz, joints.damping_ratio, h)
            # limits, one-sided (Box2D's revolute and prismatic limits)
            for row in np.flatnonzero(mode == LIMITED):
                k_row = effective(row)
                if k_row <= 0:
                    continue
                for sign, stored, gap in ((1.0, self.joint_lower_impulse, coordinates[row] - joints.lower[k, row]),
                                          (-1.0, self.joint_upper_impulse, joints.upper[k, row] - coordinates[row])):
                    bias, scale, forget = 0.0, 1.0, 0.0
                    if gap > 0.0:
                        bias = gap / h  # speculative: may close the gap this substep
                    elif use_bias:
                        bias, scale, forget = bias_rate * gap, mass_scale, impulse_scale
                    cdot = sign * (jacobian[row] @ velocity)
                    old = stored[k, row]
                    impulse = -scale / k_row * (cdot + bias) - forget * old
                    stored[k, row] = max(old + impulse, 0.0)
                    if stored[k, row] > limit:
                        stored[k, row] = limit
                        self.joint_at_threshold[k] = True
                    apply(jacobian[row], sign * (stored[k, row] - old))
            # the LOCKED rows as one block
            locked = np.flatnonzero(mode == LOCKED)
            if len(locked):
                rows = jacobian[locked]
                block = rows @ inverse @ rows.T
                cdot = rows @ velocity
                bias, scale, forget = np.zeros(len(locked)), 1.0, 0.0
                if use_bias:
                    bias = bias_rate * (coordinates[locked] - joints.lower[k, locked])
                    scale, forget = mass_scale, impulse_scale
                # a held side or a body of too few particles may leave the block singular
                solved = np.linalg.lstsq(block, cdot + bias, rcond=1e-12)[0]
                impulse = -scale * solved - forget * self.joint_impulse[k, locked]
                for i, row in enumerate(locked):
                    self.joint_impulse[k, row], impulse[i], held = _limited(self.joint_impulse[k, row], impulse[i],
                                                                            limit)
                    self.joint_at_threshold[k] |= held
                apply(rows, impulse)
        move = kind in ("warm", "solve")
        for side, body in enumerate(bodies):
            if body < 0 or self.held[body]:
                continue
            linear, angular = generalized[6 * side:6 * side + 3], generalized[6 * side + 3:6 * side + 6]
            self._change_momenta(body, linear, angular, move, velocity_before[6 * side + 3:6 * side + 6])

    def _break_joints(self):
        """After the substep's passes: a row whose impulse, scaled to a Bullet substep, reached the
        joint's breaking threshold breaks it (for good)."""
        if not self._joint_count:
            return
        joints = self.model.joints
        total = (self.joint_impulse + self.joint_spring_impulse + self.joint_motor_impulse
                 + self.joint_lower_impulse - self.joint_upper_impulse)
        per_bullet_substep = np.abs(total).max(axis=1) * joints.bullet_substep / self.params.substep
        breaking = ((per_bullet_substep >= joints.breaking_threshold) | self.joint_at_threshold) & ~self.joint_broken \
            & self.joint_enabled
        self.joint_at_threshold[:] = False
        if breaking.any():
            self.joint_broken |= breaking
            self.joint_broken_substep[breaking] = self.substeps_done
            self.broken_joint_count += int(breaking.sum())
            for stored in (self.joint_impulse, self.joint_spring_impulse, self.joint_motor_impulse,
                           self.joint_lower_impulse, self.joint_upper_impulse):
                stored[breaking] = 0.0
