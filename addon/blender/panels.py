"""Sidebar tab "Particle Bodies" in the 3D viewport, and the per-object panel in Object properties.

draw() runs on every redraw of the sidebar (mouse moves included), so it reads only settings and a
cached ``SceneSummary`` (objects picked, particles estimated, baked objects counted: walks over the
scene). The summary is recomputed at the next draw after the depsgraph has been quiet for
``REFRESH_DELAY`` seconds (a depsgraph_update_post handler restarts a one-shot timer on every update),
or at once with the Refresh button.
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass

import bpy

from . import bake, bake_instances, cpu_driver, instancers, properties, rigid_body_world
from .glue_bodies import object_glue
from .scene_objects import ConversionError
from ..core.contact_geometry import CONTACT_GEOMETRY
from ..core.settings import ROLE_IGNORED, ROLE_STATIC
from .bake_objects import estimate, format_bytes, pick_objects, transform_problem
from .bake_options import BakeError, BakeOptions, manual_stiffness, read_world
from .preferences import ADDON_MODULE, wrap_width

CATEGORY = "Particle Bodies"
REFRESH_DELAY = 0.5  # s without depsgraph updates (an object being dragged) before the estimate is redone


@dataclass(frozen=True)
class SceneSummary:
    """What the sidebar says about the scene (what Simulate & Bake would take, roughly)."""

    dynamic: int  # objects that would be simulated
    bodies: int  # bodies they make (an instancer makes one per instance)
    static: int  # static colliders
    particles: int  # estimate from bounding boxes (bake_objects.estimate)
    memory: int  # bytes of device memory, estimated
    baked: int  # objects holding a keyframe bake
    instancers: dict  # name -> instances, of the dynamic instancers (they bake to instances only)
    refused: str | None = None  # why Simulate & Bake would refuse the objects (bake_objects.transform_problem)
    world: str = ""  # what the Rigid Body world set up, when it is the setup (RigidBodyWorld.summary)
    # the constraints the bake leaves out, or reads differently from Bullet (RigidBodyWorld.constraints_note)
    world_note: str | None = None


_summary: dict = {"scene": None, "value": None, "stale": True}


def scene_options(scene) -> tuple[BakeOptions | None, str | None]:
    """(the scene's BakeOptions, None), or (None, why Simulate & Bake would refuse them)."""
    try:
        return BakeOptions.from_scene(scene), None
    except BakeError as exc:
        return None, str(exc)


def compute_summary(context) -> SceneSummary:
    try:
        world, refused = read_world(context.scene), None
    except BakeError as exc:
        world, refused = None, str(exc)
    dynamic, static = pick_objects(context, world=world) if refused is None else ([], [])
    est = estimate(context, dynamic, scene_options(context.scene)[0])
    baked = sum(1 for o in context.scene.objects if bake.has_bake(o))
    return SceneSummary(len(dynamic), est["bodies"], len(static), est["particles"], est["memory"], baked,
                        est["instancers"], refused or transform_problem(dynamic + static),
                        world.summary() if world is not None else "",
                        world.constraints_note() if world is not None else None)


def refresh_summary(context) -> SceneSummary:
    _summary.update(scene=context.scene.name, value=compute_summary(context), stale=False)
    return _summary["value"]


def scene_summary(context) -> SceneSummary:
    """The cached summary; computed here only when stale or for another scene."""
    if _summary["stale"] or _summary["value"] is None or _summary["scene"] != context.scene.name:
        return refresh_summary(context)
    return _summary["value"]


def _redraw_sidebars() -> None:
    for window in getattr(bpy.context.window_manager, "windows", ()):
        for area in window.screen.areas:
            if area.type == "VIEW_3D":
                area.tag_redraw()


def _summary_after_quiet():
    """Timer: the depsgraph has been quiet for REFRESH_DELAY; the next draw recomputes."""
    _summary["stale"] = True
    _redraw_sidebars()
    return None  # one shot


@bpy.app.handlers.persistent
def _on_load_post(*_args):  # another file: its scene may have the same name
    _summary["stale"] = True


@bpy.app.handlers.persistent
def _on_depsgraph_update(_scene, _depsgraph):
    if bpy.app.background:  # no sidebar draws: mark it, whoever reads the summary recomputes
        _summary["stale"] = True
        return
    if bpy.app.timers.is_registered(_summary_after_quiet):
        bpy.app.timers.unregister(_summary_after_quiet)
    bpy.app.timers.register(_summary_after_quiet, first_interval=REFRESH_DELAY)


class PRB_OT_refresh_summary(bpy.types.Operator):
    """Count the bodies and estimate their particles again"""

    bl_idname = "prb.refresh_summary"
    bl_label = "Refresh Estimate"
    bl_options = {"INTERNAL"}

    def execute(self, context):
        refresh_summary(context)
        _redraw_sidebars()
        return {"FINISHED"}


def draw_object_settings(layout, obj) -> None:
    s = obj.prb
    layout.use_property_split = True
    layout.use_property_decorate = False
    layout.prop(s, "role")
    if s.role == ROLE_IGNORED:
        return
    col = layout.column()
    if s.role != ROLE_STATIC:
        col.prop(s, "mass_mode")
        col.prop(s, "density" if s.mass_mode == "DENSITY" else "mass")
    col.prop(s, "friction")
    col.prop(s, "bounciness")
    if s.role != ROLE_STATIC:
        col.prop(s, "linear_damping")
        col.prop(s, "angular_damping")
        col.prop(s, "initial_velocity")
        col.prop(s, "initial_angular_velocity")
    if s.role != ROLE_STATIC:
        draw_object_glue(layout, obj)
    if obj.type != "MESH" and not instancers.may_instance(obj):
        layout.label(text="Only mesh objects and instancers can be simulated", icon="ERROR")


def draw_object_glue(layout, obj) -> None:
    """The object's Glue, and what it comes to when its collection sets it."""
    s = obj.prb
    col = layout.column()
    col.prop(s, "glue")
    if s.glue == properties.GLUE_ON:
        col.prop(s, "glue_strength", text="Strength (Pa)")
        col.prop(s, "glue_group", text="Group")
        if not s.glue_group and obj.users_collection:
            col.label(text=f'Group: "{obj.users_collection[0].name}" (its collection)', icon="INFO")
    elif s.glue == properties.GLUE_FROM_COLLECTION:
        try:
            glue = object_glue(obj)
        except ConversionError as exc:
            col.label(text=str(exc), icon="ERROR")
            return
        collections = [c for c in obj.users_collection if hasattr(c, "prb_glue")]
        # the collection that glues it (else its first): its glue is edited here too
        source = next((c for c in collections if c.prb_glue.use_glue), collections[0] if collections else None)
        if source is None:
            col.label(text="Not glued: it is in no collection", icon="UNLINKED")
            return
        box = col.box()
        box.label(text=f'Collection "{source.name}"', icon="OUTLINER_COLLECTION")
        draw_collection_glue(box, source)
        if not glue.enabled:
            box.label(text="Not glued: no collection of it glues", icon="UNLINKED")


def draw_collection_glue(layout, collection) -> None:
    glue = collection.prb_glue
    layout.use_property_split = True
    layout.use_property_decorate = False
    layout.prop(glue, "use_glue")
    col = layout.column()
    col.active = glue.use_glue
    col.prop(glue, "glue_strength", text="Strength (Pa)")
    col.prop(glue, "glue_group", text="Group")
    if not glue.glue_group:
        col.label(text=f'Group: "{collection.name}"', icon="INFO")


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
        row.operator("prb.toggle_preview", icon="HIDE_OFF")
        summary = scene_summary(context)
        options, refused = scene_options(scene)
        box = layout.box()
        col = box.column(align=True)
        row = col.row(align=True)
        if not summary.dynamic and not summary.refused:
            row.label(text="Add ACTIVE rigid bodies to the Rigid Body world" if rigid_body_world.is_setup(scene)
                      else "Select mesh objects or give them a role", icon="INFO")
        else:
            row.label(text=f"{summary.bodies} bodies, {summary.static} colliders, ~{summary.particles:,} particles",
                      icon="MOD_PARTICLES")
        row.operator(PRB_OT_refresh_summary.bl_idname, text="", icon="FILE_REFRESH")
        if summary.world:
            col.label(text=summary.world, icon="PHYSICS")
        if summary.world_note:
            col.label(text="Constraints:", icon="ERROR")
            for line in textwrap.wrap(summary.world_note, wrap_width(context), break_long_words=False,
                                      break_on_hyphens=False):
                col.label(text=line)
        if summary.dynamic:
            frames = f", frames {options.frames.frame_start}-{options.frames.frame_end}" if options else ""
            col.label(text=f"Memory ~{format_bytes(summary.memory)}{frames}", icon="MEMORY")
        for heading, why in (("Settings refused:", refused), ("Objects refused:", summary.refused)):
            if why:
                col.label(text=heading, icon="ERROR")
                for line in textwrap.wrap(why, wrap_width(context), break_long_words=False, break_on_hyphens=False):
                    col.label(text=line)
        problem = properties.opencl_problem()
        if problem:
            col.label(text="No OpenCL device: see the tooltip of Device", icon="ERROR")
            for line in textwrap.wrap(problem, wrap_width(context), break_long_words=False, break_on_hyphens=False):
                col.label(text=line)
        else:
            col.label(text=f"Device: {properties.device_label(scene.prb_settings.device)}", icon="DESKTOP")
        if (problem or properties.automatic_device() is None) and cpu_driver.needed():
            # PoCL lists a CPU it cannot compile for (AMD Zen 5, Intel's newest): Intel's runtime can
            col.label(text="A CPU driver that knows this CPU: Get CPU Driver in the add-on's Preferences",
                      icon="INFO")
            col.operator("preferences.addon_show", text="Get CPU Driver...", icon="PREFERENCES").module = ADDON_MODULE
        bake_instances.draw_bake_to(layout.column(), scene, summary.bodies, summary.instancers)
        if summary.baked:
            col.label(text=f"{summary.baked} object{'s' if summary.baked != 1 else ''} baked", icon="KEYFRAME")
        if scene.get(rigid_body_world.WORLD_OFF_BY_BAKE):
            col.label(text="Rigid Body world off: Play shows the bake", icon="INFO")
            col.operator("prb.restore_rigid_body_world", icon="PHYSICS")


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
        layout.prop(s, "contact_geometry")
        geometry = CONTACT_GEOMETRY.get(s.contact_geometry)
        # solved contacts have no stiffness (core settings.derive_solver_parameters)
        if geometry is not None and geometry.springs:
            layout.prop(s, "stiffness_mode")
            if manual_stiffness(s):
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


class PRB_PT_collection_glue(bpy.types.Panel):
    """Collection Properties: the glue of the collection's pieces (each object may set its own)."""

    bl_idname = "PRB_PT_collection_glue"
    bl_label = "Particle Rigid Body Glue"
    bl_space_type = "PROPERTIES"
    bl_region_type = "WINDOW"
    bl_context = "collection"

    @classmethod
    def poll(cls, context):
        return getattr(context, "collection", None) is not None and hasattr(context.collection, "prb_glue")

    def draw(self, context):
        draw_collection_glue(self.layout, context.collection)


classes = (PRB_OT_refresh_summary, PRB_PT_main, PRB_PT_scene, PRB_PT_object, PRB_PT_object_properties,
           PRB_PT_collection_glue)


_HANDLERS = ((bpy.app.handlers.depsgraph_update_post, _on_depsgraph_update), (bpy.app.handlers.load_post, _on_load_post))


def register():
    for handlers, handler in _HANDLERS:
        if handler not in handlers:
            handlers.append(handler)


def unregister():
    for handlers, handler in _HANDLERS:
        if handler in handlers:
            handlers.remove(handler)
    if bpy.app.timers.is_registered(_summary_after_quiet):
        bpy.app.timers.unregister(_summary_after_quiet)
    _summary.update(scene=None, value=None, stale=True)
