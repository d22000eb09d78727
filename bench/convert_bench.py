"""Benchmark: conversion of many linked duplicates (one mesh datablock) into particle bodies.

    PYTHONPATH=. .venv/bin/python bench/convert_bench.py [--objects 10000] [--out out/convert_bench.json]

Builds a scene of N linked duplicates of a cube (plus a few single-user objects), times
``convert_scene`` (evaluation, voxelizing, ModelBuilder, finalize), and writes JSON with the numbers.
Target: 10,000 linked duplicates in under 2 s on a 2-core CPU.
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

from bench.machine import cpu_model  # noqa: E402


def build_scene(n: int, seed: int = 0):
    import bpy
    import numpy as np

    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    bpy.ops.mesh.primitive_cube_add(size=0.3)
    src = bpy.context.view_layer.objects.active
    rng = np.random.default_rng(seed)
    side = int(np.ceil(n ** (1 / 3)))
    objs = [src]
    coll = scene.collection
    for i in range(1, n):
        o = src.copy()
        o.location = (0.5 * (i % side), 0.5 * ((i // side) % side), 0.5 * (i // side**2) + 1.0)
        o.rotation_euler = rng.uniform(-3.14, 3.14, 3)
        coll.objects.link(o)
        objs.append(o)
    bpy.ops.mesh.primitive_plane_add(size=40.0)
    ground = bpy.context.view_layer.objects.active
    bpy.context.view_layer.update()
    return objs, ground


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--radius", type=float, default=0.05)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "out" / "convert_bench.json"))
    args = parser.parse_args(argv)

    import bpy

    from addon.blender import convert

    t0 = time.perf_counter()
    objs, ground = build_scene(args.objects)
    setup = time.perf_counter() - t0
    statics = [ground]
    times = []
    conv = None
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        conv = convert.convert_scene(bpy.context, objs, statics, radius=args.radius,
                                     frame_start=1, frame_end=250)
        times.append(time.perf_counter() - t0)
    result = dict(
        benchmark="convert_linked_duplicates",
        objects=args.objects,
        radius=args.radius,
        bodies=len(conv.bodies),
        particles=conv.particle_count,
        particles_per_body=conv.particle_count // max(len(conv.bodies), 1),
        colliders=len(conv.colliders),
        seconds=times,
        best_seconds=min(times),
        objects_per_second=args.objects / min(times),
        step_seconds={k: round(v, 4) for k, v in conv.timings.items()},  # last run, per step
        scene_setup_seconds=setup,
        target_seconds=2.0,
        passed=min(times) < 2.0,
        cpu_count=os.cpu_count(),
        machine=platform.machine(),
        cpu_model=cpu_model(),
        python=platform.python_version(),
        blender=bpy.app.version_string,
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
