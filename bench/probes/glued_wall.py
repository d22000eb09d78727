"""The joints' cost on a destruction shot, built with the core alone: a one-brick-thick running-bond
wall (0.5 x 0.25 x 0.25 m bricks of 4 x 2 x 2 voxels, 31.25 kg, on a ground plane) glued by FIXED
joints between touching bricks (Blender's Connect gives a chain; this glues every touching pair, the
heavier case), breakable at ``--threshold`` (Blender's units), hit at its middle by a 2,000 kg ball of
0.5 m radius at 15 m/s, as in ../shared/notes/blender-rigid-body.md's Bullet measurements. The same
wall unglued is the baseline. Prints and writes ms per simulated second, the joints broken, and how
many bricks moved more than 5 cm.

    python bench/probes/glued_wall.py --bricks 2000 8000 --seconds 2 --out $OUT/glued_wall.json
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from addon.core import Material, ModelBuilder, SimulationSettings  # noqa: E402
from addon.core.opencl_engine import OpenCLEngine  # noqa: E402
from addon.core.shapes import box_particles  # noqa: E402
from bench.machine import commit, cpu_model, write_report  # noqa: E402

BRICK = np.array([0.5, 0.25, 0.25])
R = 0.0625


def glued_wall(bricks: int, glued: bool, threshold: float, courses: int | None = None):
    """The wall (about twice as long as tall), its joints, and the ball 1 m before its middle."""
    courses = courses or max(1, int(round(math.sqrt(bricks / 8))))
    per_course = int(math.ceil(bricks / courses))
    b = ModelBuilder(R)
    brick_material = Material(friction=0.5, restitution=0.0)
    points, index = [], {}
    local = box_particles((4, 2, 2), 2 * R)
    for course in range(courses):
        shift = 0.25 if course % 2 else 0.0
        for k in range(per_course):
            centre = np.array([(k - per_course / 2) * BRICK[0] + shift, 0.0, (course + 0.5) * BRICK[2]])
            index[(course, k)] = len(points)
            points.append(local + centre)
    count = len(points)
    b.add_bodies(np.array(points), masses=np.full(count, 31.25), materials=[brick_material] * count,
                 corner_reach=1.0)
    joints = 0
    if glued:
        for (course, k), body in index.items():
            shift = 0.25 if course % 2 else 0.0
            x = (k - per_course / 2) * BRICK[0] + shift
            if (course, k + 1) in index:  # the next brick of the course
                b.add_joint("FIXED", body, index[(course, k + 1)], (x + 0.25, 0.0, (course + 0.5) * BRICK[2]),
                            breaking_threshold=threshold)
                joints += 1
            # the two bricks of the course above that overlap this one
            for other in ((k, k - 1) if course % 2 == 0 else (k, k + 1)):
                if (course + 1, other) in index:
                    b.add_joint("FIXED", body, index[(course + 1, other)], (x, 0.0, (course + 1) * BRICK[2]),
                                breaking_threshold=threshold)
                    joints += 1
    # the ball, voxels within its radius, flying at the wall's middle
    grid = np.arange(-0.5 + R, 0.5, 2 * R)
    cube = np.stack(np.meshgrid(grid, grid, grid, indexing="ij"), -1).reshape(-1, 3)
    ball = cube[np.linalg.norm(cube, axis=1) <= 0.5]
    height = courses * BRICK[2] / 2
    b.add_body(ball, mass=2000.0, position=(0.0, -1.2, height), velocity=(0.0, 15.0, 0.0),
               material=Material(friction=0.5, restitution=0.0))
    b.add_ground_plane(0.0, material=brick_material)
    return b.finalize(), joints


def run(bricks: int, glued: bool, seconds: float, threshold: float) -> dict:
    model, joints = glued_wall(bricks, glued, threshold)
    engine = OpenCLEngine(model, SimulationSettings())
    per_second = int(round(1.0 / engine.params.substep))
    start = engine.body_state().position
    engine.step(2)  # builds the program's kernels and the first lists
    engine.queue.finish()
    began = time.perf_counter()
    engine.step(int(round(seconds * per_second)) - 2)
    engine.queue.finish()
    elapsed = time.perf_counter() - began
    moved = np.linalg.norm(engine.body_state().position - start, axis=1)[:-1] > 0.05
    return dict(bricks=model.body_count - 1, glued=glued, joints=joints, colours=engine.joint_colour_count,
                seconds=seconds, ms_per_simulated_s=1000.0 * elapsed / seconds,
                broken=engine.broken_joint_count, bricks_moved=int(moved.sum()), device=engine.device_name)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bricks", type=int, nargs="+", default=[2000])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--threshold", type=float, default=100.0, help="Blender's breaking threshold")
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    results = []
    for bricks in args.bricks:
        for glued in (True, False):
            result = run(bricks, glued, args.seconds, args.threshold)
            print(json.dumps(result), flush=True)
            results.append(result)
    report = dict(benchmark="glued_wall", commit=commit(), cpu_model=cpu_model(), threshold=args.threshold,
                  results=results)
    write_report(report, args.out)


if __name__ == "__main__":
    main()
