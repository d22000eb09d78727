"""Rotations and poses in numpy, the one place for them (no bpy): the core, the bake, the preview
and the benchmarks all use these.

Conventions (Blender's): quaternions are (w, x, y, z), matrices act on column vectors, every
function works on one item or on stacks of them (leading axes).

A body's *pose* is its centre of mass ``x`` and orientation ``q``; the object it came from had
world matrix ``M0`` at the start, when its centre of mass sat at ``com_local`` in the frame the
particles were given in (world space for converted objects). The object's world matrix at pose
(x, q) is ``T(x) R(q) T(-com_local) M0`` (``pose_matrices``).
"""
from __future__ import annotations

import math

import numpy as np


def quaternion_to_matrix(q) -> np.ndarray:
    """Rotation matrix of unit quaternion(s) (w, x, y, z); (..., 4) -> (..., 3, 3) (seed eq. 5.11)."""
    q = np.asarray(q, dtype=np.float64)
    if q.shape == (4,):
        # one quaternion in Python floats: the same products and sums as the stacked path, to the
        # bit, at a fifth of its cost (the reference engine turns one body at a time)
        w, x, y, z = q.tolist()
        return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                         [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                         [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])
    w, x, y, z = np.moveaxis(q, -1, 0)
    m = np.empty(q.shape[:-1] + (3, 3))
    m[..., 0, 0] = 1 - 2 * (y * y + z * z)
    m[..., 0, 1] = 2 * (x * y - w * z)
    m[..., 0, 2] = 2 * (x * z + w * y)
    m[..., 1, 0] = 2 * (x * y + w * z)
    m[..., 1, 1] = 1 - 2 * (x * x + z * z)
    m[..., 1, 2] = 2 * (y * z - w * x)
    m[..., 2, 0] = 2 * (x * z - w * y)
    m[..., 2, 1] = 2 * (y * z + w * x)
    m[..., 2, 2] = 1 - 2 * (x * x + y * y)
    return m


def vector_cross(a, b) -> np.ndarray:
    """a x b of two 3-vectors with np.cross's bits (each component one rounded product less another,
    as numpy computes it) at a tenth of its cost on a single pair, which is how the reference
    engine takes them; anything but two float64 3-vectors is np.cross's."""
    if (type(a) is np.ndarray and type(b) is np.ndarray and a.shape == (3,) and b.shape == (3,)
            and a.dtype == np.float64 and b.dtype == np.float64):
        a0, a1, a2 = a.tolist()
        b0, b1, b2 = b.tolist()
        return np.array([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0])
    return np.cross(a, b)


def normalized_quaternion_matrices(q) -> np.ndarray:
    """``quaternion_to_matrix`` of quaternions normalised first (poses read back from float32)."""
    q = np.asarray(q, dtype=np.float64)
    return quaternion_to_matrix(q / np.linalg.norm(q, axis=-1, keepdims=True))


def matrix_quaternions(m) -> np.ndarray:
    """Unit quaternions (w, x, y, z) of rotation matrices (..., 3, 3), numerically safe branch per item."""
    m = np.asarray(m, dtype=np.float64)
    shape = m.shape[:-2]
    m = m.reshape(-1, 3, 3)
    q = np.empty((m.shape[0], 4))
    m00, m11, m22 = m[:, 0, 0], m[:, 1, 1], m[:, 2, 2]
    trace = m00 + m11 + m22
    branch = np.argmax(np.stack([trace, m00, m11, m22], axis=1), axis=1)
    for b in range(4):
        idx = np.nonzero(branch == b)[0]
        if not len(idx):
            continue
        a = m[idx]
        if b == 0:
            s = 2.0 * np.sqrt(1.0 + trace[idx])
            q[idx] = np.stack([0.25 * s, (a[:, 2, 1] - a[:, 1, 2]) / s, (a[:, 0, 2] - a[:, 2, 0]) / s,
                               (a[:, 1, 0] - a[:, 0, 1]) / s], axis=1)
        elif b == 1:
            s = 2.0 * np.sqrt(np.maximum(1.0 + a[:, 0, 0] - a[:, 1, 1] - a[:, 2, 2], 1e-300))
            q[idx] = np.stack([(a[:, 2, 1] - a[:, 1, 2]) / s, 0.25 * s, (a[:, 0, 1] + a[:, 1, 0]) / s,
                               (a[:, 0, 2] + a[:, 2, 0]) / s], axis=1)
        elif b == 2:
            s = 2.0 * np.sqrt(np.maximum(1.0 + a[:, 1, 1] - a[:, 0, 0] - a[:, 2, 2], 1e-300))
            q[idx] = np.stack([(a[:, 0, 2] - a[:, 2, 0]) / s, (a[:, 0, 1] + a[:, 1, 0]) / s, 0.25 * s,
                               (a[:, 1, 2] + a[:, 2, 1]) / s], axis=1)
        else:
            s = 2.0 * np.sqrt(np.maximum(1.0 + a[:, 2, 2] - a[:, 0, 0] - a[:, 1, 1], 1e-300))
            q[idx] = np.stack([(a[:, 1, 0] - a[:, 0, 1]) / s, (a[:, 0, 2] + a[:, 2, 0]) / s,
                               (a[:, 1, 2] + a[:, 2, 1]) / s, 0.25 * s], axis=1)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return q.reshape(shape + (4,))


def quaternion_multiply(a, b) -> np.ndarray:
    """Hamilton product a b of quaternions (w, x, y, z): the rotation b, then a."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    aw, ax, ay, az = np.moveaxis(a, -1, 0)
    bw, bx, by, bz = np.moveaxis(b, -1, 0)
    return np.stack([
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    ], axis=-1)


def axis_angle_quaternions(axis, angle) -> np.ndarray:
    """Quaternions of rotations by ``angle`` (radians) about ``axis`` (normalised here); (..., 3), (...)."""
    axis = np.asarray(axis, dtype=np.float64)
    axis = axis / np.linalg.norm(axis, axis=-1, keepdims=True)
    half = 0.5 * np.asarray(angle, dtype=np.float64)
    return np.concatenate([np.cos(half)[..., None], axis * np.sin(half)[..., None]], axis=-1)


def rotate_by_vector(v, t) -> np.ndarray:
    """One vector v turned by the rotation vector t (angle |t| about t / |t|; Rodrigues, as
    00_common.h rotate_by_vector)."""
    v, t = np.asarray(v, dtype=np.float64), np.asarray(t, dtype=np.float64)
    angle = float(np.linalg.norm(t))
    if angle < 1e-12:
        return v
    k = t / angle
    return v * math.cos(angle) + vector_cross(k, v) * math.sin(angle) + k * (k @ v) * (1.0 - math.cos(angle))


def pose_matrices(positions, orientations, com_local, matrix_world_start) -> np.ndarray:
    """World matrices T(x) R(q) T(-com_local) M0 of objects at simulated poses.

    positions (..., B, 3) and orientations (..., B, 4) (normalised here; any leading axes, e.g.
    frames), com_local (B, 3), matrix_world_start (B, 4, 4) -> (..., B, 4, 4)."""
    positions = np.asarray(positions, dtype=np.float64)
    start = np.asarray(matrix_world_start, dtype=np.float64)
    com = np.asarray(com_local, dtype=np.float64)
    bodies = start.shape[0]
    leading = positions.shape[:-2]
    # one frame axis always, so that every caller runs the same arithmetic as the bake
    positions = positions.reshape(-1, bodies, 3)
    rot = normalized_quaternion_matrices(np.asarray(orientations, dtype=np.float64).reshape(-1, bodies, 4))
    frames = positions.shape[0]
    rigid = np.zeros((frames, bodies, 4, 4))
    rigid[..., :3, :3] = rot
    rigid[..., :3, 3] = positions - np.einsum("fbij,bj->fbi", rot, com)
    rigid[..., 3, 3] = 1.0
    return (rigid @ start[None]).reshape(leading + (bodies, 4, 4))
