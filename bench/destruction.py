"""The destruction scene (sample_scenes/destruction.py) baked by Blender's Bullet and by the add-on, side by side.

    PYTHONPATH=. .venv/bin/python bench/destruction.py --out bench/results/destruction_2000_cpu.json
    PYTHONPATH=. .venv/bin/python bench/destruction.py --bricks-per-course 400 --engines bullet \\
        --out bench/results/destruction_8000_bullet_cpu.json            # the 8,000-brick wall, generated here
    PYTHONPATH=. .venv/bin/python bench/destruction.py --bricks-per-course 400 --export-model out/wall8000.pkl
    python bench/destruction.py --model out/wall8000.pkl --device gpu \\
        --out bench/results/destruction_8000_ours_h100.json             # ours on the GPU machine (no bpy there)

The scene is the committed sample_scenes/destruction.blend, or a variant generated into out/ when a
size or --no-ball is given (its generation time goes into the JSON). Every run is a fresh process
that opens the .blend as it is, so both engines start from the same file:

- bullet: Blender's Rigid Body world stepped with ``scene.frame_set`` through the scene's frame range
  (24 fps), each frame timed: that is Bullet's simulation. Then ``bpy.ops.rigidbody.bake_to_keyframes``
  (with a VIEW_3D ``context.temp_override``; it fails headless without one) replays those frames
  from the filled cache and keys every brick: Bullet's keys. Bake time = simulation + keys
  (``--no-keys`` leaves the keys out). Peak memory of the process beside it.
- ours: the add-on's bake of the same file as its CLI runs it (``BakeJob`` on the scene's Rigid Body
  world, no roles), each frame timed as bench/vs_blender.py times it; total = the job (conversion,
  kernel build, simulation, keys). While the engine leaves the world's constraints out (the job
  warns, ``RigidBodyWorld.constraints_note``) an unglued bake is no comparison: the run stops and
  says so, unless ``--allow-unglued`` (then the JSON says ``glue_simulated: false``).

The result, read the same way for both at the last frame against the first: the fraction of
constraints broken (Bullet does not say which broke: a constraint counts as broken when its two
bricks' relative transform changed by more than BROKEN_SHIFT or BROKEN_TURN), the bricks moved more
than MOVED from where they started, the debris' spread (the 90th percentile and the largest horizontal
distance of moved bricks from the wall's line, and the bricks' footprint), and the wrecking ball's
speed after its hand-off. Each engine runs ``--repeat`` times (default 2: the timings come from
a shared machine). Writes one JSON with the machine and the commit; ``--engines`` splits the two
sides between machines (Bullet on a CPU, ours on a GPU), one JSON each. The GPU machine has no bpy:
there ours runs from a model exported where bpy is (``--export-model``, then ``--model``;
bench/destruction_model.py), the simulation timed, the same figures read from the bodies' poses.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.machine import commit, cpu_model, write_report  # noqa: E402

SCENE = ROOT / "sample_scenes" / "destruction.blend"
BROKEN_SHIFT = 0.05  # m: a glued pair whose relative position changed more than this is broken ...
BROKEN_TURN = 5.0  # degrees: ... or whose relative rotation did
MOVED = 0.05  # m: a brick moved from its start
RESULT = "RESULT "


# ------------------------------------------------------------------------------------------------
# what both engines are judged by
def scene_parts(bpy, scene):
    """(bricks, ball, pairs): the world's ACTIVE objects without animation (the wall's pieces), the
    animated one (the wrecking ball, or None), and each constraint's pair of brick indices."""
    world = scene.rigidbody_world
    bodies = [o for o in world.collection.objects if o.rigid_body and o.rigid_body.type == "ACTIVE"]
    bricks = sorted((o for o in bodies if o.animation_data is None), key=lambda o: o.name)
    animated = [o for o in bodies if o.animation_data is not None]
    index = {o.name: i for i, o in enumerate(bricks)}
    pairs = []
    for obj in world.constraints.objects if world.constraints else ():
        con = obj.rigid_body_constraint
        if con is not None and con.object1 and con.object2:
            pairs.append((index[con.object1.name], index[con.object2.name]))
    return bricks, (animated[0] if animated else None), np.array(pairs, dtype=np.int64).reshape(-1, 2)


def matrices(objects) -> np.ndarray:
    return np.array([np.array(o.matrix_world) for o in objects], dtype=np.float64)


def _turn_degrees(r0, r1) -> np.ndarray:
    rel = np.einsum("...ji,...jk->...ik", r0, r1)
    return np.degrees(np.arccos(np.clip((np.trace(rel, axis1=-2, axis2=-1) - 1) / 2, -1, 1)))


def outcome(start: np.ndarray, end: np.ndarray, pairs: np.ndarray) -> dict:
    """The destruction's figures from the bricks' world matrices at the first and the last frame."""
    figures = {}
    if len(pairs):
        a0, b0, a1, b1 = start[pairs[:, 0]], start[pairs[:, 1]], end[pairs[:, 0]], end[pairs[:, 1]]
        rel0 = np.linalg.inv(a0) @ b0
        rel1 = np.linalg.inv(a1) @ b1
        shift = np.linalg.norm(rel1[:, :3, 3] - rel0[:, :3, 3], axis=1)
        turn = _turn_degrees(rel0[:, :3, :3], rel1[:, :3, :3])
        broken = (shift > BROKEN_SHIFT) | (turn > BROKEN_TURN)
        figures.update(constraints=int(len(pairs)), constraints_broken=int(broken.sum()),
                       fraction_broken=float(broken.mean()))
    c0, c1 = start[:, :3, 3], end[:, :3, 3]
    moved = np.linalg.norm(c1 - c0, axis=1) > MOVED
    # the wall's line: through the bricks' starting centres along their longest horizontal spread
    xy0 = c0[:, :2] - c0[:, :2].mean(axis=0)
    direction = np.linalg.svd(xy0, full_matrices=False)[2][0]
    normal = np.array([-direction[1], direction[0]])
    off_line = np.abs((c1[:, :2] - c0[:, :2].mean(axis=0)) @ normal)
    spread = off_line[moved]
    footprint = np.ptp(c1[:, :2], axis=0)
    figures.update(
        bricks=int(len(start)), bricks_moved=int(moved.sum()), fraction_moved=float(moved.mean()),
        spread_p90_m=float(np.percentile(spread, 90)) if len(spread) else 0.0,
        spread_max_m=float(spread.max()) if len(spread) else 0.0,
        footprint_m=[float(v) for v in footprint],
        highest_brick_m=float(c1[:, 2].max()), lowest_brick_m=float(c1[:, 2].min()))
    return figures


def ball_speed(bpy, scene, ball, frame: int) -> float | None:
    """The ball's speed (m/s) over the frame after ``frame`` as the scene shows it (call in frame order)."""
    if ball is None:
        return None
    scene.frame_set(frame)
    before = np.array(ball.matrix_world.translation)
    scene.frame_set(frame + 1)
    return float(np.linalg.norm(np.array(ball.matrix_world.translation) - before) * scene.render.fps)


def frame_timing(stamps) -> dict:
    dt = np.diff(np.asarray(stamps)) * 1e3
    return {"sim_ms_per_frame": float(dt.mean()), "sim_ms_per_frame_median": float(np.median(dt)),
            "sim_ms_per_frame_p10": float(np.percentile(dt, 10)), "sim_ms_per_frame_p90": float(np.percentile(dt, 90)),
            "sim_ms_per_frame_max": float(dt.max()), "sim_s": float(dt.sum() / 1e3), "frames_simulated": int(len(dt))}


def _release_frame(ball) -> int | None:
    """The last frame the ball is Animated (its kinematic key before the one that turns it off)."""
    if ball is None or ball.animation_data is None:
        return None
    from sample_scenes.checks import action_fcurves

    for curve in action_fcurves(ball.animation_data.action, ball):
        if curve.data_path == "rigid_body.kinematic":
            off = [k.co[0] for k in curve.keyframe_points if k.co[1] < 0.5]
            return int(min(off)) - 1 if off else None
    return None


def _peak_memory_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ------------------------------------------------------------------------------------------------
# one engine, in this (fresh) process
def run_bullet(blend: str, keys: bool, save_baked: str | None) -> dict:
    import bpy

    bpy.ops.wm.open_mainfile(filepath=blend, load_ui=False)
    scene = bpy.context.scene
    world = scene.rigidbody_world
    first, last = world.point_cache.frame_start, world.point_cache.frame_end
    bricks, ball, pairs = scene_parts(bpy, scene)
    scene.frame_set(first)
    start = matrices(bricks)
    release = _release_frame(ball)
    stamps, ball_positions = [time.perf_counter()], {}
    for frame in range(first + 1, last + 1):
        scene.frame_set(frame)
        stamps.append(time.perf_counter())
        if ball is not None:
            ball_positions[frame] = np.array(ball.matrix_world.translation)
    end = matrices(bricks)
    out = {"engine": "blender_bullet", "frames": [first, last], **frame_timing(stamps),
           "substeps_per_frame": world.substeps_per_frame, "solver_iterations": world.solver_iterations,
           "result": outcome(start, end, pairs), "peak_memory_mb_after_simulation": _peak_memory_mb()}
    if release is not None and release + 1 in ball_positions:  # its first frame free: release to release + 1
        out["ball_speed_after_release_mps"] = float(
            np.linalg.norm(ball_positions[release + 1] - ball_positions[release]) * scene.render.fps)
    if keys:
        window = bpy.context.window_manager.windows[0]
        area = next(a for a in window.screen.areas if a.type == "VIEW_3D")
        region = next(r for r in area.regions if r.type == "WINDOW")
        for obj in scene.objects:
            obj.select_set(False)
        for obj in bricks + ([ball] if ball is not None else []):
            obj.select_set(True)
        bpy.context.view_layer.objects.active = bricks[0]
        started = time.perf_counter()
        with bpy.context.temp_override(window=window, screen=window.screen, area=area, region=region):
            done = bpy.ops.rigidbody.bake_to_keyframes(frame_start=first, frame_end=last)
        if done != {"FINISHED"}:
            raise RuntimeError(f"bake_to_keyframes returned {done}")
        out["keys_s"] = time.perf_counter() - started
        out["total_s"] = out["sim_s"] + out["keys_s"]
        out["keys_method"] = "bpy.ops.rigidbody.bake_to_keyframes from the filled cache (its replay included)"
        scene.frame_set(last)
        out["result_from_keys"] = outcome(start, matrices(bricks), pairs)
        if save_baked:
            bpy.ops.wm.save_as_mainfile(filepath=save_baked, compress=True, check_existing=False)
    out["peak_memory_mb"] = _peak_memory_mb()
    return out


def _instrument_frames(stamps: list, sims: list) -> None:
    from addon.core.simulation import Simulation

    original = Simulation.frames

    def frames(self, count):
        sims.append(self)
        for result in original(self, count):
            stamps.append(time.perf_counter())
            yield result

    Simulation.frames = frames


def run_ours(blend: str, device: str | None, allow_unglued: bool, save_baked: str | None) -> dict:
    import bpy

    import addon.blender as addon_blender
    from addon.blender import job as job_module
    from addon.blender.bake_objects import pick_objects
    from addon.blender.bake_options import BakeOptions, read_world
    from addon.blender.job import BakeJob

    bpy.ops.wm.open_mainfile(filepath=blend, load_ui=False)
    addon_blender.register()
    try:
        scene = bpy.context.scene
        bricks, ball, pairs = scene_parts(bpy, scene)
        world = read_world(scene)
        first, last = scene.rigidbody_world.point_cache.frame_start, scene.rigidbody_world.point_cache.frame_end
        scene.frame_set(first)
        start = matrices(bricks)
        release = _release_frame(ball)
        note = world.constraints_note()
        if note and not allow_unglued:
            raise SystemExit(f"ours: {note}. An unglued wall is no comparison: wait for the engine's joints, or "
                             "pass --allow-unglued to time it anyway")
        dynamic, static = pick_objects(bpy.context, selected=[], world=world)
        options = BakeOptions.from_scene(scene, device=device)
        stamps, sims = [], []
        _instrument_frames(stamps, sims)
        job = BakeJob(bpy.context, dynamic, static, options, log=job_module.print_log, world=world)
        job.check()
        started = time.perf_counter()
        job.run()
        total = time.perf_counter() - started
        sim = sims[-1]
        joints = getattr(sim.model, "joints", None)
        scene.frame_set(last)
        end = matrices(bricks)
        out = {"engine": "particle_rigid_bodies", "device": sim.device_name, "frames": [first, last],
               **frame_timing(stamps), "setup_s": stamps[0] - started, "keys_s": total - (stamps[-1] - started),
               "total_s": total, "substeps_per_frame": sim.substeps_per_frame,
               "particles": int(sim.model.particle_count), "particle_radius": float(sim.model.particle_radius),
               "joints_simulated": int(getattr(joints, "count", 0) or 0) if joints is not None else 0,
               "glue_simulated": note is None, "constraints_note": note,
               "result": outcome(start, end, pairs), "peak_memory_mb": _peak_memory_mb()}
        if release is not None:
            out["ball_speed_after_release_mps"] = ball_speed(bpy, scene, ball, release)
        if save_baked:
            bpy.ops.wm.save_as_mainfile(filepath=save_baked, compress=True, check_existing=False)
        return out
    finally:
        addon_blender.unregister()


# ------------------------------------------------------------------------------------------------
# the driver: a fresh process per run
def _child(args: list[str], timeout: float) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.setdefault("BLENDER_USER_RESOURCES", tempfile.mkdtemp(prefix="prb-bench-user-"))
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(RESULT)]
    if proc.returncode or not lines:
        tail = (proc.stdout[-1500:] + "\n" + proc.stderr[-2500:]).strip()
        raise RuntimeError(f"{' '.join(args[:2])} failed ({proc.returncode}):\n{tail}")
    return json.loads(lines[-1][len(RESULT):])


def generate_variant(args) -> tuple[str, dict]:
    """The scene to run: the committed .blend, or a variant generated into out/ (timed)."""
    if args.blend:
        return args.blend, {"source": args.blend}
    if args.bricks_per_course is None and args.courses is None and not args.no_ball and args.threshold is None:
        return str(SCENE), {"source": str(SCENE.relative_to(ROOT))}
    cmd = [sys.executable, str(ROOT / "sample_scenes" / "destruction.py")]
    name = "destruction"
    for flag, value in (("--courses", args.courses), ("--bricks-per-course", args.bricks_per_course),
                        ("--threshold", args.threshold)):
        if value is not None:
            cmd += [flag, str(value)]
            name += f"_{flag.strip('-').split('-')[0]}{value:g}"
    if args.no_ball:
        cmd.append("--no-ball")
        name += "_noball"
    path = ROOT / "out" / f"{name}.blend"
    cmd += ["--output", str(path)]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"generating {path} failed:\n{proc.stderr[-2000:]}")
    line = [s for s in proc.stdout.splitlines() if s.startswith("destruction:")][-1]
    return str(path), {"source": "sample_scenes/destruction.py " + " ".join(cmd[2:-2]),
                       "generation_process_s": time.perf_counter() - started, "generator_says": line}


def summarize(runs: list[dict]) -> dict:
    out = {}
    for key in ("sim_ms_per_frame", "sim_s", "keys_s", "total_s"):
        values = [r[key] for r in runs if key in r]
        if values:
            out[key] = {"mean": statistics.fmean(values), "min": min(values), "max": max(values), "n": len(values)}
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--blend", help="a .blend to run as it is (default: sample_scenes/destruction.blend)")
    p.add_argument("--courses", type=int, help="generate a variant this many courses high")
    p.add_argument("--bricks-per-course", type=int, help="generate a variant this many bricks long (400: 8,000 bricks)")
    p.add_argument("--threshold", type=float, help="generate a variant with this breaking threshold")
    p.add_argument("--no-ball", action="store_true", help="generate a variant without the ball: does the wall stand?")
    p.add_argument("--engines", nargs="+", choices=("bullet", "ours"), default=["bullet", "ours"])
    p.add_argument("--repeat", type=int, default=2, help="runs of each engine (fresh processes)")
    p.add_argument("--no-keys", action="store_true", help="Bullet: the simulation only, not bake_to_keyframes")
    p.add_argument("--device", default=None, help="OpenCL device for ours (default: the scene's / automatic)")
    p.add_argument("--allow-unglued", action="store_true",
                   help="time ours even while it leaves the constraints out (the JSON says so)")
    p.add_argument("--save-baked", metavar="DIR", help="keep each engine's first baked .blend in DIR (for renders)")
    p.add_argument("--timeout", type=float, default=7200, help="seconds per run")
    p.add_argument("--note", default="")
    p.add_argument("--out", default=str(ROOT / "out" / "destruction.json"))
    p.add_argument("--export-model", metavar="PKL", help="convert the scene as our bake does and save the core's "
                   "model for a machine without bpy (bench/destruction_model.py), then stop")
    p.add_argument("--model", metavar="PKL", help="ours from an exported model, without bpy (the GPU machine)")
    p.add_argument("--worker", nargs=2, metavar=("ENGINE", "BLEND"), help=argparse.SUPPRESS)
    p.add_argument("--worker-save", help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.worker:
        engine, blend = args.worker
        if engine == "model":
            from bench.destruction_model import run_model

            result = run_model(blend, args.device)
        elif engine == "bullet":
            result = run_bullet(blend, not args.no_keys, args.worker_save)
        else:
            result = run_ours(blend, args.device, args.allow_unglued, args.worker_save)
        print(RESULT + json.dumps(result), flush=True)
        sys.stderr.flush()
        # bpy crashes at exit after bake_to_keyframes has taken bodies out of a world with constraints
        # (exit code -11, like world_remove's): the result is out, leave without bpy's teardown
        os._exit(0)

    if args.model:
        blend, scene_info, args.engines = args.model, {"source": "an exported model", "model": args.model}, ["model"]
    else:
        blend, scene_info = generate_variant(args)
    if args.export_model:
        from bench.destruction_model import export_model

        Path(args.export_model).parent.mkdir(parents=True, exist_ok=True)
        print(json.dumps({**scene_info, **export_model(str(Path(blend).resolve()), args.export_model,
                                                       args.allow_unglued), "model": args.export_model}))
        return 0
    report = {"benchmark": "bench/destruction.py", "commit": commit(), "host": platform.node(),
              "cpu_model": cpu_model(), "cpu_count": os.cpu_count(), "python": platform.python_version(),
              "scene": {**scene_info, "blend": blend, "size_bytes": os.path.getsize(blend)},
              "broken_when": f"relative shift > {BROKEN_SHIFT} m or turn > {BROKEN_TURN} degrees",
              "moved_when": f"centre moved > {MOVED} m", "note": args.note,
              "load_before": list(os.getloadavg()), "runs": {}, "summary": {}}
    for engine in args.engines:
        runs = []
        for rep in range(args.repeat):
            child = ["--worker", engine, blend]
            if engine == "bullet" and args.no_keys:
                child.append("--no-keys")
            if engine in ("ours", "model"):
                child += (["--device", args.device] if args.device else []) + (
                    ["--allow-unglued"] if args.allow_unglued else [])
            if args.save_baked and rep == 0:
                Path(args.save_baked).mkdir(parents=True, exist_ok=True)
                child += ["--worker-save", str(Path(args.save_baked).resolve() / f"{Path(blend).stem}_{engine}.blend")]
            load = os.getloadavg()[0]
            run = _child(child, args.timeout)
            run["load_1min_before"] = load
            runs.append(run)
            report["runs"][engine] = runs
            # kept after every run: an 8,000-brick Bullet run with keys takes half an hour
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(json.dumps({**report, "partial": True}, indent=2) + "\n")
            r = run["result"]
            print(f"{engine:>6} #{rep}: {run['sim_ms_per_frame']:8.1f} ms/frame, simulation {run['sim_s']:.1f} s, "
                  f"total {run.get('total_s', float('nan')):.1f} s; broken {r.get('fraction_broken', 0):.3f}, "
                  f"moved {r['bricks_moved']}/{r['bricks']}, spread p90 {r['spread_p90_m']:.2f} m "
                  f"[load {load:.2f}]", flush=True)
        report["runs"][engine] = runs
        report["summary"][engine] = summarize(runs)
    if "model" in report["runs"]:  # the figures are ours: one key for both ways of running them
        report["runs"]["ours"], report["summary"]["ours"] = report["runs"].pop("model"), report["summary"].pop("model")
    if {"bullet", "ours"} <= set(report["runs"]):
        bullet, ours = report["summary"]["bullet"], report["summary"]["ours"]
        report["comparison"] = {
            "sim_speedup": bullet["sim_ms_per_frame"]["mean"] / ours["sim_ms_per_frame"]["mean"],
            "total_speedup": (bullet["total_s"]["mean"] / ours["total_s"]["mean"]
                              if "total_s" in bullet else None)}
    report["load_after"] = list(os.getloadavg())
    write_report(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
