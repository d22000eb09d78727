// Stage 64, the joints between bodies (Blender's rigid body constraints; core/joints.py is their
// model, core/reference_joints.py the NumPy specification this file follows): Box2D v3's soft
// joints on Bullet's six 6-DOF rows, solved in every pass of the velocity solve before the
// contacts (solve_substep_passes in 62_pair_solve.cl, or a launch per joint colour), colour after
// colour: the joints are coloured once on the host (core/joints.py joint_colouring) so that no two
// of a colour share a dynamic body, and a colour's joints are solved side by side.
// Also here: the sleepers a joint joins to an awake body woken before the passes, and the joints
// whose impulse reached their breaking threshold broken after them (for good; the next detection
// rebuilds the neighbour lists so that their bodies' contacts come back).
// Defines (joint_solve.py joint_defines): JOINT_COUNT (0: none, the joints' parts of the search, the
// islands and the passes compiled out), the state bits JOINT_ENABLED, JOINT_BROKEN,
// JOINT_NO_COLLISIONS, the row modes ROW_LOCKED and ROW_LIMITED (two bits per row in
// joint_row_mode), joint_rows' layout (JOINT_ROW_VALUES per joint, ROW_LOWER, ROW_UPPER,
// ROW_SPRING_STIFFNESS, ROW_SPRING_DAMPING, ROW_MOTOR_VELOCITY, ROW_MOTOR_MAX_IMPULSE: six each) and
// joint_impulse's (JOINT_IMPULSES per joint, IMPULSE_LOCKED, IMPULSE_LOWER, IMPULSE_UPPER,
// IMPULSE_SPRING, IMPULSE_MOTOR), STATIC_BODY.

inline bool joint_active(int state)
{
    return (state & (JOINT_ENABLED | JOINT_BROKEN)) == JOINT_ENABLED;
}

// A joint's six rows at one pose of its bodies: its coordinates (b's anchor along frame a's axes,
// the XYZ Euler angles of frame b in frame a) and each row's Jacobian on (v_a, w_a, v_b, w_b)
typedef struct {
    float coordinate[6];
    float3 lin_a[6], ang_a[6], lin_b[6], ang_b[6];
} JointRows;

inline JointRows joint_rows_at(float4 x_a, float4 q_a, float4 x_b, float4 q_b, bool has_b, float3 anchor_a,
                               float3 anchor_b, float4 frame_a, float4 frame_b)
{
    JointRows r;
    float3 arm_a = quat_rotate(q_a, anchor_a);
    float4 world_a = quat_multiply(q_a, frame_a);
    float3 arm_b = (float3)(0.0f), point_b = anchor_b;
    float4 world_b = frame_b;  // a static side's frame is in the world
    if (has_b) {
        arm_b = quat_rotate(q_b, anchor_b);
        point_b = x_b.xyz + arm_b;
        world_b = quat_multiply(q_b, frame_b);
    }
    float3 axis_a[3], axis_b[3];
    axis_a[0] = quat_rotate(world_a, (float3)(1.0f, 0.0f, 0.0f));
    axis_a[1] = quat_rotate(world_a, (float3)(0.0f, 1.0f, 0.0f));
    axis_a[2] = quat_rotate(world_a, (float3)(0.0f, 0.0f, 1.0f));
    axis_b[0] = quat_rotate(world_b, (float3)(1.0f, 0.0f, 0.0f));
    axis_b[1] = quat_rotate(world_b, (float3)(0.0f, 1.0f, 0.0f));
    axis_b[2] = quat_rotate(world_b, (float3)(0.0f, 0.0f, 1.0f));
    float3 d = point_b - (x_a.xyz + arm_a);
    float3 reach_a = arm_a + d;  // a's arm to b's anchor (Box2D's prismatic joint)
    for (int row = 0; row < 3; ++row) {
        float3 e = axis_a[row];
        r.coordinate[row] = dot(e, d);
        r.lin_a[row] = -e;
        r.ang_a[row] = -cross(reach_a, e);
        r.lin_b[row] = e;
        r.ang_b[row] = cross(arm_b, e);
    }
    // Bullet's matrixToEulerXYZ of M = A^T B, M[i][j] = axis_a[i] . axis_b[j]
    r.coordinate[3] = atan2(-dot(axis_a[1], axis_b[2]), dot(axis_a[2], axis_b[2]));
    r.coordinate[4] = asin(clamp(dot(axis_a[0], axis_b[2]), -1.0f, 1.0f));
    r.coordinate[5] = atan2(-dot(axis_a[0], axis_b[1]), dot(axis_a[0], axis_b[0]));
    // each angle's rate along the dual basis of the Euler axes (a's x, a's y turned by x, b's z)
    float3 u0 = axis_a[0], u2 = axis_b[2];
    float3 u1 = cross(u2, u0);
    float n1 = length(u1);
    if (n1 > 1e-12f) u1 /= n1;
    float inverse_d = 1.0f / fmax(dot(u0, cross(u1, u2)), 1e-3f);
    float3 rate[3];
    rate[0] = cross(u1, u2) * inverse_d;
    rate[1] = u1;
    rate[2] = cross(u0, u1) * inverse_d;
    for (int k = 0; k < 3; ++k) {
        r.lin_a[3 + k] = r.lin_b[3 + k] = (float3)(0.0f);
        r.ang_a[3 + k] = -rate[k];
        r.ang_b[3 + k] = rate[k];
    }
    return r;
}

inline float row_velocity(JointRows *r, int row, SolveBody *A, SolveBody *B)
{
    return dot(r->lin_a[row], A->v) + dot(r->ang_a[row], A->w) + dot(r->lin_b[row], B->v) + dot(r->ang_b[row], B->w);
}

// J_i M^-1 J_j^T of two rows
inline float row_coupling(JointRows *r, int i, int j, SolveBody *A, SolveBody *B)
{
    return A->inv_mass * dot(r->lin_a[i], r->lin_a[j]) + dot(r->ang_a[i], inverse_inertia_times(*A, r->ang_a[j]))
         + B->inv_mass * dot(r->lin_b[i], r->lin_b[j]) + dot(r->ang_b[i], inverse_inertia_times(*B, r->ang_b[j]));
}

// Impulse lambda along a row: the pass's velocities and the impulses it gave each side (J^T lambda)
inline void apply_row(JointRows *r, int row, float lambda, SolveBody *A, SolveBody *B, float3 *impulse_a,
                      float3 *moment_a, float3 *impulse_b, float3 *moment_b)
{
    float3 la = r->lin_a[row] * lambda, aa = r->ang_a[row] * lambda;
    float3 lb = r->lin_b[row] * lambda, ab = r->ang_b[row] * lambda;
    *impulse_a += la;
    *moment_a += aa;
    *impulse_b += lb;
    *moment_b += ab;
    A->v += A->inv_mass * la;
    A->w += inverse_inertia_times(*A, aa);
    B->v += B->inv_mass * lb;
    B->w += inverse_inertia_times(*B, ab);
}

// The block K x = rhs of a joint's LOCKED rows (n <= 6) by Gaussian elimination with partial
// pivoting; an unknown whose pivot vanishes (a held side, a body of too few particles) is left at
// 0, as the reference's least squares leaves a null direction
inline void solve_block(float K[6][6], float rhs[6], float x[6], int n)
{
    int order[6];
    for (int i = 0; i < n; ++i) order[i] = i;
    float scale = 0.0f;
    for (int i = 0; i < n; ++i) scale = fmax(scale, fabs(K[i][i]));
    float tiny = 1e-6f * scale;
    bool zero[6];
    for (int c = 0; c < n; ++c) {
        int best = c;
        for (int i = c + 1; i < n; ++i)
            if (fabs(K[i][c]) > fabs(K[best][c])) best = i;
        if (best != c) {
            for (int j = 0; j < n; ++j) { float t = K[c][j]; K[c][j] = K[best][j]; K[best][j] = t; }
            float t = rhs[c]; rhs[c] = rhs[best]; rhs[best] = t;
        }
        zero[c] = !(fabs(K[c][c]) > tiny);
        if (zero[c]) continue;
        for (int i = c + 1; i < n; ++i) {
            float f = K[i][c] / K[c][c];
            for (int j = c; j < n; ++j) K[i][j] -= f * K[c][j];
            rhs[i] -= f * rhs[c];
        }
    }
    for (int c = n - 1; c >= 0; --c) {
        if (zero[c]) { x[c] = 0.0f; continue; }
        float s = rhs[c];
        for (int j = c + 1; j < n; ++j) s -= K[c][j] * x[j];
        x[c] = s / K[c][c];
    }
}

// The six-row block of a FIXED joint (symmetric positive definite while either side moves freely)
// by Cholesky's factorisation in loops of constant bounds, which the compiler unrolls into
// registers (Gaussian elimination's pivoting indexes private arrays at run time: on a CPU that is
// memory); false, x untouched, where a pivot vanishes (solve_block then)
inline bool solve_six(float K[6][6], float rhs[6], float x[6])
{
    float L[6][6], y[6];
    float tiny = 1e-9f * fmax(fmax(fmax(K[0][0], K[1][1]), fmax(K[2][2], K[3][3])), fmax(K[4][4], K[5][5]));
    #pragma unroll
    for (int j = 0; j < 6; ++j) {
        float d = K[j][j];
        #pragma unroll
        for (int k = 0; k < j; ++k) d -= L[j][k] * L[j][k];
        if (!(d > tiny)) return false;
        L[j][j] = sqrt(d);
        float inv = 1.0f / L[j][j];
        #pragma unroll
        for (int i = j + 1; i < 6; ++i) {
            float v = K[i][j];
            #pragma unroll
            for (int k = 0; k < j; ++k) v -= L[i][k] * L[j][k];
            L[i][j] = v * inv;
        }
    }
    #pragma unroll
    for (int i = 0; i < 6; ++i) {
        float v = rhs[i];
        #pragma unroll
        for (int k = 0; k < i; ++k) v -= L[i][k] * y[k];
        y[i] = v / L[i][i];
    }
    #pragma unroll
    for (int i = 5; i >= 0; --i) {
        float v = y[i];
        #pragma unroll
        for (int k = i + 1; k < 6; ++k) v -= L[k][i] * x[k];
        x[i] = v / L[i][i];
    }
    return true;
}

// A FIXED joint's six locked rows as one block, each row's index a constant of the unrolled loops (a
// CPU keeps the rows in registers; with the row read from rows[] they are private memory): as the
// general block below, by Cholesky's factorisation; false, nothing changed, where a pivot vanishes
inline bool fixed_block(JointRows *r, __global const float *values, __global float *impulse, bool use_bias,
                        float4 soft, SolveBody *A, SolveBody *B, float3 *impulse_a, float3 *moment_a,
                        float3 *impulse_b, float3 *moment_b)
{
    float3 mv_a[6], mw_a[6], mv_b[6], mw_b[6];
    float K[6][6], rhs[6], x[6];
    #pragma unroll
    for (int i = 0; i < 6; ++i) {
        mv_a[i] = A->inv_mass * r->lin_a[i];
        mw_a[i] = inverse_inertia_times(*A, r->ang_a[i]);
        mv_b[i] = B->inv_mass * r->lin_b[i];
        mw_b[i] = inverse_inertia_times(*B, r->ang_b[i]);
        float bias = use_bias ? soft.x * (r->coordinate[i] - values[ROW_LOWER + i]) : 0.0f;
        rhs[i] = row_velocity(r, i, A, B) + bias;
    }
    #pragma unroll
    for (int i = 0; i < 6; ++i) {
        #pragma unroll
        for (int k = i; k < 6; ++k)
            K[i][k] = K[k][i] = dot(r->lin_a[i], mv_a[k]) + dot(r->ang_a[i], mw_a[k])
                              + dot(r->lin_b[i], mv_b[k]) + dot(r->ang_b[i], mw_b[k]);
    }
    if (!solve_six(K, rhs, x)) return false;
    float scale = use_bias ? soft.y : 1.0f, forget = use_bias ? soft.z : 0.0f;
    #pragma unroll
    for (int i = 0; i < 6; ++i) {
        float lambda = -scale * x[i] - forget * impulse[IMPULSE_LOCKED + i];
        impulse[IMPULSE_LOCKED + i] += lambda;
        *impulse_a += r->lin_a[i] * lambda;
        *moment_a += r->ang_a[i] * lambda;
        *impulse_b += r->lin_b[i] * lambda;
        *moment_b += r->ang_b[i] * lambda;
        A->v += mv_a[i] * lambda;
        A->w += mw_a[i] * lambda;
        B->v += mv_b[i] * lambda;
        B->w += mw_b[i] * lambda;
    }
    return true;
}

// One pass (kind 0 warm, 1 solve, 2 relax; restitution passes solve no joints) of joint colour
// joint_colour: this work-item takes its joints first, first + step, ...
void solve_joint_colour(const int joint_colour, const int solve_kind, const int first, const int step, JointSolve js,
                        PairSolve ps)
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
        float3 impulse_a = (float3)(0.0f), moment_a = (float3)(0.0f);
        float3 impulse_b = (float3)(0.0f), moment_b = (float3)(0.0f);
        if (kind == 0) {
            for (int row = 0; row < 6; ++row) {
                float total = impulse[IMPULSE_LOCKED + row] + impulse[IMPULSE_SPRING + row] + impulse[IMPULSE_MOTOR + row]
                            + impulse[IMPULSE_LOWER + row] - impulse[IMPULSE_UPPER + row];
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
                    impulse[IMPULSE_SPRING + row] += lambda;
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
                    impulse[stored] = now;
                    apply_row(&r, row, sign * (now - old), &A, &B, &impulse_a, &moment_a, &impulse_b, &moment_b);
                }
            }
            // the LOCKED rows as one block (a FIXED joint exact in one pass): each row's M^-1 J^T once,
            // for the block K = J M^-1 J^T (symmetric) and for the velocities the impulses change
            int rows[6], n = 0;
            for (int row = 0; row < 6; ++row)
                if (((modes >> (2 * row)) & 3) == ROW_LOCKED) rows[n++] = row;
            if (n == 6 && fixed_block(&r, values, impulse, use_bias, soft, &A, &B, &impulse_a, &moment_a, &impulse_b,
                                      &moment_b)) {
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
                    impulse[IMPULSE_LOCKED + row] += lambda;
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
    __global const int *joint_state,
    __global float *joint_impulse,
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
                     joint_frame_b, joint_row_mode, joint_rows, joint_state, joint_impulse, joint_soft};
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
    for (int row = 0; row < 6; ++row) {
        float total = impulse[IMPULSE_LOCKED + row] + impulse[IMPULSE_SPRING + row] + impulse[IMPULSE_MOTOR + row]
                    + impulse[IMPULSE_LOWER + row] - impulse[IMPULSE_UPPER + row];
        largest = fmax(largest, fabs(total));
    }
    if (!(largest >= joint_break_impulse[j])) return;
    joint_state[j] = state | JOINT_BROKEN;
    for (int k = 0; k < JOINT_IMPULSES; ++k) impulse[k] = 0.0f;
    atomic_inc(broken_joint_total);
    if (state & JOINT_NO_COLLISIONS) *next_rebuild = 1;  // every writer stores the same value
}
