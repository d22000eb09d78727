"""Sidebar tab "Particle Bodies" in the 3D viewport, and the per-object panel in Object properties."""
from __future__ import annotations

import textwrap

import bpy

from . import bake, bake_instances, instancers, properties
from .preferences import wrap_width
from .job import BakeOptions, estimate, pick_objects

CATEGORY = "Particle Bodies"


def _format_bytes(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024.0
    return f"{n:.1f} GB"


def _operator_registered(class_name: str) -> bool:
    return bpy.types.Operator.bl_rna_get_subclass_py(class_name) is not None


def draw_object_settings(layout, obj) -> None:
    s = obj.prb
    layout.use_property_split = True
    layout.use_property_decorate = False
    layout.prop(s, "role")
    if s.role in ("IGNORED",):
        return
    col = layout.column()
    if s.role != "STATIC":
        col.prop(s, "mass_mode")
        col.prop(s, "density" if s.mass_mode == "DENSITY" else "mass")
    col.prop(s, "friction")
    col.prop(s, "bounciness")
    if s.role != "STATIC":
        col.prop(s, "linear_damping")
        col.prop(s, "angular_damping")
        col.prop(s, "initial_velocity")
        col.prop(s, "initial_angular_velocity")
    if obj.type != "MESH" and not instancers.may_instance(obj):
        layout.label(text="Only mesh objects and instancers can be simulated", icon="ERROR")


class PRB_PT_main(bpy.types.Panel):
    bl_idname = "PRB_PT_main"
    bl_label = "Particle Rigid Bodies"
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = CATEGORY

    def draw(self, context):
        layout = self.layout
        scene = context.scene
        col = layout.column(align=True)
        col.scale_y = 1.4
        col.operator("prb.simulate_bake", icon="PHYSICS")
        row = layout.row(align=True)
        row.operator("prb.clear_bake", icon="TRASH")
        if _operator_registered("PRB_OT_toggle_preview"):
            row.operator("prb.toggle_preview", icon="HIDE_OFF")
        dynamic, static = pick_objects(context)
        options = BakeOptions.from_scene(scene)
        est = estimate(context, dynamic, options)
        box = layout.box()
        col = box.column(align=True)
        if not dynamic:
            col.label(text="Select mesh objects or give them a role", icon="INFO")
        else:
            col.label(text=f"{est['bodies']} bodies, {len(static)} colliders, ~{est['particles']:,} particles",
                      icon="MOD_PARTICLES")
            col.label(text=f"Memory ~{_format_bytes(est['memory'])}, "
                           f"frames {options.frame_start}-{options.frame_end}", icon="MEMORY")
        problem = properties.opencl_problem()
        if problem:
            col.label(text="No OpenCL device: see the tooltip of Device", icon="ERROR")
            for line in textwrap.wrap(problem, wrap_width(context), break_long_words=False, break_on_hyphens=False):
                col.label(text=line)
        else:
            col.label(text=f"Device: {properties.device_label(scene.prb_settings.device)}", icon="DESKTOP")
        bake_instances.draw_bake_to(layout.column(), scene, est["bodies"], est.get("instancers"))
        baked = sum(1 for o in scene.objects if bake.has_bake(o))
        if baked:
            col.label(text=f"{baked} object{'s' if baked != 1 else ''} baked", icon="KEYFRAME")


class PRB_PT_scene(bpy.types.Panel):
    bl_idname = "PRB_PT_scene"
    bl_label = "Simulation"
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = CATEGORY
    bl_parent_id = "PRB_PT_main"

    def draw(self, context):
        layout = self.layout
        layout.use_property_split = True
        layout.use_property_decorate = False
        scene = context.scene
        s = scene.prb_settings
        layout.prop(s, "use_scene_frame_range")
        col = layout.column(align=True)
        if s.use_scene_frame_range:
            col.enabled = False
            col.prop(scene, "frame_start", text="Start")
            col.prop(scene, "frame_end", text="End")
        else:
            col.prop(s, "frame_start")
            col.prop(s, "frame_end")
        layout.prop(s, "frame_step")
        layout.prop(s, "substeps_mode")
        if s.substeps_mode == "MANUAL":
            layout.prop(s, "substeps")
        layout.prop(scene, "use_gravity", text="Gravity")
        row = layout.row()
        row.enabled = scene.use_gravity
        row.prop(scene, "gravity", text="")
        layout.prop(s, "radius_mode")
        if s.radius_mode == "MANUAL":
            layout.prop(s, "particle_radius")
        layout.prop(s, "target_penetration")
        layout.prop(s, "use_sleep")
        if s.use_sleep:
            col = layout.column(align=True)
            col.prop(s, "sleep_speed")
            col.prop(s, "sleep_time")
        row = layout.row(align=True)
        row.prop(s, "device")
        row.operator("prb.refresh_devices", text="", icon="FILE_REFRESH")
        layout.prop(s, "max_particles")


class PRB_PT_object(bpy.types.Panel):
    bl_idname = "PRB_PT_object"
    bl_label = "Active Object"
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = CATEGORY
    bl_parent_id = "PRB_PT_main"

    @classmethod
    def poll(cls, context):
        return context.object is not None

    def draw_header(self, context):
        self.layout.label(text=context.object.name, icon="OBJECT_DATA")

    def draw(self, context):
        draw_object_settings(self.layout, context.object)


class PRB_PT_object_properties(bpy.types.Panel):
    bl_idname = "PRB_PT_object_properties"
    bl_label = "Particle Rigid Body"
    bl_space_type = "PROPERTIES"
    bl_region_type = "WINDOW"
    bl_context = "object"

    @classmethod
    def poll(cls, context):
        return context.object is not None

    def draw(self, context):
        draw_object_settings(self.layout, context.object)


classes = (PRB_PT_main, PRB_PT_scene, PRB_PT_object, PRB_PT_object_properties)
