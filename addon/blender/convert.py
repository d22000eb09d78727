"""Blender objects -> engine input: particle bodies for dynamic objects, triangle meshes for static ones.

The conversion runs in four stages, each a function returning a small dataclass, each in the file
named after it (scene_objects.py: what they read of an object, and ConversionError):

    gather_objects(dynamic, static)           -> GatheredObjects   roles applied, world matrices read
    instances_as_items(gathered, depsgraph)   -> GatheredObjects   an instancer's instances become its items
                                                                   (gather_objects.py; instancers.py reads them)
    body_geometry(gathered.dynamic, depsgraph) -> BodyGeometry      evaluated mesh of each body in its own frame
    voxelize_bodies(geometry, radius, ...)    -> BodyParticles     radius chosen and checked, particles made
    add_bodies(builder, particles)            -> list[BodyLink]    bodies in the model, and how to map them back
    glue_converted(builder, links, particles) -> int               bonds between touching glued bodies
                                                                   (glue_bodies.py; core.glue)
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

from ..core import voxelize as vox
from ..core.model import Model
from ..core.model_builder import ModelBuilder
from ..core.rotations import matrix_quaternions
from ..core.settings import SimulationSettings
from .add_bodies import add_bodies
from .body_geometry import body_geometry
from .gather_objects import gather_objects, instances_as_items
from .glue_bodies import glue_converted
from .scene_objects import ConversionError
from .static_colliders import collider_frames, static_colliders
from .voxelize_bodies import MAX_PARTICLES, automatic_radius, voxelize_bodies, voxelize_shape

DEFAULT_GRAVITY = SimulationSettings.gravity


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
    joints: list = field(default_factory=list)  # the rigid body constraints' names, in the model's joint order
    # (F + 1, J) bool: each joint on or off in the step to each output frame (a keyed ``enabled``;
    # Simulation's joint_enabled_frames), None when no constraint's ``enabled`` is keyed
    joint_enabled_frames: np.ndarray | None = None
    bond_count: int = 0  # glue bonds between touching bodies (model.joints holds them, after the constraints)


def convert_scene(context, dynamic_objects, static_objects, *, radius=None, max_particles=MAX_PARTICLES,
                  frame_start, frame_end, frame_step=1, gravity=DEFAULT_GRAVITY, device_memory=None,
                  contact_geometry=None, add_ground=False, settings_of=None, strict=False,
                  kinematic_objects=(), constraints=None) -> ConvertedScene:
    """Build the engine model of a scene.

    dynamic_objects become particle bodies, static_objects triangle colliders (re-evaluated per
    output frame when they may move). ``radius``: particle radius, None for automatic.
    ``device_memory``: bytes available on the OpenCL device (checked when given).
    ``settings_of``: each object's ObjectSettings by its name (a Rigid Body world's; gather_objects).
    ``strict``: an object that cannot be a body or a collider (no faces, zero scale) refuses the
    conversion instead of being skipped (a Rigid Body world's objects, each of which Bullet simulates).
    ``kinematic_objects``: names of dynamic objects that follow their animation for some frames (a
    Rigid Body world's Animated bodies): their paths are read per output frame (kinematic_paths).
    ``constraints``: a Rigid Body world's constraints (rigid_body_constraints.ConstraintsRead), joined
    at their objects' transforms at ``frame_start``; a keyed ``enabled`` is read per output frame.
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
        if constraints is not None:
            # Blender's thresholds are impulses per Bullet substep of the world: the bonds' too
            builder.bullet_substep = constraints.bullet_substep
        bond_count = timed("glue", glue_converted, builder, links, particles)
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
        joint_names, enabled_frames = [], None
        if constraints is not None:
            joint_names = timed("constraints", _add_joints, builder, constraints, links)
        model = timed("finalize", builder.finalize)
        if kinematic_objects and frame_count > 0:
            paths = timed("kinematic_paths", kinematic_paths, scene, kinematic_objects, links, model, frame_start,
                          frame_step, frame_count)
            model = dataclasses.replace(model, kinematic=paths)
            moved = True
        if constraints is not None and constraints.enabled_keyed and frame_count > 0:
            from .rigid_body_constraints import enabled_frames as read_enabled

            enabled_frames = timed("constraints_enabled", read_enabled, scene, constraints, bpy_objects_by_name(),
                                   frame_start, frame_step, frame_count)
            # the glue's bonds follow the constraints in the model's joints, always on
            enabled_frames = np.concatenate([enabled_frames, np.ones((len(enabled_frames), bond_count), bool)], axis=1)
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
        timings=dict(timings, total=time.perf_counter() - t_total), instancers=instancer_bodies,
        joints=joint_names, joint_enabled_frames=enabled_frames, bond_count=bond_count)


def _add_joints(builder, constraints, links) -> list:
    from .rigid_body_constraints import ConstraintRefused, add_joints

    try:
        return add_joints(builder, constraints, links, bpy_objects_by_name())
    except ConstraintRefused as exc:
        raise ConversionError(str(exc)) from exc


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
    return bpy_objects()[name]


def bpy_objects():
    import bpy

    return bpy.data.objects


def bpy_objects_by_name() -> dict:
    """bpy.data.objects as a dict by name, for looking up one object per constraint: bpy.data.objects[name]
    searches the whole list (3 ms a name among 31,000 objects), so a wall's constraints cost the
    square of the scene. The first object of a name is kept, the one bpy.data.objects[name] finds."""
    by_name: dict = {}
    for obj in bpy_objects():
        by_name.setdefault(obj.name, obj)
    return by_name


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
