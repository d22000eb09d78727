"""Engine benchmark: substeps per second for N 27-particle cubes falling into a pile.

Writes JSON (device, bodies, particles, ms/substep, steps/s, per-stage ms, estimated bandwidth).
    python bench/engine_bench.py                       # 100, 1k, 10k on the default device
    python bench/engine_bench.py --sizes 1000 100000 1000000 --device gpu --out bench/results/gpu.json
Figures, never a timed test: the README quotes them with the machine they came from.
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
from addon.core.opencl_engine import OpenCLEngine  # noqa: E402
from bench.scenes import cube_pile  # noqa: E402

# Fewest bytes one substep must move per particle (each buffer read or written once, friction
# history counted for its key header only): buckets 32 (offset, body, bucket out, count), scan 16
# (~1.5 buckets per particle, read and written), scatter 20, sort+gather 88 (indices, offset,
# body, material; position/velocity/omega out), contacts+bodies 108 (offset, material, the three
# bucket-ordered copies, key headers in and out).
BYTES_PER_PARTICLE_STEP = 264


def run_size(count: int, device: str | None, steps: int, warmup_steps: int) -> dict:
    t0 = time.perf_counter()
    model = cube_pile(count)
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    engine = OpenCLEngine(model, SimulationSettings(device=device), profile=False)
    setup_s = time.perf_counter() - t0
    # the pile starts falling: warm up (compilation, caches), then time a fixed window of substeps,
    # so every device does the same work (contacts grow as the pile forms)
    engine.step(warmup_steps)
    engine.queue.finish()
    start = time.perf_counter()
    engine.step(steps)
    engine.queue.finish()
    elapsed = time.perf_counter() - start
    ms_per_step = 1e3 * elapsed / steps
    # per-stage split, measured separately with device events (profiling adds a little overhead)
    profiled = OpenCLEngine(model, SimulationSettings(device=device), profile=True)
    profiled.step(warmup_steps)
    profiled.collect_profile()
    profiled.stage_seconds.clear()
    stage_steps = steps  # the same window as the timing (contacts grow as the pile forms)
    profiled.step(stage_steps)
    profiled.queue.finish()
    stages = {k: 1e3 * v / stage_steps for k, v in profiled.collect_profile().items()}
    state = engine.body_state()
    return {
        "bodies": model.body_count,
        "particles": model.particle_count,
        "substep_s": engine.params.substep,
        "grid_bits": list(engine.grid_bits),
        "steps_timed": steps,
        "warmup_steps": warmup_steps,
        "ms_per_step": ms_per_step,
        "steps_per_s": 1e3 / ms_per_step,
        "simulated_s_per_wall_s": engine.params.substep * 1e3 / ms_per_step,
        "stage_ms_per_step": stages,
        "est_bandwidth_GBps": BYTES_PER_PARTICLE_STEP * model.particle_count / (ms_per_step * 1e-3) / 1e9,
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
    parser.add_argument("--out", default=str(ROOT / "out" / "engine_bench.json"))
    args = parser.parse_args(argv)
    results = []
    device_label = None
    for count in args.sizes:
        result = run_size(count, args.device, args.steps, args.warmup_steps)
        results.append(result)
        print(f"{result['bodies']:>8} cubes {result['particles']:>9} particles  {result['ms_per_step']:8.3f} ms/step "
              f"{result['steps_per_s']:9.1f} steps/s  ~{result['est_bandwidth_GBps']:7.1f} GB/s  "
              + " ".join(f"{k}={v:.3f}" for k, v in result["stage_ms_per_step"].items()), flush=True)
    from addon.core.device import choose_device

    device_label = choose_device(args.device).label
    report = {
        "device": device_label,
        "host": platform.node(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "bytes_per_particle_step_counted": BYTES_PER_PARTICLE_STEP,
        "results": results,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
