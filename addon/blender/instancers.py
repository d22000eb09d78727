"""Bodies from instancers: a scatter of instances becomes bodies without an object per body.

How a user marks it: an object with role Dynamic whose evaluated result has instances - a
geometry-nodes scatter (Distribute Points on Faces + Instance on Points), a particle system that
renders objects or a collection, a collection instance - is an *instancer*: each of its instances
becomes a body with the instance's mesh and world transform (scale included), and the instancer's
own physics settings (density, friction, velocities...). The instancer's own geometry (the surface
the instances are scattered on, a particle emitter) takes no part. Instances that are not meshes
(lights, empties, curves) are skipped and reported.

Blender's own tools do the work: ``depsgraph.object_instances`` lists the evaluated instances
(``is_instance``, ``parent``, ``object``, ``matrix_world``) however they were made, nested ones
flattened. Instances sharing one geometry share one evaluated mesh (the same pointer within one
evaluation), so each distinct mesh is read once, and voxelized once per size.

Instances of one mesh share a voxelization when their sizes agree within 1 % (see
body_geometry.INSTANCE_SIZE_STEP), so a scatter with random scales is voxelized a few dozen times, not once
per instance.

Bake modes: an instancer bakes to instances (one object shows every body, bake_instances.py), the
natural route for a scatter of thousands. Keyframes need one object per body, which would have to be
created first: Blender's Object > Apply > Make Instances Real does that for instances of objects
(with the user's choice of collections and names; a geometry-nodes mesh instance made real is a copy
of the instancer). The bake refuses an instancer in Keyframes mode before simulating rather than
create objects behind the user's back, up to 1M of them, past the ~10k where Blender itself slows
down: the point of a scatter is not to have them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class InstanceMesh:
    """One distinct mesh among an instancer's instances, in the instanced object's local space."""

    vertices: np.ndarray  # (V, 3) float64
    triangles: np.ndarray  # (T, 3) int32
    name: str  # for messages: the mesh's name
    source_object: str  # the object of bpy.data it comes from, '' when made by geometry nodes
    ordinal: int  # its place among the instancer's distinct meshes, in evaluation order


@dataclass
class InstancerBodies:
    """The instances of one instancer, in evaluation order."""

    instancer: str  # object name
    meshes: list  # list[InstanceMesh]
    mesh_index: np.ndarray  # (N,) index into meshes
    matrices: np.ndarray  # (N, 4, 4) world matrices at the first frame
    skipped: dict = field(default_factory=dict)  # object type -> count of instances that are not meshes

    @property
    def count(self) -> int:
        return len(self.mesh_index)


def _read_mesh(mesh):
    n = len(mesh.vertices)
    vertices = np.zeros(n * 3, dtype=np.float32)
    if n:
        mesh.vertices.foreach_get("co", vertices)
    triangles = mesh.loop_triangles
    tris = np.zeros(len(triangles) * 3, dtype=np.int32)
    if len(tris):
        triangles.foreach_get("vertices", tris)
    return vertices.reshape(-1, 3).astype(np.float64), tris.reshape(-1, 3)


def _instances(depsgraph, names):
    """(instancer name, DepsgraphObjectInstance) of the instances whose top instancer is in ``names``."""
    for inst in depsgraph.object_instances:
        if inst.is_instance:
            parent = inst.parent
            if parent is not None and parent.original.name in names:
                yield parent.original.name, inst


def count_instances(depsgraph, objects) -> dict:
    """{object name: number of instances} of the objects that have any."""
    names = {o.name for o in objects}
    counts: dict = {}
    for name, _inst in _instances(depsgraph, names):
        counts[name] = counts.get(name, 0) + 1
    return counts


def gather(depsgraph, instancers) -> list:
    """InstancerBodies of each of ``instancers`` (objects that have instances), in the given order."""
    names = [o.name for o in instancers]
    found = {name: dict(meshes=[], by_pointer={}, index=[], matrices=[], skipped={}) for name in names}
    for name, inst in _instances(depsgraph, set(names)):
        entry = found[name]
        obj = inst.object
        if obj.type != "MESH":
            entry["skipped"][obj.type] = entry["skipped"].get(obj.type, 0) + 1
            continue
        mesh = obj.data
        key = mesh.as_pointer()
        k = entry["by_pointer"].get(key)
        if k is None:
            k = len(entry["meshes"])
            entry["by_pointer"][key] = k
            vertices, triangles = _read_mesh(mesh)
            original = obj.original
            # a geometry-nodes instance's object is the instancer itself; a particle or collection
            # instance's is the instanced object
            source = original.name if original is not None and original.name != name else ""
            entry["meshes"].append(InstanceMesh(vertices, triangles, mesh.name, source, k))
        entry["index"].append(k)
        entry["matrices"].append(inst.matrix_world.copy())
    out = []
    for name in names:
        entry = found[name]
        matrices = np.array(entry["matrices"], dtype=np.float64).reshape(-1, 4, 4)
        out.append(InstancerBodies(name, entry["meshes"], np.array(entry["index"], dtype=np.int64), matrices,
                                   entry["skipped"]))
    return out


def may_instance(obj) -> bool:
    """Whether the object may have instances (geometry nodes, particles, collection or vertex instancing):
    only these are looked for among the evaluated instances."""
    return obj.instance_type != "NONE" or any(m.type in ("NODES", "PARTICLE_SYSTEM") for m in obj.modifiers)



def mesh_copies(depsgraph, instancer_name: str, ordinals) -> dict:
    """{ordinal: a new mesh data-block} copying the evaluated meshes ``ordinals`` of an instancer (those
    geometry nodes made, which exist only in the evaluation), in the order ``gather`` numbered them."""
    wanted = set(ordinals)
    copies: dict = {}
    seen: dict = {}
    for _name, inst in _instances(depsgraph, {instancer_name}):
        if inst.object.type != "MESH":
            continue
        mesh = inst.object.data
        key = mesh.as_pointer()
        if key in seen:
            continue
        seen[key] = len(seen)
        if seen[key] in wanted:
            copies[seen[key]] = mesh.copy()
            if len(copies) == len(wanted):
                break
    return copies


def instance_volumes(depsgraph, objects) -> dict:
    """{instancer name: [(instances, bounding-box volume of one), ...] per distinct mesh} of the objects
    that have instances (a scatter of 100k takes ~50 ms to count: the sidebar reads it through its
    cached summary, panels.scene_summary, not at every redraw)."""
    names = frozenset(o.name for o in objects)
    out: dict = {}
    first: dict = {}
    for name, inst in _instances(depsgraph, names):
        obj = inst.object
        if obj.type != "MESH":
            continue
        pointer = obj.data.as_pointer()
        entry = first.get((name, pointer))
        if entry is None:
            co = np.zeros(len(obj.data.vertices) * 3, dtype=np.float32)
            if len(co):
                obj.data.vertices.foreach_get("co", co)
            extent = np.ptp(co.reshape(-1, 3), axis=0) if len(co) else np.zeros(3)
            scale = np.linalg.norm(np.array(inst.matrix_world)[:3, :3], axis=0)
            entry = first[(name, pointer)] = [0, float(np.prod(np.maximum(extent * scale, 1e-9)))]
            out.setdefault(name, []).append(entry)
        entry[0] += 1
    return {name: [tuple(e) for e in entries] for name, entries in out.items()}
