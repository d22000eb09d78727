// Stage 70, impacts (Rigid Voxels, the end of every substep): a body that moves further per
// detection than the speculative contacts reach is swept from its pose at the substep's start to
// its pose now, each particle along its chord, against the other particles and the triangles where
// they are now; if it went deep into something it did not already touch, it is put back at the
// first moment two voxels could touch, its velocity kept, until the next detection finds the
// contact (Box2D v3's continuous step, Bullet's CCD). addon/core/impacts.py is the specification
// and says why each number is what it is.
//
// Defines: IMPACT_MOTION, IMPACT_DISTANCE, IMPACT_DEPTH, IMPACT_CLOSING, TRIANGLE_IMPACT_DISTANCE,
// TRIANGLE_IMPACT_DEPTH (radii), MAX_IMPACT_SAMPLES, PARTICLE_RADIUS (metres).

// The fraction of the chord p0 + t d at which it first comes within IMPACT_DISTANCE of q, if it
// comes within IMPACT_DEPTH of q from further away, closing at least IMPACT_CLOSING; 1 otherwise
// (impacts.chord_entry_time).
inline float chord_entry_time(float3 p0, float3 d, float3 q)
{
    float3 w = p0 - q;
    float a = dot(d, d), b = dot(w, d), c = dot(w, w);
    const float depth2 = (IMPACT_DEPTH * PARTICLE_RADIUS) * (IMPACT_DEPTH * PARTICLE_RADIUS);
    if (c < depth2 || a <= 0.0f) return 1.0f;
    float closest = clamp(-b / a, 0.0f, 1.0f);
    float3 gap = w + closest * d;
    float gap2 = dot(gap, gap);
    if (gap2 >= depth2 || sqrt(c) - sqrt(gap2) < IMPACT_CLOSING * PARTICLE_RADIUS) return 1.0f;
    float inside = c - (IMPACT_DISTANCE * PARTICLE_RADIUS) * (IMPACT_DISTANCE * PARTICLE_RADIUS);
    if (inside <= 0.0f) return 0.0f;
    return clamp((-b - sqrt(fmax(b * b - a * inside, 0.0f))) / a, 0.0f, 1.0f);
}

// How much further than a radius a voxel with the support sphere (its centre less the particle's,
// world; w: its radius, 0 for none) reaches along the unit direction u (impacts.support_lift)
inline float support_lift(float4 sphere, float3 u)
{
    if (sphere.w <= 0.0f) return 0.0f;
    float3 arm;
    float depth = sphere_patch_support(u, sphere, SUPPORT_SPHERE_REACH * PARTICLE_RADIUS, &arm);
    return isinf(depth) ? 0.0f : depth - PARTICLE_RADIUS;
}

// The same against the triangle abc, the voxel's support spheres at the start and the end (world:
// support_lift) reaching further than a radius towards it (impacts.triangle_entry_time).
inline float triangle_entry_time(float3 p0, float3 p1, float3 a, float3 b, float3 c, float4 sphere0, float4 sphere1)
{
    float3 normal = cross(b - a, c - a);
    float length_ = length(normal);
    if (length_ <= 0.0f) return 1.0f;
    normal /= length_;
    float s0 = dot(normal, p0 - a), s1 = dot(normal, p1 - a);
    float side = (s0 >= 0.0f) ? 1.0f : -1.0f;
    float lift0 = support_lift(sphere0, -side * normal), lift1 = support_lift(sphere1, -side * normal);
    float h0 = side * s0 - lift0, h1 = side * s1 - lift1;
    const float deep = TRIANGLE_IMPACT_DEPTH * PARTICLE_RADIUS;
    if (h0 <= deep || h1 >= deep || h0 - h1 < IMPACT_CLOSING * PARTICLE_RADIUS) return 1.0f;
    float f = (h0 - deep) / (h0 - h1);
    float3 at_depth = p0 + f * (p1 - p0) - (side * ((1.0f - f) * lift0 + f * lift1)) * normal;
    float3 q, bary;
    closest_point_on_triangle(at_depth, a, b, c, &q, &bary);
    if (length(q - at_depth) >= PARTICLE_RADIUS) return 1.0f;
    const float touch = TRIANGLE_IMPACT_DISTANCE * PARTICLE_RADIUS;
    return (h0 <= touch) ? 0.0f : (h0 - touch) / (h0 - h1);
}

// The earliest entry of the chord p0 + t d into the particles of grid bucket h not of body b
inline float sweep_bucket(uint h, int b, float3 p0, float3 d, __global const uint *scan_local,
                          __global const uint *group_offset, __global const int *sorted_particle,
                          __global const float4 *particle_offset, __global const int *particle_body,
                          __global const float4 *body_position, __global const float4 *body_orientation)
{
    float best = 1.0f;
    uint end = bucket_begin(h + 1, scan_local, group_offset);
    for (uint a = bucket_begin(h, scan_local, group_offset); a < end; ++a) {
        int j = sorted_particle[a];
        int bj = particle_body[j];
        if (bj == b) continue;
        float3 q = particle_world_position(bj, particle_offset[j].xyz, body_position, body_orientation);
        best = fmin(best, chord_entry_time(p0, d, q));
    }
    return best;
}

inline float body_motion(float4 x0, float4 q0, float4 x1, float4 q1, float extent)
{
    float cosine = fmin(fabs(dot(q0, q1)), 1.0f);
    return length(x1.xyz - x0.xyz) + extent * 2.0f * acos(cosine);
}

// A work-item per particle: its body's time of impact, the earliest over its particles, as the
// bits of a float in [0, 1] (positive floats order as their bits: atomic_min keeps it
// deterministic).
__kernel void sweep_fast_particles(
    const int particle_count,
    const float inv_cell,
    const int4 grid_bits,
    __global const uint *scan_local,
    __global const uint *group_offset,
    __global const int *sorted_particle,
    __global const float4 *particle_offset,
    __global const int *particle_body,
    __global const float4 *particle_support_sphere,
    __global const float4 *body_position,
    __global const float4 *body_orientation,
    __global const float *body_extent,
    __global const float4 *impact_start_position,
    __global const float4 *impact_start_orientation,
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
    __global uint *body_impact_time)
{
    int i = get_global_id(0);
    if (i >= particle_count) return;
    int b = particle_body[i];
    if (b == STATIC_BODY) return;
    float4 x0 = impact_start_position[b], q0 = impact_start_orientation[b];
    float4 x1 = body_position[b], q1 = body_orientation[b];
    if (body_motion(x0, q0, x1, q1, body_extent[b]) * SUBSTEPS_PER_DETECTION <= IMPACT_MOTION * PARTICLE_RADIUS) return;
    float3 offset = particle_offset[i].xyz;
    float3 p0 = x0.xyz + quat_rotate(q0, offset);
    float3 p1 = x1.xyz + quat_rotate(q1, offset);
    float3 d = p1 - p0;
    float cell = 1.0f / inv_cell;
    float best = 1.0f;
    // the particles: the chord cut into equal pieces, the cells about each piece's midpoint. A
    // piece's points lie within half its length of the midpoint, and the particles within
    // IMPACT_DEPTH of them within that plus IMPACT_DEPTH of it. Within a cell of it they lie in the
    // 27 cells about its own, so a piece may be 2 (cell - IMPACT_DEPTH) long: one lookup for most
    // fast bodies' chords. Within half a cell they lie in the 8 cells on the midpoint's side of
    // each axis: a chord up to 2 (cell / 2 - IMPACT_DEPTH) long (the fall of a pile's cubes) is
    // looked up there, in a third of the buckets (the sweep's time on a 10,000-cube pile)
    const float depth = IMPACT_DEPTH * PARTICLE_RADIUS;
    float chord = length(d);
    bool octant = chord <= 2.0f * (0.5f * cell - depth);
    int pieces = octant ? 1 : clamp((int)ceil(chord / (2.0f * (cell - depth))), 1, MAX_IMPACT_SAMPLES);
    for (int k = 0; k < pieces; ++k) {
        float3 at = p0 + d * (((float)k + 0.5f) / (float)pieces);
        int3 c = cell_of(at, inv_cell);
        if (octant) {
            // the 8 cells from the midpoint's towards its nearer neighbour on each axis
            int3 first = c + select((int3)(0), (int3)(-1), isless(at * inv_cell - convert_float3(c), (float3)(0.5f)));
            for (int n = 0; n < 8; ++n)
                best = fmin(best, sweep_bucket(bucket_of(first + (int3)(n & 1, (n >> 1) & 1, n >> 2), grid_bits),
                                               b, p0, d, scan_local, group_offset, sorted_particle, particle_offset,
                                               particle_body, body_position, body_orientation));
        } else {
            for (int n = 0; n < 27; ++n)
                best = fmin(best, sweep_bucket(bucket_of(c + (int3)(n % 3 - 1, (n / 3) % 3 - 1, n / 9 - 1), grid_bits),
                                               b, p0, d, scan_local, group_offset, sorted_particle, particle_offset,
                                               particle_body, body_position, body_orientation));
        }
    }
#if HAS_TRIANGLES
    // the triangles: their buckets looked up at most a cell apart along the chord, ends included;
    // the support sphere at the start pose and the end pose (world)
    float4 sphere = particle_support_sphere[i];
    float4 sphere0 = (float4)(quat_rotate(q0, sphere.xyz), sphere.w);
    float4 sphere1 = (float4)(quat_rotate(q1, sphere.xyz), sphere.w);
    int samples = min((int)ceil(length(d) / cell), MAX_IMPACT_SAMPLES) + 1;
    for (int k = 0; k < samples; ++k) {
        float3 at = p0 + d * ((samples > 1) ? (float)k / (float)(samples - 1) : 0.0f);
        uint th = triangle_bucket(convert_int3_sat_rtn(at * triangle_inv_cell), triangle_mask);
        uint triangle_begin = triangle_bucket_start[th];
        int candidates = (int)(triangle_bucket_start[th + 1] - triangle_begin) + (k == 0 ? large_triangle_count : 0);
        for (int n = 0; n < candidates; ++n) {
            // the large triangles (in no bucket) once, with the first sample
            int t = (k == 0 && n < large_triangle_count)
                        ? large_triangles[n]
                        : triangle_items[triangle_begin + (uint)(n - (k == 0 ? large_triangle_count : 0))];
            int4 tv = triangle_vertices[t];
            float3 va = collider_vertex[tv.x].xyz + collider_tau * collider_velocity[tv.x].xyz;
            float3 vb = collider_vertex[tv.y].xyz + collider_tau * collider_velocity[tv.y].xyz;
            float3 vc = collider_vertex[tv.z].xyz + collider_tau * collider_velocity[tv.z].xyz;
            best = fmin(best, triangle_entry_time(p0, p1, va, vb, vc, sphere0, sphere1));
        }
    }
#endif
    if (best < 1.0f) atomic_min(body_impact_time + b, as_uint(best));
}

// A work-item per body: a body with an impact is put at its pose that fraction of the way from the
// substep's start (position linear, orientation normalised linear, the shorter way); every body's
// pose now is where the next substep's sweep starts.
__kernel void stop_at_impacts(
    const int body_count,
    __global float4 *body_position,
    __global float4 *body_orientation,
    __global float4 *impact_start_position,
    __global float4 *impact_start_orientation,
    __global uint *body_impact_time,
    __global const float *body_mass)
{
    int b = get_global_id(0);
    if (b >= body_count) return;
    float t = as_float(body_impact_time[b]);
    float4 x1 = body_position[b], q1 = body_orientation[b];
    // a kinematic body (infinite mass: OpenCLEngine.set_body_frame) keeps to its path
    if (t < 1.0f && !isinf(body_mass[b])) {
        float4 x0 = impact_start_position[b], q0 = impact_start_orientation[b];
        float sign = (dot(q0, q1) >= 0.0f) ? 1.0f : -1.0f;
        x1 = (float4)((1.0f - t) * x0.xyz + t * x1.xyz, 0.0f);
        q1 = normalize((1.0f - t) * q0 + (t * sign) * q1);
        body_position[b] = x1;
        body_orientation[b] = q1;
        body_impact_time[b] = as_uint(1.0f);
    }
    impact_start_position[b] = x1;
    impact_start_orientation[b] = q1;
}
