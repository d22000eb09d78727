"""Where a pile's deepest corners come from: every simulated second of bench/scenes.py cube_pile(N),
the three lowest cube corners (or every --interval seconds from --start), each with its body's
height, speed, vertical velocity, spin, whether it sleeps and how many cubes lie above it (centres within 0.8 m across and over half a side higher), and the pile's
fractions asleep and at rest (speed under 1 cm/s). Tells sag under load (a resting cube with many
above) from a cube digging in while the pile flows (a fast one with none above). Writes JSON with
the machine and the commit.

    PYTHONPATH=. .venv/bin/python bench/probes/pile_corners.py --cubes 10000 --seconds 20 --out OUT.json
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
from addon.core.opencl_engine import OpenCLEngine  # noqa: E402
from addon.core.rotations import quaternion_multiply, quaternion_to_matrix  # noqa: E402
from bench.machine import commit, cpu_model, setting_overrides, write_report  # noqa: E402
from bench.scenes import cube_pile  # noqa: E402

HALF_SIDE = 0.5  # cube_pile's unit cubes
ABOVE_RADIUS = 0.8  # m across: a cube counts as above another if its centre is this close in x, y


def lowest_corners(engine: OpenCLEngine, count: int = 3) -> dict:
    """The pile now: the ``count`` lowest corners and what their bodies are doing."""
    state = engine.body_state()
    model = engine.model
    corners = np.array([(x, y, z) for x in (-HALF_SIDE, HALF_SIDE) for y in (-HALF_SIDE, HALF_SIDE)
                        for z in (-HALF_SIDE, HALF_SIDE)])
    rot = quaternion_to_matrix(quaternion_multiply(state.orientation, model.body_lattice_orientation))
    bottom = (state.position[:, None, 2] + np.einsum("bij,cj->bci", rot.reshape(-1, 3, 3), corners)[:, :, 2]).min(1)
    asleep = engine._read(engine.arguments["body_quiet"], (engine.body_count,)) >= engine.sleep[1]
    if engine.sleep[0] <= 0:
        asleep[:] = False
    speed = np.linalg.norm(state.velocity, axis=1)
    spin = np.linalg.norm(state.angular_velocity, axis=1)
    lowest = []
    for b in np.argsort(bottom)[:count]:
        across = np.linalg.norm(state.position[:, :2] - state.position[b, :2], axis=1)
        above = (across < ABOVE_RADIUS) & (state.position[:, 2] > state.position[b, 2] + HALF_SIDE)
        lowest.append({"body": int(b), "corner_m": float(bottom[b]), "centre_z_m": float(state.position[b, 2]),
                       "speed_mps": float(speed[b]), "vz_mps": float(state.velocity[b, 2]),
                       "spin_radps": float(spin[b]), "asleep": bool(asleep[b]), "cubes_above": int(above.sum())})
    return {"fraction_asleep": float(asleep.mean()), "fraction_at_rest": float(np.mean(speed < 0.01)),
            "lowest": lowest}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cubes", type=int, default=10000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--device", default=None, help="OpenCL device selector")
    parser.add_argument("--setting", action="append", default=[], help="a SimulationSettings field, name=value")
    parser.add_argument("--interval", type=float, default=1.0, help="simulated seconds between samples (1/30: "
                        "every detection at 240 Hz, 4 substeps each)")
    parser.add_argument("--start", type=float, default=0.0, help="the first sample's time is the first one after this")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    overrides = setting_overrides(args.setting)
    engine = OpenCLEngine(cube_pile(args.cubes), SimulationSettings(device=args.device, **overrides))
    per_sample = max(1, int(round(args.interval / engine.params.substep)))
    report = {"benchmark": "bench/probes/pile_corners.py", "commit": commit(), "cpu_model": cpu_model(),
              "device": engine.device_name, "cubes": args.cubes, "settings": overrides,
              "interval_s": per_sample * engine.params.substep, "seconds": {}}
    started = time.perf_counter()
    if args.start > 0:
        engine.step(int(args.start / (per_sample * engine.params.substep)) * per_sample)
    while engine.time < args.seconds - 1e-9:
        engine.step(per_sample)
        key = f"{engine.time:.3f}".rstrip("0").rstrip(".")
        report["seconds"][key] = lowest_corners(engine)
        print(f"{key} s: {report['seconds'][key]}", file=sys.stderr, flush=True)
    report["wall_s"] = time.perf_counter() - started
    write_report(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
