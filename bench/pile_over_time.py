"""Pile statistics over time for Blender's rigid bodies (Bullet) and ours, same scene as vs_blender.py.

vs_blender.py compares the piles at the last frame; this shows whether either pile is still settling
there (e.g. columns still toppling), which decides what a difference in height means.
    PYTHONPATH=. .venv/bin/python bench/pile_over_time.py --cubes 1000 --frames 750 --out out/pile_over_time.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import vs_blender as vb  # noqa: E402  (sets up a throw-away Blender user folder first)

import bpy  # noqa: E402

CHECKPOINTS = (50, 100, 150, 200, 250, 300, 400, 500, 750)


def bullet_over_time(count: int, frames: int, seed: int) -> list[dict]:
    scene, cubes, ground = vb.build_scene(count, frames, seed)
    vb.add_bullet_world(scene, cubes, ground, frames)
    out = []
    for frame in range(1, frames + 1):
        scene.frame_set(frame)  # in order: the point cache simulates each frame once
        if frame in CHECKPOINTS:
            out.append({"frame": frame, **vb.pile_stats(scene, cubes, frame)})
            print("bullet", out[-1], flush=True)
    return out


def ours_over_time(count: int, frames: int, seed: int, device: str) -> list[dict]:
    scene, cubes, ground = vb.build_scene(count, frames, seed)
    vb.set_our_roles(scene, cubes, ground, device)
    vb.select_only([], None)
    if bpy.ops.prb.simulate_bake() != {"FINISHED"}:
        raise RuntimeError("simulate_bake failed")
    out = []
    for frame in CHECKPOINTS:
        if frame <= frames:
            out.append({"frame": frame, **vb.pile_stats(scene, cubes, frame)})
            print("ours", out[-1], flush=True)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cubes", type=int, default=1000)
    parser.add_argument("--frames", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", default=str(ROOT / "out" / "pile_over_time.json"))
    args = parser.parse_args(argv)
    import addon.blender as addon_blender

    addon_blender.register()
    try:
        from addon.core.device import choose_device

        device = choose_device(args.device).selector
        report = {"cubes": args.cubes, "frames": args.frames, "fps": 24, "blender_version": bpy.app.version_string,
                  "cpu_model": vb.cpu_model(), "cpu_count": os.cpu_count(),
                  "bullet": bullet_over_time(args.cubes, args.frames, args.seed),
                  "ours": ours_over_time(args.cubes, args.frames, args.seed, device)}
    finally:
        addon_blender.unregister()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
