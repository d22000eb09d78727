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
from ..core.settings import ROLE_IGNORED

CACHE_SCENE = "prb_instances_scene"  # on the cache object: name of the scene whose simulation it shows
MESHES = "prb_meshes"  # on the cache object: its meshes collection
HIDDEN_BY = "_prb_hidden_by"  # on a dynamic object: the cache object that shows it
VISIBILITY = "_prb_visibility"  # on a dynamic object: (hide_viewport, hide_render) before the bake
GEOMETRY_COPY = "prb_geometry_copy"  # on a mesh the bake copied from geometry-nodes instances
MESH_INDEX = "prb_mesh"  # point attributes read by the node group
SCALE = "prb_scale"
ORIGIN = "prb_origin"
# The point cache's folder, by default beside the .blend (the Cache Folder property's default; the
# command line puts it beside --output)
CACHE_FOLDER_NAME = "prb_cache"
DEFAULT_CACHE_FOLDER = f"//{CACHE_FOLDER_NAME}/"
# Above this many bodies the panel suggests baking to instances.
SUGGEST_INSTANCES_ABOVE = 10_000


class InstanceBakeError(ValueError):
    """A reason the instance bake cannot run, for the user."""


def simulation_name(scene) -> str:
    return scene.name


def collection_name(scene) -> str:
    return f"PRB {simulation_name(scene)}"


def cache_object_name(scene) -> str:
    return f"PRB Instances {simulation_name(scene)}"


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


class GeometrySource:
    """A mesh that geometry nodes made for an instancer's instances: it exists only in the evaluated
    scene, so the bake copies it (``resolve_sources``) when it builds the cache object."""

    def __init__(self, instancer: str, ordinal: int):
        self.instancer = instancer
        self.ordinal = ordinal


def body_sources(objects, links, instancer_bodies):
    """(sources, body_source, hide) for ``InstanceBake.begin``: what each body shows and what the bake hides.

    ``objects``/``links``: per body, in body order (an instancer's bodies carry the instancer as their
    object); ``instancer_bodies``: instancers.InstancerBodies by instancer name. A body of an instancer
    shows its instance's mesh: the instanced object (particles, collections, Collection Info) or a
    ``GeometrySource``; every other body its own object. The bake hides the dynamic objects and instancers."""
    sources, index_of, body_source, hide, hidden = [], {}, [], [], set()
    for obj, link in zip(objects, links):
        if obj.name not in hidden:
            hidden.add(obj.name)
            hide.append(obj)
        instancer = getattr(link, "instancer", "")
        mesh = instancer_bodies[instancer].meshes[link.instance_mesh] if instancer else None
        if mesh is None:
            key = ("object", obj.name)
        elif mesh.source_object:
            key = ("object", mesh.source_object)
        else:
            key = ("geometry", instancer, mesh.ordinal)
        if key not in index_of:
            index_of[key] = len(sources)
            sources.append(GeometrySource(instancer, mesh.ordinal) if key[0] == "geometry"
                           else obj if mesh is None else bpy.data.objects[mesh.source_object])
        body_source.append(index_of[key])
    return sources, np.array(body_source, dtype=np.int64), hide


def resolve_sources(sources, temporary: list) -> list:
    """Objects for ``build_cache_object``: each ``GeometrySource`` becomes an object (not in any scene,
    appended to ``temporary``) holding a copy of its mesh, coloured as its instancer (materials reading
    the object's colour see the instancer's colour on its instances)."""
    from . import instancers

    wanted: dict = {}
    for source in sources:
        if isinstance(source, GeometrySource):
            wanted.setdefault(source.instancer, set()).add(source.ordinal)
    if not wanted:
        return list(sources)
    depsgraph = bpy.context.evaluated_depsgraph_get()
    meshes = {name: instancers.mesh_copies(depsgraph, name, ordinals) for name, ordinals in wanted.items()}
    out = []
    try:
        for source in sources:
            if not isinstance(source, GeometrySource):
                out.append(source)
                continue
            mesh = meshes[source.instancer].pop(source.ordinal, None)
            if mesh is None:
                raise InstanceBakeError(f"{source.instancer}: its instances changed while baking; bake again")
            mesh[GEOMETRY_COPY] = True  # Clear Bake removes it with the proxy that shows it
            obj = bpy.data.objects.new(f"{source.instancer} {mesh.name}", mesh)
            obj.color = bpy.data.objects[source.instancer].color
            temporary.append(obj)
            out.append(obj)
    finally:
        for left in meshes.values():  # copies no source took (only when failing)
            for mesh in left.values():
                bpy.data.meshes.remove(mesh)
    return out


def _proxy_key(obj):
    """Objects sharing a proxy: same data-block, no modifiers, materials from the data, same object
    colour (materials read it through Object Info; an instance reads its proxy's)."""
    if obj.type == "MESH" and not len(obj.modifiers) and all(s.link == "DATA" for s in obj.material_slots):
        return ("data", obj.data.name_full, tuple(round(c, 4) for c in obj.color))
    return ("object", obj.name_full)


def _make_proxy(obj, index: int, collection):
    proxy = obj.copy()
    proxy.name = f"PRB_{index:06d}_{obj.name}"[:63]
    proxy.parent = None
    proxy.animation_data_clear()
    proxy.constraints.clear()
    proxy.delta_location = (0.0, 0.0, 0.0)
    proxy.delta_rotation_euler = (0.0, 0.0, 0.0)
    proxy.delta_rotation_quaternion = (1.0, 0.0, 0.0, 0.0)
    proxy.delta_scale = (1.0, 1.0, 1.0)
    # matrix_world too: outside any scene nothing re-evaluates it before the node tree uses the object
    proxy.matrix_world = np.identity(4).tolist()
    proxy.hide_viewport = False
    proxy.hide_render = False
    for key in (HIDDEN_BY, VISIBILITY, "_prb_previous_action", "_prb_previous_slot", "_prb_rest",
                "_prb_had_animation_data"):
        if key in proxy:
            del proxy[key]
    collection.objects.link(proxy)
    return proxy


def build_node_group(name: str, meshes_collection):
    """Three points per body -> one instance of the body's mesh at its pose (see the module docstring)."""
    group = bpy.data.node_groups.new(name, "GeometryNodeTree")
    group.interface.new_socket("Geometry", in_out="INPUT", socket_type="NodeSocketGeometry")
    group.interface.new_socket("Geometry", in_out="OUTPUT", socket_type="NodeSocketGeometry")
    nodes, links = group.nodes, group.links
    group_in = nodes.new("NodeGroupInput")
    group_out = nodes.new("NodeGroupOutput")

    def attribute(name, data_type):
        node = nodes.new("GeometryNodeInputNamedAttribute")
        node.data_type = data_type
        node.inputs["Name"].default_value = name
        return node.outputs["Attribute"]

    position = nodes.new("GeometryNodeInputPosition").outputs["Position"]
    index = nodes.new("GeometryNodeInputIndex").outputs["Index"]
    axes = []
    for offset in (1, 2):  # a body's points are 3b (origin), 3b + 1 (x tip), 3b + 2 (y tip)
        # float index arithmetic is exact up to 2^24 points (5.5M bodies)
        add = nodes.new("ShaderNodeMath")
        add.operation = "ADD"
        links.new(index, add.inputs[0])
        add.inputs[1].default_value = offset
        tip = nodes.new("GeometryNodeFieldAtIndex")
        tip.data_type = "FLOAT_VECTOR"
        tip.domain = "POINT"
        links.new(add.outputs[0], tip.inputs["Index"])
        links.new(position, tip.inputs["Value"])
        sub = nodes.new("ShaderNodeVectorMath")
        sub.operation = "SUBTRACT"
        links.new(tip.outputs[0], sub.inputs[0])
        links.new(position, sub.inputs[1])
        axes.append(sub.outputs["Vector"])
    rotation = nodes.new("FunctionNodeAxesToRotation")
    rotation.primary_axis = "X"
    rotation.secondary_axis = "Y"
    links.new(axes[0], rotation.inputs["Primary Axis"])
    links.new(axes[1], rotation.inputs["Secondary Axis"])
    meshes = nodes.new("GeometryNodeCollectionInfo")
    meshes.transform_space = "ORIGINAL"
    meshes.inputs["Collection"].default_value = meshes_collection
    meshes.inputs["Separate Children"].default_value = True
    meshes.inputs["Reset Children"].default_value = True
    instance = nodes.new("GeometryNodeInstanceOnPoints")
    links.new(group_in.outputs["Geometry"], instance.inputs["Points"])
    links.new(attribute(ORIGIN, "BOOLEAN"), instance.inputs["Selection"])
    links.new(meshes.outputs[0], instance.inputs["Instance"])
    instance.inputs["Pick Instance"].default_value = True
    links.new(attribute(MESH_INDEX, "INT"), instance.inputs["Instance Index"])
    links.new(rotation.outputs["Rotation"], instance.inputs["Rotation"])
    links.new(attribute(SCALE, "FLOAT_VECTOR"), instance.inputs["Scale"])
    links.new(instance.outputs["Instances"], group_out.inputs["Geometry"])
    return group


def build_cache_object(scene, sources, body_source, body_frames, first_points, stored_path: str, frame_start: int,
                       frame_step: int, hide=()):
    """The cache object, its collections and node group; hides the objects in ``hide``.

    Body b shows the mesh of ``sources[body_source[b]]``; sources sharing a mesh (``_proxy_key``) share
    one object of the meshes collection."""
    name = cache_object_name(scene)
    made = []  # (collection of bpy.data, data-block) to remove if anything fails
    try:
        meshes_coll = bpy.data.collections.new(f"{collection_name(scene)} Meshes")
        made.append((bpy.data.collections, meshes_coll))
        proxies: dict = {}
        proxy_of_source = np.empty(len(sources), dtype=np.int32)
        for i, obj in enumerate(sources):
            key = _proxy_key(obj)
            if key not in proxies:
                proxies[key] = (len(proxies), _make_proxy(obj, len(proxies), meshes_coll))
                made.append((bpy.data.objects, proxies[key][1]))
            proxy_of_source[i] = proxies[key][0]
        mesh_index = proxy_of_source[np.asarray(body_source)]

        bodies = len(mesh_index)
        per = point_cache.POINTS_PER_BODY
        mesh = bpy.data.meshes.new(name)
        made.append((bpy.data.meshes, mesh))
        mesh.vertices.add(bodies * per)
        # rest positions = the first frame: the bodies show where they start if the cache is missing
        mesh.vertices.foreach_set("co", np.asarray(first_points, dtype=np.float32).ravel())
        index_attr = mesh.attributes.new(MESH_INDEX, "INT", "POINT")
        index_attr.data.foreach_set("value", np.repeat(mesh_index, per))
        scale_attr = mesh.attributes.new(SCALE, "FLOAT_VECTOR", "POINT")
        scale_attr.data.foreach_set("vector", np.repeat(body_frames.scales.astype(np.float32), per, axis=0).ravel())
        origin_attr = mesh.attributes.new(ORIGIN, "BOOLEAN", "POINT")
        origin_flags = np.zeros((bodies, per), dtype=bool)
        origin_flags[:, 0] = True
        origin_attr.data.foreach_set("value", origin_flags.ravel())
        mesh.update()

        group = build_node_group(name, meshes_coll)
        made.append((bpy.data.node_groups, group))
        cache_obj = bpy.data.objects.new(name, mesh)
        made.append((bpy.data.objects, cache_obj))
        cache_mod = cache_obj.modifiers.new("PRB Point Cache", "MESH_CACHE")
        cache_mod.cache_format = "PC2"
        cache_mod.filepath = stored_path
        cache_mod.time_mode = "FRAME"
        cache_mod.play_mode = "SCENE"
        # the modifier reads sample (scene frame * frame_scale - frame_start) (measured, 4.2 and 5.0)
        cache_mod.frame_scale = 1.0 / frame_step
        cache_mod.frame_start = frame_start / frame_step
        cache_mod.interpolation = "LINEAR"
        cache_mod.forward_axis = "POS_Y"
        cache_mod.up_axis = "POS_Z"
        nodes_mod = cache_obj.modifiers.new("PRB Instances", "NODES")
        nodes_mod.node_group = group
        if hasattr(cache_obj, "prb"):  # never taken for a body when selected at the next bake
            cache_obj.prb.role = ROLE_IGNORED
        cache_obj[CACHE_SCENE] = simulation_name(scene)
        cache_obj[MESHES] = meshes_coll

        coll = bpy.data.collections.get(collection_name(scene))
        if coll is None or CACHE_SCENE not in coll:
            coll = bpy.data.collections.new(collection_name(scene))
            made.append((bpy.data.collections, coll))
            coll[CACHE_SCENE] = simulation_name(scene)
        if coll.name not in scene.collection.children:
            scene.collection.children.link(coll)
        coll.objects.link(cache_obj)
    except BaseException:
        for data, block in reversed(made):
            data.remove(block)
        raise
    for obj in hide:
        if HIDDEN_BY not in obj or obj[HIDDEN_BY] is None:
            obj[VISIBILITY] = [obj.hide_viewport, obj.hide_render]
        obj[HIDDEN_BY] = cache_obj
        obj.hide_viewport = True
        obj.hide_render = True
    return cache_obj


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
