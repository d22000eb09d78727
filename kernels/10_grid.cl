// Stage 10, the grid (seed step 1): every particle's bucket in an unbounded hashed grid, and the
// particles sorted by bucket (a counting sort: count, scan, scatter, then each bucket by particle
// index). Runs only in substeps whose `rebuild` flag is set (neighbour lists, 40_contacts.cl);
// otherwise every kernel returns at once, so the host enqueues the same kernels every substep and
// never waits for the device. The grid's shape (bits per axis) is a kernel argument so the host
// can re-fit it to the scene without rebuilding the program.

// Bucket of every particle, counted per bucket. Positions are not stored here: the gather
// (20_gather.cl) recomputes them in bucket order, which moves fewer bytes than writing and
// re-reading them.
__kernel void assign_buckets(
    __global const int *rebuild,
    const int particle_count,
    const float inv_cell,
    const int4 grid_bits,
    __global const float4 *particle_offset,   // body frame offset, or world position if static
    __global const int *particle_body,
    __global const float4 *body_position,
    __global const float4 *body_orientation,
    __global uint *particle_bucket,
    __global uint *bucket_count)
{
    int i = get_global_id(0);
    if (i >= particle_count || !*rebuild) return;
    float3 p = particle_world_position(particle_body[i], particle_offset[i].xyz, body_position, body_orientation);
    uint h = bucket_of(cell_of(p, inv_cell), grid_bits);
    particle_bucket[i] = h;
    atomic_inc(&bucket_count[h]);
}

// Exclusive scan of bucket_count in two launches: each work-group scans SCAN_GROUP_ITEMS counts
// and writes its total; one work-group then scans the totals. The third pass of a usual scan
// (adding each group's offset) is folded into bucket_begin(), which every reader calls.
// Hand-written because pyopencl's ExclusiveScanKernel costs more host time per call than a whole
// substep's device work below 100k bodies on a GPU (its argument handling, measured with PoCL).

// inclusive scan of one value per work-item across the work-group (Hillis-Steele, local memory)
inline uint work_group_inclusive_scan(uint value, __local uint *scratch)
{
    uint lid = get_local_id(0);
    scratch[lid] = value;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint stride = 1; stride < SCAN_LOCAL_SIZE; stride <<= 1) {
        uint add = (lid >= stride) ? scratch[lid - stride] : 0u;
        barrier(CLK_LOCAL_MEM_FENCE);
        scratch[lid] += add;
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    return scratch[lid];
}

__kernel __attribute__((reqd_work_group_size(SCAN_LOCAL_SIZE, 1, 1)))
void scan_bucket_groups(__global const int *rebuild, __global const uint *bucket_count,
                        __global uint *scan_local,
                        __global uint *group_offset)  // each group's total here; scan_group_totals scans them
{
    __local uint scratch[SCAN_LOCAL_SIZE];
    if (!*rebuild) return;  // the same value for the whole work-group: no barrier is skipped by part of it
    uint base = get_global_id(0) * SCAN_PER_ITEM;   // arrays are padded to whole groups
    uint values[SCAN_PER_ITEM];
    uint sum = 0u;
    for (int k = 0; k < SCAN_PER_ITEM; ++k) {
        values[k] = bucket_count[base + k];
        sum += values[k];
    }
    uint running = work_group_inclusive_scan(sum, scratch) - sum;
    for (int k = 0; k < SCAN_PER_ITEM; ++k) {
        scan_local[base + k] = running;
        running += values[k];
    }
    if (get_local_id(0) == SCAN_LOCAL_SIZE - 1) group_offset[get_group_id(0)] = running;
}

// one work-group: group totals -> exclusive group offsets, in place
__kernel __attribute__((reqd_work_group_size(SCAN_LOCAL_SIZE, 1, 1)))
void scan_group_totals(__global const int *rebuild, const uint scan_group_count, __global uint *group_offset)
{
    __local uint scratch[SCAN_LOCAL_SIZE];
    if (!*rebuild) return;
    uint lid = get_local_id(0);
    uint carry = 0u;
    for (uint base = 0; base < scan_group_count; base += SCAN_LOCAL_SIZE) {
        uint k = base + lid;
        uint value = (k < scan_group_count) ? group_offset[k] : 0u;
        uint inclusive = work_group_inclusive_scan(value, scratch);
        if (k < scan_group_count) group_offset[k] = carry + inclusive - value;
        carry += scratch[SCAN_LOCAL_SIZE - 1];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

// Counting-sort scatter. atomic_dec hands out the slots of a bucket in an order that depends on
// thread timing, and leaves bucket_count at zero for the next substep.
__kernel void scatter_to_buckets(
    __global const int *rebuild,
    const int particle_count,
    __global const uint *particle_bucket,
    __global const uint *scan_local,
    __global const uint *group_offset,
    __global uint *bucket_count,
    __global int *sorted_particle)
{
    int i = get_global_id(0);
    if (i >= particle_count || !*rebuild) return;
    uint h = particle_bucket[i];
    uint slot = bucket_begin(h, scan_local, group_offset) + atomic_dec(&bucket_count[h]) - 1u;
    sorted_particle[slot] = i;
}

// Each bucket is then sorted by particle index: neighbours are always visited in the same order
// and forces summed in the same order, and two runs on one device give identical results. (Sorting
// and gathering in one work-item per bucket measured slower on the H100.)
__kernel void sort_buckets(
    __global const int *rebuild,
    const int bucket_total,
    __global const uint *scan_local,
    __global const uint *group_offset,
    __global int *sorted_particle)
{
    int h = get_global_id(0);
    if (h >= bucket_total || !*rebuild) return;
    uint begin = bucket_begin(h, scan_local, group_offset);
    uint end = bucket_begin(h + 1, scan_local, group_offset);
    for (uint a = begin + 1; a < end; ++a) {
        int key = sorted_particle[a];
        uint b = a;
        while (b > begin && sorted_particle[b - 1] > key) {
            sorted_particle[b] = sorted_particle[b - 1];
            --b;
        }
        sorted_particle[b] = key;
    }
}
