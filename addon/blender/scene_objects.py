"""What the conversion reads of a Blender object: its add-on settings, its transform (refused with a
line for the user when it holds a NaN or infinity), its world matrix and its evaluated mesh; and
ConversionError, the error every conversion stage raises for a problem with the user's scene."""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..core.settings import ObjectSettings

GEOMETRY_TYPES = {"MESH", "CURVE", "SURFACE", "FONT", "META"}
ZERO_SCALE = 1e-9  # relative singular value of matrix_world below which an object has zero scale


class ConversionError(ValueError):
    """A problem with the user's scene, with a message meant for the user."""


_OBJECT_FIELDS = tuple((f.name, f.default) for f in dataclasses.fields(ObjectSettings))


def object_settings(obj) -> ObjectSettings:
    """Per-object settings from ``obj.prb`` where it exists, defaults otherwise."""
    prb = getattr(obj, "prb", None)
    if prb is None:
        return ObjectSettings()
    values = {}
    for name, default in _OBJECT_FIELDS:
        value = getattr(prb, name, default)
        values[name] = tuple(value) if isinstance(default, tuple) else value
    return ObjectSettings(**values)


# Blender's float fields clamp an infinity typed into them to the float range's end (about 3.4e38);
# an object's fields holding it make a world matrix that overflows like an infinity
FLOAT_LIMIT = float(np.finfo(np.float32).max)


def first_non_finite(values, limit: float = math.inf):
    """The first NaN or infinity among ``values``, counting a magnitude at ``limit`` or beyond as an
    infinity of its sign (a float), or None when there is none."""
    for v in values:
        if not math.isfinite(v):
            return v
        if abs(v) >= limit:
            return math.copysign(math.inf, v)
    return None


def _own_transform_fields(obj):
    """(what the message calls it, values) of the fields Blender composes an object's basis matrix
    from: its rotation and delta rotation as its rotation mode reads them (axis-angle has no delta
    the Python API shows)."""
    mode = obj.rotation_mode
    if mode == "QUATERNION":
        rotation, delta_rotation = obj.rotation_quaternion, obj.delta_rotation_quaternion
    elif mode == "AXIS_ANGLE":
        rotation, delta_rotation = obj.rotation_axis_angle, ()
    else:
        rotation, delta_rotation = obj.rotation_euler, obj.delta_rotation_euler
    return (("location", obj.location), ("rotation", rotation), ("scale", obj.scale),
            ("delta location", obj.delta_location), ("delta rotation", delta_rotation),
            ("delta scale", obj.delta_scale))


def transform_problem(obj, frame: int | None = None) -> str | None:
    """Why ``obj``'s transform cannot be simulated, as one line naming the object and the field; None
    when it can. Refused: a NaN or infinity in what the conversion and the bake read of it, its own
    location, rotation, scale and their deltas, its parents' (its world matrix composes them), and
    its world matrix itself (constraints, drivers, a parent inverse)."""
    at = f" at frame {frame}" if frame is not None else ""

    def problem(name, field, value):
        return f'Object {name} has a non-finite {field} ({value}){at}: fix its transform before baking.'

    owner, name = obj, f'"{obj.name}"'
    while owner is not None:
        for field, values in _own_transform_fields(owner):
            value = first_non_finite(values, FLOAT_LIMIT)
            if value is not None:
                return problem(name, field, value)
        owner = owner.parent
        name = f'"{getattr(owner, "name", "")}" (parent of "{obj.name}")'
    value = first_non_finite(x for row in obj.matrix_world for x in row)
    return None if value is None else problem(f'"{obj.name}"', "world matrix", value)


def read_evaluated_mesh(obj, depsgraph):
    """(vertices (V, 3) local float64, triangles (T, 3) int32) of the evaluated object, or None
    when it has no mesh. Modifiers, curve bevels, text etc. are applied."""
    obj_eval = obj.evaluated_get(depsgraph)
    try:
        mesh = obj_eval.to_mesh()
    except RuntimeError:
        return None
    if mesh is None:
        return None
    try:
        n = len(mesh.vertices)
        verts = np.zeros(n * 3, dtype=np.float32)
        if n:
            position = mesh.attributes.get("position") if hasattr(mesh, "attributes") else None
            if position is not None:
                position.data.foreach_get("vector", verts)
            else:
                mesh.vertices.foreach_get("co", verts)
        mesh.calc_loop_triangles()
        tris = np.zeros(len(mesh.loop_triangles) * 3, dtype=np.int32)
        if len(tris):
            mesh.loop_triangles.foreach_get("vertices", tris)
    finally:
        obj_eval.to_mesh_clear()
    return verts.reshape(-1, 3).astype(np.float64), tris.reshape(-1, 3)


def world_matrices(objects) -> np.ndarray:
    """(N, 4, 4) world matrices, read in one go."""
    return np.array([obj.matrix_world for obj in objects], dtype=np.float64).reshape(-1, 4, 4)


def no_surface_reason(obj):
    if obj.type not in GEOMETRY_TYPES:
        return f"is of type {obj.type.title()}, which has no surface to collide with"
    return None
