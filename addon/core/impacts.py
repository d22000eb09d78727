"""Impacts the speculative contacts cannot see coming: a time-of-impact pass for fast bodies.

Rigid Voxels detect contacts once per step (``substeps_per_detection`` substeps). A contact is found
when its gap is within the speculative margin plus how far it closes until the next detection, and
that growth is capped by what the neighbour lists and collider lookups cover (settings.py,
``SPECULATIVE_REACH``). A body that moves further than that between two detections arrives with no
record: it ends deep inside what it struck, or beyond it (docs/experiments/impacts.md measures it).

So, as Box2D v3's continuous step ("bullets", ``solver.c`` b2SolveContinuous) and Bullet's CCD
motion threshold do, the end of every substep sweeps each body that moves faster than
``IMPACT_MOTION`` radii per detection from its pose at the substep's start to its pose now, against
the other bodies' particles, the static particles and the triangle colliders where they are now
(planes need none: their reach has no cap). If the sweep goes deep into something it did not
already touch, the body is put back at the first moment two voxels could touch; its velocity stays.
It stays there, substep after substep, until the next detection finds the contact within its
reach, and the solve stops the body at the face and parts it at its restitution, as it does any
caught impact. So no substep's pose, and no baked key, shows it inside what it struck; it loses
the rest of that step's travel (at most one step, 1/60 s), as in Box2D.

Each particle sweeps its chord, the straight line from where it was to where it is: exact for a
body that only moved, and for one that turned a little per step (the pose at the impact is the
start and end poses interpolated, as Box2D's sweep does).

- Against another particle, the voxels' boxes (2 r wide) can first touch at a centre distance of
  ``IMPACT_DISTANCE`` = 2 sqrt(3) radii (corner to corner), so the pose at the impact leaves them
  apart, face-on by 1.46 r: within the speculative reach (1.75 r) of the next detection. A sweep
  counts only if its centre comes within ``IMPACT_DEPTH`` radii of a particle it was not that close
  to at the start: a body sliding along a surface (its centres 2 r from the surface's) is not
  stopped, and one it already rests on is the contacts' business.
- Against a triangle, a voxel can first touch at sqrt(3) radii from its plane; a sweep counts if it
  ends within ``TRIANGLE_IMPACT_DEPTH`` radii of the plane, or crosses it, over the triangle. A
  voxel with a support sphere (a converted ball's) is measured by where its sphere reaches, as the
  contacts measure it: its height is taken as that of a particle sphere with the same lowest point.
  The voxels near a ball's surface lie closer to the ground than a radius when the ball rests, and
  cycle through there as it rolls; by their centres a ball rolling on a mesh was stopped every
  substep (it went uphill).
- Either sweep counts only if it closes at least ``IMPACT_CLOSING`` radii in its substep: a voxel
  pressed a little deeper each substep (a steel ball landing on a light brick sinks into it by up
  to a fifth of a radius) is a loaded contact the solve is pushing back, and pausing the body there
  made the ball roll off the brick. A body that closes less than that per substep moves under a
  radius per detection, which the speculative reach (1.75 r) covers.

``stop_at_impacts`` is the NumPy specification of kernels/70_impacts.cl.
"""
from __future__ import annotations

import math

import numpy as np

from .colliders import closest_point_on_triangle
from .model import STATIC_BODY
from .rotations import quaternion_to_matrix, vector_cross
from .voxel_corners import SUPPORT_SPHERE_REACH, sphere_patch_support

# A body that moves more than this per detection (radii, its centre's travel plus its extent times
# the angle it turned) is swept: two bodies each under it close at most 1.5 radii a step, within
# the speculative reach (0.25 + 1.5)
IMPACT_MOTION = 0.75
# Centre distance (radii) at which two voxels, boxes 2 r wide, can first touch: corner to corner
IMPACT_DISTANCE = 2.0 * math.sqrt(3.0)
# A sweep whose centre comes this close (radii) to another particle's went through it, not past it
IMPACT_DEPTH = 1.8
# From a triangle's plane: where a voxel can first touch it, and how close a sweep must end (or
# cross) to count
TRIANGLE_IMPACT_DISTANCE = math.sqrt(3.0)
TRIANGLE_IMPACT_DEPTH = 0.5
# A sweep that closes less than this (radii) in its substep is a loaded contact, not an impact
IMPACT_CLOSING = 0.25
# The kernel looks a chord up in the particle grid at the midpoints of pieces at most
# 2 (cell - IMPACT_DEPTH) long, and in the triangle grid at points at most a cell apart; a chord
# longer than this many of them is looked up at this many (a body crossing 2,000 radii in a step)
MAX_IMPACT_SAMPLES = 512


def body_motion(x0, q0, x1, q1, extent):
    """How far (metres) any point of each body moved between the two poses, at most: its centre's
    travel plus its extent times the angle it turned. q: (w, x, y, z)."""
    cosine = np.minimum(np.abs(np.einsum("bi,bi->b", q0, q1)), 1.0)
    return np.linalg.norm(x1 - x0, axis=1) + extent * 2.0 * np.arccos(cosine)


def chord_entry_time(p0, d, q, distance, depth, closing):
    """(n,) earliest fraction t in [0, 1] of the chord p0 + t d at which it is within ``distance``
    of each point q, for the points it comes within ``depth`` of, from a start not within ``depth``
    and at least ``closing`` further; 1.0 for the others."""
    w = p0 - q
    a = float(d @ d)
    b = w @ d
    c = np.einsum("ni,ni->n", w, w)
    if a <= 0.0:
        return np.ones(len(q))
    closest = np.clip(-b / a, 0.0, 1.0)
    gap = w + closest[:, None] * d
    closest_distance = np.sqrt(np.einsum("ni,ni->n", gap, gap))
    hit = (c >= depth * depth) & (closest_distance < depth) & (np.sqrt(c) - closest_distance >= closing)
    inside = c - distance * distance
    root = np.sqrt(np.maximum(b * b - a * inside, 0.0))
    entry = np.where(inside <= 0.0, 0.0, (-b - root) / a)
    return np.where(hit, np.clip(entry, 0.0, 1.0), 1.0)


def triangle_entry_time(p0, p1, a, b, c, radius, sphere0=None, sphere1=None):
    """Earliest fraction of the chord p0 -> p1 at which a voxel there could touch the triangle abc,
    if the chord ends within TRIANGLE_IMPACT_DEPTH radii of its plane or crosses it, over the
    triangle, from a start further than that and IMPACT_CLOSING radii further; 1.0 otherwise.
    sphere0, sphere1: the voxel's support sphere at the start and at the end (its centre less the
    particle's, world, and its radius; None: none), whose reach towards the plane beyond a radius
    (support_lift) is taken off its heights."""
    normal = vector_cross(b - a, c - a)
    length = np.linalg.norm(normal)
    if length <= 0.0:
        return 1.0
    normal = normal / length
    s0 = float(normal @ (p0 - a))
    s1 = float(normal @ (p1 - a))
    side = 1.0 if s0 >= 0.0 else -1.0
    towards = -side * normal
    lift0 = 0.0 if sphere0 is None else support_lift(sphere0[:3], sphere0[3], towards, radius)
    lift1 = 0.0 if sphere1 is None else support_lift(sphere1[:3], sphere1[3], towards, radius)
    h0, h1 = side * s0 - lift0, side * s1 - lift1
    deep = TRIANGLE_IMPACT_DEPTH * radius
    if h0 <= deep or h1 >= deep or h0 - h1 < IMPACT_CLOSING * radius:
        return 1.0
    # where the chord comes within the depth: over the triangle (within a radius of it)?
    f = (h0 - deep) / (h0 - h1)
    at_depth = p0 + f * (p1 - p0) - side * ((1.0 - f) * lift0 + f * lift1) * normal
    q, _, _ = closest_point_on_triangle(at_depth, a, b, c)
    if np.linalg.norm(q - at_depth) >= radius:
        return 1.0
    touch = TRIANGLE_IMPACT_DISTANCE * radius
    return 0.0 if h0 <= touch else (h0 - touch) / (h0 - h1)


def support_lift(sphere_world, sphere_radius, u, radius):
    """How much further than ``radius`` a voxel with this support sphere (its centre less the
    particle's, world; radius 0: none) reaches along the unit direction u, where the sphere's patch
    faces u (30_colliders.cl sphere_patch_support); 0 where it has none or the patch faces away."""
    if sphere_radius <= 0.0:
        return 0.0
    depth, _ = sphere_patch_support(u, sphere_world, sphere_radius, SUPPORT_SPHERE_REACH * radius)
    return depth - radius if np.isfinite(depth) else 0.0


def impact_times(model, x0, q0, x1, q1, extent, triangle_vertices, substeps_per_detection: int) -> np.ndarray:
    """(B,) each body's time of impact over its substep's motion from (x0, q0) to (x1, q1), a
    fraction of it; 1.0 where it meets nothing it would pass, or moves too slowly to be swept."""
    r = model.particle_radius
    body = model.particle_body
    times = np.ones(model.body_count)
    fast = np.flatnonzero(body_motion(x0, q0, x1, q1, extent) * substeps_per_detection > IMPACT_MOTION * r)
    if len(fast) == 0:
        return times
    # every particle where it is now (the targets)
    dynamic = body != STATIC_BODY
    now = model.particle_offset.copy()
    rot1 = quaternion_to_matrix(q1)
    now[dynamic] = x1[body[dynamic]] + np.einsum("pij,pj->pi", rot1[body[dynamic]], model.particle_offset[dynamic])
    rot0 = quaternion_to_matrix(q0)
    for b in fast:
        first = model.body_first_particle[b]
        offsets = model.particle_offset[first:first + model.body_particle_count[b]]
        start = x0[b] + offsets @ rot0[b].T
        end = x1[b] + offsets @ rot1[b].T
        others = now[body != b]
        best = 1.0
        spheres = model.particle_support_sphere[first:first + model.body_particle_count[b]]
        for p0, p1, sphere in zip(start, end, spheres):
            d = p1 - p0
            best = min(best, float(chord_entry_time(p0, d, others, IMPACT_DISTANCE * r, IMPACT_DEPTH * r,
                                                    IMPACT_CLOSING * r).min(initial=1.0)))
            # the support sphere at the start pose and the end pose
            sphere0 = np.append(rot0[b] @ sphere[:3], sphere[3])
            sphere1 = np.append(rot1[b] @ sphere[:3], sphere[3])
            for tri in model.mesh_triangles:
                best = min(best, triangle_entry_time(p0, p1, *triangle_vertices[tri], r, sphere0, sphere1))
        times[b] = best
    return times


def interpolated_pose(x0, q0, x1, q1, t):
    """The pose a fraction t of the way from (x0, q0) to (x1, q1): position linear, orientation
    normalised linear (the shorter way). q: (w, x, y, z)."""
    sign = 1.0 if float(q0 @ q1) >= 0.0 else -1.0
    q = (1.0 - t) * q0 + t * sign * q1
    return (1.0 - t) * x0 + t * x1, q / np.linalg.norm(q)
