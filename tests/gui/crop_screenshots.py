"""Crop the GUI test's screenshots to what matters, small enough for the README (< 300 KB each).
  python3 crop_screenshots.py GUI_OUT_DIR DEST_DIR     (needs ImageMagick's convert)
Uses the geometry the startup script reported (status.json): the 3D viewport with its sidebar and,
below it, the timeline and the status bar (where the bake's report appears); plus a close-up of
the sidebar panel.
"""
import json
import os
import subprocess
import sys

src, dst = sys.argv[1], sys.argv[2]
os.makedirs(dst, exist_ok=True)
with open(os.path.join(src, "status.json")) as f:
    st = json.load(f)
v, sb, win = st["view3d"], st["sidebar"], st["window"]
view = (v["w"], win["h"] - v["y"], v["x"], v["y"])           # viewport down to the window's bottom
panel = (sb["w"], min(sb["h"], 520), sb["x"], sb["y"])        # the sidebar's top part
shots = [("01_ready.png", "gui_1_before.png", view, 1100),
         ("00_preview.png", "gui_0_preview.png", view, 1100),
         ("01_ready.png", "gui_panel.png", panel, None),
         ("02_during.png", "gui_2_during.png", view, 1100),
         ("03_after.png", "gui_3_after.png", view, 1100),
         ("04_end.png", "gui_4_last_frame.png", view, 1100)]
for name, out, (w, h, x, y), width in shots:
    path = os.path.join(src, name)
    if not os.path.exists(path):
        continue
    cmd = ["convert", path, "-crop", f"{w}x{h}+{x}+{y}", "+repage"]
    if width and w > width:
        cmd += ["-resize", f"{width}x"]
    cmd += ["+dither", "-colors", "256", "-strip", "PNG8:" + os.path.join(dst, out)]
    subprocess.run(cmd, check=True)
    size = os.path.getsize(os.path.join(dst, out))
    print(f"{out}: {size // 1024} KB")
    if size > 300 * 1024:
        raise SystemExit(f"{out} is {size} bytes (> 300 KB)")
