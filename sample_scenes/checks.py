"""Read back what a bake wrote into a .blend: object poses at chosen frames and the baked keys.

Used by the demo (keys present on every body) and the sample-scene tests (physical outcome).
Runs with the bpy module; as a script it writes an .npz so another process can check the numbers:

    .venv/bin/python sample_scenes/checks.py out/demo/dice_baked.blend --frames 1 120 --npz poses.npz

The .npz holds ``names`` (N,), ``frames`` (F,), ``matrices`` (F, N, 4, 4) world matrices,
``keyed`` (N,) number of keyed frames of each object's baked action, ``friction`` (N,) and
``role`` (N,) from ``Object.prb`` (when the add-on is registered).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

BAKE_PREFIX = "PRB_Bake_"


def action_fcurves(action, obj=None):
    """F-curves of an action: layered actions (Blender 4.4+: slots and channel bags) or legacy ones."""
    curves = []
    layers = getattr(action, "layers", None)
    if layers is not None and len(layers):
        slot = None
        if obj is not None and obj.animation_data is not None:
            slot = getattr(obj.animation_data, "action_slot", None)
        for layer in layers:
            for strip in layer.strips:
                for bag in getattr(strip, "channelbags", ()):
                    if slot is None or getattr(bag, "slot", None) == slot:
                        curves.extend(bag.fcurves)
        return curves
    legacy = getattr(action, "fcurves", None)
    return list(legacy) if legacy is not None else curves


def keyed_frames(obj) -> set:
    """Frames at which the object's baked action (``PRB_Bake_<name>``) has keys; empty set if none."""
    ad = obj.animation_data
    if ad is None or ad.action is None or not ad.action.name.startswith(BAKE_PREFIX):
        return set()
    frames = set()
    for fc in action_fcurves(ad.action, obj):
        if fc.data_path in ("location", "rotation_quaternion", "rotation_euler"):
            frames.update(round(k.co[0], 3) for k in fc.keyframe_points)
    return frames


def read_bake(blend, frames, names=None) -> dict:
    """World matrices of the objects (default: every object whose role is Dynamic Body, else every mesh)
    at each frame, and how many frames each one has keys at."""
    import bpy

    bpy.ops.wm.open_mainfile(filepath=str(Path(blend).resolve()), load_ui=False)
    registered = False
    if not hasattr(bpy.types.Object, "prb"):
        try:
            import addon.blender as prb_addon

            prb_addon.register()
            registered = True
        except Exception:  # noqa: BLE001 - roles are optional for reading poses
            prb_addon = None
    try:
        scene = bpy.context.scene
        if names is None:
            objs = [o for o in scene.objects if o.type == "MESH"
                    and getattr(getattr(o, "prb", None), "role", "DYNAMIC") == "DYNAMIC"]
        else:
            objs = [bpy.data.objects[n] for n in names]
        objs.sort(key=lambda o: o.name)
        frames = [int(f) for f in frames]
        mats = np.zeros((len(frames), len(objs), 4, 4))
        for i, f in enumerate(frames):
            scene.frame_set(f)
            for j, o in enumerate(objs):
                mats[i, j] = np.array(o.matrix_world)
        prb = [getattr(o, "prb", None) for o in objs]
        return dict(
            names=np.array([o.name for o in objs]),
            frames=np.array(frames),
            matrices=mats,
            keyed=np.array([len(keyed_frames(o)) for o in objs]),
            friction=np.array([p.friction if p is not None else np.nan for p in prb]),
            role=np.array([p.role if p is not None else "" for p in prb]),
            frame_range=np.array([scene.frame_start, scene.frame_end]),
        )
    finally:
        if registered:
            prb_addon.unregister()


def rotation_angle(m_from, m_to) -> np.ndarray:
    """Angle (degrees) of the rotation taking the rotation part of m_from to m_to, for (N, 4, 4) arrays."""
    r0 = m_from[..., :3, :3] / np.linalg.norm(m_from[..., :3, 0], axis=-1)[..., None, None]
    r1 = m_to[..., :3, :3] / np.linalg.norm(m_to[..., :3, 0], axis=-1)[..., None, None]
    rel = np.einsum("...ji,...jk->...ik", r0, r1)
    cos = np.clip((np.trace(rel, axis1=-2, axis2=-1) - 1) / 2, -1, 1)
    return np.degrees(np.arccos(cos))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="Dump baked poses of a .blend to an .npz")
    p.add_argument("blend")
    p.add_argument("--frames", type=int, nargs="+", required=True)
    p.add_argument("--npz", required=True)
    args = p.parse_args(argv)
    data = read_bake(args.blend, args.frames)
    np.savez(args.npz, **data)
    print(f"{len(data['names'])} objects, {int((data['keyed'] > 0).sum())} with baked keys -> {args.npz}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
