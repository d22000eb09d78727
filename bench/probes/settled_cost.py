"""What a settled debris field costs beside a moving one: the cube pile (bench/scenes.py), or with
--per-row a field of cubes --per-row a side (10,000 at 71: two layers, dropped), baked frame by
frame as a bake steps it (24 fps, a read of the poses per frame): the wall time of each simulated
second and the share of its bodies asleep at its end, up to --seconds. Issue 47's target: a settled
10k field costs at most 10 % of a moving one (the first second, its fall and landing).

    python bench/probes/settled_cost.py --cubes 10000 --per-row 71 --seconds 6 --out $OUT/settled.json
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from addon.core import SimulationSettings  # noqa: E402
from addon.core.simulation import Simulation  # noqa: E402
from bench.machine import commit, cpu_model, write_report  # noqa: E402
from bench.scenes import cube_pile  # noqa: E402

FPS = 24


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cubes", type=int, default=10000)
    parser.add_argument("--per-row", type=int, help="cubes a side (default: the pile's block)")
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    sim = Simulation(cube_pile(args.cubes, per_row=args.per_row), SimulationSettings(), frame_rate=FPS)
    seconds = []
    frames = sim.frames(args.seconds * FPS)
    next(frames)
    for second in range(args.seconds):
        began = time.perf_counter()
        for _ in range(FPS):
            result = next(frames)
        elapsed = time.perf_counter() - began
        still = np.all(sim.engine.body_state().velocity == 0.0, axis=1)
        seconds.append(dict(second=second + 1, wall_s=elapsed, asleep=float(still.mean()),
                            skipped_substeps=sim.engine.skipped_substeps))
        print(seconds[-1], flush=True)
    moving = seconds[0]["wall_s"]  # the fall and the landing
    report = dict(benchmark="settled_cost", commit=commit(), cpu_model=cpu_model(), device=sim.device_name,
                  cubes=args.cubes, per_row=args.per_row, seconds=seconds, moving_window_s=moving,
                  last_second_over_moving=seconds[-1]["wall_s"] / moving, last_frame_time=result.time)
    write_report(report, args.out)


if __name__ == "__main__":
    main()
