"""In a real Blender with the extension installed: enable it in a Python without numpy, as a
distribution's Blender without python3-numpy is. Disables the extension, hides numpy
(sys.modules["numpy"] = None makes `import numpy` fail), enables it again the way Preferences does,
and checks that it registered its Preferences page (found under the extension's module name) and
the sidebar panel, and what they draw.
    blender --background --python-exit-code 1 --python enable_without_numpy.py
Prints ENABLE_WITHOUT_NUMPY_OK and the drawn text; raises (exit 1) otherwise.
"""
import sys

import addon_utils
import bpy

MODULE = "bl_ext.user_default.particle_rigid_bodies"


class Layout:  # records the labels a draw() makes
    def __init__(self, out):
        self.out = out

    def __getattr__(self, name):
        return lambda *a, **k: self

    def label(self, text="", **k):
        self.out.append(text)


def draw(cls) -> str:
    out = []
    cls.draw(type("Self", (), {"layout": Layout(out)})(), bpy.context)
    return " ".join(out)


addon_utils.disable(MODULE, default_set=True)
for name in [m for m in sys.modules if m == MODULE or m.startswith(MODULE + ".")]:
    del sys.modules[name]
sys.modules["numpy"] = None
addon_utils.enable(MODULE, default_set=True)
try:
    assert MODULE in bpy.context.preferences.addons, "not enabled"
    assert bpy.context.preferences.addons[MODULE].preferences is not None, "no Preferences page under the module name"
    assert not hasattr(bpy.types.Scene, "prb_settings"), "registered what needs numpy"
    panel = bpy.types.Panel.bl_rna_get_subclass_py("PRB_PT_missing_dependencies")
    prefs = bpy.types.AddonPreferences.bl_rna_get_subclass_py("PRB_AP_preferences")
    assert panel is not None and prefs is not None, (panel, prefs)
    sidebar, page = draw(panel), draw(prefs)
    for text in (sidebar, page):
        assert "numpy is missing" in text and "python3-numpy" in text, text
    print("ENABLE_WITHOUT_NUMPY_OK sidebar:", sidebar)
    print("ENABLE_WITHOUT_NUMPY_OK preferences:", page)
finally:
    addon_utils.disable(MODULE, default_set=False)
