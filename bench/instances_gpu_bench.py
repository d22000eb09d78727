"""Simulate and write the instance cache through the core alone (no Blender): 100k and 1M cubes.

    python bench/instances_gpu_bench.py --device gpu --bodies 100000 1000000 --frames 48 \
        --out out/instances_gpu.json

Per size: the cube pile of bench/scenes.py falls for ``--frames`` frames at 24 fps; every frame's poses
go to a PC2 cache (addon.core.point_cache) as a bake to instances writes them. Two runs: writing inline
(the loop computes the points, in blocks of bodies on all cores, and writes them before stepping on)
and on the background writer (the same, while the device steps the next frame). Reported: simulation seconds (Simulation.wall_seconds: stepping
and reading back), writing seconds, the loop's wait for the writer, and their ratios; the target is
writing <= 20 % of the simulation's time at 100k bodies. The cache goes to a temporary folder (or
--cache-dir) and is removed after each run.
Figures, never a timed test: JSON with the machine.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from addon.core import SimulationSettings, point_cache  # noqa: E402
from addon.core.simulation import Simulation  # noqa: E402
from bench.instances_bench import machine  # noqa: E402
from bench.scenes import cube_pile  # noqa: E402


def run(bodies: int, frames: int, device: str | None, folder: str, background: bool) -> dict:
    model = cube_pile(bodies)
    sim = Simulation(model, SimulationSettings(device=device), frame_rate=24.0)
    body_frames = point_cache.BodyFrames(model.body_com_local,
                                         np.broadcast_to(np.identity(4), (model.body_count, 4, 4)))
    path = os.path.join(folder, f"bench_{bodies}.pc2")
    writer = point_cache.PointCacheWriter(path, model.body_count * point_cache.POINTS_PER_BODY, frames + 1)
    t_total = time.perf_counter()
    write_s = 0.0
    if background:
        worker = point_cache.BackgroundCacheWriter(body_frames, writer)
        for frame in sim.frames(frames):
            worker.submit(frame.positions, frame.orientations)
        worker.commit()
        write_s, stall_s = worker.seconds, worker.stall_seconds
    else:
        out = np.empty((writer.points, 3), dtype=np.float32)
        with ThreadPoolExecutor(os.cpu_count() or 1) as pool:  # the same block threads, but waited for
            for frame in sim.frames(frames):
                t0 = time.perf_counter()
                writer.write(body_frames.points(frame.positions, frame.orientations, out=out, pool=pool))
                write_s += time.perf_counter() - t0
        writer.commit()
        stall_s = write_s
    total_s = time.perf_counter() - t_total
    size = os.path.getsize(path)
    os.remove(path)
    return dict(bodies=bodies, frames=frames, writer="background" if background else "inline",
                device=sim.device_name, substeps_per_frame=sim.substeps_per_frame,
                simulation_s=round(sim.wall_seconds, 3), write_s=round(write_s, 3), loop_wait_for_writer_s=round(stall_s, 3),
                total_s=round(total_s, 3), write_fraction_of_simulation=round(write_s / sim.wall_seconds, 4),
                wait_fraction_of_simulation=round(stall_s / sim.wall_seconds, 4), cache_bytes=size,
                write_ms_per_frame=round(1e3 * write_s / (frames + 1), 2))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bodies", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--frames", type=int, default=48)
    ap.add_argument("--device", default=None, help="OpenCL device selector (gpu, cpu, ...)")
    ap.add_argument("--cache-dir", default=None, help="where the caches go while written (default: a temp folder)")
    ap.add_argument("--out", default=str(ROOT / "out" / "instances_gpu.json"))
    args = ap.parse_args()
    folder = tempfile.mkdtemp(prefix="prb-instances-gpu-", dir=args.cache_dir)
    results = dict(benchmark="instances_gpu_bench", machine=machine(), target_write_fraction_at_100k=0.2, runs=[])
    try:
        for bodies in args.bodies:
            for background in (False, True):
                entry = run(bodies, args.frames, args.device, folder, background)
                results["runs"].append(entry)
                print(json.dumps(entry), flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
