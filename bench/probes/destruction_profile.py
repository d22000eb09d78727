"""Where a destruction shot's time goes, kernel by kernel: an exported model of bench/destruction.py
(``--export-model``: the .blend converted as the bake converts it) stepped through ``Simulation``
with OpenCL profiling events. Prints and writes each kernel's device time, the wall time per frame
and how many detections rebuilt the neighbour lists. Profiling costs a little wall time.

    python bench/probes/destruction_profile.py out/models/destruction_2000.model.pkl --out $OUT/profile.json
"""
from __future__ import annotations

import argparse
import pickle
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from addon.core import opencl_engine  # noqa: E402
from addon.core.simulation import Simulation  # noqa: E402
from bench.machine import commit, cpu_model, write_report  # noqa: E402


def profile(path: str, frames: int | None, device: str | None) -> dict:
    with open(path, "rb") as handle:
        saved = pickle.load(handle)
    settings = saved["settings"] if device is None else replace(saved["settings"], device=device)
    engine_init = opencl_engine.OpenCLEngine.__init__

    def profiled(self, *args, **kwargs):  # Simulation builds the engine: with an event per kernel
        engine_init(self, *args, **{**kwargs, "profile": True})

    opencl_engine.OpenCLEngine.__init__ = profiled
    try:
        sim = Simulation(saved["model"], settings, frame_rate=saved["frame_rate"],
                         substeps_per_frame=saved["substeps_per_frame"])
    finally:
        opencl_engine.OpenCLEngine.__init__ = engine_init
    frames = frames or saved["frames"]
    started = time.perf_counter()
    for _ in sim.frames(frames):
        pass
    wall = time.perf_counter() - started
    engine = sim.engine
    engine.queue.finish()
    seconds = engine.collect_profile()
    total = sum(seconds.values())
    return {"model": path, "device": sim.device_name, "frames": frames, "wall_ms_per_frame": 1000.0 * wall / frames,
            "device_s": total, "rebuilds": int(engine.rebuilds), "broken_joints": sim.broken_joint_count,
            "kernels": {name: {"s": s, "share": s / total}
                        for name, s in sorted(seconds.items(), key=lambda item: -item[1])}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a model written by bench/destruction.py --export-model")
    parser.add_argument("--frames", type=int, help="frames to step (default: the scene's)")
    parser.add_argument("--device", help="OpenCL device selector (default: the saved settings')")
    parser.add_argument("--out", help="JSON path")
    args = parser.parse_args(argv)
    result = profile(args.model, args.frames, args.device)
    print(f"{result['device']}: {result['wall_ms_per_frame']:.1f} ms a frame (wall), "
          f"{result['device_s']:.2f} s on the device, {result['rebuilds']} rebuilds")
    for name, kernel in list(result["kernels"].items())[:12]:
        print(f"  {name:36s} {kernel['s']:8.2f} s {100 * kernel['share']:5.1f} %")
    write_report({"benchmark": "bench/probes/destruction_profile.py", "commit": commit(), "cpu_model": cpu_model(),
                  **result}, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
