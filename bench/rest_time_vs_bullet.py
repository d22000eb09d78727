"""How long the engine test's 500-cube pile takes to come to rest, here and in Blender's Bullet world.

tests/core/test_stability.py drops 500 randomly rotated cubes from up to 7 m (a 13 x 13 lattice at
2 m, three layers) and the issue asks for every cube below 1 cm/s after 5 s. This puts the same
scene through Blender's rigid-body world as a physical yardstick: same positions and rotations,
no initial spin (Blender cannot set one), friction 0.5 and restitution 0.2 per contact (Bullet
multiplies the two objects' values, so each gets the square root), no damping (the test's
material has none), Blender's defaults otherwise (10 substeps, 10 iterations, no deactivation).
Ours runs the core engine with the test's material, with and without the test's initial spin.
Both are read the same way: a cube is at rest when its centre moved less than 1 cm/s between two
frames 1/24 s apart, at every whole second.
    PYTHONPATH=. .venv/bin/python bench/rest_time_vs_bullet.py --out bench/results/rest_time_vs_bullet.json
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

FPS = 24
SECONDS = 8
REST_SPEED = 0.01  # m/s, the threshold
FRICTION = 0.5
RESTITUTION = 0.2
COUNT, SIDE, SPACING = 500, 13, 2.0


def test_scene(seed: int = 5):
    """Positions, orientations (w, x, y, z) and spins of tests/core/test_stability.py's pile."""
    rng = np.random.default_rng(seed)
    positions, orientations, spins = [], [], []
    for k in range(COUNT):
        layer, cell = divmod(k, SIDE * SIDE)
        ix, iy = divmod(cell, SIDE)
        positions.append((SPACING * (ix - (SIDE - 1) / 2) + rng.uniform(-0.1, 0.1),
                          SPACING * (iy - (SIDE - 1) / 2) + rng.uniform(-0.1, 0.1), 1.0 + SPACING * layer))
        q = rng.normal(size=4)
        orientations.append(q / np.linalg.norm(q))
        spins.append(rng.normal(size=3))
    return np.array(positions), np.array(orientations), np.array(spins)


def at_rest_by_second(sample) -> list[dict]:
    """sample(t) -> (B, 3) centres at time t; fraction below REST_SPEED between t and t + 1/FPS."""
    out = []
    for second in range(1, SECONDS + 1):
        a = sample(second)
        b = sample(second + 1.0 / FPS)
        speed = np.linalg.norm(b - a, axis=1) * FPS
        out.append({"t_s": second, "at_rest": float(np.mean(speed < REST_SPEED)),
                    "moving": int(np.sum(speed >= REST_SPEED)), "fastest_mps": float(speed.max())})
    return out


def run_ours(spin: bool, device: str | None) -> dict:
    from addon.core import Material, ModelBuilder, SimulationSettings
    from addon.core.opencl_engine import OpenCLEngine
    from addon.core.shapes import cube_particles

    positions, orientations, spins = test_scene()
    builder = ModelBuilder(1.0 / 6.0)
    material = Material(friction=FRICTION, restitution=RESTITUTION)
    for k in range(COUNT):
        builder.add_body(cube_particles(1.0), density=1000.0, position=positions[k], material=material,
                         orientation=orientations[k], angular_velocity=spins[k] if spin else (0.0, 0.0, 0.0))
    builder.add_ground_plane(0.0, material=material)
    engine = OpenCLEngine(builder.finalize(), SimulationSettings(device=device))
    dt = engine.params.substep
    started = time.perf_counter()

    def sample(t):
        engine.step(int(round(t / dt)) - engine.substeps_done)
        return engine.body_state().position

    by_second = at_rest_by_second(sample)
    return {"engine": "ours", "initial_spin": spin, "device": engine.device_name,
            "substep_s": dt, "wall_s": time.perf_counter() - started, "by_second": by_second}


def run_bullet(substeps: int) -> dict:
    from bench import vs_blender as vb  # sets up a throw-away Blender user folder first
    import bpy

    frames = SECONDS * FPS + 2
    positions, orientations, _ = test_scene()
    scene, cubes, ground = vb.scene_with_cubes(positions, frames, quaternions=orientations)
    assert scene.render.fps == FPS
    rbw = vb.add_bullet_world(scene, cubes, ground, frames, friction=math.sqrt(FRICTION),
                              restitution=math.sqrt(RESTITUTION), linear_damping=0.0, angular_damping=0.0)
    rbw.substeps_per_frame = substeps
    centres = {}
    started = time.perf_counter()
    for frame in range(1, frames + 1):
        scene.frame_set(frame)  # in order: the point cache simulates each frame once
        centres[frame] = np.array([o.matrix_world.translation[:] for o in cubes])
    wall = time.perf_counter() - started
    # frame 1 is t = 0
    by_second = at_rest_by_second(lambda t: centres[int(round(t * FPS)) + 1])
    return {"engine": "blender_bullet", "blender_version": bpy.app.version_string,
            "substeps_per_frame": rbw.substeps_per_frame, "solver_iterations": rbw.solver_iterations,
            "deactivation": any(o.rigid_body.use_deactivation for o in cubes), "wall_s": wall,
            "by_second": by_second}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--bullet-substeps", type=int, nargs="+", default=[10])
    parser.add_argument("--out", default=str(ROOT / "out" / "rest_time_vs_bullet.json"))
    args = parser.parse_args(argv)
    runs = [run_ours(True, args.device), run_ours(False, args.device)]
    runs += [run_bullet(n) for n in args.bullet_substeps]
    for run in runs:
        label = run["engine"] + (f" spin={run['initial_spin']}" if "initial_spin" in run
                                 else f" substeps={run['substeps_per_frame']}")
        print(label.ljust(34), " ".join(f"{r['t_s']}s:{100 * r['at_rest']:5.1f}%" for r in run["by_second"]))
    report = {"benchmark": "bench/rest_time_vs_bullet.py", "scene": "tests/core/test_stability.py, 500 cubes",
              "friction": FRICTION, "restitution": RESTITUTION, "rest_speed_mps": REST_SPEED, "fps": FPS,
              "runs": runs}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1))
    print("wrote", args.out)


if __name__ == "__main__":
    main()
