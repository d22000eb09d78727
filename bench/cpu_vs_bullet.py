"""Our engine and Blender's Bullet on the same 1000-cube poses on this machine, one after the other in
one run: simulation alone, milliseconds per 24 fps frame (issue 33's CPU gate: at most 2x Bullet's).

Bullet's side is the shared ../shared/tools/bullet-pile/bullet_pile.py (Blender's rigid-body world
through bpy: 10 substeps, 10 iterations; its time is scene.frame_set's); ours steps
bench/scenes.py cube_pile(N) (identical poses) a frame at a time and reads the poses back each frame,
as a bake does. Each variant of ours is a set of SimulationSettings overrides (--variant NAME
key=value ...; none: the defaults, Rigid Voxels' rigid step). Writes JSON with the machine and the
commit; figures, never a timed test.

    .venv/bin/python bench/cpu_vs_bullet.py --bullet ../shared/tools/bullet-pile/bullet_pile.py \\
        --variant default --variant x2c1 solve_passes=1 --out out/cpu_vs_bullet.json
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from addon.core import SimulationSettings  # noqa: E402
from addon.core.opencl_engine import OpenCLEngine  # noqa: E402
from bench.contact_figures import pile_figures  # noqa: E402
from bench.machine import commit, cpu_model, setting_overrides, write_report  # noqa: E402
from bench.scenes import cube_pile  # noqa: E402

FPS = 24


def frame_substeps(engine) -> int:
    """The substeps of one FPS frame (the substep must divide it)."""
    per_frame = 1.0 / FPS / engine.params.substep
    substeps = round(per_frame)
    if abs(per_frame - substeps) > 1e-6:
        raise ValueError(f"the substep does not divide a {FPS} fps frame: {per_frame} substeps")
    return substeps


def timed_frames(engine, substeps: int, frames: int) -> tuple[list[float], object]:
    """Seconds each frame took, stepped and its poses read back as a bake does, and the last state."""
    times = []
    for _ in range(frames):
        start = time.perf_counter()
        engine.step(substeps)
        state = engine.body_state()
        times.append(time.perf_counter() - start)
    return times, state


def ours(cubes: int, frames: int, overrides: dict) -> dict:
    model = cube_pile(cubes)
    engine = OpenCLEngine(model, SimulationSettings(**overrides))
    substeps = frame_substeps(engine)
    engine.step(1)  # builds every kernel instance before the clock starts
    engine.body_state()
    times, state = timed_frames(engine, substeps, frames)
    return {"device": engine.device_name, "substeps_per_frame": substeps,
            "ms_per_frame_mean": 1e3 * sum(times) / frames, "ms_per_frame_first_24": 1e3 * sum(times[:24]) / 24,
            "ms_per_frame_last_24": 1e3 * sum(times[-24:]) / 24,
            "end": pile_figures(state, model.body_lattice_orientation)}


def bullet(script: str, cubes: int, frames: int) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "bullet.json"
        subprocess.run([sys.executable, script, "--count", str(cubes), "--frames", str(frames), "--out", str(out)],
                       check=True, stdout=subprocess.DEVNULL)
        report = json.loads(out.read_text())
    return {"ms_per_frame_mean": report["timing"]["sim_ms_per_frame_mean"], "timing": report["timing"],
            "settings": report.get("settings")}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bullet", required=True, help="bullet-pile's bullet_pile.py")
    parser.add_argument("--cubes", type=int, default=1000)
    parser.add_argument("--frames", type=int, default=120, help="24 fps frames (120: 5 s)")
    parser.add_argument("--variant", nargs="+", action="append", default=[], metavar=("NAME", "KEY=VALUE"),
                        help="a variant of ours: its name, then SimulationSettings fields")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    report = {"benchmark": "cpu_vs_bullet", "commit": commit(), "cpu_model": cpu_model(), "cubes": args.cubes,
              "frames": args.frames, "bullet": bullet(args.bullet, args.cubes, args.frames), "ours": {}}
    for name, *fields in args.variant or [["default"]]:
        result = ours(args.cubes, args.frames, setting_overrides(fields))
        result["over_bullet"] = result["ms_per_frame_mean"] / report["bullet"]["ms_per_frame_mean"]
        result["settings"] = setting_overrides(fields)
        report["ours"][name] = result
        print(name, round(result["ms_per_frame_mean"], 1), "ms per frame,", round(result["over_bullet"], 2),
              "x Bullet's", file=sys.stderr, flush=True)
    write_report(report, args.out)


if __name__ == "__main__":
    main()
