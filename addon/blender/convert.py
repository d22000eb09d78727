"""Blender objects -> engine input: particle bodies for dynamic objects, triangle meshes for static ones.

Thin layer over ``addon.core.voxelize``: evaluate each object (modifiers applied; curves, text,
surfaces and metaballs through their evaluated mesh), read its arrays with ``foreach_get``, voxelize,
and hand everything to ``ModelBuilder``.

Frames and poses
- Each object is voxelized in a frame aligned with its own axes (the rotation part R of the polar
  decomposition matrix_world[:3, :3] = R S), so a rotated cube is still filled along its edges;
  the particles then go to ``add_body`` in world space with position 0 / identity orientation.
  A simulated pose (x, q) maps back to the object as
      matrix_world(t) = T(x) R(q) T(-com_local) matrix_world(start)       (``object_matrix_at``)
- Objects sharing one datablock, with no modifiers and the same scale/shear S, have identical
  particles in that frame: they are voxelized once (linked duplicates).

Everything is read at ``frame_start``; animated static colliders are also read at every output
frame. The scene's current frame (and subframe) is restored afterwards, also on errors.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..core.model import Material, Model, ModelBuilder, matrix_quaternions
from ..core import voxelize as vox

GEOMETRY_TYPES = {"MESH", "CURVE", "SURFACE", "FONT", "META"}
PARTICLES_ACROSS = 3  # automatic radius: the smallest body gets this many particles across its thinnest extent
MIN_PARTICLES = 8  # fewer particles cannot make a body that rotates and rests believably
FLAT_RATIO = 1e-3  # an extent below this fraction of the largest one counts as flat
ZERO_SCALE = 1e-9
SHAPE_KEY_DIGITS = 5  # scale/shear of linked duplicates equal to this many decimals share one voxelization  # relative singular value of matrix_world below which an object has zero scale
DEFAULT_SETTINGS = dict(mass_mode="DENSITY", density=1000.0, mass=1.0, friction=0.5, bounciness=0.0,
                        initial_velocity=(0.0, 0.0, 0.0), initial_angular_velocity=(0.0, 0.0, 0.0),
                        linear_damping=0.0, angular_damping=0.0, role="NONE")


class ConversionError(ValueError):
    """A problem with the user's scene, with a message meant for the user."""


@dataclass
class BodyLink:
    object_name: str
    body_index: int
    matrix_world: np.ndarray  # (4, 4) at the first frame
    com_local: np.ndarray  # (3,) == model.body_com_local[body_index] (world centre of mass at the first frame)
    particle_count: int = 0
    mode: str = ""  # 'filled', 'shell' or 'filled+shell'


@dataclass
class ColliderMesh:
    object_name: str
    vertices: np.ndarray  # (V, 3) world, at the first frame
    triangles: np.ndarray  # (T, 3) int32
    frames: np.ndarray | None  # (F, V, 3) world positions at output frames 0..F-1, None if it does not move
    material: Material


@dataclass
class ConvertedScene:
    model: Model
    radius: float
    bodies: list  # list[BodyLink]
    colliders: list  # list[str], names of the static objects that became triangle colliders
    skipped: list  # list[tuple[str, str]]: (object name, reason)
    particle_count: int
    radius_auto: bool = False
    frame_start: int = 1
    frame_step: int = 1
    frame_count: int = 0  # output frames after the first: Simulation.frames(frame_count)
    gravity: tuple = (0.0, 0.0, -9.81)
    collider_meshes: list = field(default_factory=list)  # list[ColliderMesh]
    timings: dict = field(default_factory=dict)  # seconds per conversion step


# -- small pure helpers (no bpy) ------------------------------------------------------------------

def object_matrix_at(link: BodyLink, position, orientation) -> np.ndarray:
    """World matrix of the object of ``link`` when its body has COM ``position`` and quaternion
    ``orientation`` (w, x, y, z): T(x) R(q) T(-com_local) matrix_world_at_start."""
    return object_matrices(np.asarray(link.matrix_world)[None], np.asarray(link.com_local)[None],
                           np.asarray(position)[None], np.asarray(orientation)[None])[0]


def object_matrices(matrix_world, com_local, positions, orientations) -> np.ndarray:
    """Vectorized ``object_matrix_at``: (B, 4, 4) start matrices, (B, 3) COMs, (B, 3) positions,
    (B, 4) quaternions -> (B, 4, 4)."""
    from ..core.model import quaternion_to_matrix

    m0 = np.asarray(matrix_world, dtype=np.float64).reshape(-1, 4, 4)
    rot = quaternion_to_matrix(np.asarray(orientations, dtype=np.float64).reshape(-1, 4))
    out = np.zeros_like(m0)
    out[:, :3, :3] = rot @ m0[:, :3, :3]
    com = np.asarray(com_local, dtype=np.float64).reshape(-1, 3)
    out[:, :3, 3] = (np.einsum("bij,bj->bi", rot, m0[:, :3, 3] - com)
                     + np.asarray(positions, dtype=np.float64).reshape(-1, 3))
    out[:, 3, 3] = 1.0
    return out


def object_settings(obj) -> dict:
    """Per-object settings from ``obj.prb`` where it exists, defaults otherwise."""
    prb = getattr(obj, "prb", None)
    out = dict(DEFAULT_SETTINGS)
    if prb is not None:
        for key, default in DEFAULT_SETTINGS.items():
            value = getattr(prb, key, default)
            out[key] = tuple(value) if isinstance(default, tuple) else value
    return out


def material_from(settings: dict) -> Material:
    return Material(friction=float(settings["friction"]), restitution=float(settings["bounciness"]),
                    linear_damping=float(settings["linear_damping"]),
                    angular_damping=float(settings["angular_damping"]))


def _round_up_sig(x: float, digits: int = 2) -> float:
    if x <= 0 or not math.isfinite(x):
        return x
    scale = 10 ** (-int(math.floor(math.log10(x))) + digits - 1)
    return math.ceil(x * scale * (1 - 1e-12)) / scale


def _format_bytes(n: float) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def _round_down_sig(x: float, digits: int = 2) -> float:
    if x <= 0 or not math.isfinite(x):
        return x
    scale = 10 ** (-int(math.floor(math.log10(x))) + digits - 1)
    return math.floor(x * scale) / scale


# -- reading Blender data -------------------------------------------------------------------------

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


def _matrix(obj) -> np.ndarray:
    return np.array(obj.matrix_world, dtype=np.float64)


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


def _possibly_animated(obj) -> bool:
    """Whether the object's evaluated world geometry might change over time (cheap, conservative)."""
    seen = 0
    o = obj
    while o is not None and seen < 64:
        ad = o.animation_data
        if ad is not None and (ad.action is not None or len(ad.drivers) or len(ad.nla_tracks)):
            return True
        if len(o.constraints) or (o is not obj and o.type == "ARMATURE"):
            return True
        o = o.parent
        seen += 1
    if len(obj.modifiers):
        return True
    data = obj.data
    if data is not None:
        ad = getattr(data, "animation_data", None)
        if ad is not None and (ad.action is not None or len(ad.drivers)):
            return True
        keys = getattr(data, "shape_keys", None)
        if keys is not None and keys.animation_data is not None:
            return True
    return False


@dataclass
class _Shape:
    """Geometry of one object (or of a group of linked duplicates) in its own axis-aligned frame."""

    vertices: np.ndarray  # (V, 3) in the object's frame: S @ local vertex
    triangles: np.ndarray
    closed: bool
    volume: float
    area: float
    extents: np.ndarray  # (3,) bounding box in the frame
    result: vox.VoxelResult | None = None
    inv_stretch: np.ndarray | None = None  # S^-1 of the object(s) this shape was made for

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


def _frame_shape(vertices_local, triangles, stretch) -> _Shape:
    v = vertices_local @ stretch.T
    v, t = vox.weld(v, triangles)
    closed, _ = vox.edge_topology(t)
    volume = abs(vox.signed_volume(v, t)) if closed else 0.0
    area = vox.surface_area(v, t)
    extents = np.ptp(v, axis=0) if len(v) else np.zeros(3)
    return _Shape(v, t, closed, volume, area, extents)


def object_shape(obj, depsgraph):
    """(_Shape in the object's frame, rotation R of that frame) or None if it cannot be a body."""
    if obj.type not in GEOMETRY_TYPES:
        return None
    m4 = _matrix(obj)
    rot, stretch = vox.polar_decomposition(m4[:3, :3])
    sv = np.linalg.svd(m4[:3, :3], compute_uv=False)
    if not (sv.max() > 0 and sv.min() > ZERO_SCALE * sv.max()):
        return None
    mesh = read_evaluated_mesh(obj, depsgraph)
    if mesh is None or len(mesh[1]) == 0:
        return None
    shape = _frame_shape(mesh[0], mesh[1], stretch)
    if shape.area <= 0 or len(shape.triangles) == 0:
        return None
    return shape, rot


def shape_particles(obj, depsgraph, radius: float, max_particles: int = 20_000_000):
    """Particle centres (N, 3) of one object in its frame (world = R p + translation), exactly as
    ``convert_scene`` makes them; None when the object cannot become a body."""
    found = object_shape(obj, depsgraph)
    if found is None:
        return None
    try:
        return vox.voxelize(found[0].vertices, found[0].triangles, 2 * radius, max_particles=max_particles,
                            weld_vertices=False).points
    except ValueError as error:
        raise ConversionError(f"{obj.name}: {error}") from error


def automatic_radius_for(objects, depsgraph) -> float | None:
    """The automatic radius ``convert_scene`` would choose for these objects (None: no usable one)."""
    shapes = [found[0] for found in (object_shape(o, depsgraph) for o in objects) if found is not None]
    return automatic_radius(shapes) if shapes else None


# -- the conversion ---------------------------------------------------------------------------------

def _unique_objects(objects):
    seen, out = set(), []
    for obj in objects or ():
        if obj is None or obj.name in seen:
            continue
        seen.add(obj.name)
        out.append(obj)
    return out


def automatic_radius(shapes) -> float:
    """Radius that gives the smallest shape ``PARTICLES_ACROSS`` particles across its thinnest extent."""
    size = min(s.size() for s in shapes)
    return size / (2 * PARTICLES_ACROSS)


def _radius_for_budget(shapes_with_counts, radius: float, budget: int) -> float:
    r = radius
    for _ in range(60):
        total = sum(s.estimate(r) * n for s, n in shapes_with_counts)
        if total <= budget:
            return r
        r *= max(1.02, (total / budget) ** (1 / 3))
    return r


def convert_scene(context, dynamic_objects, static_objects, *, radius=None, max_particles=20_000_000,
                  frame_start, frame_end, frame_step=1, gravity=(0.0, 0.0, -9.81), device_memory=None,
                  add_ground=False) -> ConvertedScene:
    """Build the engine model of a scene.

    dynamic_objects become particle bodies, static_objects triangle colliders (re-evaluated per
    output frame when they may move). ``radius``: particle radius, None for automatic.
    ``device_memory``: bytes available on the OpenCL device (checked when given).
    Raises ConversionError (before allocating particles) when the scene cannot be simulated.
    """
    scene = context.scene
    if frame_step < 1:
        raise ConversionError("frame step must be at least 1")
    if frame_end < frame_start:
        raise ConversionError(f"end frame {frame_end} is before start frame {frame_start}")
    if radius is not None and not (radius > 0 and math.isfinite(radius)):
        raise ConversionError(f"particle radius must be positive, got {radius}")
    frame_count = (frame_end - frame_start) // frame_step
    timings: dict = {}
    t_total = time.perf_counter()
    original_frame = (scene.frame_current, scene.frame_subframe)
    moved = False
    try:
        if scene.frame_current != frame_start or scene.frame_subframe != 0.0:
            scene.frame_set(frame_start)
            moved = True
        depsgraph = context.evaluated_depsgraph_get()
        converted = _convert_at_start(depsgraph, dynamic_objects, static_objects, radius, max_particles,
                                      device_memory, timings)
        builder, links, skipped, collider_objs, radius_used = converted
        collider_meshes = []
        if collider_objs:
            animated = [c for c in collider_objs if _possibly_animated(c[0])]
            frames_by_name = {}
            if animated and frame_count > 0:
                frames_by_name = _collider_frames(scene, context, animated, frame_start, frame_step, frame_count)
                moved = True
            for obj, verts, tris in collider_objs:
                frames = frames_by_name.get(obj.name)
                mat = material_from(object_settings(obj))
                collider_meshes.append(ColliderMesh(obj.name, verts, tris, frames, mat))
                builder.add_static_mesh(verts, tris, material=mat, frames=frames)
        if add_ground:
            builder.add_ground_plane(0.0)
        t0 = time.perf_counter()
        model = builder.finalize()
        timings["finalize"] = time.perf_counter() - t0
    finally:
        if moved:
            scene.frame_set(original_frame[0], subframe=original_frame[1])
    for link in links:
        link.com_local = model.body_com_local[link.body_index].copy()
    return ConvertedScene(
        model=model, radius=radius_used, bodies=links, colliders=[c.object_name for c in collider_meshes],
        skipped=skipped, particle_count=model.particle_count, radius_auto=radius is None,
        frame_start=int(frame_start), frame_step=int(frame_step), frame_count=int(frame_count),
        gravity=tuple(float(g) for g in gravity), collider_meshes=collider_meshes,
        timings=dict(timings, total=time.perf_counter() - t_total))


def _skip_reason_type(obj):
    if obj.type not in GEOMETRY_TYPES:
        return f"is of type {obj.type.title()}, which has no surface to collide with"
    return None


def _convert_at_start(depsgraph, dynamic_objects, static_objects, radius, max_particles, device_memory, timings):
    t_start = time.perf_counter()
    skipped: list[tuple[str, str]] = []
    dynamic = []
    for obj in _unique_objects(dynamic_objects):
        settings = object_settings(obj)
        if settings["role"] == "IGNORED":
            skipped.append((obj.name, "is set to Ignored"))
            continue
        dynamic.append((obj, settings))
    dynamic_names = {o.name for o, _ in dynamic}
    statics = []
    for obj in _unique_objects(static_objects):
        if obj.name in dynamic_names:
            skipped.append((obj.name, "is both dynamic and static; simulated as dynamic"))
            continue
        if object_settings(obj)["role"] == "IGNORED":
            skipped.append((obj.name, "is set to Ignored"))
            continue
        statics.append(obj)

    # 1. geometry of the dynamic objects in their own frames; linked duplicates share one shape
    timings["settings"] = time.perf_counter() - t_start
    t0 = time.perf_counter()
    candidates = []
    for obj, settings in dynamic:
        reason = _skip_reason_type(obj)
        if reason:
            skipped.append((obj.name, reason))
            continue
        candidates.append((obj, settings))
    matrices = np.array([obj.matrix_world for obj, _ in candidates], dtype=np.float64).reshape(-1, 4, 4)
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
    timings["matrices"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    shapes: dict = {}
    entries = []  # (obj, settings, matrix, rotation, shape)
    for i, (obj, settings) in enumerate(candidates):
        if not valid[i]:
            skipped.append((obj.name, "has zero scale"))
            continue
        key = _geometry_key(obj)
        shape_key = None if key is None else key + (log_keys[i],) + rel_keys[i]
        shape = shapes.get(shape_key) if shape_key is not None else None
        if shape is None:
            mesh = read_evaluated_mesh(obj, depsgraph)
            if mesh is None or len(mesh[1]) == 0:
                skipped.append((obj.name, "has no faces"))
                if shape_key is not None:
                    shapes[shape_key] = "empty"
                continue
            rot, stretch = vox.polar_decomposition(m3[i])
            shape = _frame_shape(mesh[0], mesh[1], stretch)
            shape.inv_stretch = np.linalg.inv(stretch)
            if shape.area <= 0 or len(shape.triangles) == 0:
                skipped.append((obj.name, "has zero area and volume"))
                shape = "empty"
            if shape_key is not None:
                shapes[shape_key] = shape
            if shape == "empty":
                continue
        elif shape == "empty":
            skipped.append((obj.name, "has no faces of non-zero area"))
            continue
        entries.append((obj, settings, matrices[i], None, shape))
    timings["geometry"] = time.perf_counter() - t0

    # 2. radius and size checks, before any particle is allocated
    if entries:
        unique = {}
        for entry in entries:
            unique.setdefault(id(entry[4]), [entry[4], 0])[1] += 1
        counted = [(s, n) for s, n in unique.values()]
        radius_used = float(radius) if radius is not None else automatic_radius([s for s, _ in counted])
        estimate = sum(s.estimate(radius_used) * n for s, n in counted)
        if estimate > max_particles:
            suggestion = _round_up_sig(_radius_for_budget(counted, radius_used, int(0.9 * max_particles)))
            raise ConversionError(
                f"{len(entries)} bodies at particle radius {radius_used:.4g} need about {estimate:,} particles, "
                f"more than the limit of {max_particles:,}; use a particle radius of at least {suggestion:g}"
                + (" (the automatic radius follows the smallest body)" if radius is None else ""))
        if device_memory:
            try:
                from ..core.opencl_engine import estimate_device_memory
            except Exception:  # engine not importable here: skip the memory estimate
                estimate_device_memory = None
            if estimate_device_memory is not None:
                need = estimate_device_memory(estimate, len(entries))
                if need > 0.9 * device_memory:
                    budget = int(0.9 * device_memory / max(need / max(estimate, 1), 1))
                    suggestion = _round_up_sig(_radius_for_budget(counted, radius_used, budget))
                    raise ConversionError(
                        f"about {estimate:,} particles need {_format_bytes(need)} of device memory, "
                        f"the device has {_format_bytes(device_memory)}; use a particle radius of at least "
                        f"{suggestion:g}")
    else:
        radius_used = float(radius) if radius is not None else 0.0

    # 3. voxelize each shape once
    t0 = time.perf_counter()
    too_few = []
    total = 0
    for obj, settings, m4, rot, shape in entries:
        if shape.result is None:
            shape.result = vox.voxelize(shape.vertices, shape.triangles, 2 * radius_used, weld_vertices=False)
        count = len(shape.result.points)
        total += count
        if total > max_particles:
            raise ConversionError(
                f"the bodies need more than the limit of {max_particles:,} particles at radius "
                f"{radius_used:.4g}; use a larger particle radius")
        if count < MIN_PARTICLES:
            too_few.append((obj.name, count, shape))
    if too_few:
        names = ", ".join(f"{name} ({count})" for name, count, _ in too_few[:5])
        more = f" and {len(too_few) - 5} more" if len(too_few) > 5 else ""
        need = min(s.size() for _, _, s in too_few) / (2 * PARTICLES_ACROSS)
        suggestion = _round_down_sig(min(radius_used, need))
        raise ConversionError(
            f"too few particles to rotate (at least {MIN_PARTICLES} needed) at radius {radius_used:.4g}: "
            f"{names}{more}; use a particle radius of at most {suggestion:g}")
    timings["voxelize"] = time.perf_counter() - t0

    # 4. bodies, in world space (position 0, identity orientation); duplicates in one batch
    t0 = time.perf_counter()
    builder = ModelBuilder(radius_used if radius_used > 0 else 1.0)
    d = 2 * radius_used
    links = []
    groups: dict = {}
    for entry in entries:
        groups.setdefault(id(entry[4]), []).append(entry)
    materials: dict = {}

    for group in groups.values():
        res = group[0][4].result
        shape = group[0][4]
        # R = M S^-1 with the shape's S (equal within float32 noise for every member of the group)
        m4s = np.array([e[2] for e in group])
        rot = m4s[:, :3, :3] @ shape.inv_stretch
        trans = m4s[:, :3, 3]
        points = np.einsum("kij,nj->kni", rot, res.points) + trans[:, None, :]
        masses = np.empty(len(group))
        for k, (obj, settings, _, _, _) in enumerate(group):
            if settings["mass_mode"] == "MASS":
                masses[k] = float(settings["mass"])
            else:
                volume = shape.volume if (res.filled_count and shape.volume > 0) else len(res.points) * d**3
                masses[k] = float(settings["density"]) * volume
            if not (masses[k] > 0 and math.isfinite(masses[k])):
                raise ConversionError(f"{obj.name}: mass must be positive (got {masses[k]:g} kg)")
        mats = []
        for _, settings, _, _, _ in group:
            mkey = (settings["friction"], settings["bounciness"], settings["linear_damping"],
                    settings["angular_damping"])
            if mkey not in materials:
                try:
                    materials[mkey] = material_from(settings)
                except ValueError as error:
                    raise ConversionError(f"{group[0][0].name}: {error}") from error
            mats.append(materials[mkey])
        velocities = np.array([e[1]["initial_velocity"] for e in group], dtype=np.float64).reshape(-1, 3)
        spins = np.array([e[1]["initial_angular_velocity"] for e in group], dtype=np.float64).reshape(-1, 3)
        try:
            # the lattice's axes are R's (each object voxelized along its own axes): its voxels meet
            # the ground with their corners (core.voxel_corners). A mirrored object's R is a
            # reflection; flipping one axis gives a rotation with the same (unsigned) axes.
            lattice = rot.copy()
            lattice[np.linalg.det(lattice) < 0, :, 0] *= -1.0
            indices = list(builder.add_bodies(points, masses=masses, velocities=velocities,
                                              angular_velocities=spins, materials=mats,
                                              corner_reach=res.corner_reach,
                                              lattice_orientations=matrix_quaternions(lattice)))
        except ValueError as error:
            raise ConversionError(f"{group[0][0].name}: {error}") from error
        for k, (obj, _, m4, _, _) in enumerate(group):
            links.append(BodyLink(obj.name, int(indices[k]), m4.copy(), np.zeros(3), len(res.points), res.mode))
    links.sort(key=lambda link: link.body_index)
    timings["bodies"] = time.perf_counter() - t0

    # 5. static colliders at the first frame
    colliders = []
    for obj in statics:
        reason = _skip_reason_type(obj)
        if reason:
            skipped.append((obj.name, reason))
            continue
        m4 = _matrix(obj)
        sv = np.linalg.svd(m4[:3, :3], compute_uv=False)
        if not (sv.max() > 0 and sv.min() > ZERO_SCALE * sv.max()):
            # a flat collider (e.g. scale z = 0 of a box) still collides; only a point/line does not
            if np.count_nonzero(sv > ZERO_SCALE * max(sv.max(), 1e-300)) < 2:
                skipped.append((obj.name, "has zero scale"))
                continue
        mesh = read_evaluated_mesh(obj, depsgraph)
        if mesh is None or len(mesh[1]) == 0:
            skipped.append((obj.name, "has no faces"))
            continue
        verts = mesh[0] @ m4[:3, :3].T + m4[:3, 3]
        if vox.surface_area(verts, mesh[1]) <= 0:
            skipped.append((obj.name, "has zero area"))
            continue
        colliders.append((obj, verts, mesh[1]))
    return builder, links, skipped, colliders, radius_used


def _collider_frames(scene, context, animated, frame_start, frame_step, frame_count):
    """World vertex positions of the animated colliders at each output frame (F, V, 3); objects
    that turn out not to move get None. Leaves the scene at some frame: the caller restores it."""
    out = {obj.name: np.empty((frame_count + 1,) + verts.shape) for obj, verts, _ in animated}
    for obj, verts, _ in animated:
        out[obj.name][0] = verts
    for i in range(1, frame_count + 1):
        scene.frame_set(frame_start + i * frame_step)
        depsgraph = context.evaluated_depsgraph_get()
        for obj, verts, tris in animated:
            mesh = read_evaluated_mesh(obj, depsgraph)
            if mesh is None or len(mesh[0]) != len(verts):
                raise ConversionError(
                    f"static collider {obj.name} changes its number of vertices during the animation "
                    f"(frame {frame_start + i * frame_step}); apply the modifier that does it")
            m4 = _matrix(obj)
            out[obj.name][i] = mesh[0] @ m4[:3, :3].T + m4[:3, 3]
    for name, frames in list(out.items()):
        if np.array_equal(frames, np.broadcast_to(frames[0], frames.shape)):
            out[name] = None
    return out


classes = ()
