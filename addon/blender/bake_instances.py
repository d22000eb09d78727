"""Bake to instances: one object shows every dynamic body from a point cache beside the .blend.

Why this route (see also addon/core/point_cache.py): keyframes need one object per body, which stops
scaling around 10k bodies (7-9 s to key 10k objects, and the outliner, depsgraph and file grow with
them). Here the whole simulation is one mesh of three points per body whose positions a Mesh Cache
modifier reads from a PC2 file (Blender's own reader, 4.2 onwards, frame by frame, interpolated at
subframes so motion blur sees the motion), and a geometry-nodes modifier turns each body's three
points into an instance of its own mesh: Axes to Rotation (4.2+) makes the rotation from the two
axis tips, Instance on Points picks the body's mesh from a collection of one object per distinct
mesh (Collection Info, Separate Children) by an index stored on the points. Nothing in the result
needs the add-on: a baked file plays and renders in any Blender from 4.2 on.

What a bake makes, for the simulation of scene S:
- collection "PRB S" (linked to the scene) holding the object "PRB Instances S" (the point mesh with
  its two modifiers) - the one object a user sees;
- collection "PRB S Meshes" (not linked to any scene, so it never renders by itself) holding one
  object per distinct body mesh: a copy of a dynamic object (its mesh, modifiers and materials) at
  the world origin, named "PRB_<index>_<name>" so that Collection Info lists them in index order;
- node group "PRB Instances S";
- the cache file ``<cache folder>/<blend name>_<S>.pc2`` ('//' paths are relative to the .blend).
The dynamic objects are hidden in viewports and renders (``hide_viewport``/``hide_render``), never
deleted; each remembers its earlier visibility and its cache object (``HIDDEN_BY``, ``VISIBILITY``).
Clear Bake (``clear_instances``) restores them and removes all of the above and the cache file.
"""
from __future__ import annotations

import os
import re

import bpy
import numpy as np

from ..core import point_cache
from .instance_cache_object import (CACHE_SCENE, GEOMETRY_COPY, HIDDEN_BY, MESHES, VISIBILITY, InstanceBakeError,
                                    build_cache_object, resolve_sources, simulation_name)

# The point cache's folder, by default beside the .blend (the Cache Folder property's default; the
# command line puts it beside --output)
CACHE_FOLDER_NAME = "prb_cache"
DEFAULT_CACHE_FOLDER = f"//{CACHE_FOLDER_NAME}/"
# Above this many bodies the panel suggests baking to instances.
SUGGEST_INSTANCES_ABOVE = 10_000


def _file_safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "scene"


def cache_paths(scene, folder: str | None) -> tuple[str, str]:
    """(path as stored in the file, absolute path) of the scene's cache file.

    A '//' folder is relative to the saved .blend; an unsaved file needs an absolute folder.
    """
    folder = folder or DEFAULT_CACHE_FOLDER
    blend = bpy.data.filepath
    if folder.startswith("//") and not blend:
        raise InstanceBakeError("save the .blend file first: the instance cache is written beside it "
                                f"({folder}), or choose an absolute cache folder")
    stem = _file_safe(os.path.splitext(os.path.basename(blend))[0]) if blend else "untitled"
    name = f"{stem}_{_file_safe(simulation_name(scene))}.pc2"
    absolute = os.path.normpath(os.path.join(bpy.path.abspath(folder), name))
    stored = absolute
    if blend:  # relative, so the .blend and its cache folder move together (save as remaps it)
        try:
            stored = bpy.path.relpath(absolute)
        except ValueError:  # another drive (Windows)
            pass
    return stored, absolute


def check_cache_folder(scene, folder: str | None) -> tuple[str, str]:
    """Refuse, before anything is simulated, a cache folder that cannot be written; (stored, absolute) path."""
    stored, absolute = cache_paths(scene, folder)
    problem = point_cache.check_writable_folder(os.path.dirname(absolute))
    if problem:
        raise InstanceBakeError(f"cannot bake to instances: {problem}; choose another cache folder")
    return stored, absolute


def cache_objects(scene=None) -> list:
    """Instance cache objects made by this add-on (of ``scene``'s simulation only, when given)."""
    return [o for o in bpy.data.objects if CACHE_SCENE in o
            and (scene is None or o[CACHE_SCENE] == simulation_name(scene))]


def hidden_originals(cache_obj) -> list:
    return [o for o in bpy.data.objects if o.get(HIDDEN_BY) == cache_obj]


def cache_file(cache_obj) -> str:
    """Absolute path of the cache file a cache object reads (its Mesh Cache modifier's, which Blender
    remaps when the .blend is saved elsewhere); '' without one."""
    for mod in cache_obj.modifiers:
        if mod.type == "MESH_CACHE" and mod.filepath:
            return os.path.normpath(bpy.path.abspath(mod.filepath))
    return ""


def missing_caches() -> list[tuple[str, str]]:
    """(cache object, absolute path) of every instance cache whose file is not there."""
    return [(obj.name, path) for obj in cache_objects() for path in [cache_file(obj)] if not os.path.isfile(path)]


# --------------------------------------------------------------------------------------------------
# the bake

class InstanceBake:
    """The instance side of a bake job: ``begin`` opens the cache, ``write`` takes each frame, ``finish``
    builds the cache object (or ``cancel`` leaves files and scene as they were)."""

    def __init__(self, scene, folder: str | None, frame_start: int, frame_step: int):
        self.scene = scene
        self.stored_path, self.path = check_cache_folder(scene, folder)
        self.frame_start = frame_start
        self.frame_step = frame_step
        self.writer = None
        self.body_frames = None
        self.sources = []
        self.body_source = None
        self.hide = []
        self.first_points = None
        self._unhidden = []

    def show_previous_originals(self) -> list:
        """Make the bodies of this scene's earlier instance bake visible again while the job reads them
        (hidden objects are not evaluated); ``cancel`` hides them again. Returns those objects."""
        objects = []
        for cache in cache_objects(self.scene):
            for obj in hidden_originals(cache):
                if obj.hide_viewport or obj.hide_render:
                    self._unhidden.append((obj.name, obj.hide_viewport, obj.hide_render))
                    obj.hide_viewport = False
                    obj.hide_render = False
                objects.append(obj)
        return objects

    def begin(self, sources, links, samples: int, body_source=None, hide=None) -> None:
        """Open the cache for ``links`` (one per body, in body order) over ``samples`` frames.

        ``sources``: the objects whose meshes the bodies show; ``body_source`` (B,): each body's index
        into them (default: body b shows sources[b]); ``hide``: objects the bake hides (default: sources).
        """
        self.sources = list(sources)
        self.body_source = (np.arange(len(self.sources)) if body_source is None
                            else np.asarray(body_source, dtype=np.int64))
        self.hide = self.sources if hide is None else list(hide)
        self.body_frames = point_cache.BodyFrames(
            np.array([link.com_local for link in links]),
            np.array([np.asarray(link.matrix_world, dtype=np.float64) for link in links]))
        points = self.body_frames.body_count * point_cache.POINTS_PER_BODY
        writer = point_cache.PointCacheWriter(self.path, points, samples, start_frame=self.frame_start,
                                             sample_rate=self.frame_step)
        # the points of a frame are made and written on a worker thread while the engine steps the next
        # frame (H100, 100k bodies: the loop waits 1.6 % of the simulation's time for it instead of
        # spending 32 % writing inline; bench/results/instances_gpu_h100.json)
        self.writer = point_cache.BackgroundCacheWriter(self.body_frames, writer)

    def write(self, positions, orientations) -> None:
        if self.first_points is None:  # the cache object's rest positions
            self.first_points = self.body_frames.points(positions, orientations)
        self.writer.submit(positions, orientations)

    def cancel(self) -> None:
        if self.writer is not None:
            self.writer.discard()
            self.writer = None
        for name, hide_viewport, hide_render in self._unhidden:
            obj = bpy.data.objects.get(name)
            if obj is not None:
                obj.hide_viewport, obj.hide_render = hide_viewport, hide_render
        self._unhidden = []

    def finish(self):
        """Replace this scene's earlier instance bake by the new one; returns the cache object.

        Call it with the scene at the first bake frame: meshes made by geometry nodes are copied from
        the instancers' evaluated instances now (``GeometrySource``)."""
        self._unhidden = []  # the earlier bake's originals are restored by its clearing below
        for old in cache_objects(self.scene):
            clear_instances(old, remove_files=cache_file(old) != self.path)
        self.writer.commit()
        self.writer = None
        temporary = []
        try:
            sources = resolve_sources(self.sources, temporary)
            return build_cache_object(self.scene, sources, self.body_source, self.body_frames, self.first_points,
                                      self.stored_path, self.frame_start, self.frame_step, hide=self.hide)
        except BaseException:
            os.remove(self.path)
            raise
        finally:
            for obj in temporary:  # the proxies copied them; their meshes stay with the proxies
                mesh = obj.data
                bpy.data.objects.remove(obj)
                if mesh.users == 0:
                    bpy.data.meshes.remove(mesh)


def clear_instances(cache_obj, remove_files: bool = True) -> int:
    """Undo an instance bake: show its bodies again, remove its objects, node group, collections and
    (``remove_files``) its cache file. Returns the number of bodies shown again."""
    originals = hidden_originals(cache_obj)
    for obj in originals:
        hide = obj.get(VISIBILITY)
        obj.hide_viewport, obj.hide_render = (bool(hide[0]), bool(hide[1])) if hide is not None else (False, False)
        for key in (HIDDEN_BY, VISIBILITY):
            if key in obj:
                del obj[key]
    path = cache_file(cache_obj)
    meshes_coll = cache_obj.get(MESHES)
    scene_name = cache_obj.get(CACHE_SCENE)
    group = None
    mesh = cache_obj.data
    for mod in cache_obj.modifiers:
        if mod.type == "NODES":
            group = mod.node_group
    remove = [cache_obj, mesh]
    if group is not None and group.users <= 1:
        remove.append(group)
    copies = []
    if meshes_coll is not None:
        remove.extend(meshes_coll.objects)
        remove.append(meshes_coll)
        copies = [p.data for p in meshes_coll.objects if p.data is not None and p.data.get(GEOMETRY_COPY)]
    bpy.data.batch_remove(remove)
    bpy.data.batch_remove([m for m in copies if m.users == 0])
    for coll in list(bpy.data.collections):
        if coll.get(CACHE_SCENE) == scene_name and not len(coll.objects) and not len(coll.children):
            bpy.data.collections.remove(coll)
    if remove_files and path:
        if os.path.isfile(path):
            os.remove(path)
        folder = os.path.dirname(path)
        try:
            if os.path.isdir(folder) and not os.listdir(folder):
                os.rmdir(folder)
        except OSError:
            pass
    return len(originals)


def clear_scene_instances(scene) -> int:
    """Clear every instance bake of ``scene``'s simulation; the number of bodies shown again."""
    return sum(clear_instances(obj) for obj in cache_objects(scene))


# --------------------------------------------------------------------------------------------------
# opening a file whose cache is missing

_missing_at_load: list = []


def missing_at_load() -> list:
    """The caches found missing when the file was opened that still are: a Clear Bake (the cache
    object gone) or a new bake (the file written again) takes one off the list."""
    return [(name, path) for name, path in _missing_at_load
            if name in bpy.data.objects and not os.path.isfile(path)]


def missing_cache_message(name: str, path: str) -> str:
    return (f"the instance cache of {name!r} is missing ({path}); the bodies stay at their first frame. "
            "Bake again, or put the cache file back")


class PRB_OT_report_missing_caches(bpy.types.Operator):
    """Warn about instance caches whose file is missing (run after a file is opened)"""

    bl_idname = "prb.report_missing_caches"
    bl_label = "Report Missing Instance Caches"
    bl_options = {"INTERNAL"}

    def execute(self, context):
        for name, path in missing_at_load():
            self.report({"WARNING"}, missing_cache_message(name, path))
        return {"FINISHED"}


def _report_in_window():
    """Timer: the warning in the status bar and Info editor of the window that opened the file (a load
    handler has no operator to report through)."""
    try:
        bpy.ops.prb.report_missing_caches()
    except Exception as exc:  # a warning must never break opening a file
        print(f"PRB: could not show the missing-cache warning: {exc}", flush=True)
    return None


@bpy.app.handlers.persistent
def _check_caches_on_load(_dummy=None):
    _missing_at_load[:] = missing_caches()
    for name, path in _missing_at_load:
        print(f"PRB: warning: {missing_cache_message(name, path)}", flush=True)
    if _missing_at_load and not bpy.app.background:
        bpy.app.timers.register(_report_in_window, first_interval=0.5)


classes = (PRB_OT_report_missing_caches,)


def register():
    if _check_caches_on_load not in bpy.app.handlers.load_post:
        bpy.app.handlers.load_post.append(_check_caches_on_load)


def unregister():
    if _check_caches_on_load in bpy.app.handlers.load_post:
        bpy.app.handlers.load_post.remove(_check_caches_on_load)
    _missing_at_load.clear()


# --------------------------------------------------------------------------------------------------
# user interface pieces (the panels and Clear Bake call these)

def draw_bake_to(layout, scene, bodies: int, instancers: dict | None = None) -> None:
    """The Bake To choice, the cache folder, the suggestion above ~10k bodies, instancers that need
    Instances (``instancers``: name -> instances) and missing caches."""
    s = scene.prb_settings
    layout.prop(s, "bake_mode", expand=True)
    if s.bake_mode == "INSTANCES":
        layout.prop(s, "cache_folder")
    else:
        for name, count in (instancers or {}).items():
            layout.label(text=f"{name}: {count:,} instances bake to Instances only", icon="ERROR")
        if bodies > SUGGEST_INSTANCES_ABOVE and not instancers:
            layout.label(text=f"{bodies:,} bodies: Bake To Instances is lighter", icon="INFO")
    for name, _path in missing_at_load():
        layout.label(text=f"{name}: cache file missing, bake again", icon="ERROR")


def caches_to_clear(context, selected_only: bool) -> list:
    """Cache objects Clear Bake removes: the selected ones, or (``selected_only`` False) all of the scene's."""
    if selected_only:
        return [o for o in context.selected_objects if CACHE_SCENE in o]
    return cache_objects(context.scene)
