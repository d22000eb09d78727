"""How long a cube dropped alone takes to come to rest, with voxels sharp against the ground
(corner reach 1, the default for solid meshes) and as round particles (reach 0).

100 unit cubes of 27 particles, random orientations, centres 1 m above a ground plane, 4 m apart
(no contact between them), friction 0.5, restitution 0.2; a cube is at rest from the last time its
centre moved at 1 cm/s or more or it turned at 0.02 rad/s or more (sleeping on, as in a bake).
Bullet's boxes on the same drops (session 4, Blender 5.0): median 0.79 s, 90 % 1.17 s.

    PYTHONPATH=. .venv/bin/python bench/single_drops.py --out bench/results/single_drops.json
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from addon.core import Material, ModelBuilder, SimulationSettings  # noqa: E402
from addon.core.opencl_engine import OpenCLEngine  # noqa: E402
from addon.core.shapes import cube_particles  # noqa: E402


def rest_times(reach: float, count: int, seconds: float, seed: int, device: str | None) -> tuple[np.ndarray, str]:
    rng = np.random.default_rng(seed)
    builder = ModelBuilder(1.0 / 6.0)
    material = Material(friction=0.5, restitution=0.2)
    side = int(np.ceil(np.sqrt(count)))
    for k in range(count):
        builder.add_body(cube_particles(1.0), density=1000.0, position=(4.0 * (k % side), 4.0 * (k // side), 1.0),
                         orientation=rng.normal(size=4), material=material, corner_reach=reach)
    builder.add_ground_plane(0.0, material=material)
    engine = OpenCLEngine(builder.finalize(), SimulationSettings(device=device))
    last_moving = np.zeros(count)
    interval = 0.01
    steps = max(1, int(round(interval / engine.params.substep)))
    while engine.time < seconds:
        engine.step(steps)
        state = engine.body_state()
        moving = ((np.linalg.norm(state.velocity, axis=1) >= 0.01)
                  | (np.linalg.norm(state.angular_velocity, axis=1) >= 0.02))
        last_moving[moving] = engine.time
    return last_moving, engine.device_name


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cubes", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--device", default=None)
    parser.add_argument("--out", default=str(ROOT / "out" / "single_drops.json"))
    args = parser.parse_args(argv)
    report = {"cubes": args.cubes, "seconds": args.seconds, "seed": args.seed, "runs": []}
    for reach in (1.0, 0.0):
        times, device = rest_times(reach, args.cubes, args.seconds, args.seed, args.device)
        row = {"corner_reach": reach, "rest_median_s": float(np.median(times)),
               "rest_p90_s": float(np.percentile(times, 90)), "rest_max_s": float(times.max()),
               "moving_at_end": int((times >= args.seconds - 0.011).sum())}
        report["device"] = device
        report["runs"].append(row)
        print(row, flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    print("wrote", args.out)


if __name__ == "__main__":
    main()
