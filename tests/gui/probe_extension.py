"""After `blender --command extension install-file`: does the installed extension load in a fresh
Blender, register its names, and can its bundled pyopencl (cp313 wheel) see an OpenCL device?
  blender --background --python-exit-code 1 --python probe_extension.py -- OUT.json
Fails (exception -> exit 1) only if the extension is not enabled/registered; the OpenCL findings
are recorded (a missing device then shows up as the add-on's own error in the GUI step).
"""
import json
import os
import sys
import traceback

import bpy

out = sys.argv[sys.argv.index("--") + 1]
ext = "particle_rigid_bodies"
info = {"blender": bpy.app.version_string, "python": sys.version.split()[0]}
mods = [m for m in bpy.context.preferences.addons.keys() if m.endswith(ext)]
info["enabled_modules"] = mods
info["operators"] = {op: hasattr(getattr(bpy.types, op.upper().replace(".", "_OT_"), None) or object, "bl_rna")
                     for op in ("prb.simulate_bake", "prb.clear_bake", "prb.toggle_preview")}
for op in list(info["operators"]):
    mod, name = op.split(".")
    try:
        getattr(getattr(bpy.ops, mod), name).get_rna_type()
        info["operators"][op] = True
    except (KeyError, AttributeError):
        info["operators"][op] = False
info["scene_prb_settings"] = hasattr(bpy.types.Scene, "prb_settings")
info["object_prb"] = hasattr(bpy.types.Object, "prb")
info["OCL_ICD_VENDORS"] = os.environ.get("OCL_ICD_VENDORS")
try:
    import pyopencl as cl
    info["pyopencl"] = {"version": cl.VERSION_TEXT, "file": cl.__file__}
    info["platforms"] = [{"name": p.name, "version": p.version,
                          "devices": [d.name for d in p.get_devices()]} for p in cl.get_platforms()]
except Exception as e:  # recorded, see docstring
    info["opencl_error"] = f"{type(e).__name__}: {e}"
    info["opencl_traceback"] = traceback.format_exc()
info["OCL_ICD_VENDORS_after"] = os.environ.get("OCL_ICD_VENDORS")
with open(out, "w") as f:
    json.dump(info, f, indent=1)
print("PROBE " + json.dumps({k: v for k, v in info.items() if k != "opencl_traceback"}))
if not mods:
    raise SystemExit(f"extension {ext} is not enabled after install: {sorted(bpy.context.preferences.addons.keys())}")
if not info["operators"]["prb.simulate_bake"]:
    raise SystemExit("operator prb.simulate_bake is not registered")
