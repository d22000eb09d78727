"""Conversion stage 2: each future body's evaluated mesh in its own axis-aligned frame (``Shape``),
one shape shared by linked duplicates and by instances of one mesh of about the same size."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..core import voxelize as vox
from .gather_objects import SceneItem
from .scene_objects import GEOMETRY_TYPES, ZERO_SCALE, no_surface_reason, read_evaluated_mesh

FLAT_RATIO = 1e-3  # an extent below this fraction of the largest one counts as flat
SHAPE_KEY_DIGITS = 5  # scale/shear of linked duplicates equal to this many decimals share one voxelization
# Instances of one mesh whose sizes agree within 1 % (and proportions within about 0.5 %) share one
# voxelization, made at the size of the first of them: a scatter with random scales would otherwise
# voxelize every instance (1.8 ms each, 3 minutes for 100k). Each body's particles still follow its own
# scale (placed through M S^-1, which stretches them by at most 1 %) and its mass its own volume; the
# collision surface moves by at most 0.5 % of the body's size, a few millimetres on a 60 cm rock, far
# below a particle radius.
INSTANCE_SIZE_STEP = 0.01  # in ln(size)
INSTANCE_SHAPE_DIGITS = 2


@dataclass
class Shape:
    """Geometry of one object (or of a group of linked duplicates) in its own axis-aligned frame."""

    vertices: np.ndarray  # (V, 3) in the object's frame: S @ local vertex
    triangles: np.ndarray
    closed: bool
    volume: float
    area: float
    extents: np.ndarray  # (3,) bounding box in the frame
    inv_stretch: np.ndarray | None = None  # S^-1 of the object(s) this shape was made for
    result: vox.VoxelResult | None = None  # its particles, once voxelized

    def size(self) -> float:
        """Thinnest extent, or the second thinnest for flat shapes."""
        e = np.sort(self.extents)
        if e[0] > FLAT_RATIO * e[2]:
            return float(e[0])
        return float(e[1]) if e[1] > FLAT_RATIO * e[2] else float(e[2])

    def estimate(self, radius: float) -> int:
        d = 2 * radius
        if self.closed and self.volume > 0:
            return int(math.ceil(self.volume / d**3))
        return int(math.ceil(1.5 * self.area / d**2)) + 1


@dataclass
class ShapedBody:
    item: SceneItem
    shape: Shape  # shared by linked duplicates

    def rotation(self) -> np.ndarray:
        """R = M S^-1: the rotation (or reflection) of the object's frame in world space."""
        return self.item.matrix_world[:3, :3] @ self.shape.inv_stretch


@dataclass
class BodyGeometry:
    """Stage 2: each future body's evaluated mesh in its own frame."""

    bodies: list  # list[ShapedBody]
    skipped: list

    def counted_shapes(self) -> list:
        """(shape, number of bodies using it) for each distinct shape, in order of first use."""
        unique: dict = {}
        for body in self.bodies:
            unique.setdefault(id(body.shape), [body.shape, 0])[1] += 1
        return [(s, n) for s, n in unique.values()]


# Modifiers whose result depends only on the mesh and the modifier's own settings (not on the
# object's transform, time or other objects, as long as no object pointer is set): duplicates with
# equal stacks of these still share one voxelization.
SHAREABLE_MODIFIERS = {"SUBSURF", "BEVEL", "SOLIDIFY", "TRIANGULATE", "DECIMATE", "EDGE_SPLIT", "WELD",
                       "REMESH", "SMOOTH", "MIRROR", "ARRAY", "WIREFRAME", "SKIN", "MULTIRES"}
_IGNORED_MODIFIER_PROPS = {"rna_type", "name", "is_active", "show_expanded", "show_on_cage", "show_in_editmode",
                           "is_override_data", "persistent_uid", "use_pin_to_last", "execution_time",
                           "show_render", "use_apply_on_spline"}


def _is_id(value) -> bool:
    import bpy

    return isinstance(value, bpy.types.ID)


def _modifier_signature(obj):
    """Hashable description of the modifier stack, or None when it may depend on more than the mesh."""
    sig = []
    for mod in obj.modifiers:
        if mod.type not in SHAREABLE_MODIFIERS:
            return None
        if not mod.show_viewport:
            continue
        values = []
        for prop in mod.bl_rna.properties:
            ident = prop.identifier
            if ident in _IGNORED_MODIFIER_PROPS or prop.type == "COLLECTION":
                continue
            value = getattr(mod, ident, None)
            if prop.type == "POINTER":
                if value is None:
                    continue
                if _is_id(value) or (ident == "custom_profile" and getattr(mod, "profile_type", "") == "CUSTOM"):
                    return None  # uses another object/texture/data, or a per-modifier curve
                continue  # an owned, unused sub-struct
            if isinstance(value, (set, frozenset)):
                value = tuple(sorted(value))
            elif hasattr(value, "__len__") and not isinstance(value, str):
                value = tuple(value)
            values.append((ident, value))
        sig.append((mod.type, tuple(values)))
    return tuple(sig)


def _geometry_key(obj):
    """Key under which objects share identical local geometry, or None (evaluate on its own)."""
    if obj.type not in GEOMETRY_TYPES or obj.type == "META" or obj.data is None:
        return None
    if len(obj.modifiers):
        signature = _modifier_signature(obj)
        if signature is None:
            return None
        return (obj.type, obj.data.as_pointer(), signature)
    return (obj.type, obj.data.as_pointer())


def _frame_shape(vertices_local, triangles, stretch) -> Shape:
    v = vertices_local @ stretch.T
    v, t = vox.weld(v, triangles)
    closed, _ = vox.edge_topology(t)
    volume = abs(vox.signed_volume(v, t)) if closed else 0.0
    area = vox.surface_area(v, t)
    extents = np.ptp(v, axis=0) if len(v) else np.zeros(3)
    return Shape(v, t, closed, volume, area, extents)


def body_geometry(items, depsgraph) -> BodyGeometry:
    """Each item's evaluated mesh in its own frame (``Shape``); linked duplicates share one shape.
    Items that cannot become a body (no surface, zero scale, no faces) are skipped with a reason."""
    skipped: list[tuple[str, str]] = []
    candidates = []
    for item in items:
        reason = None if item.instance_mesh is not None else no_surface_reason(item.obj)
        if reason:
            skipped.append((item.name, reason))
            continue
        candidates.append(item)
    matrices = np.array([item.matrix_world for item in candidates], dtype=np.float64).reshape(-1, 4, 4)
    m3 = matrices[:, :3, :3]
    # shape key from the metric G = M^T M = S^2 (cheap, no per-object SVD); matrix_world is float32
    # in Blender, so equal scales agree to ~1e-7, not exactly: round relative to the size
    gram = np.einsum("kji,kjl->kil", m3, m3)
    size2 = np.trace(gram, axis1=1, axis2=2) / 3.0
    det = np.abs(np.linalg.det(m3))
    valid = (size2 > 0) & (det > ZERO_SCALE * np.maximum(size2, 1e-300) ** 1.5) & np.isfinite(matrices).all(axis=(1, 2))
    safe2 = np.where(valid, size2, 1.0)
    rel_keys = [tuple(r) for r in (np.round(gram / safe2[:, None, None], SHAPE_KEY_DIGITS) + 0.0).reshape(-1, 9).tolist()]
    log_keys = (np.round(0.5 * np.log(safe2), SHAPE_KEY_DIGITS) + 0.0).tolist()
    instance = np.array([item.instance_mesh is not None for item in candidates], dtype=bool)
    if instance.any():  # coarser keys for instances (INSTANCE_SIZE_STEP)
        coarse_rel = (np.round(gram / safe2[:, None, None], INSTANCE_SHAPE_DIGITS) + 0.0).reshape(-1, 9).tolist()
        coarse_log = np.round(0.5 * np.log(safe2) / INSTANCE_SIZE_STEP).astype(np.int64).tolist()
        for i in np.nonzero(instance)[0]:
            rel_keys[i], log_keys[i] = tuple(coarse_rel[i]), coarse_log[i]
    shapes: dict = {}  # shape key -> Shape, or the reason the geometry cannot be a body
    bodies = []
    for i, item in enumerate(candidates):
        if not valid[i]:
            skipped.append((item.name, "has zero scale"))
            continue
        instance = item.instance_mesh
        key = ("instance", item.instancer, instance.ordinal) if instance is not None else _geometry_key(item.obj)
        shape_key = None if key is None else key + (log_keys[i],) + rel_keys[i]
        shape = shapes.get(shape_key) if shape_key is not None else None
        if shape is None:
            mesh = (instance.vertices, instance.triangles) if instance is not None else read_evaluated_mesh(item.obj, depsgraph)
            if mesh is None or len(mesh[1]) == 0:
                skipped.append((item.name, "has no faces"))
                if shape_key is not None:
                    shapes[shape_key] = "has no faces of non-zero area"
                continue
            _, stretch = vox.polar_decomposition(m3[i])
            shape = _frame_shape(mesh[0], mesh[1], stretch)
            shape.inv_stretch = np.linalg.inv(stretch)
            if shape.area <= 0 or len(shape.triangles) == 0:
                skipped.append((item.name, "has zero area and volume"))
                shape = "has no faces of non-zero area"
            if shape_key is not None:
                shapes[shape_key] = shape
            if isinstance(shape, str):
                continue
        elif isinstance(shape, str):
            skipped.append((item.name, shape))
            continue
        bodies.append(ShapedBody(item, shape))
    return BodyGeometry(bodies, skipped)
