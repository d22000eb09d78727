"""Snapshots and scene builders for the Blender-layer tests."""
from __future__ import annotations

import bpy  # noqa: E402


def data_counts() -> dict:
    names = ("objects", "meshes", "actions", "materials", "collections", "images", "node_groups", "textures",
             "curves", "lights", "cameras", "scenes", "worlds")
    return {n: len(getattr(bpy.data, n)) for n in names}


def action_snapshot(action):
    from addon.blender.bake import action_fcurves

    if action is None:
        return None
    curves = []
    for fc in action_fcurves(action):
        keys = [(tuple(k.co), k.interpolation, tuple(k.handle_left), tuple(k.handle_right)) for k in fc.keyframe_points]
        curves.append((fc.data_path, fc.array_index, keys))
    slots = [s.identifier for s in action.slots] if hasattr(action, "slots") else []
    return dict(name=action.name, curves=sorted(curves), slots=slots, custom=sorted(action.keys()))


def object_snapshot(obj) -> dict:
    ad = obj.animation_data
    slot = None
    if ad is not None and "action_slot" in ad.bl_rna.properties and ad.action_slot is not None:
        slot = ad.action_slot.identifier
    return dict(
        location=tuple(obj.location), rotation_mode=obj.rotation_mode, euler=tuple(obj.rotation_euler),
        quaternion=tuple(obj.rotation_quaternion), axis_angle=tuple(obj.rotation_axis_angle),
        scale=tuple(obj.scale), matrix_world=[tuple(r) for r in obj.matrix_world],
        has_animation_data=ad is not None, action=action_snapshot(ad.action if ad else None), slot=slot,
        custom=sorted(k for k in obj.keys() if k != "prb"),  # 4.2/4.5 list registered property storage too
        parent=obj.parent.name if obj.parent else None,
    )


def scene_snapshot() -> dict:
    scene = bpy.context.scene
    return dict(
        frame=(scene.frame_current, scene.frame_subframe),
        counts=data_counts(),
        objects={o.name: object_snapshot(o) for o in bpy.data.objects},
        actions={a.name: action_snapshot(a) for a in bpy.data.actions},
        selected=sorted(o.name for o in bpy.context.selected_objects),
    )


def add_cube(name, location, size=0.4, rotation=(0.0, 0.0, 0.0), rotation_mode="XYZ", role="DYNAMIC"):
    bpy.ops.mesh.primitive_cube_add(size=size, location=location, rotation=rotation)
    obj = bpy.context.object
    obj.name = name
    if rotation_mode != "XYZ":
        m = obj.matrix_world.copy()
        obj.rotation_mode = rotation_mode
        obj.matrix_world = m
    obj.prb.role = role
    return obj


def fresh_scene(frame_start=1, frame_end=12):
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = frame_start, frame_end
    scene.frame_set(frame_start)
    return scene


class LabelLayout:
    """A stand-in for a panel's layout that records the labels its draw() makes, without a window."""

    def __init__(self, out):
        self.out = out

    def __getattr__(self, name):
        return lambda *args, **kwargs: self

    def label(self, text="", **kwargs):
        self.out.append(text)


def draw_labels(panel_class) -> list:
    """The labels ``panel_class.draw`` makes in the current context."""
    out = []
    panel_class.draw(type("Panel", (), {"layout": LabelLayout(out)})(), bpy.context)
    return out
