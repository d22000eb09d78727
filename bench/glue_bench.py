"""Benchmark: glue's bonds found from the voxels of a synthetic fractured block (core.glue).

    PYTHONPATH=. .venv/bin/python bench/glue_bench.py [--pieces 10000 100000] [--out bench/results/glue.json]

The block is a grid of cube pieces, each ``--voxels``^3 particles, a gap of ``--gap`` voxel between
neighbours (fractured pieces: none to a fraction of a voxel). Timed: ``glue_bodies`` (the touching
particles found, bonds formed and added with ModelBuilder.add_bonds) and ``finalize`` (the bonds'
JointModel with the rest of the model), each the best of ``--repeat``. The bonds are checked: every
face between neighbours, none else. No Blender objects: a Blender scene of 100,000 objects costs
minutes of its own to build, and the glue's part is the same.
"""
from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from addon.core import ModelBuilder  # noqa: E402
from addon.core.glue import glue_bodies  # noqa: E402
from addon.core.shapes import box_particles  # noqa: E402
from bench.machine import commit, cpu_model, write_report  # noqa: E402

SHAPES = {10_000: (25, 20, 20), 100_000: (50, 50, 40)}


def block_shape(pieces: int) -> tuple[int, int, int]:
    if pieces in SHAPES:
        return SHAPES[pieces]
    side = round(pieces ** (1 / 3))
    return side, side, max(1, round(pieces / side**2))


def fractured_block(shape, voxels: int, gap: float, radius: float) -> ModelBuilder:
    """A ModelBuilder holding the block's pieces (one add_bodies batch, as linked duplicates convert)."""
    pitch = 2 * radius * (voxels + gap)
    grid = np.stack(np.meshgrid(*[np.arange(n) for n in shape], indexing="ij"), axis=-1).reshape(-1, 3)
    builder = ModelBuilder(radius)
    particles = box_particles((voxels,) * 3, 2 * radius)[None] + (grid * pitch)[:, None, :]
    builder.add_bodies(particles, masses=np.full(len(grid), 1.0))
    return builder


def face_count(shape) -> int:
    nx, ny, nz = shape
    return (nx - 1) * ny * nz + nx * (ny - 1) * nz + nx * ny * (nz - 1)


def measure(pieces: int, voxels: int, gap: float, radius: float, repeat: int) -> dict:
    shape = block_shape(pieces)
    glue_times, finalize_times = [], []
    for _ in range(repeat):
        builder = fractured_block(shape, voxels, gap, radius)
        t0 = time.perf_counter()
        bonds = glue_bodies(builder, np.zeros(builder.body_count, dtype=np.int64), 100_000.0)
        t1 = time.perf_counter()
        model = builder.finalize()
        t2 = time.perf_counter()
        glue_times.append(t1 - t0)
        finalize_times.append(t2 - t1)
    expected = face_count(shape)
    face_area = (voxels * 2 * radius) ** 2
    return dict(pieces=int(np.prod(shape)), block=list(shape), voxels_per_piece=voxels**3,
                particles=int(model.particle_count), bonds=bonds.count, bonds_expected=expected,
                bonds_correct=bool(bonds.count == expected and np.allclose(bonds.area, face_area)),
                joints_in_model=model.joints.count, glue_s=min(glue_times), glue_s_all=glue_times,
                finalize_s=min(finalize_times), finalize_s_all=finalize_times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pieces", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--voxels", type=int, default=3, help="particles along a piece's edge")
    parser.add_argument("--gap", type=float, default=0.1, help="between pieces, in voxels")
    parser.add_argument("--radius", type=float, default=0.05)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "out" / "glue_bench.json"))
    args = parser.parse_args(argv)
    runs = [measure(n, args.voxels, args.gap, args.radius, args.repeat) for n in args.pieces]
    report = dict(benchmark="glue_bench", commit=commit(), cpu_model=cpu_model(), cpu_count=os.cpu_count(),
                  load_average=os.getloadavg(), numpy=np.__version__, gap_voxels=args.gap,
                  radius=args.radius, runs=runs,
                  peak_rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    write_report(report, args.out)


if __name__ == "__main__":
    main()
