// Stage 32, sphere against sphere between bodies: every particle pair of Particles' contacts
// (springs, settings contact_geometry "particles"), and under Rigid Voxels (RIGID_VOXELS) the pairs
// that are not two whole voxels (34_voxel_pairs.cl): round surface voxels and static particles.
// Called by the contact kernel (40_contacts.cl) for each pair within two radii.

// The contact of particle i (own) with particle j at p_j of body body_j, delta = p_j - own.p
// apart at distance dist (> 0): both sides act at the one point halfway between the centres.
inline void sphere_pair_contact(int j, float3 p_j, float3 delta, float dist, int body_j, ContactParticle own,
                                PairInputs pairs, FrictionHistory *history, ContactSums *sums)
{
    ContactConstants cc = pairs.cc;
    float3 n = delta / dist;
    float3 v_j = (float3)(0.0f), w_j = (float3)(0.0f);
    if (body_j != STATIC_BODY) {
        w_j = pairs.body_angular_velocity[body_j].xyz;
        v_j = pairs.body_velocity[body_j].xyz + cross(w_j, p_j - pairs.body_position[body_j].xyz);
    }
#if RIGID_VOXELS
    // spheres (round surface voxels, static particles) within the margin and what they close until
    // the next detection
    if (dist >= (2.0f + SPECULATIVE_MARGIN) * cc.radius + speculative_growth(dot(own.v - v_j, n), cc.radius)) return;
#else
    // an awake body touching a sleeping one makes it compute its contacts next substep (the
    // solve's sleepers are woken by the records that reach them instead, compute_contacts)
    if (body_j != STATIC_BODY && !own.asleep && is_asleep(pairs.body_quiet[body_j], pairs.sleep))
        pairs.body_touched_out[body_j] = 1;
#endif
    // both sides act at the one point halfway between the centres, so the pair's forces are equal,
    // opposite and on one line: with friction the pair then keeps its angular momentum (at r n from
    // each centre the two points lie the overlap apart and the friction forces make a couple)
    int mat_j = pairs.particle_material[j];
    int slot = add_contact(cc, j, n, 0.5f * dist * n, 2.0f * cc.radius - dist, 2.0f * cc.radius - dist, own.v, own.w,
                           v_j, w_j, own.mass, contact_mass(body_j, pairs.body_contact_mass), own.material, mat_j,
                           pairs.pair_damping_ratio, pairs.pair_friction, pairs.pair_rolling, history->old_key,
                           history->old_xi, history->stride, history->new_key, history->new_xi, &history->slots,
                           &sums->force, &sums->torque);
#if RIGID_VOXELS
    // the solve holds it, at the point halfway between the centres
    if (slot >= 0) {
        float3 point = p_j - delta + 0.5f * dist * n;
        float3 arm_j = (body_j != STATIC_BODY) ? point - pairs.body_position[body_j].xyz : (float3)(0.0f);
        write_solve_record(history->records, history->old_key, j, history->stride, slot, n, body_j,
                           point - pairs.body_position[own.body].xyz, 2.0f * cc.radius - dist, arm_j, 1.0f,
                           pairs.pair_friction[own.material * MATERIAL_COUNT + mat_j], own.material, mat_j,
                           dot(own.v + cross(own.w, 0.5f * dist * n) - v_j, n));
    }
#endif
}
