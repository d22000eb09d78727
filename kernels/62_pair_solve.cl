// Stage 62, the coloured passes of the velocity solve (solve_form "coloured"; contact-solve.md
// E15): a launch per colour (61_pair_colouring.cl), a work-group of PAIR_LANES work-items per pair
// of the colour. The lanes share out the pair's records (its list, 61) and solve them
// (solve_record_impulse, 60_solve.cl) from the two bodies' velocities at the launch's start, each
// body's mass split over the pair's records only (Jacobi within the pair: solving a pair's records
// one after another let friction sway a 40-cube column, E14); their sum changes both bodies at
// once, equal and opposite, so the next colour sees it (Gauss-Seidel across pairs). A pass over
// all colours carries a load down a whole stack instead of one body per Jacobi pass, and ends the
// cycle the Jacobi form's partial warm start ran into (E14). The sum is reduced in a fixed order:
// deterministic. solve_kind: 0 the warm start (the impulses the records start with), 1 a solve
// pass, 2 a relax pass (no push-out, velocities only).

inline void pair_lane_sums(float *sums, float3 impulse, float3 moment_a, float3 moment_b)
{
    sums[0] = impulse.x; sums[1] = impulse.y; sums[2] = impulse.z;
    sums[3] = moment_a.x; sums[4] = moment_a.y; sums[5] = moment_a.z;
    sums[6] = moment_b.x; sums[7] = moment_b.y; sums[8] = moment_b.z;
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
    __global const float *pair_share,
    __global const uchar *body_impact,
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
    __local float lane_sums[9 * PAIR_LANES];
    int lane = get_local_id(0);
    int start = colour_start[solve_colour];
    if (start + (int)get_group_id(0) >= colour_start[solve_colour + 1]) return;
    int g = colour_pairs[start + get_group_id(0)];
    int b = g / max_pairs, c = pair_other[g];
    int stride = history_stride;
    bool warm = solve_kind == 0, relax = solve_kind == 2;
    // MANIFOLD_SEQUENTIAL: the records one after another at full mass (lane 0), each seeing the
    // last one's impulse (Box2D's order within a manifold; SimulationSettings.manifold_order)
    float split = MANIFOLD_SEQUENTIAL ? 1.0f : fmax(pair_share[g], 1e-6f);
    // soft contacts, but rigid where either body takes an impact this substep: a soft contact
    // under an impact's load gives way (its leak) and the impact's rebound with it (a cube dropped
    // on a resting one rebounded at 0.75-0.88 of its restitution)
    float4 constants = solve_constants;
    if (body_impact[b] || (c >= 0 && body_impact[c])) constants.w = 1.0f;
    SolveBody A = {body_velocity[b].xyz, body_angular_velocity[b].xyz, body_orientation[b], split, b};
    SolveBody B = {(float3)(0.0f), (float3)(0.0f), (float4)(0.0f, 0.0f, 0.0f, 1.0f), 0.0f, c};
    if (c >= 0) {
        B.v = body_velocity[c].xyz;
        B.w = body_angular_velocity[c].xyz;
        B.q = body_orientation[c];
        B.count = split;
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
    int first_record = MANIFOLD_SEQUENTIAL ? ((lane == 0) ? 0 : record_count) : lane;
    int record_step = MANIFOLD_SEQUENTIAL ? 1 : PAIR_LANES;
    for (int t = first_record; t < record_count; t += record_step) {
        int slot = records[t];  // k * stride + i: the record's friction slot k of particle i
        int k = slot / stride, i = slot - k * stride;
        __global float4 *r = solve_record + k * SOLVE_FIELDS * stride + i;
        float3 n = r[0].xyz;
        float4 lambda = r[3 * stride];
        float3 j;
        if (warm) {
            j = -lambda.w * n + lambda.xyz;
#if SUBSTEPS_PER_DETECTION > 1
            r[4 * stride].w += 1.0f;  // substeps started since the detection (solve_record_impulse)
#endif
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
            float4 next = solve_record_impulse(r, stride, A, B, substep, constants, relax, body_mass,
                                               body_inv_inertia, depth_shift);
            j = -(next.w - lambda.w) * n + (next.xyz - lambda.xyz);  // this pass's impulse on b
            r[3 * stride] = next;
            history_impulse_out[slot] = next;
        }
        impulse += j;
        moment_a += cross(r[stride].xyz, j);
        moment_b -= cross(r[2 * stride].xyz, j);  // c's arm (a static side's velocity: unused)
        if (MANIFOLD_SEQUENTIAL && !warm) {
            A.v += j / body_mass[b];
            A.w += angular_velocity(A.q, body_inv_inertia + 9 * b, cross(r[stride].xyz, j));
            if (c >= 0) {
                B.v -= j / body_mass[c];
                B.w -= angular_velocity(B.q, body_inv_inertia + 9 * c, cross(r[2 * stride].xyz, j));
            }
        }
    }
    float sums[9];
    pair_lane_sums(sums, impulse, moment_a, moment_b);
    for (int s = 0; s < 9; ++s) lane_sums[s * PAIR_LANES + lane] = sums[s];
    for (int span = PAIR_LANES / 2; span > 0; span /= 2) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lane < span)
            for (int s = 0; s < 9; ++s) lane_sums[s * PAIR_LANES + lane] += lane_sums[s * PAIR_LANES + lane + span];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lane != 0) return;
    impulse = (float3)(lane_sums[0], lane_sums[PAIR_LANES], lane_sums[2 * PAIR_LANES]);
    moment_a = (float3)(lane_sums[3 * PAIR_LANES], lane_sums[4 * PAIR_LANES], lane_sums[5 * PAIR_LANES]);
    moment_b = (float3)(lane_sums[6 * PAIR_LANES], lane_sums[7 * PAIR_LANES], lane_sums[8 * PAIR_LANES]);
    bool move = !relax;
    change_body_momenta(b, impulse, moment_a, substep, move, body_mass, body_inv_inertia, body_position,
                        body_orientation, body_momentum, body_angular_momentum, body_velocity, body_angular_velocity);
    if (c >= 0)
        change_body_momenta(c, -impulse, moment_b, substep, move, body_mass, body_inv_inertia, body_position,
                            body_orientation, body_momentum, body_angular_momentum, body_velocity,
                            body_angular_velocity);
}
