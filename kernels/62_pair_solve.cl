// Stage 62, the passes of the velocity solve (docs/experiments/rigid-step.md): a launch per colour
// (61_pair_colouring.cl), a work-item per pair of the colour in work-groups of PAIRS_PER_GROUP
// pairs. Each pair's manifold points are solved one after another at full mass from the two bodies'
// velocities, each seeing the last one's impulse (Box2D's order within a manifold), and the pair's
// sum changes both bodies, equal and opposite, so the next colour sees it (Gauss-Seidel across
// pairs): a pass over all colours carries a load down a whole stack. solve_kind: 0 the warm start
// (the impulses the records start with), 1 a solve pass, 2 a relax pass (no push-out, velocities
// only, then each manifold's friction at its centre), 3 a restitution pass (after the relax passes
// of a detection's last substep, restitution_impulse).

#define SOLVE_PASS_BACKWARD 4

// The pair's velocities (a and b, as the pass sees them) after impulse j on a at arm_a and -j on b
// at arm_b (b.body < 0: a static side, unmoved)
inline void move_pair(SolveBody *a, SolveBody *b, float3 arm_a, float3 arm_b, float3 j)
{
    a->v += j * a->inv_mass;
    a->w += inverse_inertia_times(*a, cross(arm_a, j));
    if (b->body >= 0) {
        b->v -= j * b->inv_mass;
        b->w -= inverse_inertia_times(*b, cross(arm_b, j));
    }
}

// A record's accumulated impulses after a restitution pass (manifolds only; Box2D's
// b2ApplyRestitution, reference.py _restitution_impulse), at a detection's last substep after the
// relax passes, on pairs where either body takes an impact: a point that approached faster than
// IMPACT_SPEED at its detection (f4.z) and carried a normal impulse since (f4.w: a speculative
// point that never touched does not bounce, one that touched and parted within the step does) is
// given the normal impulse that parts it at its restitution (f4.y) times that speed; any other
// point stops closing as in a relax pass, so the bodies under a struck one hold while it rebounds.
// Rigid, velocities only; the accumulated impulse stays >= 0.
inline float4 restitution_impulse(__global const float4 *r, int stride, SolveBody a, SolveBody b, float substep,
                                  float slop, float depth_shift)
{
    float4 f0 = r[0], f1 = r[stride], f2 = r[2 * stride], lambda = r[3 * stride], f4 = r[4 * stride];
    int other = as_int(f0.w);
    float3 n = f0.xyz, arm_i = f1.xyz;
    float3 arm_j = (other >= 0) ? other_arm(r, stride, b) : f2.xyz;
    float3 v_j = (other >= 0) ? b.v + cross(b.w, arm_j) : f2.xyz;
    float vn = dot(a.v + cross(a.w, arm_i) - v_j, n);  // > 0: closing
    float allowed = (f4.z > IMPACT_SPEED && f4.w > 0.0f && f4.y > 0.0f)
                  ? -f4.y * f4.z
                  : fmax((slop - (f1.w + depth_shift)) / substep, 0.0f);
    float k_n = inverse_mass(a, arm_i, n) + ((other >= 0) ? inverse_mass(b, arm_j, n) : 0.0f);
    lambda.w = fmax(lambda.w + f2.w * (vn - allowed) / k_n, 0.0f);
    return lambda;
}

// Box3D's friction of each manifold of the pair (a group of normals, 61 manifold_group) at its
// centre and its twist about the normal, from the velocities now (reference.py _centre_friction).
// Kept as the points' tangential impulses: an equal share of the centre's plus the twist spread
// as tau (n x d) / sum |d|^2 (d: a point's offset from the centre in the plane), which sum to the
// centre's impulse and have the twist as moment; their changes added to the pass's sums.
inline void centre_friction(__global const int *records, int count, int stride, __global float4 *solve_record,
                            __global float4 *history_impulse_out, SolveBody *A, SolveBody *B, float3 *impulse, float3 *moment_a, float3 *moment_b)
{
    float3 group_normals[MANIFOLD_GROUPS];
    int groups = 0;
    for (int t = 0; t < count && groups < MANIFOLD_GROUPS; ++t) {
        float3 n = listed_record(records, t, stride, solve_record)[0].xyz;
        if (manifold_group(n, group_normals, groups) < 0) group_normals[groups++] = n;
    }
    for (int g = 0; g < groups; ++g) {
        float3 n = group_normals[g];
        float3 centre_a = (float3)(0.0f), centre_b = (float3)(0.0f);
        int members = 0;
        for (int t = 0; t < count; ++t) {
            __global const float4 *r = listed_record(records, t, stride, solve_record);
            if (manifold_group(r[0].xyz, group_normals, groups) != g) continue;
            centre_a += r[stride].xyz;
            centre_b += other_arm(r, stride, *B);
            ++members;
        }
        centre_a /= (float)members;
        centre_b /= (float)members;
        float load = 0.0f, twist = 0.0f, spread = 0.0f, twist_limit = 0.0f, mu = -1.0f;  // mu: the first point's
        float3 held = (float3)(0.0f);
        for (int t = 0; t < count; ++t) {
            __global const float4 *r = listed_record(records, t, stride, solve_record);
            if (manifold_group(r[0].xyz, group_normals, groups) != g) continue;
            float3 d = r[stride].xyz - centre_a;
            d -= dot(d, n) * n;
            float4 lambda = r[3 * stride];
            if (mu < 0.0f) mu = r[4 * stride].x;
            load += lambda.w;
            held += lambda.xyz;
            twist += dot(n, cross(d, lambda.xyz));
            spread += dot(d, d);
            twist_limit += length(d) * lambda.w;
        }
        twist_limit *= mu;
        float3 v_c = (B->body >= 0) ? B->v + cross(B->w, centre_b) : centre_b;
        float3 v_rel = A->v + cross(A->w, centre_a) - v_c;
        float3 v_t = v_rel - dot(v_rel, n) * n;
        float slip = length(v_t);
        if (slip > 1e-9f) {
            float3 t = v_t / slip;
            float k_t = inverse_mass(*A, centre_a, t) + ((B->body >= 0) ? inverse_mass(*B, centre_b, t) : 0.0f);
            held -= v_t / k_t;
        }
        float size = length(held);
        if (size > mu * load) held *= (size > 0.0f) ? mu * load / size : 0.0f;
        if (spread > 0.0f) {
            float k_w = dot(n, inverse_inertia_times(*A, n));
            float w_rel = dot(n, A->w);
            if (B->body >= 0) {
                k_w += dot(n, inverse_inertia_times(*B, n));
                w_rel -= dot(n, B->w);
            }
            twist = clamp(twist - w_rel / k_w, -twist_limit, twist_limit);
        }
        for (int t = 0; t < count; ++t) {
            __global float4 *r = listed_record(records, t, stride, solve_record);
            if (manifold_group(r[0].xyz, group_normals, groups) != g) continue;
            float3 d = r[stride].xyz - centre_a;
            d -= dot(d, n) * n;
            float4 lambda = r[3 * stride];
            float3 tangential = held / (float)members + ((spread > 0.0f) ? twist / spread * cross(n, d) : (float3)(0.0f));
            float3 j = tangential - lambda.xyz;
            lambda.xyz = tangential;
            r[3 * stride] = lambda;
            history_impulse_out[records[t]] = lambda;
            *impulse += j;
            *moment_a += cross(r[stride].xyz, j);
            *moment_b -= cross(other_arm(r, stride, *B), j);
            move_pair(A, B, r[stride].xyz, other_arm(r, stride, *B), j);
        }
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
    __global const int *colour_pairs,
    __global const int *pair_other,
    __global const int *body_impact,
    const float4 sleep,
    __global const float *body_quiet,
    __global const int *pair_record_start,
    __global const int *pair_record_count,
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
    // a colour's pairs share no body, so its work-items take them in any order, each as many as
    // the launch (sized from the last detection's count) leaves; the overflow (solve_colour ==
    // colour_limit, launched as one work-item) one after another in slot order
    int end = colour_start[solve_colour + 1];
    for (int at = colour_start[solve_colour] + get_global_id(0); at < end; at += get_global_size(0)) {
        int g = colour_pairs[at];
        int b = g / max_pairs, c = pair_other[g];
        int stride = history_stride;
        // solve_kind: the pass's kind (above), plus SOLVE_PASS_BACKWARD for a sweep from the pair's last
        // point to its first
        int kind = solve_kind & (SOLVE_PASS_BACKWARD - 1);
        bool backward = solve_kind & SOLVE_PASS_BACKWARD;
        bool warm = kind == 0, relax = kind == 2, restitution = kind == 3;
        bool struck = body_impact[b] || (c >= 0 && body_impact[c]);
        if (restitution && !struck) continue;  // no impact on either body: nothing to part
        // the points one after another, every other substep last to first (the host adds
        // SOLVE_PASS_BACKWARD): the first point takes more of a pass than the last, and always the same
        // first point tilted every stacked pair the same way (a 40-cube column crept 10 cm in 3 s;
        // alternating, 1 mm)
        // soft contacts, but rigid where either body takes an impact this substep: a soft contact
        // under an impact's load gives way (its leak) and the impact's rebound with it (a cube dropped
        // on a resting one rebounded at 0.75-0.88 of its restitution)
        float4 constants = solve_constants;
        if (struck) constants.w = 1.0f;
        SolveBody A = solve_body(b, body_velocity, body_angular_velocity, body_orientation, body_mass, body_inv_inertia);
        SolveBody B = solve_body(c, body_velocity, body_angular_velocity, body_orientation, body_mass, body_inv_inertia);
        // a body that fell asleep after this detection's listing (63_islands.cl), or a sleeping
        // partner, holds like a static side: the pass moves the awake side only; two sleepers wait
        bool a_sleeps = is_asleep(body_quiet[b], sleep), b_sleeps = c >= 0 && is_asleep(body_quiet[c], sleep);
        if (a_sleeps && (c < 0 || b_sleeps)) continue;
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
                B.from_a = body_position[b].xyz - body_position[c].xyz;
            }
    #if SUBSTEPS_PER_DETECTION > 1
            else {
                B.arms_now = 1;
                B.from_a = start_position[b].xyz - start_position[c].xyz;
            }
    #endif
        }
    #if SUBSTEPS_PER_DETECTION > 1
        // contacts detected once per step: each record's depth at the substep's start follows from the
        // two bodies' motion since the detection (Box2D's relative anchors; the normal stays)
        float3 moved_a = start_position[b].xyz - detect_position[b].xyz;
        float4 turned_a = quat_multiply(start_orientation[b], quat_conjugate(detect_orientation[b]));
        float3 moved_b = (float3)(0.0f);
        float4 turned_b = (float4)(0.0f, 0.0f, 0.0f, 1.0f);
        if (c >= 0) {
            moved_b = start_position[c].xyz - detect_position[c].xyz;
            turned_b = quat_multiply(start_orientation[c], quat_conjugate(detect_orientation[c]));
        }
    #endif
        float3 impulse = (float3)(0.0f), moment_a = (float3)(0.0f), moment_b = (float3)(0.0f);
        __global const int *records = pair_records + pair_record_start[g];
        int record_count = pair_record_count[g];
        for (int t = 0; t < record_count; ++t) {
            int slot = records[backward ? record_count - 1 - t : t];  // k * stride + i: friction slot k of particle i
            int k = slot / stride, i = slot - k * stride;
            __global float4 *r = solve_record + k * SOLVE_FIELDS * stride + i;
            float3 n = r[0].xyz;
            float4 lambda = r[3 * stride];
            float3 j;
            if (warm) {
                j = -lambda.w * n + lambda.xyz;
            } else {
                float depth_shift = 0.0f;
    #if SUBSTEPS_PER_DETECTION > 1
                float3 arm_a = r[stride].xyz;
                float3 shift = moved_a + quat_rotate(turned_a, arm_a) - arm_a;
                if (c >= 0) {
                    float3 arm_b = r[2 * stride].xyz;
                    shift -= moved_b + quat_rotate(turned_b, arm_b) - arm_b;
                }
                depth_shift = dot(shift, n);
    #endif
                float4 next = restitution
                            ? restitution_impulse(r, stride, A, B, substep, constants.x, depth_shift)
                            : solve_record_impulse(r, stride, A, B, substep, constants, relax, depth_shift);
                j = -(next.w - lambda.w) * n + (next.xyz - lambda.xyz);  // this pass's impulse on b
                r[3 * stride] = next;
                r[4 * stride].w = fmax(r[4 * stride].w, next.w);  // the most it carried since its detection
                history_impulse_out[slot] = next;
            }
            impulse += j;
            moment_a += cross(r[stride].xyz, j);
            float3 arm_b = (c >= 0) ? other_arm(r, stride, B) : r[2 * stride].xyz;  // (static: its velocity, unused)
            moment_b -= cross(arm_b, j);
            if (!warm) move_pair(&A, &B, r[stride].xyz, arm_b, j);
        }
        // friction after the normals, in the relax passes (Box2D's order)
        if (relax)
            centre_friction(records, record_count, stride, solve_record, history_impulse_out, &A, &B, &impulse,
                            &moment_a, &moment_b);
        bool move = kind < 2;  // relax and restitution: velocities only
        // a held sleeper takes nothing: it wakes in the detection an awake body's records reach it,
        // or one of its woken partners' WAKE_PASSES deep (40_contacts.cl woken_pass), so what holds
        // still is at most a resting support; kept, a support's share of a resting load became a push
        // at its waking (a stack at a 500-cube pile's edge wobbled apart at 0.5 m/s)
        if (!a_sleeps)
            change_body_momenta(b, impulse, moment_a, substep, move, body_mass, body_inv_inertia, body_position,
                                body_orientation, body_momentum, body_angular_momentum, body_velocity,
                                body_angular_velocity);
        if (c >= 0 && !b_sleeps)
            change_body_momenta(c, -impulse, moment_b, substep, move, body_mass, body_inv_inertia, body_position,
                                body_orientation, body_momentum, body_angular_momentum, body_velocity,
                                body_angular_velocity);
    }
}
