// Stage 40, contacts (seed step 2): a work-item per particle in bucket order, so neighbouring
// work-items search the same cells; writes the particle's force and torque about its body's centre.
//
// Neighbour lists (Verlet lists with a skin): the grid's cells are a particle diameter plus a skin
// wide, and the grid (10_grid.cl) and every particle's list of other bodies' particles within that
// reach are rebuilt only in substeps whose `rebuild` flag is set. The body kernel (50_bodies.cl)
// sets the next substep's flag once some body's particles may have moved by more than 0.45 of the
// skin (a little under half, for rounding) since the last rebuild, so a pair missing from the
// lists cannot have come within contact distance (each of the two moved by less than half the skin).

// How particle_contacts finds other bodies' particles: the grid in bucket order (10_grid.cl) and
// the neighbour lists
typedef struct {
    float inv_cell;
    int4 grid_bits;
    __global const uint *scan_local;
    __global const uint *group_offset;
    __global const float4 *sorted_position;  // .w: body index bits
    float neighbour_reach2;                  // (diameter + skin)^2: what a neighbour list holds
    __global int *neighbour_count;           // per bucket slot; NEIGHBOUR_SLOTS + 1: overflowed
    __global int *neighbour_list;            // slot-major: entry l of bucket slot s at l * particle_count + s
    // the joints (65_joints.cl): bodies an intact joint with disable_collisions joins have no contacts
    __global const int2 *body_joint_range;   // per body: its first entry in body_joint_list, and its count
    __global const int *body_joint_list;
    __global const int2 *joint_body;
    __global const int *joint_state;
} NeighbourSearch;

// Whether an intact joint with disable_collisions joins bodies a and b (Bullet's
// checkCollideWithOverride): their particles are left out of the search and so of the lists, which
// a joint's breaking (or a change of its enabled) has rebuilt at the next detection
inline bool joined_without_contacts(int a, int b, NeighbourSearch search)
{
    int2 range = search.body_joint_range[a];
    for (int k = range.x; k < range.x + range.y; ++k) {
        int j = search.body_joint_list[k];
        int state = search.joint_state[j];
        if (!joint_active(state) || !(state & JOINT_NO_COLLISIONS)) continue;
        int2 bodies = search.joint_body[j];
        if (bodies.x == b || bodies.y == b) return true;
    }
    return false;
}

// The contact of particle i (own) with the particle in bucket slot k (another body's, at p_j,
// delta = p_j - own.p, dist2 = |delta|^2 within the pair reach): two whole voxels meet as boxes
// (34_voxel_pairs.cl), anything else as spheres (32_sphere_pairs.cl).
inline void particle_pair_contact(int k, float3 p_j, float3 delta, float dist2, int body_j, ContactParticle own,
                                  PairInputs pairs, FrictionHistory *history, ContactSums *sums)
{
    float dist = sqrt(dist2);
    if (dist <= 1e-9f * pairs.cc.radius) return;
    int j = pairs.sorted_particle[k];
#if RIGID_VOXELS
    if (body_j != STATIC_BODY && pairs.particle_corner_reach[own.i] >= WHOLE_VOXEL_REACH
        && pairs.particle_corner_reach[j] >= WHOLE_VOXEL_REACH) {
        // the solve reads a voxel pair's record on the lower body's side only (61_pair_colouring.cl
        // record_pair): the higher body leaves the pair to the lower one, unless that one sleeps
        // (this side then computes it, to wake it), and the pair's test runs once instead of twice
        if (own.body > body_j && !is_asleep(pairs.body_quiet[body_j], pairs.sleep)) return;
        // (a sleeper this side records is woken by the record, compute_contacts' woken_pass)
        voxel_pair_contact(j, p_j - delta, p_j, body_j, own, pairs, history, sums);
        return;
    }
#endif
    sphere_pair_contact(j, p_j, delta, dist, body_j, own, pairs, history, sums);
}

// All contacts of particle i (bucket slot s, body b, world offset r from the body's centre,
// velocity v_i) with other bodies' particles, planes and triangles. Adds the force and the torque
// about the body's centre of mass.
// Other bodies' particles come from the neighbour list of slot s, or from a search of the 27
// cells around the particle: in a rebuild substep (which also writes the list) and, until the
// next rebuild, for a particle whose list overflowed (more than NEIGHBOUR_SLOTS within reach).
// The search is right between rebuilds too: a particle within a diameter of p_i now was within a
// diameter plus half the skin of it at the rebuild, i.e. less than a cell away.
// with_contacts false (a sleeping body nothing touched): only the list is rebuilt.
inline void particle_contacts(ContactParticle own, PairInputs pairs, NeighbourSearch search, Colliders colliders,
                              bool rebuild, bool with_contacts, FrictionHistory *history, __global uchar *solve_count,
                              float3 *body_force, float3 *body_torque, float *contact_count)
{
#if RIGID_VOXELS
    float pair_reach2 = VOXEL_PAIR_REACH2;  // whole voxels touch corner to corner 2 sqrt(3) r apart
#else
    float diameter = 2.0f * pairs.cc.radius;
    float pair_reach2 = diameter * diameter;
#endif
    int stride = history->stride;
    ContactSums sums;
    sums.force = sums.torque = (float3)(0.0f);
    sums.count_adjust = 0.0f;  // voxel pairs count for their share (voxel_pair_contact)
    __global int *neighbour = search.neighbour_list + own.s;

    int listed = search.neighbour_count[own.s];
    if (rebuild || listed > NEIGHBOUR_SLOTS) {
        listed = 0;
        int3 c = cell_of(own.p, search.inv_cell);
        // x is the lowest field of the bucket index, so the three cells of a row (dx = -1, 0, 1)
        // are three consecutive buckets, i.e. one run of slots, unless the row wraps around the table
        uint x_mask = (1u << search.grid_bits.x) - 1u;
        uint x_low = (uint)(c.x - 1) & x_mask;
        // what a candidate is needed within: the list's reach in a rebuild, else the pair's
        float search_reach2 = rebuild ? fmax(search.neighbour_reach2, pair_reach2) : pair_reach2;
        bool row_is_contiguous = x_low + 2u <= x_mask;
        for (int dz = -1; dz <= 1; ++dz)
        for (int dy = -1; dy <= 1; ++dy)
        for (int dx = -1; dx <= 1; ++dx) {
            uint begin, end;
            if (row_is_contiguous) {
                if (dx != -1) continue;
                uint h = bucket_of(c + (int3)(-1, dy, dz), search.grid_bits);
                begin = bucket_begin(h, search.scan_local, search.group_offset);
                end = bucket_begin(h + 3, search.scan_local, search.group_offset);
            } else {
                uint h = bucket_of(c + (int3)(dx, dy, dz), search.grid_bits);
                begin = bucket_begin(h, search.scan_local, search.group_offset);
                end = bucket_begin(h + 1, search.scan_local, search.group_offset);
            }
            for (uint k = begin; k < end; ++k) {
                float4 other = search.sorted_position[k];
                int body_j = as_int(other.w);
                if (body_j == own.body) continue;  // same rigid body (also skips j == i)
                float3 delta = other.xyz - own.p;
                float dist2 = dot(delta, delta);
                if (dist2 >= search_reach2) continue;
#if JOINT_COUNT > 0
                // after the distance: most candidates are out of reach, and this walks the body's joints
                if (body_j != STATIC_BODY && joined_without_contacts(own.body, body_j, search)) continue;
#endif
                if (rebuild && dist2 < search.neighbour_reach2) {
                    if (listed < NEIGHBOUR_SLOTS) neighbour[listed * stride] = (int)k;
                    ++listed;
                }
                if (dist2 >= pair_reach2 || !with_contacts) continue;
                particle_pair_contact((int)k, other.xyz, delta, dist2, body_j, own, pairs, history, &sums);
            }
        }
        // more than NEIGHBOUR_SLOTS: this particle searches every substep until the next rebuild
        if (rebuild) search.neighbour_count[own.s] = min(listed, NEIGHBOUR_SLOTS + 1);
    } else if (with_contacts) {
        for (int l = 0; l < listed; ++l) {
            int k = neighbour[l * stride];
            float4 other = search.sorted_position[k];
            float3 delta = other.xyz - own.p;
            float dist2 = dot(delta, delta);
            if (dist2 >= pair_reach2) continue;
            particle_pair_contact(k, other.xyz, delta, dist2, as_int(other.w), own, pairs, history, &sums);
        }
    }
    if (!with_contacts) return;
    collider_contacts(own.i, own.body, own.p, own.v, own.w, own.mass, own.material, pairs.cc, colliders,
                      pairs.pair_damping_ratio, pairs.pair_friction, pairs.pair_rolling, history->old_key,
                      history->old_xi, stride, history->new_key, history->new_xi, &history->slots,
                      pairs.particle_corner_reach, pairs.particle_support_sphere, pairs.body_orientation,
                      pairs.body_lattice, own.r, history->records, &sums.force, &sums.torque);
    int used = history->slots.used;
    if (used < FRICTION_SLOTS) history->new_key[used * stride] = EMPTY_SLOT;
    // contacts beyond FRICTION_SLOTS are not counted
    *contact_count = (float)used + sums.count_adjust;
#if RIGID_VOXELS
    *solve_count = (uchar)used;
#endif
    *body_force += sums.force;
    // torque about the body's centre of mass (eq. 5.22 plus the contacts' own couples)
    *body_torque += cross(own.r, sums.force) + sums.torque;
}

// A work-item per particle in bucket order. (A layout with a body's particles on neighbouring
// work-items and the integration in the same kernel, which saves the force buffers, measured
// slower on the H100 and on PoCL.)
__kernel void compute_contacts(
    const int particle_count,
    const int plane_count,
    const float inv_cell,
    const int4 grid_bits,
    const float4 contact_constants,    // stiffness, tangential stiffness, substep, radius
    __global const uint *scan_local,
    __global const uint *group_offset,
    __global const float4 *sorted_position,      // .w: body index bits
    __global const int *sorted_particle,
    __global const int *particle_material,
    __global const float2 *body_contact_mass,
    __global const float4 *plane_point,
    __global const float4 *plane_normal,
    __global const int *plane_material,
    __global const float *pair_damping_ratio,
    __global const float *pair_friction,
    __global const float *pair_rolling,
    const int large_triangle_count,
    const float triangle_inv_cell,
    const uint triangle_mask,
    const float collider_tau,
    __global const int4 *triangle_vertices,
    __global const float4 *collider_vertex,
    __global const float4 *collider_velocity,
    __global const int *large_triangles,
    __global const uint *triangle_bucket_start,
    __global const int *triangle_items,
    __global const float4 *triangle_bounds,
    const int history_stride,
    __global const int *history_key_in,
    __global const float4 *history_xi_in,
    __global int *history_key_out,
    __global float4 *history_xi_out,
    __global const float4 *body_position,
    __global float4 *particle_force,
    __global float4 *particle_torque,
    const float4 sleep,
    __global const int *body_touched_in,
    __global int *body_touched_out,
    __global const int *rebuild,
    const float neighbour_reach2,      // (diameter + skin)^2: what a neighbour list holds
    __global int *neighbour_count,     // per bucket slot; NEIGHBOUR_SLOTS + 1: overflowed
    __global int *neighbour_list,      // slot-major: entry l of bucket slot s at l * particle_count + s
    __global const float4 *body_velocity,
    __global const float4 *body_angular_velocity,
    __global const float *body_quiet,
    __global uchar *particle_has_force,  // 0: force and torque not written (no contact), read as zero
    __global const float *particle_corner_reach,
    __global const float4 *particle_support_sphere,  // per particle: support sphere (Model.particle_support_sphere)
    __global const float4 *body_orientation,
    __global const float4 *body_lattice,     // voxel lattice axes in the body frame
    __global const uchar *particle_faces,    // exposed voxel faces (RIGID_VOXELS; see Voxels)
    __global float4 *solve_record,           // contact records for the velocity solve (RIGID_VOXELS)
    __global uchar *solve_count,             // records per particle
    __global const float4 *history_impulse_in,   // per friction slot: the contact's impulses (warm start)
    __global float4 *history_impulse_out,
    __global const float *pair_restitution,
    __global int *body_reached,              // RIGID_VOXELS: the pass whose contacts a sleeper computes, 0: none
    const int woken_pass,                    // k > 0: only the sleepers reached for pass k, lists not rebuilt
    __global const int2 *body_joint_range,   // the joints (NeighbourSearch)
    __global const int *body_joint_list,
    __global const int2 *joint_body,
    __global const int *joint_state)
{
    int s = get_global_id(0);
    if (s >= particle_count) return;
    float4 placed = sorted_position[s];
    int body_i = as_int(placed.w);
    if (body_i == STATIC_BODY) return;
#if RIGID_VOXELS
    // Rigid Voxels wake a sleeper before the step of its impact (Box2D wakes a touched island in
    // the collide phase, before the step's solve): the awake bodies' contacts (woken_pass 0) mark
    // every sleeper their records reach for pass 1 (below), pass k computes the contacts of the
    // sleepers marked k and marks those their records reach for k + 1, up to WAKE_PASSES, and
    // integrate_bodies wakes every marked one, so they take the step's solve awake rather than
    // holding like static ground for it. A body marked during a pass is not the pass's (its mark is
    // 0 or the next pass's whichever a work-item reads): the same result in any order.
    if (woken_pass && !(is_asleep(body_quiet[body_i], sleep) && body_reached[body_i] == woken_pass)) return;
#endif
    bool rebuilding = *rebuild != 0 && !woken_pass;
    ContactConstants cc = {contact_constants.x, contact_constants.y, contact_constants.z, contact_constants.w};
    int i = sorted_particle[s];
    Colliders colliders = {plane_count, plane_point, plane_normal, plane_material, large_triangle_count,
                           triangle_inv_cell, triangle_mask, collider_tau, triangle_vertices, collider_vertex,
                           collider_velocity, large_triangles, triangle_bucket_start, triangle_items,
                           triangle_bounds};
    PairInputs pairs = {cc, sorted_particle, particle_material, body_contact_mass, body_position, body_velocity,
                        body_angular_velocity, body_quiet, sleep, pair_damping_ratio, pair_friction, pair_rolling,
                        body_touched_out, particle_corner_reach, particle_support_sphere, particle_faces,
                        body_orientation, body_lattice};
    NeighbourSearch search = {inv_cell, grid_bits, scan_local, group_offset, sorted_position, neighbour_reach2,
                              neighbour_count, neighbour_list, body_joint_range, body_joint_list, joint_body,
                              joint_state};
    ContactParticle own;
    own.i = i;
    own.s = s;
    own.body = body_i;
    own.p = placed.xyz;
    own.asleep = is_asleep(body_quiet[body_i], sleep);
    own.r = placed.xyz - body_position[body_i].xyz;
    own.w = body_angular_velocity[body_i].xyz;
    own.v = body_velocity[body_i].xyz + cross(own.w, own.r);
    float3 force = (float3)(0.0f);
    float3 torque = (float3)(0.0f);
    float contact_count = 0.0f;
#if RIGID_VOXELS
    solve_count[i] = 0;
#endif
    bool with_contacts = woken_pass || !(own.asleep && sleep.w > 0.0f && !body_touched_in[body_i]);
    if (!with_contacts) {
        // a sleeping body nothing awake touched: no contacts to compute (what makes settled
        // piles cheap); its friction springs carry over unchanged
        for (int k = 0; k < FRICTION_SLOTS; ++k) {
            int key = history_key_in[k * history_stride + i];
            history_key_out[k * history_stride + i] = key;
            if (key == EMPTY_SLOT) break;
            history_xi_out[k * history_stride + i] = history_xi_in[k * history_stride + i];
#if RIGID_VOXELS
            history_impulse_out[k * history_stride + i] = history_impulse_in[k * history_stride + i];
#endif
        }
    }
    if (with_contacts || rebuilding) {
        own.mass = body_contact_mass[body_i];
        own.material = particle_material[i];
        FrictionHistory history;
        for (int k = 0; k < FRICTION_SLOTS; ++k) {
            history.old_key[k] = history_key_in[i + k * history_stride];
            if (history.old_key[k] == EMPTY_SLOT) break;
        }
        history.old_xi = history_xi_in + i;
        history.new_key = history_key_out + i;
        history.new_xi = history_xi_out + i;
        history.stride = history_stride;
        history.slots.used = 0;
        SolveRecords records = {solve_record + i, history_impulse_in + i, history_impulse_out + i, pair_restitution};
        history.records = records;
        particle_contacts(own, pairs, search, colliders, rebuilding, with_contacts, &history, solve_count + i, &force,
                          &torque, &contact_count);
    }
#if RIGID_VOXELS
    // the solve alone holds the contacts (ContactGeometry.springs False): their records stay
    force = (float3)(0.0f);
    torque = (float3)(0.0f);
    if ((woken_pass || !own.asleep) && woken_pass < WAKE_PASSES && sleep.x > 0.0f) {
        // every writer stores the same mark, on an unmarked sleeper only
        for (int k = 0; k < solve_count[i]; ++k) {
            int other = as_int(solve_record[k * SOLVE_FIELDS * history_stride + i].w);
            if (other >= 0 && is_asleep(body_quiet[other], sleep) && body_reached[other] == 0)
                body_reached[other] = woken_pass + 1;
        }
    }
#endif
    // most particles touch nothing (free fall, a pile's inside): a byte instead of 32
    bool has_force = contact_count > 0 || any(force != 0.0f) || any(torque != 0.0f);
    particle_has_force[i] = has_force;
    if (has_force) {
        particle_force[i] = (float4)(force, contact_count);  // .w: contacts, for the body
        particle_torque[i] = (float4)(torque, 0.0f);
    }
}
