// Stage 63, islands (Rigid Voxels' sleeping; Box2D v3 puts islands to sleep, bodies joined by
// touching contacts, once all of them have been still for b2_timeToSleep). Without island lists:
// at each detection, after the solve, every body pair the detection listed lowers both bodies'
// still-substep counts (body_quiet, which integrate_bodies counts up to one short of sleep.y) to
// the lesser of the two as listed (body_quiet_snapshot), so a count travels one pair further
// each detection and a still island's bodies reach the top together; then every body at the top
// sleeps. A sleeper holds like a static side (62_pair_solve.cl) and computes no contacts
// (40_contacts.cl) until an awake body's records reach it (Box2D: a contact that begins touching
// with an awake body wakes the island in the same step's collide phase): it then computes its
// contacts in the same detection (compute_contacts' woken_pass) and integrate_bodies wakes it
// before the solve, and its own sleeping partners in turn at the next detection, so an island wakes
// as a whole, a pair further each detection; while the wake travels a woken body rests on a
// sleeper as on static ground.
// Atomic minima and flags every writer sets alike: the same result in any order.

__kernel void spread_island_quiet(
    const int body_count,
    const int max_pairs,
    const float4 sleep,
    __global const int *pair_other,
    __global const int *pair_count,
    __global const float *body_quiet_snapshot,
    __global float *body_quiet,
    __global const int2 *body_joint_range,   // the joints (65_joints.cl)
    __global const int *body_joint_list,
    __global const int2 *joint_body,
    __global const int *joint_state)
{
    int b = get_global_id(0);
    if (b >= body_count) return;
    float own = body_quiet_snapshot[b];  // an awake body: a sleeper lists no pairs
    // counts are >= 0, so their bits order as integers do
    __global int *quiet_bits = (__global int *)body_quiet;
    for (int p = 0; p < pair_count[b]; ++p) {
        int c = pair_other[b * max_pairs + p];
        if (c < 0) continue;  // static geometry joins no island
        float theirs = body_quiet_snapshot[c];
        if (is_asleep(theirs, sleep)) continue;  // woken when an awake body's records reach it
        atomic_min(quiet_bits + b, as_int(theirs));
        atomic_min(quiet_bits + c, as_int(own));
    }
#if JOINT_COUNT > 0
    // joined bodies too, each lowering its own count to the other's (a sleeper joined to an awake
    // body was woken before the passes, wake_joined_sleepers)
    int2 range = body_joint_range[b];
    for (int k = range.x; k < range.x + range.y; ++k) {
        int j = body_joint_list[k];
        if (!joint_active(joint_state[j])) continue;
        int2 bodies = joint_body[j];
        int other = bodies.x == b ? bodies.y : bodies.x;
        if (other == STATIC_BODY) continue;
        float theirs = body_quiet_snapshot[other];
        if (!is_asleep(theirs, sleep)) atomic_min(quiet_bits + b, as_int(theirs));
    }
#endif
}

__kernel void settle_islands(
    const int body_count,
    const float4 sleep,
    __global float *body_quiet,
    __global float4 *body_momentum,
    __global float4 *body_angular_momentum,
    __global float4 *body_velocity,
    __global float4 *body_angular_velocity)
{
    int b = get_global_id(0);
    if (b >= body_count) return;
    float quiet = body_quiet[b];
    if (is_asleep(quiet, sleep) || quiet < sleep.y - 1.0f) return;
    body_quiet[b] = sleep.y;  // falls asleep now, with its whole island
    body_momentum[b] = body_angular_momentum[b] = body_velocity[b] = body_angular_velocity[b] = (float4)(0.0f);
}
