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

The stages are mixins, a module each, as the kernels are a file each: the contacts
(reference_contacts.py), the velocity solve (reference_solve.py), the bodies' integration and
sleeping (reference_bodies.py), the joints between bodies (reference_joints.py, solved before the
contacts in each pass); this module holds the state and the substep's order.
"""
from __future__ import annotations

import numpy as np

from .colliders import ColliderMotion
from .impacts import impact_times, interpolated_pose
from .kinematic import kinematic_step
from .model import STATIC_BODY, Model, body_extents
from .pair_colouring import INITIAL_MAX_PAIRS
from .reference_bodies import ReferenceBodies
from .reference_contacts import EMPTY_SLOT, ReferenceContacts
from .reference_joints import ReferenceJoints
from .reference_solve import ReferenceSolve
from .rotations import quaternion_to_matrix
from .settings import (FRICTION_SLOTS, MANIFOLD_RESTITUTION_PASSES, SimulationSettings, SolverParameters,
                       solver_parameters)
from .state import BodyState, StateMixin
from .voxel_pairs import exposed_faces


class ReferenceEngine(ReferenceJoints, ReferenceContacts, ReferenceSolve, ReferenceBodies, StateMixin):
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
        # kinematic bodies (core.kinematic): moved by their paths, held like static sides by the solve
        self.kinematic = np.zeros(m.body_count, dtype=bool)
        self.kinematic_omega = np.zeros((m.body_count, 3))
        # nothing sleeps while colliders or kinematic bodies move (a moving one would not wake a sleeper)
        self.sleep = self.params.sleep_argument(self.colliders.moving or m.has_kinematic_bodies)
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
        self._init_joints()  # constraints between bodies (reference_joints)
        # the pair being solved: its bodies' inverse mass scales (reference_solve.py _support_scales)
        self.support_scale = {}

    def set_collider_frame(self, frame: int, frame_duration: float):
        """Animated colliders: move them from output frame ``frame`` towards the next one."""
        self.colliders.set_frame(frame, frame_duration)

    # -- body kinematics -------------------------------------------------------------------

    def set_body_frame(self, frame: int, frame_duration: float):
        """Kinematic bodies (core.kinematic): those moved in the step from output frame ``frame`` to the
        next start it at their path's pose, moving at its velocity and spin; those it no longer moves
        are released with the velocity and spin of their last moved step."""
        step = kinematic_step(self.model.kinematic, self.kinematic, frame, frame_duration)
        if step is None:
            return
        m = self.model
        for b in step.released:
            velocity, omega = self.P[b] / m.body_mass[b], self.kinematic_omega[b].copy()
            self.kinematic[b] = False
            # momenta at the half substep, as for an initial velocity (__init__)
            self.P[b] = (velocity - 0.5 * self.params.gravity * self.params.substep) * m.body_mass[b]
            rot = self._rotation(b)
            self.L[b] = rot @ m.body_inertia_local[b] @ rot.T @ omega
        for k, b in enumerate(step.moved):
            self.kinematic[b] = True
            self.x[b], self.q[b] = step.position[k], step.orientation[k]
            self.P[b] = step.velocity[k] * m.body_mass[b]
            self.kinematic_omega[b] = step.angular_velocity[k]
            rot = self._rotation(b)
            self.L[b] = rot @ m.body_inertia_local[b] @ rot.T @ step.angular_velocity[k]
    def _rotation(self, b):
        return quaternion_to_matrix(self.q[b])

    def _inverse_inertia(self, b):
        """Body b's world inverse inertia as the solve sees it (zero while held, self.held)."""
        if self.held[b]:
            return np.zeros((3, 3))
        rot = self._rotation(b)
        return rot @ self.model.body_inv_inertia_local[b] @ rot.T

    def _omega(self, b):
        if self.kinematic[b]:
            return self.kinematic_omega[b]
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

    def step(self, count: int = 1):
        for _ in range(count):
            self._step()

    def _step(self):
        m = self.model
        pr = self.params
        substep = pr.substep
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
        self.colliders.tau += substep
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
                self._solve_joints(kind)  # joints before contacts in every pass (Box2D's order)
                self._solve_pairs(kind)
            self._break_joints()
            if detecting and self.sleep[0] > 0:
                self._sleep_islands()
            self._stop_at_impacts()
        # what this detection touched, read by the first substep after the next detection (the
        # kernels' double buffer swaps once per detection; later substeps read it cleared)
        self.touched = self.touched_next if last_of_step else np.zeros(m.body_count, dtype=bool)
        self.history_impulse = self.new_history_impulse
        self.time += substep
        self.substeps_done += 1

    def _stop_at_impacts(self):
        """Fast bodies swept over the substep and put back at their time of impact (70_impacts.cl;
        core.impacts)."""
        times = impact_times(self.model, self.impact_x, self.impact_q, self.x, self.q, self.extent,
                             self.colliders.vertices_now(), self.settings.substeps_per_detection)
        for b in np.flatnonzero((times < 1.0) & ~self.kinematic):  # a kinematic body keeps to its path
            self.x[b], self.q[b] = interpolated_pose(self.impact_x[b], self.impact_q[b], self.x[b], self.q[b],
                                                     times[b])
        self.impact_x, self.impact_q = self.x.copy(), self.q.copy()
