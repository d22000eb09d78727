"""What a barrier across a whole launch costs on an OpenCL device, against a launch: one work-group
per compute unit (all resident at once), each barrier an atomic arrival counter and a generation the
last arrival raises (kernels/05_grid_barrier.cl), timed over 2,000 barriers; and whether a group sees
what the others wrote before the barrier (each group writes its slot, every work-item reads another
group's after it), with OpenCL's mem_fence and with PTX's membar.gl (NVIDIA). Writes JSON with the machine and the commit.

    python bench/probes/grid_barrier_cost.py --out $OUT/grid_barrier_cost.json
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from addon.core.device import create_context  # noqa: E402
from bench.machine import commit, cpu_model, write_report  # noqa: E402

KERNELS = r"""
__kernel void barriers(const int count, volatile __global int *grid_sync, __global int *slots,
                       __global int *wrong)
{
    int group = get_group_id(0), groups = get_num_groups(0);
    int misses = 0;
    volatile __local int arrived;
    for (int k = 1; k <= count; ++k) {
        if (get_local_id(0) == 0) slots[group] = k;
        if (!grid_barrier(grid_sync, groups, &arrived)) return;
        if (slots[(group + 1 + get_local_id(0)) % groups] != k) misses++;
        if (!grid_barrier(grid_sync, groups, &arrived)) return;
    }
    atomic_add(wrong, misses);
}
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--barriers", type=int, default=1000, help="rounds of two barriers each")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    import pyopencl as cl
    context, device_info = create_context()
    device = context.devices[0]
    source = (ROOT / "kernels" / "05_grid_barrier.cl").read_text() + KERNELS
    queue = cl.CommandQueue(context)
    units = device.max_compute_units
    report = {"benchmark": "grid_barrier_cost", "commit": commit(), "cpu_model": cpu_model(),
              "device": device_info.label, "compute_units": units, "runs": []}
    sync = cl.Buffer(context, cl.mem_flags.READ_WRITE, 12)  # count, generation, gave up
    slots = cl.Buffer(context, cl.mem_flags.READ_WRITE, 4 * 2 * units)  # groups: at most two per unit
    wrong = cl.Buffer(context, cl.mem_flags.READ_WRITE, 4)
    nvidia = "cl_nv_device_attribute_query" in device.extensions
    for membar, groups_per_unit, local in [(0, 1, 256), (1, 1, 64), (1, 1, 256), (1, 2, 256)]:
        if membar and not nvidia:
            continue
        program = cl.Program(context, source).build(options=f"-DGRID_FENCE_MEMBAR={membar}")
        kernel = cl.Kernel(program, "barriers")
        limit = kernel.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, device)
        local = min(local, limit)
        groups = groups_per_unit * units
        for buffer in (sync, wrong, slots):
            cl.enqueue_fill_buffer(queue, buffer, np.int32(0), 0, buffer.size)
        kernel.set_args(np.int32(args.barriers), sync, slots, wrong)
        queue.finish()
        began = time.perf_counter()
        cl.enqueue_nd_range_kernel(queue, kernel, (groups * local,), (local,))
        queue.finish()
        seconds = time.perf_counter() - began
        misses = np.zeros(1, np.int32)
        cl.enqueue_copy(queue, misses, wrong)
        run = {"membar": membar, "groups": groups, "local_size": local, "barriers": 2 * args.barriers,
               "us_per_barrier": 1e6 * seconds / (2 * args.barriers), "stale_reads": int(misses[0])}
        print(run, file=sys.stderr, flush=True)
        report["runs"].append(run)
    write_report(report, args.out)


if __name__ == "__main__":
    main()
