"""What a launch costs on an OpenCL device, apart from its work: the host's time per enqueue
(pyopencl's enqueue_nd_range_kernel, 20,000 back to back), the device's profiled duration of an
empty kernel, and of one work-item following a chain of dependent loads (10 and 100 links, in a
1 MB and a 256 MB table): the floor under each of the solve's launches, and the price of each
load a pair's pass waits on. Writes JSON with the machine and the commit.

    python bench/probes/launch_cost.py --out $OUT/launch_cost.json
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

SOURCE = """
__kernel void empty(__global int *out) { }
__kernel void scale(__global float *a, const int n, const float s) {
    int i = get_global_id(0);
    if (i < n) a[i] *= s;
}
__kernel void chain(const int links, __global const int *next, __global int *out) {
    int at = get_global_id(0);
    for (int k = 0; k < links; ++k) at = next[at];
    out[get_global_id(0)] = at;
}
"""


def median_duration_us(queue, kernel, args, size=64, repeats=50):
    events = [kernel(queue, (size,), None, *args) for _ in range(repeats)]
    queue.finish()
    durations = sorted((event.profile.end - event.profile.start) * 1e-3 for event in events)
    return durations[len(durations) // 2]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    import pyopencl as cl
    context, device_info = create_context()
    program = cl.Program(context, SOURCE).build()
    report = {"benchmark": "launch_cost", "commit": commit(), "cpu_model": cpu_model(), "device": device_info.label}
    queue = cl.CommandQueue(context)
    values = cl.Buffer(context, cl.mem_flags.READ_WRITE, 4 * 1024)
    cl.enqueue_fill_buffer(queue, values, np.float32(1), 0, 4 * 1024)
    kernels = []
    for _ in range(64):
        kernel = cl.Kernel(program, "scale")
        kernel.set_args(values, np.int32(1024), np.float32(1.0))
        kernels.append(kernel)
    queue.finish()
    count = 20000
    began = time.perf_counter()
    for i in range(count):
        cl.enqueue_nd_range_kernel(queue, kernels[i & 63], (1024,), (64,))
    enqueued = time.perf_counter()
    queue.finish()
    finished = time.perf_counter()
    report["host_us_per_enqueue"] = 1e6 * (enqueued - began) / count
    report["us_per_launch_until_done"] = 1e6 * (finished - began) / count
    profiled = cl.CommandQueue(context, properties=cl.command_queue_properties.PROFILING_ENABLE)
    out = cl.Buffer(context, cl.mem_flags.READ_WRITE, 4 * 64)
    report["empty_kernel_us"] = median_duration_us(profiled, cl.Kernel(program, "empty"), (out,))
    chain = cl.Kernel(program, "chain")
    for megabytes in (1, 256):
        size = megabytes * 1024 * 1024 // 4
        table = np.random.default_rng(0).permutation(size).astype(np.int32)
        next_buffer = cl.Buffer(context, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR, hostbuf=table)
        for links in (0, 10, 100):
            report[f"chain_{megabytes}MB_{links}_links_us"] = median_duration_us(
                profiled, chain, (np.int32(links), next_buffer, out))
    write_report(report, args.out)


if __name__ == "__main__":
    main()
