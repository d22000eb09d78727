// Stage 50, bodies (seed steps 3-4): per body the sum of its particles' forces and torques
// (eq. 5.21-5.22), then momenta and pose, sleeping, and the neighbour lists' rebuild flag.
// BODY_LANES work-items share a body and add their sums in a fixed tree order, so results stay
// deterministic; BODY_LANES = 1 (CPUs) makes one work-item do a whole body.
#define BODIES_PER_GROUP (BODY_GROUP_SIZE / BODY_LANES)

typedef struct {
    __global const float *body_mass;
    __global const float *body_inv_inertia;        // 9 per body, body frame, row-major
    __global const float2 *body_damping;           // per body: (linear, angular) fraction lost per second
    __global const float *body_extent;             // centre of mass to farthest particle surface
    __global float *body_quiet;                    // how long the body has been still (sleep.y: asleep)
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

// touched: whether the body's contacts were computed although it sleeps (see compute_contacts;
// Rigid Voxels: an awake body's records reached it at this detection)
inline void integrate_body(int b, float3 force, float3 torque, float substep, float3 gravity,
                           float terminal_speed, float4 sleep, bool touched, bool rebuild,
                           float rebuild_distance, __global int *next_rebuild, BodyArrays body)
{
    float3 x = body.body_position[b].xyz;
    float4 q = body.body_orientation[b];
    if (rebuild) {  // this substep's grid and lists were built from this pose
        body.build_position[b] = (float4)(x, 0.0f);
        body.build_orientation[b] = q;
    }
    float mass = body.body_mass[b];
    if (isinf(mass)) {
        // kinematic (core/kinematic.py; the host gives it an infinite mass while its animation moves it):
        // along its path at the velocity and spin the host set for the frame, a straight line and a
        // constant-axis turn; no force, gravity, damping or sleeping
        float3 w = body.body_angular_velocity[b].xyz;
        float angle = length(w) * substep;
        float4 turn = (angle > 0.0f) ? (float4)(w / length(w) * sin(0.5f * angle), cos(0.5f * angle))
                                     : (float4)(0.0f, 0.0f, 0.0f, 1.0f);
        x += body.body_velocity[b].xyz * substep;
        q = normalize(quat_multiply(turn, q));
        body.body_position[b] = (float4)(x, 0.0f);
        body.body_orientation[b] = q;
        float4 turned = quat_multiply(q, quat_conjugate(body.build_orientation[b]));
        if (length(x - body.build_position[b].xyz) + 2.0f * length(turned.xyz) * body.body_extent[b] > rebuild_distance)
            *next_rebuild = 1;
        return;
    }
    __global const float *inv_inertia = body.body_inv_inertia + 9 * b;
    force += mass * gravity;

    float extent = body.body_extent[b];
    float quiet = body.body_quiet[b];
#if RIGID_VOXELS
    // sleeping with the solve (63_islands.cl): gravity is a body's only force, so stillness is read
    // from the velocities the last substep's solve left; quiet counts still substeps up to one
    // short of sleep.y, and the body's island puts it to sleep. A sleeper stays put until an awake
    // body's records reach it, or a woken partner's (touched: 40_contacts.cl woken_pass); it then
    // counts from 0, as Box2D's woken island does.
    if (is_asleep(quiet, sleep)) {
        if (!touched) return;
        quiet = 0.0f;
    } else if (sleep.x > 0.0f) {
        float speed = length(body.body_velocity[b].xyz) + length(body.body_angular_velocity[b].xyz) * extent;
        quiet = (speed < sleep.x) ? fmin(quiet + 1.0f, sleep.y - 1.0f) : 0.0f;
    }
    body.body_quiet[b] = quiet;
#else
    // sleeping: a still body stays put until it is accelerated (hit, or its support moved away)
    float acceleration = length(force) / mass + length(angular_velocity(q, inv_inertia, torque)) * extent;
    bool accelerated = acceleration >= sleep.z;
    if (is_asleep(quiet, sleep)) {
        bool contacts_skipped = sleep.w > 0.0f && !touched;
        if (contacts_skipped || !accelerated) {
            stop_body(b, body);
            return;
        }
        quiet = 0.0f;
    }
#endif

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

    q = rotation_step(q, inv_inertia, L, substep);
    float3 w = angular_velocity(q, inv_inertia, L);
    body.body_position[b] = (float4)(x, 0.0f);
    body.body_orientation[b] = q;
    // the farthest any of its particles has moved since the rebuild: the centre's displacement
    // plus the rotation's chord, 2 sin(angle / 2) |r| = 2 |vector part of q q_build^-1| |r|
    float4 turn = quat_multiply(q, quat_conjugate(body.build_orientation[b]));
    float moved = length(x - body.build_position[b].xyz) + 2.0f * length(turn.xyz) * extent;
    if (moved > rebuild_distance) *next_rebuild = 1;  // every writer stores the same value
#if !RIGID_VOXELS
    bool still = sleep.x > 0.0f && !accelerated && length(v) + length(w) * extent < sleep.x;
    quiet = still ? quiet + substep : 0.0f;
    body.body_quiet[b] = quiet;
    if (is_asleep(quiet, sleep)) {
        stop_body(b, body);  // falls asleep now
        return;
    }
#endif
    body.body_momentum[b] = (float4)(P, 0.0f);
    body.body_angular_momentum[b] = (float4)(L, 0.0f);
    body.body_velocity[b] = (float4)(v, 0.0f);
    body.body_angular_velocity[b] = (float4)(w, 0.0f);
}

__kernel __attribute__((reqd_work_group_size(BODY_GROUP_SIZE, 1, 1)))
void integrate_bodies(
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
    __global const int *rebuild,
    __global int *next_rebuild,
    const float rebuild_distance,      // 0.45 skin: a little under half, for rounding
    __global float2 *body_contact_mass,  // .y written: mass per contact of this substep
    __global float4 *start_position,     // written: the pose at the substep's start (SUBSTEPS_PER_DETECTION > 1)
    __global float4 *start_orientation,
    __global const float4 *detect_position,
    __global const float4 *detect_orientation,
    __global int *body_reached,          // read and cleared: a sleeper an awake body's records reached
    __global int *awake_bodies)          // set: some body was awake in this detection (cleared by gather_particles)
{
    int lid = get_local_id(0);
    int lane = lid % BODY_LANES;
    int b = get_group_id(0) * BODIES_PER_GROUP + lid / BODY_LANES;
    float4 force = (float4)(0.0f);  // .w: contacts
    float4 torque = (float4)(0.0f);
    if (b < body_count) {
        int end = body_first_particle[b] + body_particle_count[b];
        for (int i = body_first_particle[b] + lane; i < end; i += BODY_LANES) {
            if (!particle_has_force[i]) continue;
            force += particle_force[i];
            torque += particle_torque[i];
        }
    }
#if BODY_LANES > 1
    // sum over the BODY_LANES lanes of each body in the work-group, in a fixed order
    __local float4 sum_force[BODY_GROUP_SIZE];
    __local float4 sum_torque[BODY_GROUP_SIZE];
    sum_force[lid] = force;
    sum_torque[lid] = torque;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int stride = BODY_LANES / 2; stride > 0; stride >>= 1) {
        if (lane < stride) {
            sum_force[lid] += sum_force[lid + stride];
            sum_torque[lid] += sum_torque[lid + stride];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    force = sum_force[lid];
    torque = sum_torque[lid];
#endif
    if (lane != 0 || b >= body_count) return;
#if SUBSTEPS_PER_DETECTION > 1 || JOINT_COUNT > 0
    // the joints' warm and solve passes read the substep's starting pose too (65_joints.cl)
    start_position[b] = body_position[b];
    start_orientation[b] = body_orientation[b];
#endif
#if SUBSTEPS_PER_DETECTION > 1
    // the lists were built at the step's detection, from its pose: every substep of a step that
    // rebuilt them says so (*rebuild), and the motion since counts from the detection's pose
    if (*rebuild) {
        build_position[b] = detect_position[b];
        build_orientation[b] = detect_orientation[b];
    }
    bool rebuilt_here = false;
#else
    bool rebuilt_here = *rebuild != 0;
#endif
    float2 contact = body_contact_mass[b];
    contact.y = fmin(contact.x, body_mass[b] / fmax(force.w, 1.0f));
    body_contact_mass[b] = contact;
    BodyArrays body = {body_mass, body_inv_inertia, body_damping, body_extent, body_quiet, body_position,
                       body_orientation, body_momentum, body_angular_momentum, body_velocity,
                       body_angular_velocity, build_position, build_orientation};
    bool touched = body_touched_in[b] != 0;
    body_touched_in[b] = 0;
#if RIGID_VOXELS
    touched = body_reached[b] != 0;  // (40_contacts.cl woken_pass)
    body_reached[b] = 0;
#endif
    integrate_body(b, force.xyz, torque.xyz, substep, gravity.xyz, terminal_speed, sleep, touched, rebuilt_here,
                   rebuild_distance, next_rebuild, body);
#if RIGID_VOXELS
    // a detection whose substeps found every body asleep changed nothing: the host skips the
    // substeps after it until something moves (OpenCLEngine.step)
    if (!is_asleep(body_quiet[b], sleep)) *awake_bodies = 1;  // every writer stores the same value
#endif
}
