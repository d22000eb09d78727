"""Rigid-contact figures of issue 22, measured the same way for every engine variant; prints JSON.

Scenes (core only, no Blender), each a figure the issue's "must show" list names:
  pile       bench/scenes.py cube_pile(N) (mu 0.5, restitution 0.2, ground): at 3 / 5 / 10 s the
             fraction at rest, mean speed, highest corner, p95 height, mean centre height,
             footprint radius, deepest corner (the definitions of the Newton peer's pile_common.py,
             repeated in pile_figures() so both engines are read alike), and wall ms per simulated
             second in the fall (0-1 s) and pile (from 3 s) phases
  ball       a 7,800 kg/m3 voxelized UV sphere (R 0.5 m, 10 particles across) dropped 0.5 m onto the
             ground and onto a 500 kg/m3 brick: deepest particle overlap in the impact and at rest
  joint      a cube resting across the joint of two cubes: how far it sits below 1 m over them
  rows       five half-offset rows of 1 m cubes: each row's mean height against its ideal (k + 0.5 m)
  column     40 cubes in a column: height lost
  rolling    the sphere on a 20 degree slope, a plane and a triangle mesh: acceleration over
             (5/7) g sin theta, slip
  bounce     rebound speed ratio for e = 0.3, 0.6, 0.9, a cube on the ground and on a cube
  momentum   frictional two-body collision (mu 0.6): relative change of linear and angular momentum
  tumbling   torque-free box near its intermediate axis, 12 s at 10 rad/s: kinetic energy and |L| drift

    PYTHONPATH=. .venv/bin/python bench/contact_figures.py --out bench/results/contact_figures_pocl.json
    ... --only pile --cubes 1000 --pile-seconds 10 --setting key=value (a SimulationSettings field)
Figures, never a timed test.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from addon.core import Material, ModelBuilder, SimulationSettings  # noqa: E402
from addon.core import voxelize as vox  # noqa: E402
from addon.core.rotations import quaternion_to_matrix  # noqa: E402
from addon.core.opencl_engine import OpenCLEngine  # noqa: E402
from addon.core.shapes import box_particles, cube_particles  # noqa: E402
from bench.machine import commit, cpu_model, setting_overrides, write_report  # noqa: E402
from bench.scenes import cube_pile, uv_sphere  # noqa: E402

G = 9.81
REST_SPEED = 0.1  # m/s: "at rest" as bench/vs_blender.py and the peer's pile_common.py
REST_SPIN = 0.2  # rad/s
CUBE_RADIUS = 1.0 / 6.0  # 27-particle unit cubes
BALL_RADIUS = 0.5
BALL_PARTICLE_RADIUS = 0.05  # 10 particles across the ball, the add-on's default particle size


def pile_figures(state, lattice, side: float = 1.0) -> dict:
    """Pile figures of unit cubes at one moment (the definitions of the peer's pile_common.pile_stats).
    lattice: each body's voxel lattice in its frame (model.body_lattice_orientation): cube_pile
    gives its bodies in world space, so a cube's edges lie along R(q) R(lattice), not R(q)."""
    p, v, w = state.position, state.velocity, state.angular_velocity
    rot = quaternion_to_matrix(state.orientation) @ quaternion_to_matrix(lattice)
    h = side / 2
    corners = np.array([(x, y, z) for x in (-h, h) for y in (-h, h) for z in (-h, h)])
    corner_z = p[:, None, 2] + np.einsum("bij,cj->bci", rot, corners)[:, :, 2]
    top, bottom = corner_z.max(1), corner_z.min(1)
    radial = np.linalg.norm(p[:, :2] - np.median(p[:, :2], axis=0), axis=1)
    speed, spin = np.linalg.norm(v, axis=1), np.linalg.norm(w, axis=1)
    return {
        "fraction_at_rest": float(((speed < REST_SPEED) & (spin < REST_SPIN)).mean()),
        "mean_speed_mps": float(speed.mean()),
        "pile_height_m": float(top.max()),
        "pile_height_p95_m": float(np.percentile(top, 95)),
        "mean_centre_height_m": float(p[:, 2].mean()),
        "footprint_radius_m": float(np.percentile(radial, 90)),
        "deepest_corner_m": float(bottom.min()),
        "non_finite_bodies": int((~np.isfinite(p).all(1)).sum()),
    }


SAVE_STATES = ""  # a folder: the pile's body states at each checkpoint (npz), set by main()


def settings_for(overrides: dict, **kwargs) -> SimulationSettings:
    return SimulationSettings(**{**kwargs, **overrides})


def make_engine(model, settings):
    """The engine every scene runs on (one place to swap in a variant being measured)."""
    return OpenCLEngine(model, settings)


def run_seconds(engine, seconds: float):
    engine.step(max(0, int(round((seconds - engine.time) / engine.params.substep))))


def pile(count: int, seconds: float, overrides: dict, seed: int = 0) -> dict:
    """The pile's figures at its checkpoints. ``seed``: cube_pile's jitter of the starting poses; 0
    is the poses Newton's side of the comparison starts from (gpu-peer), others give further samples
    of the same chaotic pile for comparing our variants (one run's rest fraction and deepest corner
    move by several points and half a centimetre between equivalent runs)."""
    engine = make_engine(cube_pile(count, seed=seed), settings_for(overrides))
    dt = engine.params.substep
    out = {"cubes": count, "seed": seed, "substep_s": dt, "checkpoints": {}}
    wall = {}
    start = time.perf_counter()
    for checkpoint in (1.0, 3.0, 5.0, seconds):
        if checkpoint > seconds or (checkpoint in wall):
            continue
        run_seconds(engine, checkpoint)
        engine.queue.finish()
        wall[checkpoint] = time.perf_counter() - start
        if checkpoint >= 3.0:
            state = engine.body_state()
            out["checkpoints"][f"{checkpoint:g}"] = pile_figures(state, engine.model.body_lattice_orientation)
            if SAVE_STATES:
                np.savez_compressed(Path(SAVE_STATES) / f"pile{count}_{checkpoint:g}s.npz", position=state.position,
                                    orientation=state.orientation, velocity=state.velocity,
                                    angular_velocity=state.angular_velocity)
            print(f"pile {count} at {checkpoint:g} s: {out['checkpoints'][f'{checkpoint:g}']}", file=sys.stderr)
    out["ms_per_simulated_s_fall_0_1s"] = 1e3 * wall[1.0]
    if seconds > 3.0:
        out["ms_per_simulated_s_pile_from_3s"] = 1e3 * (wall[seconds] - wall[3.0]) / (seconds - 3.0)
    return out


def ball_particles():
    """A UV sphere of BALL_RADIUS voxelized as a conversion does (filled; surface voxels round, the
    voxels near the surface with the ball as their support sphere): points, corner reach, spheres."""
    verts, tris = uv_sphere(BALL_RADIUS, 32, 16)
    result = vox.voxelize(verts, tris, 2 * BALL_PARTICLE_RADIUS)
    return result.points - result.points.mean(0), result.corner_reach, result.support_spheres


def deepest_overlap(engine, body_a: int, body_b: int | None) -> float:
    """Largest overlap of body_a's particles with the ground (body_b None: spheres against z = 0)
    or with body_b's particles."""
    pos = engine.particle_positions()
    r = engine.model.particle_radius
    body = engine.model.particle_body
    a = pos[body == body_a]
    if body_b is None:
        return float((r - a[:, 2]).max())
    b = pos[body == body_b]
    # only the particles near the other body can touch it
    a = a[a[:, 2] < b[:, 2].max() + 2 * r]
    b = b[b[:, 2] > a[:, 2].min(initial=np.inf) - 2 * r]
    if len(a) == 0 or len(b) == 0:
        return float("-inf")
    dist = np.linalg.norm(a[:, None, :] - b[None, :, :], axis=2)
    return float((2 * r - dist).max())


def ball(overrides: dict) -> dict:
    points, reach, spheres = ball_particles()
    out = {"ball_radius_m": BALL_RADIUS, "particle_radius_m": BALL_PARTICLE_RADIUS, "particles": len(points)}
    for support in ("ground", "brick"):
        builder = ModelBuilder(BALL_PARTICLE_RADIUS)
        base = 0.0
        if support == "brick":
            brick = box_particles((10, 10, 5), 2 * BALL_PARTICLE_RADIUS)  # 1 x 1 x 0.5 m
            builder.add_body(brick, density=500.0, position=(0, 0, 0.25), corner_reach=1.0)
            base = 0.5
        # dropped from 0.5 m: the deepest overlap during the impact, and at rest
        ball_body = builder.add_body(points, density=7800.0, position=(0, 0, base + BALL_RADIUS + 0.5),
                                     corner_reach=reach, support_spheres=spheres)
        builder.add_ground_plane(0.0)
        engine = make_engine(builder.finalize(), settings_for(overrides))
        below = None if support == "ground" else 0
        impact = 0.0
        while engine.time < 0.6:  # it lands at 0.32 s
            engine.step(5)
            if engine.time > 0.25:
                impact = max(impact, deepest_overlap(engine, ball_body, below))
        run_seconds(engine, 2.5)
        depth = deepest_overlap(engine, ball_body, below)
        out[support] = {"deepest_overlap_at_rest_m": depth, "at_rest_in_particle_radii": depth / BALL_PARTICLE_RADIUS,
                        "at_rest_in_ball_radii": depth / BALL_RADIUS, "impact_deepest_overlap_m": impact,
                        "impact_in_particle_radii": impact / BALL_PARTICLE_RADIUS,
                        "speed_at_end_mps": float(np.linalg.norm(engine.body_state().velocity[ball_body]))}
    return out


def cube_builder():
    return ModelBuilder(CUBE_RADIUS)


def add_unit_cube(builder, position, material=None):
    return builder.add_body(cube_particles(1.0), density=1000.0, position=position, corner_reach=1.0,
                            material=material or Material())


def joint(overrides: dict) -> dict:
    builder = cube_builder()
    add_unit_cube(builder, (-0.5, 0, 0.5))
    add_unit_cube(builder, (0.5, 0, 0.5))
    add_unit_cube(builder, (0, 0, 1.5))
    builder.add_ground_plane(0.0)
    engine = make_engine(builder.finalize(), settings_for(overrides))
    run_seconds(engine, 3.0)
    z = engine.body_state().position[:, 2]
    return {"sink_below_ideal_m": float(z[:2].mean() + 1.0 - z[2]), "lower_cubes_centre_m": z[:2].tolist()}


def rows(overrides: dict, row_count: int = 5, per_row: int = 8) -> dict:
    """Rows of cubes side by side, each a cube shorter than the one below and shifted by half a
    cube: every cube above the first row rests across the joint of two."""
    builder = cube_builder()
    for k in range(row_count):
        for i in range(per_row - k):
            add_unit_cube(builder, (i + 0.5 * k, 0, 0.5 + k * 1.0))
    builder.add_ground_plane(0.0)
    engine = make_engine(builder.finalize(), settings_for(overrides))
    run_seconds(engine, 3.0)
    z = engine.body_state().position[:, 2]
    out, first = [], 0
    for k in range(row_count):
        n = per_row - k
        out.append(float(0.5 + k - z[first:first + n].mean()))
        first += n
    return {"row_sink_below_ideal_m": out, "top_row_sink_m": out[-1],
            "max_speed_at_3s_mps": float(np.linalg.norm(engine.body_state().velocity, axis=1).max())}


def column(overrides: dict, count: int = 40) -> dict:
    builder = cube_builder()
    for k in range(count):
        add_unit_cube(builder, (0, 0, 0.5 + k))
    builder.add_ground_plane(0.0)
    engine = make_engine(builder.finalize(), settings_for(overrides))
    run_seconds(engine, 3.0)
    top = engine.body_state().position[-1]
    return {"cubes": count, "height_lost_fraction": float((count - 0.5 - top[2]) / count),
            "top_drift_m": float(np.linalg.norm(top[:2]))}


# Material fields for the ball and the slope of the rolling scene (--rolling-material), to split the
# deficit between the rolling couple (rolling_friction), the normal dashpot (restitution) and friction
ROLLING_MATERIAL: dict = {}


def slope_mesh(normal, size: float = 10.0, cells: int = 10):
    """A square of ``size`` metres through the origin, normal to ``normal`` (tilted about x),
    cells x cells quads split into triangles."""
    xs = np.linspace(-size / 2, size / 2, cells + 1)
    gx, gy = np.meshgrid(xs, xs, indexing="ij")
    along = np.cross(normal, (1.0, 0.0, 0.0))  # in the slope, normal to x
    vertices = gx.reshape(-1, 1) * np.array([1.0, 0.0, 0.0]) + gy.reshape(-1, 1) * along
    triangles = []
    for i in range(cells):
        for j in range(cells):
            a, b = i * (cells + 1) + j, (i + 1) * (cells + 1) + j
            triangles += [(a, b, b + 1), (a, b + 1, a + 1)]
    return vertices, np.array(triangles)


def rolling_on(floor: str, overrides: dict, degrees: float = 20.0) -> dict:
    """The ball on a slope of ``degrees``, a plane or a triangle mesh ("plane", "mesh"): its
    acceleration over (5/7) g sin theta from 0.2 s to 1.2 s, and the speed of its point touching the
    slope (slip) against its own speed at the end."""
    points, reach, spheres = ball_particles()
    theta = math.radians(degrees)
    normal = np.array([0.0, -math.sin(theta), math.cos(theta)])
    downhill = np.array([0.0, -math.cos(theta), -math.sin(theta)])
    builder = ModelBuilder(BALL_PARTICLE_RADIUS)
    material = Material(**{"friction": 0.5, **ROLLING_MATERIAL})
    if floor == "plane":
        builder.add_ground_plane(normal=normal, point=(0, 0, 0), material=material)
    else:
        builder.add_static_mesh(*slope_mesh(normal), material=material)
    # the lowest particle (or support sphere) 1 mm above the slope: a start overlapping the slope
    # would be pushed out
    lowest = max(float((points @ -normal).max()) + BALL_PARTICLE_RADIUS,
                 float(((spheres[:, :3] + points) @ -normal + spheres[:, 3]).max()))
    builder.add_body(points, density=1000.0, position=normal * (lowest + 0.001), corner_reach=reach,
                     support_spheres=spheres, material=material)
    engine = make_engine(builder.finalize(), settings_for(overrides))
    run_seconds(engine, 0.2)
    start, t0 = engine.body_state().position[0], engine.time
    times, distances, slips = [], [], []
    for _ in range(20):
        engine.step(int(round(0.05 / engine.params.substep)))
        s = engine.body_state()
        times.append(engine.time - t0)
        distances.append((s.position[0] - start) @ downhill)
        # the velocity of the ball's point touching the slope: zero when it rolls without slipping
        slips.append(float((s.velocity[0] + np.cross(s.angular_velocity[0], -normal * BALL_RADIUS)) @ downhill))
    acceleration = 2 * np.polyfit(times, distances, 2)[0]
    expected = 5.0 / 7.0 * G * math.sin(theta)
    return {"degrees": degrees, "acceleration_over_rolling": float(acceleration / expected),
            "slip_speed_at_1s_mps": slips[-1], "speed_at_1s_mps": float(engine.body_state().velocity[0] @ downhill)}


def rolling(overrides: dict, degrees: float = 20.0) -> dict:
    """rolling_on a plane, and under "mesh" on a triangle mesh."""
    return {**rolling_on("plane", overrides, degrees), "mesh": rolling_on("mesh", overrides, degrees)}


def rebound_ratio(on_cube: bool, restitution: float, overrides: dict, drop: float = 0.5) -> float:
    builder = cube_builder()
    material = Material(friction=0.5, restitution=restitution)
    base = 0.0
    if on_cube:
        add_unit_cube(builder, (0.0, 0.0, 0.5), material)
        base = 1.0
    add_unit_cube(builder, (0.0, 0.0, base + 0.5 + drop), material)
    builder.add_ground_plane(0.0, material=material)
    engine = make_engine(builder.finalize(), settings_for(overrides, sleep_speed=0.0))
    velocities = []
    for _ in range(int(1.0 / engine.params.substep)):
        engine.step(1)
        velocities.append(engine.body_state().velocity[-1, 2])
    velocities = np.array(velocities)
    bounced = np.flatnonzero(velocities > 0)[0]
    return float(velocities[bounced:].max() / -velocities[:bounced].min())


def corner_heights(engine, side: float = 1.0) -> np.ndarray:
    """Each body's eight corner heights (a cube of this side)."""
    state = engine.body_state()
    h = 0.5 * side
    corners = np.array([(x, y, z) for x in (-h, h) for y in (-h, h) for z in (-h, h)])
    rot = quaternion_to_matrix(state.orientation)
    return state.position[:, None, 2] + np.einsum("bij,cj->bci", rot, corners)[:, :, 2]


def fast_drop(overrides: dict, speeds=(10.0, 24.0), supports=("ground", "cube")) -> dict:
    """A cube thrown down at each speed onto the ground and onto a resting cube from 0.6 m above:
    how deep it goes (its lowest corner below the ground, or below the lower cube's highest
    corner) during the impact, and whether it rests on top afterwards."""
    out = {}
    for where in supports:
        for speed in speeds:
            builder = cube_builder()
            base = 0.0
            if where == "cube":
                add_unit_cube(builder, (0.0, 0.0, 0.5))
                base = 1.0
            builder.add_body(cube_particles(1.0), density=1000.0, position=(0.0, 0.0, base + 1.1),
                             velocity=(0.0, 0.0, -speed), corner_reach=1.0, material=Material())
            builder.add_ground_plane(0.0)
            engine = make_engine(builder.finalize(), settings_for(overrides))
            deepest = 0.0
            while engine.time < 0.3:
                engine.step(1)
                z = corner_heights(engine)
                support = 0.0 if where == "ground" else z[0].max()
                deepest = max(deepest, support - z[-1].min())
            run_seconds(engine, 1.0)
            z = corner_heights(engine)
            out[f"{where}_{speed:g}"] = {"deepest_m": float(deepest),
                                         "end_gap_m": float(z[-1].min() - (0.0 if where == "ground" else z[0].max()))}
    return out


def bounce(overrides: dict) -> dict:
    out = {}
    for where, on_cube in (("ground", False), ("cube", True)):
        out[where] = {f"{e:g}": rebound_ratio(on_cube, e, overrides) for e in (0.3, 0.6, 0.9)}
    return out


def momentum(overrides: dict) -> dict:
    from tests.core.test_conservation import colliding_pair, momenta
    engine = make_engine(colliding_pair(0.6).finalize(), settings_for(overrides, gravity=(0, 0, 0)))
    p0, l0 = momenta(engine)
    run_seconds(engine, 1.0)
    p1, l1 = momenta(engine)
    scale = np.abs(engine.model.body_mass[:, None] * engine.model.body_velocity).sum()
    return {"linear_change": float(np.linalg.norm(p1 - p0) / scale),
            "angular_change": float(np.linalg.norm(l1 - l0) / np.linalg.norm(l0))}


def tumbling(overrides: dict, spin: float = 10.0) -> dict:
    from tests.core.test_conservation import tumbling_box
    engine = make_engine(tumbling_box(spin).finalize(), settings_for(overrides, gravity=(0, 0, 0)))
    e0, l0 = engine.kinetic_energy(), np.linalg.norm(engine.angular_momentum())
    run_seconds(engine, 12.0)
    return {"spin_rad_s": spin, "energy_change": float(engine.kinetic_energy() / e0 - 1),
            "angular_momentum_change": float(np.linalg.norm(engine.angular_momentum()) / l0 - 1)}


SCENES = ("momentum", "tumbling", "bounce", "fast_drop", "joint", "rows", "column", "ball", "rolling", "pile")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=SCENES, default=list(SCENES))
    parser.add_argument("--cubes", type=int, default=1000)
    parser.add_argument("--pile-seconds", type=float, default=10.0)
    parser.add_argument("--pile-seed", type=int, default=0,
                        help="cube_pile's jitter of the starting poses (0: the poses Newton's figures start from)")
    parser.add_argument("--setting", action="append", default=[],
                        help="a SimulationSettings field for every scene, e.g. --setting device=gpu")
    parser.add_argument("--rolling-material", action="append", default=[],
                        help="a Material field for the rolling scene's ball and slope, e.g. rolling_friction=0")
    parser.add_argument("--label", default="", help="what variant this run measures")
    parser.add_argument("--out", default=None)
    parser.add_argument("--save-states", default="", help="folder for the pile's states at the checkpoints")
    args = parser.parse_args(argv)
    overrides = setting_overrides(args.setting)
    ROLLING_MATERIAL.update({k: float(v) for k, v in (item.split("=", 1) for item in args.rolling_material)})
    global SAVE_STATES
    SAVE_STATES = args.save_states
    if SAVE_STATES:
        Path(SAVE_STATES).mkdir(parents=True, exist_ok=True)
    probe = make_engine(cube_pile(8), settings_for(overrides))
    report = {"label": args.label, "settings": overrides, "device": probe.device_name,
              "host": platform.node(), "cpu_model": cpu_model(), "cpu_count": os.cpu_count(),
              "python": platform.python_version(),
              "commit": commit(), "scenes": {}}
    for name in args.only:
        start = time.perf_counter()
        if name == "pile":
            result = pile(args.cubes, args.pile_seconds, overrides, args.pile_seed)
        else:
            result = globals()[name](overrides)
        result["wall_s"] = time.perf_counter() - start
        report["scenes"][name] = result
        print(name, json.dumps(result), file=sys.stderr, flush=True)
    write_report(report, args.out)


if __name__ == "__main__":
    main()
