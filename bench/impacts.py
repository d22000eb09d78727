"""Impacts the solver must survive (issue 46): fast bodies into targets, and heavy bodies on light
ones, at the default settings (Rigid Voxels) unless --setting says otherwise. Writes JSON with the
machine and the commit; docs/experiments/impacts.md reads it.

Every case is a row of CASES (built once below from the grids), so a later variant of the solver
runs exactly these scenes: ``run_case(case, overrides)`` gives one row's figures.

fast    a projectile (a 0.1 m ball voxelized from a UV sphere, or a cube of 0.1, 0.5 or 2 m) fired
        along -x at 5-100 m/s at a target whose struck face is the plane x = 0, the projectile's
        centre at the target's centre height (so a head-on hit turns nothing):
          body          a resting cube 3x the projectile's side, on the ground
          plane         a plane collider (normal +x), the ground under it
          mesh          a closed box mesh collider (12 triangles) 3x the projectile's side
          static_wall   static particles one voxel thick, 3x the side wide and tall
          dynamic_wall  a body one voxel thick, 3x the side wide and tall, standing on the ground
        One particle radius per scene: the automatic one (the smallest body 3 particles across,
        addon/blender/voxelize_bodies.py PARTICLES_ACROSS), so every scene is the same in voxels and only
        the speed in voxels per substep differs. The ground is frictionless (a struck body leaves at
        the speed the impact gave it); the projectile and the target have friction 0.5 and
        restitution 0.5. Each case runs at PHASES: the projectile's front reaches x = 0 that far
        (a fraction of a detection interval) into the third interval after the start, and it
        starts higher by what it falls until then, so it arrives at the target's centre height.
        Figures, every substep over ARRIVE_AFTER + 0.5 s:
          deepest_m        how far the projectile's deepest point went past the struck face, while
                           within the target's thickness (in the target's frame, laterally over it)
          through_face     at some substep the whole projectile was past the struck face
          through_target   ... past the target's far face (for a plane: = through_face)
          end_depth_m      the same depth at the end
          leaving_ratio    the struck body's speed along -x 0.1 s after arrival over what momentum
                           and restitution give, (1 + e) m1 v / (m1 + m2); a static target: the
                           projectile's rebound over e v
          energy_gain_J    the bodies' energy (kinetic + potential, m g z), read at the end of each
                           detection interval, at its highest above the start; energy_rise_J its
                           largest rise over its lowest before (both also over the starting
                           kinetic energy, *_rel)
          energy_after_over_predicted  the energy 0.1 s after arrival over what momentum and
                           restitution leave (1: as asked; a pass-through keeps it all)
        The worst phase (through, then deepest) is the case's headline; every phase is kept.
mass    unit cubes (27 voxels, r = 1/6 m, sharp corners) and a plank 3 x 3 x 1/3 m (one voxel
        thick) stacked on the ground from rest, touching, for 2 s (friction 0.5, restitution 0):
          heavy_on_light_R   a cube R times the mass of the cube under it (R = 1, 10, 100, 1000)
          alternating_*      100:1 cubes alternating, light or heavy at the bottom
          plank_under_3x3_R  3 x 3 cubes, each R times the plank's mass, on the plank
          column_on_light_R  a column of 3 cubes, each R times the mass of the cube under them
        Figures: top_error_m, the top body's distance below its true height at the end (the
        heights from the voxel sizes: each layer exactly its side tall); deepest_sink_m, the most
        any body was below its true height at any substep; deepest_overlap_m, the deepest any
        body's bottom went into what it stands on; passed_through, whether a body's bottom went
        past the middle of the body under it (or half its own height into the ground), or it sank
        half the lower layer's height (what it stood on squeezed out); each body's sink at the end
        and the top's at 0.25-2 s.

    PYTHONPATH=. nice -n 10 .venv/bin/python bench/impacts.py --out bench/results/impacts_cpu_COMMIT.json
    ... --only fast --setting substeps_per_detection=1   (a SimulationSettings field, every case)
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
from addon.core.opencl_engine import OpenCLEngine  # noqa: E402
from addon.core.rotations import quaternion_to_matrix  # noqa: E402
from addon.core.shapes import box_particles, cube_particles  # noqa: E402
from bench.machine import commit, cpu_model, setting_overrides, write_report  # noqa: E402
from bench.scenes import uv_sphere  # noqa: E402

G = 9.81
PARTICLES_ACROSS = 3  # the automatic radius (addon/blender/voxelize_bodies.py): the smallest body 3 across
TARGET_SCALE = 3  # a target is this many projectile sides wide and tall (a body: also deep)
RESTITUTION = 0.5  # projectile and target
BODY = Material(friction=0.5, restitution=RESTITUTION)
FRICTIONLESS_GROUND = Material(friction=0.0, restitution=RESTITUTION)
# the projectile's front reaches the struck face this far (fractions of a detection interval) into
# the third interval after the start: how far it is from the face at the detection before differs,
# and with it whether a speculative contact is there in time
PHASES = (0.125, 0.375, 0.625, 0.875)
ARRIVE_AFTER_DETECTIONS = 2
AFTER_ARRIVAL_S = 0.5
LEAVING_AFTER_S = 0.1  # the leaving speed is read this long after arrival (the contact is over)
# (the energy is read at the end of each detection interval, a 60 Hz step at the defaults: within
# one, Box2D's order stops an impact in the solve passes and parts it only in the restitution passes
# of its last substep, and read between the two a bounce would look like a rise)
DENSITY = 1000.0
DEEP_ENOUGH = 0.005  # the "no deeper than a few millimetres": the tables bold what is deeper
MASS_SECONDS = 2.0
HEAVY_DENSITY = 7800.0  # steel; the light body is this over the ratio

PROJECTILES = {
    "ball_0.1": dict(shape="ball", size=0.1),
    "cube_0.1": dict(shape="cube", size=0.1),
    "cube_0.5": dict(shape="cube", size=0.5),
    "cube_2": dict(shape="cube", size=2.0),
}
SPEEDS = (5.0, 10.0, 20.0, 50.0, 100.0)
TARGETS = ("body", "plane", "mesh", "static_wall", "dynamic_wall")

# A stack from the ground up: each layer a ("cube" | "plank" | "row3x3", mass relative to the
# bottom layer's body) - a row3x3 is 3 x 3 cubes side by side, each of that relative mass
MASS_LAYOUTS = {
    **{f"heavy_on_light_{ratio:g}": [("cube", 1.0), ("cube", float(ratio))] for ratio in (1, 10, 100, 1000)},
    "alternating_4_light_bottom": [("cube", 1.0), ("cube", 100.0)] * 2,
    "alternating_6_light_bottom": [("cube", 1.0), ("cube", 100.0)] * 3,
    "alternating_6_heavy_bottom": [("cube", 100.0), ("cube", 1.0)] * 3,
    **{f"plank_under_3x3_{ratio:g}": [("plank", 1.0), ("row3x3", float(ratio))] for ratio in (10, 100, 1000)},
    **{f"column_on_light_{ratio:g}": [("cube", 1.0)] + [("cube", float(ratio))] * 3 for ratio in (100, 1000)},
}

# The one table of cases: every scene this benchmark runs, and the next step's fix runs
CASES = ([dict(kind="fast", name=f"{projectile}_{target}_{speed:g}", projectile=projectile, target=target,
               speed=speed) for projectile in PROJECTILES for target in TARGETS for speed in SPEEDS]
         + [dict(kind="mass", name=name, layers=layers) for name, layers in MASS_LAYOUTS.items()])


# -- shapes -----------------------------------------------------------------------------------

def box_mesh(lower, upper):
    """A closed box's 8 vertices and 12 triangles, wound outwards."""
    (x0, y0, z0), (x1, y1, z1) = lower, upper
    v = np.array([(x0, y0, z0), (x1, y0, z0), (x1, y1, z0), (x0, y1, z0),
                  (x0, y0, z1), (x1, y0, z1), (x1, y1, z1), (x0, y1, z1)], dtype=np.float64)
    quads = [(0, 3, 2, 1), (4, 5, 6, 7), (0, 1, 5, 4), (2, 3, 7, 6), (1, 2, 6, 5), (0, 4, 7, 3)]
    return v, np.array([t for a, b, c, d in quads for t in ((a, b, c), (a, c, d))])


def fibonacci_sphere(count: int = 96) -> np.ndarray:
    k = np.arange(count) + 0.5
    z = 1.0 - 2.0 * k / count
    phi = math.pi * (3.0 - math.sqrt(5.0)) * k
    rho = np.sqrt(1.0 - z * z)
    return np.stack([rho * np.cos(phi), rho * np.sin(phi), z], axis=1)


def projectile_body(spec: dict, radius: float):
    """(particles, add_body keywords, surface points in the body frame about its centre of mass):
    the points are what the depth is measured on (a cube's corners, the ball's sphere)."""
    size = spec["size"]
    if spec["shape"] == "cube":
        h = size / 2
        corners = np.array([(x, y, z) for x in (-h, h) for y in (-h, h) for z in (-h, h)])
        return cube_particles(size), dict(corner_reach=1.0), corners
    verts, tris = uv_sphere(size / 2)
    result = vox.voxelize(verts, tris, 2 * radius)
    centre = result.points.mean(0)
    return (result.points - centre, dict(corner_reach=result.corner_reach, support_spheres=result.support_spheres),
            fibonacci_sphere() * size / 2)


# -- fast bodies ------------------------------------------------------------------------------

def fast_scene(case: dict, phase: float, overrides: dict):
    """The engine and what the figures need: the projectile's and the target's bodies, masses,
    the target's frame (half extents about its centre, struck face at +x) and the arrival time."""
    spec = PROJECTILES[case["projectile"]]
    s = spec["size"]
    r = s / (2 * PARTICLES_ACROSS)
    span = TARGET_SCALE * s
    settings = SimulationSettings(**overrides)
    # the substep and the detection interval the settings give (the defaults: 1/240 s, 4)
    substep = settings.substep or settings.geometry.substep
    arrive = (ARRIVE_AFTER_DETECTIONS + phase) * settings.substeps_per_detection * substep
    builder = ModelBuilder(r)
    builder.add_ground_plane(0.0, material=FRICTIONLESS_GROUND)
    target = case["target"]
    centre_z = span / 2
    target_body = None
    # the target's frame: its origin (a body's: its centre, turning with it) and its half extents
    # there, the struck face at local x = +half[0] (a plane: its face at x = 0, no far side)
    origin = np.array([-span / 2, 0.0, span / 2])
    half = np.array([span / 2] * 3)
    n = TARGET_SCALE * PARTICLES_ACROSS
    if target == "body":
        target_body = builder.add_body(box_particles((n,) * 3, 2 * r), density=DENSITY, position=origin,
                                       material=BODY, corner_reach=1.0)
    elif target == "dynamic_wall":
        origin, half = np.array([-r, 0.0, span / 2]), np.array([r, span / 2, span / 2])
        target_body = builder.add_body(box_particles((1, n, n), 2 * r), density=DENSITY, position=origin,
                                       material=BODY, corner_reach=1.0)
    elif target == "plane":
        builder.add_ground_plane(normal=(1.0, 0.0, 0.0), point=(0.0, 0.0, 0.0), material=BODY)
        origin, half = np.array([-np.inf, 0.0, 0.0]), np.array([np.inf, np.inf, np.inf])
    elif target == "mesh":
        builder.add_static_mesh(*box_mesh((-span, -span / 2, 0.0), (0.0, span / 2, span)), material=BODY)
    elif target == "static_wall":
        origin, half = np.array([-r, 0.0, span / 2]), np.array([r, span / 2, span / 2])
        builder.add_static_particles(box_particles((1, n, n), 2 * r) + origin, material=BODY)
    else:
        raise ValueError(target)
    particles, keywords, surface = projectile_body(spec, r)
    front = -surface[:, 0].min()  # the projectile's reach towards -x from its centre
    v = case["speed"]
    start = (front + v * arrive, 0.0, centre_z + 0.5 * G * arrive**2)
    projectile = builder.add_body(particles, density=DENSITY, position=start, velocity=(-v, 0.0, 0.0),
                                  material=BODY, **keywords)
    engine = OpenCLEngine(builder.finalize(), settings)
    return engine, projectile, target_body, origin, half, surface, arrive, r


def body_energy(model, state) -> np.ndarray:
    """Each body's kinetic plus potential energy (J)."""
    rot = quaternion_to_matrix(state.orientation).reshape(-1, 3, 3)
    inertia = rot @ model.body_inertia_local @ np.swapaxes(rot, 1, 2)
    spin = np.einsum("bi,bij,bj->b", state.angular_velocity, inertia, state.angular_velocity)
    return (0.5 * model.body_mass * (state.velocity**2).sum(1) + 0.5 * spin
            - model.body_mass * (state.position @ np.asarray(SimulationSettings().gravity)))


def run_fast_phase(case: dict, phase: float, overrides: dict) -> dict:
    engine, projectile, target_body, origin, half, surface, arrive, r = fast_scene(case, phase, overrides)
    plane = not np.isfinite(half[0])
    model = engine.model
    m1 = float(model.body_mass[projectile])
    m2 = float(model.body_mass[target_body]) if target_body is not None else math.inf
    v = case["speed"]
    thickness = 2 * half[0]
    substeps = int(round((arrive + AFTER_ARRIVAL_S) / engine.params.substep))
    leaving_at = int(round((arrive + LEAVING_AFTER_S) / engine.params.substep))
    e0 = float(body_energy(model, engine.body_state()).sum())
    kinetic0 = 0.5 * m1 * v * v
    # energy, at the end of each detection interval: never above the start, never rising above
    # its lowest so far; and 0.1 s after arrival against what restitution leaves
    every = engine.settings.substeps_per_detection
    leaving_at = int(math.ceil(leaving_at / every)) * every
    highest = lowest = e0
    rise = 0.0
    energy_leaving = None
    deepest = 0.0
    through_face = through_target = False
    depth = 0.0
    leaving = rebound = None
    started = time.perf_counter()
    for k in range(1, substeps + 1):
        engine.step(1)
        state = engine.body_state()
        if k % every == 0:
            energy = float(body_energy(model, state).sum())
            highest = max(highest, energy)
            rise = max(rise, energy - lowest)
            lowest = min(lowest, energy)
        # the projectile's surface points in the target's frame (struck face at local x = +half[0])
        rot = quaternion_to_matrix(state.orientation[projectile])
        points = state.position[projectile] + surface @ rot.T
        if target_body is not None:
            t_rot = quaternion_to_matrix(state.orientation[target_body])
            local = (points - state.position[target_body]) @ t_rot
            centre_local = (state.position[projectile] - state.position[target_body]) @ t_rot
        elif plane:
            local, centre_local = points, state.position[projectile]
        else:
            local, centre_local = points - origin, state.position[projectile] - origin
        past = (0.0 if plane else half[0]) - local[:, 0]  # > 0: past the struck face
        lateral = plane | np.all(np.abs(local[:, 1:]) <= half[1:], axis=1)
        inside = lateral & (past > 0) & (past <= thickness)
        depth = float(past[inside].max()) if inside.any() else 0.0
        deepest = max(deepest, depth)
        over = plane or bool(np.all(np.abs(centre_local[1:]) <= half[1:]))
        if over and np.all(past > 0):
            through_face = True
        if over and np.all(past > thickness):
            through_target = True
        if k == leaving_at:
            if target_body is not None:
                leaving = float(-state.velocity[target_body, 0])
            rebound = float(state.velocity[projectile, 0])
            energy_leaving = energy
        if not np.all(np.isfinite(state.position)):
            break
    e = RESTITUTION
    out = {"phase": phase, "device": engine.device_name, "particle_radius_m": r, "arrive_s": arrive,
           "mass_projectile_kg": m1,
           "deepest_m": deepest, "through_face": through_face,
           "through_target": through_face if plane else through_target,
           "end_depth_m": depth,
           "energy_gain_J": highest - e0, "energy_gain_rel": (highest - e0) / kinetic0,
           "energy_rise_J": rise, "energy_rise_rel": rise / kinetic0,
           "wall_s": time.perf_counter() - started}
    if target_body is not None:
        predicted = (1 + e) * m1 * v / (m1 + m2)
        after = (m1 - e * m2) * v / (m1 + m2)  # the projectile's, along -x
        kinetic_after = 0.5 * m1 * after**2 + 0.5 * m2 * predicted**2
        out.update(mass_target_kg=m2, leaving_mps=leaving, predicted_leaving_mps=predicted,
                   leaving_ratio=leaving / predicted,
                   projectile_after_mps=-rebound, predicted_projectile_after_mps=after)
    else:
        kinetic_after = 0.5 * m1 * (e * v) ** 2
        out.update(leaving_mps=rebound, predicted_leaving_mps=e * v, leaving_ratio=rebound / (e * v))
    # the energy 0.1 s after arrival (less the starting potential energy) over what restitution
    # leaves: 1 as asked, > 1 energy kept that the impact should have taken (a pass-through keeps all)
    out["energy_after_over_predicted"] = (energy_leaving - e0 + kinetic0) / kinetic_after
    return out


def run_fast(case: dict, overrides: dict) -> dict:
    phases = [run_fast_phase(case, phase, overrides) for phase in PHASES]
    worst = max(phases, key=lambda p: (p["through_target"], p["through_face"], p["deepest_m"]))
    ratios = [p["leaving_ratio"] for p in phases]
    return {**{k: case[k] for k in ("kind", "name", "projectile", "target", "speed")},
            "size_m": PROJECTILES[case["projectile"]]["size"],
            "voxels_per_detection": case["speed"] * phases[0]["arrive_s"]
            / (ARRIVE_AFTER_DETECTIONS + PHASES[0]) / (2 * phases[0]["particle_radius_m"]),
            "deepest_m": worst["deepest_m"], "through_face": any(p["through_face"] for p in phases),
            "through_target": any(p["through_target"] for p in phases),
            "end_depth_m": max(p["end_depth_m"] for p in phases),
            "leaving_ratio_min": min(ratios), "leaving_ratio_max": max(ratios),
            "energy_gain_rel": max(p["energy_gain_rel"] for p in phases),
            "energy_rise_rel": max(p["energy_rise_rel"] for p in phases),
            "energy_after_over_predicted_max": max(p["energy_after_over_predicted"] for p in phases),
            "phases": phases}


# -- heavy on light ---------------------------------------------------------------------------

MASS_RADIUS = 1.0 / 6.0
PLANK = (3.0, 3.0, 1.0 / 3.0)


def mass_model(case: dict):
    """The stack's model, each body's true resting height, the layer each body is in and each
    layer's (bottom, height)."""
    builder = ModelBuilder(MASS_RADIUS)
    material = Material(friction=0.5, restitution=0.0)
    d = 2 * MASS_RADIUS
    base_mass = None
    heights, layer_of, tops = [], [], []
    z = 0.0
    for layer, (shape, relative) in enumerate(case["layers"]):
        if shape == "plank":
            particles = box_particles(tuple(int(round(x / d)) for x in PLANK), d)
            height, positions = PLANK[2], [(0.0, 0.0)]
        elif shape == "cube":
            particles, height, positions = cube_particles(1.0), 1.0, [(0.0, 0.0)]
        else:  # row3x3
            particles, height = cube_particles(1.0), 1.0
            positions = [(x, y) for x in (-1.0, 0.0, 1.0) for y in (-1.0, 0.0, 1.0)]
        count = len(particles)
        if base_mass is None:
            base_mass = HEAVY_DENSITY / max(relative for _, relative in case["layers"]) * count * d**3
        for x, y in positions:
            builder.add_body(particles, mass=base_mass * relative, position=(x, y, z + height / 2),
                             material=material, corner_reach=1.0)
            heights.append(z + height / 2)
            layer_of.append(layer)
        tops.append((z, height))
        z += height
    builder.add_ground_plane(0.0, material=material)
    return builder.finalize(), np.array(heights), np.array(layer_of), tops


def mass_scene(case: dict, overrides: dict):
    """The stack's engine, each body's true resting height, the layer each body is in and each
    layer's (bottom, height)."""
    model, heights, layer_of, tops = mass_model(case)
    return OpenCLEngine(model, SimulationSettings(**overrides)), heights, layer_of, tops


def run_mass(case: dict, overrides: dict) -> dict:
    engine, true_z, layer_of, layers = mass_scene(case, overrides)
    substeps = int(round(MASS_SECONDS / engine.params.substep))
    half = np.array([layers[k][1] / 2 for k in layer_of])
    width = np.array([(PLANK[0] if layers[k][1] < 1.0 else 1.0) / 2 for k in layer_of])
    # each body and the bodies of the layer under it it stands on (-1: the ground)
    under = [np.flatnonzero(layer_of == layer_of[k] - 1) if layer_of[k] else np.array([-1]) for k in range(len(true_z))]
    sink_limit = np.array([layers[k - 1][1] / 2 if k else layers[0][1] / 2 for k in layer_of])
    deepest = np.zeros(len(true_z))
    deepest_overlap = 0.0
    passed = False
    top = np.flatnonzero(layer_of == layer_of.max())
    checkpoints = {int(round(t / engine.params.substep)): t for t in (0.25, 0.5, 1.0, 1.5)}
    top_sink_at = {}
    started = time.perf_counter()
    for substep in range(1, substeps + 1):
        engine.step(1)
        position = engine.body_state().position
        z = position[:, 2]
        deepest = np.maximum(deepest, true_z - z)
        passed = passed or bool(np.any(true_z - z > sink_limit))
        # how far each body's bottom is into what it stands on (a lower body it still overlaps
        # sideways, or the ground); past the middle of that body (or half its own height into the
        # ground) it has passed through, and so has one below its true height by half the layer
        # under it (what it stood on went from under it: squeezed out, or pushed into the ground)
        for k in range(len(z)):
            for j in under[k]:
                if j < 0:
                    overlap, limit = -(z[k] - half[k]), half[k]
                else:
                    if np.any(np.abs(position[k, :2] - position[j, :2]) >= width[k] + width[j]):
                        continue
                    overlap, limit = (z[j] + half[j]) - (z[k] - half[k]), half[j]
                deepest_overlap = max(deepest_overlap, overlap)
                passed = passed or overlap > limit
        if substep in checkpoints:
            top_sink_at[f"{checkpoints[substep]:g}"] = float((true_z - z)[top].max())
    state = engine.body_state()
    z = state.position[:, 2]
    sink_end = true_z - z
    top_sink_at[f"{MASS_SECONDS:g}"] = float(sink_end[top].max())
    masses = engine.model.body_mass
    return {"kind": "mass", "name": case["name"], "layers": [list(layer) for layer in case["layers"]],
            "mass_ratio_max": float(masses.max() / masses.min()),
            "top_error_m": float(sink_end[top].max()), "top_error_at_s": top_sink_at,
            "deepest_sink_m": float(deepest.max()),
            "deepest_overlap_m": float(deepest_overlap), "passed_through": bool(passed),
            "sink_end_m": sink_end.tolist(), "deepest_sink_each_m": deepest.tolist(),
            "lateral_drift_m": float(np.linalg.norm(state.position[:, :2] - engine.model.body_position[:, :2],
                                                    axis=1).max()),
            "speed_at_end_mps": float(np.linalg.norm(state.velocity, axis=1).max()),
            "true_top_height_m": float(true_z[top].max()),
            "slop_per_contact_m": engine.settings.solve_slop * MASS_RADIUS, "device": engine.device_name,
            "wall_s": time.perf_counter() - started}


def run_case(case: dict, overrides: dict) -> dict:
    return run_fast(case, overrides) if case["kind"] == "fast" else run_mass(case, overrides)


def length(metres: float) -> str:
    return f"{metres * 100:.1f} cm" if metres >= 0.01 else f"{metres * 1000:.1f} mm"


def tables(report: dict) -> str:
    """The report as docs/experiments/impacts.md's tables (markdown): each fast case's worst phase
    (through: out of the target's far side; inside: wholly past the struck face; else the deepest
    point past it, bold over DEEP_ENOUGH), the struck body's leaving speed over momentum and
    restitution's (the phases' range) and the energy gained; each mass case's figures."""
    fast = [c for c in report["cases"] if c["kind"] == "fast"]
    speeds = sorted({c["speed"] for c in fast})
    head = "| projectile | target | " + " | ".join(f"{v:g} m/s" for v in speeds) + " |"
    rule = "| --- | --- | " + " | ".join("---" for _ in speeds) + " |"
    depth_rows, ratio_rows = [head, rule], [head, rule]
    for projectile in dict.fromkeys(c["projectile"] for c in fast):
        for target in dict.fromkeys(c["target"] for c in fast):
            row = {c["speed"]: c for c in fast if c["projectile"] == projectile and c["target"] == target}
            if not row:
                continue
            depth, ratio = [], []
            for v in speeds:
                c = row[v]
                if c["through_target"] and c["target"] not in ("plane",):
                    cell = "**through**"
                elif c["through_face"]:
                    cell = f"**inside** {length(c['deepest_m'])}"
                elif c["deepest_m"] > DEEP_ENOUGH:
                    cell = f"**{length(c['deepest_m'])}**"
                else:
                    cell = length(c["deepest_m"])
                if c["energy_gain_rel"] > 0.01:
                    cell += f", energy **x{1 + c['energy_gain_rel']:.3g}**"
                depth.append(cell)
                low, high = (0.0 if abs(c[k]) < 5e-3 else c[k] for k in ("leaving_ratio_min", "leaving_ratio_max"))
                digits = 3 if high - low < 0.05 else 2
                text = f"{low:.3f}" if high - low < 5e-4 else f"{low:.{digits}f} to {high:.{digits}f}"
                ratio.append(f"**{text}**" if low < 0.95 or high > 1.05 else text)
            depth_rows.append(f"| {projectile} | {target} | " + " | ".join(depth) + " |")
            ratio_rows.append(f"| {projectile} | {target} | " + " | ".join(ratio) + " |")
    mass_rows = ["| case | mass ratio (heaviest over lightest) | top's error at 2 s | deepest sink | deepest overlap "
                 "| passed through | sideways drift | top's error at 0.25 / 0.5 / 1 / 1.5 s |",
                 "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for c in report["cases"]:
        if c["kind"] != "mass":
            continue
        at = " / ".join(length(c["top_error_at_s"][t]) for t in ("0.25", "0.5", "1", "1.5"))
        mass_rows.append(f"| {c['name']} | {c['mass_ratio_max']:g} | {length(c['top_error_m'])} | "
                         f"{length(c['deepest_sink_m'])} | {length(c['deepest_overlap_m'])} | "
                         f"{'**yes**' if c['passed_through'] else 'no'} | {length(c['lateral_drift_m'])} | {at} |")
    return "\n".join(["Deepest point past the struck face (worst of the phases):", "", *depth_rows, "",
                      "Struck body's leaving speed over momentum and restitution's (a static target: the "
                      "projectile's rebound over e v), over the phases:", "", *ratio_rows, "",
                      "Heavy on light:", "", *mass_rows]) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", choices=("fast", "mass"), default=["fast", "mass"])
    parser.add_argument("--case", action="append", default=[], help="run only the cases whose name starts so")
    parser.add_argument("--setting", action="append", default=[], help="a SimulationSettings field, name=value")
    parser.add_argument("--label", default="", help="what variant this run measures")
    parser.add_argument("--out", default=None)
    parser.add_argument("--table", default=None, help="print this report's tables (markdown) and stop")
    args = parser.parse_args(argv)
    if args.table:
        print(tables(json.loads(Path(args.table).read_text())), end="")
        return 0
    overrides = setting_overrides(args.setting)
    cases = [c for c in CASES if c["kind"] in args.only
             and (not args.case or any(c["name"].startswith(prefix) for prefix in args.case))]
    results = []
    started = time.perf_counter()
    for case in cases:
        result = run_case(case, overrides)
        results.append(result)
        if case["kind"] == "fast":
            print(f"{case['name']:28s} deepest {result['deepest_m']:.4f} m  through face/target "
                  f"{result['through_face']:d}/{result['through_target']:d}  leaving x{result['leaving_ratio_min']:.3f}"
                  f"-{result['leaving_ratio_max']:.3f}  energy gain {result['energy_gain_rel']:.2g} rise "
                  f"{result['energy_rise_rel']:.2g} after/predicted {result['energy_after_over_predicted_max']:.3g}",
                  file=sys.stderr, flush=True)
        else:
            print(f"{case['name']:28s} top {result['top_error_m']:.4f} m  deepest sink {result['deepest_sink_m']:.4f} m"
                  f"  overlap {result['deepest_overlap_m']:.4f} m  passed {result['passed_through']:d}  drift "
                  f"{result['lateral_drift_m']:.3f} m", file=sys.stderr, flush=True)
    settings = SimulationSettings(**overrides)
    report = {"benchmark": "bench/impacts.py", "label": args.label, "commit": commit(), "cpu_model": cpu_model(),
              "cpu_count": os.cpu_count(), "host": platform.node(), "python": platform.python_version(),
              "device": next((p["device"] for r in results for p in r.get("phases", [r])), None),
              "settings": overrides,
              "defaults": {"substep_s": settings.substep or settings.geometry.substep,
                           "substeps_per_detection": settings.substeps_per_detection,
                           "solve_passes": settings.solve_passes, "relax_passes": settings.relax_passes,
                           "speculative_margin_radii": settings.speculative_margin},
              "phases": list(PHASES), "wall_s": time.perf_counter() - started, "cases": results}
    write_report(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
