"""What a contact geometry (SimulationSettings.contact_geometry) costs, the geometries side by side in
one run; prints and writes JSON with the machine.

  pile   bench/scenes.py cube_pile(N): process CPU time and wall time per simulated second in the
         fall (0-1 s) and the pile (3-4 s), the geometries alternated ``--rounds`` times (on a CPU
         device read CPU time: on a shared machine other processes move wall time more; on a GPU,
         wall time)
  block  300 cubes resting in a 10 x 10 x 3 block (slightly turned, no sleeping): seconds of the
         contact kernel over 300 substeps (OpenCL profiling), best of ``--rounds``

    PYTHONPATH=. .venv/bin/python bench/probes/contact_cost.py --out bench/results/contact_cost_pocl.json
    ... --setting device=gpu --cubes 100000
Figures, never a timed test.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from addon.core import ModelBuilder, SimulationSettings  # noqa: E402
from addon.core.opencl_engine import OpenCLEngine  # noqa: E402
from addon.core.settings import CONTACT_GEOMETRIES  # noqa: E402
from addon.core.shapes import cube_particles  # noqa: E402
from bench.machine import commit, cpu_model, setting_overrides, write_report  # noqa: E402
from bench.scenes import cube_pile  # noqa: E402


def pile(geometry: str, cubes: int, overrides: dict) -> dict:
    engine = OpenCLEngine(cube_pile(cubes), SimulationSettings(**{**overrides, "contact_geometry": geometry}))
    second = int(round(1.0 / engine.params.substep))

    def timed(substeps):
        cpu, wall = time.process_time(), time.perf_counter()
        engine.step(substeps)
        engine.queue.finish()
        return 1e3 * (time.process_time() - cpu), 1e3 * (time.perf_counter() - wall)

    fall_cpu, fall_wall = timed(second)
    engine.step(2 * second)
    engine.queue.finish()
    pile_cpu, pile_wall = timed(second)
    # CPU time for a CPU device (less moved by other processes), wall time for a GPU
    return {"fall_0_1s_cpu_ms_per_simulated_s": fall_cpu, "pile_3_4s_cpu_ms_per_simulated_s": pile_cpu,
            "fall_0_1s_wall_ms_per_simulated_s": fall_wall, "pile_3_4s_wall_ms_per_simulated_s": pile_wall,
            "rebuilds": engine.rebuilds, "load_1min": os.getloadavg()[0]}


def resting_block():
    rng = np.random.default_rng(0)
    builder = ModelBuilder(1 / 6)
    for x in range(10):
        for y in range(10):
            for z in range(3):
                q = np.array([1.0, *rng.normal(size=3) * 0.02])
                builder.add_body(cube_particles(1.0), density=1000.0, position=(x, y, 0.5 + z),
                                 orientation=q / np.linalg.norm(q), corner_reach=1.0)
    builder.add_ground_plane(0.0)
    return builder.finalize()


def block(geometry: str, overrides: dict) -> dict:
    settings = SimulationSettings(**{**overrides, "contact_geometry": geometry, "sleep_speed": 0.0})
    engine = OpenCLEngine(resting_block(), settings, profile=True)
    engine.step(50)
    engine.collect_profile()
    engine.stage_seconds.clear()
    engine.step(300)
    profile = engine.collect_profile()
    return {"contact_kernel_s": profile["compute_contacts"], "all_kernels_s": sum(profile.values()),
            "rebuilds": engine.rebuilds}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cubes", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", nargs="*", choices=("pile", "block"), default=["pile", "block"])
    parser.add_argument("--setting", action="append", default=[], help="a SimulationSettings field, e.g. device=gpu")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    overrides = setting_overrides(args.setting)
    probe = OpenCLEngine(cube_pile(8), SimulationSettings(**overrides))
    report = {"benchmark": "bench/probes/contact_cost.py", "settings": overrides, "device": probe.device_name,
              "host": platform.node(), "cpu_model": cpu_model(), "cpu_count": os.cpu_count(),
              "python": platform.python_version(), "load_before": list(os.getloadavg()),
              "commit": commit(), "cubes": args.cubes,
              "pile": [], "block": []}
    for round_ in range(args.rounds):
        for geometry in CONTACT_GEOMETRIES:
            if "pile" in args.only:
                row = {"round": round_, "geometry": geometry, **pile(geometry, args.cubes, overrides)}
                report["pile"].append(row)
                print("pile", json.dumps(row), file=sys.stderr, flush=True)
            if "block" in args.only:
                row = {"round": round_, "geometry": geometry, **block(geometry, overrides)}
                report["block"].append(row)
                print("block", json.dumps(row), file=sys.stderr, flush=True)
    report["load_after"] = list(os.getloadavg())
    write_report(report, args.out)


if __name__ == "__main__":
    main()
