// A barrier across every work-group of a launch, for a launch whose groups are all resident at once
// (one per compute unit: the host sizes it so). OpenCL 1.2 has no such barrier; a launch costs the
// host ~8 us and the device ~5.6 us (bench/launch_cost.py, H200), which a substep's 35-60 launches
// of short passes paid over and over; this barrier costs ~2 us (bench/grid_barrier_cost.py).
// grid_sync[0] counts the groups arrived, grid_sync[1] is the generation the last arrival raises
// (after resetting the count), so the barrier needs no reset between launches.
//
// The fence: OpenCL 1.2's mem_fence orders a work-item's own accesses only, and on NVIDIA's driver
// a plain load after it still read a stale value another group had written before the barrier (its
// multiprocessor's L1 kept the old line: every read stale in bench/grid_barrier_cost.py); PTX's
// membar.gl (GRID_FENCE_MEMBAR, the host sets it on NVIDIA devices) leaves none stale.
#ifndef GRID_FENCE_MEMBAR
#define GRID_FENCE_MEMBAR 0
#endif
#if GRID_FENCE_MEMBAR
#define GRID_FENCE() asm volatile("membar.gl;" ::: "memory")
#else
#define GRID_FENCE() mem_fence(CLK_GLOBAL_MEM_FENCE)
#endif

inline void grid_barrier(volatile __global int *grid_sync, int groups)
{
    GRID_FENCE();  // this work-item's writes out before its group arrives
    barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
    if (get_local_id(0) == 0) {
        int generation = atomic_add(&grid_sync[1], 0);
        if (atomic_inc(&grid_sync[0]) == groups - 1) {
            atomic_xchg(&grid_sync[0], 0);
            GRID_FENCE();
            atomic_inc(&grid_sync[1]);
        } else {
            while (atomic_add(&grid_sync[1], 0) == generation) {}
        }
    }
    barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
    GRID_FENCE();  // no load after the barrier reads a line from before it
}
