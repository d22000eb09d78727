"""A body pair's contact records reduced to manifolds of a few points (the rigid step's X2;
kernels/61_pair_colouring.cl reduce_pair_records mirrors it).

Two cubes face on face carry 9-25 voxel records; the coloured solve, Jacobi within a pair, splits
each body's mass over all of them and converges slowly with few passes. Box3D (convex_manifold.c
b3ReduceManifoldPoints) keeps at most 4 points of a manifold: the deepest (plus a fixed tangent
direction, so that equal depths pick the same corner every time), the one furthest from it, the
one spanning the largest triangle with those two, and the one adding the most area outside that
triangle. A pair's records are first grouped by normal (each group's normal is its first record's;
a record joins the first group whose normal is within MANIFOLD_NORMAL_COSINE), so that a cube
touching the ground and a wall (both static: one pair) keeps a manifold on each. Records are
visited in the order the pair lists them, and a later candidate replaces the best so far only if
it beats it by MANIFOLD_PECKING (Box3D's pecking order: the same points stay chosen as depths
wobble between detections, which keeps their warm start).
"""
from __future__ import annotations

import numpy as np

from .rotations import vector_cross

MANIFOLD_NORMAL_COSINE = 0.95
MANIFOLD_PECKING = 0.95
# groups of one pair beyond this keep all their records (none seen in piles: a face, an edge)
MANIFOLD_GROUPS = 8
# points nearer than this (particle radii) to the chosen ones add nothing (Box3D: its speculative
# distance); voxel records lie 1-2 radii apart
MANIFOLD_TOLERANCE = 0.5
MANIFOLD_POINTS = 4  # Box3D's
# The first point is chosen among those within this many particle radii of the deepest: Box3D's
# tangent tie-break is meant for depths its few centimetres of speculative distance apart, and
# ours reach a voxel and more (a cube landing on its edge kept its far side's points)
MANIFOLD_DEPTH_BAND = 0.5


def arbitrary_perpendicular(n: np.ndarray) -> np.ndarray:
    """Box3D's b3ArbitraryPerp: a fixed vector normal to unit n (not unit)."""
    a, b = 0.67, -0.42
    if abs(n[0]) > 0.5:
        return np.array([a * n[1] + b * n[2], -a * n[0], -b * n[0]])
    if abs(n[1]) > 0.5:
        return np.array([a * n[1], -a * n[0] + b * n[2], -b * n[1]])
    return np.array([a * n[2], b * n[2], -a * n[0] - b * n[1]])


def _best(candidates, score, start):
    """The first of ``candidates`` whose score beats the best so far by the pecking factor."""
    best, best_score = None, start
    for t in candidates:
        s = score(t)
        if MANIFOLD_PECKING * s > best_score:
            best, best_score = t, s
    return best


def manifold_groups(normals) -> list[int]:
    """The records leading the groups of normals: each record whose normal is in no earlier group
    starts one, up to MANIFOLD_GROUPS."""
    leaders: list[int] = []
    for t in range(len(normals)):
        if len(leaders) < MANIFOLD_GROUPS and manifold_group(normals[t], normals, leaders) < 0:
            leaders.append(t)
    return leaders


def manifold_group(n, normals, leaders) -> int:
    """The first group whose leader's normal is within MANIFOLD_NORMAL_COSINE of n, or -1."""
    for g, leader in enumerate(leaders):
        if n @ normals[leader] >= MANIFOLD_NORMAL_COSINE:
            return g
    return -1


def reduce_manifold(normals, points, depths, limit, radius) -> list[int]:
    """Indices (ascending) of the records kept: at most ``limit`` per group of normals.
    normals (N, 3) unit, points (N, 3) contact points in one frame, depths (N,) > 0 touching: how
    deep each gets by the next detection (61_pair_colouring.cl depth_by_next_detection)."""
    count = len(depths)
    leaders = manifold_groups(normals)
    group = np.array([manifold_group(normals[t], normals, leaders) for t in range(count)], dtype=int)
    kept = set(np.flatnonzero(group < 0).tolist())
    tolerance2 = (MANIFOLD_TOLERANCE * radius) ** 2
    for g, leader in enumerate(leaders):
        n = normals[leader]
        members = [t for t in range(count) if group[t] == g]
        chosen: list[int] = []

        def open_(members=members, chosen=chosen):
            return [t for t in members if t not in chosen]

        def planar(v, n=n):
            return v - (v @ n) * n

        # 1: the deepest, ties along a fixed tangent, among those within MANIFOLD_DEPTH_BAND of the
        # deepest; its scores may be negative, so a later one must beat the best by
        # (1 - MANIFOLD_PECKING) radii instead of the factor
        search = arbitrary_perpendicular(n)
        deepest = max(depths[t] for t in members)
        near = [t for t in members if depths[t] >= deepest - MANIFOLD_DEPTH_BAND * radius]
        first, best_score = near[0], depths[near[0]] + search @ points[near[0]]
        for t in near[1:]:
            s = depths[t] + search @ points[t]
            if s > best_score + (1.0 - MANIFOLD_PECKING) * radius:
                first, best_score = t, s
        chosen.append(first)
        a = points[first]
        if limit >= 2:
            # 2: the furthest from it in the plane (and deep)
            t = _best(open_(), lambda t: planar(points[t] - a) @ planar(points[t] - a)
                      + 4.0 * max(depths[t], 0.0) ** 2, tolerance2)
            if t is not None:
                chosen.append(t)
        if limit >= 3 and len(chosen) == 2:
            b = points[chosen[1]]
            ba = b - a

            def area(t):
                return n @ vector_cross(ba, points[t] - a)
            t = _best(open_(), lambda t: abs(area(t)), tolerance2)
            if t is not None:
                sign = -1.0 if area(t) < 0.0 else 1.0
                chosen.append(t)
                c = points[t]
                if limit >= 4:
                    # 4: the most area added outside the triangle abc
                    def added(t):
                        p = points[t]
                        return max(sign * (n @ vector_cross(p - a, ba)), sign * (n @ vector_cross(p - b, c - b)),
                                   sign * (n @ vector_cross(p - c, a - c)))
                    t = _best(open_(), added, tolerance2)
                    if t is not None:
                        chosen.append(t)
        kept.update(chosen)
    return sorted(kept)
