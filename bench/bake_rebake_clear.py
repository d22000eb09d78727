"""Bake, re-bake and Clear Bake of many objects: Blender-side costs that grow with the object count.

    python bench/bake_rebake_clear.py [--objects 10000] [--frames 250] [--output out/bake_rebake_clear.json]

N objects get keys for F frames through ``bake.write_bake`` (the bake's own writer), then the same
bake again (a re-bake over the same frames, which writes into the earlier keys), then a re-bake over
F + 1 frames (new actions replace the earlier ones), then ``clear_bake.clear_bakes`` (Clear Bake). Each
step is timed and checked (one action per object, named after it; none left after clearing).
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
from bench.machine import cpu_model  # noqa: E402


def channels_for(objects, frames: int):
    world = np.tile(np.eye(4), (frames, len(objects), 1, 1))
    world[..., 0, 3] = (np.arange(frames) * 0.01)[:, None]  # a slow drift along x
    return local_channels.local_channels(objects, world)


def check_bake(objects, frames: int) -> None:
    assert len(bpy.data.actions) == len(objects), len(bpy.data.actions)
    for obj in objects:
        action = obj.animation_data.action
        assert action.name == bake.bake_action_name(obj), (obj.name, action.name)
        assert len(bake.action_fcurves(action)[0].keyframe_points) == frames


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--objects", type=int, default=10000)
    p.add_argument("--frames", type=int, default=250)
    p.add_argument("--output", default=str(ROOT / "out" / "bake_rebake_clear.json"))
    args = p.parse_args(argv)

    bpy.ops.wm.read_factory_settings(use_empty=True)
    mesh = bpy.data.meshes.new("BenchCube")
    objects = []
    for i in range(args.objects):
        obj = bpy.data.objects.new(f"Body{i:05d}", mesh)
        bpy.context.scene.collection.objects.link(obj)
        objects.append(obj)
    f = args.frames
    seconds = {}
    for step, frames in (("bake", f), ("rebake_same_frames", f), ("rebake_other_frames", f + 1)):
        channels = channels_for(objects, frames)
        t = time.perf_counter()
        bake.write_bake(1 + np.arange(frames), channels)
        seconds[step] = time.perf_counter() - t
        check_bake(objects, frames)
        print(f"{step}: {seconds[step]:.2f} s", flush=True)
    t = time.perf_counter()
    cleared = clear_bake.clear_bakes(objects)
    seconds["clear"] = time.perf_counter() - t
    assert cleared == len(objects) and len(bpy.data.actions) == 0
    assert all(obj.animation_data is None for obj in objects)
    print(f"clear: {seconds['clear']:.2f} s", flush=True)
    report = {"benchmark": "bench/bake_rebake_clear.py", "objects": args.objects, "frames": f,
              "seconds": seconds, "blender": bpy.app.version_string, "python": platform.python_version(),
              "cpu_count": os.cpu_count(), "machine": platform.machine(), "cpu_model": cpu_model()}
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
