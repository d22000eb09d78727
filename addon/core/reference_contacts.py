"""The reference engine's contacts (kernels/40_contacts.cl compute_contacts and the pair
geometries 32_sphere_pairs.cl, 34_voxel_pairs.cl, colliders 30_colliders.cl; the contact law and
friction slots 00_common.h): per particle, springs or the solve's records."""
from __future__ import annotations

import numpy as np

from .colliders import DUPLICATE_POINT_TOLERANCE, FACE_REGION, closest_point_on_triangle
from .model import STATIC_BODY
from .rotations import quaternion_to_matrix, rotate_by_vector, vector_cross
from .settings import (COLLIDER_SPECULATIVE_REACH, DAMPING_LIMIT, FRICTION_SLOTS, ROLLING_REGULARIZATION,
                       SPECULATIVE_REACH, TURNING_ANCHOR, WAKE_PASSES)
from .voxel_corners import FACE_LIKE_COSINE, voxel_support
from .voxel_pairs import PUSH_OUT_SPEED, is_voxel_pair, voxel_pair

EMPTY_SLOT = -1  # a friction history's unused slot (00_common.h)


def plane_key(plane_index: int) -> int:
    """Friction-history key of a plane contact (particle contacts use the partner's index)."""
    return -2 - plane_index


class ReferenceContacts:
    """ReferenceEngine's contact detection (a mixin: needs its model, parameters and state)."""

    def _contact_mass(self, body):
        """(flat-face share, share of the previous substep's contacts) of ``body``'s mass, for
        damping (None: static, infinite)."""
        if body == STATIC_BODY:
            return None
        return self.model.body_effective_mass[body], self.contact_share[body]

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
        vc_i = vel_i + vector_cross(omega_i, arm)
        vc_j = vel_j + vector_cross(omega_j, -arm)
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
        return force, vector_cross(arm, force) + couple, slot  # the normal force's couple is zero for arm || n

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
        centre_i, centre_j = (state.velocity[body] + vector_cross(state.angular_velocity[body], pos[p] - self.x[body])
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
        point_velocity_j = state.velocity[bj] + vector_cross(omega_j, point - self.x[bj])
        # contact_law takes j's side as a centre moving with -arm; the point is j's at point - pos[j]
        vel_j = point_velocity_j + vector_cross(omega_j, arm)
        # push-out (34_voxel_pairs.cl voxel_pair_contact): how deep the pair's spring may push grows from
        # the birth depth by the closing speed plus PUSH_OUT_SPEED per second (not while parting faster)
        slot = self._history_slot(slots_in[0], j)
        permitted = self.params.push_out_birth_depth if slot is None else permitted_in[slot]
        closing = (vel[i] + vector_cross(omega_i, arm) - point_velocity_j) @ n
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
                             (vel[i] + vector_cross(omega_i, 0.5 * dist * n) - vel[j]) @ n)
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
                    (vel[i] + vector_cross(omega_i, arm)) @ -m.plane_normal[g]):
                f, t, slot = self._contact(i, plane_key(g), -m.plane_normal[g], arm, depth - height, vel[i],
                                           omega_i, zero, zero, m.plane_material[g], None, slots_in, slots_out)
                if slot is not None:
                    self._record(i, slot, slots_in, plane_key(g), -m.plane_normal[g], STATIC_BODY,
                                 offset_world[i] + arm, depth - height, zero, 1.0, m.plane_material[g],
                                 (vel[i] + vector_cross(omega_i, arm)) @ -m.plane_normal[g])
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
                    normal = vector_cross(vertices[tri[1]] - vertices[tri[0]], vertices[tri[2]] - vertices[tri[0]])
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
                        (vel_i + vector_cross(omega_i, arm) - v_tri) @ n):
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
                                 (vel_i + vector_cross(omega_i, arm) - v_tri) @ n)
                force[i] += f
                torque[i] += tq
