// Particle rigid bodies: one substep as a sequence of kernels (seed thesis ch. 6.3, fig. 6.11),
// with friction, restitution-derived damping, an unbounded hashed grid and deterministic order.
// The NumPy specification of every kernel is addon/core/reference.py; keep them in step.
//
// Host-provided defines: FRICTION_SLOTS, NEIGHBOUR_SLOTS, MATERIAL_COUNT, DAMPING_LIMIT,
// ROLLING_REGULARIZATION, DUPLICATE_POINT_TOLERANCE, CORNER_SOFTNESS, FACE_LIKE_COSINE,
// COLLIDER_REACH (in particle radii), HAS_TRIANGLES, BODY_LANES, BODY_GROUP_SIZE.
// The grid's shape (bits per axis) is a kernel argument so the host can re-fit it to the scene
// without rebuilding the program.
// Kernels per substep: particle_buckets, scan_groups, scan_group_totals, scatter_to_buckets,
// sort_buckets, gather_sorted, particle_contacts_sorted, sum_and_integrate_bodies.
//
// Neighbour lists (Verlet lists with a skin): the grid's cells are a particle diameter plus a skin
// wide, and the grid (steps 1-3) and every particle's list of other bodies' particles within that
// reach are rebuilt only in substeps whose `rebuild` flag is set. The body kernel sets the next
// substep's flag once some body's particles may have moved by more than 0.45 of the skin (a little
// under half, for rounding) since the last rebuild, so a pair missing from the lists cannot have
// come within contact distance (each of the two moved by less than half the skin). The grid
// kernels read the flag and return at once when it is clear: the host enqueues the same kernels
// every substep and never waits for the device.
// Vectors are stored as float4 (w unused) for alignment; quaternions as float4 (x, y, z, w) with
// w in .w, i.e. OpenCL's natural layout, converted on the host from Blender's (w, x, y, z).

#define STATIC_BODY (-1)
#define EMPTY_SLOT (-1)

// sleep: (speed, time, wake acceleration, 1 if sleeping bodies may skip their contacts); see
// SimulationSettings.sleep_speed
inline bool is_asleep(float quiet, float4 sleep)
{
    return sleep.x > 0.0f && quiet >= sleep.y;
}

// ---------------------------------------------------------------------------------------------
// small vector helpers

inline float3 quat_rotate(float4 q, float3 v)
{
    // v' = v + 2w (u x v) + 2 u x (u x v), q = (u, w)
    float3 u = q.xyz;
    float3 t = 2.0f * cross(u, v);
    return v + q.w * t + cross(u, t);
}

inline float4 quat_conjugate(float4 q)
{
    return (float4)(-q.xyz, q.w);  // the inverse of a unit quaternion
}

inline float3 quat_rotate_inverse(float4 q, float3 v)
{
    return quat_rotate(quat_conjugate(q), v);
}

inline float4 quat_multiply(float4 a, float4 b)
{
    // (a.w b.w - a.u . b.u,  a.w b.u + b.w a.u + a.u x b.u)
    float3 u = a.w * b.xyz + b.w * a.xyz + cross(a.xyz, b.xyz);
    return (float4)(u, a.w * b.w - dot(a.xyz, b.xyz));
}

// angular velocity from angular momentum: w = R I^-1 R^T L (seed eq. 5.6, 5.10)
inline float3 angular_velocity(float4 q, __global const float *inv_inertia, float3 L)
{
    float3 l = quat_rotate_inverse(q, L);
    float3 w = (float3)(inv_inertia[0] * l.x + inv_inertia[1] * l.y + inv_inertia[2] * l.z,
                        inv_inertia[3] * l.x + inv_inertia[4] * l.y + inv_inertia[5] * l.z,
                        inv_inertia[6] * l.x + inv_inertia[7] * l.y + inv_inertia[8] * l.z);
    return quat_rotate(q, w);
}

// The grid is unbounded: integer cell coordinates wrap around a power-of-two table, so a particle
// anywhere in space has a bucket (the seed ignored particles outside its box). Far cells that alias
// onto one bucket only cost extra distance checks. With at least 4 cells per axis, the 27
// neighbours of a cell never alias onto each other, so no particle is visited twice.
inline int3 cell_of(float3 p, float inv_cell)
{
    return convert_int3_sat_rtn(p * inv_cell);
}

inline uint bucket_of(int3 c, int4 bits)
{
    return ((uint)c.x & ((1u << bits.x) - 1u))
         | (((uint)c.y & ((1u << bits.y) - 1u)) << bits.x)
         | (((uint)c.z & ((1u << bits.z) - 1u)) << (bits.x + bits.y));
}

// ---------------------------------------------------------------------------------------------
// 1. bucket of every particle (seed step 1), counted per bucket. Positions are not stored here:
// the gather (4) recomputes them in bucket order, which moves fewer bytes than writing and
// re-reading them.

inline float3 particle_world_position(int b, float3 offset, __global const float4 *body_position,
                                      __global const float4 *body_orientation)
{
    return (b == STATIC_BODY) ? offset : body_position[b].xyz + quat_rotate(body_orientation[b], offset);
}

__kernel void particle_buckets(
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

// 2. exclusive scan of bucket_count in two launches: each work-group scans SCAN_GROUP_ITEMS
// counts and writes its total; one work-group then scans the totals. The third pass of a usual
// scan (adding each group's offset) is folded into bucket_begin(), which every reader calls.
// Hand-written because pyopencl's ExclusiveScanKernel costs ~0.45 ms of host time per call
// (measured with PoCL on the 2-core dev machine; the kernel calls themselves ~10 us with pre-set
// arguments), more than a whole substep's device work below 100k bodies on a GPU.
#define SCAN_LOCAL_SIZE 256
#define SCAN_PER_ITEM 8
#define SCAN_GROUP_ITEMS (SCAN_LOCAL_SIZE * SCAN_PER_ITEM)

inline uint bucket_begin(uint h, __global const uint *scan_local, __global const uint *group_offset)
{
    return scan_local[h] + group_offset[h / SCAN_GROUP_ITEMS];
}

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
void scan_groups(__global const int *rebuild, __global const uint *count, __global uint *scan_local,
                 __global uint *group_total)
{
    __local uint scratch[SCAN_LOCAL_SIZE];
    if (!*rebuild) return;  // the same value for the whole work-group: no barrier is skipped by part of it
    uint base = get_global_id(0) * SCAN_PER_ITEM;   // arrays are padded to whole groups
    uint values[SCAN_PER_ITEM];
    uint sum = 0u;
    for (int k = 0; k < SCAN_PER_ITEM; ++k) {
        values[k] = count[base + k];
        sum += values[k];
    }
    uint running = work_group_inclusive_scan(sum, scratch) - sum;
    for (int k = 0; k < SCAN_PER_ITEM; ++k) {
        scan_local[base + k] = running;
        running += values[k];
    }
    if (get_local_id(0) == SCAN_LOCAL_SIZE - 1) group_total[get_group_id(0)] = running;
}

// one work-group: group totals -> exclusive group offsets, in place
__kernel __attribute__((reqd_work_group_size(SCAN_LOCAL_SIZE, 1, 1)))
void scan_group_totals(__global const int *rebuild, const uint group_count, __global uint *group_offset)
{
    __local uint scratch[SCAN_LOCAL_SIZE];
    if (!*rebuild) return;
    uint lid = get_local_id(0);
    uint carry = 0u;
    for (uint base = 0; base < group_count; base += SCAN_LOCAL_SIZE) {
        uint k = base + lid;
        uint value = (k < group_count) ? group_offset[k] : 0u;
        uint inclusive = work_group_inclusive_scan(value, scratch);
        if (k < group_count) group_offset[k] = carry + inclusive - value;
        carry += scratch[SCAN_LOCAL_SIZE - 1];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

// 3. counting-sort scatter. atomic_dec hands out the slots of a bucket in an order that depends on
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

// 4. each bucket is then sorted by particle index: neighbours are always visited in the same
// order and forces summed in the same order, and two runs on one device give identical results.
// Then the gather writes the positions (body index in .w) into bucket order (every substep, in the
// order of the last rebuild), so the contact kernel reads neighbours from consecutive addresses.
// Velocities are not gathered: the contact kernel computes the few it needs from the body state
// (v + w x r), which stays in cache, instead of every particle's being written and read back.
// Positions are recomputed here from the body state rather than stored by step 1 (fewer bytes
// moved). Sorting and gathering in one
// work-item per bucket measured slower (0.19 against 0.13 ms at 100k cubes on the H100).
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

__kernel void gather_sorted(
    __global const int *rebuild,
    __global int *previous_rebuild,    // the last substep's flag: read by all its kernels, free now
    __global uint *rebuild_count,
    const int particle_count,
    __global const int *sorted_particle,
    __global const float4 *particle_offset,
    __global const int *particle_body,
    __global const float4 *body_position,
    __global const float4 *body_orientation,
    __global float4 *sorted_position)
{
    int a = get_global_id(0);
    if (a == 0) {
        *previous_rebuild = 0;
        if (*rebuild) *rebuild_count += 1u;
    }
    if (a >= particle_count) return;
    int i = sorted_particle[a];
    int b = particle_body[i];
    sorted_position[a] = (float4)(particle_world_position(b, particle_offset[i].xyz, body_position, body_orientation),
                                  as_float(b));
}

// ---------------------------------------------------------------------------------------------
// 5. contact forces (seed step 2, eq. 5.15-5.20, plus Coulomb friction)

// The masses one contact of a body moves, for damping (0: static, infinite).
// .x: what one contact of a flat face carries (Model.body_effective_mass), which the damping is
// tuned for. Using more (a corner's share, say) would make a face landing, where all of a face's
// contacts start in one substep, overdamp past the explicit stability limit and gain energy.
// .y: the body's mass divided by the contacts it had in the previous substep (at most .x), which
// caps the damping (see add_contact).
inline float2 contact_mass(int body, __global const float2 *body_contact_mass)
{
    return (body == STATIC_BODY) ? (float2)(0.0f) : body_contact_mass[body];
}

// The mass a contact between two bodies moves: a * b / (a + b), or a against a static one (b = 0).
inline float pair_mass(float a, float b)
{
    return (b > 0.0f) ? a * b / (a + b) : a;
}

typedef struct {
    float stiffness;
    float tangential_stiffness;
    float substep;
    float radius;
} ContactConstants;

// One contact seen from particle i. n points from i towards the other side, arm from i's centre to
// the contact point (cc.radius * n between particles; voxel_support against colliders). Adds to force/torque
// and records the friction spring in the next free slot. Mirrors ReferenceEngine._contact.
// Slot s of the friction history is at old_xi[s * stride] (see particle_contacts for the layouts).
inline void add_contact(
    ContactConstants cc, int key, float3 n, float3 arm, float overlap,
    float3 vel_i, float3 omega_i, float3 vel_j, float3 omega_j,
    float2 mass_i, float2 mass_j, int mat_i, int mat_j,
    __global const float *pair_damping_ratio, __global const float *pair_friction,
    __global const float *pair_rolling,
    const int *old_key, __global const float4 *old_xi, const int stride,
    __global int *new_key, __global float4 *new_xi, int *slots_used,
    float3 *force, float3 *torque)
{
    float m_eff = pair_mass(mass_i.x, mass_j.x);
    float zeta = pair_damping_ratio[mat_i * MATERIAL_COUNT + mat_j];
    float damping = 2.0f * zeta * sqrt(m_eff * cc.stiffness);
    // A body on many contacts (a cube nested into another's face, a stack) sums their dashpots:
    // beyond DAMPING_LIMIT times its mass per contact over the substep the explicit step rings at
    // the substep rate instead of damping (settings.DAMPING_LIMIT explains the bound).
    float m_share = pair_mass(mass_i.y, mass_j.y);
    float damping_scale = (damping > 0.0f) ? fmin(1.0f, DAMPING_LIMIT * m_share / (damping * cc.substep)) : 1.0f;
    damping *= damping_scale;
    float damping_t = damping_scale * 2.0f * zeta * sqrt(m_eff * cc.tangential_stiffness);
    float3 vc_i = vel_i + cross(omega_i, arm);
    float3 vc_j = vel_j + cross(omega_j, -arm);
    float3 v_rel = vc_i - vc_j;
    float vn = dot(v_rel, n);
    float fn = fmax(cc.stiffness * overlap + damping * vn, 0.0f);
    float3 v_t = v_rel - vn * n;
    float3 xi = (float3)(0.0f);
    for (int s = 0; s < FRICTION_SLOTS; ++s) {
        if (old_key[s] == EMPTY_SLOT) break;
        if (old_key[s] == key) {
            float3 stored = old_xi[s * stride].xyz;
            xi = stored - dot(stored, n) * n;
            break;
        }
    }
    xi += v_t * cc.substep;
    float3 f_t = -cc.tangential_stiffness * xi - damping_t * v_t;
    float limit = pair_friction[mat_i * MATERIAL_COUNT + mat_j] * fn;
    float ft_norm = length(f_t);
    if (ft_norm > limit) {
        f_t = (ft_norm > 0.0f) ? f_t * (limit / ft_norm) : (float3)(0.0f);
        xi = -(f_t + damping_t * v_t) / cc.tangential_stiffness;
    }
    if (*slots_used < FRICTION_SLOTS) {
        new_key[*slots_used * stride] = key;
        new_xi[*slots_used * stride] = (float4)(xi, 0.0f);
        *slots_used += 1;
    }
    *force += -fn * n + f_t;
    *torque += cross(arm, -fn * n + f_t);  // the normal force's couple is zero for arm || n
    // rolling resistance: a couple against the relative rolling, pure torque (momentum conserved)
    float3 w_rel = omega_i - omega_j;
    float3 w_roll = w_rel - dot(w_rel, n) * n;
    float w_roll_norm = length(w_roll);
    if (w_roll_norm > 0.0f) {
        float rolling = pair_rolling[mat_i * MATERIAL_COUNT + mat_j] * cc.radius * fn;
        *torque -= rolling * w_roll / fmax(w_roll_norm, ROLLING_REGULARIZATION);
    }
}

// ---------------------------------------------------------------------------------------------
// sharp voxels against colliders (addon/core/voxel_corners.py explains; mirrors voxel_support)

// How far particle i's voxel reaches from its centre along the unit world direction u (towards the
// collider), and in *arm the vector to the point that touches. lattice: the voxel lattice's world
// orientation; reach 0 is the particle's sphere.
inline float voxel_support(float3 u, float reach, float4 lattice, float radius, float3 *arm)
{
    if (reach <= 0.0f) {
        *arm = radius * u;
        return radius;
    }
    float3 d = quat_rotate_inverse(lattice, u);
    float3 sigma = clamp(d * (1.0f / CORNER_SOFTNESS), -1.0f, 1.0f);
    float half_side = reach * radius;
    float rho = radius * (1.0f - reach * (1.0f - 0.5f * CORNER_SOFTNESS));
    *arm = quat_rotate(lattice, half_side * sigma) + rho * u;
    return half_side * (dot(sigma, d) - 0.5f * CORNER_SOFTNESS * dot(sigma, sigma)) + rho;
}

// What the contact kernel reads about particle i's voxel, on its first collider within reach.
typedef struct {
    bool loaded;
    float reach;
    float4 lattice;
} VoxelCorners;

inline void load_voxel_corners(VoxelCorners *vc, int i, int body_i, __global const float *particle_corner_reach,
                               __global const float4 *body_orientation, __global const float4 *body_lattice)
{
    if (vc->loaded) return;
    vc->loaded = true;
    vc->reach = particle_corner_reach[i];
    vc->lattice = (vc->reach > 0.0f) ? quat_multiply(body_orientation[body_i], body_lattice[body_i])
                                     : (float4)(0.0f, 0.0f, 0.0f, 1.0f);
}

// ---------------------------------------------------------------------------------------------
// triangle colliders (addon/core/colliders.py describes the rules; mirrors closest_point_on_triangle)

#define FACE_REGION 0
#define EDGE_OR_VERTEX_REGION 1
#define MAX_EDGE_CONTACTS 8

inline int closest_point_on_triangle(float3 p, float3 a, float3 b, float3 c, float3 *q, float3 *bary)
{
    float3 ab = b - a, ac = c - a, ap = p - a;
    float d1 = dot(ab, ap), d2 = dot(ac, ap);
    if (d1 <= 0.0f && d2 <= 0.0f) { *q = a; *bary = (float3)(1.0f, 0.0f, 0.0f); return EDGE_OR_VERTEX_REGION; }
    float3 bp = p - b;
    float d3 = dot(ab, bp), d4 = dot(ac, bp);
    if (d3 >= 0.0f && d4 <= d3) { *q = b; *bary = (float3)(0.0f, 1.0f, 0.0f); return EDGE_OR_VERTEX_REGION; }
    float vc = d1 * d4 - d3 * d2;
    if (vc <= 0.0f && d1 >= 0.0f && d3 <= 0.0f) {
        float v = d1 / (d1 - d3);
        *q = a + v * ab; *bary = (float3)(1.0f - v, v, 0.0f); return EDGE_OR_VERTEX_REGION;
    }
    float3 cp = p - c;
    float d5 = dot(ab, cp), d6 = dot(ac, cp);
    if (d6 >= 0.0f && d5 <= d6) { *q = c; *bary = (float3)(0.0f, 0.0f, 1.0f); return EDGE_OR_VERTEX_REGION; }
    float vb = d5 * d2 - d1 * d6;
    if (vb <= 0.0f && d2 >= 0.0f && d6 <= 0.0f) {
        float w = d2 / (d2 - d6);
        *q = a + w * ac; *bary = (float3)(1.0f - w, 0.0f, w); return EDGE_OR_VERTEX_REGION;
    }
    float va = d3 * d6 - d5 * d4;
    if (va <= 0.0f && (d4 - d3) >= 0.0f && (d5 - d6) >= 0.0f) {
        float w = (d4 - d3) / ((d4 - d3) + (d5 - d6));
        *q = b + w * (c - b); *bary = (float3)(0.0f, 1.0f - w, w); return EDGE_OR_VERTEX_REGION;
    }
    float denom = va + vb + vc;
    if (denom == 0.0f) { *q = a; *bary = (float3)(1.0f, 0.0f, 0.0f); return EDGE_OR_VERTEX_REGION; }
    float v = vb / denom, w = vc / denom;
    *q = a + ab * v + ac * w; *bary = (float3)(1.0f - v - w, v, w);
    return FACE_REGION;
}

inline uint triangle_bucket(int3 c, uint mask)
{
    return (((uint)c.x * 73856093u) ^ ((uint)c.y * 19349663u) ^ ((uint)c.z * 83492791u)) & mask;
}

// What the contact kernel reads about a neighbour besides its bucket-ordered position.
typedef struct {
    __global const int *sorted_particle;       // bucket slot -> particle index (the friction key)
    __global const int *particle_material;
    __global const float4 *body_position;
    __global const float4 *body_velocity;
    __global const float4 *body_angular_velocity;
    __global const float *body_quiet;
    float4 sleep;
} NeighbourState;

// The contact of particle i with the particle in bucket slot k (another body's), if they overlap.
inline void particle_pair_contact(
    int k, float3 p_j, float3 delta, float dist2, int body_j, int body_i, float3 v_i, float3 w_i, float2 mass_i,
    int mat_i, bool asleep_i, ContactConstants cc, NeighbourState ns,
    __global const float2 *body_contact_mass, __global const float *pair_damping_ratio,
    __global const float *pair_friction, __global const float *pair_rolling,
    const int *old_key, __global const float4 *old_xi, const int stride,
    __global int *new_key, __global float4 *new_xi, int *slots_used, __global int *body_touched_out,
    float3 *force, float3 *torque)
{
    float dist = sqrt(dist2);
    if (dist <= 1e-9f * cc.radius) return;
    float3 n = delta / dist;
    int j = ns.sorted_particle[k];
    float3 v_j = (float3)(0.0f), w_j = (float3)(0.0f);
    if (body_j != STATIC_BODY) {
        w_j = ns.body_angular_velocity[body_j].xyz;
        v_j = ns.body_velocity[body_j].xyz + cross(w_j, p_j - ns.body_position[body_j].xyz);
        // an awake body touching a sleeping one makes it compute its contacts next substep
        if (!asleep_i && is_asleep(ns.body_quiet[body_j], ns.sleep)) body_touched_out[body_j] = 1;
    }
    add_contact(cc, j, n, cc.radius * n, 2.0f * cc.radius - dist, v_i, w_i, v_j, w_j,
                mass_i, contact_mass(body_j, body_contact_mass), mat_i, ns.particle_material[j],
                pair_damping_ratio, pair_friction, pair_rolling, old_key, old_xi, stride,
                new_key, new_xi, slots_used, force, torque);
}

// All contacts of particle i (bucket slot s, body b, world offset r from the body's centre,
// velocity v_i) with other bodies' particles, planes and triangles. Adds the force and the torque
// about the body's centre of mass.
// Other bodies' particles come from the neighbour list of slot s, or from a search of the 27
// cells around the particle: in a rebuild substep (which also writes the list) and, until the
// next rebuild, for a particle whose list overflowed (more than NEIGHBOUR_SLOTS within reach).
// The search is right between rebuilds too: a particle within a diameter of p_i now was within a
// diameter plus half the skin of it at the rebuild, i.e. less than a cell away.
// with_contacts false (a sleeping body nothing touched): only the list is rebuilt.
inline void particle_contacts(
    int s, int i, int body_i, float3 p_i, float3 r_i, float3 v_i, float3 w_i, float2 mass_i, int mat_i,
    ContactConstants cc, const int plane_count, const float inv_cell, const int4 grid_bits,
    __global const uint *scan_local, __global const uint *group_offset,
    __global const float4 *sorted_position, NeighbourState ns, __global const float2 *body_contact_mass,
    __global const float4 *plane_point, __global const float4 *plane_normal, __global const int *plane_material,
    __global const float *pair_damping_ratio, __global const float *pair_friction, __global const float *pair_rolling,
    const int large_triangle_count, const float triangle_inv_cell, const uint triangle_mask, const float collider_tau,
    __global const int4 *triangle_vertices, __global const float4 *collider_vertex,
    __global const float4 *collider_velocity, __global const int *large_triangles,
    __global const uint *triangle_bucket_start, __global const int *triangle_items,
    __global const float4 *triangle_bounds,
    const int stride, __global const int *history_key_in, __global const float4 *history_xi_in,
    __global int *history_key_out, __global float4 *history_xi_out,
    bool rebuild, bool with_contacts, float reach2, __global int *neighbour_count, __global int *neighbour,
    bool asleep_i, __global int *body_touched_out,
    __global const float *particle_corner_reach, __global const float4 *body_orientation,
    __global const float4 *body_lattice,
    float3 *body_force, float3 *body_torque, int *contact_count)
{
    float diameter = 2.0f * cc.radius;
    float diameter2 = diameter * diameter;
    // keys in private memory, springs read from global memory only on a match: keeping all
    // eight springs in private memory cost registers (spills) on the GPU
    // slot-major: slot k of particle i at k * stride + i, stride = particle count
    int old_key[FRICTION_SLOTS];
    for (int k = 0; k < FRICTION_SLOTS; ++k) {
        old_key[k] = history_key_in[i + k * stride];
        if (old_key[k] == EMPTY_SLOT) break;
    }
    __global const float4 *old_xi = history_xi_in + i;
    __global int *new_key = history_key_out + i;
    __global float4 *new_xi = history_xi_out + i;
    int slots_used = 0;
    float3 force = (float3)(0.0f);
    float3 torque = (float3)(0.0f);

    int listed = neighbour_count[s];
    if (rebuild || listed > NEIGHBOUR_SLOTS) {
        listed = 0;
        int3 c = cell_of(p_i, inv_cell);
        // x is the lowest field of the bucket index, so the three cells of a row (dx = -1, 0, 1)
        // are three consecutive buckets, i.e. one run of slots, unless the row wraps around the table
        uint x_mask = (1u << grid_bits.x) - 1u;
        uint x_low = (uint)(c.x - 1) & x_mask;
        bool row_is_contiguous = x_low + 2u <= x_mask;
        for (int dz = -1; dz <= 1; ++dz)
        for (int dy = -1; dy <= 1; ++dy)
        for (int dx = -1; dx <= 1; ++dx) {
            uint begin, end;
            if (row_is_contiguous) {
                if (dx != -1) continue;
                uint h = bucket_of(c + (int3)(-1, dy, dz), grid_bits);
                begin = bucket_begin(h, scan_local, group_offset);
                end = bucket_begin(h + 3, scan_local, group_offset);
            } else {
                uint h = bucket_of(c + (int3)(dx, dy, dz), grid_bits);
                begin = bucket_begin(h, scan_local, group_offset);
                end = bucket_begin(h + 1, scan_local, group_offset);
            }
            for (uint k = begin; k < end; ++k) {
                float4 other = sorted_position[k];
                int body_j = as_int(other.w);
                if (body_j == body_i) continue;  // same rigid body (also skips j == i)
                float3 delta = other.xyz - p_i;
                float dist2 = dot(delta, delta);
                if (rebuild && dist2 < reach2) {
                    if (listed < NEIGHBOUR_SLOTS) neighbour[listed * stride] = (int)k;
                    ++listed;
                }
                if (dist2 >= diameter2 || !with_contacts) continue;
                particle_pair_contact((int)k, other.xyz, delta, dist2, body_j, body_i, v_i, w_i, mass_i, mat_i,
                                      asleep_i, cc, ns, body_contact_mass, pair_damping_ratio,
                                      pair_friction, pair_rolling, old_key, old_xi, stride, new_key, new_xi,
                                      &slots_used, body_touched_out, &force, &torque);
            }
        }
        // more than NEIGHBOUR_SLOTS: this particle searches every substep until the next rebuild
        if (rebuild) neighbour_count[s] = min(listed, NEIGHBOUR_SLOTS + 1);
    } else if (with_contacts) {
        for (int l = 0; l < listed; ++l) {
            int k = neighbour[l * stride];
            float4 other = sorted_position[k];
            float3 delta = other.xyz - p_i;
            float dist2 = dot(delta, delta);
            if (dist2 >= diameter2) continue;
            particle_pair_contact(k, other.xyz, delta, dist2, as_int(other.w), body_i, v_i, w_i, mass_i, mat_i,
                                  asleep_i, cc, ns, body_contact_mass, pair_damping_ratio,
                                  pair_friction, pair_rolling, old_key, old_xi, stride, new_key, new_xi,
                                  &slots_used, body_touched_out, &force, &torque);
        }
    }
    if (!with_contacts) return;
    // colliders touch the particle's voxel (voxel_support), read only for particles within reach
    VoxelCorners corners = {false, 0.0f, (float4)(0.0f)};
    float collider_reach = cc.radius * COLLIDER_REACH;
    for (int g = 0; g < plane_count; ++g) {
        float3 normal = plane_normal[g].xyz;
        float height = dot(p_i - plane_point[g].xyz, normal);
        if (height >= collider_reach) continue;
        load_voxel_corners(&corners, i, body_i, particle_corner_reach, body_orientation, body_lattice);
        float3 arm;
        float depth = voxel_support(-normal, corners.reach, corners.lattice, cc.radius, &arm);
        if (height < depth) {
            add_contact(cc, -2 - g, -normal, arm, depth - height, v_i, w_i, (float3)(0.0f), (float3)(0.0f),
                        mass_i, (float2)(0.0f), mat_i, plane_material[g],
                        pair_damping_ratio, pair_friction, pair_rolling, old_key, old_xi, stride,
                        new_key, new_xi, &slots_used, &force, &torque);
        }
    }
    // triangles: pass 0 takes face contacts; pass 1, only if there were none, edge and vertex
    // contacts, each distinct closest point once. Compiled out for scenes without meshes (its
    // private arrays cost registers).
#if HAS_TRIANGLES
    {
        uint h = triangle_bucket(convert_int3_sat_rtn(p_i * triangle_inv_cell), triangle_mask);
        uint triangle_begin = triangle_bucket_start[h];
        int candidates = large_triangle_count + (int)(triangle_bucket_start[h + 1] - triangle_begin);
        int face_contacts = 0;
        float3 edge_points[MAX_EDGE_CONTACTS];
        int edge_contacts = 0;
        float tolerance2 = (DUPLICATE_POINT_TOLERANCE * cc.radius) * (DUPLICATE_POINT_TOLERANCE * cc.radius);
        for (int pass = 0; pass < 2; ++pass) {
            if (pass == 1 && face_contacts > 0) break;
            for (int k = 0; k < candidates; ++k) {
                int t = (k < large_triangle_count) ? large_triangles[k]
                                                   : triangle_items[triangle_begin + (uint)(k - large_triangle_count)];
                // outside the triangle's box grown by a radius: no contact (cheap reject, before
                // loading six vertex vectors)
                float4 lower = triangle_bounds[2 * t], upper = triangle_bounds[2 * t + 1];
                if (p_i.x < lower.x || p_i.y < lower.y || p_i.z < lower.z ||
                    p_i.x > upper.x || p_i.y > upper.y || p_i.z > upper.z) continue;
                int4 tv = triangle_vertices[t];
                float3 va = collider_vertex[tv.x].xyz + collider_tau * collider_velocity[tv.x].xyz;
                float3 vb = collider_vertex[tv.y].xyz + collider_tau * collider_velocity[tv.y].xyz;
                float3 vc = collider_vertex[tv.z].xyz + collider_tau * collider_velocity[tv.z].xyz;
                float3 q, bary;
                int region = closest_point_on_triangle(p_i, va, vb, vc, &q, &bary);
                if ((pass == 0) != (region == FACE_REGION)) continue;
                float3 delta = q - p_i;
                float dist2 = dot(delta, delta);
                if (dist2 >= collider_reach * collider_reach) continue;
                float dist = sqrt(dist2);
                if (dist <= 1e-9f * cc.radius) continue;
                float3 n = delta / dist;
                float3 arm = cc.radius * n;
                float depth = cc.radius;
                // a face meets the voxel, an edge or a vertex the sphere; except an edge or vertex
                // straight along the triangle's normal (a particle right over the edge between two
                // triangles of a flat floor, which no face claims)
                bool face_like = pass == 0;
                if (!face_like) {
                    float3 normal = cross(vb - va, vc - va);
                    float normal_length = length(normal);
                    face_like = normal_length > 0.0f && fabs(dot(n, normal)) >= FACE_LIKE_COSINE * normal_length;
                }
                if (face_like) {
                    load_voxel_corners(&corners, i, body_i, particle_corner_reach, body_orientation, body_lattice);
                    depth = voxel_support(n, corners.reach, corners.lattice, cc.radius, &arm);
                }
                if (dist >= depth) continue;
                if (pass == 1) {
                    bool duplicate = false;
                    for (int e = 0; e < edge_contacts; ++e) {
                        float3 gap = edge_points[e] - q;
                        if (dot(gap, gap) < tolerance2) { duplicate = true; break; }
                    }
                    if (duplicate) continue;
                    if (edge_contacts < MAX_EDGE_CONTACTS) edge_points[edge_contacts++] = q;
                } else {
                    ++face_contacts;
                }
                float3 v_tri = bary.x * collider_velocity[tv.x].xyz + bary.y * collider_velocity[tv.y].xyz
                             + bary.z * collider_velocity[tv.z].xyz;
                add_contact(cc, -2 - plane_count - t, n, arm, depth - dist, v_i, w_i, v_tri, (float3)(0.0f),
                            mass_i, (float2)(0.0f), mat_i, tv.w,
                            pair_damping_ratio, pair_friction, pair_rolling, old_key, old_xi, stride,
                            new_key, new_xi, &slots_used, &force, &torque);
            }
        }
    }
#endif
    if (slots_used < FRICTION_SLOTS) new_key[slots_used * stride] = EMPTY_SLOT;
    *contact_count = slots_used;  // contacts beyond FRICTION_SLOTS are not counted
    *body_force += force;
    // torque about the body's centre of mass (eq. 5.22 plus the contacts' own couples)
    *body_torque += cross(r_i, force) + torque;
}

// ---------------------------------------------------------------------------------------------
// 6. per body: the sum of its particles' forces and torques (eq. 5.21-5.22), then momenta and pose
// (steps 3-4). BODY_LANES work-items share a body and add their sums in a fixed tree order, so
// results stay deterministic; BODY_LANES = 1 (CPUs) makes one work-item do a whole body.
#define BODIES_PER_GROUP (BODY_GROUP_SIZE / BODY_LANES)

typedef struct {
    __global const float *body_mass;
    __global const float *body_inv_inertia;        // 9 per body, body frame, row-major
    __global const float2 *body_damping;           // per body: (linear, angular) fraction lost per second
    __global const float *body_extent;             // centre of mass to farthest particle surface
    __global float *body_quiet;                    // seconds the body has been still (sleeping)
    __global float4 *body_position;
    __global float4 *body_orientation;
    __global float4 *body_momentum;
    __global float4 *body_angular_momentum;
    __global float4 *body_velocity;
    __global float4 *body_angular_velocity;
    __global float4 *build_position;               // pose at the last rebuild of the neighbour lists
    __global float4 *build_orientation;
} BodyArrays;

inline void stop_body(int b, BodyArrays body)
{
    body.body_momentum[b] = (float4)(0.0f);
    body.body_angular_momentum[b] = (float4)(0.0f);
    body.body_velocity[b] = (float4)(0.0f);
    body.body_angular_velocity[b] = (float4)(0.0f);
}

// touched: whether the body's contacts were computed although it sleeps (see
// particle_contacts_sorted)
inline void integrate_body(int b, float3 force, float3 torque, float substep, float3 gravity,
                           float terminal_speed, float4 sleep, bool touched, bool rebuild,
                           float rebuild_distance, __global int *rebuild_next, BodyArrays body)
{
    float3 x = body.body_position[b].xyz;
    float4 q = body.body_orientation[b];
    if (rebuild) {  // this substep's grid and lists were built from this pose
        body.build_position[b] = (float4)(x, 0.0f);
        body.build_orientation[b] = q;
    }
    float mass = body.body_mass[b];
    __global const float *inv_inertia = body.body_inv_inertia + 9 * b;
    force += mass * gravity;

    // sleeping: a still body stays put until it is accelerated (hit, or its support moved away)
    float extent = body.body_extent[b];
    float acceleration = length(force) / mass + length(angular_velocity(q, inv_inertia, torque)) * extent;
    float quiet = body.body_quiet[b];
    bool accelerated = acceleration >= sleep.z;
    if (is_asleep(quiet, sleep)) {
        bool contacts_skipped = sleep.w > 0.0f && !touched;
        if (contacts_skipped || !accelerated) {
            stop_body(b, body);
            return;
        }
        quiet = 0.0f;
    }

    float3 P = body.body_momentum[b].xyz + force * substep;
    float3 L = body.body_angular_momentum[b].xyz + torque * substep;
    float2 damping = body.body_damping[b];
    if (damping.x > 0.0f) P *= pow(1.0f - damping.x, substep);
    if (damping.y > 0.0f) L *= pow(1.0f - damping.y, substep);
    if (terminal_speed > 0.0f) {
        float speed = length(P) / mass;
        if (speed > terminal_speed) P *= terminal_speed / speed;
    }
    float3 v = P / mass;
    x += v * substep;

    float3 w = angular_velocity(q, inv_inertia, L);
    float speed = length(w);
    float angle = speed * substep;
    if (angle >= 1e-12f) {
        float3 axis = w / speed;
        float4 dq = (float4)(axis * sin(0.5f * angle), cos(0.5f * angle));
        q = quat_multiply(dq, q);
        q = q * rsqrt(dot(q, q));
    }
    w = angular_velocity(q, inv_inertia, L);
    body.body_position[b] = (float4)(x, 0.0f);
    body.body_orientation[b] = q;
    // the farthest any of its particles has moved since the rebuild: the centre's displacement
    // plus the rotation's chord, 2 sin(angle / 2) |r| = 2 |vector part of q q_build^-1| |r|
    float4 turn = quat_multiply(q, quat_conjugate(body.build_orientation[b]));
    float moved = length(x - body.build_position[b].xyz) + 2.0f * length(turn.xyz) * extent;
    if (moved > rebuild_distance) *rebuild_next = 1;  // every writer stores the same value
    bool still = sleep.x > 0.0f && !accelerated && length(v) + length(w) * extent < sleep.x;
    quiet = still ? quiet + substep : 0.0f;
    body.body_quiet[b] = quiet;
    if (is_asleep(quiet, sleep)) {
        stop_body(b, body);  // falls asleep now
        return;
    }
    body.body_momentum[b] = (float4)(P, 0.0f);
    body.body_angular_momentum[b] = (float4)(L, 0.0f);
    body.body_velocity[b] = (float4)(v, 0.0f);
    body.body_angular_velocity[b] = (float4)(w, 0.0f);
}

// 5. contacts: a work-item per particle in bucket order, so neighbouring work-items search the
// same cells; writes the particle's force and torque about its body's centre. (Measured against a
// layout with a body's particles on neighbouring work-items and the integration in the same
// kernel, which saves the force buffers: slower on the H100, 0.79 against 0.55 ms at 100k cubes,
// and on PoCL, 9.5 against 8.0 ms at 1000 cubes.)
__kernel void particle_contacts_sorted(
    const int particle_count,
    const int plane_count,
    const float inv_cell,
    const int4 grid_bits,
    const float4 contact_constants,    // stiffness, tangential stiffness, substep, radius
    __global const uint *scan_local,
    __global const uint *group_offset,
    __global const float4 *sorted_position,      // .w: body index bits
    __global const int *sorted_particle,
    __global const int *particle_material,
    __global const float2 *body_contact_mass,
    __global const float4 *plane_point,
    __global const float4 *plane_normal,
    __global const int *plane_material,
    __global const float *pair_damping_ratio,
    __global const float *pair_friction,
    __global const float *pair_rolling,
    const int large_triangle_count,
    const float triangle_inv_cell,
    const uint triangle_mask,
    const float collider_tau,          // seconds since the collider vertices were set
    __global const int4 *triangle_vertices,     // v0, v1, v2, material
    __global const float4 *collider_vertex,
    __global const float4 *collider_velocity,
    __global const int *large_triangles,
    __global const uint *triangle_bucket_start,
    __global const int *triangle_items,
    __global const float4 *triangle_bounds,    // per triangle: lower, upper corner
    const int history_stride,
    __global const int *history_key_in,
    __global const float4 *history_xi_in,
    __global int *history_key_out,
    __global float4 *history_xi_out,
    __global const float4 *body_position,
    __global float4 *particle_force,
    __global float4 *particle_torque,
    const float4 sleep,
    __global const int *body_touched_in,
    __global int *body_touched_out,
    __global const int *rebuild_flag,
    const float reach2,                // (diameter + skin)^2: what a neighbour list holds
    __global int *neighbour_count,     // per bucket slot; NEIGHBOUR_SLOTS + 1: overflowed
    __global int *neighbour,           // slot-major: entry l of bucket slot s at l * particle_count + s
    __global const float4 *body_velocity,
    __global const float4 *body_angular_velocity,
    __global const float *body_quiet,
    __global uchar *particle_has_force,  // 0: force and torque not written (no contact), read as zero
    __global const float *particle_corner_reach,
    __global const float4 *body_orientation,
    __global const float4 *body_lattice)     // voxel lattice axes in the body frame
{
    int s = get_global_id(0);
    if (s >= particle_count) return;
    bool rebuild = *rebuild_flag != 0;
    ContactConstants cc = {contact_constants.x, contact_constants.y, contact_constants.z, contact_constants.w};
    float4 own = sorted_position[s];
    int body_i = as_int(own.w);
    if (body_i == STATIC_BODY) return;
    int i = sorted_particle[s];
    NeighbourState ns = {sorted_particle, particle_material, body_position, body_velocity, body_angular_velocity,
                         body_quiet, sleep};
    bool asleep_i = is_asleep(body_quiet[body_i], sleep);
    float3 r_i = own.xyz - body_position[body_i].xyz;
    float3 w_i = body_angular_velocity[body_i].xyz;
    float3 v_i = body_velocity[body_i].xyz + cross(w_i, r_i);
    float3 force = (float3)(0.0f);
    float3 torque = (float3)(0.0f);
    int contact_count = 0;
    bool with_contacts = !(asleep_i && sleep.w > 0.0f && !body_touched_in[body_i]);
    if (!with_contacts) {
        // a sleeping body nothing awake touched: no contacts to compute (what makes settled
        // piles cheap); its friction springs carry over unchanged
        for (int k = 0; k < FRICTION_SLOTS; ++k) {
            int key = history_key_in[k * history_stride + i];
            history_key_out[k * history_stride + i] = key;
            if (key == EMPTY_SLOT) break;
            history_xi_out[k * history_stride + i] = history_xi_in[k * history_stride + i];
        }
    }
    if (with_contacts || rebuild) {
        particle_contacts(s, i, body_i, own.xyz, r_i, v_i, w_i, body_contact_mass[body_i], particle_material[i],
                          cc, plane_count, inv_cell, grid_bits, scan_local, group_offset, sorted_position,
                          ns, body_contact_mass, plane_point, plane_normal,
                          plane_material, pair_damping_ratio, pair_friction, pair_rolling,
                          large_triangle_count, triangle_inv_cell, triangle_mask, collider_tau,
                          triangle_vertices, collider_vertex, collider_velocity, large_triangles,
                          triangle_bucket_start, triangle_items, triangle_bounds, history_stride,
                          history_key_in, history_xi_in, history_key_out, history_xi_out,
                          rebuild, with_contacts, reach2, neighbour_count, neighbour + s, asleep_i,
                          body_touched_out, particle_corner_reach, body_orientation, body_lattice,
                          &force, &torque, &contact_count);
    }
    // most particles touch nothing (free fall, a pile's inside): a byte instead of 32
    bool has_force = contact_count > 0 || any(force != 0.0f) || any(torque != 0.0f);
    particle_has_force[i] = has_force;
    if (has_force) {
        particle_force[i] = (float4)(force, (float)contact_count);  // .w: contacts, for the body
        particle_torque[i] = (float4)(torque, 0.0f);
    }
}

// 6. per body: sum and integrate
__kernel __attribute__((reqd_work_group_size(BODY_GROUP_SIZE, 1, 1)))
void sum_and_integrate_bodies(
    const int body_count,
    const float substep,
    const float4 gravity,
    const float terminal_speed,
    const float4 sleep,
    __global const int *body_first_particle,
    __global const int *body_particle_count,
    __global const float4 *particle_force,
    __global const float4 *particle_torque,       // about the body's centre of mass
    __global const uchar *particle_has_force,
    __global int *body_touched_in,                // read and cleared for the substep after next
    __global const float *body_mass,
    __global const float *body_inv_inertia,
    __global const float2 *body_damping,
    __global const float *body_extent,
    __global float *body_quiet,
    __global float4 *body_position,
    __global float4 *body_orientation,
    __global float4 *body_momentum,
    __global float4 *body_angular_momentum,
    __global float4 *body_velocity,
    __global float4 *body_angular_velocity,
    __global float4 *build_position,
    __global float4 *build_orientation,
    __global const int *rebuild_flag,
    __global int *rebuild_next,
    const float rebuild_distance,      // 0.45 skin: a little under half, for rounding
    __global float2 *body_contact_mass)  // .y written: mass per contact of this substep
{
    int lid = get_local_id(0);
    int lane = lid % BODY_LANES;
    int b = get_group_id(0) * BODIES_PER_GROUP + lid / BODY_LANES;
    float4 force = (float4)(0.0f);  // .w: contacts
    float3 torque = (float3)(0.0f);
    if (b < body_count) {
        int end = body_first_particle[b] + body_particle_count[b];
        for (int i = body_first_particle[b] + lane; i < end; i += BODY_LANES) {
            if (!particle_has_force[i]) continue;
            force += particle_force[i];
            torque += particle_torque[i].xyz;
        }
    }
#if BODY_LANES > 1
    // sum over the BODY_LANES lanes of each body in the work-group, in a fixed order
    __local float4 sum_force[BODY_GROUP_SIZE];
    __local float4 sum_torque[BODY_GROUP_SIZE];
    sum_force[lid] = force;
    sum_torque[lid] = (float4)(torque, 0.0f);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int stride = BODY_LANES / 2; stride > 0; stride >>= 1) {
        if (lane < stride) {
            sum_force[lid] += sum_force[lid + stride];
            sum_torque[lid] += sum_torque[lid + stride];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    force = sum_force[lid];
    torque = sum_torque[lid].xyz;
#endif
    if (lane != 0 || b >= body_count) return;
    float2 contact = body_contact_mass[b];
    contact.y = fmin(contact.x, body_mass[b] / fmax(force.w, 1.0f));
    body_contact_mass[b] = contact;
    BodyArrays body = {body_mass, body_inv_inertia, body_damping, body_extent, body_quiet, body_position,
                       body_orientation, body_momentum, body_angular_momentum, body_velocity,
                       body_angular_velocity, build_position, build_orientation};
    bool touched = body_touched_in[b] != 0;
    body_touched_in[b] = 0;
    integrate_body(b, force.xyz, torque, substep, gravity.xyz, terminal_speed, sleep, touched, *rebuild_flag != 0,
                   rebuild_distance, rebuild_next, body);
}
