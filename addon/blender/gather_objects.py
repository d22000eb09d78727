"""Conversion stage 1: the objects that take part, roles applied (``gather_objects``), and stage 1b:
an instancer's instances as items of their own (``instances_as_items``; instancers.py reads them)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from . import instancers
from ..core.glue import GlueSettings
from ..core.settings import ROLE_IGNORED, ObjectSettings
from .glue_bodies import collections_of_objects, object_glue
from .scene_objects import ConversionError, first_non_finite, object_settings, world_matrices


@dataclass
class SceneItem:
    """One object taking part, with what the conversion reads of it at the first frame."""

    name: str
    obj: object  # the Blender object whose evaluated geometry it has (an instance: its instancer)
    settings: ObjectSettings
    matrix_world: np.ndarray  # (4, 4)
    instancer: str = ""  # an instance of this instancer (instancers.py), with the mesh ``instance_mesh``
    instance_mesh: object = None  # instancers.InstanceMesh
    glue: GlueSettings = GlueSettings()  # a dynamic item's (glue_bodies.object_glue; an instance: its instancer's)


@dataclass
class GatheredObjects:
    """Stage 1: the objects that take part, roles applied."""

    dynamic: list  # list[SceneItem], future bodies
    static: list  # list[SceneItem], future triangle colliders
    skipped: list  # list[tuple[str, str]]: (object name, reason)


def _unique_objects(objects):
    seen, out = set(), []
    for obj in objects or ():
        if obj is None or obj.name in seen:
            continue
        seen.add(obj.name)
        out.append(obj)
    return out


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

    def items(pairs, glued):
        matrices = world_matrices([obj for obj, _ in pairs])
        collections = collections_of_objects([obj for obj, _ in pairs]) if glued else {}
        return [SceneItem(obj.name, obj, settings, matrices[i],
                          glue=object_glue(obj, collections[obj.as_pointer()]) if glued else GlueSettings())
                for i, (obj, settings) in enumerate(pairs)]

    return GatheredObjects(items(dynamic, True), items(static, False), skipped)


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
            value = first_non_finite(bodies.matrices[k].ravel())
            source = meshes[bodies.mesh_index[k]].source_object
            raise ConversionError(f'Object "{item.name}" has a non-finite transform on its instance {k}'
                                  + (f' (of "{source}")' if source else "")
                                  + f" ({value}): fix the transforms of its instances before baking.")
        for k in range(bodies.count):
            dynamic.append(SceneItem(f"{item.name}[{k}]", item.obj, item.settings, bodies.matrices[k],
                                     item.name, meshes[bodies.mesh_index[k]], item.glue))
    return dataclasses.replace(gathered, dynamic=dynamic, skipped=skipped), list(found.values())
