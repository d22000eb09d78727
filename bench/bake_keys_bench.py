"""Key writing speed of the bake: N objects x F frames, location + rotation, written with foreach_set.

    python bench/bake_keys_bench.py [--objects 1000] [--frames 250] [--mode XYZ|QUATERNION|AXIS_ANGLE]
                                    [--output out/bake_keys_bench.json]

Synthetic world transforms (a tumbling fall per object) go through the same code as a real bake:
``local_channels.local_channels`` (world -> local channels in the object's rotation mode, continuity) and
``bake.write_bake`` (one action per object, F-curves filled with foreach_set, LINEAR). Times both
parts separately and checks a few keys by evaluating the scene. Target: key writing <= 1 s for
1000 objects x 250 frames.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("BLENDER_USER_RESOURCES", tempfile.mkdtemp(prefix="prb-bench-user-"))

import bpy  # noqa: E402
import numpy as np  # noqa: E402

from addon.blender import bake, clear_bake, local_channels  # noqa: E402
from addon.core.rotations import axis_angle_quaternions, pose_matrices  # noqa: E402
from bench.machine import cpu_model  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--objects", type=int, default=1000)
    p.add_argument("--frames", type=int, default=250)
    p.add_argument("--mode", default="XYZ", help="rotation mode of the objects")
    p.add_argument("--repeat", type=int, default=3, help="best of N runs")
    p.add_argument("--output", default=str(ROOT / "out" / "bake_keys_bench.json"))
    args = p.parse_args()

    bpy.ops.wm.read_factory_settings(use_empty=True)
    mesh = bpy.data.meshes.new("BenchCube")
    mesh.from_pydata([(x, y, z) for x in (-.1, .1) for y in (-.1, .1) for z in (-.1, .1)], [], [])
    objects = []
    for i in range(args.objects):
        obj = bpy.data.objects.new(f"Body{i:05d}", mesh)
        obj.location = (i % 40 * 0.5, i // 40 * 0.5, 5.0)
        obj.rotation_mode = args.mode
        bpy.context.scene.collection.objects.link(obj)
        objects.append(obj)
    bpy.context.view_layer.update()

    rng = np.random.default_rng(0)
    n, f = args.objects, args.frames
    t = np.arange(f)[:, None] / 24.0
    start = np.array([np.array(o.matrix_world) for o in objects])
    com = start[:, :3, 3].copy()
    positions = com[None] + np.stack([0.3 * t, 0 * t, -4.9 * t * t], axis=-1)
    axis = rng.normal(size=(n, 3))
    orient = axis_angle_quaternions(axis[None], 3.0 * t * np.ones((1, n)))
    frames = 1 + np.arange(f)

    convert_times, write_times = [], []
    for _ in range(args.repeat):
        clear_bake.clear_bakes(objects)  # start each run from scratch (clear the previous bake)
        t0 = time.perf_counter()
        world = pose_matrices(positions, orient, com, start)
        channels = local_channels.local_channels(objects, world)
        t1 = time.perf_counter()
        bake.write_bake(frames, channels)
        t2 = time.perf_counter()
        convert_times.append(t1 - t0)
        write_times.append(t2 - t1)

    # correctness spot check: evaluated matrices equal the input world matrices
    errors = []
    for frame_index in (0, f // 2, f - 1):
        bpy.context.scene.frame_set(int(frames[frame_index]))
        for b in (0, n // 2, n - 1):
            errors.append(float(np.abs(np.array(objects[b].matrix_world) - world[frame_index, b]).max()))
    keys = n * f * (3 + channels[0].rotation.shape[1])
    result = dict(
        objects=n, frames=f, rotation_mode=args.mode, keys=keys,
        key_write_seconds=min(write_times), convert_seconds=min(convert_times),
        total_seconds=min(w + c for w, c in zip(write_times, convert_times)),
        keys_per_second=keys / min(write_times), max_matrix_error=max(errors),
        target_seconds=1.0, meets_target=min(write_times) <= 1.0,
        blender=bpy.app.version_string, python=platform.python_version(), machine=platform.machine(), cpu_model=cpu_model(),
        cpu_count=os.cpu_count(), repeat=args.repeat, all_write_seconds=write_times,
    )
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    return 0 if result["max_matrix_error"] < 1e-3 else 1


if __name__ == "__main__":
    sys.exit(main())
