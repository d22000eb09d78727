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

// ---------------------------------------------------------------------------------------------
// Voxel against voxel between bodies (RIGID_VOXELS, settings contact_geometry "voxels";
// addon/core/voxel_pairs.py explains, and mirrors each function here).

typedef struct {
    __global const float *particle_corner_reach;  // whole voxels (>= WHOLE_VOXEL_REACH) meet as cubes
    __global const uchar *particle_faces;         // exposed faces: bit 2k +axis k, 2k + 1 -axis k
    __global const float4 *body_orientation;
    __global const float4 *body_lattice;
} Voxels;

// Whether the voxel (lattice axes F) touching along +axis presses only on faces it exposes.
inline bool presses_on_exposed_faces(float3 axis, const float3 *F, uint faces)
{
    float c[3] = {dot(axis, F[0]), dot(axis, F[1]), dot(axis, F[2])};
    float biggest = fmax(fabs(c[0]), fmax(fabs(c[1]), fabs(c[2])));
    for (int k = 0; k < 3; ++k) {
        if (fabs(c[k]) >= FACE_COMPONENT_FRACTION * biggest) {
            uint bit = (c[k] > 0.0f) ? 2u * k : 2u * k + 1u;
            if (!((faces >> bit) & 1u)) return false;
        }
    }
    return true;
}

// The voxel's deepest point along d: a corner, or the middle of an edge or face on a tie.
inline float3 voxel_box_support(float3 c, const float3 *F, float r, float3 d)
{
    float3 q = c;
    for (int k = 0; k < 3; ++k) {
        float s = dot(d, F[k]);
        q += F[k] * r * ((s > 1e-3f) ? 1.0f : ((s < -1e-3f) ? -1.0f : 0.0f));
    }
    return q;
}

// Voxels of side 2 r at p_i and p_j (lattice axes A, B; exposed faces faces_i, faces_j; i's centre
// moving at dv relative to j's) as box against box: false if apart, also after closing along an
// axis for the speculative time, else n from i towards j, the depth, the contact point and the share.
inline bool voxel_pair(float3 p_i, const float3 *A, uint faces_i, float3 p_j, const float3 *B, uint faces_j,
                       float3 dv, float r, float3 *n_out, float *depth_out, float3 *point_out, float *share_out)
{
    float3 d = p_j - p_i;
    // Gottschalk's box test: every axis's reaches, and the centres' offset and relative velocity
    // along it, from the 3x3 products of the two lattices' axes (a PoCL call 152 -> 86 ns against
    // fifteen generic axes; (A_a x B_b) . A_n and . B_n are +-R's entries of the other two axes)
    float R[3][3], AR[3][3], ad[3], bd[3], av[3], bv[3];
    for (int m = 0; m < 3; ++m) {
        for (int k = 0; k < 3; ++k) {
            R[m][k] = dot(A[m], B[k]);
            AR[m][k] = fabs(R[m][k]);
        }
        ad[m] = dot(A[m], d);
        bd[m] = dot(B[m], d);
        av[m] = dot(A[m], dv);
        bv[m] = dot(B[m], dv);
    }
    float best = INFINITY;
    int kind = -1;
    for (int k = 0; k < 15; ++k) {
        float reach_i, reach_j, along, moving;
        if (k < 3) {
            reach_i = r;
            reach_j = r * (AR[k][0] + AR[k][1] + AR[k][2]);
            along = ad[k];
            moving = av[k];
        } else if (k < 6) {
            int m = k - 3;
            reach_i = r * (AR[0][m] + AR[1][m] + AR[2][m]);
            reach_j = r;
            along = bd[m];
            moving = bv[m];
        } else {
            int a = (k - 6) / 3, b = (k - 6) % 3;
            int a1 = (a + 1) % 3, a2 = (a + 2) % 3, b1 = (b + 1) % 3, b2 = (b + 2) % 3;
            float len = sqrt(fmax(1.0f - R[a][b] * R[a][b], 0.0f));  // |A_a x B_b|
            if (len < PARALLEL_EDGES) continue;
            float inv = 1.0f / len;
            reach_i = r * (AR[a1][b] + AR[a2][b]) * inv;
            reach_j = r * (AR[a][b1] + AR[a][b2]) * inv;
            along = (R[a1][b] * ad[a2] - R[a2][b] * ad[a1]) * inv;
            moving = (R[a1][b] * av[a2] - R[a2][b] * av[a1]) * inv;
        }
        float overlap = reach_i + reach_j - fabs(along);
        float closing = (along >= 0.0f) ? moving : -moving;
        // a separating axis (speculative: by the margin and what it closes until the next detection)
        if (overlap + speculative_growth(closing, r) <= -SPECULATIVE_MARGIN * r) return false;
        float biased = (k < 6) ? overlap : overlap * EDGE_AXIS_BIAS + 1e-6f * r;
        if (biased >= best) continue;
        float3 axis;
        if (k < 3) axis = A[k];
        else if (k < 6) axis = B[k - 3];
        else axis = normalize(cross(A[(k - 6) / 3], B[(k - 6) % 3]));
        float3 oriented = (along >= 0.0f) ? axis : -axis;
        if (!(presses_on_exposed_faces(oriented, A, faces_i) && presses_on_exposed_faces(-oriented, B, faces_j)))
            continue;
        best = biased;
        *n_out = oriented;
        *depth_out = overlap;
        kind = (k < 3) ? 0 : ((k < 6) ? 1 : 2);
    }
    if (kind < 0) return false;
    float3 n = *n_out;
    *point_out = 0.5f * (voxel_box_support(p_i, A, r, n) + voxel_box_support(p_j, B, r, -n));
    float share = 1.0f;
    if (kind != 2) {
        // the part of the face (side 2 r) that the other voxel's extent covers, along the face's two axes
        const float3 *F = (kind == 0) ? A : B;
        const float3 *O = (kind == 0) ? B : A;
        for (int m = 0; m < 3; ++m) {
            float3 u = F[m];
            if (fabs(dot(u, n)) > 0.7f) continue;
            float lateral = r * (fabs(dot(u, O[0])) + fabs(dot(u, O[1])) + fabs(dot(u, O[2]))) + r - fabs(dot(u, d));
            share *= clamp(lateral / (2.0f * r), 0.0f, 1.0f);
        }
    }
    *share_out = share;
    return share > 0.0f;
}

inline void lattice_axes(int b, Voxels vx, float3 *F)
{
    float4 frame = quat_multiply(vx.body_orientation[b], vx.body_lattice[b]);
    F[0] = quat_rotate(frame, (float3)(1.0f, 0.0f, 0.0f));
    F[1] = quat_rotate(frame, (float3)(0.0f, 1.0f, 0.0f));
    F[2] = quat_rotate(frame, (float3)(0.0f, 0.0f, 1.0f));
}

// The pair (i, j) of two bodies' whole voxels: box against box, computed with the lower body's
// voxel first on both sides (the same axis, depth, point and share), the contact law at the one
// point between them, its force and torque scaled by the share. Mirrors ReferenceEngine._voxel_pair.
inline void voxel_pair_contact(
    int i, int j, float3 p_i, float3 p_j, int body_i, int body_j, float3 v_i, float3 w_i, float2 mass_i,
    int mat_i, ContactConstants cc, NeighbourState ns, Voxels vx,
    __global const float2 *body_contact_mass, __global const float *pair_damping_ratio,
    __global const float *pair_friction, __global const float *pair_rolling,
    const int *old_key, __global const float4 *old_xi, const int stride,
    __global int *new_key, __global float4 *new_xi, FrictionSlots *slots, float *count_adjust,
    SolveRecords solve_records, float3 *force, float3 *torque)
{
    float3 A[3], B[3];
    lattice_axes(body_i, vx, A);
    lattice_axes(body_j, vx, B);
    uint faces_i = vx.particle_faces[i], faces_j = vx.particle_faces[j];
    float3 n, point;
    float depth, share;
    bool swapped = body_i > body_j;
    // the voxel centres' velocities, computed alike on both sides of the pair
    float3 v_centre_i = ns.body_velocity[body_i].xyz
                      + cross(ns.body_angular_velocity[body_i].xyz, p_i - ns.body_position[body_i].xyz);
    float3 v_centre_j = ns.body_velocity[body_j].xyz
                      + cross(ns.body_angular_velocity[body_j].xyz, p_j - ns.body_position[body_j].xyz);
    if (!(swapped ? voxel_pair(p_j, B, faces_j, p_i, A, faces_i, v_centre_j - v_centre_i, cc.radius, &n, &depth,
                               &point, &share)
                  : voxel_pair(p_i, A, faces_i, p_j, B, faces_j, v_centre_i - v_centre_j, cc.radius, &n, &depth,
                               &point, &share)))
        return;
    if (swapped) n = -n;
    float3 arm = point - p_i;
    float3 w_j = ns.body_angular_velocity[body_j].xyz;
    float3 v_point_j = ns.body_velocity[body_j].xyz + cross(w_j, point - ns.body_position[body_j].xyz);
    // contact_law takes j's side as a centre moving with -arm; the point is j's at point - its centre
    float3 v_j = v_point_j + cross(w_j, arm);
    // Push-out: how deep the pair's spring may push (the friction slot's w) grows from
    // PUSH_OUT_BIRTH_DEPTH at the pair's first substep by its closing speed plus PUSH_OUT_SPEED per
    // second (not while parting faster than PUSH_OUT_SPEED). A pair that came together by moving,
    // or under a growing load, never reaches the limit; one born deeper (bodies started inside each
    // other) pushes only that deep, and not at all while parting faster than PUSH_OUT_SPEED, instead
    // of throwing them apart.
    int slot = history_slot(old_key, j);
    float permitted = (slot >= 0) ? old_xi[slot * stride].w : PUSH_OUT_BIRTH_DEPTH;
    float closing = dot(v_i + cross(w_i, arm) - v_point_j, n);
    bool parting_fast = -closing > PUSH_OUT_SPEED;
    permitted += (fmax(closing, 0.0f) + (parting_fast ? 0.0f : PUSH_OUT_SPEED)) * cc.substep;
    float law_depth = depth;
    if (depth > permitted) law_depth = parting_fast ? 0.0f : permitted;
    float2 mass_j = contact_mass(body_j, body_contact_mass);
    float3 f = (float3)(0.0f), t = (float3)(0.0f);
    int slot_taken = add_contact(cc, j, n, arm, law_depth, depth, v_i, w_i, v_j, w_j, mass_i, mass_j, mat_i,
                                 ns.particle_material[j], pair_damping_ratio, pair_friction, pair_rolling, old_key,
                                 old_xi, stride, new_key, new_xi, slots, &f, &t);
    if (slot_taken >= 0) {
        new_xi[slot_taken * stride].w = permitted;
        // the damping cap counts a body's contacts: a pair counts for its share (four quarter pairs
        // under a voxel offset by half a voxel are one contact, as the same voxel face on face)
        *count_adjust += share - 1.0f;
#if RIGID_VOXELS
        write_solve_record(solve_records, old_key, j, stride, slot_taken, n, body_j, point - ns.body_position[body_i].xyz,
                           depth, point - ns.body_position[body_j].xyz, share,
                           pair_friction[mat_i * MATERIAL_COUNT + ns.particle_material[j]], mat_i,
                           ns.particle_material[j], closing);
#endif
    }
    *force += share * f;
    *torque += share * t;
}

// The contact of particle i with the particle in bucket slot k (another body's), if they overlap.
inline void particle_pair_contact(
    int k, float3 p_j, float3 delta, float dist2, int body_j, int i, int body_i, float3 v_i, float3 w_i,
    float2 mass_i, int mat_i, bool asleep_i, ContactConstants cc, NeighbourState ns, Voxels vx,
    __global const float2 *body_contact_mass, __global const float *pair_damping_ratio,
    __global const float *pair_friction, __global const float *pair_rolling,
    const int *old_key, __global const float4 *old_xi, const int stride,
    __global int *new_key, __global float4 *new_xi, FrictionSlots *slots, float *count_adjust,
    __global int *body_touched_out, SolveRecords solve_records, float3 *force, float3 *torque)
{
    float dist = sqrt(dist2);
    if (dist <= 1e-9f * cc.radius) return;
    int j = ns.sorted_particle[k];
#if RIGID_VOXELS
    if (body_j != STATIC_BODY && vx.particle_corner_reach[i] >= WHOLE_VOXEL_REACH
        && vx.particle_corner_reach[j] >= WHOLE_VOXEL_REACH) {
        // the solve reads a voxel pair's record on the lower body's side only (61_pair_colouring.cl
        // record_pair): the higher body leaves the pair to the lower one, unless that one sleeps
        // (this side then computes it, to wake it), and the pair's test runs once instead of twice
        if (body_i > body_j && !is_asleep(ns.body_quiet[body_j], ns.sleep)) return;
        float3 p_i = p_j - delta;
        // (a sleeper this side records is woken by the record, compute_contacts' woken_pass)
        voxel_pair_contact(i, j, p_i, p_j, body_i, body_j, v_i, w_i, mass_i, mat_i, cc, ns, vx, body_contact_mass,
                           pair_damping_ratio, pair_friction, pair_rolling, old_key, old_xi, stride, new_key, new_xi,
                           slots, count_adjust, solve_records, force, torque);
        return;
    }
#endif
    float3 n = delta / dist;
    float3 v_j = (float3)(0.0f), w_j = (float3)(0.0f);
    if (body_j != STATIC_BODY) {
        w_j = ns.body_angular_velocity[body_j].xyz;
        v_j = ns.body_velocity[body_j].xyz + cross(w_j, p_j - ns.body_position[body_j].xyz);
    }
#if RIGID_VOXELS
    // spheres (round surface voxels, static particles) within the margin and what they close until
    // the next detection
    if (dist >= (2.0f + SPECULATIVE_MARGIN) * cc.radius + speculative_growth(dot(v_i - v_j, n), cc.radius)) return;
#endif
#if !RIGID_VOXELS
    // an awake body touching a sleeping one makes it compute its contacts next substep (the
    // solve's sleepers are woken by the records that reach them instead, compute_contacts)
    if (body_j != STATIC_BODY && !asleep_i && is_asleep(ns.body_quiet[body_j], ns.sleep)) body_touched_out[body_j] = 1;
#endif
    // both sides act at the one point halfway between the centres, so the pair's forces are equal,
    // opposite and on one line: with friction the pair then keeps its angular momentum (at r n from
    // each centre the two points lie the overlap apart and the friction forces make a couple)
    int slot = add_contact(cc, j, n, 0.5f * dist * n, 2.0f * cc.radius - dist, 2.0f * cc.radius - dist, v_i, w_i,
                           v_j, w_j, mass_i, contact_mass(body_j, body_contact_mass), mat_i, ns.particle_material[j],
                           pair_damping_ratio, pair_friction, pair_rolling, old_key, old_xi, stride,
                           new_key, new_xi, slots, force, torque);
#if RIGID_VOXELS
    // the solve holds it, at the point halfway between the centres
    if (slot >= 0) {
        float3 point = p_j - delta + 0.5f * dist * n;
        float3 arm_j = (body_j != STATIC_BODY) ? point - ns.body_position[body_j].xyz : (float3)(0.0f);
        write_solve_record(solve_records, old_key, j, stride, slot, n, body_j,
                           point - ns.body_position[body_i].xyz, 2.0f * cc.radius - dist, arm_j, 1.0f,
                           pair_friction[mat_i * MATERIAL_COUNT + ns.particle_material[j]], mat_i,
                           ns.particle_material[j], dot(v_i + cross(w_i, 0.5f * dist * n) - v_j, n));
    }
#endif
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
    __global const float *particle_corner_reach, __global const float4 *particle_support_sphere,
    __global const uchar *particle_faces, __global const float4 *body_orientation, __global const float4 *body_lattice,
    SolveRecords solve_records, __global uchar *solve_count, float3 *body_force,
    float3 *body_torque, float *contact_count)
{
    float diameter = 2.0f * cc.radius;
#if RIGID_VOXELS
    float pair_reach2 = VOXEL_PAIR_REACH2;  // whole voxels touch corner to corner 2 sqrt(3) r apart
    Voxels vx = {particle_corner_reach, particle_faces, body_orientation, body_lattice};
#else
    float pair_reach2 = diameter * diameter;
    Voxels vx = {0, 0, 0, 0};
#endif
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
    FrictionSlots slots;
    slots.used = 0;
    float count_adjust = 0.0f;  // voxel pairs count for their share (voxel_pair_contact)
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
                if (dist2 >= pair_reach2 || !with_contacts) continue;
                particle_pair_contact((int)k, other.xyz, delta, dist2, body_j, i, body_i, v_i, w_i, mass_i, mat_i,
                                      asleep_i, cc, ns, vx, body_contact_mass, pair_damping_ratio,
                                      pair_friction, pair_rolling, old_key, old_xi, stride, new_key, new_xi,
                                      &slots, &count_adjust, body_touched_out, solve_records,
                                      &force, &torque);
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
            if (dist2 >= pair_reach2) continue;
            particle_pair_contact(k, other.xyz, delta, dist2, as_int(other.w), i, body_i, v_i, w_i, mass_i, mat_i,
                                  asleep_i, cc, ns, vx, body_contact_mass, pair_damping_ratio,
                                  pair_friction, pair_rolling, old_key, old_xi, stride, new_key, new_xi,
                                  &slots, &count_adjust, body_touched_out, solve_records,
                                  &force, &torque);
        }
    }
    if (!with_contacts) return;
    collider_contacts(i, body_i, p_i, v_i, w_i, mass_i, mat_i, cc, colliders, pair_damping_ratio, pair_friction,
                      pair_rolling, old_key, old_xi, stride, new_key, new_xi, &slots, particle_corner_reach,
                      particle_support_sphere, body_orientation, body_lattice, r_i, solve_records, &force, &torque);
    if (slots.used < FRICTION_SLOTS) new_key[slots.used * stride] = EMPTY_SLOT;
    // contacts beyond FRICTION_SLOTS are not counted
    *contact_count = (float)slots.used + count_adjust;
#if RIGID_VOXELS
    *solve_count = (uchar)slots.used;
#endif
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
    const int woken_pass)                    // k > 0: only the sleepers reached for pass k, lists not rebuilt
{
    int s = get_global_id(0);
    if (s >= particle_count) return;
    float4 own = sorted_position[s];
    int body_i = as_int(own.w);
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
    NeighbourState ns = {sorted_particle, particle_material, body_position, body_velocity, body_angular_velocity,
                         body_quiet, sleep};
    bool asleep_i = is_asleep(body_quiet[body_i], sleep);
    float3 r_i = own.xyz - body_position[body_i].xyz;
    float3 w_i = body_angular_velocity[body_i].xyz;
    float3 v_i = body_velocity[body_i].xyz + cross(w_i, r_i);
    float3 force = (float3)(0.0f);
    float3 torque = (float3)(0.0f);
    float contact_count = 0.0f;
    SolveRecords records = {solve_record + i, history_impulse_in + i, history_impulse_out + i, pair_restitution};
#if RIGID_VOXELS
    solve_count[i] = 0;
#endif
    bool with_contacts = woken_pass || !(asleep_i && sleep.w > 0.0f && !body_touched_in[body_i]);
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
        particle_contacts(s, i, body_i, own.xyz, r_i, v_i, w_i, body_contact_mass[body_i], particle_material[i],
                          cc, inv_cell, grid_bits, scan_local, group_offset, sorted_position,
                          ns, body_contact_mass, colliders, pair_damping_ratio, pair_friction, pair_rolling,
                          history_stride, history_key_in, history_xi_in, history_key_out, history_xi_out,
                          rebuilding, with_contacts, neighbour_reach2, neighbour_count, neighbour_list + s, asleep_i,
                          body_touched_out, particle_corner_reach, particle_support_sphere, particle_faces,
                          body_orientation, body_lattice, records, solve_count + i, &force, &torque,
                          &contact_count);
    }
#if RIGID_VOXELS
    // the solve alone holds the contacts (ContactGeometry.springs False): their records stay
    force = (float3)(0.0f);
    torque = (float3)(0.0f);
    if ((woken_pass || !asleep_i) && woken_pass < WAKE_PASSES && sleep.x > 0.0f) {
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
