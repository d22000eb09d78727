// Stage 34, Rigid Voxels' contact geometry (RIGID_VOXELS, settings contact_geometry "voxels"): two
// bodies' whole voxels meet as box against box, called by the contact kernel (40_contacts.cl) for
// each pair of them within VOXEL_PAIR_REACH2. addon/core/voxel_pairs.py explains, and mirrors each
// function here.

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

inline void lattice_axes(int b, PairInputs pairs, float3 *F)
{
    float4 frame = quat_multiply(pairs.body_orientation[b], pairs.body_lattice[b]);
    F[0] = quat_rotate(frame, (float3)(1.0f, 0.0f, 0.0f));
    F[1] = quat_rotate(frame, (float3)(0.0f, 1.0f, 0.0f));
    F[2] = quat_rotate(frame, (float3)(0.0f, 0.0f, 1.0f));
}

// The pair of particle i's whole voxel (centre p_i, from the bucket-ordered positions) and another
// body's, particle j at p_j: box against box, computed with the lower body's voxel first on both
// sides (the same axis, depth, point and share), the contact law at the one point between them,
// its force and torque scaled by the share. Mirrors ReferenceEngine._voxel_pair.
inline void voxel_pair_contact(int j, float3 p_i, float3 p_j, int body_j, ContactParticle own, PairInputs pairs,
                               FrictionHistory *history, ContactSums *sums)
{
    int body_i = own.body;
    ContactConstants cc = pairs.cc;
    float3 A[3], B[3];
    lattice_axes(body_i, pairs, A);
    lattice_axes(body_j, pairs, B);
    uint faces_i = pairs.particle_faces[own.i], faces_j = pairs.particle_faces[j];
    float3 n, point;
    float depth, share;
    bool swapped = body_i > body_j;
    // the voxel centres' velocities, computed alike on both sides of the pair
    float3 v_centre_i = pairs.body_velocity[body_i].xyz
                      + cross(pairs.body_angular_velocity[body_i].xyz, p_i - pairs.body_position[body_i].xyz);
    float3 v_centre_j = pairs.body_velocity[body_j].xyz
                      + cross(pairs.body_angular_velocity[body_j].xyz, p_j - pairs.body_position[body_j].xyz);
    if (!(swapped ? voxel_pair(p_j, B, faces_j, p_i, A, faces_i, v_centre_j - v_centre_i, cc.radius, &n, &depth,
                               &point, &share)
                  : voxel_pair(p_i, A, faces_i, p_j, B, faces_j, v_centre_i - v_centre_j, cc.radius, &n, &depth,
                               &point, &share)))
        return;
    if (swapped) n = -n;
    float3 arm = point - p_i;
    float3 w_j = pairs.body_angular_velocity[body_j].xyz;
    float3 v_point_j = pairs.body_velocity[body_j].xyz + cross(w_j, point - pairs.body_position[body_j].xyz);
    // contact_law takes j's side as a centre moving with -arm; the point is j's at point - its centre
    float3 v_j = v_point_j + cross(w_j, arm);
    // Push-out: how deep the pair's spring may push (the friction slot's w) grows from
    // PUSH_OUT_BIRTH_DEPTH at the pair's first substep by its closing speed plus PUSH_OUT_SPEED per
    // second (not while parting faster than PUSH_OUT_SPEED). A pair that came together by moving,
    // or under a growing load, never reaches the limit; one born deeper (bodies started inside each
    // other) pushes only that deep, and not at all while parting faster than PUSH_OUT_SPEED, instead
    // of throwing them apart.
    int stride = history->stride;
    int slot = history_slot(history->old_key, j);
    float permitted = (slot >= 0) ? history->old_xi[slot * stride].w : PUSH_OUT_BIRTH_DEPTH;
    float closing = dot(own.v + cross(own.w, arm) - v_point_j, n);
    bool parting_fast = -closing > PUSH_OUT_SPEED;
    permitted += (fmax(closing, 0.0f) + (parting_fast ? 0.0f : PUSH_OUT_SPEED)) * cc.substep;
    float law_depth = depth;
    if (depth > permitted) law_depth = parting_fast ? 0.0f : permitted;
    float2 mass_j = contact_mass(body_j, pairs.body_contact_mass);
    int mat_i = own.material, mat_j = pairs.particle_material[j];
    float3 f = (float3)(0.0f), t = (float3)(0.0f);
    int slot_taken = add_contact(cc, j, n, arm, law_depth, depth, own.v, own.w, v_j, w_j, own.mass, mass_j, mat_i,
                                 mat_j, pairs.pair_damping_ratio, pairs.pair_friction, pairs.pair_rolling,
                                 history->old_key, history->old_xi, stride, history->new_key, history->new_xi,
                                 &history->slots, &f, &t);
    if (slot_taken >= 0) {
        history->new_xi[slot_taken * stride].w = permitted;
        // the damping cap counts a body's contacts: a pair counts for its share (four quarter pairs
        // under a voxel offset by half a voxel are one contact, as the same voxel face on face)
        sums->count_adjust += share - 1.0f;
        write_solve_record(history->records, history->old_key, j, stride, slot_taken, n, body_j,
                           point - pairs.body_position[body_i].xyz, depth, point - pairs.body_position[body_j].xyz,
                           share, pairs.pair_friction[mat_i * MATERIAL_COUNT + mat_j], mat_i, mat_j, closing);
    }
    sums->force += share * f;
    sums->torque += share * t;
}
