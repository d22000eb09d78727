"""Bake to instances at scale on this machine: cache write time, cache size, peak memory, and the time
Blender takes to evaluate one frame of the result (target <= 40 ms at 100k bodies: 24 fps playback).

    python bench/instances_bench.py --out bench/results/instances_100k_cpu.json   # 100k bodies x 250 frames
    python bench/instances_bench.py --bodies 10000 --frames 50 --out /tmp/x.json
    python bench/instances_bench.py --baked pile_baked.blend --out /tmp/pile.json   # a real bake's file

The poses are made up (bodies falling and tumbling in a block), not simulated: this measures the cache,
not the engine (bench/instances_gpu_bench.py times both together). Write phase: the core alone
(addon.core.point_cache) in this process, peak memory by tracemalloc (numpy reports its buffers to it).
Blender phase (bpy module): a saved .blend with four body meshes, the cache object built by
addon.blender.instance_cache_object, then ``scene.frame_set`` timed on frames spread over the range (each one
reads the frame from the PC2 file, turns the points into instances), and one walk over
``depsgraph.object_instances`` (what a render engine does on export). Wall and CPU time (all of this
process's threads) of each evaluation are both kept: on the shared 2-core VM the wall time mostly
measures the other processes (the JSON keeps the load average), the CPU time what the evaluation
costs; and the CPU time with one of the two modifiers at a time says which one costs it.
Figures, never a timed test: JSON with the machine under bench/results.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from addon.core import point_cache  # noqa: E402
from addon.core.rotations import axis_angle_quaternions  # noqa: E402


def machine() -> dict:
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    # the 2-core development VM is shared: the load tells how far its timings are from an idle machine
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return dict(cpu=cpu, cores=os.cpu_count(), platform=platform.platform(), python=platform.python_version(),
                load_average_1_5_15_min=load)


def made_up_poses(bodies: int, seed: int = 0):
    """Start positions, velocities and spins of ``bodies`` in a block; ``pose(t)`` gives (positions, quaternions)."""
    rng = np.random.default_rng(seed)
    side = int(np.ceil(bodies ** (1 / 3)))
    idx = np.arange(bodies)
    start = np.stack([idx % side, (idx // side) % side, idx // (side * side)], 1) * 1.5 + 1.0
    velocity = rng.normal(size=(bodies, 3))
    axis = rng.normal(size=(bodies, 3))
    spin = rng.uniform(0, 6, size=bodies)

    def pose(t: float):
        positions = start + velocity * t + np.array([0.0, 0.0, -4.9]) * t * t
        return positions, axis_angle_quaternions(axis, spin * t)
    return start, pose


def write_phase(path: str, bodies: int, frames: int, fps: float = 24.0) -> dict:
    _start, pose = made_up_poses(bodies)
    com = np.zeros((bodies, 3))
    matrix = np.broadcast_to(np.identity(4), (bodies, 4, 4)).copy()
    tracemalloc.start()
    t0, c0 = time.perf_counter(), time.process_time()
    frames_body = point_cache.BodyFrames(com, matrix)
    del matrix
    writer = point_cache.PointCacheWriter(path, bodies * point_cache.POINTS_PER_BODY, frames)
    out = np.empty((bodies * point_cache.POINTS_PER_BODY, 3), dtype=np.float32)
    pose_s = pose_cpu_s = 0.0
    for f in range(frames):
        p0, q0 = time.perf_counter(), time.process_time()
        positions, quats = pose(f / fps)  # stands in for the simulation: not part of the writing
        pose_s += time.perf_counter() - p0
        pose_cpu_s += time.process_time() - q0
        writer.write(frames_body.points(positions, quats, out=out))
    writer.commit()
    total = time.perf_counter() - t0
    write_cpu_s = time.process_time() - c0 - pose_cpu_s
    _current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    write_s = total - pose_s
    return dict(cache_write_s=round(write_s, 3), cache_write_ms_per_frame=round(1e3 * write_s / frames, 2),
                cache_write_cpu_s=round(write_cpu_s, 3), cache_write_cpu_ms_per_frame=round(1e3 * write_cpu_s / frames, 2),
                cache_bytes=os.path.getsize(path), cache_bytes_expected=point_cache.cache_size(bodies, frames),
                write_peak_traced_bytes=peak)


def blender_phase(folder: str, cache_path: str, bodies: int, frames: int, samples: int) -> dict:
    import bpy

    from addon.blender import bake_instances, instance_cache_object

    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    sources = []
    for i, add in enumerate((bpy.ops.mesh.primitive_cube_add, bpy.ops.mesh.primitive_ico_sphere_add,
                             bpy.ops.mesh.primitive_cylinder_add, bpy.ops.mesh.primitive_cone_add)):
        add(location=(0.0, 0.0, 0.0))
        obj = bpy.context.object
        obj.name = f"Rock{i}"
        obj.scale = (0.4, 0.4, 0.4)
        sources.append(obj)
    blend = os.path.join(folder, "bench.blend")
    bpy.ops.wm.save_as_mainfile(filepath=blend)
    # the cache written by the write phase plays the part of a bake's
    stored, absolute = bake_instances.cache_paths(scene, None)
    os.makedirs(os.path.dirname(absolute), exist_ok=True)
    shutil.move(cache_path, absolute)

    rng = np.random.default_rng(1)
    body_source = rng.integers(0, len(sources), size=bodies)
    com = np.zeros((bodies, 3))
    matrix = np.broadcast_to(np.identity(4), (bodies, 4, 4)).copy()
    body_frames = point_cache.BodyFrames(com, matrix)
    first = point_cache.read_frame(absolute, 0)
    t0 = time.perf_counter()
    cache = instance_cache_object.build_cache_object(scene, sources, body_source, body_frames, first, stored, 1, 1,
                                                     hide=sources)
    build_s = time.perf_counter() - t0
    bpy.ops.wm.save_mainfile()
    blend_bytes = os.path.getsize(blend)

    t0 = time.perf_counter()
    scene.frame_set(1)
    first_eval_s = time.perf_counter() - t0
    checked = sorted(set(np.linspace(2, samples, 12).astype(int).tolist()))
    timed = frame_evaluation(scene, checked)
    # the same frames with one modifier at a time: where the time goes
    split = {}
    for only in ("PRB Point Cache", "PRB Instances"):
        for mod in cache.modifiers:
            mod.show_viewport = mod.name == only
        times = []
        for frame in checked:
            c0 = time.process_time()
            scene.frame_set(frame)
            times.append(1e3 * (time.process_time() - c0))
        split[only] = round(float(np.median(times)), 1)
    for mod in cache.modifiers:
        mod.show_viewport = True
    scene.frame_set(checked[-1])
    deps = bpy.context.evaluated_depsgraph_get()
    t0 = time.perf_counter()
    count = sum(1 for inst in deps.object_instances if inst.is_instance)
    walk_s = time.perf_counter() - t0
    if count != bodies:
        raise SystemExit(f"expected {bodies} instances, Blender made {count}")
    return dict(bpy=bpy.app.version_string, build_cache_object_s=round(build_s, 3), blend_bytes=blend_bytes,
                first_frame_eval_s=round(first_eval_s, 3), frames_timed=checked, **timed,
                frame_eval_cpu_ms_median_one_modifier=split, object_instances_walk_s=round(walk_s, 3),
                instances=count)


def frame_evaluation(scene, frames) -> dict:
    """Wall and CPU milliseconds Blender takes to evaluate each of ``frames`` (frame_set), and their medians."""
    eval_ms, eval_cpu_ms = [], []
    for frame in frames:
        t0, c0 = time.perf_counter(), time.process_time()
        scene.frame_set(frame)
        eval_ms.append(1e3 * (time.perf_counter() - t0))
        eval_cpu_ms.append(1e3 * (time.process_time() - c0))
    return dict(frame_eval_ms=[round(x, 1) for x in eval_ms], frame_eval_ms_median=round(float(np.median(eval_ms)), 1),
                frame_eval_ms_max=round(max(eval_ms), 1), frame_eval_cpu_ms=[round(x, 1) for x in eval_cpu_ms],
                frame_eval_cpu_ms_median=round(float(np.median(eval_cpu_ms)), 1))


def baked_phase(path: str) -> dict:
    """Frame evaluation of a file baked to instances (e.g. by tools/pile_picture.py), opened as it is."""
    import bpy

    bpy.ops.wm.open_mainfile(filepath=path, load_ui=False)
    scene = bpy.context.scene
    caches = [o for o in scene.objects if o.name.startswith("PRB Instances")]
    if len(caches) != 1:
        raise SystemExit(f"{path}: expected one instance bake, found {len(caches)}")
    first, last = int(scene.frame_start), int(scene.frame_end)
    scene.frame_set(first)
    checked = sorted(set(np.linspace(first + 1, last, 12).astype(int).tolist()))
    timed = frame_evaluation(scene, checked)
    deps = bpy.context.evaluated_depsgraph_get()
    count = sum(1 for inst in deps.object_instances if inst.is_instance and inst.parent.original == caches[0])
    return dict(bpy=bpy.app.version_string, baked_file=os.path.basename(path), instances=count, frames_timed=checked,
                **timed)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bodies", type=int, default=100_000)
    ap.add_argument("--frames", type=int, default=250)
    ap.add_argument("--baked", help="only time the frame evaluation of this file baked to instances")
    ap.add_argument("--out", default=str(ROOT / "out" / "instances_bench.json"))
    args = ap.parse_args()
    if args.baked:
        result = dict(benchmark="instances_bench", machine=machine(), target_frame_eval_ms=40.0,
                      **baked_phase(os.path.abspath(args.baked)))
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
        print(json.dumps(result, indent=1))
        return
    folder = tempfile.mkdtemp(prefix="prb-instances-bench-")
    try:
        cache_path = os.path.join(folder, "bench.pc2")
        result = dict(benchmark="instances_bench", bodies=args.bodies, frames=args.frames, machine=machine(),
                      target_frame_eval_ms=40.0)
        result.update(write_phase(cache_path, args.bodies, args.frames))
        print(json.dumps(result, indent=1), flush=True)
        result.update(blender_phase(folder, cache_path, args.bodies, args.frames, args.frames))
        result["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
