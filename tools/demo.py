"""The demo behind ``make demo``: bake sample_scenes/dice.blend headless with the real CLI, check the
result and render a preview.

    .venv/bin/python tools/demo.py [--frames N] [--out out/demo] [--no-animation] [--device cpu]

Steps
1. sample_scenes/dice.blend (1000 one-metre cubes in the seed's starting formation; regenerated
   with sample_scenes/generate.py if it is missing),
2. ``addon/cli.py --scene dice.blend --frames 1 N --output out/demo/dice_baked.blend`` in its own
   process, exactly what a user or render node runs,
3. reads the baked file back in another process: every cube must carry baked keys, and the cubes
   must have fallen and settled,
4. renders frames of the baked file with Cycles (CPU) into one PNG strip, and an animated GIF (with
   Pillow) and MP4 (Blender's FFmpeg) over the whole baked range,
5. prints where the files are and how long each step took.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SCENE = ROOT / "sample_scenes" / "dice.blend"
DEFAULT_FRAMES = 120  # 5 s of simulation: the cubes fall, tumble and come to rest
ECHO = ("PRB", "error", "warning", "Traceback", "No OpenCL", "  File", "    ")  # lines of the child worth showing


def strip_frames(last: int) -> list[int]:
    """Five frames for the strip: the start, the fall, the landing, the tumbling and the end."""
    picks = [1] + [max(1, round(last * f)) for f in (0.1, 0.2, 0.4)] + [last]
    return sorted(set(picks))


def run(cmd, log_path, env=None) -> tuple[int, str, float]:
    """Run ``cmd``, echo its output live and keep it in ``log_path``; (exit code, output, seconds)."""
    start = time.perf_counter()
    lines = []
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=env, bufsize=1)
        for line in proc.stdout:
            log.write(line)
            lines.append(line)
            if line.startswith(ECHO):
                print("   ", line.rstrip(), flush=True)
        code = proc.wait()
    return code, "".join(lines), time.perf_counter() - start


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--frames", type=int, default=int(os.environ.get("PRB_DEMO_FRAMES", DEFAULT_FRAMES)),
                   help=f"bake frames 1..N (default {DEFAULT_FRAMES}; the scene's own range is 1..250)")
    p.add_argument("--out", default=str(ROOT / "out" / "demo"), help="output folder")
    p.add_argument("--device", help="OpenCL device for the bake (default: automatic)")
    p.add_argument("--no-animation", action="store_true", help="render the strip only")
    p.add_argument("--animation-frames", type=int, default=24, help="frames in the GIF/MP4")
    p.add_argument("--regenerate", action="store_true", help="rebuild dice.blend with the generator first")
    args = p.parse_args(argv)
    if args.frames < 2:
        raise SystemExit("--frames must be at least 2")

    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    py = sys.executable
    timings = {}
    t_all = time.perf_counter()

    # 1. the scene
    if args.regenerate or not SCENE.exists():
        print(f"[1/4] generating {SCENE.relative_to(ROOT)}", flush=True)
        code, _, timings["generate"] = run([py, "sample_scenes/generate.py", "dice"], out / "generate.log", env)
        if code:
            print(f"error: generating the scene failed, see {out / 'generate.log'}", file=sys.stderr)
            return code
    else:
        print(f"[1/4] scene: {SCENE.relative_to(ROOT)} (1000 cubes; regenerate with sample_scenes/generate.py)")

    # 2. bake with the real CLI
    baked = out / "dice_baked.blend"
    for old in (baked, baked.with_suffix(".blend1")):  # a fresh result, no backup of the last one
        if old.exists():
            old.unlink()
    note = "" if args.frames >= 250 else f" (the scene's range is 1..250; {args.frames} frames keep the demo short)"
    print(f"[2/4] baking frames 1..{args.frames} headless with addon/cli.py{note}", flush=True)
    cmd = [py, "addon/cli.py", "--scene", str(SCENE), "--output", str(baked), "--overwrite",
           "--frames", "1", str(args.frames)]
    if args.device:
        cmd += ["--device", args.device]
    code, text, timings["bake (CLI process)"] = run(cmd, out / "bake.log", env)
    if code or not baked.exists():
        print(f"error: the bake failed (exit {code}), see {out / 'bake.log'}", file=sys.stderr)
        return code or 1
    summary = [line[5:].strip() for line in text.splitlines()
               if line.startswith("PRB: ") and not line.startswith(("PRB: saved", "PRB: frame", "PRB: baking"))]

    # 3. check the result in another process
    print("[3/4] checking the baked file", flush=True)
    npz = out / "dice_poses.npz"
    last = args.frames
    code, text, timings["check"] = run([py, "sample_scenes/checks.py", str(baked), "--frames", "1", str(last - 1),
                                        str(last), "--npz", str(npz)], out / "check.log", env)
    if code:
        print(f"error: reading the baked file failed, see {out / 'check.log'}", file=sys.stderr)
        return code
    data = np.load(npz)
    n = len(data["names"])
    keyed = int((data["keyed"] >= args.frames).sum())
    m = data["matrices"]
    start_top = m[0, :, 2, 3].max()
    end_top = m[-1, :, 2, 3].max()
    last_move = np.linalg.norm(m[-1, :, :3, 3] - m[-2, :, :3, 3], axis=-1).max()
    print(f"    {keyed} of {n} cubes keyed on all {args.frames} frames; highest cube {start_top:.1f} m -> "
          f"{end_top:.1f} m; fastest cube in the last frame moved {100 * last_move:.1f} cm")
    if n == 0 or keyed != n:
        print(f"error: {n - keyed} cubes lack baked keys", file=sys.stderr)
        return 1

    # 4. preview
    sys.path.insert(0, str(ROOT))
    from tools.render_preview import make_preview

    print("[4/4] rendering the preview (Cycles, CPU)", flush=True)
    frames = strip_frames(args.frames)
    result = make_preview(baked, out / "dice_strip.png", frames,
                          gif=None if args.no_animation else out / "dice.gif",
                          mp4=None if args.no_animation else out / "dice.mp4",
                          animation_count=args.animation_frames, animation_range=(1, args.frames),
                          label="Particle Rigid Bodies: 1000 dice",
                          log=lambda s: print("   ", s, flush=True))
    timings["render preview"] = result["seconds"]
    total = time.perf_counter() - t_all

    print("\nDemo done. Files:")
    print(f"  baked scene : {baked}")
    for key, what in (("strip", f"frames {', '.join(map(str, frames))}"), ("gif", "animation"), ("mp4", "animation")):
        if result.get(key):
            print(f"  {key:<11} : {result[key]}  ({what})")
    print(f"  logs        : {out}/*.log")
    print("Timing:")
    for line in summary:
        print(f"  {line}")
    for key, seconds in timings.items():
        print(f"  {key:<20} {seconds:7.1f} s")
    print(f"  {'total':<20} {total:7.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
