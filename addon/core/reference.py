"""Plain NumPy implementation of one substep: the specification the OpenCL kernels are tested against.

It is written for clarity, not speed: contacts are found by brute force (every particle against
every other), so it also checks the grid of the OpenCL engine. Use it for scenes of up to a few
thousand particles.

One substep (seed ch. 5-6, with friction and restitution added):
 1. particle kinematics: p = x + R r0, v = v_body + w x (R r0) (kernels/20_gather.cl; the grid of
    10_grid.cl is brute force here)
 2. per particle: spring-dashpot normal force and Coulomb-capped tangential spring-dashpot
    (friction) against other bodies' particles, static particles and planes (40_contacts.cl
    compute_contacts; ``_contact`` is 00_common.h's add_contact, ``_triangle_contacts`` and the
    planes 30_colliders.cl's collider_contacts)
 3. per body: F = sum f + M g, T = sum (r x f + tau); P += F dt, L += T dt, damping, terminal speed
 4. x += v dt; q by the implicit-midpoint / Cayley rotation step (``_rotation_step``, 00_common.h
    rotation_step); w = R I^-1 R^T L (3-4: ``_integrate``, 50_bodies.cl integrate_bodies)
 5. Rigid Voxels: no springs in step 2 but records, solved at the velocity level over coloured
    body pairs' manifolds (``_solve_pairs``, 60_solve.cl, 61_pair_colouring.cl, 62_pair_solve.cl),
    the contacts detected every ``substeps_per_detection`` substeps
"""
from __future__ import annotations

import numpy as np

from .voxel_pairs import PUSH_OUT_SPEED, exposed_faces, is_voxel_pair, voxel_pair
from .colliders import DUPLICATE_POINT_TOLERANCE, FACE_REGION, ColliderMotion, closest_point_on_triangle
from .model import STATIC_BODY, Model, body_extents
from .impacts import impact_times, interpolated_pose
from .manifold import MANIFOLD_POINTS, manifold_group, manifold_groups, reduce_manifold
from .pair_colouring import INITIAL_MAX_PAIRS, SPARE_COLOUR_ROUNDS, colour_pairs, grown_max_pairs, list_pairs
from .rotations import quaternion_multiply, quaternion_to_matrix, rotate_by_vector
from .settings import (COLLIDER_SPECULATIVE_REACH, DAMPING_LIMIT, FRICTION_SLOTS, IMPACT_SPEED, TURNING_ANCHOR, WAKE_PASSES,
                       MANIFOLD_RESTITUTION_PASSES, ROLLING_REGULARIZATION, ROTATION_SWEEPS, SPECULATIVE_REACH,
                       SimulationSettings, SolverParameters, solver_parameters)
from .state import BodyState, StateMixin
from .voxel_corners import FACE_LIKE_COSINE, voxel_support

EMPTY_SLOT = -1


def plane_key(plane_index: int) -> int:
    """Friction-history key of a plane contact (particle contacts use the partner's index)."""
    return -2 - plane_index


class ReferenceEngine(StateMixin):
    """Same model, parameters and step as ``OpenCLEngine``, in float64 NumPy."""

    def __init__(self, model: Model, parameters: SolverParameters | SimulationSettings | None = None):
        """parameters: the solver's (Simulation's), or settings to derive them from (solver_parameters)."""
        self.model = model
        self.params = solver_parameters(model, parameters)
        self.settings = self.params.settings
        self.time = 0.0
        self.substeps_done = 0
        m = model
        self.x = m.body_position.copy()
        self.q = m.body_orientation.copy()
        # the poses at the end of the last substep, after its impacts: where the next one's sweeps start
        self.impact_x, self.impact_q = self.x.copy(), self.q.copy()
        # gravity's half kick: momenta live at half substeps (leapfrog), so free fall is exact
        self.P = (m.body_velocity - 0.5 * self.params.gravity * self.params.substep) * m.body_mass[:, None]
        self.L = np.zeros_like(self.x)
        for b in range(m.body_count):
            inertia_world = self._rotation(b) @ m.body_inertia_local[b] @ self._rotation(b).T
            self.L[b] = inertia_world @ m.body_angular_velocity[b]
        self.history_key = np.full((m.particle_count, FRICTION_SLOTS), EMPTY_SLOT, dtype=np.int64)
        self.history_xi = np.zeros((m.particle_count, FRICTION_SLOTS, 3))
        # voxel pairs: how deep each contact's spring may push (the kernels' friction slot .w)
        self.history_permitted = np.zeros((m.particle_count, FRICTION_SLOTS))
        self.dynamic = m.particle_body != STATIC_BODY
        # speculative contacts reach the margin, and its growth with the closing speed, further
        self.colliders = ColliderMotion(m, self.params.collider_reach)
        self.extent = body_extents(m)
        # how long each body has been still (SimulationSettings.sleep_speed): seconds with springs,
        # substeps with the solve, asleep from sleep[1] on (self.sleep)
        self.quiet = np.zeros(m.body_count)
        # an awake body touched this sleeping one in the previous substep: it computes its contacts
        self.touched = np.zeros(m.body_count, dtype=bool)
        # with the solve: the sleepers an awake body's records reached at this detection, directly
        # (1) or through other such sleepers (2, ...), which compute their contacts in it and wake
        # before its solve (40_contacts.cl woken_pass); 0: not reached
        self.reached = np.zeros(m.body_count, dtype=np.int64)
        # each body's mass over its contacts in the previous substep, capped at the flat-face
        # share: bounds the damping (DAMPING_LIMIT)
        self.contact_share = m.body_effective_mass.copy()
        # whole voxels of two bodies meeting box against box (core.voxel_pairs)
        self.voxels = self.params.geometry.voxel_pairs
        self.faces = exposed_faces(m) if self.voxels else None
        self.margin = self.settings.speculative_margin  # radii
        self.solve_passes = self.settings.solve_passes
        # the velocity solve (Rigid Voxels); it reads a voxel pair's record on the lower body's side only
        self.solving = self.params.solving
        self.sleep = self.params.sleep_argument(self.colliders.moving)
        self.max_pairs = INITIAL_MAX_PAIRS  # pair slots per body (grown as the kernels' are)
        # what the detections so far needed, taken one detection late as the kernels read it
        # back (solve_launches._colour_pairs): None before the first detection
        self.colour_rounds = self.colour_limit = None
        self._last_pairs_needed = 0
        self.pairs = None  # the last substep's coloured pairs (pair_colouring.SolvePairs)
        # per friction slot: the contact's impulses at the end of the substep (tangential, normal)
        self.history_impulse = np.zeros((m.particle_count, FRICTION_SLOTS, 4))
        # the bodies a solve pass holds like static sides: the sleeping ones (62_pair_solve.cl)
        self.held = np.zeros(m.body_count, dtype=bool)

    def set_collider_frame(self, frame: int, frame_duration: float):
        """Animated colliders: move them from output frame ``frame`` towards the next one."""
        self.colliders.set_frame(frame, frame_duration)

    def _contact_mass(self, body):
        """(flat-face share, share of the previous substep's contacts) of ``body``'s mass, for
        damping (None: static, infinite)."""
        if body == STATIC_BODY:
            return None
        return self.model.body_effective_mass[body], self.contact_share[body]

    # -- body kinematics -------------------------------------------------------------------
    def _rotation(self, b):
        return quaternion_to_matrix(self.q[b])

    def _inverse_inertia(self, b):
        """Body b's world inverse inertia as the solve sees it (zero while held, self.held)."""
        if self.held[b]:
            return np.zeros((3, 3))
        rot = self._rotation(b)
        return rot @ self.model.body_inv_inertia_local[b] @ rot.T

    def _omega(self, b):
        rot = self._rotation(b)
        return rot @ self.model.body_inv_inertia_local[b] @ rot.T @ self.L[b]

    def body_state(self) -> BodyState:
        m = self.model
        omega = np.array([self._omega(b) for b in range(m.body_count)]).reshape(-1, 3)
        velocity = self.P / m.body_mass[:, None]
        if self.solving:
            # a sleeper is still (stopped when it fell asleep, and held since: _solve_pairs)
            asleep = self._is_asleep(self.quiet)
            velocity[asleep] = 0.0
            omega[asleep] = 0.0
        return BodyState(self.x.copy(), self.q.copy(), velocity, omega)

    def particle_kinematics(self):
        """World positions and velocities of all particles, and the world offsets from their COM."""
        m = self.model
        pos = m.particle_offset.copy()
        vel = np.zeros_like(pos)
        offset_world = np.zeros_like(pos)
        state = self.body_state()
        rot = quaternion_to_matrix(self.q)
        body = m.particle_body
        dyn = self.dynamic
        offset_world[dyn] = np.einsum("pij,pj->pi", rot[body[dyn]], m.particle_offset[dyn])
        pos[dyn] = self.x[body[dyn]] + offset_world[dyn]
        vel[dyn] = state.velocity[body[dyn]] + np.cross(state.angular_velocity[body[dyn]], offset_world[dyn])
        return pos, vel, offset_world, state

    def particle_positions(self) -> np.ndarray:
        return self.particle_kinematics()[0]

    # -- contacts --------------------------------------------------------------------------
    def find_particle_pairs(self, pos):
        """All (i, j), i dynamic, j of another body (or static), closer than a diameter and the margin
        (with voxel contacts: closer than VOXEL_PAIR_REACH radii and the margin); i-major, j ascending."""
        m = self.model
        body = m.particle_body
        diff = pos[None, :, :] - pos[:, None, :]
        dist2 = np.einsum("ijk,ijk->ij", diff, diff)
        reach2 = np.full_like(dist2, ((2 + self.margin) * m.particle_radius) ** 2)
        if self.voxels:
            # every pair as far as whole voxels reach (40_contacts.cl): spheres' margins grow with
            # their closing speed within it (_detect)
            reach2[:] = (self.params.voxel_pair_reach * m.particle_radius) ** 2
        close = (dist2 < reach2) & (body[:, None] != body[None, :]) & self.dynamic[:, None]
        np.fill_diagonal(close, False)
        return np.argwhere(close)

    def step(self, count: int = 1):
        for _ in range(count):
            self._step()

    def _particle_material(self, p):
        b = self.model.particle_body[p]
        if b == STATIC_BODY:
            return self.model.static_particle_material[p - self.model.dynamic_particle_count]
        return self.model.body_material[b]

    def _contact_law(self, b, n, arm, overlap, vel_i, omega_i, vel_j, omega_j, mat_j, mass_j, xi):
        """One contact's law seen from a particle of body b (00_common.h contact_law): n points towards
        the other side, ``arm`` from the particle's centre to the contact point, ``xi`` the friction
        spring carried over. Returns the force, the rolling couple and the new spring."""
        pr = self.params
        m = self.model
        r = m.particle_radius
        mat_i = m.body_material[b]
        # the masses the contact moves (pair_mass in the kernels): from the flat-face shares, and
        # from the shares of the previous substep's contacts
        masses_i = self._contact_mass(b)
        if mass_j is None:
            m_eff, m_share = masses_i
        else:
            m_eff, m_share = (a * c / (a + c) for a, c in zip(masses_i, mass_j))
        zeta = pr.damping_ratio[mat_i, mat_j]
        damping = 2 * zeta * np.sqrt(m_eff * pr.stiffness)
        # the sum of a body's dashpots may damp its velocity by at most DAMPING_LIMIT per substep
        scale = min(1.0, DAMPING_LIMIT * m_share / (damping * pr.substep)) if damping > 0 else 1.0
        damping *= scale
        damping_t = scale * 2 * zeta * np.sqrt(m_eff * pr.tangential_stiffness)
        vc_i = vel_i + np.cross(omega_i, arm)
        vc_j = vel_j + np.cross(omega_j, -arm)
        v_rel = vc_i - vc_j
        vn = v_rel @ n
        fn = pr.stiffness * overlap + damping * vn
        fn = max(fn, 0.0)
        v_t = v_rel - vn * n
        xi = xi + v_t * pr.substep
        f_t = -pr.tangential_stiffness * xi - damping_t * v_t
        limit = pr.friction[mat_i, mat_j] * fn
        ft_norm = np.linalg.norm(f_t)
        if ft_norm > limit:
            f_t = f_t * (limit / ft_norm) if ft_norm > 0 else f_t * 0
            xi = -(f_t + damping_t * v_t) / pr.tangential_stiffness
        couple = np.zeros(3)
        w_rel = omega_i - omega_j
        w_roll = w_rel - (w_rel @ n) * n
        w_roll_norm = np.linalg.norm(w_roll)
        if w_roll_norm > 0:
            rolling = pr.rolling_friction[mat_i, mat_j] * r * fn
            couple = -rolling * w_roll / max(w_roll_norm, ROLLING_REGULARIZATION)
        return -fn * n + f_t, couple, xi

    @staticmethod
    def _history_slot(keys, key):
        """The slot of a particle's friction history (``keys`` in slot order) holding ``key``, or None
        (00_common.h history_slot)."""
        for s in range(FRICTION_SLOTS):
            if keys[s] == EMPTY_SLOT:
                break
            if keys[s] == key:
                return s
        return None

    @classmethod
    def _stored_spring(cls, slots_in, key, n):
        """The friction spring kept under ``key``, in the plane normal to n (zero if none)."""
        s = cls._history_slot(slots_in[0], key)
        return np.zeros(3) if s is None else slots_in[1][s] - (slots_in[1][s] @ n) * n

    @staticmethod
    def _weaker_contact(depth_a, key_a, depth_b, key_b) -> bool:
        """Contact a is weaker than b: shallower, or as deep with a higher key (00_common.h)."""
        return depth_a < depth_b or (depth_a == depth_b and key_a > key_b)

    def _take_slot(self, slots_out, key, depth):
        """The friction slot a contact of ``depth`` takes (00_common.h take_slot): the next free one,
        or with every slot taken the weakest one's if this contact is stronger; None if none. A
        particle keeps its FRICTION_SLOTS deepest contacts whatever order they are found in."""
        keys, depths, count = slots_out[0], slots_out[5], slots_out[2]
        if count < FRICTION_SLOTS:
            slots_out[2] = count + 1
            depths[count] = depth
            return count
        weakest = 0
        for s in range(1, FRICTION_SLOTS):
            if self._weaker_contact(depths[s], keys[s], depths[weakest], keys[weakest]):
                weakest = s
        if not self._weaker_contact(depths[weakest], keys[weakest], depth, key):
            return None
        depths[weakest] = depth
        return weakest

    def _contact(self, i, key, n, arm, overlap, vel_i, omega_i, vel_j, omega_j, mat_j, mass_j, slots_in, slots_out,
                 depth=None):
        """(force on particle i from one contact, the torque about i's centre, the friction slot it
        took or None). n points i -> j; ``arm``: from i's centre to the contact point (halfway to j's
        centre between particles; see voxel_corners); ``depth``: its geometric depth (the overlap
        unless given), which its slot is ranked by."""
        xi = self._stored_spring(slots_in, key, n)
        force, couple, xi = self._contact_law(self.model.particle_body[i], n, arm, overlap, vel_i, omega_i, vel_j,
                                              omega_j, mat_j, mass_j, xi)
        slot = self._take_slot(slots_out, key, np.float32(overlap if depth is None else depth))
        if slot is not None:
            slots_out[0][slot] = key
            slots_out[1][slot] = xi
        return force, np.cross(arm, force) + couple, slot  # the normal force's couple is zero for arm || n

    def _voxel_pair(self, i, j, pos, vel, state, asleep, slots_in, permitted_in, slots_out, touched_next, force,
                    torque):
        """The pair (i, j) of two bodies' whole voxels under voxel contacts (34_voxel_pairs.cl
        voxel_pair_contact): box against box, computed with the lower body's voxel first on both
        sides, the contact law at the one point between them, scaled by the pair's share."""
        m = self.model
        b, bj = m.particle_body[i], m.particle_body[j]
        frames = [self._rotation(body) @ quaternion_to_matrix(m.body_lattice_orientation[body]) for body in (b, bj)]
        swapped = b > bj
        # the voxel centres' velocities (the speculative margin's growth)
        centre_i, centre_j = (state.velocity[body] + np.cross(state.angular_velocity[body], pos[p] - self.x[body])
                              for body, p in ((b, i), (bj, j)))
        if swapped:
            contact = voxel_pair(pos[j], frames[1], self.faces[j], pos[i], frames[0], self.faces[i], m.particle_radius,
                                 self.margin * m.particle_radius, centre_j - centre_i, self._speculative_growth)
        else:
            contact = voxel_pair(pos[i], frames[0], self.faces[i], pos[j], frames[1], self.faces[j], m.particle_radius,
                                 self.margin * m.particle_radius, centre_i - centre_j, self._speculative_growth)
        if contact is None:
            return
        n, depth, point, share = contact
        if swapped:
            n = -n
        arm = point - pos[i]
        omega_i, omega_j = state.angular_velocity[b], state.angular_velocity[bj]
        point_velocity_j = state.velocity[bj] + np.cross(omega_j, point - self.x[bj])
        # contact_law takes j's side as a centre moving with -arm; the point is j's at point - pos[j]
        vel_j = point_velocity_j + np.cross(omega_j, arm)
        # push-out (34_voxel_pairs.cl voxel_pair_contact): how deep the pair's spring may push grows from
        # the birth depth by the closing speed plus PUSH_OUT_SPEED per second (not while parting faster)
        slot = self._history_slot(slots_in[0], j)
        permitted = self.params.push_out_birth_depth if slot is None else permitted_in[slot]
        closing = (vel[i] + np.cross(omega_i, arm) - point_velocity_j) @ n
        parting_fast = -closing > PUSH_OUT_SPEED
        permitted += (max(closing, 0.0) + (0.0 if parting_fast else PUSH_OUT_SPEED)) * self.params.substep
        law_depth = depth
        if depth > permitted:
            law_depth = 0.0 if parting_fast else permitted
        f, t, slot = self._contact(i, j, n, arm, law_depth, vel[i], omega_i, vel_j, omega_j,
                                   self._particle_material(j), self._contact_mass(bj), slots_in, slots_out, depth)
        if slot is not None:
            slots_out[4][slot] = permitted
            # the damping cap counts the pair for its share (34_voxel_pairs.cl voxel_pair_contact)
            slots_out[3] += share - 1.0
            self._record(i, slot, slots_in, j, n, bj, point - self.x[b], depth, point - self.x[bj], share,
                         self._particle_material(j), closing)
        force[i] += share * f
        torque[i] += share * t

    def _speculative_growth(self, closing: float) -> float:
        """How much further than the margin a contact closing at this speed is detected (metres;
        30_colliders.cl speculative_growth)."""
        return min(max(closing, 0.0) * self.params.speculative_time, SPECULATIVE_REACH * self.model.particle_radius)

    def _collider_speculative_growth(self, closing: float) -> float:
        """A triangle collider's: up to COLLIDER_SPECULATIVE_REACH radii (30_colliders.cl
        collider_speculative_growth)."""
        return min(max(closing, 0.0) * self.params.speculative_time, COLLIDER_SPECULATIVE_REACH * self.model.particle_radius)

    def _plane_speculative_growth(self, closing: float) -> float:
        """A plane's: the whole way it closes until the next detection (30_colliders.cl
        plane_speculative_growth)."""
        return max(closing, 0.0) * self.params.speculative_time

    def _step(self):
        m = self.model
        pr = self.params
        dt = pr.substep
        # contacts detected every substeps_per_detection substeps: between detections the records,
        # pairs and colours stay, their depths following the bodies' motion (_depth_shift)
        every = self.settings.substeps_per_detection
        detecting = self.substeps_done % every == 0
        pos, vel, offset_world, state = self.particle_kinematics()
        force = np.zeros_like(pos)
        torque = np.zeros_like(pos)
        self.x_start, self.q_start = self.x.copy(), self.q.copy()
        if detecting:
            self.x_detect, self.q_detect = self.x.copy(), self.q.copy()
            self.touched_next = self._detect(pos, vel, offset_world, state, force, torque)
        self.colliders.tau += dt
        if not self.settings.contact_springs:
            force[:] = 0.0  # the solve alone holds the contacts (40_contacts.cl RIGID_VOXELS)
            torque[:] = 0.0
        self._integrate(force, torque, offset_world)
        self.reached[:] = 0  # read once (50_bodies.cl clears body_reached)
        last_of_step = (self.substeps_done + 1) % every == 0
        if self.solving:
            if detecting:
                self.pairs = self._colour_solve_pairs()
            kinds = ["warm"] + ["solve"] * self.solve_passes + ["relax"] * self.settings.relax_passes
            if last_of_step:
                # once per detection, after the relax passes (Box2D's b2ApplyRestitution)
                kinds += ["restitution"] * MANIFOLD_RESTITUTION_PASSES
            for kind in kinds:
                self._solve_pairs(kind)
            if detecting and self.sleep[0] > 0:
                self._sleep_islands()
            self._stop_at_impacts()
        # what this detection touched, read by the first substep after the next detection (the
        # kernels' double buffer swaps once per detection; later substeps read it cleared)
        self.touched = self.touched_next if last_of_step else np.zeros(m.body_count, dtype=bool)
        self.history_impulse = self.new_history_impulse
        self.time += dt
        self.substeps_done += 1

    def _stop_at_impacts(self):
        """Fast bodies swept over the substep and put back at their time of impact (70_impacts.cl;
        core.impacts)."""
        times = impact_times(self.model, self.impact_x, self.impact_q, self.x, self.q, self.extent,
                             self.colliders.vertices_now(), self.settings.substeps_per_detection)
        for b in np.flatnonzero(times < 1.0):
            self.x[b], self.q[b] = interpolated_pose(self.impact_x[b], self.impact_q[b], self.x[b], self.q[b],
                                                     times[b])
        self.impact_x, self.impact_q = self.x.copy(), self.q.copy()

    def _detect(self, pos, vel, offset_world, state, force, torque):
        """The substep's contacts (40_contacts.cl compute_contacts): forces and torques per particle
        added to ``force``/``torque``, the friction history, the solve's records."""
        m = self.model
        new_key = np.full_like(self.history_key, EMPTY_SLOT)
        new_xi = np.zeros_like(self.history_xi)
        new_permitted = np.zeros_like(self.history_permitted)
        pairs = self.find_particle_pairs(pos)
        pairs_of: dict[int, list[int]] = {}
        for i, j in pairs:
            pairs_of.setdefault(int(i), []).append(int(j))
        asleep = self._is_asleep(self.quiet)
        touched_next = np.zeros(m.body_count, dtype=bool)
        contacts = np.zeros(m.body_count)
        self.records = {}  # particle -> its contacts for the velocity solve (_record)
        self.new_history_impulse = np.zeros_like(self.history_impulse)
        for i in np.flatnonzero(self.dynamic):
            b = m.particle_body[i]
            if asleep[b] and self.sleepers_skip() and not self.touched[b]:
                # a sleeping body nothing awake touched: no contacts, friction springs carry over
                new_key[i], new_xi[i] = self.history_key[i], self.history_xi[i]
                new_permitted[i] = self.history_permitted[i]
                self.new_history_impulse[i] = self.history_impulse[i]
                continue
            self._particle_contacts(i, pairs_of.get(int(i), ()), pos, vel, offset_world, state, asleep, new_key,
                                    new_xi, new_permitted, touched_next, contacts, force, torque)
        if self.solving and self.sleep[0] > 0:
            # an awake body's records reach a sleeper: it computes its contacts now and wakes before
            # the solve, and so do the sleepers its records reach, WAKE_PASSES deep (40_contacts.cl
            # woken_pass), as Box2D wakes a touched island in the collide phase
            self.reached[:] = 0
            body_of = np.maximum(m.particle_body, 0)
            computing = self.dynamic & ~asleep[body_of]
            for woken_pass in range(WAKE_PASSES + 1):
                if woken_pass:
                    computing = self.dynamic & (self.reached[body_of] == woken_pass)
                    for i in np.flatnonzero(computing):
                        new_key[i], new_xi[i], new_permitted[i] = EMPTY_SLOT, 0.0, 0.0
                        self.new_history_impulse[i] = 0.0
                        self.records.pop(int(i), None)
                        self._particle_contacts(i, pairs_of.get(int(i), ()), pos, vel, offset_world, state, asleep,
                                                new_key, new_xi, new_permitted, touched_next, contacts, force, torque)
                if woken_pass == WAKE_PASSES:
                    break
                for i in np.flatnonzero(computing):
                    for record in self.records.get(int(i), ()):
                        if record[1] >= 0 and asleep[record[1]] and self.reached[record[1]] == 0:
                            self.reached[record[1]] = woken_pass + 1
        self.history_key, self.history_xi, self.history_permitted = new_key, new_xi, new_permitted
        self.contact_share = np.minimum(m.body_effective_mass, m.body_mass / np.maximum(contacts, 1.0))
        return touched_next

    def _particle_contacts(self, i, partners, pos, vel, offset_world, state, asleep, new_key, new_xi, new_permitted,
                           touched_next, contacts, force, torque):
        """Particle i's contacts with its partner particles, the planes and the triangles
        (40_contacts.cl particle_contacts): its friction history's new row, its records, its force."""
        m = self.model
        r = m.particle_radius
        zero = np.zeros(3)
        b = m.particle_body[i]
        omega_i = state.angular_velocity[b]
        slots_in = (self.history_key[i], self.history_xi[i])
        # keys, springs, slots used, count adjustment, permitted push-out depths (voxel pairs)
        # and each slot's contact's depth (_take_slot)
        slots_out = [new_key[i], new_xi[i], 0, 0.0, new_permitted[i], np.zeros(FRICTION_SLOTS, np.float32)]
        for j in partners:
            delta = pos[j] - pos[i]
            dist = np.linalg.norm(delta)
            if dist <= 1e-9 * r:
                continue
            if self.voxels and is_voxel_pair(m, i, j):
                if self.solving and b > m.particle_body[j] and not asleep[m.particle_body[j]]:
                    continue  # the lower body's side computes it (40_contacts.cl LOWER_SIDE_PAIRS)
                self._voxel_pair(i, j, pos, vel, state, asleep, slots_in, self.history_permitted[i], slots_out,
                                 touched_next, force, torque)
                continue
            n = delta / dist
            # spheres within the margin and what they close until the next detection
            if dist >= (2 + self.margin) * r + self._speculative_growth((vel[i] - vel[j]) @ n):
                continue
            bj = m.particle_body[j]
            if bj == STATIC_BODY:
                omega_j, mass_j = zero, None
            else:
                omega_j, mass_j = state.angular_velocity[bj], self._contact_mass(bj)
                if asleep[bj] and not asleep[b] and not self.solving:
                    touched_next[bj] = True  # (the solve's sleepers: woken by the records that reach them)
            # the pair's one contact point, halfway between the centres (equal, opposite, collinear
            # forces: angular momentum kept with friction)
            f, t, slot = self._contact(i, j, n, 0.5 * dist * n, 2 * r - dist, vel[i], omega_i, vel[j], omega_j,
                                       self._particle_material(j), mass_j, slots_in, slots_out)
            if not self.settings.contact_springs and slot is not None:
                # without springs the solve holds it too (32_sphere_pairs.cl sphere_pair_contact)
                point = pos[i] + 0.5 * dist * n
                self._record(i, slot, slots_in, j, n, bj, offset_world[i] + 0.5 * dist * n, 2 * r - dist,
                             point - self.x[bj] if bj != STATIC_BODY else zero, 1.0, self._particle_material(j),
                             (vel[i] + np.cross(omega_i, 0.5 * dist * n) - vel[j]) @ n)
            force[i] += f
            torque[i] += t
        lattice = self._rotation(b) @ quaternion_to_matrix(m.body_lattice_orientation[b])
        reach = m.particle_corner_reach[i]
        # the voxel's support sphere in world space (a radius of 0: none)
        sphere = (self._rotation(b) @ m.particle_support_sphere[i, :3], m.particle_support_sphere[i, 3])
        for g in range(m.plane_count):
            height = (pos[i] - m.plane_point[g]) @ m.plane_normal[g]
            # the point that touches at TURNING_ANCHOR of the step (30_colliders.cl)
            u_turned = (rotate_by_vector(-m.plane_normal[g], -TURNING_ANCHOR * self.params.speculative_time * omega_i)
                        if self.solving else None)
            depth, arm = voxel_support(-m.plane_normal[g], reach, lattice, r, sphere, u_turned)
            if height < depth + self.margin * r + self._plane_speculative_growth(
                    (vel[i] + np.cross(omega_i, arm)) @ -m.plane_normal[g]):
                f, t, slot = self._contact(i, plane_key(g), -m.plane_normal[g], arm, depth - height, vel[i],
                                           omega_i, zero, zero, m.plane_material[g], None, slots_in, slots_out)
                if slot is not None:
                    self._record(i, slot, slots_in, plane_key(g), -m.plane_normal[g], STATIC_BODY,
                                 offset_world[i] + arm, depth - height, zero, 1.0, m.plane_material[g],
                                 (vel[i] + np.cross(omega_i, arm)) @ -m.plane_normal[g])
                force[i] += f
                torque[i] += t
        self._triangle_contacts(i, pos[i], vel[i], omega_i, reach, lattice, sphere, slots_in, slots_out, force,
                                torque, offset_world[i])
        # as the kernel: contacts beyond FRICTION_SLOTS not counted, voxel pairs for their share
        contacts[b] += slots_out[2] + slots_out[3]

    def _triangle_contacts(self, i, p, vel_i, omega_i, reach, lattice, sphere, slots_in, slots_out, force, torque,
                           offset_i):
        """Face contacts (of the voxel, see voxel_corners); or, only if there are none (nor a face
        within reach of a support sphere), each distinct edge/vertex contact of the particle's
        sphere once."""
        m = self.model
        if m.triangle_count == 0:
            return
        r = m.particle_radius
        vertices = self.colliders.vertices_now()
        velocities = self.colliders.velocities
        candidates = self.colliders.grid.candidates(p)
        face_contacts = 0
        face_claimed = False  # by a face within reach of a voxel with a support sphere
        edge_points = []
        for pass_ in (0, 1):
            if pass_ == 1 and (face_contacts or face_claimed):
                break
            for t in candidates:
                tri = m.mesh_triangles[t]
                q, bary, region = closest_point_on_triangle(p, *vertices[tri])
                if (pass_ == 0) != (region == FACE_REGION):
                    continue
                delta = q - p
                dist = np.linalg.norm(delta)
                # beyond what any voxel reaches (30_colliders.cl's collider reach)
                if dist <= 1e-9 * r or dist >= self.colliders.reach:
                    continue
                n = delta / dist
                # a face meets the voxel, an edge or a vertex the sphere, except straight along the
                # normal (right over the edge between two triangles of a flat floor)
                face_like = pass_ == 0
                if not face_like:
                    normal = np.cross(vertices[tri[1]] - vertices[tri[0]], vertices[tri[2]] - vertices[tri[0]])
                    face_like = abs(n @ normal) >= FACE_LIKE_COSINE * np.linalg.norm(normal) > 0
                depth, arm = voxel_support(n, reach, lattice, r, sphere) if face_like else (r, r * n)
                # a face within reach claims a voxel with a support sphere, touching or not (no
                # edge contacts of its particle's sphere); the sphere's point off its patch: the
                # face meets the sphere through another voxel (30_colliders.cl)
                face_claimed = face_claimed or (face_like and pass_ == 0 and sphere[1] > 0.0)
                if depth == -np.inf:
                    continue
                v_tri = bary @ velocities[tri]
                if dist >= depth + self.margin * r + self._collider_speculative_growth(
                        (vel_i + np.cross(omega_i, arm) - v_tri) @ n):
                    continue
                if pass_ == 1:
                    if any(np.linalg.norm(e - q) < DUPLICATE_POINT_TOLERANCE * r for e in edge_points):
                        continue
                    if len(edge_points) < 8:
                        edge_points.append(q)
                else:
                    face_contacts += 1
                f, tq, slot = self._contact(i, -2 - m.plane_count - int(t), n, arm, depth - dist, vel_i, omega_i,
                                            v_tri, np.zeros(3), m.triangle_material[t], None, slots_in, slots_out)
                if slot is not None:
                    self._record(i, slot, slots_in, -2 - m.plane_count - int(t), n, STATIC_BODY, offset_i + arm,
                                 depth - dist, v_tri, 1.0, m.triangle_material[t],
                                 (vel_i + np.cross(omega_i, arm) - v_tri) @ n)
                force[i] += f
                torque[i] += tq

    # -- velocity solve (voxel contacts with solve_passes; 60_solve.cl) ------------------------
    def _record(self, i, slot, slots_in, key, n, other, arm_i, depth, arm_j, share, material_j, closing):
        """The contact of particle i in friction slot ``slot`` (history key ``key``, closing at
        ``closing`` m/s) for the velocity solve (00_common.h write_solve_record): normal i -> other
        side, the other body (STATIC_BODY: arm_j is then the static side's velocity at the point),
        arms from the bodies' centres, depth, share, friction, restitution and impact speed (how
        fast it closed at this detection)."""
        if not self.solve_passes:
            return
        old = self._history_slot(slots_in[0], key)
        impact = max(closing, 0.0)
        warm = np.zeros(4)
        if old is not None:
            warm = self.history_impulse[i, old].copy()
            warm[:3] -= (warm[:3] @ n) * n  # friction in the contact's tangent plane now
        self.new_history_impulse[i, slot] = warm
        material_i = self.model.body_material[self.model.particle_body[i]]
        records = self.records.setdefault(int(i), [])
        records[:] = [record for record in records if record[11] != slot]  # a weaker contact's slot taken
        records.append(
            [np.asarray(n, float), int(other), np.asarray(arm_i, float), float(depth), np.asarray(arm_j, float),
             float(share), float(self.params.friction[material_i, material_j]),
             float(self.params.restitution[material_i, material_j]), float(impact), warm[:3], float(warm[3]),
             int(slot), 0.0, np.asarray(arm_j, float)])  # [13]: c's arm at the detection ([4] may move)

    def _inverse_mass(self, b, arm, u):
        """Body b's inverse mass along u at arm (0 for a static side, b < 0; 60_solve.cl inverse_mass)."""
        if b < 0 or self.held[b]:
            return 0.0
        rot = self._rotation(b)
        c = np.cross(arm, u)
        return 1.0 / self.model.body_mass[b] + c @ (rot @ self.model.body_inv_inertia_local[b] @ rot.T @ c)

    def _record_impulse(self, record, b, velocity, omega, kind, rigid=False):
        """The record's normal impulse after a "solve" or "relax" pass from the bodies' velocities and
        angular velocities given (60_solve.cl solve_record_impulse): closing at most what leaves it at
        the slop after the substep, a deeper one pushed out (but not while relaxing), soft below the
        slop (Box2D's soft step) unless ``rigid``. Friction is the manifold's (_centre_friction)."""
        n, other, arm_i, depth, arm_j, share, _, _, _, _, normal, _, _, _ = record
        depth += self._depth_shift(record, b)
        pr = self.params
        slop = pr.solve_slop
        bias_rate, soft_mass_scale = (0.0, 1.0) if rigid else (pr.solve_bias_rate, pr.solve_mass_scale)
        v_j = velocity[other] + np.cross(omega[other], arm_j) if other >= 0 else arm_j
        vn = (velocity[b] + np.cross(omega[b], arm_i) - v_j) @ n
        allowed = (slop - depth) / pr.substep
        mass_scale, impulse_scale = 1.0, 0.0
        if kind != "relax" and allowed < 0.0 and soft_mass_scale < 1.0:
            allowed = -bias_rate * (depth - slop)
            mass_scale = soft_mass_scale
            impulse_scale = 1.0 - mass_scale
        allowed = max(allowed, 0.0) if kind == "relax" else max(allowed, -self.settings.solve_push_speed)
        k_n = self._inverse_mass(b, arm_i, n) + self._inverse_mass(other, arm_j, n)
        return max(normal + mass_scale * share * (vn - allowed) / k_n - impulse_scale * normal, 0.0)

    def _restitution_impulse(self, record, b, velocity, omega):
        """The record's normal impulse in a restitution pass (60_solve.cl restitution_impulse;
        Box2D's b2ApplyRestitution): a point that approached faster than IMPACT_SPEED at its
        detection and carried a normal impulse since is given the one that parts it at its
        restitution times that speed; any other point stops closing (as in a relax pass), so the
        bodies under a struck one hold while it rebounds. Rigid; the accumulated impulse >= 0."""
        n, other, arm_i, depth, arm_j, share, _, restitution, impact, _, normal, _, carried, _ = record
        v_j = velocity[other] + np.cross(omega[other], arm_j) if other >= 0 else arm_j
        vn = (velocity[b] + np.cross(omega[b], arm_i) - v_j) @ n
        if impact > IMPACT_SPEED and carried > 0.0 and restitution > 0.0:
            allowed = -restitution * impact
        else:
            depth += self._depth_shift(record, b)
            allowed = max((self.params.solve_slop - depth) / self.params.substep, 0.0)
        k_n = self._inverse_mass(b, arm_i, n) + self._inverse_mass(other, arm_j, n)
        return max(normal + share * (vn - allowed) / k_n, 0.0)

    def _depth_shift(self, record, b):
        """How much deeper the record of body b is at the substep's start than at its detection, from
        the two bodies' motion since (62_pair_solve.cl; 0 while detecting every substep)."""
        if self.settings.substeps_per_detection == 1:
            return 0.0
        n, other, arm_i = record[0], record[1], record[2]
        arm_j = record[13]

        def moved(body, arm):
            turn = quaternion_to_matrix(self.q_start[body]) @ quaternion_to_matrix(self.q_detect[body]).T
            return self.x_start[body] - self.x_detect[body] + turn @ arm - arm

        shift = moved(b, arm_i)
        if other >= 0:
            shift = shift - moved(other, arm_j)
        return float(shift @ n)

    def _change_momenta(self, b, impulse, moment, move, omega_before):
        """Body b's momenta changed by an impulse and its moment, and with ``move`` its pose, as if
        the substep had run with the new velocities (60_solve.cl change_body_momenta)."""
        if not (impulse.any() or moment.any()):
            return
        dt = self.params.substep
        self.P[b] += impulse
        self.L[b] += moment
        if move:
            self.x[b] += impulse / self.model.body_mass[b] * dt
            turn = 0.5 * dt * (self._omega(b) - omega_before)
            q = self.q[b] + quaternion_multiply(np.concatenate([[0.0], turn]), self.q[b])
            self.q[b] = q / np.linalg.norm(q)

    def _colour_solve_pairs(self):
        """The substep's body pairs and their colours (61_pair_colouring.cl; pair_colouring), and
        each pair's (particle, record) on its lower body in walk order (``self.pair_records``)."""
        m = self.model
        awake = ~self._is_asleep(self.quiet)
        self.quiet_listed = self.quiet.copy()  # 61_pair_colouring.cl body_quiet_snapshot
        # bodies taking an impact this substep: a record the solve gives restitution, on an awake
        # body, flags both its bodies (61_pair_colouring.cl list_solve_pairs)
        self.body_impact = np.zeros(m.body_count, dtype=bool)
        for i, records in self.records.items():
            if not awake[m.particle_body[i]]:
                continue
            for record in records:
                if record[8] > 0.5 * IMPACT_SPEED:
                    self.body_impact[m.particle_body[i]] = True
                    if record[1] >= 0:
                        self.body_impact[record[1]] = True
        own = []  # per body: its side of its pairs' records, (particle, record)
        for b in range(m.body_count):
            found = []
            if awake[b]:
                first = m.body_first_particle[b]
                for i in range(first, first + m.body_particle_count[b]):
                    # by friction key (61_pair_colouring.cl list_solve_pairs): the slots follow the
                    # search order, which the kernels do not share
                    for record in sorted(self.records.get(i, ()), key=lambda r, i=i: self.history_key[i, r[11]]):
                        # a sleeping partner's record is the awake side's, whichever is lower
                        # (61_pair_colouring.cl record_pair)
                        other = record[1]
                        if other < 0 or other > b or not awake[other]:
                            found.append((i, record))
            own.append(found)
        body_records = [[record[1] for _, record in found] for found in own]
        first = self.colour_rounds is None
        if not first and self._last_pairs_needed >= self.max_pairs:
            # a body filled its slots at the last detection: every body's grow
            self.max_pairs = grown_max_pairs(self.max_pairs, self.max_pairs + 1)
        pairs, needed = list_pairs(body_records, self.max_pairs)
        if first and needed > self.max_pairs:
            self.max_pairs = grown_max_pairs(self.max_pairs, needed)
            pairs, needed = list_pairs(body_records, self.max_pairs)
        self._last_pairs_needed = needed
        if first:
            coloured = colour_pairs(pairs, self.max_pairs, m.body_count)
            self.colour_rounds, self.colour_limit = max(coloured.rounds, 1), max(coloured.colour_count, 1)
            coloured.colour_limit = self.colour_limit
        else:
            coloured = colour_pairs(pairs, self.max_pairs, m.body_count, self.colour_rounds + SPARE_COLOUR_ROUNDS,
                                    self.colour_limit)
            self.colour_rounds = max(self.colour_rounds, coloured.rounds)
            self.colour_limit = max(self.colour_limit, coloured.colour_count)
        self.pair_records = [
            [(i, record) for i, record in own[b] if (record[1] == c if c >= 0 else record[1] < 0)]
            for b, c in zip(coloured.pair_body, coloured.pair_other)]
        for listed in self.pair_records:
            self._reduce_pair_records(listed)
        return coloured

    def _reduce_pair_records(self, listed):
        """A pair's (particle, record) list cut to its manifolds' points (core.manifold;
        61_pair_colouring.cl reduce_pair_records), in place: the points kept count fully (share 1),
        the others' impulses are dropped (not applied, nor warm-started at the next detection)."""
        if not listed:
            return
        records = [record for _, record in listed]
        kept = reduce_manifold(np.array([r[0] for r in records]), np.array([r[2] for r in records]),
                               np.array([r[3] + r[8] * self.params.speculative_time for r in records]), MANIFOLD_POINTS,
                               self.model.particle_radius)
        for t, (i, record) in enumerate(listed):
            if t in kept:
                record[5] = 1.0
            else:
                record[9], record[10] = np.zeros(3), 0.0
                self.new_history_impulse[i, record[11]] = 0.0
        listed[:] = [listed[t] for t in kept]

    def _solve_pairs(self, kind):
        """One pass of the solve (62_pair_solve.cl): colour after colour, each pair's manifold points
        on its lower body one after another at full mass from the two bodies' velocities now, their
        sum applied to both bodies at once. kind: "warm", the impulses the points start with;
        "solve"; "relax", without the push-out, then friction at each manifold's centre;
        "restitution" (_restitution_impulse)."""
        m = self.model
        pairs = self.pairs
        self.held = self._is_asleep(self.quiet)
        # the colours one after another, then the overflow's pairs one after another
        for indices in [pairs.of_colour(colour) for colour in range(pairs.solved_colours)] + [pairs.overflow()]:
            for index in indices:
                b, c = int(pairs.pair_body[index]), int(pairs.pair_other[index])
                if self.held[b] and (c < 0 or self.held[c]):
                    continue  # two sleepers (62_pair_solve.cl)
                bodies = (b, c) if c >= 0 else (b,)
                rigid = self.body_impact[b] or (c >= 0 and self.body_impact[c])  # 62_pair_solve.cl
                if kind == "restitution" and not rigid:
                    continue  # no impact on either body: nothing to part
                # one point after another at full mass, each seeing the last one's impulse
                velocity = {body: np.zeros(3) if self.held[body] else self.P[body] / m.body_mass[body]
                            for body in bodies}
                omega = {body: np.zeros(3) if self.held[body] else self._omega(body) for body in bodies}
                omega_start = dict(omega)
                impulse, moment_b, moment_c = np.zeros(3), np.zeros(3), np.zeros(3)
                listed = self.pair_records[index]
                # c takes each impulse at the point b's arm reaches, not at c's arm from the
                # detection (62_pair_solve.cl SolveBody.arms_now): one world point, so the pair
                # keeps its angular momentum; the passes that move the bodies at the point as the
                # substep started (detecting every substep: the detection's, where the arms meet)
                moving = kind in ("warm", "solve")
                arms_now = c >= 0 and (not moving or self.settings.substeps_per_detection > 1)
                if arms_now:
                    positions = self.x_start if moving else self.x
                    for _, record in listed:
                        # (the depth's shift still follows c's arm from the detection, record[13])
                        record[4] = record[2] + positions[b] - positions[c]
                # in sequence: every other substep last to first (62_pair_solve.cl SOLVE_PASS_BACKWARD),
                # so the first point's larger share of a pass alternates across the manifold instead
                # of tilting every stacked pair the same way (a 40-cube column crept 10 cm in 3 s)
                backward = kind != "warm" and self.substeps_done % 2 == 1
                for i, record in (listed[::-1] if backward else listed):
                    n, arm_i, arm_j = record[0], record[2], record[4]
                    tangential, normal, slot = record[9], record[10], record[11]
                    if kind == "warm":
                        j = -normal * n + tangential
                    else:
                        if kind == "restitution":
                            new_tangential = tangential
                            new_normal = self._restitution_impulse(record, b, velocity, omega)
                        else:
                            new_tangential = tangential
                            new_normal = self._record_impulse(record, b, velocity, omega, kind, rigid)
                        j = -(new_normal - normal) * n + (new_tangential - tangential)
                        record[9], record[10] = new_tangential, new_normal
                        record[12] = max(record[12], new_normal)  # the most it carried since its detection
                        self.new_history_impulse[i, slot] = [*new_tangential, new_normal]
                    impulse += j
                    moment_b += np.cross(arm_i, j)
                    moment_c -= np.cross(arm_j, j)
                    if kind != "warm":
                        self._move_pair(b, c, arm_i, arm_j, j, velocity, omega)
                # Box2D's order: the normals in every pass, friction after them when relaxing
                if kind == "relax":
                    j_sum, moment_b_sum, moment_c_sum = self._centre_friction(b, c, self.pair_records[index],
                                                                              velocity, omega)
                    impulse += j_sum
                    moment_b += moment_b_sum
                    moment_c += moment_c_sum
                if arms_now:
                    for _, record in listed:
                        record[4] = record[13]
                move = kind in ("warm", "solve")  # relax and restitution: velocities only
                for body, j, moment in ((b, impulse, moment_b), (c, -impulse, moment_c)):
                    # a held sleeper takes nothing (62_pair_solve.cl): it is at most a resting support
                    if body >= 0 and not self.held[body]:
                        self._change_momenta(body, j, moment, move, omega_start[body])

    def _move_pair(self, b, c, arm_i, arm_j, j, velocity, omega):
        """The pair's velocities after impulse j on b at arm_i (and -j on c at arm_j)."""
        m = self.model
        if not self.held[b]:
            velocity[b] = velocity[b] + j / m.body_mass[b]
        omega[b] = omega[b] + self._inverse_inertia(b) @ np.cross(arm_i, j)
        if c >= 0:
            if not self.held[c]:
                velocity[c] = velocity[c] - j / m.body_mass[c]
            omega[c] = omega[c] - self._inverse_inertia(c) @ np.cross(arm_j, j)

    def _centre_friction(self, b, c, listed, velocity, omega):
        """Box3D's friction of each manifold of a pair (a group of normals, core.manifold) at its
        centre and its twist about the normal, solved from the velocities now (62_pair_solve.cl
        centre_friction). Kept as the points' tangential impulses: an equal share of the centre's
        plus the twist spread over the points as tau (n x d) / sum |d|^2 (d: a point's offset from
        the centre in the plane), which sum to the centre's impulse and have the twist as moment.
        Returns the impulse on b and its moments about b's and c's centres."""
        normals = [record[0] for _, record in listed]
        leaders = manifold_groups(normals)
        total, moment_b, moment_c = np.zeros(3), np.zeros(3), np.zeros(3)
        for g, leader in enumerate(leaders):
            n = normals[leader]
            members = [(i, record) for t, (i, record) in enumerate(listed) if manifold_group(normals[t], normals, leaders) == g]
            centre_b = np.mean([record[2] for _, record in members], axis=0)
            centre_c = np.mean([record[4] for _, record in members], axis=0)
            offsets = [record[2] - centre_b for _, record in members]
            offsets = [d - (d @ n) * n for d in offsets]
            load = sum(record[10] for _, record in members)
            mu = members[0][1][6]
            held = sum((record[9] for _, record in members), np.zeros(3))
            twist = sum(n @ np.cross(d, record[9]) for d, (_, record) in zip(offsets, members))
            spread = sum(d @ d for d in offsets)
            twist_limit = mu * sum(np.linalg.norm(d) * record[10] for d, (_, record) in zip(offsets, members))
            v_c = velocity[c] + np.cross(omega[c], centre_c) if c >= 0 else centre_c
            v_rel = velocity[b] + np.cross(omega[b], centre_b) - v_c
            v_t = v_rel - (v_rel @ n) * n
            slip = np.linalg.norm(v_t)
            if slip > 1e-9:
                t = v_t / slip
                k_t = (self._inverse_mass(b, centre_b, t)
                       + self._inverse_mass(c, centre_c, t))
                held = held - v_t / k_t
            size = np.linalg.norm(held)
            if size > mu * load:
                held = held * (mu * load / size) if size > 0 else held * 0.0
            if spread > 0.0:
                k_w = n @ self._inverse_inertia(b) @ n + (n @ self._inverse_inertia(c) @ n if c >= 0 else 0.0)
                w_rel = n @ (omega[b] - omega[c]) if c >= 0 else n @ omega[b]
                twist = min(max(twist - w_rel / k_w, -twist_limit), twist_limit)
            for d, (i, record) in zip(offsets, members):
                tangential = held / len(members) + (twist / spread * np.cross(n, d) if spread > 0.0 else 0.0)
                j = tangential - record[9]
                record[9] = tangential
                self.new_history_impulse[i, record[11]] = [*tangential, record[10]]
                total += j
                moment_b += np.cross(record[2], j)
                moment_c -= np.cross(record[4], j)
                self._move_pair(b, c, record[2], record[4], j, velocity, omega)
        return total, moment_b, moment_c

    def _integrate(self, force, torque, offset_world):
        m = self.model
        pr = self.params
        dt = pr.substep
        materials = pr.materials
        for b in range(m.body_count):
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
            self.P[b] += total_force * dt
            self.L[b] += total_torque * dt
            lin_damp, ang_damp = materials[m.body_material[b], 2:4]
            if lin_damp > 0:
                self.P[b] *= (1 - lin_damp) ** dt
            if ang_damp > 0:
                self.L[b] *= (1 - ang_damp) ** dt
            if pr.terminal_speed > 0:
                speed = np.linalg.norm(self.P[b]) / m.body_mass[b]
                if speed > pr.terminal_speed:
                    self.P[b] *= pr.terminal_speed / speed
            self.x[b] += self.P[b] / m.body_mass[b] * dt
            self.q[b] = self._rotation_step(b, dt)
            if self.solving:
                continue
            still = self.sleep[0] > 0 and not accelerated and self._fastest_point_speed(b) < self.sleep[0]
            self.quiet[b] = self.quiet[b] + dt if still else 0.0
            if self._is_asleep(self.quiet[b]):
                self._stop(b)  # falls asleep now

    def _fastest_point_speed(self, b):
        """An upper bound on how fast any point of body b moves: what sleeping compares with
        sleep_speed (50_bodies.cl)."""
        return np.linalg.norm(self.P[b]) / self.model.body_mass[b] + np.linalg.norm(self._omega(b)) * self.extent[b]

    def _rotation_step(self, b, dt):
        """Body b's orientation after a torque-free substep with its angular momentum L: implicit
        midpoint on the body-frame momentum Pi = R^T L (Pi_m = Pi - dt/2 w_m x Pi_m, w_m = I^-1 Pi_m,
        ROTATION_SWEEPS fixed-point sweeps) and the Cayley rotation by dt w_m, applied in the body
        frame. The new body-frame momentum is then the midpoint rule's: |L| and the kinetic energy
        are kept up to the sweeps' residual and the step is time-reversible (rotation_step in the
        kernels)."""
        inv_inertia = self.model.body_inv_inertia_local[b]
        momentum = self._rotation(b).T @ self.L[b]
        midpoint = momentum
        for _ in range(ROTATION_SWEEPS):
            midpoint = momentum - 0.5 * dt * np.cross(inv_inertia @ midpoint, midpoint)
        half_turn = 0.5 * dt * inv_inertia @ midpoint
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
        return not self.colliders.moving

    def _stop(self, b):
        self.P[b] = 0.0
        self.L[b] = 0.0
