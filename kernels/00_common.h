// Particle rigid bodies: types and maths shared by every stage of the substep (seed thesis ch. 6.3,
// fig. 6.11). The host (addon/core/opencl_engine.py, STAGES) builds this header and the stage
// files after it, in the order of their numbers, as one program; addon/core/reference.py is the
// NumPy specification of every kernel: keep them in step.
//
// Host-provided defines: FRICTION_SLOTS, NEIGHBOUR_SLOTS, MATERIAL_COUNT, DAMPING_LIMIT,
// ROLLING_REGULARIZATION, ROTATION_SWEEPS, DUPLICATE_POINT_TOLERANCE, CORNER_SOFTNESS, FACE_LIKE_COSINE,
// SUPPORT_SPHERE_REACH, COLLIDER_REACH (in particle radii), HAS_TRIANGLES, BODY_LANES, BODY_GROUP_SIZE.
// The host binds every kernel argument by its parameter name: a parameter means the same array or
// value in every kernel that has it.
//
// Vectors are stored as float4 (w unused) for alignment; quaternions as float4 (x, y, z, w) with
// w in .w, i.e. OpenCL's natural layout, converted on the host from Blender's (w, x, y, z).

// STATIC_BODY (-1, model.py), SOLVE_FIELDS, SCAN_LOCAL_SIZE, SCAN_PER_ITEM and SOLVE_PASS_BACKWARD
// come with the build options (opencl_program.kernel_defines), so that Python shares them.
#define EMPTY_SLOT (-1)

// sleep: (speed, time, wake acceleration, 1 if sleeping bodies may skip their contacts); see
// SimulationSettings.sleep_speed
inline bool is_asleep(float quiet, float4 sleep)
{
    return sleep.x > 0.0f && quiet >= sleep.y;
}

// A joint takes part (65_joints.cl; the contacts' search and the islands read it too): Blender's
// enabled, and not broken; state: joint_state's bits (JOINT_* defines, 0 without joints)
inline bool joint_active(int state)
{
    return (state & (JOINT_ENABLED | JOINT_BROKEN)) == JOINT_ENABLED;
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

// v turned by the rotation vector t (angle |t| about t / |t|; Rodrigues)
inline float3 rotate_by_vector(float3 v, float3 t)
{
    float angle = length(t);
    if (angle < 1e-12f) return v;
    float3 k = t / angle;
    float c = cos(angle), s = sin(angle);
    return v * c + cross(k, v) * s + k * (dot(k, v) * (1.0f - c));
}

inline float4 quat_multiply(float4 a, float4 b)
{
    // (a.w b.w - a.u . b.u,  a.w b.u + b.w a.u + a.u x b.u)
    float3 u = a.w * b.xyz + b.w * a.xyz + cross(a.xyz, b.xyz);
    return (float4)(u, a.w * b.w - dot(a.xyz, b.xyz));
}

// a body-frame vector times the body-frame inverse inertia (9 floats, row-major)
inline float3 times_inverse_inertia(__global const float *inv_inertia, float3 l)
{
    return (float3)(inv_inertia[0] * l.x + inv_inertia[1] * l.y + inv_inertia[2] * l.z,
                    inv_inertia[3] * l.x + inv_inertia[4] * l.y + inv_inertia[5] * l.z,
                    inv_inertia[6] * l.x + inv_inertia[7] * l.y + inv_inertia[8] * l.z);
}

// angular velocity from angular momentum: w = R I^-1 R^T L (seed eq. 5.6, 5.10)
inline float3 angular_velocity(float4 q, __global const float *inv_inertia, float3 L)
{
    return quat_rotate(q, times_inverse_inertia(inv_inertia, quat_rotate_inverse(q, L)));
}

// The orientation after one substep of torque-free rotation with the world angular momentum L
// (the torque has been added to L before). Implicit midpoint on the body-frame momentum
// Pi = R^T L, Pi_m = Pi - h/2 w_m x Pi_m with w_m = I^-1 Pi_m (ROTATION_SWEEPS fixed-point sweeps),
// and the Cayley rotation by h w_m, whose quaternion is (h/2 w_m, 1) / sqrt(1 + h^2/4 |w_m|^2):
// the new body-frame momentum is the midpoint rule's, so |L| and the kinetic energy L.w/2 are kept
// up to the sweeps' residual, and the step is time-reversible. A rotation by w at the start
// orientation (first order, not reversible) gains 1.2 % kinetic energy in 12 s of tumbling, and
// more the faster the spin. Mirrors ReferenceEngine._rotation_step.
inline float4 rotation_step(float4 q, __global const float *inv_inertia, float3 L, float h)
{
    float3 momentum = quat_rotate_inverse(q, L);
    float3 midpoint = momentum;
    for (int k = 0; k < ROTATION_SWEEPS; ++k)
        midpoint = momentum - 0.5f * h * cross(times_inverse_inertia(inv_inertia, midpoint), midpoint);
    float3 half_turn = 0.5f * h * times_inverse_inertia(inv_inertia, midpoint);
    float4 dq = (float4)(half_turn, 1.0f) * rsqrt(1.0f + dot(half_turn, half_turn));
    q = quat_multiply(q, dq);  // a body-frame rotation: applied on the right
    return q * rsqrt(dot(q, q));
}

// ---------------------------------------------------------------------------------------------
// the hashed grid (built by 10_grid.cl, searched by 40_contacts.cl)

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

inline float3 particle_world_position(int b, float3 offset, __global const float4 *body_position,
                                      __global const float4 *body_orientation)
{
    return (b == STATIC_BODY) ? offset : body_position[b].xyz + quat_rotate(body_orientation[b], offset);
}

// The buckets' start offsets: an exclusive scan of the bucket counts (10_grid.cl), kept as a scan
// per group of SCAN_GROUP_ITEMS buckets plus one offset per group; bucket_begin() adds the two.
// SCAN_LOCAL_SIZE and SCAN_PER_ITEM: build options (opencl_program.py)
#define SCAN_GROUP_ITEMS (SCAN_LOCAL_SIZE * SCAN_PER_ITEM)

inline uint bucket_begin(uint h, __global const uint *scan_local, __global const uint *group_offset)
{
    return scan_local[h] + group_offset[h / SCAN_GROUP_ITEMS];
}

// ---------------------------------------------------------------------------------------------
// the contact law (seed eq. 5.15-5.20, plus Coulomb friction and rolling resistance), shared by
// particle pairs (32_sphere_pairs.cl, 34_voxel_pairs.cl) and colliders (30_colliders.cl)

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

// The contact law for one contact seen from particle i: n points from i towards the other side,
// arm from i's centre to the contact point, xi the friction spring carried over (already in the
// tangent plane or zero). Returns the force on i, adds the rolling couple to *couple and leaves the
// new spring in *xi. Mirrors ReferenceEngine._contact_law.
inline float3 contact_law(
    ContactConstants cc, float3 n, float3 arm, float overlap,
    float3 vel_i, float3 omega_i, float3 vel_j, float3 omega_j,
    float2 mass_i, float2 mass_j, int mat_i, int mat_j,
    __global const float *pair_damping_ratio, __global const float *pair_friction,
    __global const float *pair_rolling, float3 *xi, float3 *couple)
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
    *xi += v_t * cc.substep;
    float3 f_t = -cc.tangential_stiffness * *xi - damping_t * v_t;
    float limit = pair_friction[mat_i * MATERIAL_COUNT + mat_j] * fn;
    float ft_norm = length(f_t);
    if (ft_norm > limit) {
        f_t = (ft_norm > 0.0f) ? f_t * (limit / ft_norm) : (float3)(0.0f);
        *xi = -(f_t + damping_t * v_t) / cc.tangential_stiffness;
    }
    // rolling resistance: a couple against the relative rolling, pure torque (momentum conserved)
    float3 w_rel = omega_i - omega_j;
    float3 w_roll = w_rel - dot(w_rel, n) * n;
    float w_roll_norm = length(w_roll);
    if (w_roll_norm > 0.0f) {
        float rolling = pair_rolling[mat_i * MATERIAL_COUNT + mat_j] * cc.radius * fn;
        *couple -= rolling * w_roll / fmax(w_roll_norm, ROLLING_REGULARIZATION);
    }
    return -fn * n + f_t;
}

// The slot of a particle's friction history that holds key (old_key: its keys in slot order), or -1.
inline int history_slot(const int *old_key, int key)
{
    for (int s = 0; s < FRICTION_SLOTS; ++s) {
        if (old_key[s] == EMPTY_SLOT) break;
        if (old_key[s] == key) return s;
    }
    return -1;
}

// ---------------------------------------------------------------------------------------------
// Contact records for the velocity solve (RIGID_VOXELS, kernels/60_solve.cl): each contact that
// took friction slot k of particle i is described at solve_record[(k * SOLVE_FIELDS + f) * stride + i]:
// f 0: (normal from i towards the other side, the other body or STATIC_BODY or NO_RECORD),
// f 1: (arm from i's body centre to the contact point, depth), f 2: (arm from the other body's
// centre, or a static side's velocity at the point; share), f 3: the accumulated impulses
// (tangential xyz, normal), starting from those it ended its last substep with (kept in the friction
// history's slot, history_impulse), f 4: (friction coefficient, restitution, impact speed, w) with w
// the most normal impulse the record carried since its detection (62_pair_solve.cl: what gates its
// restitution). The impact speed is how fast the contact closed at its detection (Box2D's
// relativeVelocity): the restitution pass (62_pair_solve.cl) parts an impact faster than
// IMPACT_SPEED at its restitution times that speed, once per detection.
// SOLVE_FIELDS (float4s per record): a build option (opencl_program.py)
#define NO_RECORD (-3)

typedef struct {
    __global float4 *record;             // solve_record + i
    __global const float4 *impulse_in;   // history_impulse_in + i
    __global float4 *impulse_out;        // history_impulse_out + i
    __global const float *pair_restitution;
} SolveRecords;

// The record of the contact that took slot `slot` of particle i (history key `key`, closing at
// `closing` m/s; materials mat_i, mat_j).
inline void write_solve_record(SolveRecords sr, const int *old_key, int key, int stride, int slot, float3 n,
                               int other, float3 arm_i, float depth, float3 arm_j, float share, float mu,
                               int mat_i, int mat_j, float closing)
{
    int old = history_slot(old_key, key);
    float impact = fmax(closing, 0.0f);
    float4 warm = (float4)(0.0f);
    if (old >= 0) {
        warm = sr.impulse_in[old * stride];
        warm.xyz -= dot(warm.xyz, n) * n;  // friction in the contact's tangent plane now
    }
    sr.impulse_out[slot * stride] = warm;
    __global float4 *r = sr.record + slot * SOLVE_FIELDS * stride;
    r[0] = (float4)(n, as_float(other));
    r[stride] = (float4)(arm_i, depth);
    r[2 * stride] = (float4)(arm_j, share);
    r[3 * stride] = warm;
    r[4 * stride] = (float4)(mu, sr.pair_restitution[mat_i * MATERIAL_COUNT + mat_j], impact, 0.0f);
}

// A particle's friction slots as its contacts take them: how many are used and each one's depth.
typedef struct {
    int used;
    float depth[FRICTION_SLOTS];
} FrictionSlots;

// Whether contact a (depth, key) is weaker than b: shallower, or as deep with a higher key.
inline bool weaker_contact(float depth_a, int key_a, float depth_b, int key_b)
{
    return depth_a < depth_b || (depth_a == depth_b && key_a > key_b);
}

// The slot the contact `key` of depth `depth` takes: the next free one, or with every slot taken the
// weakest one's if this contact is stronger; -1 if none. A particle with more contacts than
// FRICTION_SLOTS so keeps its deepest, in whatever order they are found (the kernels' search
// follows the neighbour lists, the reference its own order): with the first ones found kept, the
// two engines kept different contacts and parted (test_friction_slots, the colliding scene).
inline int take_slot(FrictionSlots *slots, __global const int *new_key, int stride, int key, float depth)
{
    if (slots->used < FRICTION_SLOTS) {
        slots->depth[slots->used] = depth;
        return slots->used++;
    }
    int weakest = 0;
    for (int s = 1; s < FRICTION_SLOTS; ++s)
        if (weaker_contact(slots->depth[s], new_key[s * stride], slots->depth[weakest], new_key[weakest * stride]))
            weakest = s;
    if (!weaker_contact(slots->depth[weakest], new_key[weakest * stride], depth, key)) return -1;
    slots->depth[weakest] = depth;
    return weakest;
}

// One contact seen from particle i (see contact_law), of geometric depth `depth` (what its slot is
// ranked by). Adds to force/torque (about i's centre) and records the friction spring in the slot
// it takes (take_slot); returns that slot, or -1. Mirrors ReferenceEngine._contact.
// Slot s of the friction history is at old_xi[s * stride] (see particle_contacts for the layouts).
inline int add_contact(
    ContactConstants cc, int key, float3 n, float3 arm, float overlap, float depth,
    float3 vel_i, float3 omega_i, float3 vel_j, float3 omega_j,
    float2 mass_i, float2 mass_j, int mat_i, int mat_j,
    __global const float *pair_damping_ratio, __global const float *pair_friction,
    __global const float *pair_rolling,
    const int *old_key, __global const float4 *old_xi, const int stride,
    __global int *new_key, __global float4 *new_xi, FrictionSlots *slots,
    float3 *force, float3 *torque)
{
    float3 xi = (float3)(0.0f);
    int slot = history_slot(old_key, key);
    if (slot >= 0) {
        float3 stored = old_xi[slot * stride].xyz;
        xi = stored - dot(stored, n) * n;
    }
    float3 couple = (float3)(0.0f);
#if !RIGID_VOXELS
    float3 f = contact_law(cc, n, arm, overlap, vel_i, omega_i, vel_j, omega_j, mass_i, mass_j, mat_i, mat_j,
                           pair_damping_ratio, pair_friction, pair_rolling, &xi, &couple);
#else
    float3 f = (float3)(0.0f);  // no spring: the solve's record alone holds the contact
#endif
    int taken = take_slot(slots, new_key, stride, key, depth);
    if (taken >= 0) {
        new_key[taken * stride] = key;
        new_xi[taken * stride] = (float4)(xi, 0.0f);
    }
    *force += f;
    *torque += cross(arm, f);  // the normal force's couple is zero for arm || n
    *torque += couple;
    return taken;
}

// ---------------------------------------------------------------------------------------------
// What compute_contacts (40_contacts.cl) hands the contact of a pair of particles: a sphere pair
// (32_sphere_pairs.cl) or a voxel pair (34_voxel_pairs.cl)

// Particle i as its contacts see it, read once by its work-item: bucket slot s, its body, its
// centre p, the offset r from the body's centre, the centre's velocity v and the body's angular
// velocity w, the body's contact masses (contact_mass), its material, whether its body sleeps.
typedef struct {
    int i, s, body;
    float3 p, r, v, w;
    float2 mass;
    int material;
    bool asleep;
} ContactParticle;

// What a pair's contact reads besides the two particles (and body_touched_out, which it writes):
// compute_contacts' arguments of these names, gathered once at its entry
typedef struct {
    ContactConstants cc;
    __global const int *sorted_particle;          // bucket slot -> particle index (the friction key)
    __global const int *particle_material;
    __global const float2 *body_contact_mass;
    __global const float4 *body_position;
    __global const float4 *body_velocity;
    __global const float4 *body_angular_velocity;
    __global const float *body_quiet;
    float4 sleep;
    __global const float *pair_damping_ratio;     // the material pairs' tables (MATERIAL_COUNT squared)
    __global const float *pair_friction;
    __global const float *pair_rolling;
    __global int *body_touched_out;               // Particles: an awake body touched this sleeper
    // a particle's voxel: whole voxels meet as cubes, colliders meet its corners or support sphere
    __global const float *particle_corner_reach;  // whole voxels (>= WHOLE_VOXEL_REACH) meet as cubes
    __global const float4 *particle_support_sphere;
    __global const uchar *particle_faces;         // exposed faces: bit 2k +axis k, 2k + 1 -axis k
    __global const float4 *body_orientation;
    __global const float4 *body_lattice;          // voxel lattice axes in the body frame
} PairInputs;

// Particle i's friction history as its contacts read and take it: the keys its last substep's
// contacts kept (old_key, in private memory; the springs are read from global memory only on a
// match: keeping all of them in private memory cost registers, spills on the GPU), slot k's spring
// at old_xi[k * stride] (slot-major, stride = particle count), the slots this substep's contacts
// take (new_key, new_xi, slots) and their records for the solve.
typedef struct {
    int old_key[FRICTION_SLOTS];
    __global const float4 *old_xi;
    __global int *new_key;
    __global float4 *new_xi;
    int stride;
    FrictionSlots slots;
    SolveRecords records;
} FrictionHistory;

// What particle i's contacts add up: the force, the torque about the particle's centre, and how
// far its contact count is from its slots' (a voxel pair counts for its share)
typedef struct {
    float3 force, torque;
    float count_adjust;
} ContactSums;
