"""The README's picture of a 100k-body pile: ~100k rocks scattered by geometry nodes, baked to instances,
rendered by Blender without the add-on.

    .venv/bin/python tools/pile_picture.py --work /tmp/pile --out docs/images/pile_100k_instances.png

Steps, each in its own process like a user's: sample_scenes/generate.py builds the scatter scene as a
loose pyramid of round rocks (SCATTER below), addon/cli.py bakes it to instances, and a Python with the
bpy module but without the add-on on its path opens the baked file and renders the last frame with
Workbench (``--render-only`` skips the first two), saved with 128 colours (Pillow) to keep the
repository small. The picture shows frame 36, 1.46 s after release: the pile has formed, its top
still falls. On the shared 2-core CPU with PoCL the bake of 101,104 rocks (1.15M particles) took
1228 s (load about 5), the render 2 minutes.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCATTER = dict(side=80, layers=38, layer_gap=0.66, taper=0.97, particle_radius=0.085, roundness=1.0)
FRAMES = 36

RENDER = """
import sys
import bpy
from mathutils import Vector
path, frame, out, width, height = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
bpy.ops.wm.open_mainfile(filepath=path, load_ui=False)
assert not hasattr(bpy.types.Scene, "prb_settings"), "rendered without the add-on"
scene = bpy.context.scene
scene.frame_set(frame)
camera = scene.camera
camera.location = Vector((70.0, -88.0, 26.0))
camera.rotation_euler = (Vector((0.0, 0.0, 2.0)) - camera.location).to_track_quat("-Z", "Y").to_euler()
camera.data.lens = 35.0
camera.data.clip_end = 2000.0
bpy.data.objects["Backdrop"].hide_render = True
scene.render.engine = "BLENDER_WORKBENCH"
shading = scene.display.shading
shading.light, shading.color_type = "STUDIO", "MATERIAL"
shading.show_shadows = shading.show_cavity = True
scene.render.resolution_x, scene.render.resolution_y, scene.render.resolution_percentage = width, height, 100
scene.render.image_settings.file_format, scene.render.image_settings.color_mode = "PNG", "RGB"
scene.render.filepath = out
deps = bpy.context.evaluated_depsgraph_get()
count = sum(1 for i in deps.object_instances if i.is_instance and i.parent.original.name.startswith("PRB Instances"))
print(f"rendering {count} instances at frame {frame}", flush=True)
bpy.ops.render.render(write_still=True)
"""


def run(args, env=None) -> None:
    print("+", " ".join(map(str, args)), flush=True)
    subprocess.run([sys.executable, *map(str, args)], cwd=ROOT, env=env, check=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, required=True, help="folder for the scene, the baked file and its cache")
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "pile_100k_instances.png")
    ap.add_argument("--size", type=int, nargs=2, default=(960, 540), metavar=("WIDTH", "HEIGHT"))
    ap.add_argument("--render-only", action="store_true", help="render the bake already in --work")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    scene, baked = args.work / "pile.blend", args.work / "pile_baked.blend"
    if not args.render_only:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        params = [x for key, value in SCATTER.items() for x in ("--param", f"{key}={value}")]
        run(["sample_scenes/generate.py", "scatter", "--output", scene, "--frames", FRAMES, *params], env)
        run(["addon/cli.py", "--scene", scene, "--output", baked, "--bake-mode", "instances", "--overwrite"], env)
    script = args.work / "render_pile.py"
    script.write_text(RENDER)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    run([script, baked, FRAMES, args.out.resolve(), *args.size], env)
    from PIL import Image

    picture = Image.open(args.out).convert("RGB").quantize(colors=128, method=Image.Quantize.MEDIANCUT)
    picture.save(args.out, optimize=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
