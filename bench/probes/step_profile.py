"""Where a substep's time goes on a device: the cube pile (bench/scenes.py cube_pile) run to a start
time, then one window profiled (OpenCL profiling events): wall time per substep, device time per
kernel, launches per substep and per detection, and the host's time waiting inside the step:
blocking reads, and the waits for the last detection's pair totals (read back without blocking).
Writes JSON with the machine and the commit.

    python bench/probes/step_profile.py --cubes 1000 10000 --start 3 --window 1 --setting ... --out $OUT/profile.json
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from addon.core import SimulationSettings  # noqa: E402
from addon.core.opencl_engine import OpenCLEngine  # noqa: E402
from bench.machine import commit, cpu_model, setting_overrides, write_report  # noqa: E402
from bench.scenes import cube_pile  # noqa: E402


def profile_pile(cubes: int, start: float, window: float, overrides: dict) -> dict:
    engine = OpenCLEngine(cube_pile(cubes), SimulationSettings(**overrides), profile=True)
    per_second = int(round(1.0 / engine.params.substep))
    engine.step(int(round(start * per_second)))
    engine.queue.finish()
    engine.collect_profile()
    engine.stage_seconds.clear()
    engine.stage_longest_seconds.clear()
    launches = {}
    original_record = engine._record

    def counting_record(stage, event):
        launches[stage] = launches.get(stage, 0) + 1
        original_record(stage, event)

    engine._record = counting_record
    waits = [0.0, 0]
    original_copy = engine.cl.enqueue_copy

    def timed_copy(queue, dest, src, *args, **kwargs):
        # a copy into a numpy array, unless it says otherwise, is a blocking read: the host waits
        # for the queue so far
        blocking = hasattr(dest, "__array_interface__") and kwargs.get("is_blocking", True)
        begin = time.perf_counter()
        event = original_copy(queue, dest, src, *args, **kwargs)
        if blocking:
            waits[0] += time.perf_counter() - begin
            waits[1] += 1
        return event

    engine.cl.enqueue_copy = timed_copy
    original_take = getattr(engine, "_take_totals", None)
    event_waits = [0.0, 0]

    def timed_take():
        # the wait for the last detection's read of the pair totals (the device is past it unless
        # the host is more than a detection ahead)
        begin = time.perf_counter()
        original_take()
        event_waits[0] += time.perf_counter() - begin
        event_waits[1] += 1

    if original_take is not None:
        engine._take_totals = timed_take
    substeps = int(round(window * per_second))
    begin = time.perf_counter()
    engine.step(substeps)
    engine.queue.finish()
    wall = time.perf_counter() - begin
    engine.cl.enqueue_copy = original_copy
    if original_take is not None:
        del engine._take_totals
    stages = engine.collect_profile()
    device = sum(stages.values())
    detections = substeps / engine.settings.substeps_per_detection
    return {
        "cubes": cubes, "device": engine.device_name, "substep_s": engine.params.substep, "window_s": window, "substeps": substeps,
        "wall_ms_per_substep": 1e3 * wall / substeps, "wall_ms_per_simulated_s": 1e3 * wall / window,
        "device_ms_per_substep": 1e3 * device / substeps,
        "host_waits_per_substep": waits[1] / substeps, "host_wait_ms_per_substep": 1e3 * waits[0] / substeps,
        "late_read_waits_per_substep": event_waits[1] / substeps,
        "late_read_wait_ms_per_substep": 1e3 * event_waits[0] / substeps,
        "overflow_pairs": engine.overflow_pair_count if engine.solving else 0,
        "launches_per_substep": sum(launches.values()) / substeps,
        "launches_per_detection": {k: v / detections for k, v in sorted(launches.items())},
        "device_ms_per_substep_by_kernel": {k: 1e3 * v / substeps for k, v in
                                            sorted(stages.items(), key=lambda item: -item[1])},
        "longest_launch_ms_by_kernel": {k: 1e3 * v for k, v in sorted(engine.stage_longest_seconds.items(),
                                                                         key=lambda item: -item[1])},
        "longest_launch_ms": 1e3 * max(engine.stage_longest_seconds.values(), default=0.0),
        "colours": len(engine.colour_pair_counts) if engine.solving else 0,
        "pairs": int(engine.colour_pair_counts.sum()) if engine.solving else 0,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cubes", type=int, nargs="+", default=[1000])
    parser.add_argument("--start", type=float, default=3.0, help="simulated seconds before the window")
    parser.add_argument("--window", type=float, default=1.0, help="simulated seconds profiled")
    parser.add_argument("--setting", action="append", default=[], help="a SimulationSettings field")
    parser.add_argument("--label", default="")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    overrides = setting_overrides(args.setting)
    results = []
    for cubes in args.cubes:
        result = profile_pile(cubes, args.start, args.window, overrides)
        print(result, file=sys.stderr, flush=True)
        results.append(result)
    write_report({"benchmark": "step_profile", "label": args.label, "settings": overrides, "commit": commit(),
                  "cpu_model": cpu_model(), "results": results}, args.out)


if __name__ == "__main__":
    main()
