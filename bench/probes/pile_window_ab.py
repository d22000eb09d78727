"""Two or more engine trees side by side on the cube pile's window (bench/scenes.py cube_pile):
each tree stepped to --start in its own process, then --window simulated seconds timed without
profiling (wall time to the queue's finish), rounds interleaved so that drift of the machine shows
in every tree alike. A tree is a folder holding addon/, kernels/ and bench/ (git archive of a
commit, or "." for this one), optionally with settings after "@", comma-separated: NAME=VALUE in
capitals sets an environment variable, a lower-case name a SimulationSettings field
("PATH@PRB_PAIR_CACHE=0", ".@substep=0.0083333,substeps_per_detection=2"). Each result carries the
sum of |position| at the window's end: equal sums say the trees' piles agree.

    python bench/probes/pile_window_ab.py --trees out/base . --cubes 1000 10000 --out $OUT/ab.json
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.machine import commit, cpu_model, write_report  # noqa: E402

CHILD = r'''
import json, sys, time
sys.path.insert(0, sys.argv[1])
from addon.core import SimulationSettings
from addon.core.opencl_engine import OpenCLEngine
from bench.scenes import cube_pile
cubes, start, window = int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
engine = OpenCLEngine(cube_pile(cubes), SimulationSettings(**json.loads(sys.argv[5])))
per_second = int(round(1.0 / engine.params.substep))
engine.step(int(round(start * per_second)))
engine.queue.finish()
began = time.perf_counter()
engine.step(int(round(window * per_second)))
engine.queue.finish()
ended = time.perf_counter()
print(json.dumps({"ms_per_simulated_s": 1000.0 * (ended - began) / window, "device": engine.device_name,
                  "position_sum": float(abs(engine.body_state().position.astype(float)).sum())}))
'''


def run_tree(tree: str, cubes: int, start: float, window: float) -> dict:
    path, _, assignments = tree.partition("@")
    environment, settings = dict(os.environ), {}
    for assignment in filter(None, assignments.split(",")):
        name, value = assignment.split("=", 1)
        if name.isupper():
            environment[name] = value
        else:
            settings[name] = json.loads(value)
    done = subprocess.run([sys.executable, "-c", CHILD, str(Path(path).resolve()), str(cubes), str(start),
                           str(window), json.dumps(settings)], capture_output=True, text=True, env=environment)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if lines else {"error": done.stderr[-2000:]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", nargs="+", required=True)
    parser.add_argument("--cubes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--start", type=float, default=3.0)
    parser.add_argument("--window", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    results = []
    for round_ in range(args.rounds):
        for cubes in args.cubes:
            for tree in args.trees:
                result = dict(tree=tree, cubes=cubes, round=round_, **run_tree(tree, cubes, args.start, args.window))
                print(result, file=sys.stderr, flush=True)
                results.append(result)
    write_report({"benchmark": "pile_window_ab", "commit": commit(), "cpu_model": cpu_model(),
                  "start_s": args.start, "window_s": args.window, "results": results}, args.out)


if __name__ == "__main__":
    main()
