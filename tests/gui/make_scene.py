"""Small scene for the GUI test (software GL stays responsive): a ground plane and a leaning
stack of cubes. Run: blender --background --factory-startup --python make_scene.py -- OUT.blend [N]

Roles are set only if the extension is enabled (Object.prb exists): the ground STATIC, the cubes
NONE (they follow the selection, as a user would use it). Frame range 1..48.
"""
import math
import sys

import bpy

argv = sys.argv[sys.argv.index("--") + 1:]
out = argv[0]
n = int(argv[1]) if len(argv) > 1 else 6

for ob in list(bpy.data.objects):
    bpy.data.objects.remove(ob)
scene = bpy.context.scene
scene.frame_start, scene.frame_end = 1, 48
scene.render.fps = 24

bpy.ops.mesh.primitive_plane_add(size=24.0, location=(0, 0, 0))  # the stack topples ~6 m far
ground = bpy.context.object
ground.name = "Ground"
names = []
for i in range(n):
    # A stack that leans over: each cube shifted 0.18 m sideways, so the tower topples.
    bpy.ops.mesh.primitive_cube_add(size=0.5, location=(0.18 * i, 0.0, 0.25 + 0.52 * i + 0.3),
                                    rotation=(0.0, 0.0, math.radians(7 * i)))
    ob = bpy.context.object
    ob.name = f"Box{i:02d}"
    names.append(ob.name)
if hasattr(bpy.types.Object, "prb"):
    ground.prb.role = "STATIC"
    for name in names:
        bpy.data.objects[name].prb.role = "NONE"
for ob in scene.objects:
    ob.select_set(False)
# Where the GUI test's viewport looks (gui_startup.py): from the front, a little from above, at the
# place the stack topples to (+x), so before, during and after all fit in the picture.
scene["prb_gui_view"] = [2.6, 0.0, 0.9, 11.0, 68.0, 0.0, 12.0]  # centre xyz, distance, rotation deg
bpy.ops.wm.save_as_mainfile(filepath=out)
print("MAKE_SCENE_OK", out, ",".join(names))
