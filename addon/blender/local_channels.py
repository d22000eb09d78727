"""World transforms -> each object's own keyframe channels (``local_channels``): the parent space and
delta transforms taken out, the rotation in the object's own rotation mode, continuous across frames
(core.rotations has the conversions themselves). All on whole arrays, without bpy."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..core.rotations import matrix_quaternions

EULER_ORDERS = ("XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX")


def continuous_quaternions(q: np.ndarray) -> np.ndarray:
    """Flip signs along axis 0 (frames) so consecutive quaternions lie in the same hemisphere."""
    q = np.array(q, dtype=np.float64, copy=True)
    for f in range(1, q.shape[0]):
        flip = np.einsum("...i,...i->...", q[f], q[f - 1]) < 0
        q[f][flip] *= -1
    return q


# Blender's euler orders as (i, j, k, parity) (math_rotation.cc, rotOrders)
_EULER_AXES = {"XYZ": (0, 1, 2, 0), "XZY": (0, 2, 1, 1), "YXZ": (1, 0, 2, 1),
               "YZX": (1, 2, 0, 0), "ZXY": (2, 0, 1, 0), "ZYX": (2, 1, 0, 1)}


def _matrix_to_euler_pair(m: np.ndarray, order: str):
    """Both euler solutions of rotation matrices m (N, 3, 3) for ``order`` (Blender's mat3_normalized_to_eulo2)."""
    i, j, k, parity = _EULER_AXES[order]
    # Blender's mat[a][b] is column a, row b: numpy m[..., b, a]
    def c(a, b):
        return m[:, b, a]
    cy = np.hypot(c(i, i), c(i, j))
    e1 = np.empty((m.shape[0], 3))
    e2 = np.empty((m.shape[0], 3))
    ok = cy > 16.0 * np.finfo(np.float32).eps
    e1[:, i] = np.where(ok, np.arctan2(c(j, k), c(k, k)), np.arctan2(-c(k, j), c(j, j)))
    e1[:, j] = np.arctan2(-c(i, k), cy)
    e1[:, k] = np.where(ok, np.arctan2(c(i, j), c(i, i)), 0.0)
    e2[:, i] = np.where(ok, np.arctan2(-c(j, k), -c(k, k)), e1[:, i])
    e2[:, j] = np.where(ok, np.arctan2(-c(i, k), -cy), e1[:, j])
    e2[:, k] = np.where(ok, np.arctan2(-c(i, j), -c(i, i)), e1[:, k])
    if parity:
        e1, e2 = -e1, -e2
    return e1, e2


def continuous_eulers(m: np.ndarray, order: str, first_reference: np.ndarray | None = None) -> np.ndarray:
    """Euler angles (F, N, 3) of matrices (F, N, 3, 3), each frame the solution nearest the previous one.

    ``first_reference`` (N, 3): angles the first frame should stay close to (the object's current ones).
    """
    frames, n = m.shape[:2]
    out = np.empty((frames, n, 3))
    two_pi = 2.0 * math.pi
    prev = first_reference
    for f in range(frames):
        e1, e2 = _matrix_to_euler_pair(m[f], order)
        if prev is None:
            # no reference: Blender's choice, the solution with the smaller total rotation
            pick = np.abs(e1).sum(axis=1) <= np.abs(e2).sum(axis=1)
            cur = np.where(pick[:, None], e1, e2)
        else:
            e1 = e1 + np.round((prev - e1) / two_pi) * two_pi
            e2 = e2 + np.round((prev - e2) / two_pi) * two_pi
            pick = np.abs(e1 - prev).sum(axis=1) <= np.abs(e2 - prev).sum(axis=1)
            cur = np.where(pick[:, None], e1, e2)
        out[f] = cur
        prev = cur
    return out


def axis_angles(q: np.ndarray) -> np.ndarray:
    """(angle, x, y, z) of continuous quaternions (angle continuous as the quaternion is)."""
    w = np.clip(q[..., 0], -1.0, 1.0)
    v = q[..., 1:]
    s = np.linalg.norm(v, axis=-1)
    angle = 2.0 * np.arctan2(s, w)
    axis = np.where(s[..., None] > 1e-12, v / np.maximum(s, 1e-300)[..., None], np.array([0.0, 1.0, 0.0]))
    return np.concatenate([angle[..., None], axis], axis=-1)


def _matrix_np(matrix) -> np.ndarray:
    return np.array([list(row) for row in matrix], dtype=np.float64)


@dataclass
class Channels:
    """Key values for one object on all keyed frames."""

    obj: object
    location: np.ndarray  # (F, 3)
    rotation_path: str  # rotation_euler / rotation_quaternion / rotation_axis_angle
    rotation: np.ndarray  # (F, 3 or 4)


def local_channels(objects, world: np.ndarray, parent_world: dict | None = None) -> list[Channels]:
    """Turn world matrices (F, N, 4, 4) of ``objects`` into their location/rotation channels.

    The parent space of an object (everything between its basis matrix and the world: parent,
    parent inverse, bone/vertex parent) is taken from its current matrices,
    ``matrix_world @ matrix_basis^-1``, and assumed fixed, unless ``parent_world`` maps an object
    name to (F, 4, 4) world matrices of its parent over the keyed frames (moving parents).
    Delta transforms are taken out. The scale is not keyed: it stays the object's own, negative axes
    (mirroring) included. Work is vectorized over objects of the same rotation mode.
    """
    objects = list(objects)
    frames, n = world.shape[:2]
    inv_space = np.empty((n, 4, 4))
    moving = []
    for idx, obj in enumerate(objects):
        m_world = _matrix_np(obj.matrix_world)
        m_basis = _matrix_np(obj.matrix_basis)
        parent_space = m_world @ np.linalg.inv(m_basis)
        inv_space[idx] = np.linalg.inv(parent_space)
        if parent_world and obj.name in parent_world and obj.parent is not None:
            relation = np.linalg.inv(_matrix_np(obj.parent.matrix_world)) @ parent_space
            moving.append((idx, parent_world[obj.name] @ relation))  # (F, 4, 4) parent space per frame
    basis = inv_space[None] @ world
    for idx, spaces in moving:
        basis[:, idx] = np.linalg.inv(spaces) @ world[:, idx]
    location = basis[..., :3, 3] - np.array([tuple(o.delta_location) for o in objects]).reshape(1, n, 3)
    m3 = basis[..., :3, :3]
    # Blender composes the basis as rotation @ diag(scale * delta_scale), and the keys leave that scale
    # as it is: each column is divided by its length with the sign of its axis' scale, so a mirrored
    # object's reflection stays in its negative scale and what remains is the rotation proper.
    # Unsigned lengths would leave a reflection to key as a rotation (one or three negative axes)
    # or a half turn too many (two).
    scale_signs = np.array([np.multiply(tuple(o.scale), tuple(o.delta_scale)) for o in objects]).reshape(n, 3)
    scale_signs = np.where(scale_signs < 0, -1.0, 1.0)
    m3 = m3 / (np.linalg.norm(m3, axis=-2, keepdims=True) * scale_signs[None, :, None, :])
    for idx, obj in enumerate(objects):  # Blender composes delta @ rotation: take the delta out
        if obj.rotation_mode == "AXIS_ANGLE":
            # its delta is DNA's drotAxis/drotAngle (zero angle by default), which the Python API
            # does not expose; Blender applies neither delta_rotation_quaternion nor _euler to it
            continue
        if obj.rotation_mode == "QUATERNION":  # normalised before use, as Blender does
            delta = obj.delta_rotation_quaternion.normalized().to_matrix()
        else:
            delta = obj.delta_rotation_euler.to_matrix()
        delta = _matrix_np(delta)
        if not np.allclose(delta, np.eye(3)):
            m3[:, idx] = delta.T @ m3[:, idx]

    rotation: list = [None] * n
    paths: list = [None] * n
    modes: dict = {}
    for idx, obj in enumerate(objects):
        modes.setdefault(obj.rotation_mode, []).append(idx)
    for mode, idxs in modes.items():
        idxs = np.array(idxs)
        if mode in ("QUATERNION", "AXIS_ANGLE"):
            q = matrix_quaternions(m3[:, idxs])  # (F, k, 4)
            if mode == "QUATERNION":
                current = np.array([tuple(objects[i].rotation_quaternion) for i in idxs])
                flip = np.einsum("ki,ki->k", q[0], current) < 0
            else:
                flip = q[0, :, 0] < 0
            q[0, flip] *= -1
            q = continuous_quaternions(q)
            values = q if mode == "QUATERNION" else axis_angles(q)
            path = "rotation_quaternion" if mode == "QUATERNION" else "rotation_axis_angle"
        else:
            current = np.array([tuple(objects[i].rotation_euler) for i in idxs])
            values = continuous_eulers(m3[:, idxs], mode, current)
            path = "rotation_euler"
        for k, idx in enumerate(idxs):
            rotation[idx] = values[:, k]
            paths[idx] = path
    return [Channels(obj, location[:, idx], paths[idx], rotation[idx]) for idx, obj in enumerate(objects)]
