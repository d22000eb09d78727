"""Engine benchmark: substeps per second for N 27-particle cubes falling into a pile.

Writes JSON (device, bodies, particles, ms/substep, steps/s, per-stage ms, estimated bandwidth).
    python bench/engine_bench.py                       # 100, 1k, 10k on the default device
    python bench/engine_bench.py --sizes 1000 100000 1000000 --device gpu --out bench/results/gpu.json
    python bench/engine_bench.py --sizes 100000 --pile-window-at 6 --skins 0.25 0.5 1.0   # tuning
Figures, never a timed test: docs/performance.md quotes them with the machine they came from.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from addon.core import SimulationSettings  # noqa: E402
from addon.core.contact_geometry import PARTICLES  # noqa: E402
from addon.core.opencl_engine import OpenCLEngine  # noqa: E402
from bench.scenes import cube_pile  # noqa: E402

# Fewest bytes one substep must move per particle (each buffer read or written once, friction
# history counted for its key header only). Every substep: gather 76 (index, offset, body,
# material in; position/velocity/omega out), contacts 92 (the three bucket-ordered copies, list
# length, key headers in and out, force and torque out), bodies 32 (force and torque in). A
# substep that rebuilds the grid and lists adds 80: buckets 32 (offset, body, bucket out, count),
# scan 16 (~1.5 buckets per particle, read and written), scatter 20, sort 8, list length 4.
BYTES_PER_PARTICLE_STEP = 200
BYTES_PER_PARTICLE_REBUILD = 80


def time_window(engine, steps: int) -> tuple[float, int]:
    """ms per substep over the next ``steps`` substeps, and how many of them rebuilt the lists."""
    engine.queue.finish()
    rebuilds_before = engine.rebuilds
    start = time.perf_counter()
    engine.step(steps)
    engine.queue.finish()
    return 1e3 * (time.perf_counter() - start) / steps, engine.rebuilds - rebuilds_before


def run_size(count: int, device: str | None, steps: int, warmup_steps: int, skin: float,
             pile_window_at: float | None = None) -> dict:
    t0 = time.perf_counter()
    model = cube_pile(count)
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    engine = OpenCLEngine(model, SimulationSettings(device=device), profile=False, neighbour_skin=skin)
    setup_s = time.perf_counter() - t0
    # the pile starts falling: warm up (compilation, caches), then time a fixed window of substeps,
    # so every device does the same work (contacts grow as the pile forms)
    engine.step(warmup_steps)
    ms_per_step, rebuilds = time_window(engine, steps)
    # per-stage split, measured separately with device events (profiling adds a little overhead)
    profiled = OpenCLEngine(model, SimulationSettings(device=device), profile=True, neighbour_skin=skin)
    profiled.step(warmup_steps)
    profiled.collect_profile()
    profiled.stage_seconds.clear()
    stage_steps = steps  # the same window as the timing (contacts grow as the pile forms)
    profiled.step(stage_steps)
    profiled.queue.finish()
    stages = {k: 1e3 * v / stage_steps for k, v in profiled.collect_profile().items()}
    state = engine.body_state()
    pile = {}
    if pile_window_at:
        # a second window later on, once most of the block has landed (dense contacts, sleeping)
        engine.step(max(0, round(pile_window_at / engine.params.substep) - engine.substeps_done))
        pile_ms, pile_rebuilds = time_window(engine, steps)
        pile = {"pile_window_at_s": engine.time - steps * engine.params.substep, "pile_ms_per_step": pile_ms,
                "pile_steps_per_s": 1e3 / pile_ms, "pile_rebuilds": pile_rebuilds}
        # and its per-stage split, from the profiled engine brought to the same moment
        profiled.step(max(0, round(pile_window_at / profiled.params.substep) - profiled.substeps_done))
        profiled.queue.finish()
        profiled.collect_profile()
        profiled.stage_seconds.clear()
        profiled.step(steps)
        profiled.queue.finish()
        pile["pile_stage_ms_per_step"] = {k: 1e3 * v / steps for k, v in profiled.collect_profile().items()}
    return {
        "bodies": model.body_count,
        "particles": model.particle_count,
        "substep_s": engine.params.substep,
        "grid_bits": list(engine.grid_bits),
        "neighbour_skin": skin,
        "steps_timed": steps,
        "warmup_steps": warmup_steps,
        "rebuilds_in_window": rebuilds,
        **pile,
        "ms_per_step": ms_per_step,
        "steps_per_s": 1e3 / ms_per_step,
        "simulated_s_per_wall_s": engine.params.substep * 1e3 / ms_per_step,
        "stage_ms_per_step": stages,
        "est_bandwidth_GBps": (BYTES_PER_PARTICLE_STEP + BYTES_PER_PARTICLE_REBUILD * rebuilds / steps)
        * model.particle_count / (ms_per_step * 1e-3) / 1e9,
        "build_model_s": build_s,
        "engine_setup_s": setup_s,
        "finite": bool(abs(state.position).max() < 1e6),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--device", default=None, help="OpenCL device selector (auto, gpu, cpu, P:D, name)")
    parser.add_argument("--steps", type=int, default=500,
                        help="substeps timed per size, after the warm-up (500: the first 0.9 s of the fall)")
    parser.add_argument("--warmup-steps", type=int, default=20)
    parser.add_argument("--skins", type=float, nargs="+", default=[PARTICLES.neighbour_skin],
                        help="neighbour-list skins (fraction of the particle diameter) to run each size with")
    parser.add_argument("--pile-window-at", type=float, default=None,
                        help="also time a window starting at this simulated second (the pile)")
    parser.add_argument("--out", default=str(ROOT / "out" / "engine_bench.json"))
    args = parser.parse_args(argv)
    results = []
    device_label = None
    for count in args.sizes:
        for skin in args.skins:
            result = run_size(count, args.device, args.steps, args.warmup_steps, skin, args.pile_window_at)
            results.append(result)
            pile = (f"  pile@{result['pile_window_at_s']:.1f}s {result['pile_ms_per_step']:.3f} ms/step "
                    f"({result['pile_rebuilds']} rebuilds: "
                    + " ".join(f"{k}={v:.3f}" for k, v in result["pile_stage_ms_per_step"].items()) + ")"
                    if "pile_ms_per_step" in result else "")
            print(f"{result['bodies']:>8} cubes {result['particles']:>9} particles skin {skin:4.2f} "
                  f"{result['ms_per_step']:8.3f} ms/step {result['steps_per_s']:9.1f} steps/s "
                  f"({result['rebuilds_in_window']} rebuilds) ~{result['est_bandwidth_GBps']:7.1f} GB/s  "
                  + " ".join(f"{k}={v:.3f}" for k, v in result["stage_ms_per_step"].items()) + pile, flush=True)
    from addon.core.device import choose_device

    device_label = choose_device(args.device).label
    report = {
        "device": device_label,
        "host": platform.node(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "bytes_per_particle_step_counted": BYTES_PER_PARTICLE_STEP,
        "bytes_per_particle_rebuild_counted": BYTES_PER_PARTICLE_REBUILD,
        "results": results,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
