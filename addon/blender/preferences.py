"""The add-on's page in Preferences (what it needs and whether it has it, Intel's CPU OpenCL runtime
on Linux, how to bake from the command line), and the sidebar panel shown instead of the add-on when numpy is missing. Imports
neither numpy nor the core: it must work when they do not."""
from __future__ import annotations

import os
import textwrap

import bpy

from . import dependencies

CATEGORY = "Particle Bodies"
# The add-on's module name (Preferences looks the page up by it): bl_ext.<repository>.<id> when
# installed as an extension, the top package otherwise.
ADDON_MODULE = __package__.rsplit(".addon.blender", 1)[0] if ".addon.blender" in __package__ else __package__.split(".")[0]
CLI_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cli.py")


def wrap_width(context, fallback: int = 40) -> int:
    """Characters per label line that fit the region being drawn (Blender cuts longer labels)."""
    region = getattr(context, "region", None)
    width = getattr(region, "width", 0)
    if width <= 1:
        return fallback
    scale = context.preferences.system.ui_scale
    # about 6.5 px per character of the interface font, less the panel's margins and the icon column
    return max(20, int((width - 60 * scale) / (6.5 * scale)))


def draw_wrapped(layout, text: str, icon: str = "NONE", width: int = 70) -> None:
    col = layout.column(align=True)
    for i, line in enumerate(textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False)):
        col.label(text=line, icon=icon if i == 0 else "BLANK1" if icon != "NONE" else "NONE")


def draw_dependencies(layout, width: int = 70) -> bool:
    """The missing pieces with how to get them; True when something is missing."""
    problem = dependencies.numpy_problem()
    if problem:
        draw_wrapped(layout, problem, "ERROR", width)
        return True
    from . import properties

    problem = properties.opencl_problem()
    if problem:
        draw_wrapped(layout, problem, "ERROR", width)
        return True
    return False


class PRB_AP_preferences(bpy.types.AddonPreferences):
    bl_idname = ADDON_MODULE

    def draw(self, context):
        layout = self.layout
        box = layout.box()
        box.label(text="Requirements", icon="PREFERENCES")
        if not draw_dependencies(box, wrap_width(context, 100)):
            import numpy

            from . import properties

            box.label(text=f"numpy {numpy.__version__}", icon="CHECKMARK")
            for identifier, label, _ in properties.device_items(None, context)[1:]:
                box.label(text=f"OpenCL device {identifier}: {label}", icon="CHECKMARK")
            box.operator("prb.refresh_devices", icon="FILE_REFRESH")
        if dependencies.numpy_problem() is None:  # the core, and so the driver's fetch, needs numpy
            from . import cpu_driver

            cpu_driver.draw_box(layout, wrap_width(context, 100))
        box = layout.box()
        box.label(text="Bake from the command line (render nodes)", icon="CONSOLE")
        col = box.column(align=True)
        col.label(text="blender --command particle_bodies bake --scene FILE.blend --output BAKED.blend")
        col.label(text="blender --command particle_bodies bake --help")
        col.label(text=f"or: blender -b FILE.blend --python-exit-code 1 --python {CLI_PATH} -- [options]")


class PRB_PT_missing_dependencies(bpy.types.Panel):
    """Shown in the sidebar instead of the add-on's panels while numpy is missing."""

    bl_idname = "PRB_PT_missing_dependencies"
    bl_label = "Particle Rigid Bodies"
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = CATEGORY

    def draw(self, context):
        draw_dependencies(self.layout, wrap_width(context))
        self.layout.label(text="Details: Preferences > Add-ons")


classes = (PRB_AP_preferences,)
fallback_classes = (PRB_AP_preferences, PRB_PT_missing_dependencies)
