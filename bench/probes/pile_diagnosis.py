"""Why does the cube pile keep flowing? Per-contact and per-body read-back from the OpenCL engine.

Runs bench/scenes.py cube_pile(N) (mu 0.5, restitution 0.2, ground) to --start seconds, then steps
one substep at a time for --window seconds and, from the friction history the contact kernel wrote
(keys and springs), the particle positions it used and the body velocities it read, recomputes
every particle contact's law (00_common.h contact_law) and classifies:

  contacts  - at the Coulomb cap (|f_t| >= 0.99 mu f_n): sliding; below it: sticking
            - new this substep (its key was not in the particle's history of the previous substep),
              and of those the "handovers": new particle pairs of body pairs that were already in
              contact in the previous substep (they start with a zero friction spring)
            - friction slots full (a particle with FRICTION_SLOTS contacts: more would be dropped)
  bodies    - moving (speed >= 0.1 m/s or spin >= 0.2 rad/s, bench/contact_figures.py's "at rest"):
              sliding (contact-point slip >= half the body's speed), rolling/tumbling (spin x half
              side >= half the speed and slip < half the speed), "other" (touching, neither: moves
              with its neighbours), airborne (no contact this substep); and how many lost a body
              pair since the previous substep (bouncing)

    PYTHONPATH=. .venv/bin/python bench/probes/pile_diagnosis.py --cubes 1000 --start 4 --window 0.5 \
        --out OUT.json [--setting name=value ...]

Other modes (each writes its own JSON):
  --freeze-at T [--after-freeze pair_friction=V|pair_rolling=V|gravity=V|tangential_stiffness_factor=V]
      stop every body dead at T (poses and springs kept), optionally change a contact parameter on
      the device, and follow the pile's figures and kinetic energy for --freeze-after seconds: does
      the shape hold once the crash's momentum is gone, and which parameter makes it hold?
  --freeze-at T --relax S [--relax-keep K]: before letting go, relax the stopped pile for S seconds
      with every body's velocities times K after every substep (damped relaxation: the crash's
      stored spring energy leaves, friction springs still stretch); reports the steady creep that
      remains (the mean unbalanced force) and whether creeping bodies slip at their contacts
  --freeze-at T --analyse-after-freeze --start T2: the contact analysis above, on the frozen pile
  --freeze-at T --restart --setting ...: the stopped pile handed to a fresh engine with other
      settings (e.g. target_penetration: stiffer contacts)
  --overhang 0.3 0.35 ...: a cube on a cube, offset by that fraction of the side, both contact
      geometries: where does the top one tip off (a box: 0.5)?
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from addon.core.opencl_engine import OpenCLEngine  # noqa: E402
from addon.core.rotations import quaternion_to_matrix  # noqa: E402
from addon.core.settings import FRICTION_SLOTS, SimulationSettings  # noqa: E402
from addon.core.voxel_corners import CORNER_SOFTNESS  # noqa: E402
from bench.machine import commit, cpu_model, setting_overrides  # noqa: E402
from bench.contact_figures import REST_SPEED, REST_SPIN, pile_figures, run_seconds  # noqa: E402
from bench.scenes import cube_pile  # noqa: E402

CAP = 0.99  # |f_t| / (mu f_n) at or above this: the contact slides at the Coulomb limit


def read_history(engine):
    """(keys (P, S) int, springs (P, S, 3)) written by the last substep."""
    a = engine.arguments
    parity = engine.substep_parity
    keys = engine._read(a["history_key_in"][parity], (FRICTION_SLOTS, engine.particle_count), np.int32).T
    xi = engine._read(a["history_xi_in"][parity], (FRICTION_SLOTS, engine.particle_count, 4))
    return keys, np.transpose(xi[:, :, :3], (1, 0, 2)).astype(np.float64)


def ground_support(offsets_lattice_rot, reach, radius):
    """voxel_support(-z) for many particles: (depth, arm), vectorised."""
    u = np.array([0.0, 0.0, -1.0])
    e = CORNER_SOFTNESS
    d = np.einsum("pji,j->pi", offsets_lattice_rot, u)  # lattice^T u
    sigma = np.clip(d / e, -1.0, 1.0)
    half = reach * radius
    rho = radius * (1.0 - reach * (1.0 - 0.5 * e))
    depth = half * ((sigma * d).sum(1) - 0.5 * e * (sigma * sigma).sum(1)) + rho
    arm = np.einsum("pij,pj->pi", offsets_lattice_rot, half[:, None] * sigma) + rho[:, None] * u
    no_reach = reach <= 0
    depth[no_reach] = radius
    arm[no_reach] = radius * u
    return depth, arm


def analyse(engine, state_before, keys, xi, keys_prev):
    """One substep's contacts (history keys/springs it wrote, positions it used, velocities it read)."""
    m = engine.model
    pr = engine.params
    r = m.particle_radius
    body = m.particle_body
    pos = engine.particle_positions()
    x, v, w = state_before.position, state_before.velocity, state_before.angular_velocity
    offset = pos - x[body]
    pvel = v[body] + np.cross(w[body], offset)
    masses = engine._read(engine.arguments["body_contact_mass"], (m.body_count, 2)).astype(np.float64)
    # the table on the device (the freeze experiments overwrite it)
    mu = float(engine._read(engine.arguments["pair_friction"], (len(m.materials) ** 2,))[0])
    zeta = float(pr.damping_ratio[0, 0])
    k, kt, h = pr.stiffness, pr.tangential_stiffness, pr.substep

    slot_count = (keys != -1).sum(1)
    ii, ss = np.nonzero(keys != -1)
    key = keys[ii, ss]
    spring = xi[ii, ss]

    def pair_mass(a, b):
        return np.where(b > 0, a * b / np.where(a + b > 0, a + b, 1), a)

    out = {}
    # -- particle-particle contacts between bodies
    pp = key >= 0
    i, j = ii[pp], key[pp]
    delta = pos[j] - pos[i]
    dist = np.linalg.norm(delta, axis=1)
    n = delta / dist[:, None]
    arm = 0.5 * dist[:, None] * n
    bi, bj = body[i], body[j]
    mi, mj = masses[bi], masses[bj]
    law_pp = law(k, kt, h, mu, zeta, n, arm, 2 * r - dist, pvel[i], w[bi], pvel[j], w[bj],
                 pair_mass(mi[:, 0], mj[:, 0]), pair_mass(mi[:, 1], mj[:, 1]), spring[pp])
    # -- ground contacts (plane 0: key -2)
    gp = key == -2
    g = ii[gp]
    lattice = quaternion_to_matrix(state_before.orientation) @ quaternion_to_matrix(m.body_lattice_orientation)
    depth, garm = ground_support(lattice[body[g]], m.particle_corner_reach[g].astype(np.float64), r)
    overlap_g = depth - pos[g, 2]
    zero = np.zeros_like(garm)
    law_g = law(k, kt, h, mu, zeta, np.tile([0.0, 0.0, -1.0], (len(g), 1)), garm, overlap_g, pvel[g], w[body[g]],
                zero, zero, masses[body[g], 0], masses[body[g], 1], spring[gp])

    for name, res in (("body_body", law_pp), ("ground", law_g)):
        fn, ratio, slip, vn_abs, scale, spring_fn = res
        loaded = fn > 0
        out[name] = {
            "contacts": int(len(fn)),
            "with_normal_force": int(loaded.sum()),
            "at_coulomb_cap": float((ratio[loaded] >= CAP).mean()) if loaded.any() else 0.0,
            "ratio_quartiles": [float(q) for q in np.percentile(ratio[loaded], [25, 50, 75])] if loaded.any() else [],
            "slip_speed_median_mps": float(np.median(slip)) if len(slip) else 0.0,
            "normal_speed_median_mps": float(np.median(vn_abs)) if len(slip) else 0.0,
            # the dashpot after DAMPING_LIMIT's cap, as a fraction of the restitution's dashpot
            "damping_scale_median": float(np.median(scale)) if len(slip) else 0.0,
            "damping_capped": float((scale < 0.999).mean()) if len(slip) else 0.0,
            # f_n against the spring's k overlap: far from 1, the dashpot dominates (ringing contact)
            "fn_over_spring_quartiles": ([float(q) for q in np.percentile(fn[spring_fn > 0] / spring_fn[spring_fn > 0],
                                                                        [10, 50, 90])] if (spring_fn > 0).any() else []),
        }
    # -- new contacts and handovers (body-body)
    prev = {}
    for p_, s_ in zip(*np.nonzero(keys_prev != -1)):
        prev.setdefault(int(p_), set()).add(int(keys_prev[p_, s_]))
    prev_body_pairs = set()
    for p_, ks in prev.items():
        for kk in ks:
            if kk >= 0:
                prev_body_pairs.add((int(body[p_]), int(body[kk])))
    new = np.array([int(jj) not in prev.get(int(ip), ()) for ip, jj in zip(i, j)], dtype=bool)
    handover = np.array([nw and (int(body[ip]), int(body[jj])) in prev_body_pairs for nw, ip, jj in zip(new, i, j)],
                        dtype=bool)
    out["body_body"]["new"] = float(new.mean()) if len(new) else 0.0
    out["body_body"]["handover"] = float(handover.mean()) if len(new) else 0.0
    fn, ratio = law_pp[0], law_pp[1]
    loaded = fn > 0
    # the friction a new contact can give in its first substep, against the cap
    out["body_body"]["cap_of_new"] = float((ratio[new & loaded] >= CAP).mean()) if (new & loaded).any() else 0.0
    out["body_body"]["cap_of_old"] = float((ratio[~new & loaded] >= CAP).mean()) if (~new & loaded).any() else 0.0
    out["slots_full_particles"] = int((slot_count >= FRICTION_SLOTS).sum())
    out["max_slots_used"] = int(slot_count.max())

    # -- per body
    speed = np.linalg.norm(v, axis=1)
    spin = np.linalg.norm(w, axis=1)
    moving = (speed >= REST_SPEED) | (spin >= REST_SPIN)
    nb = m.body_count
    contact_count = np.bincount(bi, minlength=nb) + np.bincount(body[g], minlength=nb)
    slip_sum = np.bincount(bi, weights=law_pp[2], minlength=nb) + np.bincount(body[g], weights=law_g[2], minlength=nb)
    capped = (np.bincount(bi, weights=(law_pp[1] >= CAP) & (law_pp[0] > 0), minlength=nb)
              + np.bincount(body[g], weights=(law_g[1] >= CAP) & (law_g[0] > 0), minlength=nb))
    mean_slip = slip_sum / np.maximum(contact_count, 1)
    # a body's pairs now vs before
    pairs_now = {}
    for a_, b_ in zip(bi, bj):
        pairs_now.setdefault(int(a_), set()).add(int(b_))
    pairs_before = {}
    for a_, b_ in prev_body_pairs:
        pairs_before.setdefault(a_, set()).add(b_)
    broken = np.array([len(pairs_before.get(b, set()) - pairs_now.get(b, set())) > 0 for b in range(nb)])
    airborne = moving & (contact_count == 0)
    touching = moving & ~airborne
    sliding = touching & (mean_slip >= 0.5 * speed) & (speed >= REST_SPEED)
    rolling = touching & ~sliding & (spin * 0.5 >= 0.5 * np.maximum(speed, 1e-9))
    other = touching & ~sliding & ~rolling
    out["bodies"] = {
        "moving": int(moving.sum()),
        "moving_airborne": int(airborne.sum()),
        "moving_sliding": int(sliding.sum()),
        "moving_rolling_or_tumbling": int(rolling.sum()),
        "moving_other": int(other.sum()),
        "moving_with_a_body_pair_broken": int((touching & broken).sum()),
        "moving_mean_speed_mps": float(speed[moving].mean()) if moving.any() else 0.0,
        "moving_mean_contact_slip_mps": float(mean_slip[touching].mean()) if touching.any() else 0.0,
        "moving_fraction_of_contacts_capped": float(capped[touching].sum() / max(contact_count[touching].sum(), 1)),
        "resting_fraction_of_contacts_capped": float(capped[~moving].sum() / max(contact_count[~moving].sum(), 1)),
        "moving_mean_height_m": float(x[moving, 2].mean()) if moving.any() else 0.0,
    }
    return out, moving, sliding, rolling


def law(k, kt, h, mu, zeta, n, arm, overlap, vel_i, omega_i, vel_j, omega_j, m_eff, m_share, xi_new):
    """contact_law for arrays, given the spring the kernel stored after it: (f_n, |f_t| / (mu f_n),
    tangential slip speed at the contact point)."""
    from addon.core.settings import DAMPING_LIMIT
    damping = 2 * zeta * np.sqrt(m_eff * k)
    scale = np.where(damping > 0, np.minimum(1.0, DAMPING_LIMIT * m_share / np.maximum(damping * h, 1e-30)), 1.0)
    damping_t = scale * 2 * zeta * np.sqrt(m_eff * kt)
    damping = damping * scale
    v_rel = vel_i + np.cross(omega_i, arm) - vel_j - np.cross(omega_j, -arm)
    vn = (v_rel * n).sum(1)
    fn = np.maximum(k * overlap + damping * vn, 0.0)
    v_t = v_rel - vn[:, None] * n
    f_t = -kt * xi_new - damping_t[:, None] * v_t  # the stored spring is the capped one when capped
    ratio = np.linalg.norm(f_t, axis=1) / np.maximum(mu * fn, 1e-30)
    return fn, ratio, np.linalg.norm(v_t, axis=1), np.abs(vn), scale, k * np.maximum(overlap, 0)


def kinetic_energy(engine, state) -> float:
    """Translational plus rotational kinetic energy of all bodies (J)."""
    m = engine.model
    rot = quaternion_to_matrix(state.orientation)
    inertia = rot @ m.body_inertia_local @ np.swapaxes(rot, 1, 2)
    w = state.angular_velocity
    return float(0.5 * (m.body_mass * (state.velocity ** 2).sum(1)).sum()
                 + 0.5 * np.einsum("bi,bij,bj->", w, inertia, w))


def freeze(engine):
    """Stop every body (momenta, velocities); poses and friction springs stay."""
    damp(engine, 0.0)


def set_pair_table(engine, name: str, value: float):
    """Overwrite one material-pair table (pair_friction, pair_rolling) for every pair; or with name
    "gravity" the vertical gravity, with "tangential_stiffness_factor" scale the friction springs."""
    if name == "tangential_stiffness_factor":  # the friction springs' stiffness times value
        constants = engine.arguments["contact_constants"].copy()
        constants[1] = engine.params.tangential_stiffness * value
        engine.arguments["contact_constants"] = constants
        engine._bind(["contact_constants"])
        return
    if name == "gravity":
        engine.arguments["gravity"] = np.array([0.0, 0.0, value, 0.0], np.float32)
        engine._bind(["gravity"])  # both parities' kernels
        return
    table = np.full(len(engine.model.materials) ** 2, value, np.float32)
    engine.cl.enqueue_copy(engine.queue, engine.arguments[name], table)
    engine.queue.finish()


def damp(engine, keep: float):
    """Every body's momenta and velocities times ``keep`` (global viscous damping, host side)."""
    for name in ("body_momentum", "body_angular_momentum", "body_velocity", "body_angular_velocity"):
        values = engine._read(engine.arguments[name], (engine.body_count, 4)) * np.float32(keep)
        engine.cl.enqueue_copy(engine.queue, engine.arguments[name], values)
    engine.queue.finish()


def creep_modes(engine, state, keep: float) -> dict:
    """How the bodies of a damped pile still move: under damping ``keep`` per substep a body pushed by
    a steady unbalanced force reaches v = a h / (1 - keep), so a is read from the speed; a body that
    moves while its contacts do not slip turns or rides on its neighbours (no friction resists it)."""
    m = engine.model
    body = m.particle_body
    keys, _ = read_history(engine)
    pos = engine.particle_positions()
    x, v, w = state.position, state.velocity, state.angular_velocity
    ii, ss = np.nonzero(keys != -1)
    key = keys[ii, ss]
    # particle pairs (key: the other particle), the point halfway between the centres
    pp = key >= 0
    i = ii[pp]
    other_body = body[key[pp]]
    point = 0.5 * (pos[i] + pos[key[pp]])
    v_rel = (v[body[i]] + np.cross(w[body[i]], point - x[body[i]])
             - v[other_body] - np.cross(w[other_body], point - x[other_body]))
    # slip: the relative velocity at the contact point (its normal part, the overlap's change, is small
    # in a resting pile, so the full relative speed stands for the tangential one)
    slip = np.linalg.norm(v_rel, axis=1)
    nb = m.body_count
    per_body = np.bincount(body[i], minlength=nb)
    touching = (per_body + np.bincount(body[ii[key == -2]], minlength=nb)) > 0
    mean_slip = np.bincount(body[i], weights=slip, minlength=nb) / np.maximum(per_body, 1)
    speed = np.linalg.norm(v, axis=1)
    creeping = touching & (speed >= 0.02)
    h = engine.params.substep
    return {
        "damping_keep_per_substep": keep,
        "mean_unbalanced_acceleration_mps2": float(speed[touching].mean() * (1 - keep) / h),
        "creeping_bodies": int(creeping.sum()),
        "creeping_mean_speed_mps": float(speed[creeping].mean()) if creeping.any() else 0.0,
        "creeping_mean_contact_slip_mps": float(mean_slip[creeping].mean()) if creeping.any() else 0.0,
        "creeping_mean_spin_times_half_side_mps": float(0.5 * np.linalg.norm(w[creeping], axis=1).mean())
        if creeping.any() else 0.0,
        "creeping_mean_height_m": float(x[creeping, 2].mean()) if creeping.any() else 0.0,
        "body_contacts_slipping_over_1mm_per_s": float((slip > 0.001).mean()) if len(slip) else 0.0,
    }


def relax(engine, seconds: float, keep: float) -> dict:
    """Damped relaxation: every body's velocities times ``keep`` after every substep for ``seconds``.
    The springs' stored energy (the crash's overlaps) leaves without becoming motion, friction springs
    still stretch (the contacts see the velocities), and the pile settles into the nearest shape its
    contacts hold, if there is one; if not it creeps at a terminal speed set by the damping."""
    lattice = engine.model.body_lattice_orientation
    before = engine.body_state()
    for _ in range(max(1, int(round(seconds / engine.params.substep)))):
        engine.step(1)
        damp(engine, keep)
    after = engine.body_state()
    figures = pile_figures(after, lattice)
    figures["crept_mean_m"] = float(np.linalg.norm(after.position - before.position, axis=1).mean())
    figures.update(creep_modes(engine, after, keep))
    return figures


def freeze_run(engine, at: float, after: list[float], tables: dict | None = None, relax_s: float = 0.0,
               relax_keep: float = 0.9) -> dict:
    """The pile stopped dead at ``at`` seconds: does it stay (the shape holds, the flow was the crash's
    momentum) or start again by itself (the contacts cannot hold the shape)? With ``relax_s`` the
    stopped pile is first relaxed quasi-statically (see relax) and followed from there."""
    run_seconds(engine, at)
    lattice = engine.model.body_lattice_orientation
    out = {"frozen_at_s": at, "before_freeze": pile_figures(engine.body_state(), lattice), "after": {}}
    freeze(engine)
    for name, value in (tables or {}).items():
        set_pair_table(engine, name, value)
    if relax_s > 0:
        out["relaxed_s"] = relax_s
        out["after_relaxing"] = relax(engine, relax_s, relax_keep)
        print(f"relaxed {relax_s:g} s: {out['after_relaxing']}", file=sys.stderr)
        at = engine.time
    out["tables_after_freeze"] = tables or {}
    for extra in after:
        run_seconds(engine, at + extra)
        state = engine.body_state()
        out["after"][f"{extra:g}"] = pile_figures(state, lattice)
        out["after"][f"{extra:g}"]["kinetic_energy_J"] = kinetic_energy(engine, state)
        print(f"frozen at {at:g} s, {extra:g} s later: {out['after'][f'{extra:g}']}", file=sys.stderr)
    return out


def restart_run(count: int, at: float, after: list[float], overrides: dict, tables: dict, per_edge: int = 3) -> dict:
    """The default engine's pile at ``at`` seconds, stopped dead and handed to a fresh engine with
    ``overrides`` (poses only: no momenta, no friction springs): does the shape hold there?"""
    from addon.core.device_buffers import quat_to_device as _quat_to_device, vec4 as _vec4
    first = OpenCLEngine(cube_pile(count, per_edge=per_edge), SimulationSettings())
    run_seconds(first, at)
    state = first.body_state()
    lattice = first.model.body_lattice_orientation
    engine = OpenCLEngine(cube_pile(count, per_edge=per_edge), SimulationSettings(**overrides))
    write = engine.cl.enqueue_copy
    write(engine.queue, engine.arguments["body_position"], _vec4(state.position))
    write(engine.queue, engine.arguments["body_orientation"], _quat_to_device(state.orientation))
    freeze(engine)
    for name, value in tables.items():
        set_pair_table(engine, name, value)
    out = {"restarted_at_s": at, "overrides": overrides, "tables": tables, "substep_s": engine.params.substep,
           "stiffness": engine.params.stiffness, "before": pile_figures(state, lattice), "after": {}}
    for extra in after:
        run_seconds(engine, extra)
        out["after"][f"{extra:g}"] = pile_figures(engine.body_state(), lattice)
        print(f"restarted at {at:g} s, {extra:g} s later: {out['after'][f'{extra:g}']}", file=sys.stderr)
    return out


def overhang(offsets: list[float], per_edge: int = 3) -> dict:
    """A unit cube resting on another with its centre ``offset`` past the lower one's, 3 s, both
    contact geometries: a box stays while its centre is over the face below (offset < 0.5)."""
    from addon.core import Material, ModelBuilder
    from addon.core.shapes import cube_particles
    from bench.contact_figures import make_engine
    out = {"per_edge": per_edge}
    for geometry in ("particles", "voxels"):
        for offset in offsets:
            builder = ModelBuilder(1.0 / (2 * per_edge))
            material = Material(friction=0.5, restitution=0.2)
            for position in ((0.0, 0.0, 0.5), (offset, 0.0, 1.5)):
                builder.add_body(cube_particles(1.0, per_edge), density=1000.0, position=position, corner_reach=1.0,
                                 material=material)
            builder.add_ground_plane(0.0)
            engine = make_engine(builder.finalize(), SimulationSettings(contact_geometry=geometry))
            run_seconds(engine, 3.0)
            top = engine.body_state().position[1]
            out[f"{geometry} {offset:g}"] = {"top_centre_m": [round(float(c), 4) for c in top],
                                             "stays": bool(top[2] > 1.3)}
            print(geometry, offset, out[f"{geometry} {offset:g}"], file=sys.stderr)
    return out


def machine() -> dict:
    return {"device": OpenCLEngine(cube_pile(1), SimulationSettings()).device_name, "cpu_model": cpu_model(),
            "cpu_count": os.cpu_count(), "commit": commit()}


def write(path: str, out: dict):
    Path(path).write_text(json.dumps({**out, "machine": machine()}, indent=1))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cubes", type=int, default=1000)
    ap.add_argument("--start", type=float, default=4.0)
    ap.add_argument("--window", type=float, default=0.5)
    ap.add_argument("--every", type=int, default=10, help="analyse every Nth substep of the window")
    ap.add_argument("--setting", action="append", default=[], help="SimulationSettings field=value")
    ap.add_argument("--freeze-at", type=float, default=None,
                    help="instead: stop every body at this time and follow the pile for --freeze-after seconds")
    ap.add_argument("--freeze-after", type=float, nargs="+", default=[0.25, 0.5, 1.0, 2.0])
    ap.add_argument("--relax", type=float, default=0.0,
                    help="with --freeze-at: damp every body's velocities after every substep for this long before "
                         "letting go (see relax)")
    ap.add_argument("--relax-keep", type=float, default=0.9, help="the fraction of velocity kept per substep")
    ap.add_argument("--rolling-regularization", type=float, default=None,
                    help="the rolling couple's fade-out speed (rad/s, settings.ROLLING_REGULARIZATION) for this run")
    ap.add_argument("--after-freeze", action="append", default=[],
                    help="pair_friction=V or pair_rolling=V: that table for every material pair from the freeze on")
    ap.add_argument("--analyse-after-freeze", action="store_true",
                    help="with --freeze-at: freeze, then run the window analysis from --start")
    ap.add_argument("--restart", action="store_true",
                    help="with --freeze-at: hand the stopped pile to a fresh engine with the --setting overrides")
    ap.add_argument("--overhang", type=float, nargs="+", default=None,
                    help="instead: a cube on a cube with these horizontal offsets (side 1), both geometries")
    ap.add_argument("--per-edge", type=int, default=3, help="particles along a cube's edge (cube_pile per_edge)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    overrides = setting_overrides(args.setting)
    if args.rolling_regularization is not None:  # a compile-time define: the engine reads it when it builds
        import addon.core.opencl_program as opencl_program
        opencl_program.ROLLING_REGULARIZATION = args.rolling_regularization
    t0 = time.perf_counter()
    if args.overhang:
        write(args.out, {"overhang": overhang(args.overhang, args.per_edge)})
        return
    if args.restart:
        tables = {k: float(v) for k, v in (a.split("=") for a in args.after_freeze)}
        out = {"cubes": args.cubes, **restart_run(args.cubes, args.freeze_at, args.freeze_after, overrides, tables,
                                                      args.per_edge)}
        out["wall_s"] = time.perf_counter() - t0
        write(args.out, out)
        return
    engine = OpenCLEngine(cube_pile(args.cubes, per_edge=args.per_edge), SimulationSettings(**overrides))
    if args.freeze_at is not None and args.analyse_after_freeze:
        run_seconds(engine, args.freeze_at)
        freeze(engine)
        for item in args.after_freeze:
            name, value = item.split("=")
            set_pair_table(engine, name, float(value))
    elif args.freeze_at is not None:
        out = {"cubes": args.cubes, "per_edge": args.per_edge, "settings": overrides, **freeze_run(engine, args.freeze_at, args.freeze_after,
                                                                  {k: float(v) for k, v in (a.split("=") for a in args.after_freeze)},
                                                                  args.relax, args.relax_keep)}
        out["wall_s"] = time.perf_counter() - t0
        write(args.out, out)
        return
    run_seconds(engine, args.start)
    samples = []
    substeps = int(round(args.window / engine.params.substep))
    keys_prev, _ = read_history(engine)
    moving_ever = np.zeros(engine.model.body_count, bool)
    for s in range(substeps):
        analyse_now = s % args.every == 0
        state_before = engine.body_state() if analyse_now else None
        engine.step(1)
        keys, xi = read_history(engine)
        if analyse_now:
            res, moving, _, _ = analyse(engine, state_before, keys, xi, keys_prev)
            res["time_s"] = engine.time
            moving_ever |= moving
            samples.append(res)
        keys_prev = keys
    state = engine.body_state()
    out = {
        "cubes": args.cubes, "start_s": args.start, "window_s": args.window, "settings": overrides,
        "frozen_at_s": args.freeze_at if args.analyse_after_freeze else None, "after_freeze": args.after_freeze,
        "substep_s": engine.params.substep, "friction_slots": FRICTION_SLOTS, "cap_threshold": CAP,
        "pile_at_end": pile_figures(state, engine.model.body_lattice_orientation),
        "bodies_moving_at_some_sample": int(moving_ever.sum()),
        "samples": samples, "wall_s": time.perf_counter() - t0,
    }
    # window means of the scalar figures
    mean = {}
    for section in ("body_body", "ground", "bodies"):
        mean[section] = {kk: float(np.mean([smp[section][kk] for smp in samples]))
                         for kk, vv in samples[0][section].items() if not isinstance(vv, list)}
    out["window_mean"] = mean
    write(args.out, out)
    print(json.dumps(mean, indent=1))


if __name__ == "__main__":
    main()
