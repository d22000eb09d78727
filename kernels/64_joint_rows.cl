// Stage 64, the joints' rows (functions 65_joints.cl calls): a joint's six rows at a pose of its bodies
// (Bullet's 6-DOF coordinates: b's anchor along frame a's axes, the XYZ Euler angles of frame b in
// frame a, each row's Jacobian along the dual basis of the Euler axes), a row's velocity and
// effective mass, an impulse along it, and the block of a joint's locked rows (Gaussian
// elimination, or a FIXED joint's unrolled Cholesky factorisation). core/reference_joints.py
// _joint_geometry and _solve_joint are their NumPy specification. Defines: see 65_joints.cl.

// Row ``row``'s impulse this substep, every kind together (what the warm start applies again and
// what breaking reads): the locked block's, the spring's, the motor's, the lower limit's less the
// upper's (joint_impulse's layout)
inline float row_total_impulse(__global const float *impulse, int row)
{
    return impulse[IMPULSE_LOCKED + row] + impulse[IMPULSE_SPRING + row] + impulse[IMPULSE_MOTOR + row]
         + impulse[IMPULSE_LOWER + row] - impulse[IMPULSE_UPPER + row];
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

// A row's accumulated impulse *stored plus lambda, kept within +-limit (Bullet's breaking: convertJoint
// clamps each row's impulse to the threshold, and a row held there breaks its joint, so a joint that
// breaks passes on no more than the threshold in its last substep; inf: unbreakable). Sets *reached
// where it held the row. Returns the change to apply: lambda itself, to the bit, within the limit.
inline float limited_change(__global float *stored, float lambda, float limit, bool *reached)
{
    float old = *stored, now = old + lambda;
    if (fabs(now) > limit) {
        now = copysign(limit, now);
        lambda = now - old;
        *reached = true;
    }
    *stored = now;
    return lambda;
}

// A FIXED joint's six locked rows as one block, each row's index a constant of the unrolled loops (a
// CPU keeps the rows in registers; with the row read from rows[] they are private memory): as the
// general block below, by Cholesky's factorisation; false, nothing changed, where a pivot vanishes
inline bool fixed_block(JointRows *r, __global const float *values, __global float *impulse, bool use_bias,
                        float4 soft, float limit, bool *reached, SolveBody *A, SolveBody *B, float3 *impulse_a,
                        float3 *moment_a, float3 *impulse_b, float3 *moment_b)
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
        lambda = limited_change(&impulse[IMPULSE_LOCKED + i], lambda, limit, reached);
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

