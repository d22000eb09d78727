"""Blender objects -> engine input: particle bodies for dynamic objects, triangle meshes for static ones.

The conversion runs in four stages, each a function returning a small dataclass:

    gather_objects(dynamic, static)           -> GatheredObjects   roles applied, world matrices read
    instances_as_items(gathered, depsgraph)   -> GatheredObjects   an instancer's instances become its items
                                                                   (instancers.py reads them)
    body_geometry(gathered.dynamic, depsgraph) -> BodyGeometry      evaluated mesh of each body in its own frame
    voxelize_bodies(geometry, radius, ...)    -> BodyParticles     radius chosen and checked, particles made
    add_bodies(builder, particles)            -> list[BodyLink]    bodies in the model, and how to map them back
    static_colliders(gathered.static, ...)    -> StaticColliders   triangle meshes in world space (+ frames)

``convert_scene`` runs them at ``frame_start`` and hands everything to ``ModelBuilder``; the particle
preview runs the same stages for one object (``object_particles``). Meshes are evaluated (modifiers
applied; curves, text, surfaces and metaballs through their evaluated mesh) and read with
``foreach_get``; the voxelization is ``addon.core.voxelize``.

Frames and poses
- Each object is voxelized in a frame aligned with its own axes (the rotation part R of the polar
  decomposition matrix_world[:3, :3] = R S), so a rotated cube is still filled along its edges;
  the particles then go to ``add_bodies`` in world space with position 0 / identity orientation.
  A simulated pose (x, q) maps back to the object as
      matrix_world(t) = T(x) R(q) T(-com_local) matrix_world(start)       (``core.rotations.pose_matrices``)
- Objects sharing one datablock, with no modifiers and the same scale/shear S, have identical
  particles in that frame: they are voxelized once (linked duplicates).

Everything is read at ``frame_start``; animated static colliders are also read at every output
frame. The scene's current frame (and subframe) is restored afterwards, also on errors.
"""
from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field

import numpy as np

from . import instancers
from ..core import voxelize as vox
from ..core.model import Material, Model, ModelBuilder
from ..core.device_buffers import estimate_device_memory
from ..core.rotations import matrix_quaternions, pose_matrices
from ..core.settings import ROLE_IGNORED, ConversionSettings, ObjectSettings, SimulationSettings

GEOMETRY_TYPES = {"MESH", "CURVE", "SURFACE", "FONT", "META"}
PARTICLES_ACROSS = 3  # automatic radius: the smallest body gets this many particles across its thinnest extent
MIN_PARTICLES = 8  # fewer particles cannot make a body that rotates and rests believably
FLAT_RATIO = 1e-3  # an extent below this fraction of the largest one counts as flat
ZERO_SCALE = 1e-9  # relative singular value of matrix_world below which an object has zero scale
SHAPE_KEY_DIGITS = 5  # scale/shear of linked duplicates equal to this many decimals share one voxelization
# Instances of one mesh whose sizes agree within 1 % (and proportions within about 0.5 %) share one
# voxelization, made at the size of the first of them: a scatter with random scales would otherwise
# voxelize every instance (1.8 ms each, 3 minutes for 100k). Each body's particles still follow its own
# scale (placed through M S^-1, which stretches them by at most 1 %) and its mass its own volume; the
# collision surface moves by at most 0.5 % of the body's size, a few millimetres on a 60 cm rock, far
# below a particle radius.
INSTANCE_SIZE_STEP = 0.01  # in ln(size)
INSTANCE_SHAPE_DIGITS = 2
MAX_PARTICLES = ConversionSettings.max_particles
DEFAULT_GRAVITY = SimulationSettings.gravity


class ConversionError(ValueError):
    """A problem with the user's scene, with a message meant for the user."""


# -- what the stages hand on -------------------------------------------------------------------------

@dataclass
class SceneItem:
    """One object taking part, with what the conversion reads of it at the first frame."""

    name: str
    obj: object  # the Blender object whose evaluated geometry it has (an instance: its instancer)
    settings: ObjectSettings
    matrix_world: np.ndarray  # (4, 4)
    instancer: str = ""  # an instance of this instancer (instancers.py), with the mesh ``instance_mesh``
    instance_mesh: object = None  # instancers.InstanceMesh


@dataclass
class GatheredObjects:
    """Stage 1: the objects that take part, roles applied."""

    dynamic: list  # list[SceneItem], future bodies
    static: list  # list[SceneItem], future triangle colliders
    skipped: list  # list[tuple[str, str]]: (object name, reason)


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


@dataclass
class BodyParticles:
    """Stage 3: the radius used and each body's particles (``body.shape.result``)."""

    radius: float
    bodies: list  # list[ShapedBody], every shape voxelized
    particle_count: int


@dataclass
class BodyLink:
    """Stage 4: how a body of the model maps back to its object."""

    object_name: str
    body_index: int
    matrix_world: np.ndarray  # (4, 4) at the first frame
    com_local: np.ndarray  # (3,) == model.body_com_local[body_index] (world centre of mass at the first frame)
    particle_count: int = 0
    mode: str = ""  # 'filled', 'shell' or 'filled+shell'
    instancer: str = ""  # a body of an instance of this instancer (object_name is the instancer's too) ...
    instance_mesh: int = -1  # ... showing its mesh number instance_mesh (InstancerBodies.meshes)
    body_name: str = ""  # for messages: the object's name, an instance's <instancer>[n]

    @property
    def name(self) -> str:
        return self.body_name or self.object_name


@dataclass
class ColliderMesh:
    object_name: str
    vertices: np.ndarray  # (V, 3) world, at the first frame
    triangles: np.ndarray  # (T, 3) int32
    frames: np.ndarray | None  # (F, V, 3) world positions at output frames 0..F-1, None if it does not move
    material: Material


@dataclass
class StaticColliders:
    """Stage 4, static side: triangle meshes in world space at the first frame."""

    meshes: list  # list[ColliderMesh], frames filled in by collider_frames
    objects: list  # the Blender objects of ``meshes``, in the same order
    skipped: list


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
    gravity: tuple = DEFAULT_GRAVITY
    collider_meshes: list = field(default_factory=list)  # list[ColliderMesh]
    timings: dict = field(default_factory=dict)  # seconds per conversion stage
    instancers: list = field(default_factory=list)  # list[instancers.InstancerBodies]


# -- small pure helpers (no bpy) ------------------------------------------------------------------

def object_matrix_at(link: BodyLink, position, orientation) -> np.ndarray:
    """World matrix of the object of ``link`` when its body has COM ``position`` and quaternion
    ``orientation`` (w, x, y, z): T(x) R(q) T(-com_local) matrix_world_at_start."""
    return pose_matrices(np.asarray(position)[None], np.asarray(orientation)[None],
                         np.asarray(link.com_local)[None], np.asarray(link.matrix_world)[None])[0]


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


def _first_non_finite(values, limit: float = math.inf):
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
            value = _first_non_finite(values, FLOAT_LIMIT)
            if value is not None:
                return problem(name, field, value)
        owner = owner.parent
        name = f'"{getattr(owner, "name", "")}" (parent of "{obj.name}")'
    value = _first_non_finite(x for row in obj.matrix_world for x in row)
    return None if value is None else problem(f'"{obj.name}"', "world matrix", value)


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


def _matrices(objects) -> np.ndarray:
    """(N, 4, 4) world matrices, read in one go."""
    return np.array([obj.matrix_world for obj in objects], dtype=np.float64).reshape(-1, 4, 4)


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


def _frame_shape(vertices_local, triangles, stretch) -> Shape:
    v = vertices_local @ stretch.T
    v, t = vox.weld(v, triangles)
    closed, _ = vox.edge_topology(t)
    volume = abs(vox.signed_volume(v, t)) if closed else 0.0
    area = vox.surface_area(v, t)
    extents = np.ptp(v, axis=0) if len(v) else np.zeros(3)
    return Shape(v, t, closed, volume, area, extents)


def _unique_objects(objects):
    seen, out = set(), []
    for obj in objects or ():
        if obj is None or obj.name in seen:
            continue
        seen.add(obj.name)
        out.append(obj)
    return out


def _skip_reason_type(obj):
    if obj.type not in GEOMETRY_TYPES:
        return f"is of type {obj.type.title()}, which has no surface to collide with"
    return None


# -- stage 1: gather objects ----------------------------------------------------------------------

def gather_objects(dynamic_objects, static_objects, settings_of=None) -> GatheredObjects:
    """The objects that take part, each once: Ignored ones leave, an object both dynamic and static
    stays dynamic. World matrices are read now (the caller has set the first frame). ``settings_of``:
    an object's ObjectSettings by its name (a Rigid Body world's), else its add-on settings."""
    skipped: list[tuple[str, str]] = []
    dynamic = []
    object_settings_of = (lambda obj: settings_of(obj.name)) if settings_of is not None else object_settings
    for obj in _unique_objects(dynamic_objects):
        settings = object_settings_of(obj)
        if settings.role == ROLE_IGNORED:
            skipped.append((obj.name, "is set to Ignored"))
            continue
        dynamic.append((obj, settings))
    dynamic_names = {obj.name for obj, _ in dynamic}
    static = []
    for obj in _unique_objects(static_objects):
        if obj.name in dynamic_names:
            skipped.append((obj.name, "is both dynamic and static; simulated as dynamic"))
            continue
        settings = object_settings_of(obj)
        if settings.role == ROLE_IGNORED:
            skipped.append((obj.name, "is set to Ignored"))
            continue
        static.append((obj, settings))

    def items(pairs):
        matrices = _matrices([obj for obj, _ in pairs])
        return [SceneItem(obj.name, obj, settings, matrices[i]) for i, (obj, settings) in enumerate(pairs)]

    return GatheredObjects(items(dynamic), items(static), skipped)


# -- stage 1b: an instancer's instances as items --------------------------------------------------

def instances_as_items(gathered, depsgraph):
    """Each dynamic item that has instances replaced by one item per instance (named
    ``<instancer>[<n>]``, the instancer's settings, the instance's world matrix and mesh; instancers.py
    reads them). Returns (GatheredObjects, [instancers.InstancerBodies])."""
    candidates = [item.obj for item in gathered.dynamic
                  if item.instance_mesh is None and instancers.may_instance(item.obj)]
    counts = instancers.count_instances(depsgraph, candidates) if candidates else {}
    if not counts:
        return gathered, []
    found = {b.instancer: b for b in instancers.gather(depsgraph, [o for o in candidates if o.name in counts])}
    dynamic, skipped = [], list(gathered.skipped)
    for item in gathered.dynamic:
        bodies = found.get(item.name)
        if bodies is None:
            dynamic.append(item)
            continue
        for kind, n in bodies.skipped.items():
            skipped.append((item.name, f"{n:,} of its instances are of type {kind.title()}, not meshes"))
        meshes = bodies.meshes
        finite = np.isfinite(bodies.matrices).all(axis=(1, 2))
        if not finite.all():
            k = int(np.argmin(finite))
            value = _first_non_finite(bodies.matrices[k].ravel())
            source = meshes[bodies.mesh_index[k]].source_object
            raise ConversionError(f'Object "{item.name}" has a non-finite transform on its instance {k}'
                                  + (f' (of "{source}")' if source else "")
                                  + f" ({value}): fix the transforms of its instances before baking.")
        for k in range(bodies.count):
            dynamic.append(SceneItem(f"{item.name}[{k}]", item.obj, item.settings, bodies.matrices[k],
                                     item.name, meshes[bodies.mesh_index[k]]))
    return dataclasses.replace(gathered, dynamic=dynamic, skipped=skipped), list(found.values())


# -- stage 2: evaluated mesh of each body ---------------------------------------------------------

def body_geometry(items, depsgraph) -> BodyGeometry:
    """Each item's evaluated mesh in its own frame (``Shape``); linked duplicates share one shape.
    Items that cannot become a body (no surface, zero scale, no faces) are skipped with a reason."""
    skipped: list[tuple[str, str]] = []
    candidates = []
    for item in items:
        reason = None if item.instance_mesh is not None else _skip_reason_type(item.obj)
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


# -- stage 3: voxelize ----------------------------------------------------------------------------

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


def choose_radius(geometry: BodyGeometry, radius: float | None, max_particles: int = MAX_PARTICLES,
                  device_memory: int | None = None, contact_geometry: str | None = None) -> float:
    """The particle radius (``radius``, or automatic when None), refused with a suggestion when the
    bodies would need more particles than ``max_particles`` or more than 90 % of ``device_memory``
    bytes. Checked on estimates, before any particle is allocated."""
    if not geometry.bodies:
        return float(radius) if radius is not None else 0.0
    counted = geometry.counted_shapes()
    radius_used = float(radius) if radius is not None else automatic_radius([s for s, _ in counted])
    estimate = sum(s.estimate(radius_used) * n for s, n in counted)
    if estimate > max_particles:
        suggestion = _round_up_sig(_radius_for_budget(counted, radius_used, int(0.9 * max_particles)))
        raise ConversionError(
            f"{len(geometry.bodies)} bodies at particle radius {radius_used:.4g} need about {estimate:,} particles, "
            f"more than the limit of {max_particles:,}; use a particle radius of at least {suggestion:g}"
            + (" (the automatic radius follows the smallest body)" if radius is None else ""))
    if device_memory:
        need = estimate_device_memory(estimate, len(geometry.bodies), contact_geometry)
        if need > 0.9 * device_memory:
            budget = int(0.9 * device_memory / max(need / max(estimate, 1), 1))
            suggestion = _round_up_sig(_radius_for_budget(counted, radius_used, budget))
            raise ConversionError(
                f"about {estimate:,} particles need {_format_bytes(need)} of device memory, "
                f"the device has {_format_bytes(device_memory)}; use a particle radius of at least "
                f"{suggestion:g}")
    return radius_used


def voxelize_shape(shape: Shape, radius: float, max_particles: int | None = None) -> vox.VoxelResult:
    """The particles of one shape in its frame (made once; duplicates share them)."""
    if shape.result is None:
        shape.result = vox.voxelize(shape.vertices, shape.triangles, 2 * radius, max_particles=max_particles,
                                    weld_vertices=False)
    return shape.result


def voxelize_bodies(geometry: BodyGeometry, radius: float | None, max_particles: int = MAX_PARTICLES,
                    device_memory: int | None = None, contact_geometry: str | None = None) -> BodyParticles:
    """Choose the radius (``choose_radius``) and voxelize each shape once; refuse bodies with fewer
    than ``MIN_PARTICLES`` particles (they cannot rotate believably), naming them."""
    radius_used = choose_radius(geometry, radius, max_particles, device_memory, contact_geometry)
    too_few = []
    total = 0
    for body in geometry.bodies:
        count = len(voxelize_shape(body.shape, radius_used).points)
        total += count
        if total > max_particles:
            raise ConversionError(
                f"the bodies need more than the limit of {max_particles:,} particles at radius "
                f"{radius_used:.4g}; use a larger particle radius")
        if count < MIN_PARTICLES:
            too_few.append((body.item.name, count, body.shape))
    if too_few:
        names = ", ".join(f"{name} ({count})" for name, count, _ in too_few[:5])
        more = f" and {len(too_few) - 5} more" if len(too_few) > 5 else ""
        need = min(s.size() for _, _, s in too_few) / (2 * PARTICLES_ACROSS)
        suggestion = _round_down_sig(min(radius_used, need))
        raise ConversionError(
            f"too few particles to rotate (at least {MIN_PARTICLES} needed) at radius {radius_used:.4g}: "
            f"{names}{more}; use a particle radius of at most {suggestion:g}")
    return BodyParticles(radius_used, list(geometry.bodies), total)


# -- stage 4: bodies and colliders ----------------------------------------------------------------

def _body_mass(settings: ObjectSettings, shape: Shape, result: vox.VoxelResult, diameter: float) -> float:
    if settings.mass_mode == "MASS":
        return float(settings.mass)
    volume = shape.volume if (result.filled_count and shape.volume > 0) else len(result.points) * diameter**3
    return float(settings.density) * volume


def add_bodies(builder: ModelBuilder, particles: BodyParticles) -> list:
    """Add every body to ``builder`` in world space (position 0, identity orientation), duplicates in
    one batch; returns a ``BodyLink`` per body, in body order (``com_local`` set after finalize)."""
    d = 2 * particles.radius
    links = []
    groups: dict = {}
    for body in particles.bodies:
        groups.setdefault(id(body.shape), []).append(body)
    materials: dict = {}
    for group in groups.values():
        shape = group[0].shape
        res = shape.result
        # R = M S^-1 with the shape's S (equal within float32 noise for every member of the group;
        # instances sharing a shape differ by up to INSTANCE_SIZE_STEP: then M S^-1 also stretches)
        m4s = np.array([body.item.matrix_world for body in group])
        rot = m4s[:, :3, :3] @ shape.inv_stretch
        trans = m4s[:, :3, 3]
        points = np.einsum("kij,nj->kni", rot, res.points) + trans[:, None, :]
        # the support spheres turn with the particles; an instance's stretch (INSTANCE_SIZE_STEP at
        # most) shrinks them by its smallest factor, so that they stay inside the surface
        spheres = np.zeros(points.shape[:2] + (4,))
        spheres[..., :3] = np.einsum("kij,nj->kni", rot, res.support_spheres[:, :3])
        spheres[..., 3] = np.linalg.svd(rot, compute_uv=False).min(axis=1)[:, None] * res.support_spheres[:, 3]
        instances = group[0].item.instance_mesh is not None
        masses = np.empty(len(group))
        for k, body in enumerate(group):
            masses[k] = _body_mass(body.item.settings, shape, res, d)
            if instances and body.item.settings.mass_mode != "MASS":  # its own volume
                masses[k] *= abs(np.linalg.det(rot[k]))
            if not (masses[k] > 0 and math.isfinite(masses[k])):
                raise ConversionError(f"{body.item.name}: mass must be positive (got {masses[k]:g} kg)")
        mats = []
        for body in group:
            settings = body.item.settings
            mkey = (settings.friction, settings.bounciness, settings.linear_damping, settings.angular_damping)
            if mkey not in materials:
                try:
                    materials[mkey] = settings.material()
                except ValueError as error:
                    raise ConversionError(f"{group[0].item.name}: {error}") from error
            mats.append(materials[mkey])
        velocities = np.array([b.item.settings.initial_velocity for b in group], dtype=np.float64).reshape(-1, 3)
        spins = np.array([b.item.settings.initial_angular_velocity for b in group], dtype=np.float64).reshape(-1, 3)
        try:
            # the lattice's axes are R's (each object voxelized along its own axes): its voxels meet
            # the ground with their corners (core.voxel_corners). A mirrored object's R is a
            # reflection; flipping one axis gives a rotation with the same (unsigned) axes.
            lattice = rot.copy()
            if instances:  # the rotation of R D (D: the stretch of a shared shape), columns made unit
                lattice /= np.linalg.norm(lattice, axis=1, keepdims=True)
            lattice[np.linalg.det(lattice) < 0, :, 0] *= -1.0
            indices = list(builder.add_bodies(points, masses=masses, velocities=velocities,
                                              angular_velocities=spins, materials=mats,
                                              corner_reach=res.corner_reach, support_spheres=spheres,
                                              lattice_orientations=matrix_quaternions(lattice)))
        except ValueError as error:
            raise ConversionError(f"{group[0].item.name}: {error}") from error
        for k, body in enumerate(group):
            item = body.item
            links.append(BodyLink(item.instancer or item.name, int(indices[k]), item.matrix_world.copy(), np.zeros(3),
                                  len(res.points), res.mode, item.instancer,
                                  item.instance_mesh.ordinal if item.instance_mesh is not None else -1, item.name))
    links.sort(key=lambda link: link.body_index)
    return links


def static_colliders(items, depsgraph) -> StaticColliders:
    """Each static item's evaluated mesh in world space at the first frame (not moving yet:
    ``collider_frames`` adds the motion of animated ones)."""
    meshes, objects, skipped = [], [], []
    for item in items:
        obj = item.obj
        reason = _skip_reason_type(obj)
        if reason:
            skipped.append((item.name, reason))
            continue
        m4 = item.matrix_world
        sv = np.linalg.svd(m4[:3, :3], compute_uv=False)
        if not (sv.max() > 0 and sv.min() > ZERO_SCALE * sv.max()):
            # a flat collider (e.g. scale z = 0 of a box) still collides; only a point/line does not
            if np.count_nonzero(sv > ZERO_SCALE * max(sv.max(), 1e-300)) < 2:
                skipped.append((item.name, "has zero scale"))
                continue
        mesh = read_evaluated_mesh(obj, depsgraph)
        if mesh is None or len(mesh[1]) == 0:
            skipped.append((item.name, "has no faces"))
            continue
        verts = mesh[0] @ m4[:3, :3].T + m4[:3, 3]
        if vox.surface_area(verts, mesh[1]) <= 0:
            skipped.append((item.name, "has zero area"))
            continue
        meshes.append(ColliderMesh(item.name, verts, mesh[1], None, item.settings.material()))
        objects.append(obj)
    return StaticColliders(meshes, objects, skipped)


def collider_frames(colliders: StaticColliders, scene, context, frame_start: int, frame_step: int,
                    frame_count: int) -> bool:
    """Fill in ``frames`` of the colliders that move over the output frames (read per frame).
    Returns whether the scene's frame was changed (the caller restores it)."""
    animated = [(obj, mesh) for obj, mesh in zip(colliders.objects, colliders.meshes) if _possibly_animated(obj)]
    if not animated or frame_count <= 0:
        return False
    out = {mesh.object_name: np.empty((frame_count + 1,) + mesh.vertices.shape) for _, mesh in animated}
    for _, mesh in animated:
        out[mesh.object_name][0] = mesh.vertices
    for i in range(1, frame_count + 1):
        scene.frame_set(frame_start + i * frame_step)
        depsgraph = context.evaluated_depsgraph_get()
        for obj, mesh in animated:
            read = read_evaluated_mesh(obj, depsgraph)
            if read is None or len(read[0]) != len(mesh.vertices):
                raise ConversionError(
                    f"static collider {obj.name} changes its number of vertices during the animation "
                    f"(frame {frame_start + i * frame_step}); apply the modifier that does it")
            problem = transform_problem(obj, frame_start + i * frame_step)
            if problem:
                raise ConversionError(problem)
            m4 = _matrices([obj])[0]
            out[mesh.object_name][i] = read[0] @ m4[:3, :3].T + m4[:3, 3]
    for _, mesh in animated:
        frames = out[mesh.object_name]
        if not np.array_equal(frames, np.broadcast_to(frames[0], frames.shape)):
            mesh.frames = frames
    return True


# -- the whole conversion, and one object's particles ---------------------------------------------

def convert_scene(context, dynamic_objects, static_objects, *, radius=None, max_particles=MAX_PARTICLES,
                  frame_start, frame_end, frame_step=1, gravity=DEFAULT_GRAVITY, device_memory=None,
                  contact_geometry=None, add_ground=False, settings_of=None, strict=False,
                  kinematic_objects=()) -> ConvertedScene:
    """Build the engine model of a scene.

    dynamic_objects become particle bodies, static_objects triangle colliders (re-evaluated per
    output frame when they may move). ``radius``: particle radius, None for automatic.
    ``device_memory``: bytes available on the OpenCL device (checked when given).
    ``settings_of``: each object's ObjectSettings by its name (a Rigid Body world's; gather_objects).
    ``strict``: an object that cannot be a body or a collider (no faces, zero scale) refuses the
    conversion instead of being skipped (a Rigid Body world's objects, each of which Bullet simulates).
    ``kinematic_objects``: names of dynamic objects that follow their animation for some frames (a
    Rigid Body world's Animated bodies): their paths are read per output frame (kinematic_paths).
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

    def timed(name, stage, *args):
        t0 = time.perf_counter()
        result = stage(*args)
        timings[name] = time.perf_counter() - t0
        return result

    original_frame = (scene.frame_current, scene.frame_subframe)
    moved = False
    try:
        if scene.frame_current != frame_start or scene.frame_subframe != 0.0:
            scene.frame_set(frame_start)
            moved = True
        depsgraph = context.evaluated_depsgraph_get()
        gathered = timed("gather", gather_objects, dynamic_objects, static_objects, settings_of)
        gathered, instancer_bodies = timed("instances", instances_as_items, gathered, depsgraph)
        geometry = timed("geometry", body_geometry, gathered.dynamic, depsgraph)
        if strict and geometry.skipped:
            _refuse_skipped(geometry.skipped, "rigid body")
        particles = timed("voxelize", voxelize_bodies, geometry, radius, max_particles, device_memory,
                          contact_geometry)
        builder = ModelBuilder(particles.radius if particles.radius > 0 else 1.0)
        links = timed("bodies", add_bodies, builder, particles)
        colliders = timed("colliders", static_colliders, gathered.static, depsgraph)
        if strict and colliders.skipped:
            _refuse_skipped(colliders.skipped, "passive rigid body")
        if colliders.meshes:
            moved = timed("collider_frames", collider_frames, colliders, scene, context, frame_start, frame_step,
                          frame_count) or moved
            for mesh in colliders.meshes:
                builder.add_static_mesh(mesh.vertices, mesh.triangles, material=mesh.material, frames=mesh.frames)
        if add_ground:
            builder.add_ground_plane(0.0)
        model = timed("finalize", builder.finalize)
        if kinematic_objects and frame_count > 0:
            paths = timed("kinematic_paths", kinematic_paths, scene, kinematic_objects, links, model, frame_start,
                          frame_step, frame_count)
            model = dataclasses.replace(model, kinematic=paths)
            moved = True
    finally:
        if moved:
            scene.frame_set(original_frame[0], subframe=original_frame[1])
    for link in links:
        link.com_local = model.body_com_local[link.body_index].copy()
    return ConvertedScene(
        model=model, radius=particles.radius, bodies=links, colliders=[c.object_name for c in colliders.meshes],
        skipped=gathered.skipped + geometry.skipped + colliders.skipped, particle_count=model.particle_count,
        radius_auto=radius is None, frame_start=int(frame_start), frame_step=int(frame_step),
        frame_count=int(frame_count), gravity=tuple(float(g) for g in gravity), collider_meshes=colliders.meshes,
        timings=dict(timings, total=time.perf_counter() - t_total), instancers=instancer_bodies)


def kinematic_paths(scene, names, links, model, frame_start: int, frame_step: int, frame_count: int):
    """The paths of the bodies of the objects ``names`` (core.kinematic.KinematicPaths): whether each is
    moved by its animation at each output frame, and the body pose its animation gives it there, the
    inverse of object_matrix_at (the body's orientation is the identity at the first frame)."""
    from ..core.kinematic import KinematicPaths
    from . import rigid_body_world

    by_name = {link.object_name: link for link in links}
    names = [name for name in names if name in by_name]
    objects = [bpy_object(name) for name in names]
    moved, matrices = rigid_body_world.read_paths(scene, objects, frame_start, frame_step, frame_count)
    bodies = np.array([by_name[name].body_index for name in names], dtype=np.int32)
    positions = np.empty(matrices.shape[:2] + (3,))
    orientations = np.empty(matrices.shape[:2] + (4,))
    for k, name in enumerate(names):
        if not np.isfinite(matrices[:, k]).all():
            frame = frame_start + frame_step * int(np.argmin(np.isfinite(matrices[:, k]).all(axis=(1, 2))))
            raise ConversionError(f'Object "{name}" has a non-finite world matrix at frame {frame}: fix its '
                                  "animation before baking.")
        link = by_name[name]
        relative = matrices[:, k] @ np.linalg.inv(link.matrix_world)
        com = model.body_com_local[link.body_index]
        positions[:, k] = relative[:, :3, :3] @ com + relative[:, :3, 3]
        rotation, _ = vox.polar_decomposition(relative[:, :3, :3])
        orientations[:, k] = matrix_quaternions(rotation)
    return KinematicPaths(bodies, moved, positions, orientations)


def bpy_object(name: str):
    import bpy

    return bpy.data.objects[name]


def _refuse_skipped(skipped, what: str) -> None:
    name, reason = skipped[0]
    more = f" ({len(skipped) - 1} more cannot either)" if len(skipped) > 1 else ""
    raise ConversionError(f'The {what} "{name}" {reason}: it has no volume to simulate{more}. Give it faces '
                          "and a non-zero scale, or take it out of the Rigid Body world's collection")


def object_particles(obj, depsgraph, radius: float, max_particles: int = MAX_PARTICLES) -> np.ndarray | None:
    """World positions (N, 3) of the particles one object becomes (an instancer: its instances'),
    through the conversion's own stages, as ``convert_scene`` places them up to rounding; None when
    it cannot become a body."""
    gathered, _ = instances_as_items(gather_objects([obj], []), depsgraph)
    geometry = body_geometry(gathered.dynamic, depsgraph)
    if not geometry.bodies:
        return None
    chunks = []
    for body in geometry.bodies:
        try:
            result = voxelize_shape(body.shape, radius, max_particles)
        except ValueError as error:
            raise ConversionError(f"{obj.name}: {error}") from error
        chunks.append(result.points @ body.rotation().T + body.item.matrix_world[:3, 3])
    return np.concatenate(chunks)


def automatic_radius_for(objects, depsgraph) -> float | None:
    """The automatic radius ``convert_scene`` would choose for these objects (None: no usable one)."""
    gathered, _ = instances_as_items(gather_objects(objects, []), depsgraph)
    geometry = body_geometry(gathered.dynamic, depsgraph)
    return automatic_radius([s for s, _ in geometry.counted_shapes()]) if geometry.bodies else None


classes = ()
