// Stage 60, the velocity solve's shared parts (Rigid Voxels; contact-solve.md E13-E16, the rigid
// step in docs/experiments/rigid-step.md): Box2D's soft step over the contacts the contact kernel
// recorded (write_solve_record). A pass makes each contact stop closing once it is deeper than the
// slop and pushes a deeper one out, moving the bodies as if the substep had run with the new
// velocities; a relax pass does the same without the push-out, on the velocities only, so the
// push-out moves bodies without becoming speed. A contact deeper than the slop is soft
// (solve_constants.w < 1: a damped spring solved as a pass that reaches massScale of the rigid
// impulse, pushes out at biasRate times the excess depth and leaks 1 - massScale of the impulse it
// holds; rigid in the relax passes). Here: the bodies and the records as a pass reads them, and
// one point's part of a pass (solve_pair_point); the passes over the body pairs, colour after
// colour, and each manifold's friction at its centre are 62_pair_solve.cl's.

typedef struct {
    float3 v;
    float3 w;
    // the body's inverse mass and world inverse inertia (by columns), both 0 for a static side:
    // taken once per pair and pass, so the loops over a pair's points read no body data from
    // global memory (each point's inverse mass and each impulse read the body-frame inertia and
    // turned it by the orientation, four chains of dependent loads a point, and such chains were
    // the passes' time on a GPU: a colour's launch takes as long as one pair's chain)
    float inv_mass;
    float3 inv_inertia_x, inv_inertia_y, inv_inertia_z;
    int body;   // < 0: a static side
    // the other side of a pair (62_pair_solve.cl) in a pass that leaves the bodies where they are:
    // its records' arms taken as the first side's plus from_a (the first side's centre minus this
    // one's now), so both sides' impulses act at one world point
    int arms_now;
    float3 from_a;
} SolveBody;

// A body as the pass found it, read with the rest at the pair's start (change_body_momenta):
// read at the end, after the pass's stores, they were one more chain of loads on a GPU
typedef struct {
    float4 position, orientation;
    float3 momentum, angular_momentum, velocity, angular_velocity;
    float mass;
    int body;   // < 0: a static side (nothing read)
} FoundBody;

inline FoundBody found_body(int body, __global const float4 *body_position, __global const float4 *body_orientation,
                            __global const float4 *body_momentum, __global const float4 *body_angular_momentum,
                            __global const float4 *body_velocity, __global const float4 *body_angular_velocity,
                            __global const float *body_mass)
{
    FoundBody f;
    f.body = body;
    if (body < 0) return f;
    f.position = body_position[body];
    f.orientation = body_orientation[body];
    f.momentum = body_momentum[body].xyz;
    f.angular_momentum = body_angular_momentum[body].xyz;
    f.velocity = body_velocity[body].xyz;
    f.angular_velocity = body_angular_velocity[body].xyz;
    f.mass = body_mass[body];
    return f;
}

// Body f as a pass sees it (f.body < 0: a static side, which nothing moves)
inline SolveBody solve_body(FoundBody f, __global const float *body_inv_inertia)
{
    SolveBody s;
    s.body = f.body;
    s.arms_now = 0;
    s.from_a = (float3)(0.0f);
    s.v = s.w = s.inv_inertia_x = s.inv_inertia_y = s.inv_inertia_z = (float3)(0.0f);
    s.inv_mass = 0.0f;
    if (f.body < 0) return s;
    s.v = f.velocity;
    s.w = f.angular_velocity;
    s.inv_mass = 1.0f / f.mass;
    float4 q = f.orientation;
    __global const float *inertia = body_inv_inertia + 9 * f.body;
    s.inv_inertia_x = angular_velocity(q, inertia, (float3)(1.0f, 0.0f, 0.0f));
    s.inv_inertia_y = angular_velocity(q, inertia, (float3)(0.0f, 1.0f, 0.0f));
    s.inv_inertia_z = angular_velocity(q, inertia, (float3)(0.0f, 0.0f, 1.0f));
    return s;
}

// A sleeping body as a pass sees it: held like a static side (63_islands.cl), its records' arms
// still its own, so that the awake side of the pair meets it where it lies
inline void hold_still(SolveBody *s)
{
    s->v = s->w = s->inv_inertia_x = s->inv_inertia_y = s->inv_inertia_z = (float3)(0.0f);
    s->inv_mass = 0.0f;
}

// A resting pair whose upper body (the side its contact normal points to, within SUPPORT_COSINE of
// SUPPORT_UP, against gravity) is more than SUPPORT_MASS_RATIO times as heavy as the lower one:
// the scale of the lower one's inverse mass and inertia in the pair's passes (1: none). The
// passes then see the pair as SUPPORT_MASS_RATIO to 1 and the lower body takes that share of
// their impulses: a Gauss-Seidel pass moves a heavy body on a light one by the light one's share
// of each impulse, so a 1000:1 pair barely slows the heavy one in a pass, and the light body,
// pressed by a load a thousand times its own, gives way sideways (settings.py SUPPORT_MASS_RATIO;
// Guendelman et al.'s shock propagation makes lower bodies heavier the same way). n: the pair's
// normal from a towards b.
inline void support_scales(float3 n, float mass_a, float mass_b, float *scale_a, float *scale_b)
{
    float up = dot(n, SUPPORT_UP);
    if (up > SUPPORT_COSINE && mass_b > SUPPORT_MASS_RATIO * mass_a)
        *scale_a = SUPPORT_MASS_RATIO * mass_a / mass_b;
    else if (up < -SUPPORT_COSINE && mass_a > SUPPORT_MASS_RATIO * mass_b)
        *scale_b = SUPPORT_MASS_RATIO * mass_b / mass_a;
}

inline void scale_inverse_mass(SolveBody *s, float scale)
{
    s->inv_mass *= scale;
    s->inv_inertia_x *= scale;
    s->inv_inertia_y *= scale;
    s->inv_inertia_z *= scale;
}

// The change of the body's angular velocity that angular impulse L makes
inline float3 inverse_inertia_times(SolveBody s, float3 L)
{
    return L.x * s.inv_inertia_x + L.y * s.inv_inertia_y + L.z * s.inv_inertia_z;
}

// A contact point of a pair as the passes hold it (62_pair_solve.cl): a record's fields
// (00_common.h write_solve_record) read once per pass into private memory
typedef struct {
    float3 n;       // the normal, from the pair's first body towards the other side
    float3 arm;     // the arm from the first body's centre
    float depth;    // at the substep's start: the detection's plus the bodies' motion since
    float4 f2;      // the other body's arm from the detection (a static side: its velocity), share
    float4 lambda;  // the accumulated impulses (tangential xyz, normal)
    float4 f4;      // friction coefficient, restitution, impact speed, the most normal impulse carried
    int slot;       // k * stride + i: friction slot k of particle i
} PairPoint;

// The arm of point p on side b: its own (from the detection), or with b.arms_now the point side
// a's arm reaches now; on a static side (never arms_now) its velocity at the point
inline float3 other_arm(PairPoint p, SolveBody b)
{
    return b.arms_now ? p.arm + b.from_a : p.f2.xyz;
}

// The inverse mass the body shows along u at arm (0: static).
inline float inverse_mass(SolveBody s, float3 arm, float3 u)
{
    float3 c = cross(arm, u);
    return s.inv_mass + dot(c, inverse_inertia_times(s, c));
}

// The accumulated impulses (tangential xyz, normal) of point p after one solve or relax pass of
// its normal from the two sides' velocities now (friction is held at the manifold's centre,
// 62_pair_solve.cl centre_friction); b.body < 0: a static side.
inline float4 solve_point_impulse(PairPoint p, SolveBody a, SolveBody b, float substep, float4 solve_constants,
                                  bool relax)
{
    float3 n = p.n, arm_i = p.arm;
    float depth = p.depth, share = p.f2.w;
    float4 lambda = p.lambda;
    float3 arm_j = other_arm(p, b);
    float3 v_j = (b.body >= 0) ? b.v + cross(b.w, arm_j) : p.f2.xyz;
    float vn = dot(a.v + cross(a.w, arm_i) - v_j, n);  // > 0: closing
    // closing at most what leaves the contact at the slop after the substep; a deeper one
    // pushed out no faster than the push-out speed (not while relaxing: it stops)
    float allowed = (solve_constants.x - depth) / substep;
    // soft below the slop (solve_constants.w < 1): a load shared by a face's redundant contacts
    // settles as on stiff springs instead of cycling (restitution is a pass of its own, 62)
    float mass_scale = 1.0f, impulse_scale = 0.0f;
    if (!relax && allowed < 0.0f && solve_constants.w < 1.0f) {
        allowed = -solve_constants.z * (depth - solve_constants.x);
        mass_scale = solve_constants.w;
        impulse_scale = 1.0f - mass_scale;
    }
    allowed = relax ? fmax(allowed, 0.0f) : fmax(allowed, -solve_constants.y);
    float k_n = inverse_mass(a, arm_i, n) + ((b.body >= 0) ? inverse_mass(b, arm_j, n) : 0.0f);
    float normal = (impulse_scale == 0.0f)
                 ? fmax(lambda.w + share * (vn - allowed) / k_n, 0.0f)
                 : fmax(lambda.w + mass_scale * share * (vn - allowed) / k_n - impulse_scale * lambda.w, 0.0f);
    return (float4)(lambda.xyz, normal);
}

// Body s's momenta and velocities changed by an impulse and its moment about the centre, and with
// move its pose too (as if the substep had run with the new velocities); s: the body as the pass
// found it.
inline void change_body_momenta(
    FoundBody s, float3 impulse, float3 moment, float substep, bool move, __global const float *body_inv_inertia,
    __global float4 *body_position, __global float4 *body_orientation, __global float4 *body_momentum,
    __global float4 *body_angular_momentum, __global float4 *body_velocity, __global float4 *body_angular_velocity)
{
    if (all(impulse == 0.0f) && all(moment == 0.0f)) return;
    int b = s.body;
    float4 q = s.orientation;
    float3 P = s.momentum + impulse;
    float3 L = s.angular_momentum + moment;
    float3 v = P / s.mass;
    if (move) {
        float3 dw = angular_velocity(q, body_inv_inertia + 9 * b, L) - s.angular_velocity;
        body_position[b] = s.position + (float4)((v - s.velocity) * substep, 0.0f);
        float4 turned = q + quat_multiply((float4)(0.5f * substep * dw, 0.0f), q);
        q = turned * rsqrt(dot(turned, turned));
        body_orientation[b] = q;
    }
    body_momentum[b] = (float4)(P, 0.0f);
    body_angular_momentum[b] = (float4)(L, 0.0f);
    body_velocity[b] = (float4)(v, 0.0f);
    body_angular_velocity[b] = (float4)(angular_velocity(q, body_inv_inertia + 9 * b, L), 0.0f);
}

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

// How the pair's two bodies moved since the contacts' detection (SUBSTEPS_PER_DETECTION > 1):
// each point's depth at the substep's start follows from it (Box2D's relative anchors; the
// normal stays)
typedef struct {
    float3 moved_a, moved_b;
    float4 turned_a, turned_b;
} PairMotion;

// point ``slot`` of the pair; its depth only with ``deepened`` (the warm start and the friction
// read none)
inline PairPoint load_pair_point(__global const float4 *solve_record, int slot, int stride, PairMotion m, bool has_b,
                                 bool deepened)
{
    int k = slot / stride, i = slot - k * stride;
    __global const float4 *r = solve_record + k * SOLVE_FIELDS * stride + i;
    float4 f0 = r[0], f1 = r[stride];
    PairPoint p;
    p.n = f0.xyz;
    p.arm = f1.xyz;
    p.f2 = r[2 * stride];
    p.lambda = r[3 * stride];
    p.f4 = r[4 * stride];
    p.slot = slot;
    float depth_shift = 0.0f;
#if SUBSTEPS_PER_DETECTION > 1
    if (deepened) {
        float3 shift = m.moved_a + quat_rotate(m.turned_a, p.arm) - p.arm;
        if (has_b) shift -= m.moved_b + quat_rotate(m.turned_b, p.f2.xyz) - p.f2.xyz;
        depth_shift = dot(shift, p.n);
    }
#endif
    p.depth = f1.w + depth_shift;
    return p;
}

// Point p's accumulated impulses after a restitution pass (manifolds only; Box2D's
// b2ApplyRestitution, reference.py _restitution_impulse), at a detection's last substep after the
// relax passes, on pairs where either body takes an impact: a point that approached faster than
// IMPACT_SPEED at its detection (f4.z) and carried a normal impulse since (f4.w: a speculative
// point that never touched does not bounce, one that touched and parted within the step does) is
// given the normal impulse that parts it at its restitution (f4.y) times that speed; any other
// point stops closing as in a relax pass, so the bodies under a struck one hold while it rebounds.
// Rigid, velocities only; the accumulated impulse stays >= 0.
inline float4 restitution_impulse(PairPoint p, SolveBody a, SolveBody b, float substep, float slop)
{
    float4 lambda = p.lambda, f4 = p.f4;
    float3 n = p.n, arm_i = p.arm;
    float3 arm_j = other_arm(p, b);
    float3 v_j = (b.body >= 0) ? b.v + cross(b.w, arm_j) : p.f2.xyz;
    float vn = dot(a.v + cross(a.w, arm_i) - v_j, n);  // > 0: closing
    float allowed = (f4.z > IMPACT_SPEED && f4.w > 0.0f && f4.y > 0.0f)
                  ? -f4.y * f4.z
                  : fmax((slop - p.depth) / substep, 0.0f);
    float k_n = inverse_mass(a, arm_i, n) + ((b.body >= 0) ? inverse_mass(b, arm_j, n) : 0.0f);
    lambda.w = fmax(lambda.w + p.f2.w * (vn - allowed) / k_n, 0.0f);
    return lambda;
}

// The sums a pass gathers over the pair's points: the impulse on the first body and its moments
// about both bodies' centres
typedef struct {
    float3 impulse, moment_a, moment_b;
} PairSums;

// (arm_b: other_arm; a static side's is its velocity, and its moment unused)
inline void add_point_impulse(PairSums *sums, float3 arm_a, float3 arm_b, float3 j)
{
    sums->impulse += j;
    sums->moment_a += cross(arm_a, j);
    sums->moment_b -= cross(arm_b, j);
}

inline void store_pair_point(__global float4 *solve_record, __global float4 *history_impulse_out, PairPoint p, int stride)
{
    int k = p.slot / stride, i = p.slot - k * stride;
    __global float4 *r = solve_record + k * SOLVE_FIELDS * stride + i;
    r[3 * stride] = p.lambda;
    r[4 * stride].w = p.f4.w;
    history_impulse_out[p.slot] = p.lambda;
}

// One point of a pass (solve_kind below): its impulse applied to both sides' velocities (not in
// the warm start, which only sums the impulses the points start with) and added to the sums
inline void solve_pair_point(PairPoint *p, int kind, SolveBody *A, SolveBody *B, float substep, float4 constants,
                             PairSums *sums, __global float4 *solve_record, __global float4 *history_impulse_out,
                             int stride)
{
    if (kind == 0) {
        add_point_impulse(sums, p->arm, other_arm(*p, *B), -p->lambda.w * p->n + p->lambda.xyz);
        return;
    }
    float4 next = (kind == 3) ? restitution_impulse(*p, *A, *B, substep, constants.x)
                              : solve_point_impulse(*p, *A, *B, substep, constants, kind == 2);
    float3 j = -(next.w - p->lambda.w) * p->n + (next.xyz - p->lambda.xyz);  // this pass's impulse on b
    p->lambda = next;
    p->f4.w = fmax(p->f4.w, next.w);  // the most it carried since its detection
    store_pair_point(solve_record, history_impulse_out, *p, stride);
    float3 arm_b = other_arm(*p, *B);
    add_point_impulse(sums, p->arm, arm_b, j);
    move_pair(A, B, p->arm, arm_b, j);
}

// The joints' buffers as a pass reads them (65_joints.cl solve_joint_colour)
typedef struct {
    __global const int *joint_colour_start;
    __global const int *joint_colour_order;
    __global const int2 *joint_body;
    __global const float4 *joint_anchor_a;
    __global const float4 *joint_anchor_b;
    __global const float4 *joint_frame_a;
    __global const float4 *joint_frame_b;
    __global const int *joint_row_mode;
    __global const float *joint_rows;
    __global int *joint_state;  // JOINT_AT_THRESHOLD set by the passes
    __global float *joint_impulse;
    __global const float *joint_break_impulse;  // each row's most a substep (Bullet's clamp); inf: none
    float4 joint_soft;
} JointSolve;
