// Stage 30, colliders: a particle's contacts with the planes and triangle meshes, called by the
// contact kernel (40_contacts.cl) after its particle pairs. Colliders touch the particle's voxel,
// sharp corners included (voxel_support; addon/core/voxel_corners.py explains), and triangles follow
// the rules of addon/core/colliders.py.

// A speculative contact's margin beyond SPECULATIVE_MARGIN: how far it closes (closing speed) in
// the SPECULATIVE_TIME until the next detection, at most SPECULATIVE_REACH radii (the reach the
// neighbour lists and collider lookups cover), so a fast body meets a record before it arrives.
inline float speculative_growth(float closing, float r)
{
    return fmin(fmax(closing, 0.0f) * SPECULATIVE_TIME, SPECULATIVE_REACH * r);
}

// A triangle collider's: up to COLLIDER_SPECULATIVE_REACH radii, the reach its lookup covers
inline float collider_speculative_growth(float closing, float r)
{
    return fmin(fmax(closing, 0.0f) * SPECULATIVE_TIME, COLLIDER_SPECULATIVE_REACH * r);
}

// A plane's: the whole way it closes until the next detection, however fast (no lookup bounds a
// plane): capped at SPECULATIVE_REACH, a cube's edge closing at 20 m/s met the ground a detection
// late and went 19 cm deep (Box2D: continuous collision against static bodies)
inline float plane_speculative_growth(float closing)
{
    return fmax(closing, 0.0f) * SPECULATIVE_TIME;
}

// The patch of the sphere of radius sphere.w about sphere.xyz within bound of the origin: its depth
// along the unit direction u where the sphere's support point (in *arm) lies on it, else -INFINITY
// (addon/core/voxel_corners.py sphere_patch_support).
inline float sphere_patch_support(float3 u, float4 sphere, float bound, float3 *arm)
{
    float3 tip = sphere.xyz + sphere.w * u;
    *arm = tip;
    return (dot(tip, tip) <= bound * bound) ? dot(sphere.xyz, u) + sphere.w : -INFINITY;
}

// How far particle i's voxel reaches from its centre along the unit world direction u (towards the
// collider), and in *arm the vector to the point that touches. lattice: the voxel lattice's world
// orientation; reach 0 is the particle's sphere; a support sphere (radius sphere.w > 0, its centre
// sphere.xyz from the particle's in world space) takes the place of both.
inline float voxel_support_turned(float3 u, float3 u_turned, float reach, float4 lattice, float4 sphere, float radius,
                                  float3 *arm);

inline float voxel_support(float3 u, float reach, float4 lattice, float4 sphere, float radius, float3 *arm)
{
    return voxel_support_turned(u, u, reach, lattice, sphere, radius, arm);
}

// The same for the voxel's point that is its support along u once the body has turned so that u
// reads as u_turned in its frame now (u_turned = u: voxel_support): how far that body point reaches
// along u now, and in *arm the vector to it (addon/core/voxel_corners.py voxel_support).
inline float voxel_support_turned(float3 u, float3 u_turned, float reach, float4 lattice, float4 sphere, float radius,
                                  float3 *arm)
{
    if (sphere.w > 0.0f) return sphere_patch_support(u, sphere, SUPPORT_SPHERE_REACH * radius, arm);
    if (reach <= 0.0f) {
        *arm = radius * u;
        return radius;
    }
    float3 d = quat_rotate_inverse(lattice, u);
    float3 sigma = clamp(quat_rotate_inverse(lattice, u_turned) * (1.0f / CORNER_SOFTNESS), -1.0f, 1.0f);
    float half_side = reach * radius;
    float rho = radius * (1.0f - reach * (1.0f - 0.5f * CORNER_SOFTNESS));
    *arm = quat_rotate(lattice, half_side * sigma) + rho * u;
    return half_side * (dot(sigma, d) - 0.5f * CORNER_SOFTNESS * dot(sigma, sigma)) + rho;
}

// What the contact kernel reads about particle i's voxel, on its first collider within reach.
typedef struct {
    bool loaded;
    float reach;
    float4 lattice;
    float4 sphere;  // support sphere: centre less the particle's, world; radius (0: none)
} VoxelCorners;

inline void load_voxel_corners(VoxelCorners *vc, int i, int body_i, __global const float *particle_corner_reach,
                               __global const float4 *particle_support_sphere,
                               __global const float4 *body_orientation, __global const float4 *body_lattice)
{
    if (vc->loaded) return;
    vc->loaded = true;
    vc->reach = particle_corner_reach[i];
    vc->sphere = particle_support_sphere[i];
    vc->lattice = (vc->reach > 0.0f && vc->sphere.w <= 0.0f)
                      ? quat_multiply(body_orientation[body_i], body_lattice[body_i])
                      : (float4)(0.0f, 0.0f, 0.0f, 1.0f);
    if (vc->sphere.w > 0.0f) vc->sphere.xyz = quat_rotate(body_orientation[body_i], vc->sphere.xyz);
}

// ---------------------------------------------------------------------------------------------
// triangle colliders (addon/core/colliders.py describes the rules; mirrors closest_point_on_triangle)

#define FACE_REGION 0
#define EDGE_OR_VERTEX_REGION 1
#define MAX_EDGE_CONTACTS 8

inline int closest_point_on_triangle(float3 p, float3 a, float3 b, float3 c, float3 *q, float3 *bary)
{
    float3 ab = b - a, ac = c - a, ap = p - a;
    float d1 = dot(ab, ap), d2 = dot(ac, ap);
    if (d1 <= 0.0f && d2 <= 0.0f) { *q = a; *bary = (float3)(1.0f, 0.0f, 0.0f); return EDGE_OR_VERTEX_REGION; }
    float3 bp = p - b;
    float d3 = dot(ab, bp), d4 = dot(ac, bp);
    if (d3 >= 0.0f && d4 <= d3) { *q = b; *bary = (float3)(0.0f, 1.0f, 0.0f); return EDGE_OR_VERTEX_REGION; }
    float vc = d1 * d4 - d3 * d2;
    if (vc <= 0.0f && d1 >= 0.0f && d3 <= 0.0f) {
        float v = d1 / (d1 - d3);
        *q = a + v * ab; *bary = (float3)(1.0f - v, v, 0.0f); return EDGE_OR_VERTEX_REGION;
    }
    float3 cp = p - c;
    float d5 = dot(ab, cp), d6 = dot(ac, cp);
    if (d6 >= 0.0f && d5 <= d6) { *q = c; *bary = (float3)(0.0f, 0.0f, 1.0f); return EDGE_OR_VERTEX_REGION; }
    float vb = d5 * d2 - d1 * d6;
    if (vb <= 0.0f && d2 >= 0.0f && d6 <= 0.0f) {
        float w = d2 / (d2 - d6);
        *q = a + w * ac; *bary = (float3)(1.0f - w, 0.0f, w); return EDGE_OR_VERTEX_REGION;
    }
    float va = d3 * d6 - d5 * d4;
    if (va <= 0.0f && (d4 - d3) >= 0.0f && (d5 - d6) >= 0.0f) {
        float w = (d4 - d3) / ((d4 - d3) + (d5 - d6));
        *q = b + w * (c - b); *bary = (float3)(0.0f, 1.0f - w, w); return EDGE_OR_VERTEX_REGION;
    }
    float denom = va + vb + vc;
    if (denom == 0.0f) { *q = a; *bary = (float3)(1.0f, 0.0f, 0.0f); return EDGE_OR_VERTEX_REGION; }
    float v = vb / denom, w = vc / denom;
    *q = a + ab * v + ac * w; *bary = (float3)(1.0f - v - w, v, w);
    return FACE_REGION;
}

inline uint triangle_bucket(int3 c, uint mask)
{
    return (((uint)c.x * 73856093u) ^ ((uint)c.y * 19349663u) ^ ((uint)c.z * 83492791u)) & mask;
}

// The planes and triangle meshes, as the contact kernel receives them.
typedef struct {
    int plane_count;
    __global const float4 *plane_point;
    __global const float4 *plane_normal;
    __global const int *plane_material;
    int large_triangle_count;                   // triangles too large for the triangle grid
    float triangle_inv_cell;
    uint triangle_mask;
    float collider_tau;                         // seconds since the collider vertices were set
    __global const int4 *triangle_vertices;     // v0, v1, v2, material
    __global const float4 *collider_vertex;
    __global const float4 *collider_velocity;
    __global const int *large_triangles;
    __global const uint *triangle_bucket_start;
    __global const int *triangle_items;
    __global const float4 *triangle_bounds;     // per triangle: lower, upper corner
} Colliders;

// All contacts of particle i (body body_i, at p_i, velocity v_i, angular velocity w_i) with the
// planes and triangles: adds to *force and *torque (about the particle's centre) and records the
// friction springs after the particle pairs' (see add_contact).
inline void collider_contacts(
    int i, int body_i, float3 p_i, float3 v_i, float3 w_i, float2 mass_i, int mat_i, ContactConstants cc,
    Colliders colliders,
    __global const float *pair_damping_ratio, __global const float *pair_friction, __global const float *pair_rolling,
    const int *old_key, __global const float4 *old_xi, const int stride,
    __global int *new_key, __global float4 *new_xi, FrictionSlots *slots,
    __global const float *particle_corner_reach, __global const float4 *particle_support_sphere,
    __global const float4 *body_orientation, __global const float4 *body_lattice, float3 r_i,
    SolveRecords solve_records,
    float3 *force, float3 *torque)
{
    const int plane_count = colliders.plane_count;
    __global const float4 *plane_point = colliders.plane_point;
    __global const float4 *plane_normal = colliders.plane_normal;
    __global const int *plane_material = colliders.plane_material;
    const int large_triangle_count = colliders.large_triangle_count;
    const float triangle_inv_cell = colliders.triangle_inv_cell;
    const uint triangle_mask = colliders.triangle_mask;
    const float collider_tau = colliders.collider_tau;
    __global const int4 *triangle_vertices = colliders.triangle_vertices;
    __global const float4 *collider_vertex = colliders.collider_vertex;
    __global const float4 *collider_velocity = colliders.collider_velocity;
    __global const int *large_triangles = colliders.large_triangles;
    __global const uint *triangle_bucket_start = colliders.triangle_bucket_start;
    __global const int *triangle_items = colliders.triangle_items;
    __global const float4 *triangle_bounds = colliders.triangle_bounds;
    // colliders touch the particle's voxel (voxel_support), read only for particles within reach
    VoxelCorners corners = {false, 0.0f, (float4)(0.0f), (float4)(0.0f)};
    float collider_reach = cc.radius * COLLIDER_REACH;
    for (int g = 0; g < plane_count; ++g) {
        float3 normal = plane_normal[g].xyz;
        float height = dot(p_i - plane_point[g].xyz, normal);
        // (the voxel's touching point lies within collider_reach of its centre, so it closes at
        // most this fast)
        float fastest_closing = dot(v_i, -normal) + length(w_i) * collider_reach;
        if (height >= collider_reach + plane_speculative_growth(fastest_closing)) continue;
        load_voxel_corners(&corners, i, body_i, particle_corner_reach, particle_support_sphere, body_orientation,
                           body_lattice);
        float3 arm;
#if RIGID_VOXELS
        // a turning voxel's record holds the point that touches at TURNING_ANCHOR of the step, not
        // the one that touches now: its depth then follows that body point through the substeps
        // (60_solve.cl load_pair_point's depth_shift), while the lowest point of a box turning
        // 10 rad/s changes corners within a step and went 4 cm into the ground untracked
        float3 u_turned = rotate_by_vector(-normal, -TURNING_ANCHOR * SPECULATIVE_TIME * w_i);
#else
        float3 u_turned = -normal;
#endif
        float depth = voxel_support_turned(-normal, u_turned, corners.reach, corners.lattice, corners.sphere, cc.radius,
                                           &arm);
        if (height < depth + SPECULATIVE_MARGIN * cc.radius
                     + plane_speculative_growth(dot(v_i + cross(w_i, arm), -normal))) {
            int slot = add_contact(cc, -2 - g, -normal, arm, depth - height, depth - height, v_i, w_i, (float3)(0.0f),
                                   (float3)(0.0f), mass_i, (float2)(0.0f), mat_i, plane_material[g],
                                   pair_damping_ratio, pair_friction, pair_rolling, old_key, old_xi, stride,
                                   new_key, new_xi, slots, force, torque);
#if RIGID_VOXELS
            if (slot >= 0) {
                write_solve_record(solve_records, old_key, -2 - g, stride, slot, -normal, STATIC_BODY, r_i + arm,
                                   depth - height, (float3)(0.0f), 1.0f,
                                   pair_friction[mat_i * MATERIAL_COUNT + plane_material[g]], mat_i,
                                   plane_material[g], dot(v_i + cross(w_i, arm), -normal));
            }
#endif
        }
    }
    // triangles: pass 0 takes face contacts; pass 1, only if there were none (nor a face within
    // reach of a support sphere), edge and vertex contacts, each distinct closest point once. Compiled out for scenes without meshes (its
    // private arrays cost registers).
#if HAS_TRIANGLES
    {
        uint h = triangle_bucket(convert_int3_sat_rtn(p_i * triangle_inv_cell), triangle_mask);
        uint triangle_begin = triangle_bucket_start[h];
        int candidates = large_triangle_count + (int)(triangle_bucket_start[h + 1] - triangle_begin);
        int face_contacts = 0;
        bool face_claimed = false;  // by a face within reach of a voxel with a support sphere
        float3 edge_points[MAX_EDGE_CONTACTS];
        int edge_contacts = 0;
        float tolerance2 = (DUPLICATE_POINT_TOLERANCE * cc.radius) * (DUPLICATE_POINT_TOLERANCE * cc.radius);
        for (int pass = 0; pass < 2; ++pass) {
            if (pass == 1 && (face_contacts > 0 || face_claimed)) break;
            for (int k = 0; k < candidates; ++k) {
                int t = (k < large_triangle_count) ? large_triangles[k]
                                                   : triangle_items[triangle_begin + (uint)(k - large_triangle_count)];
                // outside the triangle's box grown by a radius: no contact (cheap reject, before
                // loading six vertex vectors)
                float4 lower = triangle_bounds[2 * t], upper = triangle_bounds[2 * t + 1];
                if (p_i.x < lower.x || p_i.y < lower.y || p_i.z < lower.z ||
                    p_i.x > upper.x || p_i.y > upper.y || p_i.z > upper.z) continue;
                int4 tv = triangle_vertices[t];
                float3 va = collider_vertex[tv.x].xyz + collider_tau * collider_velocity[tv.x].xyz;
                float3 vb = collider_vertex[tv.y].xyz + collider_tau * collider_velocity[tv.y].xyz;
                float3 vc = collider_vertex[tv.z].xyz + collider_tau * collider_velocity[tv.z].xyz;
                float3 q, bary;
                int region = closest_point_on_triangle(p_i, va, vb, vc, &q, &bary);
                if ((pass == 0) != (region == FACE_REGION)) continue;
                float3 delta = q - p_i;
                float dist2 = dot(delta, delta);
                if (dist2 >= collider_reach * collider_reach) continue;
                float dist = sqrt(dist2);
                if (dist <= 1e-9f * cc.radius) continue;
                float3 n = delta / dist;
                float3 arm = cc.radius * n;
                float depth = cc.radius;
                // a face meets the voxel, an edge or a vertex the sphere; except an edge or vertex
                // straight along the triangle's normal (a particle right over the edge between two
                // triangles of a flat floor, which no face claims)
                bool face_like = pass == 0;
                if (!face_like) {
                    float3 normal = cross(vb - va, vc - va);
                    float normal_length = length(normal);
                    face_like = normal_length > 0.0f && fabs(dot(n, normal)) >= FACE_LIKE_COSINE * normal_length;
                }
                if (face_like) {
                    load_voxel_corners(&corners, i, body_i, particle_corner_reach, particle_support_sphere,
                                       body_orientation, body_lattice);
                    depth = voxel_support(n, corners.reach, corners.lattice, corners.sphere, cc.radius, &arm);
                    // a face within reach claims a voxel with a support sphere, touching or not: no
                    // edge contacts of its particle's sphere then (the staircase the sphere
                    // replaces); where the sphere's point is off this voxel's patch, the face meets
                    // the sphere through the voxel whose patch holds it
                    if (corners.sphere.w > 0.0f) face_claimed = face_claimed || pass == 0;
                    if (isinf(depth)) continue;
                }
                float3 v_tri = bary.x * collider_velocity[tv.x].xyz + bary.y * collider_velocity[tv.y].xyz
                             + bary.z * collider_velocity[tv.z].xyz;
                if (dist >= depth + SPECULATIVE_MARGIN * cc.radius
                            + collider_speculative_growth(dot(v_i + cross(w_i, arm) - v_tri, n), cc.radius))
                    continue;
                if (pass == 1) {
                    bool duplicate = false;
                    for (int e = 0; e < edge_contacts; ++e) {
                        float3 gap = edge_points[e] - q;
                        if (dot(gap, gap) < tolerance2) { duplicate = true; break; }
                    }
                    if (duplicate) continue;
                    if (edge_contacts < MAX_EDGE_CONTACTS) edge_points[edge_contacts++] = q;
                } else {
                    ++face_contacts;
                }
                int slot = add_contact(cc, -2 - plane_count - t, n, arm, depth - dist, depth - dist, v_i, w_i, v_tri,
                                       (float3)(0.0f), mass_i, (float2)(0.0f), mat_i, tv.w,
                                       pair_damping_ratio, pair_friction, pair_rolling, old_key, old_xi, stride,
                                       new_key, new_xi, slots, force, torque);
#if RIGID_VOXELS
                if (slot >= 0) {
                    write_solve_record(solve_records, old_key, -2 - plane_count - t, stride, slot, n, STATIC_BODY,
                                       r_i + arm, depth - dist, v_tri, 1.0f,
                                       pair_friction[mat_i * MATERIAL_COUNT + tv.w], mat_i, tv.w,
                                       dot(v_i + cross(w_i, arm) - v_tri, n));
                }
#endif
            }
        }
    }
#endif
}
