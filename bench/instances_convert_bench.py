"""Converting a geometry-nodes scatter of ~100k rocks into bodies (addon/blender/instancers.py + convert.py):
seconds per conversion stage, and how many voxelizations the instances need, with equal sizes and with
random sizes of 0.8-1.2 (shared per 1 % of size, body_geometry.INSTANCE_SIZE_STEP; particle radius 0.8 x, so the
smallest rocks keep their 8 particles).

    .venv/bin/python bench/instances_convert_bench.py --out bench/results/instances_convert_100k_cpu.json

Each scene is built by sample_scenes/generate.py (scatter, in its own process) and converted here with
the bpy module, nothing simulated. Figures, never a timed test: JSON with the machine (and its load).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.instances_bench import machine  # noqa: E402

# ~100k round rocks: the scene of tools/pile_picture.py
SCATTER = dict(side=80, layers=38, layer_gap=0.66, taper=0.97, particle_radius=0.085, roundness=1.0)


def build(path: Path, **params) -> None:
    args = [sys.executable, "sample_scenes/generate.py", "scatter", "--output", str(path)]
    for key, value in params.items():
        args += ["--param", f"{key}={json.dumps(value)}"]
    subprocess.run(args, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), check=True, capture_output=True)


def convert(path: Path) -> dict:
    import bpy

    import addon.blender as blender
    from addon.blender import convert as conv
    from addon.blender.bake_objects import pick_objects

    bpy.ops.wm.open_mainfile(filepath=str(path), load_ui=False)
    blender.register()
    try:
        scene = bpy.context.scene
        dynamic, static = pick_objects(bpy.context, selected=[])
        calls = []
        voxelize = conv.vox.voxelize

        def counted(*args, **kw):
            calls.append(1)
            return voxelize(*args, **kw)

        conv.vox.voxelize = counted
        try:
            t0 = time.perf_counter()
            result = conv.convert_scene(bpy.context, dynamic, static, radius=scene.prb_settings.particle_radius,
                                        frame_start=1, frame_end=1)
            seconds = time.perf_counter() - t0
        finally:
            conv.vox.voxelize = voxelize
        return dict(bodies=result.model.body_count, particles=result.particle_count, distinct_meshes=sum(
            len(b.meshes) for b in result.instancers), voxelizations=len(calls), seconds=round(seconds, 2),
            stage_seconds={k: round(v, 3) for k, v in result.timings.items()})
    finally:
        blender.unregister()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(ROOT / "out" / "instances_convert_bench.json"))
    args = ap.parse_args()
    import bpy

    results = dict(benchmark="instances_convert_bench", machine=machine(), bpy=bpy.app.version_string,
                   scatter=SCATTER, runs=[])
    with tempfile.TemporaryDirectory(prefix="prb-instances-convert-") as folder:
        for spread in (0.0, 0.2):
            path = Path(folder) / f"scatter_{spread}.blend"
            # the smallest rocks (0.8) keep 8 particles at 0.8 x the radius
            build(path, **dict(SCATTER, size_spread=spread, particle_radius=SCATTER["particle_radius"] * (1 - spread)))
            entry = dict(size_spread=spread, **convert(path))
            results["runs"].append(entry)
            print(json.dumps(entry), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
