// Stage 20, the gather: every substep, the particles' world positions (body index in .w) written
// in bucket order (the order of the last rebuild), so the contact kernel reads neighbours from
// consecutive addresses. Velocities are not gathered: the contact kernel computes the few it needs
// from the body state (v + w x r), which stays in cache, instead of every particle's being written
// and read back. Positions are recomputed from the body state rather than stored by the grid
// stage (fewer bytes moved). Work-item 0 also clears the next substep's rebuild flag (the last
// substep's, read by all its kernels and free now; integrate_bodies sets it) and the detection's
// awake flag, and counts rebuilds.

__kernel void gather_particles(
    __global const int *rebuild,
    __global int *next_rebuild,
    __global uint *rebuild_count,
    const int particle_count,
    __global const int *sorted_particle,
    __global const float4 *particle_offset,
    __global const int *particle_body,
    __global const float4 *body_position,
    __global const float4 *body_orientation,
    __global float4 *sorted_position,
    __global int *awake_bodies)   // cleared: integrate_bodies sets it while some body is awake
{
    int a = get_global_id(0);
    if (a == 0) {
        *next_rebuild = 0;
        *awake_bodies = 0;
        if (*rebuild) *rebuild_count += 1u;
    }
    if (a >= particle_count) return;
    int i = sorted_particle[a];
    int b = particle_body[i];
    sorted_position[a] = (float4)(particle_world_position(b, particle_offset[i].xyz, body_position, body_orientation),
                                  as_float(b));
}
