// Stage 60, velocity solve (SOLVE_PASSES > 0; contact-solve.md E13), Box2D's soft step in Jacobi
// form over the contacts the contact kernel recorded (write_solve_record), after the bodies' step:
// WARM_START_FRACTION of the impulses each contact ended its last substep with are applied again
// (warm start; all of them lift a column, as each pass lowers an excess only by a fraction), then
// SOLVE_PASSES passes make each contact stop closing once it is deeper than the slop and push a
// deeper one out (an impact: part at its restitution times its impact speed), moving the bodies as
// if the substep had run with the new velocities; then RELAX_PASSES passes without the push-out,
// on the velocities only, so the push-out moves bodies without becoming speed. Friction holds up to
// mu times the contact's normal impulse. A contact deeper than the slop may be soft instead
// (solve_constants.w < 1: Box2D's soft step, a damped spring solved as a pass that reaches
// massScale of the rigid impulse, pushes out at biasRate times the excess depth and leaks
// 1 - massScale of the impulse it holds; rigid in the relax passes and for impacts). The contact
// law's springs still act; the solve adds what a stiff contact would have given beyond them. The
// passes over one record are solve_record_impulse's, shared with the coloured form
// (62_pair_solve.cl). Mass splitting (Tonge et al. 2012): a
// contact's impulse is the one that stops it with each body's inverse mass multiplied by the shares
// of the body's contacts, so the two sides of a pair compute the same impulse from the same two
// bodies' velocities and apply it equal and opposite (no scatter, no atomics: deterministic).

typedef struct {
    float3 v;
    float3 w;
    float4 q;
    float count;     // the shares of the body's contacts (mass splitting); 0: static or asleep
    int body;
    // the other side of a pair (62_pair_solve.cl) in a pass that leaves the bodies where they are:
    // its records' arms taken as the first side's plus from_a (the first side's centre minus this
    // one's now), so both sides' impulses act at one world point
    int arms_now;
    float3 from_a;
} SolveBody;

// The arm of record r on side b: its own (r[2 stride], from the detection), or with b.arms_now the
// point side a's arm reaches now
inline float3 other_arm(__global const float4 *r, int stride, SolveBody b)
{
    return b.arms_now ? r[stride].xyz + b.from_a : r[2 * stride].xyz;
}

inline SolveBody solve_body(int b, __global const float4 *body_velocity, __global const float4 *body_angular_velocity,
                            __global const float4 *body_orientation, __global const float *body_solve_count,
                            __global const float *body_quiet, float4 sleep)
{
    SolveBody s = {(float3)(0.0f), (float3)(0.0f), (float4)(0.0f, 0.0f, 0.0f, 1.0f), 0.0f, b, 0, (float3)(0.0f)};
    if (b < 0 || is_asleep(body_quiet[b], sleep)) return s;
    s.v = body_velocity[b].xyz;
    s.w = body_angular_velocity[b].xyz;
    s.q = body_orientation[b];
    s.count = fmax(body_solve_count[b], 1e-6f);
    return s;
}

// The inverse mass the body shows along u at arm, times its contacts' shares (0: static or asleep).
inline float split_inverse_mass(SolveBody s, float3 arm, float3 u, __global const float *body_mass,
                                __global const float *body_inv_inertia)
{
    if (s.count == 0.0f) return 0.0f;
    float3 c = cross(arm, u);
    return s.count * (1.0f / body_mass[s.body]
                      + dot(c, angular_velocity(s.q, body_inv_inertia + 9 * s.body, c)));
}

// The accumulated impulses (tangential xyz, normal) of the record at r (stride apart) after one
// solve or relax pass from the two sides' velocities now; a, b with their mass shares.
inline float4 solve_record_impulse(
    __global const float4 *r, int stride, SolveBody a, SolveBody b, float substep, float4 solve_constants,
    bool relax, __global const float *body_mass, __global const float *body_inv_inertia, float depth_shift,
    bool friction)
{
    float4 f0 = r[0], f1 = r[stride], f2 = r[2 * stride], lambda = r[3 * stride], f4 = r[4 * stride];
    int other = as_int(f0.w);
    float3 n = f0.xyz, arm_i = f1.xyz;
    // depth_shift: how much deeper the bodies' motion since the record's detection took it
    float depth = f1.w + depth_shift, share = f2.w;  // f4: friction, restitution, impact speed
    float3 arm_j = (other >= 0) ? other_arm(r, stride, b) : f2.xyz;
    float3 v_j = (other >= 0) ? b.v + cross(b.w, arm_j) : f2.xyz;
    float3 v_rel = a.v + cross(a.w, arm_i) - v_j;
    float vn = dot(v_rel, n);  // > 0: closing
    // closing at most what leaves the contact at the slop after the substep; a deeper one
    // pushed out no faster than the push-out speed (not while relaxing: it stops)
    float allowed = (solve_constants.x - depth) / substep;
    // restitution, faded in from half IMPACT_SPEED so no contact switches it on or off abruptly
    // (f4.w: the substeps the record has started since its detection, SUBSTEPS_PER_DETECTION > 1:
    // an impact parts once, in the substep of its detection, as each substep's detection would)
    // (with manifolds restitution is a pass of its own, 62_pair_solve.cl restitution_impulse)
    float bounce = (MANIFOLD_POINTS > 0 || f4.w > 1.5f) ? 0.0f : clamp(2.0f * f4.z / IMPACT_SPEED - 1.0f, 0.0f, 1.0f);
    // soft below the slop (solve_constants.w < 1): a load shared by a face's redundant contacts
    // settles as on stiff springs instead of cycling; an impact stays rigid, faded in with it
    float mass_scale = 1.0f, impulse_scale = 0.0f;
    if (!relax && allowed < 0.0f && solve_constants.w < 1.0f) {
        float soft = 1.0f - bounce;
        allowed = mix(allowed, -solve_constants.z * (depth - solve_constants.x), soft);
        mass_scale = 1.0f - soft * (1.0f - solve_constants.w);
        impulse_scale = 1.0f - mass_scale;
    }
    allowed = relax ? fmax(allowed, 0.0f) : fmax(allowed, -solve_constants.y);
    if (bounce > 0.0f) allowed = fmin(allowed, -bounce * f4.y * f4.z);
    float k_n = split_inverse_mass(a, arm_i, n, body_mass, body_inv_inertia)
              + ((other >= 0) ? split_inverse_mass(b, arm_j, n, body_mass, body_inv_inertia) : 0.0f);
    float normal = (impulse_scale == 0.0f)
                 ? fmax(lambda.w + share * (vn - allowed) / k_n, 0.0f)
                 : fmax(lambda.w + mass_scale * share * (vn - allowed) / k_n - impulse_scale * lambda.w, 0.0f);
    float3 tangential = lambda.xyz;
    if (!friction) return (float4)(tangential, normal);  // held at the manifold's centre (62)
    float3 v_t = v_rel - vn * n;
    float slip = length(v_t);
    if (slip > 1e-9f) {
        float3 t = v_t / slip;
        float k_t = split_inverse_mass(a, arm_i, t, body_mass, body_inv_inertia)
                  + ((other >= 0) ? split_inverse_mass(b, arm_j, t, body_mass, body_inv_inertia) : 0.0f);
        tangential -= share * v_t / k_t;
    }
    float limit = f4.x * normal;
    float held = length(tangential);
    if (held > limit) tangential *= (held > 0.0f) ? limit / held : 0.0f;
    return (float4)(tangential, normal);
}

// The impulses of particle i's records in one pass (warm: the ones they start with; relax: without
// the push-out), summed as (impulse, its moment about the body's centre) in solve_impulse /
// solve_angular_impulse; each record's accumulated impulses in it and in its friction slot.
inline void solve_particle_contacts(
    int i, int stride, float substep, float4 solve_constants, float4 sleep, bool warm, bool relax,
    __global const int *particle_body, __global const uchar *solve_count, __global float4 *solve_record,
    __global const float4 *body_velocity, __global const float4 *body_angular_velocity,
    __global const float4 *body_orientation, __global const float *body_mass, __global const float *body_inv_inertia,
    __global const float *body_solve_count, __global const float *body_quiet,
    __global float4 *solve_impulse, __global float4 *solve_angular_impulse, __global float4 *history_impulse_out)
{
    int count = solve_count[i];
    int body_i = particle_body[i];
    if (count == 0 || body_i == STATIC_BODY) return;
    SolveBody a = solve_body(body_i, body_velocity, body_angular_velocity, body_orientation, body_solve_count,
                             body_quiet, sleep);
    float3 impulse = (float3)(0.0f), moment = (float3)(0.0f);
    if (a.count > 0.0f) {
        for (int k = 0; k < count; ++k) {
            __global float4 *r = solve_record + k * SOLVE_FIELDS * stride + i;
            float4 f0 = r[0];
            int other = as_int(f0.w);
            // a sleeping body would take the hit as a wall (its contacts are not solved, so it gets
            // no impulse back): leave the contact to the springs until it wakes
            if (other == NO_RECORD || (other >= 0 && is_asleep(body_quiet[other], sleep))) continue;
            float3 n = f0.xyz, arm_i = r[stride].xyz;
            float4 lambda = r[3 * stride];
            if (warm) {
                float3 j = -lambda.w * n + lambda.xyz;
                impulse += j;
                moment += cross(arm_i, j);
                continue;
            }
            SolveBody b = solve_body(other, body_velocity, body_angular_velocity, body_orientation, body_solve_count,
                                     body_quiet, sleep);
            float4 next = solve_record_impulse(r, stride, a, b, substep, solve_constants, relax, body_mass,
                                               body_inv_inertia, 0.0f, true);
            float3 j = -(next.w - lambda.w) * n + (next.xyz - lambda.xyz);  // this pass's impulse on i
            r[3 * stride] = next;
            history_impulse_out[k * stride + i] = next;
            impulse += j;
            moment += cross(arm_i, j);
        }
    }
    solve_impulse[i] = (float4)(impulse, 0.0f);
    solve_angular_impulse[i] = (float4)(moment, 0.0f);
}

#define SOLVE_KERNEL_ARGUMENTS \
    particle_body, solve_count, solve_record, body_velocity, body_angular_velocity, body_orientation, body_mass, \
    body_inv_inertia, body_solve_count, body_quiet, solve_impulse, solve_angular_impulse, history_impulse_out

// A work-item per particle, each of the three kinds of pass (solve_particle_contacts).
__kernel void warm_start_contacts(
    const int particle_count,
    const int history_stride,
    const float substep,
    const float4 solve_constants,      // slop (m), push-out speed (m/s), bias rate (1/s), mass scale
    const float4 sleep,
    __global const int *particle_body,
    __global const uchar *solve_count,
    __global float4 *solve_record,
    __global const float4 *body_velocity,
    __global const float4 *body_angular_velocity,
    __global const float4 *body_orientation,
    __global const float *body_mass,
    __global const float *body_inv_inertia,
    __global const float *body_solve_count,
    __global const float *body_quiet,
    __global float4 *solve_impulse,
    __global float4 *solve_angular_impulse,
    __global float4 *history_impulse_out)
{
    int i = get_global_id(0);
    if (i < particle_count)
        solve_particle_contacts(i, history_stride, substep, solve_constants, sleep, true, false, SOLVE_KERNEL_ARGUMENTS);
}

__kernel void solve_contacts(
    const int particle_count,
    const int history_stride,
    const float substep,
    const float4 solve_constants,      // slop (m), push-out speed (m/s), bias rate (1/s), mass scale
    const float4 sleep,
    __global const int *particle_body,
    __global const uchar *solve_count,
    __global float4 *solve_record,
    __global const float4 *body_velocity,
    __global const float4 *body_angular_velocity,
    __global const float4 *body_orientation,
    __global const float *body_mass,
    __global const float *body_inv_inertia,
    __global const float *body_solve_count,
    __global const float *body_quiet,
    __global float4 *solve_impulse,
    __global float4 *solve_angular_impulse,
    __global float4 *history_impulse_out)
{
    int i = get_global_id(0);
    if (i < particle_count)
        solve_particle_contacts(i, history_stride, substep, solve_constants, sleep, false, false, SOLVE_KERNEL_ARGUMENTS);
}

__kernel void relax_contacts(
    const int particle_count,
    const int history_stride,
    const float substep,
    const float4 solve_constants,      // slop (m), push-out speed (m/s), bias rate (1/s), mass scale
    const float4 sleep,
    __global const int *particle_body,
    __global const uchar *solve_count,
    __global float4 *solve_record,
    __global const float4 *body_velocity,
    __global const float4 *body_angular_velocity,
    __global const float4 *body_orientation,
    __global const float *body_mass,
    __global const float *body_inv_inertia,
    __global const float *body_solve_count,
    __global const float *body_quiet,
    __global float4 *solve_impulse,
    __global float4 *solve_angular_impulse,
    __global float4 *history_impulse_out)
{
    int i = get_global_id(0);
    if (i < particle_count)
        solve_particle_contacts(i, history_stride, substep, solve_constants, sleep, false, true, SOLVE_KERNEL_ARGUMENTS);
}

// Body b's momenta and velocities changed by an impulse and its moment about the centre, and with
// move its pose too (as if the substep had run with the new velocities).
inline void change_body_momenta(
    int b, float3 impulse, float3 moment, float substep, bool move, __global const float *body_mass,
    __global const float *body_inv_inertia, __global float4 *body_position, __global float4 *body_orientation,
    __global float4 *body_momentum, __global float4 *body_angular_momentum, __global float4 *body_velocity,
    __global float4 *body_angular_velocity)
{
    if (all(impulse == 0.0f) && all(moment == 0.0f)) return;
    float mass = body_mass[b];
    float4 q = body_orientation[b];
    float3 P = body_momentum[b].xyz + impulse;
    float3 L = body_angular_momentum[b].xyz + moment;
    float3 v = P / mass;
    if (move) {
        float3 dw = angular_velocity(q, body_inv_inertia + 9 * b, L) - body_angular_velocity[b].xyz;
        body_position[b] += (float4)((v - body_velocity[b].xyz) * substep, 0.0f);
        float4 turned = q + quat_multiply((float4)(0.5f * substep * dw, 0.0f), q);
        q = turned * rsqrt(dot(turned, turned));
        body_orientation[b] = q;
    }
    body_momentum[b] = (float4)(P, 0.0f);
    body_angular_momentum[b] = (float4)(L, 0.0f);
    body_velocity[b] = (float4)(v, 0.0f);
    body_angular_velocity[b] = (float4)(angular_velocity(q, body_inv_inertia + 9 * b, L), 0.0f);
}

// The pass's impulses on body b's particles, summed in particle order, applied (change_body_momenta).
inline void apply_body_impulses(
    int b, float substep, float4 sleep, bool move, __global const int *body_first_particle,
    __global const int *body_particle_count, __global const uchar *solve_count, __global const float4 *solve_impulse,
    __global const float4 *solve_angular_impulse, __global const float *body_mass,
    __global const float *body_inv_inertia, __global const float *body_quiet, __global float4 *body_position,
    __global float4 *body_orientation, __global float4 *body_momentum, __global float4 *body_angular_momentum,
    __global float4 *body_velocity, __global float4 *body_angular_velocity)
{
    if (is_asleep(body_quiet[b], sleep)) return;
    float3 impulse = (float3)(0.0f), moment = (float3)(0.0f);
    int end = body_first_particle[b] + body_particle_count[b];
    for (int i = body_first_particle[b]; i < end; ++i) {
        if (solve_count[i] == 0) continue;
        impulse += solve_impulse[i].xyz;
        moment += solve_angular_impulse[i].xyz;
    }
    change_body_momenta(b, impulse, moment, substep, move, body_mass, body_inv_inertia, body_position,
                        body_orientation, body_momentum, body_angular_momentum, body_velocity, body_angular_velocity);
}

#define APPLY_KERNEL_ARGUMENTS \
    body_first_particle, body_particle_count, solve_count, solve_impulse, solve_angular_impulse, body_mass, \
    body_inv_inertia, body_quiet, body_position, body_orientation, body_momentum, body_angular_momentum, \
    body_velocity, body_angular_velocity

// A work-item per body: after a warm start or a solve pass (moving), after a relax pass (not).
__kernel void apply_solve_impulses(
    const int body_count,
    const float substep,
    const float4 sleep,
    __global const int *body_first_particle,
    __global const int *body_particle_count,
    __global const uchar *solve_count,
    __global const float4 *solve_impulse,
    __global const float4 *solve_angular_impulse,
    __global const float *body_mass,
    __global const float *body_inv_inertia,
    __global const float *body_quiet,
    __global float4 *body_position,
    __global float4 *body_orientation,
    __global float4 *body_momentum,
    __global float4 *body_angular_momentum,
    __global float4 *body_velocity,
    __global float4 *body_angular_velocity)
{
    int b = get_global_id(0);
    if (b < body_count) apply_body_impulses(b, substep, sleep, true, APPLY_KERNEL_ARGUMENTS);
}

__kernel void apply_relax_impulses(
    const int body_count,
    const float substep,
    const float4 sleep,
    __global const int *body_first_particle,
    __global const int *body_particle_count,
    __global const uchar *solve_count,
    __global const float4 *solve_impulse,
    __global const float4 *solve_angular_impulse,
    __global const float *body_mass,
    __global const float *body_inv_inertia,
    __global const float *body_quiet,
    __global float4 *body_position,
    __global float4 *body_orientation,
    __global float4 *body_momentum,
    __global float4 *body_angular_momentum,
    __global float4 *body_velocity,
    __global float4 *body_angular_velocity)
{
    int b = get_global_id(0);
    if (b < body_count) apply_body_impulses(b, substep, sleep, false, APPLY_KERNEL_ARGUMENTS);
}
