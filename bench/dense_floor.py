"""What the voxel corners cost on a dense triangle floor: 400 cubes resting on a 40 m floor of
180,000 triangles smaller than the particles (a sculpted terrain, say), timed with voxels (corner
reach 1, the default for solid meshes) and with round particles (reach 0). Sleeping off, so the
resting cubes keep computing their contacts.

    PYTHONPATH=. .venv/bin/python bench/dense_floor.py --out bench/results/dense_floor.json
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

from addon.core import ModelBuilder, SimulationSettings  # noqa: E402
from addon.core.opencl_engine import OpenCLEngine  # noqa: E402
from addon.core.shapes import cube_particles  # noqa: E402


def floor_mesh(size: float, cells: int, jitter: float, seed: int = 0):
    rng = np.random.default_rng(seed)
    xs = np.linspace(-size / 2, size / 2, cells + 1)
    gx, gy = np.meshgrid(xs, xs, indexing="ij")
    vertices = np.stack([gx.ravel(), gy.ravel(), rng.uniform(-jitter, jitter, gx.size)], 1)
    i, j = np.meshgrid(np.arange(cells), np.arange(cells), indexing="ij")
    a = (i * (cells + 1) + j).ravel()
    b, c, d = a + cells + 1, a + cells + 2, a + 1
    triangles = np.concatenate([np.stack([a, b, c], 1), np.stack([a, c, d], 1)])
    return vertices, triangles


def time_floor(reach: float, cubes: int, cells: int, steps: int, device: str | None) -> dict:
    rng = np.random.default_rng(0)
    builder = ModelBuilder(1.0 / 6.0)
    per_row = int(np.ceil(np.sqrt(cubes)))
    for k in range(cubes):
        builder.add_body(cube_particles(1.0), density=1000.0,
                         position=(1.5 * (k % per_row) - 15.0, 1.5 * (k // per_row) - 15.0, 0.7),
                         orientation=rng.normal(size=4) * [8, 1, 1, 1], corner_reach=reach)
    builder.add_static_mesh(*floor_mesh(40.0, cells, 0.01))
    engine = OpenCLEngine(builder.finalize(), SimulationSettings(sleep_speed=0.0, device=device))
    engine.step(steps)  # land and settle
    engine.queue.finish()
    start = time.perf_counter()
    engine.step(steps)
    engine.queue.finish()
    seconds = (time.perf_counter() - start) / steps
    return {"corner_reach": reach, "ms_per_substep": 1e3 * seconds, "triangles": 2 * cells * cells,
            "triangle_cell_m": engine.colliders.cell, "binned_entries": int(len(engine.colliders.grid.items)),
            "device": engine.device_name}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cubes", type=int, default=400)
    parser.add_argument("--cells", type=int, default=300)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--device", default=None)
    parser.add_argument("--out", default=str(ROOT / "out" / "dense_floor.json"))
    args = parser.parse_args(argv)
    runs = []
    for _ in range(args.repeat):
        for reach in (0.0, 1.0):
            runs.append(time_floor(reach, args.cubes, args.cells, args.steps, args.device))
            print(runs[-1], flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"cubes": args.cubes, "runs": runs}, indent=2))
    print("wrote", args.out)


if __name__ == "__main__":
    main()
