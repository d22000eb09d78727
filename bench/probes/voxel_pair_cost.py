"""What compute_contacts' voxel-against-voxel test (40_contacts.cl voxel_pair) costs per call on
a device, and how many calls a detection of the 1000-cube pile makes: the cube pile run to
--start, every pair of voxels of two bodies within reach counted (the lower body computes a
pair), then voxel_pair timed on those pairs in a kernel of its own (the engine's program with one
kernel added). Writes JSON with the machine and the commit.

    python bench/probes/voxel_pair_cost.py --out $OUT/voxel_pair_cost.json
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
from addon.core.opencl_program import program_source  # noqa: E402
from bench.machine import commit, cpu_model, write_report  # noqa: E402
from bench.scenes import cube_pile  # noqa: E402

TIMING_KERNEL = r'''
__kernel void time_voxel_pair(__global const float4 *p_i, __global const float4 *p_j, __global const float4 *q_i,
                              __global const float4 *q_j, __global float4 *out, const int n, const int repeats,
                              const float radius)
{
    int g = get_global_id(0);
    if (g >= n) return;
    float3 A[3], B[3];
    for (int k = 0; k < 3; ++k) {
        float3 e = (float3)(k == 0, k == 1, k == 2);
        A[k] = quat_rotate(q_i[g], e);
        B[k] = quat_rotate(q_j[g], e);
    }
    float3 dv = (float3)(0.3f, -0.2f, 0.5f) * (float)(g % 7);  // some pairs closing, some parting
    float4 found = (float4)(0.0f);
    for (int k = 0; k < repeats; ++k) {
        float3 n, point;
        float depth, share;
        if (voxel_pair(p_i[g].xyz, A, 63u, p_j[g].xyz, B, 63u, dv, radius, &n, &depth, &point, &share))
            found = (float4)(depth, share, n.z, point.z);
    }
    out[g] = found;
}
'''


def voxel_pairs_within_reach(positions, body, reach):
    """(i, j) of two bodies' voxels closer than reach, i's body the lower (as the kernels compute them)."""
    cells = np.floor(positions / reach).astype(np.int64)
    members = {}
    for index, cell in enumerate(map(tuple, cells)):
        members.setdefault(cell, []).append(index)
    pairs = []
    for cell, inside in members.items():
        near = np.array([j for dz in (-1, 0, 1) for dy in (-1, 0, 1) for dx in (-1, 0, 1)
                         for j in members.get((cell[0] + dx, cell[1] + dy, cell[2] + dz), ())])
        for i in inside:
            close = near[(((positions[near] - positions[i]) ** 2).sum(1) < reach * reach) & (body[near] > body[i])]
            pairs.extend((i, j) for j in close)
    return np.array(pairs)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cubes", type=int, default=1000)
    parser.add_argument("--start", type=float, default=2.5)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    import pyopencl as cl
    engine = OpenCLEngine(cube_pile(args.cubes), SimulationSettings())
    engine.step(int(round(args.start / engine.params.substep)))
    positions = engine.particle_positions()
    model = engine.model
    radius = model.particle_radius
    reach = (2.0 * np.sqrt(3.0) + engine.settings.speculative_margin) * radius
    pairs = voxel_pairs_within_reach(positions, model.particle_body, reach)
    program = cl.Program(engine.context, program_source() + TIMING_KERNEL).build(options=list(engine.build_options))
    orientation = engine.body_state().orientation  # w, x, y, z
    device_quaternion = np.concatenate([orientation[:, 1:], orientation[:, :1]], axis=1)

    def buffer(values):
        return cl.Buffer(engine.context, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR,
                         hostbuf=np.ascontiguousarray(values, np.float32))

    n = len(pairs)
    inputs = [buffer(np.c_[positions[pairs[:, 0]], np.zeros(n)]), buffer(np.c_[positions[pairs[:, 1]], np.zeros(n)]),
              buffer(device_quaternion[model.particle_body[pairs[:, 0]]]),
              buffer(device_quaternion[model.particle_body[pairs[:, 1]]])]
    out = cl.Buffer(engine.context, cl.mem_flags.WRITE_ONLY, 16 * n)
    kernel = cl.Kernel(program, "time_voxel_pair")
    kernel.set_args(*inputs, out, np.int32(n), np.int32(args.repeats), np.float32(radius))
    size = ((n + 63) // 64 * 64,)
    cl.enqueue_nd_range_kernel(engine.queue, kernel, size, (64,))
    engine.queue.finish()
    times = []
    for _ in range(3):
        began = time.perf_counter()
        cl.enqueue_nd_range_kernel(engine.queue, kernel, size, (64,))
        engine.queue.finish()
        times.append((time.perf_counter() - began) / args.repeats)
    found = np.empty((n, 4), np.float32)
    cl.enqueue_copy(engine.queue, found, out)
    seconds = min(times)
    write_report({"benchmark": "voxel_pair_cost", "commit": commit(), "cpu_model": cpu_model(),
                  "device": engine.device_name, "cubes": args.cubes, "start_s": args.start,
                  "voxel_pairs_per_detection": n, "particles": len(positions),
                  "fraction_meeting": float(np.mean(found[:, 1] != 0)),
                  "ms_per_detection": 1e3 * seconds, "ns_per_call": 1e9 * seconds / n}, args.out)


if __name__ == "__main__":
    main()
