"""Sharp voxels against colliders: where a particle touches a plane or a triangle's face.

A body is a set of voxels, each represented by a sphere of the particle radius r. Between bodies
that is the method (seed ch. 5). Against the ground it makes a box a box with rounded edges of
radius r: a 27-particle cube rests on its particle centres, two thirds of its face, and rolls on
its rounded corners, so it tumbles and rocks far longer than a real box (docs/experiments/voxel-corners.md).

So against planes and triangle faces a particle is the voxel it stands for: a cube of half side
``reach * r`` rounded by the rest of the radius, ``reach`` (Model.particle_corner_reach) being how
far the body's solid fills that voxel's corners (1 for a box made of voxels, 0 for a sphere, which
is the particle itself). Its depth along the direction u towards the collider is the support
function of that rounded cube,

    s(u) = a * sum_k huber(u_k) + rho,   a = reach r,   rho = r (1 - reach (1 - E / 2)),

with u_k in the voxel lattice's axes and huber(x) = |x| - E/2 beyond |x| = E, x^2 / (2E) within
(E = CORNER_SOFTNESS), and the contact point is the support point

    arm(u) = a * clamp(u / E, -1, 1) + rho * u.

rho makes a face-on voxel reach exactly r, the sphere's depth (so a box resting flat, a bounce or
a slide are what they were), while a corner reaches r (sqrt 3 - E) and an edge r (sqrt 2 - E/2).
The arm is the gradient of s, so the force at the support point is the gradient of a potential
(no energy gained from the rotation of the contact point), and the smoothing E keeps it
continuous where a face turns past flat. reach = 0 gives s = r, arm = r u: the plain sphere.

A voxel near a curved surface may have a support sphere instead (core.support_spheres: the mesh's
osculating sphere under it, centre o from the voxel's centre, radius R). It owns the patch of that
sphere within SUPPORT_SPHERE_REACH radii of its centre: along u it reaches s = o.u + R, touching at
the sphere's support point o + R u, where that point lies on its patch, and touches nothing
otherwise. Every voxel near a converted ball's surface has the ball as its sphere, so the ball
touches the ground at its lowest point, once from each voxel whose patch holds that point (the same
point and depth: the manifold keeps one), and never at the staircase of the particles' spheres. A
lens (the solid sphere within the bound) would be continuous where a point leaves every patch, but
its rim is a shallower contact of the same ball, spread round the true one, and the manifold's
reduction keeps the points that span the widest polygon: it held the ball on four rim points and
let it sink a centimetre (E17).

The kernels' voxel_support mirrors ``voxel_support`` here.
"""
from __future__ import annotations

import math

import numpy as np

# Width, in direction cosines, over which a voxel's contact point moves across a face: a face
# tilted by more than about 0.05 rad rests on its edge. Small enough to keep the edge sharp
# (its depth within 2.5 % of the radius of the true edge), large enough that the turning torque
# changes over a few hundred substeps of rocking, not in one.
CORNER_SOFTNESS = 0.05
# An edge or vertex contact of a triangle counts as its face's (the voxel) when the direction to it
# is this close to the triangle's normal: a particle right over the edge between two triangles of a
# flat floor, which neither face claims (closest_point_on_triangle puts the edge in neither).
FACE_LIKE_COSINE = 0.9999
# How far from a voxel's centre its support sphere's patch reaches (particle radii): far enough that
# every point of a converted ball's surface lies within it of a voxel's centre (at most 1.8-2.3 radii
# on UV spheres of 16 x 8 to 64 x 32 segments, 5 to 20 particles across; 2.54 on the 20-particle one
# of 16 x 8, whose facets lie 0.4 radii inside the sphere through its vertices), or the ball would
# not touch there; what collider lookups must then cover (collider_reach).
SUPPORT_SPHERE_REACH = 3.0


def corner_bound(radius: float, reach: float = 1.0) -> float:
    """Farthest a voxel of ``reach`` can touch from its centre (what collider lookups must cover)."""
    return radius * (1.0 + reach * (math.sqrt(3.0) - 1.0))


def sphere_patch_support(u: np.ndarray, centre: np.ndarray, sphere_radius: float, bound: float):
    """(depth, arm) of the patch of the sphere of ``sphere_radius`` about ``centre`` within ``bound``
    of the origin, along the unit direction ``u``: the sphere's support point where it lies on the
    patch, else depth -inf (no contact)."""
    tip = centre + sphere_radius * u
    if tip @ tip <= bound * bound:
        return float(centre @ u + sphere_radius), tip
    return -np.inf, tip


def voxel_support(u: np.ndarray, reach: float, lattice_rotation: np.ndarray, radius: float, sphere=None,
                  u_turned=None):
    """(depth, arm): how far the voxel reaches from its centre along the unit world direction ``u``,
    and the world vector from its centre to the point that touches. ``lattice_rotation``: the voxel
    lattice's axes in world space (3 x 3). ``sphere``: the voxel's support sphere, (centre less the
    voxel's centre in world space, radius), or None (or radius 0): none, the voxel by its reach.
    ``u_turned``: the voxel's point that is its support along u once the body has turned so that u
    reads as u_turned in its frame now, instead of the support now (30_colliders.cl
    voxel_support_turned); its depth along u now and the arm to it."""
    u = np.asarray(u, dtype=np.float64)
    if sphere is not None and sphere[1] > 0.0:
        return sphere_patch_support(u, np.asarray(sphere[0], dtype=np.float64), float(sphere[1]),
                                   SUPPORT_SPHERE_REACH * radius)
    if reach <= 0.0:
        return radius, radius * u
    e = CORNER_SOFTNESS
    d = lattice_rotation.T @ u
    sigma = np.clip((d if u_turned is None else lattice_rotation.T @ np.asarray(u_turned, dtype=np.float64)) / e,
                    -1.0, 1.0)
    half_side = reach * radius
    rho = radius * (1.0 - reach * (1.0 - 0.5 * e))
    depth = half_side * (sigma @ d - 0.5 * e * (sigma @ sigma)) + rho
    arm = lattice_rotation @ (half_side * sigma) + rho * u
    return depth, arm


def collider_reach(model) -> float:
    """How far from a particle's centre a collider can touch it, over the whole model."""
    reach = model.particle_corner_reach
    bound = corner_bound(model.particle_radius, float(reach.max()) if len(reach) else 0.0)
    if len(model.particle_support_sphere) and model.particle_support_sphere[:, 3].max() > 0.0:
        bound = max(bound, SUPPORT_SPHERE_REACH * model.particle_radius)
    return bound
