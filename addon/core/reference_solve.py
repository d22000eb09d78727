"""The reference engine's velocity solve (Rigid Voxels: kernels/60_solve.cl, 61_pair_colouring.cl,
62_pair_solve.cl): the records, the body pairs and their colours, the passes, each manifold's
friction at its centre."""
from __future__ import annotations

import numpy as np

from .manifold import MANIFOLD_POINTS, manifold_group, manifold_groups, reduce_manifold
from .pair_colouring import SPARE_COLOUR_ROUNDS, colour_pairs, grown_max_pairs, list_pairs
from .rotations import quaternion_multiply, quaternion_to_matrix, vector_cross
from .settings import IMPACT_SPEED, SUPPORT_COSINE, SUPPORT_MASS_RATIO


class ReferenceSolve:
    """ReferenceEngine's velocity solve (a mixin: needs its model, parameters and state)."""

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
        c = vector_cross(arm, u)
        inverse = 1.0 / self.model.body_mass[b] + c @ (rot @ self.model.body_inv_inertia_local[b] @ rot.T @ c)
        return self._support_scale(b) * inverse

    def _support_scale(self, b):
        """The scale of body b's inverse mass and inertia in the pair's passes now (_support_scales)."""
        return self.support_scale.get(b, 1.0)

    def _support_scales(self, b, c, listed, rigid):
        """The scales of bodies b's and c's inverse mass and inertia in their pair's passes
        (60_solve.cl support_scales): a resting pair whose upper body (its first record's normal,
        b -> c, within SUPPORT_COSINE of straight up) is more than SUPPORT_MASS_RATIO times as heavy
        as the lower one is solved as if it were that many times; none under an impact, against a
        held body or without gravity."""
        up = self.params.support_up
        if up is None or c < 0 or rigid or self.held[b] or self.held[c] or not listed:
            return {}
        mass_b, mass_c = float(self.model.body_mass[b]), float(self.model.body_mass[c])
        if not (mass_b > SUPPORT_MASS_RATIO * mass_c or mass_c > SUPPORT_MASS_RATIO * mass_b):
            return {}
        along = float(np.asarray(listed[0][1][0]) @ np.asarray(up))
        if along > SUPPORT_COSINE and mass_c > SUPPORT_MASS_RATIO * mass_b:
            return {b: SUPPORT_MASS_RATIO * mass_b / mass_c}
        if along < -SUPPORT_COSINE and mass_b > SUPPORT_MASS_RATIO * mass_c:
            return {c: SUPPORT_MASS_RATIO * mass_c / mass_b}
        return {}

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
        v_j = velocity[other] + vector_cross(omega[other], arm_j) if other >= 0 else arm_j
        vn = (velocity[b] + vector_cross(omega[b], arm_i) - v_j) @ n
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
        v_j = velocity[other] + vector_cross(omega[other], arm_j) if other >= 0 else arm_j
        vn = (velocity[b] + vector_cross(omega[b], arm_i) - v_j) @ n
        if impact > IMPACT_SPEED and carried > 0.0 and restitution > 0.0:
            allowed = -restitution * impact
        else:
            depth += self._depth_shift(record, b)
            allowed = max((self.params.solve_slop - depth) / self.params.substep, 0.0)
        k_n = self._inverse_mass(b, arm_i, n) + self._inverse_mass(other, arm_j, n)
        return max(normal + share * (vn - allowed) / k_n, 0.0)

    def _depth_shift(self, record, b):
        """How much deeper the record of body b is at the substep's start than at its detection, from
        the two bodies' motion since (60_solve.cl load_pair_point; 0 while detecting every substep)."""
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
        substep = self.params.substep
        self.P[b] += impulse
        self.L[b] += moment
        if move:
            self.x[b] += impulse / self.model.body_mass[b] * substep
            turn = 0.5 * substep * (self._omega(b) - omega_before)
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
        # sleepers and kinematic bodies: inverse mass 0, taking no impulse; a sleeper still, a kinematic
        # body at its path's velocity
        asleep = self._is_asleep(self.quiet)
        self.held = asleep | self.kinematic
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
                velocity = {body: np.zeros(3) if asleep[body] else self.P[body] / m.body_mass[body]
                            for body in bodies}
                omega = {body: np.zeros(3) if asleep[body] else self._omega(body) for body in bodies}
                omega_start = dict(omega)
                impulse, moment_b, moment_c = np.zeros(3), np.zeros(3), np.zeros(3)
                listed = self.pair_records[index]
                # a heavy body resting on a light one: the light one weighs more in the pair's passes
                self.support_scale = self._support_scales(b, c, listed, rigid)
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
                    moment_b += vector_cross(arm_i, j)
                    moment_c -= vector_cross(arm_j, j)
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
                        scale = self._support_scale(body)
                        self._change_momenta(body, scale * j, scale * moment, move, omega_start[body])
                self.support_scale = {}

    def _move_pair(self, b, c, arm_i, arm_j, j, velocity, omega):
        """The pair's velocities after impulse j on b at arm_i (and -j on c at arm_j)."""
        m = self.model
        scale_b, scale_c = self._support_scale(b), self._support_scale(c)
        if not self.held[b]:
            velocity[b] = velocity[b] + scale_b * j / m.body_mass[b]
        omega[b] = omega[b] + scale_b * self._inverse_inertia(b) @ vector_cross(arm_i, j)
        if c >= 0:
            if not self.held[c]:
                velocity[c] = velocity[c] - scale_c * j / m.body_mass[c]
            omega[c] = omega[c] - scale_c * self._inverse_inertia(c) @ vector_cross(arm_j, j)

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
            twist = sum(n @ vector_cross(d, record[9]) for d, (_, record) in zip(offsets, members))
            spread = sum(d @ d for d in offsets)
            twist_limit = mu * sum(np.linalg.norm(d) * record[10] for d, (_, record) in zip(offsets, members))
            v_c = velocity[c] + vector_cross(omega[c], centre_c) if c >= 0 else centre_c
            v_rel = velocity[b] + vector_cross(omega[b], centre_b) - v_c
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
                k_w = (self._support_scale(b) * n @ self._inverse_inertia(b) @ n
                       + (self._support_scale(c) * n @ self._inverse_inertia(c) @ n if c >= 0 else 0.0))
                w_rel = n @ (omega[b] - omega[c]) if c >= 0 else n @ omega[b]
                twist = min(max(twist - w_rel / k_w, -twist_limit), twist_limit)
            for d, (i, record) in zip(offsets, members):
                tangential = held / len(members) + (twist / spread * vector_cross(n, d) if spread > 0.0 else 0.0)
                j = tangential - record[9]
                record[9] = tangential
                self.new_history_impulse[i, record[11]] = [*tangential, record[10]]
                total += j
                moment_b += vector_cross(record[2], j)
                moment_c -= vector_cross(record[4], j)
                self._move_pair(b, c, record[2], record[4], j, velocity, omega)
        return total, moment_b, moment_c
