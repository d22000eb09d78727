// Stage 40, contacts (seed step 2): a work-item per particle in bucket order, so neighbouring
// work-items search the same cells; writes the particle's force and torque about its body's centre.
//
// Neighbour lists (Verlet lists with a skin): the grid's cells are a particle diameter plus a skin
// wide, and the grid (10_grid.cl) and every particle's list of other bodies' particles within that
// reach are rebuilt only in substeps whose `rebuild` flag is set. The body kernel (50_bodies.cl)
// sets the next substep's flag once some body's particles may have moved by more than 0.45 of the
// skin (a little under half, for rounding) since the last rebuild, so a pair missing from the
// lists cannot have come within contact distance (each of the two moved by less than half the skin).

// What the contact kernel reads about a neighbour besides its bucket-ordered position.
typedef struct {
    __global const int *sorted_particle;       // bucket slot -> particle index (the friction key)
    __global const int *particle_material;
    __global const float4 *body_position;
    __global const float4 *body_velocity;
    __global const float4 *body_angular_velocity;
    __global const float *body_quiet;
    float4 sleep;
} NeighbourState;

// The contact of particle i with the particle in bucket slot k (another body's), if they overlap.
inline void particle_pair_contact(
    int k, float3 p_j, float3 delta, float dist2, int body_j, int body_i, float3 v_i, float3 w_i, float2 mass_i,
    int mat_i, bool asleep_i, ContactConstants cc, NeighbourState ns,
    __global const float2 *body_contact_mass, __global const float *pair_damping_ratio,
    __global const float *pair_friction, __global const float *pair_rolling,
    const int *old_key, __global const float4 *old_xi, const int stride,
    __global int *new_key, __global float4 *new_xi, int *slots_used, __global int *body_touched_out,
    float3 *force, float3 *torque)
{
    float dist = sqrt(dist2);
    if (dist <= 1e-9f * cc.radius) return;
    float3 n = delta / dist;
    int j = ns.sorted_particle[k];
    float3 v_j = (float3)(0.0f), w_j = (float3)(0.0f);
    if (body_j != STATIC_BODY) {
        w_j = ns.body_angular_velocity[body_j].xyz;
        v_j = ns.body_velocity[body_j].xyz + cross(w_j, p_j - ns.body_position[body_j].xyz);
        // an awake body touching a sleeping one makes it compute its contacts next substep
        if (!asleep_i && is_asleep(ns.body_quiet[body_j], ns.sleep)) body_touched_out[body_j] = 1;
    }
    // both sides act at the one point halfway between the centres, so the pair's forces are equal,
    // opposite and on one line: with friction the pair then keeps its angular momentum (at r n from
    // each centre the two points lie the overlap apart and the friction forces make a couple)
    add_contact(cc, j, n, 0.5f * dist * n, 2.0f * cc.radius - dist, v_i, w_i, v_j, w_j,
                mass_i, contact_mass(body_j, body_contact_mass), mat_i, ns.particle_material[j],
                pair_damping_ratio, pair_friction, pair_rolling, old_key, old_xi, stride,
                new_key, new_xi, slots_used, force, torque);
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
inline void particle_contacts(
    int s, int i, int body_i, float3 p_i, float3 r_i, float3 v_i, float3 w_i, float2 mass_i, int mat_i,
    ContactConstants cc, const float inv_cell, const int4 grid_bits,
    __global const uint *scan_local, __global const uint *group_offset,
    __global const float4 *sorted_position, NeighbourState ns, __global const float2 *body_contact_mass,
    Colliders colliders,
    __global const float *pair_damping_ratio, __global const float *pair_friction, __global const float *pair_rolling,
    const int stride, __global const int *history_key_in, __global const float4 *history_xi_in,
    __global int *history_key_out, __global float4 *history_xi_out,
    bool rebuild, bool with_contacts, float reach2, __global int *neighbour_count, __global int *neighbour,
    bool asleep_i, __global int *body_touched_out,
    __global const float *particle_corner_reach, __global const float4 *body_orientation,
    __global const float4 *body_lattice,
    float3 *body_force, float3 *body_torque, int *contact_count)
{
    float diameter = 2.0f * cc.radius;
    float diameter2 = diameter * diameter;
    // keys in private memory, springs read from global memory only on a match: keeping all
    // eight springs in private memory cost registers (spills) on the GPU
    // slot-major: slot k of particle i at k * stride + i, stride = particle count
    int old_key[FRICTION_SLOTS];
    for (int k = 0; k < FRICTION_SLOTS; ++k) {
        old_key[k] = history_key_in[i + k * stride];
        if (old_key[k] == EMPTY_SLOT) break;
    }
    __global const float4 *old_xi = history_xi_in + i;
    __global int *new_key = history_key_out + i;
    __global float4 *new_xi = history_xi_out + i;
    int slots_used = 0;
    float3 force = (float3)(0.0f);
    float3 torque = (float3)(0.0f);

    int listed = neighbour_count[s];
    if (rebuild || listed > NEIGHBOUR_SLOTS) {
        listed = 0;
        int3 c = cell_of(p_i, inv_cell);
        // x is the lowest field of the bucket index, so the three cells of a row (dx = -1, 0, 1)
        // are three consecutive buckets, i.e. one run of slots, unless the row wraps around the table
        uint x_mask = (1u << grid_bits.x) - 1u;
        uint x_low = (uint)(c.x - 1) & x_mask;
        bool row_is_contiguous = x_low + 2u <= x_mask;
        for (int dz = -1; dz <= 1; ++dz)
        for (int dy = -1; dy <= 1; ++dy)
        for (int dx = -1; dx <= 1; ++dx) {
            uint begin, end;
            if (row_is_contiguous) {
                if (dx != -1) continue;
                uint h = bucket_of(c + (int3)(-1, dy, dz), grid_bits);
                begin = bucket_begin(h, scan_local, group_offset);
                end = bucket_begin(h + 3, scan_local, group_offset);
            } else {
                uint h = bucket_of(c + (int3)(dx, dy, dz), grid_bits);
                begin = bucket_begin(h, scan_local, group_offset);
                end = bucket_begin(h + 1, scan_local, group_offset);
            }
            for (uint k = begin; k < end; ++k) {
                float4 other = sorted_position[k];
                int body_j = as_int(other.w);
                if (body_j == body_i) continue;  // same rigid body (also skips j == i)
                float3 delta = other.xyz - p_i;
                float dist2 = dot(delta, delta);
                if (rebuild && dist2 < reach2) {
                    if (listed < NEIGHBOUR_SLOTS) neighbour[listed * stride] = (int)k;
                    ++listed;
                }
                if (dist2 >= diameter2 || !with_contacts) continue;
                particle_pair_contact((int)k, other.xyz, delta, dist2, body_j, body_i, v_i, w_i, mass_i, mat_i,
                                      asleep_i, cc, ns, body_contact_mass, pair_damping_ratio,
                                      pair_friction, pair_rolling, old_key, old_xi, stride, new_key, new_xi,
                                      &slots_used, body_touched_out, &force, &torque);
            }
        }
        // more than NEIGHBOUR_SLOTS: this particle searches every substep until the next rebuild
        if (rebuild) neighbour_count[s] = min(listed, NEIGHBOUR_SLOTS + 1);
    } else if (with_contacts) {
        for (int l = 0; l < listed; ++l) {
            int k = neighbour[l * stride];
            float4 other = sorted_position[k];
            float3 delta = other.xyz - p_i;
            float dist2 = dot(delta, delta);
            if (dist2 >= diameter2) continue;
            particle_pair_contact(k, other.xyz, delta, dist2, as_int(other.w), body_i, v_i, w_i, mass_i, mat_i,
                                  asleep_i, cc, ns, body_contact_mass, pair_damping_ratio,
                                  pair_friction, pair_rolling, old_key, old_xi, stride, new_key, new_xi,
                                  &slots_used, body_touched_out, &force, &torque);
        }
    }
    if (!with_contacts) return;
    collider_contacts(i, body_i, p_i, v_i, w_i, mass_i, mat_i, cc, colliders, pair_damping_ratio, pair_friction,
                      pair_rolling, old_key, old_xi, stride, new_key, new_xi, &slots_used, particle_corner_reach,
                      body_orientation, body_lattice, &force, &torque);
    if (slots_used < FRICTION_SLOTS) new_key[slots_used * stride] = EMPTY_SLOT;
    *contact_count = slots_used;  // contacts beyond FRICTION_SLOTS are not counted
    *body_force += force;
    // torque about the body's centre of mass (eq. 5.22 plus the contacts' own couples)
    *body_torque += cross(r_i, force) + torque;
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
    __global const float4 *body_orientation,
    __global const float4 *body_lattice)     // voxel lattice axes in the body frame
{
    int s = get_global_id(0);
    if (s >= particle_count) return;
    bool rebuilding = *rebuild != 0;
    ContactConstants cc = {contact_constants.x, contact_constants.y, contact_constants.z, contact_constants.w};
    float4 own = sorted_position[s];
    int body_i = as_int(own.w);
    if (body_i == STATIC_BODY) return;
    int i = sorted_particle[s];
    Colliders colliders = {plane_count, plane_point, plane_normal, plane_material, large_triangle_count,
                           triangle_inv_cell, triangle_mask, collider_tau, triangle_vertices, collider_vertex,
                           collider_velocity, large_triangles, triangle_bucket_start, triangle_items,
                           triangle_bounds};
    NeighbourState ns = {sorted_particle, particle_material, body_position, body_velocity, body_angular_velocity,
                         body_quiet, sleep};
    bool asleep_i = is_asleep(body_quiet[body_i], sleep);
    float3 r_i = own.xyz - body_position[body_i].xyz;
    float3 w_i = body_angular_velocity[body_i].xyz;
    float3 v_i = body_velocity[body_i].xyz + cross(w_i, r_i);
    float3 force = (float3)(0.0f);
    float3 torque = (float3)(0.0f);
    int contact_count = 0;
    bool with_contacts = !(asleep_i && sleep.w > 0.0f && !body_touched_in[body_i]);
    if (!with_contacts) {
        // a sleeping body nothing awake touched: no contacts to compute (what makes settled
        // piles cheap); its friction springs carry over unchanged
        for (int k = 0; k < FRICTION_SLOTS; ++k) {
            int key = history_key_in[k * history_stride + i];
            history_key_out[k * history_stride + i] = key;
            if (key == EMPTY_SLOT) break;
            history_xi_out[k * history_stride + i] = history_xi_in[k * history_stride + i];
        }
    }
    if (with_contacts || rebuilding) {
        particle_contacts(s, i, body_i, own.xyz, r_i, v_i, w_i, body_contact_mass[body_i], particle_material[i],
                          cc, inv_cell, grid_bits, scan_local, group_offset, sorted_position,
                          ns, body_contact_mass, colliders, pair_damping_ratio, pair_friction, pair_rolling,
                          history_stride, history_key_in, history_xi_in, history_key_out, history_xi_out,
                          rebuilding, with_contacts, neighbour_reach2, neighbour_count, neighbour_list + s, asleep_i,
                          body_touched_out, particle_corner_reach, body_orientation, body_lattice,
                          &force, &torque, &contact_count);
    }
    // most particles touch nothing (free fall, a pile's inside): a byte instead of 32
    bool has_force = contact_count > 0 || any(force != 0.0f) || any(torque != 0.0f);
    particle_has_force[i] = has_force;
    if (has_force) {
        particle_force[i] = (float4)(force, (float)contact_count);  // .w: contacts, for the body
        particle_torque[i] = (float4)(torque, 0.0f);
    }
}
