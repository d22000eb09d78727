// A barrier across every work-group of a launch, for a launch whose groups are all resident at once
// (one per compute unit: the host sizes it so). OpenCL 1.2 has no such barrier; a launch costs the
// host ~8 us and the device ~5.6 us (bench/probes/launch_cost.py, H200), which a substep's 35-60 launches
// of short passes paid over and over; this barrier costs ~2 us (bench/probes/grid_barrier_cost.py).
// grid_sync[0] counts the groups arrived, grid_sync[1] is the generation the last arrival raises
// (after resetting the count), so the barrier needs no reset between launches.
//
// The guard: a group left waiting for one that never arrives (the driver ran fewer groups at once
// than the host sized the launch for, e.g. a GPU shared in a way it does not report) would spin
// forever and hang the GPU. A wait gives up after GRID_BARRIER_TIMEOUT_NS of the GPU's clock (PTX's
// %globaltimer, NVIDIA) or GRID_BARRIER_SPINS rounds elsewhere, raises grid_sync[2], and every
// group leaves the launch at its next barrier; the host reads the flag with the bodies and stops
// the simulation with a message naming the fallback. A wait reads the flag and the clock once per
// GRID_BARRIER_CHECK_PERIOD rounds only, so a barrier that does not give up costs nothing more.
//
// The fence: OpenCL 1.2's mem_fence orders a work-item's own accesses only, and on NVIDIA's driver
// a plain load after it still read a stale value another group had written before the barrier (its
// multiprocessor's L1 kept the old line: every read stale in bench/probes/grid_barrier_cost.py); PTX's
// membar.gl (GRID_FENCE_MEMBAR, the host sets it on NVIDIA devices) leaves none stale.
#ifndef GRID_FENCE_MEMBAR
#define GRID_FENCE_MEMBAR 0
#endif
#ifndef GRID_BARRIER_TIMEOUT_NS
#define GRID_BARRIER_TIMEOUT_NS 1000000000UL
#endif
#ifndef GRID_BARRIER_SPINS
#define GRID_BARRIER_SPINS (1 << 24)
#endif
#define GRID_BARRIER_CHECK_PERIOD 1024
#if GRID_FENCE_MEMBAR
#define GRID_FENCE() asm volatile("membar.gl;" ::: "memory")
inline ulong grid_clock_ns(void)
{
    ulong now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    return now;
}
#else
#define GRID_FENCE() mem_fence(CLK_GLOBAL_MEM_FENCE)
#endif

// 1 when every group arrived; 0 when this group's wait gave up or another's had: the caller leaves
// the launch (the whole group alike: `arrived` is the group's local word that says so)
inline int grid_barrier(volatile __global int *grid_sync, int groups, volatile __local int *arrived)
{
    GRID_FENCE();  // this work-item's writes out before its group arrives
    barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
    if (get_local_id(0) == 0) {
        int passed = 1;
        int generation = atomic_add(&grid_sync[1], 0);
        if (atomic_inc(&grid_sync[0]) == groups - 1) {
            atomic_xchg(&grid_sync[0], 0);
            GRID_FENCE();
            atomic_inc(&grid_sync[1]);
        } else {
#if GRID_FENCE_MEMBAR
            ulong start = grid_clock_ns();
#endif
            uint spins = 0;
            while (atomic_add(&grid_sync[1], 0) == generation) {
                if ((++spins & (GRID_BARRIER_CHECK_PERIOD - 1)) != 0)
                    continue;
#if GRID_FENCE_MEMBAR
                int waited_too_long = grid_clock_ns() - start > GRID_BARRIER_TIMEOUT_NS;
#else
                int waited_too_long = spins >= GRID_BARRIER_SPINS;
#endif
                if (waited_too_long)
                    atomic_xchg(&grid_sync[2], 1);
                if (waited_too_long || atomic_add(&grid_sync[2], 0)) {
                    passed = 0;
                    break;
                }
            }
        }
        *arrived = passed;
    }
    barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
    GRID_FENCE();  // no load after the barrier reads a line from before it
    return *arrived;
}
