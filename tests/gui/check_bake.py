"""Checks baked keys in a separate `blender --background --python` run. Exits 1 on any failure.

  blender --background --python check_bake.py -- --original scene.blend --baked baked.blend \
      --dynamic A,B,... [--static G,...] [--min-drop 0.5] [--min-move 0.2] [--ground-z 0]

For every dynamic object: an action PRB_Bake_<name> with location and rotation F-curves, a key on
every frame of the scene's range (or --frames START END), finite values, the first key at the object's original place,
the keys actually driving the object (matrix_world at the last frame), never below the ground.
At least one body must have moved by --min-move (and fallen by --min-drop, if given). Static objects must have no PRB action.
"""
import argparse
import json
import math
import sys

import bpy

argv = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else []
p = argparse.ArgumentParser()
p.add_argument("--original", required=True)
p.add_argument("--baked", required=True)
p.add_argument("--dynamic", default="", help="comma-separated; empty: every object with a PRB_Bake_ action")
p.add_argument("--static", default="")
p.add_argument("--min-drop", type=float, default=None, help="some body must end this much lower")
p.add_argument("--min-move", type=float, default=0.2, help="some body must end this far from its start")
p.add_argument("--ground-z", type=float, default=None)
p.add_argument("--tolerance", type=float, default=0.15)
p.add_argument("--json", default=None)
p.add_argument("--frames", nargs=2, type=int, default=None, help="baked range (default: the scene's)")
a = p.parse_args(argv)
errors = []


def fcurves_of(action):
    fcs = getattr(action, "fcurves", None)
    if fcs is not None and (len(fcs) or not hasattr(action, "layers")):
        return list(fcs)
    return [fc for layer in action.layers for strip in layer.strips
            for bag in strip.channelbags for fc in bag.fcurves]


bpy.ops.wm.open_mainfile(filepath=a.original)
original = {ob.name: tuple(ob.matrix_world.translation) for ob in bpy.data.objects}
bpy.ops.wm.open_mainfile(filepath=a.baked)
scene = bpy.context.scene
start, end = a.frames if a.frames else (scene.frame_start, scene.frame_end)
dynamic = [n for n in a.dynamic.split(",") if n] or sorted(
    ob.name for ob in bpy.data.objects
    if ob.animation_data and ob.animation_data.action
    and ob.animation_data.action.name.startswith("PRB_Bake_"))
if not dynamic:
    errors.append("no baked objects at all")
summary = {"frames": [start, end], "objects": {}}
drops, moves = [], []
for name in dynamic:
    ob = bpy.data.objects.get(name)
    if ob is None:
        errors.append(f"{name}: missing")
        continue
    act = ob.animation_data.action if ob.animation_data else None
    if act is None:
        errors.append(f"{name}: no action")
        continue
    if act.name != f"PRB_Bake_{name}":
        errors.append(f"{name}: action is {act.name!r}, expected 'PRB_Bake_{name}'")
    fcs = fcurves_of(act)
    by = {(fc.data_path, fc.array_index): fc for fc in fcs}
    loc = [by.get(("location", i)) for i in range(3)]
    rot_path = next((p for p in ("rotation_quaternion", "rotation_euler", "rotation_axis_angle")
                     if (p, 0) in by), None)
    if None in loc:
        errors.append(f"{name}: location F-curves missing ({sorted(by)})")
        continue
    if rot_path is None:
        errors.append(f"{name}: no rotation F-curves ({sorted(by)})")
    info = {"action": act.name, "fcurves": len(fcs), "rotation": rot_path}
    for fc in fcs:
        frames = [kp.co[0] for kp in fc.keyframe_points]
        values = [kp.co[1] for kp in fc.keyframe_points]
        if not all(math.isfinite(v) for v in values):
            errors.append(f"{name}: non-finite key in {fc.data_path}[{fc.array_index}]")
        missing = set(range(start, end + 1)) - {round(f) for f in frames}
        if missing:
            errors.append(f"{name}: {fc.data_path}[{fc.array_index}] has no key on {len(missing)} "
                          f"frames of {start}..{end} (e.g. {sorted(missing)[:5]})")
    z = [kp.co[1] for kp in loc[2].keyframe_points]
    first = [fc.evaluate(start) for fc in loc]
    last = [fc.evaluate(end) for fc in loc]
    info.update(keys=len(loc[2].keyframe_points), first=[round(v, 3) for v in first],
                last=[round(v, 3) for v in last], min_z=round(min(z), 3))
    if ob.parent is None and name in original:
        d0 = math.dist(first, original[name])
        if d0 > 1e-3:
            errors.append(f"{name}: first key {first} is not the original place {original[name]}")
    scene.frame_set(end)
    drive = math.dist(tuple(ob.matrix_world.translation), last) if ob.parent is None else 0.0
    if drive > 1e-3:
        errors.append(f"{name}: keys do not drive the object (matrix_world off by {drive:.4f})")
    if a.ground_z is not None and min(z) < a.ground_z - a.tolerance:
        errors.append(f"{name}: went below the ground (min z {min(z):.3f} < {a.ground_z}): "
                      f"fell through it, or off its edge")
    drops.append(first[2] - last[2])
    moves.append(math.dist(first, last))
    summary["objects"][name] = info
for name in [n for n in a.static.split(",") if n]:
    ob = bpy.data.objects.get(name)
    act = ob.animation_data.action if ob and ob.animation_data else None
    if act is not None and act.name.startswith("PRB_"):
        errors.append(f"{name}: static object got keys ({act.name})")
if a.min_drop is not None and drops and max(drops) < a.min_drop:
    errors.append(f"no body fell by {a.min_drop} m (largest drop {max(drops):.3f} m): no gravity?")
if moves and max(moves) < a.min_move:
    errors.append(f"no body moved by {a.min_move} m (largest move {max(moves):.3f} m)")
summary["max_drop"] = round(max(drops), 3) if drops else None
summary["max_move"] = round(max(moves), 3) if moves else None
summary["errors"] = errors
print("CHECK_BAKE " + json.dumps(summary))
if a.json:
    with open(a.json, "w") as f:
        json.dump(summary, f, indent=1)
if errors:
    print("CHECK_BAKE FAILED:\n  " + "\n  ".join(errors), file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    # SystemExit from a --python script ends Blender with that status (Blender 4.3 checked by
    # make test-real-blender); os._exit would skip Blender's exit and leave its /tmp/blender_* folder.
    sys.exit(1)
print(f"CHECK_BAKE OK: {len(summary['objects'])} objects, frames {start}..{end}")
sys.stdout.flush()
