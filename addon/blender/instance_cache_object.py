"""What an instance bake makes in the .blend (bake_instances.py says why and what): the cache object
with its Mesh Cache and geometry-nodes modifiers, its node group, the collection of one proxy object
per distinct mesh, and the names and custom properties that mark them and the objects it hides."""
from __future__ import annotations

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


class InstanceBakeError(ValueError):
    """A reason the instance bake cannot run, for the user."""


def simulation_name(scene) -> str:
    return scene.name


def collection_name(scene) -> str:
    return f"PRB {simulation_name(scene)}"


def cache_object_name(scene) -> str:
    return f"PRB Instances {simulation_name(scene)}"


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
