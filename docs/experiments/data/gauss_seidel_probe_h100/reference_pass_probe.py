# The reference pass probe of E14 (docs/experiments/contact-solve.md): python reference_pass_probe.py '{"scene": "offset", "mode": "gs", "wsf": 1.0}'
# (scene "offset" or "columnN"; mode "jacobi", "gs" or "pair"; wsf the warm-start fraction)
"""Probe: the reference's solve as sequential Gauss-Seidel (no mass splitting, each body pair's
contact once, applied to both bodies at once), rigid as E13, with a chosen warm-start fraction."""
import sys, time, json, numpy as np
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[4]))  # the repository
import addon.core.reference as ref
from addon.core import Material, ModelBuilder, SimulationSettings
from tests.core.helpers import CUBE_SIDE, RADIUS, add_cube
from addon.core.settings import IMPACT_SPEED
qm = ref.quaternion_multiply

def gs_solve(self, kind):
    m = self.model; dt = self.params.substep
    slop = self.settings.solve_slop * m.particle_radius; push = self.settings.solve_push_speed
    awake = ~self._is_asleep(self.quiet)
    ones = np.where(awake, 1.0, 0.0)
    def vel(b): return self.P[b] / m.body_mass[b]
    def apply(b, j, arm):
        if not awake[b]: return
        w0 = self._omega(b)
        self.P[b] += j; self.L[b] += np.cross(arm, j)
        if kind != "relax":
            self.x[b] += j / m.body_mass[b] * dt
            turn = 0.5 * dt * (self._omega(b) - w0)
            q = self.q[b] + qm(np.concatenate([[0.0], turn]), self.q[b]); self.q[b] = q / np.linalg.norm(q)
    for i, records in self.records.items():
        b = m.particle_body[i]
        if not awake[b]: continue
        for record in records:
            n, other, arm_i, depth, arm_j, share, mu, e, impact, tangential, normal, slot = record
            if other >= 0 and (not awake[other] or other < b): continue
            if kind == "warm":
                j = -normal * n + tangential
                apply(b, j, arm_i)
                if other >= 0: apply(other, -j, arm_j)
                continue
            v_j = vel(other) + np.cross(self._omega(other), arm_j) if other >= 0 else arm_j
            v_rel = vel(b) + np.cross(self._omega(b), arm_i) - v_j
            vn = v_rel @ n
            allowed = (slop - depth) / dt
            allowed = max(allowed, 0.0) if kind == "relax" else max(allowed, -push)
            bounce = min(max(2.0 * impact / IMPACT_SPEED - 1.0, 0.0), 1.0)
            if bounce > 0: allowed = min(allowed, -bounce * e * impact)
            k_n = self._split_inverse_mass(b, ones, arm_i, n) + (self._split_inverse_mass(other, ones, arm_j, n) if other >= 0 else 0)
            new_normal = max(normal + share * (vn - allowed) / k_n, 0.0)
            new_t = tangential.copy(); v_t = v_rel - vn * n; slip = np.linalg.norm(v_t)
            if slip > 1e-9:
                t = v_t / slip
                k_t = self._split_inverse_mass(b, ones, arm_i, t) + (self._split_inverse_mass(other, ones, arm_j, t) if other >= 0 else 0)
                new_t -= share * v_t / k_t
            held = np.linalg.norm(new_t)
            if held > mu * new_normal: new_t *= mu * new_normal / held if held > 0 else 0.0
            j = -(new_normal - normal) * n + (new_t - tangential)
            record[9], record[10] = new_t, new_normal
            self.new_history_impulse[i, slot] = [*new_t, new_normal]
            apply(b, j, arm_i)
            if other >= 0: apply(other, -j, arm_j)

# appended into gs_probe: per-pair block Jacobi (GS within a body pair, mass split by pair count)
def pair_solve(self, kind):
    m = self.model; dt = self.params.substep
    slop = self.settings.solve_slop * m.particle_radius; push = self.settings.solve_push_speed
    awake = ~self._is_asleep(self.quiet)
    pairs = {}
    for i, records in self.records.items():
        b = m.particle_body[i]
        if not awake[b]: continue
        for record in records:
            other = record[1]
            if other >= 0 and (not awake[other] or other < b): continue
            pairs.setdefault((b, other), []).append((i, record))
    count = np.zeros(m.body_count)
    for (b, c) in pairs:
        count[b] += 1
        if c >= 0: count[c] += 1
    count = np.where(awake, np.maximum(count, 1e-6), 0.0)
    V = np.where(awake[:, None], self.P / m.body_mass[:, None], 0.0)
    W = np.array([self._omega(b) if awake[b] else np.zeros(3) for b in range(m.body_count)]).reshape(-1, 3)
    imp = np.zeros((m.body_count, 3)); mom = np.zeros((m.body_count, 3))
    for (b, c), recs in pairs.items():
        # the pair's local copies of its bodies' velocities, moved by its own impulses at the split masses
        vb, wb = V[b].copy(), W[b].copy()
        vc, wc = (V[c].copy(), W[c].copy()) if c >= 0 else (None, None)
        rot_b = self._rotation(b); Ib = rot_b @ m.body_inv_inertia_local[b] @ rot_b.T
        if c >= 0:
            rot_c = self._rotation(c); Ic = rot_c @ m.body_inv_inertia_local[c] @ rot_c.T
        for i, record in recs:
            n, other, arm_i, depth, arm_j, share, mu, e, impact, tangential, normal, slot = record
            if kind == "warm":
                j = -normal * n + tangential
            else:
                v_j = vc + np.cross(wc, arm_j) if c >= 0 else arm_j
                v_rel = vb + np.cross(wb, arm_i) - v_j
                vn = v_rel @ n
                allowed = (slop - depth) / dt
                allowed = max(allowed, 0.0) if kind == "relax" else max(allowed, -push)
                bounce = min(max(2.0 * impact / IMPACT_SPEED - 1.0, 0.0), 1.0)
                if bounce > 0: allowed = min(allowed, -bounce * e * impact)
                k_n = self._split_inverse_mass(b, count, arm_i, n) + (self._split_inverse_mass(c, count, arm_j, n) if c >= 0 else 0)
                new_normal = max(normal + share * (vn - allowed) / k_n, 0.0)
                new_t = tangential.copy(); v_t = v_rel - vn * n; slip = np.linalg.norm(v_t)
                if slip > 1e-9:
                    t = v_t / slip
                    k_t = self._split_inverse_mass(b, count, arm_i, t) + (self._split_inverse_mass(c, count, arm_j, t) if c >= 0 else 0)
                    new_t -= share * v_t / k_t
                held = np.linalg.norm(new_t)
                if held > mu * new_normal: new_t *= mu * new_normal / held if held > 0 else 0.0
                j = -(new_normal - normal) * n + (new_t - tangential)
                record[9], record[10] = new_t, new_normal
                self.new_history_impulse[i, slot] = [*new_t, new_normal]
            # local update at the split mass (what the pair sees of its bodies while it iterates)
            vb = vb + count[b] * j / m.body_mass[b]; wb = wb + count[b] * (Ib @ np.cross(arm_i, j))
            if c >= 0:
                vc = vc - count[c] * j / m.body_mass[c]; wc = wc - count[c] * (Ic @ np.cross(arm_j, j))
            imp[b] += j; mom[b] += np.cross(arm_i, j)
            if c >= 0: imp[c] -= j; mom[c] -= np.cross(arm_j, j)
    for b in np.flatnonzero(awake):
        if not (imp[b].any() or mom[b].any()): continue
        w0 = self._omega(b)
        self.P[b] += imp[b]; self.L[b] += mom[b]
        if kind != "relax":
            self.x[b] += imp[b] / m.body_mass[b] * dt
            turn = 0.5 * dt * (self._omega(b) - w0)
            q = self.q[b] + qm(np.concatenate([[0.0], turn]), self.q[b]); self.q[b] = q / np.linalg.norm(q)

cfg = json.loads(sys.argv[1])
scene = cfg.pop("scene"); wsf = cfg.pop("wsf", 1.0); mode = cfg.pop("mode", "gs"); seconds = cfg.pop("seconds", 3.0)
ref.WARM_START_FRACTION = wsf
if mode == "gs": ref.ReferenceEngine._solve = gs_solve
if mode == "pair": ref.ReferenceEngine._solve = pair_solve
builder = ModelBuilder(RADIUS)
if scene == "offset":
    mat = Material(friction=0.5, restitution=0.0)
    add_cube(builder, (0.0, 0.0, CUBE_SIDE / 2 + 0.01), material=mat)
    add_cube(builder, (RADIUS, RADIUS, 1.45 * CUBE_SIDE), material=mat)
    builder.add_ground_plane(0.0, material=mat)
else:
    N = int(scene[6:])
    for k in range(N): add_cube(builder, (0.0, 0.0, 0.5 + k))
    builder.add_ground_plane(0.0)
s = dict(contact_geometry="voxels", target_penetration=0.05, solve_passes=16, sleep_speed=0.0); s.update(cfg)
e = ref.ReferenceEngine(builder.finalize(), SimulationSettings(**s))
steps = int(round(seconds / e.params.substep)); t0 = time.time()
e.step(steps)
sp = []
for _ in range(20):
    e.step(1); st = e.body_state()
    sp.append(max(np.linalg.norm(st.velocity, axis=1).max(), np.linalg.norm(st.angular_velocity, axis=1).max()))
st = e.body_state()
extra = ""
if scene != "offset":
    N = len(st.position); extra = f"column lost {(N - 0.5 - st.position[-1,2]) / N * 100:.3f}% drift {np.linalg.norm(st.position[-1,:2])*100:.3f}cm"
else:
    extra = f"gap {(st.position[1,2]-st.position[0,2]-1)*1e3:.2f}mm"
print(scene, mode, wsf, cfg, f"max speed last 20 substeps {max(sp)*1e3:.3f} mm/s", extra, f"({time.time()-t0:.0f}s)", flush=True)
