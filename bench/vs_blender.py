"""Particle Rigid Bodies vs Blender's own rigid-body world (Bullet): N cubes falling into a pile.

    PYTHONPATH=. .venv/bin/python bench/vs_blender.py                           # N = 100, 1000, 3000; 250 frames
    PYTHONPATH=. .venv/bin/python bench/vs_blender.py --sizes 100 1000 --frames 60  # quick run

For every N the same scene is built twice with the bpy module (identical cube transforms, a passive
100 x 100 x 1 m box as the ground with its top at z = 0, friction 0.5, bounciness 0, Blender's default
damping 0.04 / 0.1 on both sides) and run through the frame range 1..F:

(a) Blender: rigid-body world at its defaults (10 substeps per frame, 10 solver iterations), cubes
    active with box shape, ground passive; ``bpy.ops.rigidbody.bake_to_keyframes`` (with a
    ``context.temp_override`` onto the VIEW_3D area of the bpy module's window) from an empty cache.
    It first steps the scene through all frames (that is the simulation) and then keys every frame.
    A ``frame_change_post`` handler timestamps the first pass: simulation ms per frame.
(b) Ours: ``bpy.ops.prb.simulate_bake()`` (headless: ``execute`` runs the job to the end) on the CPU
    OpenCL device. ``Simulation.frames`` is wrapped here (benchmark instrumentation only) to timestamp
    each frame; total = the operator call (conversion, kernel build, simulation, key writing).

The settled result is then read the same way for both (keys evaluated at the last two frames): pile
height, footprint radius, fraction of cubes at rest. Writes JSON and a PNG chart; with ``--profile N``
also splits one of our substeps into kernels (device events) and host time.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("BLENDER_USER_RESOURCES", tempfile.mkdtemp(prefix="prb-bench-user-"))

import bpy  # noqa: E402
import numpy as np  # noqa: E402

from addon.core.settings import CONTACT_GEOMETRIES, ROLE_DYNAMIC, ROLE_STATIC  # noqa: E402
from bench.machine import cpu_model  # noqa: E402

FRICTION = 0.5
BOUNCINESS = 0.0
LINEAR_DAMPING = 0.04   # Blender's rigid-body defaults, used for both engines
ANGULAR_DAMPING = 0.1
DENSITY = 1000.0        # kg/m^3: a 1 m cube weighs 1000 kg in both
SPACING = 1.8           # > sqrt(3): randomly rotated unit cubes never overlap at the start
JITTER = 0.03           # horizontal jitter (m); SPACING - 2 * JITTER > sqrt(3)
REST_SPEED = 0.1        # m/s: "at rest" when the centre moves slower than this ...
REST_SPIN = 0.2         # rad/s: ... and it turns slower than this between the last two frames


# ------------------------------------------------------------------------------------------------
# scene
def placement(count: int, seed: int = 0):
    """(count, 3) cube centres and (count, 3) Euler XYZ angles: a block about as wide as tall, random rotations."""
    rng = np.random.default_rng(seed)
    per_row = max(1, math.ceil((count / 2) ** (1 / 3) * 1.26))
    idx = np.arange(count)
    layer, cell = np.divmod(idx, per_row * per_row)
    ix, iy = np.divmod(cell, per_row)
    centre = (per_row - 1) / 2
    pos = np.stack([(ix - centre) * SPACING, (iy - centre) * SPACING, SPACING / 2 + layer * SPACING], 1).astype(float)
    pos[:, :2] += rng.uniform(-JITTER, JITTER, size=(count, 2))
    # uniformly random rotations (random unit quaternion) expressed as Euler XYZ
    q = rng.normal(size=(count, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    from mathutils import Quaternion

    euler = np.array([tuple(Quaternion(tuple(qi)).to_euler("XYZ")) for qi in q])
    return pos, euler


def box_mesh(name: str, sx: float, sy: float, sz: float):
    hx, hy, hz = sx / 2, sy / 2, sz / 2
    verts = [(x, y, z) for x in (-hx, hx) for y in (-hy, hy) for z in (-hz, hz)]
    faces = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata(verts, [], faces)
    mesh.update()
    return mesh


def build_scene(count: int, frames: int, seed: int = 0):
    """Fresh scene: ground box and ``count`` unit cubes (one shared mesh). Returns (scene, cubes, ground)."""
    pos, euler = placement(count, seed)
    return scene_with_cubes(pos, frames, euler=euler)


def scene_with_cubes(positions, frames: int, euler=None, quaternions=None):
    """Fresh scene at 24 fps: the ground box and a unit cube (one shared mesh) at each position,
    rotated by Euler angles or by (w, x, y, z) quaternions. Returns (scene, cubes, ground)."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    scene.render.fps, scene.render.fps_base = 24, 1.0
    scene.frame_set(1)
    ground = bpy.data.objects.new("Ground", box_mesh("GroundMesh", 100.0, 100.0, 1.0))
    ground.location = (0.0, 0.0, -0.5)
    scene.collection.objects.link(ground)
    mesh = box_mesh("CubeMesh", 1.0, 1.0, 1.0)
    cubes = []
    for i, position in enumerate(positions):
        obj = bpy.data.objects.new(f"Cube{i:05d}", mesh)
        obj.location = tuple(position)
        if quaternions is not None:
            obj.rotation_mode = "QUATERNION"
            obj.rotation_quaternion = tuple(quaternions[i])
        elif euler is not None:
            obj.rotation_euler = tuple(euler[i])
        scene.collection.objects.link(obj)
        cubes.append(obj)
    bpy.context.view_layer.update()
    return scene, cubes, ground


def view3d_override():
    window = bpy.context.window_manager.windows[0]
    area = next(a for a in window.screen.areas if a.type == "VIEW_3D")
    region = next(r for r in area.regions if r.type == "WINDOW")
    return dict(window=window, screen=window.screen, area=area, region=region)


def select_only(objects, active):
    view_layer = bpy.context.view_layer
    for o in bpy.context.scene.objects:
        o.select_set(False)
    for o in objects:
        o.select_set(True)
    view_layer.objects.active = active


# ------------------------------------------------------------------------------------------------
# settled result, read the same way for both engines (keys evaluated at the last two frames)
def world_matrices(objects) -> np.ndarray:
    return np.array([np.array(o.matrix_world) for o in objects])


def pile_stats(scene, cubes, frames: int) -> dict:
    fps = scene.render.fps / scene.render.fps_base
    scene.frame_set(frames - 1)
    before = world_matrices(cubes)
    scene.frame_set(frames)
    after = world_matrices(cubes)
    centres = after[:, :3, 3]
    corners = np.array([(x, y, z, 1.0) for x in (-.5, .5) for y in (-.5, .5) for z in (-.5, .5)])
    top = np.einsum("bij,cj->bci", after, corners)[:, :, 2].max(axis=1)  # highest corner of each cube
    xy = centres[:, :2] - np.median(centres[:, :2], axis=0)
    radial = np.linalg.norm(xy, axis=1)
    speed = np.linalg.norm(after[:, :3, 3] - before[:, :3, 3], axis=1) * fps
    rel = np.einsum("bji,bjk->bik", before[:, :3, :3], after[:, :3, :3])
    cos = np.clip((np.trace(rel, axis1=1, axis2=2) - 1) / 2, -1, 1)
    spin = np.arccos(cos) * fps
    at_rest = (speed < REST_SPEED) & (spin < REST_SPIN)
    return {
        "pile_height_m": float(top.max()),              # highest cube corner
        "pile_height_p95_m": float(np.percentile(top, 95)),
        "mean_centre_height_m": float(centres[:, 2].mean()),
        "footprint_radius_m": float(np.percentile(radial, 90)),  # 90 % of cube centres lie within
        "footprint_radius_max_m": float(radial.max()),
        "fraction_at_rest": float(at_rest.mean()),
        "below_ground": int((centres[:, 2] < 0).sum()),
        "max_speed_mps": float(speed.max()),
    }


def frame_timing(stamps: list[float]) -> dict:
    dt = np.diff(np.asarray(stamps)) * 1e3
    return {
        "sim_ms_per_frame": float(dt.mean()),
        "sim_ms_per_frame_median": float(np.median(dt)),
        "sim_ms_per_frame_p10": float(np.percentile(dt, 10)),
        "sim_ms_per_frame_p90": float(np.percentile(dt, 90)),
        "sim_s": float(dt.sum() / 1e3),
    }


# ------------------------------------------------------------------------------------------------
# (a) Blender's rigid-body world
def add_bullet_world(scene, cubes, ground, frames: int, friction: float = FRICTION,
                     restitution: float = BOUNCINESS, linear_damping: float = LINEAR_DAMPING,
                     angular_damping: float = ANGULAR_DAMPING):
    """Blender's rigid-body world at its defaults: cubes active boxes, ground passive; returns the world."""
    with bpy.context.temp_override(**view3d_override()):
        bpy.ops.rigidbody.world_add()
        rbw = scene.rigidbody_world
        rbw.point_cache.frame_start, rbw.point_cache.frame_end = 1, frames
        select_only(cubes, cubes[0])
        bpy.ops.rigidbody.objects_add(type="ACTIVE")
        select_only([ground], ground)
        bpy.ops.rigidbody.object_add(type="PASSIVE")
    for obj in cubes + [ground]:
        rb = obj.rigid_body
        rb.collision_shape = "BOX"
        rb.friction = friction
        rb.restitution = restitution
        if rb.type == "ACTIVE":
            rb.mass = DENSITY * 1.0
            rb.linear_damping, rb.angular_damping = linear_damping, angular_damping
    return rbw


def run_blender(count: int, frames: int, seed: int, friction: float = FRICTION) -> dict:
    t_build = time.perf_counter()
    scene, cubes, ground = build_scene(count, frames, seed)
    rbw = add_bullet_world(scene, cubes, ground, frames, friction)
    settings = {"friction": friction, "substeps_per_frame": rbw.substeps_per_frame, "solver_iterations": rbw.solver_iterations,
                "collision_margin": cubes[0].rigid_body.collision_margin,
                "use_margin": cubes[0].rigid_body.use_margin}
    build_s = time.perf_counter() - t_build
    scene.frame_set(1)
    select_only(cubes, cubes[0])

    stamps: list[float] = []

    def on_frame(scene_, *_):
        if len(stamps) < frames:  # first pass of bake_to_keyframes = the simulation
            stamps.append(time.perf_counter())

    bpy.app.handlers.frame_change_post.append(on_frame)
    try:
        t0 = time.perf_counter()
        with bpy.context.temp_override(**view3d_override()):
            result = bpy.ops.rigidbody.bake_to_keyframes(frame_start=1, frame_end=frames)
        total_s = time.perf_counter() - t0
    finally:
        bpy.app.handlers.frame_change_post.remove(on_frame)
    if result != {"FINISHED"}:
        raise RuntimeError(f"bake_to_keyframes returned {result}")
    keyed = sum(1 for o in cubes if o.animation_data and o.animation_data.action)
    timing = frame_timing(stamps)  # stamps[0] is frame 1 (initial state); F - 1 simulated frames
    out = {
        "engine": "blender_bullet",
        "method": "bpy.ops.rigidbody.bake_to_keyframes with temp_override(VIEW_3D area), from an empty cache",
        "settings": settings,
        "build_scene_s": build_s,
        "total_s": total_s,
        "keys_s": total_s - (stamps[-1] - t0),  # after the last simulated frame: keyframe pass
        "keyed_objects": keyed,
        **timing,
    }
    out["stats"] = pile_stats(scene, cubes, frames)
    return out


# ------------------------------------------------------------------------------------------------
# (b) ours: Simulate & Bake operator
_frame_stamps: list[float] = []
_sims: list = []


def _instrument_simulation():
    from addon.core.simulation import Simulation

    if getattr(Simulation.frames, "_vs_blender", False):
        return
    original = Simulation.frames

    def frames(self, count):
        _sims.append(self)
        for result in original(self, count):
            _frame_stamps.append(time.perf_counter())
            yield result

    frames._vs_blender = True
    Simulation.frames = frames


def set_our_roles(scene, cubes, ground, device: str, radius: float | None = None,
                  contact_geometry: str | None = None) -> None:
    """Our add-on's settings for the same scene: cubes dynamic, ground static, same materials."""
    for obj in cubes:
        p = obj.prb
        p.role = ROLE_DYNAMIC
        p.mass_mode, p.density = "DENSITY", DENSITY
        p.friction, p.bounciness = FRICTION, BOUNCINESS
        p.linear_damping, p.angular_damping = LINEAR_DAMPING, ANGULAR_DAMPING
    ground.prb.role = ROLE_STATIC
    ground.prb.friction, ground.prb.bounciness = FRICTION, BOUNCINESS
    s = scene.prb_settings
    s.use_scene_frame_range = True
    s.device = device  # an enum item: the selector ("P:D") of the chosen device
    if radius:  # finer particles: flatter faces and sharper edges, more particles
        s.radius_mode, s.particle_radius = "MANUAL", radius
    if contact_geometry:  # the panel's Contacts (its own automatic stiffness)
        s.contact_geometry = contact_geometry


def run_ours(count: int, frames: int, seed: int, device: str, radius: float | None = None,
             contact_geometry: str | None = None) -> dict:
    _instrument_simulation()
    t_build = time.perf_counter()
    scene, cubes, ground = build_scene(count, frames, seed)
    set_our_roles(scene, cubes, ground, device, radius, contact_geometry)
    build_s = time.perf_counter() - t_build
    select_only([], None)
    _frame_stamps.clear()
    _sims.clear()
    t0 = time.perf_counter()
    result = bpy.ops.prb.simulate_bake()
    total_s = time.perf_counter() - t0
    if result != {"FINISHED"}:
        raise RuntimeError(f"prb.simulate_bake returned {result}")
    sim = _sims[-1]
    timing = frame_timing(_frame_stamps)  # stamp 0: initial state read back; F - 1 simulated frames
    keyed = sum(1 for o in cubes if o.animation_data and o.animation_data.action)
    out = {
        "engine": "particle_rigid_bodies",
        "method": "bpy.ops.prb.simulate_bake() (execute runs the job to the end headless)",
        "device": sim.device_name,
        "settings": {"substeps_per_frame": sim.substeps_per_frame, "substep_s": sim.substep,
                     "particles": int(sim.model.particle_count), "particle_radius": float(sim.model.particle_radius)},
        "build_scene_s": build_s,
        "total_s": total_s,
        "setup_s": _frame_stamps[0] - t0,            # conversion + engine/kernel build + first read back
        "keys_s": total_s - (_frame_stamps[-1] - t0),  # after the last frame: key writing
        "ms_per_substep": 1e3 * sim.wall_seconds / (sim.substeps_per_frame * (len(_frame_stamps) - 1)),
        "keyed_objects": keyed,
        **timing,
    }
    out["stats"] = pile_stats(scene, cubes, frames)
    return out


# ------------------------------------------------------------------------------------------------
# profile of ours: kernels (device events) vs host
def profile_ours(count: int, frames_for_profile: int, seed: int, device: str) -> dict:
    from addon.blender.bake_objects import pick_objects
    from addon.blender.bake_options import BakeOptions
    from addon.blender.job import BakeJob
    from addon.core.opencl_engine import OpenCLEngine

    scene, cubes, ground = build_scene(count, 250, seed)
    set_our_roles(scene, cubes, ground, device)  # the same scene and materials as run_ours
    select_only([], None)
    dynamic, static = pick_objects(bpy.context)
    job = BakeJob(bpy.context, dynamic, static, BakeOptions.from_scene(scene))
    job.start()
    sim = job.sim
    model, settings, spf = sim.model, sim.settings, sim.substeps_per_frame
    # advance the unprofiled job into the pile phase (contacts everywhere), then copy nothing: the
    # profiled engine is a fresh one stepped through the same fall (it starts from the initial state)
    engine = OpenCLEngine(model, settings, profile=True)
    warm = spf * 24  # one simulated second: the block has landed and tumbles into the pile
    engine.step(warm)
    engine.queue.finish()
    engine.collect_profile()
    engine.stage_seconds.clear()
    steps = spf * frames_for_profile
    t0 = time.perf_counter()
    for _ in range(frames_for_profile):
        engine.step(spf)
        engine.body_poses()  # read back per frame, as Simulation.frames does
    wall = time.perf_counter() - t0
    stages = engine.collect_profile()
    device_s = sum(stages.values())
    # same frames without profiling events, for the un-instrumented wall time
    plain = OpenCLEngine(model, settings, profile=False)
    plain.step(warm)
    plain.queue.finish()
    t1 = time.perf_counter()
    for _ in range(frames_for_profile):
        plain.step(spf)
        plain.body_poses()
    plain_wall = time.perf_counter() - t1
    # host cost of enqueueing alone (no waiting): enqueue one frame's substeps and time the Python side
    plain.queue.finish()
    t2 = time.perf_counter()
    plain.step(spf)
    enqueue_s = time.perf_counter() - t2
    plain.queue.finish()
    job.cancel()
    return {
        "bodies": model.body_count, "particles": int(model.particle_count), "substeps_per_frame": spf,
        "profiled_from_simulated_s": warm * settings.substep, "substeps_profiled": steps,
        "stage_ms_per_substep": {k: 1e3 * v / steps for k, v in sorted(stages.items(), key=lambda kv: -kv[1])},
        "stage_share": {k: v / device_s for k, v in sorted(stages.items(), key=lambda kv: -kv[1])},
        "device_ms_per_substep": 1e3 * device_s / steps,
        "wall_ms_per_substep_profiled": 1e3 * wall / steps,
        "wall_ms_per_substep_plain": 1e3 * plain_wall / steps,
        "host_ms_per_substep_rest": 1e3 * (wall - device_s) / steps,
        "enqueue_ms_per_substep": 1e3 * enqueue_s / spf,
    }


# ------------------------------------------------------------------------------------------------
def compare(blender: dict, ours: dict) -> dict:
    out = {"speedup_total": blender["total_s"] / ours["total_s"],
           "speedup_sim_per_frame": blender["sim_ms_per_frame"] / ours["sim_ms_per_frame"]}
    for key in ("pile_height_m", "footprint_radius_m", "fraction_at_rest"):
        b, o = blender["stats"][key], ours["stats"][key]
        out[f"{key}_rel_diff"] = (o - b) / b if b else float("nan")
    out["pile_within_20pct"] = all(abs(out[f"{k}_rel_diff"]) <= 0.2
                                   for k in ("pile_height_m", "footprint_radius_m", "fraction_at_rest"))
    out["target_2x_met"] = out["speedup_total"] >= 2.0 and out["pile_within_20pct"]
    return out


def summarize(runs: list[dict]) -> dict:
    """Mean and spread over repeats of the headline figures."""
    keys = ("sim_ms_per_frame", "total_s", "keys_s")
    out = {}
    for k in keys:
        values = [r[k] for r in runs]
        out[k] = {"mean": statistics.fmean(values), "min": min(values), "max": max(values), "n": len(values)}
    return out


def plot(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [r["cubes"] for r in report["results"]]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    width = 0.38
    x = np.arange(len(sizes))
    for ax, key, label in ((axes[0], "sim_ms_per_frame", "simulation, ms per frame"),
                           (axes[1], "total_s", "simulate + bake keys, total s")):
        for j, (eng, name, color) in enumerate((("blender", "Blender (Bullet, defaults)", "#4c72b0"),
                                                ("ours", "Particle Rigid Bodies (CPU OpenCL)", "#dd8452"))):
            s = [r[eng + "_summary"][key] for r in report["results"]]
            mean = np.array([v["mean"] for v in s])
            err = np.array([[v["mean"] - v["min"] for v in s], [v["max"] - v["mean"] for v in s]])
            bars = ax.bar(x + (j - 0.5) * width, mean, width, yerr=err, capsize=3, label=name, color=color)
            ax.bar_label(bars, fmt="%.3g", fontsize=8)
        ax.set_xticks(x, [f"{n} cubes" for n in sizes])
        ax.set_yscale("log")
        lows = [r[e + "_summary"][key]["min"] for r in report["results"] for e in ("blender", "ours")]
        highs = [r[e + "_summary"][key]["max"] for r in report["results"] for e in ("blender", "ours")]
        ax.set_ylim(bottom=min(lows) / 3, top=max(highs) * 4)  # room for the legend above the bars
        ax.set_title(label)
    axes[0].legend(fontsize=8, loc="upper left")
    ax = axes[2]
    stats = ("pile_height_m", "footprint_radius_m", "fraction_at_rest")
    for i, r in enumerate(report["results"]):
        b, o = r["blender"][0]["stats"], r["ours"][0]["stats"]
        ratios = [o[k] / b[k] if b[k] else np.nan for k in stats]
        ax.plot(np.arange(3), ratios, "o-", label=f"{r['cubes']} cubes")
    ax.axhspan(0.8, 1.2, color="0.9", zorder=0, label="within 20 %")
    ax.axhline(1.0, color="0.5", lw=0.8)
    ax.set_xticks(np.arange(3), ["pile height", "footprint radius", "fraction at rest"])
    ax.set_title("settled pile: ours / Blender")
    ax.legend(fontsize=8)
    fig.suptitle(f"{report['frames']} frames at 24 fps, {report['cpu_count']}-core CPU "
                 f"({report['cpu_model']}), load {report['load_before'][0]:.1f}", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 3000])
    p.add_argument("--frames", type=int, default=250, help="frame range 1..F for both engines")
    p.add_argument("--repeat", type=int, default=1, help="runs of each engine per size (spread)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--blender-friction", type=float, default=FRICTION,
                   help="Blender's friction setting (Bullet multiplies the pair: 0.7071 gives an effective 0.5 as ours)")
    p.add_argument("--device", default="cpu", help="OpenCL device selector for ours (default: cpu)")
    p.add_argument("--ours-radius", type=float, default=None,
                   help="particle radius for ours (default: automatic, 1/6 of a cube's side: 27 per cube)")
    p.add_argument("--ours-contacts", choices=CONTACT_GEOMETRIES, default=None,
                   help="contact geometry for ours (default: the scene's default, the core's)")
    p.add_argument("--skip-blender", action="store_true", help="run ours only (tuning; no comparison written)")
    p.add_argument("--profile", type=int, default=0, metavar="N", help="also profile ours at N cubes")
    p.add_argument("--profile-frames", type=int, default=3)
    p.add_argument("--out", default=str(ROOT / "out" / "vs_blender.json"))
    p.add_argument("--png", default=str(ROOT / "out" / "vs_blender.png"))
    p.add_argument("--note", default="", help="free text stored in the JSON")
    p.add_argument("--plot-only", metavar="JSON", help="draw the chart (--png) of an earlier run's JSON and stop")
    args = p.parse_args(argv)

    if args.plot_only:
        plot(json.loads(Path(args.plot_only).read_text()), Path(args.png))
        print(f"wrote {args.png}")
        return 0
    if args.png and not args.skip_blender:
        try:  # before the long runs, not after them
            import matplotlib  # noqa: F401
        except ImportError:
            p.error("the chart needs matplotlib: make bench-venv (requirements-bench.txt), or pass --png ''")

    import addon.blender as addon_blender

    addon_blender.register()
    try:
        from addon.core.device import choose_device

        chosen = choose_device(args.device)
        device_label = chosen.label
        args.device = chosen.selector  # Scene.prb_settings.device is an enum of selectors
        report = {
            "benchmark": "bench/vs_blender.py",
            "frames": args.frames, "frame_rate": 24, "sizes": args.sizes, "repeat": args.repeat,
            "scene": {"cube_side_m": 1.0, "spacing_m": SPACING, "rotations": "uniform random", "seed": args.seed,
                      "ground": "100 x 100 x 1 m box, top at z=0 (Blender: passive, box shape; ours: static collider)",
                      "friction": FRICTION, "blender_friction_setting": args.blender_friction, "bounciness": BOUNCINESS, "density_kg_m3": DENSITY,
                      "linear_damping": LINEAR_DAMPING, "angular_damping": ANGULAR_DAMPING,
                      "friction_combination": "Bullet multiplies the two objects' friction (0.5*0.5 = 0.25 cube-cube); "
                                              "ours uses sqrt(mu_a*mu_b) = 0.5",
                      "at_rest": f"speed < {REST_SPEED} m/s and spin < {REST_SPIN} rad/s between the last two frames"},
            "device_ours": device_label,
            "blender_version": bpy.app.version_string,
            "host": platform.node(), "cpu_count": os.cpu_count(), "cpu_model": cpu_model(),
            "python": platform.python_version(),
            "load_before": list(os.getloadavg()),
            "uptime_before": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(),
            "note": args.note,
            "ours_radius": args.ours_radius,
            "results": [],
        }
        for count in args.sizes:
            entry = {"cubes": count, "blender": [], "ours": []}
            for rep in range(args.repeat):
                runs = [("blender", lambda: run_blender(count, args.frames, args.seed, args.blender_friction)),
                        ("ours", lambda: run_ours(count, args.frames, args.seed, args.device, args.ours_radius,
                                                  args.ours_contacts))]
                for name, fn in runs[args.skip_blender:]:
                    load = os.getloadavg()[0]
                    r = fn()
                    r["load_1min_before"] = load
                    entry[name].append(r)
                    st = r["stats"]
                    print(f"{count:>5} cubes {name:>7} #{rep}: {r['sim_ms_per_frame']:9.1f} ms/frame sim, "
                          f"total {r['total_s']:8.2f} s (keys {r['keys_s']:.2f} s)  height {st['pile_height_m']:.2f} m "
                          f"radius {st['footprint_radius_m']:.2f} m rest {st['fraction_at_rest']:.2f} "
                          f"[load {load:.2f}]", flush=True)
            if args.skip_blender:
                report["results"].append(entry)
                continue
            entry["blender_summary"] = summarize(entry["blender"])
            entry["ours_summary"] = summarize(entry["ours"])
            entry["comparison"] = compare(entry["blender"][0], entry["ours"][0])
            entry["comparison"]["speedup_total_mean"] = (entry["blender_summary"]["total_s"]["mean"]
                                                         / entry["ours_summary"]["total_s"]["mean"])
            print(f"{count:>5} cubes: speed-up total {entry['comparison']['speedup_total_mean']:.2f}x, "
                  f"pile within 20 %: {entry['comparison']['pile_within_20pct']}", flush=True)
            report["results"].append(entry)
        if args.profile:
            report["profile_ours"] = profile_ours(args.profile, args.profile_frames, args.seed, args.device)
            print("profile:", json.dumps(report["profile_ours"], indent=1), flush=True)
        report["load_after"] = list(os.getloadavg())
        report["uptime_after"] = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2))
        print(f"wrote {out}")
        if args.png and not args.skip_blender:
            plot(report, Path(args.png))
            print(f"wrote {args.png}")
    finally:
        addon_blender.unregister()
    return 0


if __name__ == "__main__":
    sys.exit(main())
