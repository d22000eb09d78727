// Stage 65, the joints between bodies (Blender's rigid body constraints; core/joints.py is their
// model, core/reference_joints.py the NumPy specification this file follows): Box2D v3's soft
// joints on Bullet's six 6-DOF rows, solved in every pass of the velocity solve before the
// contacts (solve_substep_passes in 62_pair_solve.cl, or a launch per joint colour), colour after
// colour: the joints are coloured once on the host (core/joints.py joint_colouring) so that no two
// of a colour share a dynamic body, and a colour's joints are solved side by side. Their rows'
// maths: 64_joint_rows.cl.
// Also here: the sleepers a joint joins to an awake body woken before the passes, and the joints
// whose impulse reached their breaking threshold broken after them (for good; the next detection
// rebuilds the neighbour lists so that their bodies' contacts come back). As Bullet's, no row takes
// more than the threshold in a substep, and a row held there (JOINT_AT_THRESHOLD) breaks its joint.
// Defines (joint_solve.py joint_defines): JOINT_COUNT (0: none, the joints' parts of the search, the
// islands and the passes compiled out), the state bits JOINT_ENABLED, JOINT_BROKEN, JOINT_AT_THRESHOLD,
// JOINT_NO_COLLISIONS, the row modes ROW_LOCKED and ROW_LIMITED (two bits per row in
// joint_row_mode), joint_rows' layout (JOINT_ROW_VALUES per joint, ROW_LOWER, ROW_UPPER,
// ROW_SPRING_STIFFNESS, ROW_SPRING_DAMPING, ROW_MOTOR_VELOCITY, ROW_MOTOR_MAX_IMPULSE: six each) and
// joint_impulse's (JOINT_IMPULSES per joint, IMPULSE_LOCKED, IMPULSE_LOWER, IMPULSE_UPPER,
// IMPULSE_SPRING, IMPULSE_MOTOR), STATIC_BODY.

// One pass (kind 0 warm, 1 solve, 2 relax; restitution passes solve no joints) of joint colour
// joint_colour: this work-item takes its joints first, first + step, ...
inline void joint_colour_pass(const int joint_colour, const int solve_kind, const int first, const int step,
                              JointSolve js, PairSolve ps)
{
    int kind = solve_kind & (SOLVE_PASS_BACKWARD - 1);
    if (kind == 3) return;
    float h = ps.substep;
    int end = js.joint_colour_start[joint_colour + 1];
    for (int at = js.joint_colour_start[joint_colour] + first; at < end; at += step) {
        int j = js.joint_colour_order[at];
        int state = js.joint_state[j];
        if (!joint_active(state)) continue;
        int2 bodies = js.joint_body[j];
        int a = bodies.x, b = bodies.y;
        bool has_b = b != STATIC_BODY;
        FoundBody found_a = found_body(a, ps.body_position, ps.body_orientation, ps.body_momentum,
                                       ps.body_angular_momentum, ps.body_velocity, ps.body_angular_velocity,
                                       ps.body_mass);
        FoundBody found_b = found_body(has_b ? b : -1, ps.body_position, ps.body_orientation, ps.body_momentum,
                                       ps.body_angular_momentum, ps.body_velocity, ps.body_angular_velocity,
                                       ps.body_mass);
        SolveBody A = solve_body(found_a, ps.body_inv_inertia), B = solve_body(found_b, ps.body_inv_inertia);
        // a sleeper holds still, a kinematic body (infinite mass) holds at its animation's velocity
        bool a_sleeps = is_asleep(ps.body_quiet[a], ps.sleep);
        bool b_sleeps = has_b && is_asleep(ps.body_quiet[b], ps.sleep);
        bool a_held = a_sleeps || isinf(found_a.mass), b_held = !has_b || b_sleeps || isinf(found_b.mass);
        if (a_held && b_held) continue;
        if (a_sleeps) hold_still(&A);
        if (b_sleeps) hold_still(&B);
        // warm and solve passes read the poses the substep started at, relax passes those after it
        bool moved = kind == 2;
        float4 x_a = moved ? found_a.position : ps.start_position[a];
        float4 q_a = moved ? found_a.orientation : ps.start_orientation[a];
        float4 x_b = (float4)(0.0f), q_b = (float4)(0.0f, 0.0f, 0.0f, 1.0f);
        if (has_b) {
            x_b = moved ? found_b.position : ps.start_position[b];
            q_b = moved ? found_b.orientation : ps.start_orientation[b];
        }
        float3 anchor_a = js.joint_anchor_a[j].xyz, anchor_b = js.joint_anchor_b[j].xyz;
        float4 frame_a = js.joint_frame_a[j], frame_b = js.joint_frame_b[j];
        JointRows r = joint_rows_at(x_a, q_a, x_b, q_b, has_b, anchor_a, anchor_b, frame_a, frame_b);
        __global float *impulse = js.joint_impulse + j * JOINT_IMPULSES;
        __global const float *values = js.joint_rows + j * JOINT_ROW_VALUES;
        int modes = js.joint_row_mode[j];
        // Bullet's breaking: no row applies more than the threshold in a substep (convertJoint clamps
        // each row's limits to it), and a row held at it breaks the joint after the passes
        float limit = js.joint_break_impulse[j];
        bool reached = false;
        float3 impulse_a = (float3)(0.0f), moment_a = (float3)(0.0f);
        float3 impulse_b = (float3)(0.0f), moment_b = (float3)(0.0f);
        if (kind == 0) {
            for (int row = 0; row < 6; ++row) {
                float total = row_total_impulse(impulse, row);
                if (total != 0.0f)
                    apply_row(&r, row, total, &A, &B, &impulse_a, &moment_a, &impulse_b, &moment_b);
            }
        } else {
            bool use_bias = kind == 1;
            // springs towards the starting pose, with the user's stiffness and damping; a relax pass
            // reads their stretch where the solve did, at the substep's start (reference_joints.py)
            if (modes & JOINT_MODE_SPRINGS) {
                float stretch[6];
                if (moved) {
                    float4 sx_b = has_b ? ps.start_position[b] : (float4)(0.0f);
                    float4 sq_b = has_b ? ps.start_orientation[b] : (float4)(0.0f, 0.0f, 0.0f, 1.0f);
                    JointRows start = joint_rows_at(ps.start_position[a], ps.start_orientation[a], sx_b, sq_b, has_b,
                                                    anchor_a, anchor_b, frame_a, frame_b);
                    for (int row = 0; row < 6; ++row) stretch[row] = start.coordinate[row];
                } else {
                    for (int row = 0; row < 6; ++row) stretch[row] = r.coordinate[row];
                }
                for (int row = 0; row < 6; ++row) {
                    float stiffness = values[ROW_SPRING_STIFFNESS + row], damping = values[ROW_SPRING_DAMPING + row];
                    if (!(stiffness > 0.0f || damping > 0.0f)) continue;
                    float k_row = row_coupling(&r, row, row, &A, &B);
                    if (k_row <= 0.0f) continue;
                    float a2 = h * (damping + h * stiffness) * k_row;
                    float bias = stiffness / (damping + h * stiffness) * stretch[row];
                    float cdot = row_velocity(&r, row, &A, &B);
                    float lambda = -(a2 / (1.0f + a2)) / k_row * (cdot + bias)
                                 - impulse[IMPULSE_SPRING + row] / (1.0f + a2);
                    lambda = limited_change(&impulse[IMPULSE_SPRING + row], lambda, limit, &reached);
                    apply_row(&r, row, lambda, &A, &B, &impulse_a, &moment_a, &impulse_b, &moment_b);
                }
            }
            // motors: the target relative velocity, the accumulated impulse capped (a force in effect)
            for (int row = 0; row < 6 && (modes & JOINT_MODE_MOTORS); ++row) {
                float cap = values[ROW_MOTOR_MAX_IMPULSE + row] * h;
                if (!(cap > 0.0f)) continue;
                float k_row = row_coupling(&r, row, row, &A, &B);
                if (k_row <= 0.0f) continue;
                float cdot = row_velocity(&r, row, &A, &B) - values[ROW_MOTOR_VELOCITY + row];
                float old = impulse[IMPULSE_MOTOR + row];
                float now = clamp(old - cdot / k_row, -cap, cap);
                if (fabs(now) > limit) {
                    now = copysign(limit, now);
                    reached = true;
                }
                impulse[IMPULSE_MOTOR + row] = now;
                apply_row(&r, row, now - old, &A, &B, &impulse_a, &moment_a, &impulse_b, &moment_b);
            }
            float4 soft = js.joint_soft;  // bias rate, mass scale, impulse scale (b2MakeSoft)
            // limits, one-sided, speculative while open
            for (int row = 0; row < 6 && (modes & JOINT_MODE_LIMITS); ++row) {
                if (((modes >> (2 * row)) & 3) != ROW_LIMITED) continue;
                float k_row = row_coupling(&r, row, row, &A, &B);
                if (k_row <= 0.0f) continue;
                for (int side = 0; side < 2; ++side) {
                    float sign = side == 0 ? 1.0f : -1.0f;
                    int stored = side == 0 ? IMPULSE_LOWER + row : IMPULSE_UPPER + row;
                    float gap = side == 0 ? r.coordinate[row] - values[ROW_LOWER + row]
                                          : values[ROW_UPPER + row] - r.coordinate[row];
                    float bias = 0.0f, scale = 1.0f, forget = 0.0f;
                    if (gap > 0.0f) {
                        bias = gap / h;
                    } else if (use_bias) {
                        bias = soft.x * gap;
                        scale = soft.y;
                        forget = soft.z;
                    }
                    float cdot = sign * row_velocity(&r, row, &A, &B);
                    float old = impulse[stored];
                    float now = fmax(old - scale / k_row * (cdot + bias) - forget * old, 0.0f);
                    if (now > limit) {
                        now = limit;
                        reached = true;
                    }
                    impulse[stored] = now;
                    apply_row(&r, row, sign * (now - old), &A, &B, &impulse_a, &moment_a, &impulse_b, &moment_b);
                }
            }
            // the LOCKED rows as one block (a FIXED joint exact in one pass): each row's M^-1 J^T once,
            // for the block K = J M^-1 J^T (symmetric) and for the velocities the impulses change
            int rows[6], n = 0;
            for (int row = 0; row < 6; ++row)
                if (((modes >> (2 * row)) & 3) == ROW_LOCKED) rows[n++] = row;
            if (n == 6 && fixed_block(&r, values, impulse, use_bias, soft, limit, &reached, &A, &B, &impulse_a,
                                      &moment_a, &impulse_b, &moment_b)) {
                // a FIXED joint (glue): solved with its rows known at compile time
            } else if (n > 0) {
                float3 mv_a[6], mw_a[6], mv_b[6], mw_b[6];
                float K[6][6], rhs[6], x[6];
                for (int i = 0; i < n; ++i) {
                    int row = rows[i];
                    mv_a[i] = A.inv_mass * r.lin_a[row];
                    mw_a[i] = inverse_inertia_times(A, r.ang_a[row]);
                    mv_b[i] = B.inv_mass * r.lin_b[row];
                    mw_b[i] = inverse_inertia_times(B, r.ang_b[row]);
                    float bias = use_bias ? soft.x * (r.coordinate[row] - values[ROW_LOWER + row]) : 0.0f;
                    rhs[i] = row_velocity(&r, row, &A, &B) + bias;
                }
                for (int i = 0; i < n; ++i)
                    for (int k = i; k < n; ++k) {
                        int row = rows[i];
                        K[i][k] = K[k][i] = dot(r.lin_a[row], mv_a[k]) + dot(r.ang_a[row], mw_a[k])
                                          + dot(r.lin_b[row], mv_b[k]) + dot(r.ang_b[row], mw_b[k]);
                    }
                solve_block(K, rhs, x, n);
                float scale = use_bias ? soft.y : 1.0f, forget = use_bias ? soft.z : 0.0f;
                for (int i = 0; i < n; ++i) {
                    int row = rows[i];
                    float lambda = -scale * x[i] - forget * impulse[IMPULSE_LOCKED + row];
                    lambda = limited_change(&impulse[IMPULSE_LOCKED + row], lambda, limit, &reached);
                    impulse_a += r.lin_a[row] * lambda;
                    moment_a += r.ang_a[row] * lambda;
                    impulse_b += r.lin_b[row] * lambda;
                    moment_b += r.ang_b[row] * lambda;
                    A.v += mv_a[i] * lambda;
                    A.w += mw_a[i] * lambda;
                    B.v += mv_b[i] * lambda;
                    B.w += mw_b[i] * lambda;
                }
            }
        }
        if (reached) js.joint_state[j] = state | JOINT_AT_THRESHOLD;  // breaks after the passes
        bool move = kind < 2;  // relax: velocities only
        if (!a_held)
            change_body_momenta(found_a, impulse_a, moment_a, h, move, ps.body_inv_inertia, ps.body_position,
                                ps.body_orientation, ps.body_momentum, ps.body_angular_momentum, ps.body_velocity,
                                ps.body_angular_velocity);
        if (has_b && !b_held)
            change_body_momenta(found_b, impulse_b, moment_b, h, move, ps.body_inv_inertia, ps.body_position,
                                ps.body_orientation, ps.body_momentum, ps.body_angular_momentum, ps.body_velocity,
                                ps.body_angular_velocity);
    }
}

// The pass of joint colour joint_colour that both the launch per colour and the one launch run: the
// warm start with its kind a constant, so that it is compiled apart from the solve's blocks (on a CPU,
// Intel's runtime, 2.26 -> 1.35 ms a pass over the glued wall's 5,790 joints), and in the same code
// for both launches, which give the same bits
__attribute__((noinline))
void solve_joint_colour(const int joint_colour, const int solve_kind, const int first, const int step, JointSolve js,
                        PairSolve ps)
{
    if (solve_kind == 0) joint_colour_pass(joint_colour, 0, first, step, js, ps);
    else joint_colour_pass(joint_colour, solve_kind, first, step, js, ps);
}

// A launch per joint colour and pass kind (where the passes are not one launch a substep)
__kernel void solve_joint_colour_pass(
    const int solve_colour,
    const int solve_kind,
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
    const float4 joint_soft,
    const float substep,
    const float4 sleep,
    __global const float *body_quiet,
    __global const float *body_mass,
    __global const float *body_inv_inertia,
    __global float4 *body_position,
    __global float4 *body_orientation,
    __global float4 *body_momentum,
    __global float4 *body_angular_momentum,
    __global float4 *body_velocity,
    __global float4 *body_angular_velocity,
    __global const float4 *start_position,
    __global const float4 *start_orientation)
{
    JointSolve js = {joint_colour_start, joint_colour_order, joint_body, joint_anchor_a, joint_anchor_b, joint_frame_a,
                     joint_frame_b, joint_row_mode, joint_rows, joint_state, joint_impulse, joint_break_impulse,
                     joint_soft};
    PairSolve ps;
    ps.substep = substep;
    ps.sleep = sleep;
    ps.body_quiet = body_quiet;
    ps.body_mass = body_mass;
    ps.body_inv_inertia = body_inv_inertia;
    ps.body_position = body_position;
    ps.body_orientation = body_orientation;
    ps.body_momentum = body_momentum;
    ps.body_angular_momentum = body_angular_momentum;
    ps.body_velocity = body_velocity;
    ps.body_angular_velocity = body_angular_velocity;
    ps.start_position = start_position;
    ps.start_orientation = start_orientation;
    solve_joint_colour(solve_colour, solve_kind, get_global_id(0), get_global_size(0), js, ps);
}

// Before the passes: a sleeper joined to an awake body wakes (Box2D's islands link joined bodies).
// Both are marked from the quiet counts as they stand, then woken (apply_joint_wakes), so that one
// wake does not spread further in the same substep, as in the reference.
__kernel void wake_joined_sleepers(
    const int joint_count,
    const float4 sleep,
    __global const int2 *joint_body,
    __global const int *joint_state,
    __global const float *body_quiet,
    __global int *body_joint_wake)
{
    int j = get_global_id(0);
    if (j >= joint_count || !joint_active(joint_state[j])) return;
    int2 bodies = joint_body[j];
    if (bodies.y == STATIC_BODY) return;
    if (is_asleep(body_quiet[bodies.x], sleep) != is_asleep(body_quiet[bodies.y], sleep)) {
        body_joint_wake[bodies.x] = 1;  // every writer stores the same value
        body_joint_wake[bodies.y] = 1;
    }
}

__kernel void apply_joint_wakes(
    const int body_count,
    __global int *body_joint_wake,
    __global float *body_quiet)
{
    int b = get_global_id(0);
    if (b >= body_count || !body_joint_wake[b]) return;
    body_joint_wake[b] = 0;
    body_quiet[b] = 0.0f;
}

// After the passes: a joint whose row took at least joint_break_impulse (Blender's threshold, an
// impulse per Bullet substep, scaled to this substep) breaks for good. Its impulses are dropped, it
// is counted, and the next detection rebuilds the neighbour lists, which leave out the particles
// of bodies an intact joint with disable_collisions joins (40_contacts.cl).
__kernel void break_joints(
    const int joint_count,
    __global const float *joint_break_impulse,
    __global int *joint_state,
    __global float *joint_impulse,
    __global int *broken_joint_total,
    __global int *next_rebuild)
{
    int j = get_global_id(0);
    if (j >= joint_count) return;
    int state = joint_state[j];
    if (!joint_active(state)) return;
    __global float *impulse = joint_impulse + j * JOINT_IMPULSES;
    float largest = 0.0f;
    for (int row = 0; row < 6; ++row) largest = fmax(largest, fabs(row_total_impulse(impulse, row)));
    if (!(largest >= joint_break_impulse[j]) && !(state & JOINT_AT_THRESHOLD)) return;
    joint_state[j] = state | JOINT_BROKEN;
    for (int k = 0; k < JOINT_IMPULSES; ++k) impulse[k] = 0.0f;
    atomic_inc(broken_joint_total);
    if (state & JOINT_NO_COLLISIONS) *next_rebuild = 1;  // every writer stores the same value
}
