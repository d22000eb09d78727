"""Conversion stage 4, static side: each static object's evaluated mesh as triangles in world space
(``static_colliders``), and the frames of the ones that move (``collider_frames``)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core import voxelize as vox
from ..core.model import Material
from .scene_objects import (ZERO_SCALE, ConversionError, no_surface_reason, read_evaluated_mesh, transform_problem,
                            world_matrices)


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


def static_colliders(items, depsgraph) -> StaticColliders:
    """Each static item's evaluated mesh in world space at the first frame (not moving yet:
    ``collider_frames`` adds the motion of animated ones)."""
    meshes, objects, skipped = [], [], []
    for item in items:
        obj = item.obj
        reason = no_surface_reason(obj)
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
            m4 = world_matrices([obj])[0]
            out[mesh.object_name][i] = read[0] @ m4[:3, :3].T + m4[:3, 3]
    for _, mesh in animated:
        frames = out[mesh.object_name]
        if not np.array_equal(frames, np.broadcast_to(frames[0], frames.shape)):
            mesh.frames = frames
    return True
