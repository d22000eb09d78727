"""Runs inside a real Blender window (Xvfb) for the README's pictures of what a user sees when numpy
is missing: re-enables the installed extension with numpy hidden, opens the sidebar on the
"Particle Bodies" tab and turns the Properties editor into the Preferences editor at the add-on's
page; 10 s later the large 3D viewport shows the Preferences too. In the chroot of
make test-real-blender (tests/gui/setup_blender.sh, PRB_CHROOT=/opt/prb-trixie-pocl), with the
Linux zip installed by `blender --command extension install-file -r user_default -e ZIP`:
    Xvfb :97 -screen 0 1600x900x24 &
    DISPLAY=:97 blender --python show_missing_numpy.py &
    sleep 14; DISPLAY=:97 xdotool mousemove 400 650 click 1     # closes the splash screen
    sleep 4; DISPLAY=:97 import -window root shot1.png; sleep 12; DISPLAY=:97 import -window root shot2.png
docs/screenshots/missing_numpy_sidebar.png is shot1 cropped to (1030, 80, 1300, 400),
missing_numpy_preferences.png shot2 cropped to (170, 90, 1320, 560).
"""
import sys

import addon_utils
import bpy

MODULE = "bl_ext.user_default.particle_rigid_bodies"


state = {"tries": 0}


def setup():
    addon_utils.disable(MODULE, default_set=True)
    for name in [m for m in sys.modules if m == MODULE or m.startswith(MODULE + ".")]:
        del sys.modules[name]
    sys.modules["numpy"] = None  # as in a distribution's Blender without python3-numpy
    addon_utils.enable(MODULE, default_set=True)
    screen = bpy.context.window.screen
    view = max((a for a in screen.areas if a.type == "VIEW_3D"), key=lambda a: a.width * a.height)
    view.spaces.active.show_region_ui = True
    prefs_area = next(a for a in screen.areas if a.type == "PROPERTIES")
    prefs_area.type = "PREFERENCES"
    bpy.context.preferences.active_section = "ADDONS"
    bpy.context.window_manager.addon_search = "Particle"
    bpy.ops.preferences.addon_expand(module=MODULE)
    bpy.app.timers.register(open_tab, first_interval=0.5)


def open_tab():
    """The sidebar's tabs are known once it has been drawn: retry until the tab is open."""
    view = max((a for a in bpy.context.window.screen.areas if a.type == "VIEW_3D"), key=lambda a: a.width * a.height)
    ui = next(r for r in view.regions if r.type == "UI")
    state["tries"] += 1
    try:
        ui.active_panel_category = "Particle Bodies"
    except (TypeError, AttributeError):
        pass
    ui.tag_redraw()
    if getattr(ui, "active_panel_category", None) == "Particle Bodies" or state["tries"] > 40:
        print("SHOW_MISSING_NUMPY tab:", getattr(ui, "active_panel_category", None), flush=True)
        bpy.app.timers.register(preferences_large, first_interval=10.0)
        return None
    return 0.25


def preferences_large():
    """Second picture: the Preferences page in the large area."""
    screen = bpy.context.window.screen
    max(screen.areas, key=lambda a: a.width * a.height).type = "PREFERENCES"
    print("SHOW_MISSING_NUMPY preferences", flush=True)


bpy.app.timers.register(setup, first_interval=1.0)
