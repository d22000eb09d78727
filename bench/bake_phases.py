"""Simulate-and-bake phases of a large scene with the core alone (no Blender), timed separately:
building the model (what conversion produces), engine setup, stepping, reading poses back, and
turning poses into per-object matrices (what the bake writes as keys).

    python bench/bake_phases.py --cubes 10000 --frames 250 --device gpu --out out/bake_phases.json

Key writing itself needs Blender: bench/bake_keys_bench.py measures it (CPU work, same on any machine).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from addon.core import SimulationSettings  # noqa: E402
from addon.core.rotations import pose_matrices  # noqa: E402
from addon.core.simulation import Simulation  # noqa: E402
from bench.scenes import cube_pile  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cubes", type=int, default=10000)
    parser.add_argument("--frames", type=int, default=250)
    parser.add_argument("--fps", type=float, default=24.0)
    parser.add_argument("--device", default=None)
    parser.add_argument("--out", default=str(ROOT / "out" / "bake_phases.json"))
    args = parser.parse_args(argv)

    t = time.perf_counter()
    model = cube_pile(args.cubes)
    build_s = time.perf_counter() - t

    t = time.perf_counter()
    sim = Simulation(model, SimulationSettings(device=args.device), frame_rate=args.fps)
    engine = sim.engine
    engine.queue.finish()
    setup_s = time.perf_counter() - t

    step_s = readback_s = matrices_s = 0.0
    com = model.body_com_local
    identity = np.broadcast_to(np.eye(4), (model.body_count, 4, 4))
    frames = []
    for index in range(args.frames + 1):
        if index:
            t = time.perf_counter()
            engine.set_collider_frame(index - 1, sim.frame_duration)
            engine.set_body_frame(index - 1, sim.frame_duration)
            engine.step(sim.substeps_per_frame)
            engine.queue.finish()
            step_s += time.perf_counter() - t
        t = time.perf_counter()
        positions, orientations = engine.body_poses()
        readback_s += time.perf_counter() - t
        t = time.perf_counter()
        # world matrix of each object (objects given in world space at frame 0, as a conversion gives)
        frames.append(pose_matrices(positions, orientations, com, identity).astype(np.float32))
        matrices_s += time.perf_counter() - t

    speeds = np.linalg.norm(engine.body_state().velocity, axis=1)
    report = {
        "device": engine.device_name,
        "cubes": model.body_count,
        "particles": model.particle_count,
        "frames": args.frames,
        "fps": args.fps,
        "substeps_per_frame": sim.substeps_per_frame,
        "simulated_s": engine.time,
        "phases_s": {
            "build_model": build_s,
            "engine_setup": setup_s,
            "simulate": step_s,
            "read_back": readback_s,
            "pose_to_matrix": matrices_s,
        },
        "simulate_ms_per_frame": 1e3 * step_s / args.frames,
        "substeps_per_s": args.frames * sim.substeps_per_frame / step_s,
        "fraction_at_rest_end": float(np.mean(speeds < 0.01)),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
