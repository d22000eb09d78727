"""Runs INSIDE the real (windowed) Blender: `blender scene.blend --python tests/gui/gui_startup.py`.

It does only what a user could do by hand before clicking: open the 3D viewport's sidebar on the
"Particle Bodies" tab and select the bodies. It never calls the bake operator itself: the click
comes from xdotool (tests/gui/gui_driver.py). A timer reports the window state to
$PRB_GUI_OUT/status.json (geometry of the sidebar, the clipboard, running modal operators, the
baked keys) and executes simple commands the driver writes to $PRB_GUI_OUT/cmd.json
(set the frame, save a copy of the file, collect the reports, quit).
"""
import json
import sys
import math
import os
import time
import traceback

import bpy

OUT = os.environ["PRB_GUI_OUT"]
TAB = os.environ.get("PRB_GUI_TAB", "Particle Bodies")
SELECT = os.environ.get("PRB_GUI_SELECT", "")  # comma-separated object names; empty: leave as saved
STATUS = os.path.join(OUT, "status.json")
CMD = os.path.join(OUT, "cmd.json")
LOG = os.path.join(OUT, "startup.log")

state = {"phase": "starting", "t0": time.time(), "errors": [], "done_cmds": []}


def log(msg):
    with open(LOG, "a") as f:
        f.write(f"{time.time() - state['t0']:8.2f} {msg}\n")


def write_status():
    tmp = STATUS + ".tmp"
    with open(tmp, "w") as f:
        json.dump(state, f, indent=1, default=str)
    os.replace(tmp, STATUS)


def view3d():
    for window in bpy.context.window_manager.windows:
        for area in window.screen.areas:
            if area.type == "VIEW_3D":
                return window, area
    return None, None


def region_of(area, kind):
    for r in area.regions:
        if r.type == kind:
            return r
    return None


def rect(window, obj):
    """Screen rectangle (x, y from the TOP-left of the window, w, h) of an area or region."""
    return {"x": obj.x, "y": window.height - (obj.y + obj.height), "w": obj.width, "h": obj.height}


def bake_summary():
    out = {}
    for ob in bpy.context.scene.objects:
        ad = ob.animation_data
        act = ad.action if ad else None
        if act is None:
            continue
        fcs = getattr(act, "fcurves", None)
        if fcs is None:  # layered actions (4.4+)
            fcs = [fc for layer in act.layers for strip in layer.strips
                   for bag in strip.channelbags for fc in bag.fcurves]
        keys = [len(fc.keyframe_points) for fc in fcs]
        out[ob.name] = {"action": act.name, "fcurves": len(keys), "max_keys": max(keys, default=0),
                        "paths": sorted({fc.data_path for fc in fcs})}
    return out


def preview_summary():
    """The installed add-on's particle preview: on or off, and how many points it draws."""
    for name, module in list(sys.modules.items()):
        if name.endswith("addon.blender.preview") and hasattr(module, "is_enabled"):
            cache = getattr(module, "_cache", {})
            return {"enabled": bool(module.is_enabled()),
                    "points": int(sum(len(entry[1]) for entry in cache.values()))}
    return None


def modal_ops(window):
    ops = getattr(window, "modal_operators", None)
    if ops is None:
        return None
    return [op.bl_idname for op in ops]


def select_bodies():
    if not SELECT:
        return
    names = [n for n in SELECT.split(",") if n]
    vl = bpy.context.view_layer
    for ob in vl.objects:
        ob.select_set(ob.name in names)
    first = next((vl.objects[n] for n in names if n in vl.objects), None)
    if first is not None:
        vl.objects.active = first
    log(f"selected {names}")


def collect_reports(window):
    """The window's report log, as a user sees it in an Info editor (select all, copy)."""
    wm = bpy.context.window_manager
    area = next(a for a in window.screen.areas if a.type != "VIEW_3D")
    old = area.ui_type
    saved_clip = wm.clipboard
    try:
        area.ui_type = "INFO"
        region = next(r for r in area.regions if r.type == "WINDOW")
        with bpy.context.temp_override(window=window, area=area, region=region):
            bpy.ops.info.select_all(action="SELECT")
            bpy.ops.info.report_copy()
        return wm.clipboard
    finally:
        area.ui_type = old
        wm.clipboard = saved_clip


def frame_view(space):
    """Zoom the viewport onto the bodies (what a user does with View > Frame Selected), with room
    around them for where they fall."""
    from mathutils import Euler, Vector
    if os.environ.get("PRB_GUI_NO_FRAME"):
        return
    r3d = space.region_3d
    view = bpy.context.scene.get("prb_gui_view")  # set by make_scene.py
    if view is not None:
        r3d.view_location = Vector(view[0:3])
        r3d.view_distance = view[3]
        r3d.view_rotation = Euler([math.radians(a) for a in view[4:7]]).to_quaternion()
        return
    obs = list(bpy.context.selected_objects) or [o for o in bpy.context.scene.objects if o.type == "MESH"]
    if not obs:
        return
    pts = [o.matrix_world @ Vector(c) for o in obs for c in o.bound_box]
    lo = Vector([min(p[i] for p in pts) for i in range(3)])
    hi = Vector([max(p[i] for p in pts) for i in range(3)])
    r3d.view_location = (lo + hi) / 2
    r3d.view_distance = max((hi - lo).length * 2.2, 4.0)


_hooked = set()
_initial = {}


def hook_tab_panels():
    """Count the draws of the tab's top-level panels (an appended draw function that draws
    nothing): the proof that the tab is really the one shown."""
    for cls in bpy.types.Panel.__subclasses__():
        if (getattr(cls, "bl_category", None) == TAB and getattr(cls, "bl_region_type", None) == "UI"
                and not getattr(cls, "bl_parent_id", "") and cls not in _hooked):
            def observe(self, context):  # Panel.append: Blender's own way to extend a panel's draw
                state["tab_draws"] = state.get("tab_draws", 0) + 1

            cls.append(observe)
            _hooked.add(cls)
            log(f"observing {cls.__name__}.draw")


def do_commands(window):
    if not os.path.exists(CMD):
        return
    try:
        with open(CMD) as f:
            cmds = json.load(f)
    except (OSError, ValueError):
        return  # half written; next tick
    os.remove(CMD)
    for cmd in cmds:
        log(f"command {cmd}")
        op = cmd["op"]
        if op == "frame":
            scene = bpy.context.scene
            scene.frame_set(scene.frame_end if cmd["frame"] == "end" else int(cmd["frame"]))
            for area in window.screen.areas:
                area.tag_redraw()
        elif op == "save_copy":
            with bpy.context.temp_override(window=window):
                bpy.ops.wm.save_as_mainfile(filepath=cmd["path"], copy=True)
        elif op == "reports":
            state["reports"] = collect_reports(window)
        elif op == "quit":
            state["phase"] = "quitting"
            write_status()
            bpy.ops.wm.quit_blender()
            return
        state["done_cmds"].append(cmd.get("id", op))


def tick():
    try:
        window, area = view3d()
        if area is None:
            return 0.5
        space = area.spaces.active
        ui = region_of(area, "UI")
        if state["phase"] == "starting":
            # What a user does with N over the viewport, then a click on the tab.
            space.show_region_ui = True
            select_bodies()
            frame_view(space)
            state["phase"] = "opening_tab"
        elif state["phase"] == "opening_tab":
            # Setting the category is not enough by itself (a file's saved tab can win on the next
            # draw), so it is set until the tab's own panel has really been drawn, twice.
            hook_tab_panels()
            try:
                ui.active_panel_category = TAB
            except TypeError as e:  # categories are known only after the sidebar was drawn once
                state["tab_error"] = str(e)
            ui.tag_redraw()
            if state.get("tab_draws", 0) >= 2 and ui.active_panel_category == TAB:
                _initial.update({o.name: o.matrix_world.translation.copy()
                                 for o in bpy.context.selected_objects[:64]})
                state["phase"] = "ready"
                log("sidebar tab open and drawn")
        state["window"] = {"w": window.width, "h": window.height}
        state["view3d"] = rect(window, area)
        state["sidebar"] = rect(window, ui) if ui else None
        state["sidebar_category"] = getattr(ui, "active_panel_category", None) if ui else None
        state["clipboard"] = bpy.context.window_manager.clipboard
        state["modal_operators"] = modal_ops(window)
        state["frame"] = bpy.context.scene.frame_current
        state["frame_end"] = bpy.context.scene.frame_end
        state["selected"] = [o.name for o in bpy.context.selected_objects]
        state["bake"] = bake_summary()
        state["preview"] = preview_summary()
        # how far the bodies have moved in the viewport (the add-on's live preview while baking)
        obs = bpy.context.scene.objects
        state["moved"] = max(((obs[n].matrix_world.translation - p).length
                              for n, p in _initial.items() if n in obs), default=0.0)
        state["time"] = time.time()
        do_commands(window)
    except Exception:
        state["errors"].append(traceback.format_exc())
        log(traceback.format_exc())
    write_status()
    return 0.2


os.makedirs(OUT, exist_ok=True)
log(f"blender {bpy.app.version_string}, python {__import__('sys').version.split()[0]}")
state["blender"] = bpy.app.version_string
state["addons"] = sorted(bpy.context.preferences.addons.keys())
write_status()
bpy.app.timers.register(tick, first_interval=1.0, persistent=True)
