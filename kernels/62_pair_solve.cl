// Stage 62, the passes of the velocity solve (docs/experiments/rigid-step.md): a launch per colour
// (61_pair_colouring.cl), a work-item per pair of the colour in work-groups of PAIRS_PER_GROUP
// pairs. Each pair's manifold points are solved one after another at full mass from the two bodies'
// velocities, each seeing the last one's impulse (Box2D's order within a manifold), and the pair's
// sum changes both bodies, equal and opposite, so the next colour sees it (Gauss-Seidel across
// pairs): a pass over all colours carries a load down a whole stack. solve_kind: 0 the warm start
// (the impulses the records start with), 1 a solve pass, 2 a relax pass (no push-out, velocities
// only, then each manifold's friction at its centre), 3 a restitution pass (after the relax passes
// of a detection's last substep, restitution_impulse in 60_solve.cl).

// SOLVE_PASS_BACKWARD: a build option (opencl_program.py), the host adds it to a pass's kind

// On a GPU the pair's points are read into private memory once per pass (PairPoint, 60_solve.cl),
// all of them before the first is solved, when there are at most PAIR_CACHE (a define from the
// host: 8 on a GPU, 0 on a CPU): read one after another, each point cost two dependent loads from
// global memory (its slot, then its fields) per loop over the points, and the relax passes loop
// four times; a colour's launch lasts its slowest pair's chain. A CPU, which waits on no such
// chain, and a pair with more points (several manifolds) read each point as it comes.

// Box3D's friction of a manifold at its centre and its twist about its normal n (reference.py
// _centre_friction), from the velocities now: the centre's tangential impulse ``held`` (the
// points' sum) and the twist, each within mu times the manifold's normal load (the twist's limit:
// mu sum |d| lambda_n over its points, d a point's offset from the centre in the plane)
inline void manifold_friction(float3 n, float3 centre_a, float3 centre_b, float load, float spread, float twist_limit,
                              float mu, SolveBody A, SolveBody B, float3 *held, float *twist)
{
    twist_limit *= mu;
    float3 v_c = (B.body >= 0) ? B.v + cross(B.w, centre_b) : centre_b;
    float3 v_rel = A.v + cross(A.w, centre_a) - v_c;
    float3 v_t = v_rel - dot(v_rel, n) * n;
    float slip = length(v_t);
    if (slip > 1e-9f) {
        float3 t = v_t / slip;
        float k_t = inverse_mass(A, centre_a, t) + ((B.body >= 0) ? inverse_mass(B, centre_b, t) : 0.0f);
        *held -= v_t / k_t;
    }
    float size = length(*held);
    if (size > mu * load) *held *= (size > 0.0f) ? mu * load / size : 0.0f;
    if (spread > 0.0f) {
        float k_w = dot(n, inverse_inertia_times(A, n));
        float w_rel = dot(n, A.w);
        if (B.body >= 0) {
            k_w += dot(n, inverse_inertia_times(B, n));
            w_rel -= dot(n, B.w);
        }
        *twist = clamp(*twist - w_rel / k_w, -twist_limit, twist_limit);
    }
}

// Point p of a manifold (normal n, centre_a, ``members`` points) given its share of the centre's
// impulse ``held`` plus the twist spread as tau (n x d) / sum |d|^2, which sum to the centre's
// impulse and have the twist as moment; the change applied and added to the pass's sums
inline void take_friction_share(PairPoint *p, float3 n, float3 centre_a, float3 held, float twist, float spread,
                                int members, SolveBody *A, SolveBody *B, PairSums *sums,
                                __global float4 *solve_record, __global float4 *history_impulse_out, int stride)
{
    float3 d = p->arm - centre_a;
    d -= dot(d, n) * n;
    float3 tangential = held / (float)members + ((spread > 0.0f) ? twist / spread * cross(n, d) : (float3)(0.0f));
    float3 j = tangential - p->lambda.xyz;
    p->lambda.xyz = tangential;
    store_pair_point(solve_record, history_impulse_out, *p, stride);
    float3 arm_b = other_arm(*p, *B);
    add_point_impulse(sums, p->arm, arm_b, j);
    move_pair(A, B, p->arm, arm_b, j);
}

// The sums of a manifold's points that its friction needs (manifold_friction)
typedef struct {
    float3 centre_a, centre_b, held;
    float load, twist, spread, twist_limit, mu;
    int members;
} ManifoldSums;

inline void add_to_centres(ManifoldSums *m, PairPoint p, SolveBody B)
{
    m->centre_a += p.arm;
    m->centre_b += other_arm(p, B);
    ++m->members;
}

inline void add_to_loads(ManifoldSums *m, PairPoint p, float3 n)
{
    float3 d = p.arm - m->centre_a;
    d -= dot(d, n) * n;
    if (m->mu < 0.0f) m->mu = p.f4.x;  // the first point's
    m->load += p.lambda.w;
    m->held += p.lambda.xyz;
    m->twist += dot(n, cross(d, p.lambda.xyz));
    m->spread += dot(d, d);
    m->twist_limit += length(d) * p.lambda.w;
}

inline ManifoldSums no_manifold_sums(void)
{
    ManifoldSums m;
    m.centre_a = m.centre_b = m.held = (float3)(0.0f);
    m.load = m.twist = m.spread = m.twist_limit = 0.0f;
    m.mu = -1.0f;
    m.members = 0;
    return m;
}

#if PAIR_CACHE > 0
// Box3D's friction of each manifold of the pair (a group of normals, 61 manifold_group) at its
// centre and its twist (manifold_friction), the points in ``points`` (count <= PAIR_CACHE)
inline void centre_friction(PairPoint *points, int count, SolveBody *A, SolveBody *B, PairSums *sums,
                            __global float4 *solve_record, __global float4 *history_impulse_out, int stride)
{
    float3 group_normals[MANIFOLD_GROUPS];
    int groups = 0;
    int group_of[PAIR_CACHE];
    #pragma unroll
    for (int t = 0; t < PAIR_CACHE; ++t) {
        group_of[t] = -1;
        if (t < count) {
            int g = manifold_group(points[t].n, group_normals, groups);
            if (g < 0 && groups < MANIFOLD_GROUPS) {
                g = groups;
                group_normals[groups++] = points[t].n;
            }
            group_of[t] = g;
        }
    }
    for (int g = 0; g < groups; ++g) {
        float3 n = group_normals[g];
        ManifoldSums m = no_manifold_sums();
        #pragma unroll
        for (int t = 0; t < PAIR_CACHE; ++t)
            if (group_of[t] == g) add_to_centres(&m, points[t], *B);
        m.centre_a /= (float)m.members;
        m.centre_b /= (float)m.members;
        #pragma unroll
        for (int t = 0; t < PAIR_CACHE; ++t)
            if (group_of[t] == g) add_to_loads(&m, points[t], n);
        manifold_friction(n, m.centre_a, m.centre_b, m.load, m.spread, m.twist_limit, m.mu, *A, *B, &m.held, &m.twist);
        #pragma unroll
        for (int t = 0; t < PAIR_CACHE; ++t)
            if (group_of[t] == g)
                take_friction_share(&points[t], n, m.centre_a, m.held, m.twist, m.spread, m.members, A, B, sums,
                                    solve_record, history_impulse_out, stride);
    }
}
#endif

// centre_friction with each point read from global memory as it comes (a CPU, or a pair of more
// than PAIR_CACHE points; records: the pair's slots); each point's group found once, for up to
// GROUPED_POINTS points
#define GROUPED_POINTS (MANIFOLD_GROUPS * MANIFOLD_POINTS)
inline void centre_friction_uncached(__global const int *records, int count, int stride, PairMotion motion,
                                     SolveBody *A, SolveBody *B, PairSums *sums, __global float4 *solve_record,
                                     __global float4 *history_impulse_out)
{
    float3 group_normals[MANIFOLD_GROUPS];
    char group_of[GROUPED_POINTS];
    int groups = 0;
    bool has_b = B->body >= 0;
    for (int t = 0; t < count; ++t) {
        int slot = records[t], k = slot / stride;
        float3 n = solve_record[k * SOLVE_FIELDS * stride + (slot - k * stride)].xyz;
        int g = manifold_group(n, group_normals, groups);
        if (g < 0 && groups < MANIFOLD_GROUPS) {
            g = groups;
            group_normals[groups++] = n;
        }
        if (t < GROUPED_POINTS) group_of[t] = (char)g;
    }
    for (int g = 0; g < groups; ++g) {
        float3 n = group_normals[g];
        ManifoldSums m = no_manifold_sums();
        for (int t = 0; t < count; ++t) {
            if (t < GROUPED_POINTS && group_of[t] != g) continue;
            PairPoint p = load_pair_point(solve_record, records[t], stride, motion, has_b, false);
            if (t < GROUPED_POINTS || manifold_group(p.n, group_normals, groups) == g) add_to_centres(&m, p, *B);
        }
        m.centre_a /= (float)m.members;
        m.centre_b /= (float)m.members;
        for (int t = 0; t < count; ++t) {
            if (t < GROUPED_POINTS && group_of[t] != g) continue;
            PairPoint p = load_pair_point(solve_record, records[t], stride, motion, has_b, false);
            if (t < GROUPED_POINTS || manifold_group(p.n, group_normals, groups) == g) add_to_loads(&m, p, n);
        }
        manifold_friction(n, m.centre_a, m.centre_b, m.load, m.spread, m.twist_limit, m.mu, *A, *B, &m.held, &m.twist);
        for (int t = 0; t < count; ++t) {
            if (t < GROUPED_POINTS && group_of[t] != g) continue;
            PairPoint p = load_pair_point(solve_record, records[t], stride, motion, has_b, false);
            if (t < GROUPED_POINTS || manifold_group(p.n, group_normals, groups) == g)
                take_friction_share(&p, n, m.centre_a, m.held, m.twist, m.spread, m.members, A, B, sums,
                                    solve_record, history_impulse_out, stride);
        }
    }
}

// What a pass reads and writes besides its colour, its kind and its share of the colour's pairs:
// the kernels' parameters of these names, gathered once at each kernel's entry
typedef struct {
    int max_pairs;
    int history_stride;
    float substep;
    float4 solve_constants;                      // slop (m), push-out speed (m/s), bias rate (1/s), mass scale
    __global const int *colour_start;
    __global const int4 *colour_pairs;           // (slot g, other side, first record, record count)
    __global const int *body_impact;
    float4 sleep;
    __global const float *body_quiet;
    __global const int *pair_records;
    __global float4 *solve_record;
    __global const float *body_mass;
    __global const float *body_inv_inertia;
    __global float4 *body_position;
    __global float4 *body_orientation;
    __global float4 *body_momentum;
    __global float4 *body_angular_momentum;
    __global float4 *body_velocity;
    __global float4 *body_angular_velocity;
    __global float4 *history_impulse_out;
    __global const float4 *start_position;       // the bodies' poses at the substep's start and at the
    __global const float4 *start_orientation;    // last detection (SUBSTEPS_PER_DETECTION > 1)
    __global const float4 *detect_position;
    __global const float4 *detect_orientation;
} PairSolve;

// One pass of one colour over its pairs: this work-item takes the pairs first, first + step, ...
inline void solve_colour_pairs(const int solve_colour, const int solve_kind, const int first, const int step,
                               PairSolve ps)
{
    // a colour's pairs share no body, so its work-items take them in any order, each as many as
    // the launch (sized from the last detection's count) leaves; the overflow (solve_colour ==
    // colour_limit, launched as one work-item) one after another in slot order
    int end = ps.colour_start[solve_colour + 1];
    for (int at = ps.colour_start[solve_colour] + first; at < end; at += step) {
        int4 pair = ps.colour_pairs[at];
        int b = pair.x / ps.max_pairs, c = pair.y;
        int stride = ps.history_stride;
        // solve_kind: the pass's kind (above), plus SOLVE_PASS_BACKWARD for a sweep from the pair's last
        // point to its first
        int kind = solve_kind & (SOLVE_PASS_BACKWARD - 1);
        bool backward = solve_kind & SOLVE_PASS_BACKWARD;
        bool relax = kind == 2, restitution = kind == 3;
        bool struck = ps.body_impact[b] || (c >= 0 && ps.body_impact[c]);
        if (restitution && !struck) continue;  // no impact on either body: nothing to part
        // the points one after another, every other substep last to first (the host adds
        // SOLVE_PASS_BACKWARD): the first point takes more of a pass than the last, and always the same
        // first point tilted every stacked pair the same way (a 40-cube column crept 10 cm in 3 s;
        // alternating, 1 mm)
        // soft contacts, but rigid where either body takes an impact this substep: a soft contact
        // under an impact's load gives way (its leak) and the impact's rebound with it (a cube dropped
        // on a resting one rebounded at 0.75-0.88 of its restitution)
        float4 constants = ps.solve_constants;
        if (struck) constants.w = 1.0f;
        FoundBody found_a = found_body(b, ps.body_position, ps.body_orientation, ps.body_momentum,
                                       ps.body_angular_momentum, ps.body_velocity, ps.body_angular_velocity,
                                       ps.body_mass);
        FoundBody found_b = found_body(c, ps.body_position, ps.body_orientation, ps.body_momentum,
                                       ps.body_angular_momentum, ps.body_velocity, ps.body_angular_velocity,
                                       ps.body_mass);
        SolveBody A = solve_body(found_a, ps.body_inv_inertia), B = solve_body(found_b, ps.body_inv_inertia);
        // a body that fell asleep after this detection's listing (63_islands.cl), or a sleeping
        // partner, holds like a static side: the pass moves the awake side only; two sleepers wait
        bool a_sleeps = is_asleep(ps.body_quiet[b], ps.sleep);
        bool b_sleeps = c >= 0 && is_asleep(ps.body_quiet[c], ps.sleep);
        // a kinematic body (infinite mass, zero inverse inertia: OpenCLEngine.set_body_frame) holds too,
        // at the velocity its animation gives it
        bool a_held = a_sleeps || isinf(found_a.mass), b_held = b_sleeps || (c >= 0 && isinf(found_b.mass));
        if (a_held && (c < 0 || b_held)) continue;
        if (a_sleeps) hold_still(&A);
        if (b_sleeps) hold_still(&B);
        if (c >= 0) {
            // c takes each impulse at the world point b's arm reaches, not at its own arm from the
            // detection: the two part as the bodies move, and an impulse pair at two points turns the
            // pair (a glancing impact lost 3-5 % of its angular momentum). The point is where the
            // bodies were at the substep's start for the passes that move them (the substep's
            // positions follow from its final velocities), where they are now for the relax and
            // restitution passes (after that move); while detecting every substep the start is the
            // detection, whose arms already meet.
            if (relax || restitution) {
                B.arms_now = 1;
                B.from_a = ps.body_position[b].xyz - ps.body_position[c].xyz;
            }
    #if SUBSTEPS_PER_DETECTION > 1
            else {
                B.arms_now = 1;
                B.from_a = ps.start_position[b].xyz - ps.start_position[c].xyz;
            }
    #endif
        }
        PairMotion motion;
        motion.moved_a = motion.moved_b = (float3)(0.0f);
        motion.turned_a = motion.turned_b = (float4)(0.0f, 0.0f, 0.0f, 1.0f);
    #if SUBSTEPS_PER_DETECTION > 1
        motion.moved_a = ps.start_position[b].xyz - ps.detect_position[b].xyz;
        motion.turned_a = quat_multiply(ps.start_orientation[b], quat_conjugate(ps.detect_orientation[b]));
        if (c >= 0) {
            motion.moved_b = ps.start_position[c].xyz - ps.detect_position[c].xyz;
            motion.turned_b = quat_multiply(ps.start_orientation[c], quat_conjugate(ps.detect_orientation[c]));
        }
    #endif
        PairSums sums;
        sums.impulse = sums.moment_a = sums.moment_b = (float3)(0.0f);
        __global const int *records = ps.pair_records + pair.z;
        int record_count = pair.w;
        // a heavy body resting on a light one: the light one weighs more in the pair's passes (its
        // first point's normal says which is above)
        float scale_a = 1.0f, scale_b = 1.0f;
        if (SUPPORT_MASS_RATIO > 0.0f && c >= 0 && !struck && !a_held && !b_held && record_count > 0
            && (found_a.mass > SUPPORT_MASS_RATIO * found_b.mass || found_b.mass > SUPPORT_MASS_RATIO * found_a.mass)) {
            int slot = records[0], k = slot / stride;
            float3 n = ps.solve_record[k * SOLVE_FIELDS * stride + (slot - k * stride)].xyz;
            support_scales(n, found_a.mass, found_b.mass, &scale_a, &scale_b);
            scale_inverse_mass(&A, scale_a);
            scale_inverse_mass(&B, scale_b);
        }
#if PAIR_CACHE > 0
        if (record_count > 0 && record_count <= PAIR_CACHE) {
            // every point read before the first is solved: the loads go out together (a point past
            // the count reads the last one again, so that none waits on a branch)
            PairPoint points[PAIR_CACHE];
            #pragma unroll
            for (int t = 0; t < PAIR_CACHE; ++t)
                points[t] = load_pair_point(ps.solve_record, records[min(t, record_count - 1)], stride, motion, c >= 0,
                                            true);  // (a constant: a branch per point cost the 100k pile 1.5 %)
            if (backward) {
                #pragma unroll
                for (int t = PAIR_CACHE - 1; t >= 0; --t)
                    if (t < record_count)
                        solve_pair_point(&points[t], kind, &A, &B, ps.substep, constants, &sums, ps.solve_record,
                                         ps.history_impulse_out, stride);
            } else {
                #pragma unroll
                for (int t = 0; t < PAIR_CACHE; ++t)
                    if (t < record_count)
                        solve_pair_point(&points[t], kind, &A, &B, ps.substep, constants, &sums, ps.solve_record,
                                         ps.history_impulse_out, stride);
            }
            // friction after the normals, in the relax passes (Box2D's order)
            if (relax)
                centre_friction(points, record_count, &A, &B, &sums, ps.solve_record, ps.history_impulse_out, stride);
        } else
#endif
        {
            for (int t = 0; t < record_count; ++t) {
                PairPoint p = load_pair_point(ps.solve_record, records[backward ? record_count - 1 - t : t], stride,
                                              motion, c >= 0, kind != 0);
                solve_pair_point(&p, kind, &A, &B, ps.substep, constants, &sums, ps.solve_record,
                                 ps.history_impulse_out, stride);
            }
            if (relax)
                centre_friction_uncached(records, record_count, stride, motion, &A, &B, &sums, ps.solve_record,
                                         ps.history_impulse_out);
        }
        bool move = kind < 2;  // relax and restitution: velocities only
        // a held sleeper takes nothing: it wakes in the detection an awake body's records reach it,
        // or one of its woken partners' WAKE_PASSES deep (40_contacts.cl woken_pass), so what holds
        // still is at most a resting support; kept, a support's share of a resting load became a push
        // at its waking (a stack at a 500-cube pile's edge wobbled apart at 0.5 m/s)
        if (!a_held)
            change_body_momenta(found_a, scale_a * sums.impulse, scale_a * sums.moment_a, ps.substep, move,
                                ps.body_inv_inertia,
                                ps.body_position, ps.body_orientation, ps.body_momentum, ps.body_angular_momentum,
                                ps.body_velocity, ps.body_angular_velocity);
        if (c >= 0 && !b_held)
            change_body_momenta(found_b, -scale_b * sums.impulse, scale_b * sums.moment_b, ps.substep, move,
                                ps.body_inv_inertia,
                                ps.body_position, ps.body_orientation, ps.body_momentum, ps.body_angular_momentum,
                                ps.body_velocity, ps.body_angular_velocity);
    }
}

__kernel void solve_pair_contacts(
    const int solve_colour,
    const int solve_kind,
    const int max_pairs,
    const int history_stride,
    const float substep,
    const float4 solve_constants,      // slop (m), push-out speed (m/s), bias rate (1/s), mass scale
    __global const int *colour_start,
    __global const int4 *colour_pairs,   // (slot g, other side, first record, record count)
    __global const int *body_impact,
    const float4 sleep,
    __global const float *body_quiet,
    __global const int *pair_records,
    __global float4 *solve_record,
    __global const float *body_mass,
    __global const float *body_inv_inertia,
    __global float4 *body_position,
    __global float4 *body_orientation,
    __global float4 *body_momentum,
    __global float4 *body_angular_momentum,
    __global float4 *body_velocity,
    __global float4 *body_angular_velocity,
    __global float4 *history_impulse_out,
    __global const float4 *start_position,   // the bodies' poses at the substep's start and at the
    __global const float4 *start_orientation,  // last detection (SUBSTEPS_PER_DETECTION > 1)
    __global const float4 *detect_position,
    __global const float4 *detect_orientation)
{
    PairSolve ps = {max_pairs, history_stride, substep, solve_constants, colour_start, colour_pairs, body_impact,
                    sleep, body_quiet, pair_records, solve_record, body_mass, body_inv_inertia, body_position,
                    body_orientation, body_momentum, body_angular_momentum, body_velocity, body_angular_velocity,
                    history_impulse_out, start_position, start_orientation, detect_position,
                    detect_orientation};
    solve_colour_pairs(solve_colour, solve_kind, get_global_id(0), get_global_size(0), ps);
}

// One colour's joints solved in a pass (65_joints.cl)

void solve_joint_colour(const int joint_colour, const int solve_kind, const int first, const int step, JointSolve js,
                        PairSolve ps);

// A substep's passes in one launch (NVIDIA GPUs, where the host sizes the launch to one work-group
// per compute unit, all resident): the warm start, the solve passes, the relax passes and, at a
// detection's last substep, the restitution passes, each colour after the one before behind a
// barrier across the launch (05_grid_barrier.cl), the overflow by work-item 0 after the colours.
// The same order and arithmetic as solve_pair_contacts launched per colour and kind, without a
// launch's cost per colour (bench/probes/grid_barrier_cost.py: ~2 us a barrier against ~8 us a launch).
__kernel void solve_substep_passes(
    const int colour_limit,
    const int solve_passes,
    const int relax_passes,
    const int restitution_passes,
    const int sweep_backward,
    volatile __global int *grid_sync,
    const int max_pairs,
    const int history_stride,
    const float substep,
    const float4 solve_constants,      // slop (m), push-out speed (m/s), bias rate (1/s), mass scale
    __global const int *colour_start,
    __global const int4 *colour_pairs,   // (slot g, other side, first record, record count)
    __global const int *body_impact,
    const float4 sleep,
    __global const float *body_quiet,
    __global const int *pair_records,
    __global float4 *solve_record,
    __global const float *body_mass,
    __global const float *body_inv_inertia,
    __global float4 *body_position,
    __global float4 *body_orientation,
    __global float4 *body_momentum,
    __global float4 *body_angular_momentum,
    __global float4 *body_velocity,
    __global float4 *body_angular_velocity,
    __global float4 *history_impulse_out,
    __global const float4 *start_position,   // the bodies' poses at the substep's start and at the
    __global const float4 *start_orientation,  // last detection (SUBSTEPS_PER_DETECTION > 1)
    __global const float4 *detect_position,
    __global const float4 *detect_orientation,
    const int joint_colour_count,        // 0: no joints
    __global const int *joint_colour_start,
    __global const int *joint_colour_order,
    __global const int2 *joint_body,
    __global const float4 *joint_anchor_a,
    __global const float4 *joint_anchor_b,
    __global const float4 *joint_frame_a,
    __global const float4 *joint_frame_b,
    __global const int *joint_row_mode,
    __global const float *joint_rows,
    __global int *joint_state,
    __global float *joint_impulse,
    __global const float *joint_break_impulse,
    const float4 joint_soft)
{
    PairSolve ps = {max_pairs, history_stride, substep, solve_constants, colour_start, colour_pairs, body_impact,
                    sleep, body_quiet, pair_records, solve_record, body_mass, body_inv_inertia, body_position,
                    body_orientation, body_momentum, body_angular_momentum, body_velocity, body_angular_velocity,
                    history_impulse_out, start_position, start_orientation, detect_position,
                    detect_orientation};
    JointSolve js = {joint_colour_start, joint_colour_order, joint_body, joint_anchor_a, joint_anchor_b, joint_frame_a,
                     joint_frame_b, joint_row_mode, joint_rows, joint_state, joint_impulse, joint_break_impulse,
                     joint_soft};
    int first = get_global_id(0), step = get_global_size(0), groups = get_num_groups(0);
    int passes = 1 + solve_passes + relax_passes + restitution_passes;
    volatile __local int arrived;  // grid_barrier's word to the group: every group arrived
    for (int pass = 0; pass < passes; ++pass) {
        int kind = pass == 0 ? 0 : pass <= solve_passes ? 1 : pass <= solve_passes + relax_passes ? 2 : 3;
        if (kind && sweep_backward) kind |= SOLVE_PASS_BACKWARD;
        // the joints before the contacts (Box2D's order), colour after colour; none in restitution passes
        for (int colour = 0; colour < joint_colour_count && (kind & 3) != 3; ++colour) {
            solve_joint_colour(colour, kind, first, step, js, ps);
            if (!grid_barrier(grid_sync, groups, &arrived))
                return;
        }
        for (int colour = 0; colour < colour_limit; ++colour) {
            solve_colour_pairs(colour, kind, first, step, ps);
            if (!grid_barrier(grid_sync, groups, &arrived))
                return;
        }
        if (first == 0)
            solve_colour_pairs(colour_limit, kind, 0, 1, ps);
        if (!grid_barrier(grid_sync, groups, &arrived))
            return;
    }
}
