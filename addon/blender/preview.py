"""Viewport preview of the particle representation of the selected bodies (operator ``prb.toggle_preview``).

Draws one point per particle with Blender's ``gpu`` module from a SpaceView3D draw handler. The
particles come from the conversion's own stages (``convert.object_particles``), cached per object
in the object's own coordinates, so moving an object only re-transforms its points; editing its
geometry, scale or the particle radius recomputes them.

Background mode (no GPU context): the operator still toggles the state but no draw handler is
added, and the draw callback never touches ``gpu`` there.
"""
from __future__ import annotations

import numpy as np

import bpy

from . import convert, instancers
from ..core import voxelize as vox
from ..core.settings import ROLE_DYNAMIC, ROLE_FOLLOW_SELECTION
from .scene_objects import GEOMETRY_TYPES, object_settings

POINT_COLOR = (1.0, 0.55, 0.1, 0.9)
POINT_SIZE = 5.0
MAX_PREVIEW_PARTICLES = 2_000_000  # above this, every n-th particle is drawn

_state = {"handle": None, "enabled": False, "shader": None}
_cache: dict = {}  # object name -> (key, local points (N, 3))
_geometry_version: dict = {}  # object name -> counter, bumped on geometry updates


def is_enabled() -> bool:
    return bool(_state["enabled"])


def scene_radius(context, objects) -> float | None:
    """Particle radius the simulation would use: the scene setting, or automatic from ``objects``."""
    settings = getattr(context.scene, "prb_settings", None)
    if settings is not None and getattr(settings, "radius_mode", "AUTO") == "MANUAL":
        return float(settings.particle_radius)
    return None


def preview_objects(context):
    """Selected objects that would become dynamic bodies (geometry or instancers, not Static/Ignored)."""
    out = []
    for obj in context.selected_objects:
        role = object_settings(obj).role
        if ((obj.type in GEOMETRY_TYPES or instancers.may_instance(obj))
                and role in (ROLE_FOLLOW_SELECTION, ROLE_DYNAMIC)):
            out.append(obj)
    return out


def particles_local(obj, depsgraph, radius: float):
    """(N, 3) particle centres in the object's local coordinates, as the conversion makes them
    (None when the object cannot become a body). Cached until its geometry/scale/radius changes."""
    m4 = np.array(obj.matrix_world, dtype=np.float64)
    _, stretch = vox.polar_decomposition(m4[:3, :3])
    key = (obj.data.as_pointer() if obj.data is not None else 0, _geometry_version.get(obj.name, 0),
           round(radius, 12), tuple(np.round(stretch, 6).ravel()))
    hit = _cache.get(obj.name)
    if hit is not None and hit[0] == key:
        return hit[1]
    world = convert.object_particles(obj, depsgraph, radius)
    local = None
    if world is not None:
        local = (np.c_[world, np.ones(len(world))] @ np.linalg.inv(m4).T)[:, :3]
    _cache[obj.name] = (key, local)
    return local


def preview_points(context) -> np.ndarray:
    """(N, 3) world positions of all particles of the selected bodies (what the overlay draws)."""
    objects = preview_objects(context)
    if not objects:
        return np.zeros((0, 3))
    depsgraph = context.evaluated_depsgraph_get()
    radius = scene_radius(context, objects)
    if radius is None:
        radius = convert.automatic_radius_for(objects, depsgraph)
        if radius is None:
            return np.zeros((0, 3))
    chunks = []
    for obj in objects:
        local = particles_local(obj, depsgraph, radius)
        if local is not None and len(local):
            m4 = np.array(obj.matrix_world, dtype=np.float64)
            chunks.append(local @ m4[:3, :3].T + m4[:3, 3])
    return np.concatenate(chunks) if chunks else np.zeros((0, 3))


def _draw():
    if bpy.app.background or not _state["enabled"]:
        return
    try:
        import gpu
        from gpu_extras.batch import batch_for_shader

        points = preview_points(bpy.context)
        if not len(points):
            return
        if len(points) > MAX_PREVIEW_PARTICLES:
            points = points[:: len(points) // MAX_PREVIEW_PARTICLES + 1]
        shader = _state["shader"]
        if shader is None:
            try:
                shader = gpu.shader.from_builtin("POINT_UNIFORM_COLOR")
            except (ValueError, SystemError):
                shader = gpu.shader.from_builtin("UNIFORM_COLOR")
            _state["shader"] = shader
        batch = batch_for_shader(shader, "POINTS", {"pos": points.astype(np.float32)})
        gpu.state.point_size_set(POINT_SIZE)
        # on top of everything: the particles sit inside the bodies' own surfaces, so with a depth
        # test a solid-shaded viewport hides them all (seen in a real window)
        gpu.state.depth_test_set("NONE")
        gpu.state.blend_set("ALPHA")
        shader.bind()
        shader.uniform_float("color", POINT_COLOR)
        batch.draw(shader)
        gpu.state.depth_test_set("NONE")
        gpu.state.blend_set("NONE")
        gpu.state.point_size_set(1.0)
    except Exception as exc:  # never break the viewport: turn the preview off and say why
        _state["enabled"] = False
        print(f"PRB preview disabled: {exc}")


def _tag_redraw(context):
    screen = getattr(context, "screen", None)
    for area in (screen.areas if screen else ()):
        if area.type == "VIEW_3D":
            area.tag_redraw()


def set_enabled(enabled: bool) -> None:
    _state["enabled"] = bool(enabled)
    if enabled and _state["handle"] is None and not bpy.app.background:
        _state["handle"] = bpy.types.SpaceView3D.draw_handler_add(_draw, (), "WINDOW", "POST_VIEW")
    if not enabled:
        _remove_handler()
        _cache.clear()


def _remove_handler():
    if _state["handle"] is not None:
        bpy.types.SpaceView3D.draw_handler_remove(_state["handle"], "WINDOW")
        _state["handle"] = None


@bpy.app.handlers.persistent
def _on_depsgraph_update(scene, depsgraph):
    if not _state["enabled"]:
        return
    for update in depsgraph.updates:
        if update.is_updated_geometry and isinstance(update.id, bpy.types.Object):
            name = update.id.original.name if hasattr(update.id, "original") else update.id.name
            _geometry_version[name] = _geometry_version.get(name, 0) + 1


class PRB_OT_toggle_preview(bpy.types.Operator):
    """Show or hide the particles the selected objects become when simulated"""

    bl_idname = "prb.toggle_preview"
    bl_label = "Preview Particles"
    bl_options = {"REGISTER"}

    def execute(self, context):
        set_enabled(not _state["enabled"])
        if _state["enabled"]:
            try:
                count = len(preview_points(context))
            except convert.ConversionError as exc:
                self.report({"WARNING"}, str(exc))
                return {"FINISHED"}
            where = "" if _state["handle"] is not None else " (no viewport to draw in)"
            self.report({"INFO"}, f"particle preview on: {count:,} particles{where}")
        else:
            self.report({"INFO"}, "particle preview off")
        _tag_redraw(context)
        return {"FINISHED"}


classes = (PRB_OT_toggle_preview,)


def register():
    if _on_depsgraph_update not in bpy.app.handlers.depsgraph_update_post:
        bpy.app.handlers.depsgraph_update_post.append(_on_depsgraph_update)


def unregister():
    _state["enabled"] = False
    _remove_handler()
    _cache.clear()
    _geometry_version.clear()
    if _on_depsgraph_update in bpy.app.handlers.depsgraph_update_post:
        bpy.app.handlers.depsgraph_update_post.remove(_on_depsgraph_update)
