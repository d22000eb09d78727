"""Conversion stage 4b: glue. Each dynamic object's glue (``object_glue``: its own, or its
collection's) and the bonds between the touching bodies of each glue group, added to the model as
data (``glue_converted``; core.glue finds them, ModelBuilder.add_bonds stores them): no constraint
object per bond.

An object's *Glue* is *From Collection* by default: the first of its collections whose *Glue* is on
gives strength and group (none: not glued). *Glued* or *Not Glued* on the object overrides its
collections. An empty glue group is the collection's name (the object's first collection for an
object glued on its own), so the pieces of one collection bond together and not to another's. The
Rigid Body world's ACTIVE objects are glued the same way (the glue is the add-on's setting; Blender's
rigid body settings have none).
"""
from __future__ import annotations

import numpy as np

from ..core.glue import GlueSettings, glue_bodies
from .properties import GLUE_FROM_COLLECTION, GLUE_OFF, GLUE_ON
from .scene_objects import ConversionError

NOT_GLUED = GlueSettings()


def _glued(obj, strength: float, group: str, source: str) -> GlueSettings:
    try:
        return GlueSettings(enabled=True, strength=float(strength), group=group)
    except ValueError as error:
        raise ConversionError(f'Object "{obj.name}": {error} ({source}).') from error


def collections_of_objects(objects) -> dict:
    """Each object's collections by its ``as_pointer()``, in ``Object.users_collection``'s order (the
    collections of bpy.data that hold it, then the scenes' own collections that do), from one pass over
    the collections: users_collection scans every collection's objects for each object it is asked
    for, the square of the scene for a whole wall of bricks (48 s at 8,000)."""
    import bpy

    found: dict = {obj.as_pointer(): [] for obj in objects}
    holders = list(bpy.data.collections) + [scene.collection for scene in bpy.data.scenes]
    for collection in holders:
        for obj in collection.objects:
            collections = found.get(obj.as_pointer())
            if collections is not None:
                collections.append(collection)
    return found


def object_glue(obj, collections=None) -> GlueSettings:
    """The glue ``obj`` is converted with: its own (Object.prb.glue Glued or Not Glued), else its
    first glued collection's (Collection.prb_glue), else none. ``collections``: the object's
    users_collection when already read (collections_of_objects), else it is read here."""
    prb = getattr(obj, "prb", None)
    mode = getattr(prb, "glue", GLUE_FROM_COLLECTION)
    if mode == GLUE_OFF:
        return NOT_GLUED
    if collections is None:
        collections = list(getattr(obj, "users_collection", ()))
    if mode == GLUE_ON:
        home = collections[0].name if collections else ""
        return _glued(obj, prb.glue_strength, prb.glue_group or home, "its Glue Strength")
    for collection in collections:
        glue = getattr(collection, "prb_glue", None)
        if glue is not None and glue.use_glue:
            return _glued(obj, glue.glue_strength, glue.glue_group or collection.name,
                          f'the Glue Strength of its collection "{collection.name}"')
    return NOT_GLUED


def glue_converted(builder, links, particles) -> int:
    """Bond the touching bodies of each glue group of ``builder`` (every body added: ``links`` in body
    order, ``particles`` the voxelized bodies whose items carry their glue). Returns the bond count."""
    glue_of = {body.item.name: body.item.glue for body in particles.bodies}
    glues = [glue_of[link.name] for link in links]
    if not any(glue.enabled for glue in glues):
        return 0
    if len(glues) != builder.body_count:
        raise ConversionError(f"glue: {builder.body_count} bodies in the model, {len(glues)} converted")
    group_numbers: dict = {}
    body_group = np.array([group_numbers.setdefault(glue.group, len(group_numbers)) if glue.enabled else -1
                           for glue in glues], dtype=np.int64)
    strength = np.array([glue.strength for glue in glues], dtype=np.float64)
    try:
        return glue_bodies(builder, body_group, strength).count
    except ValueError as error:
        raise ConversionError(f"glue: {error}") from error

