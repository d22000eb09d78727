"""The destruction sample scene (sample_scenes/destruction.py) as Blender's tools leave it: a small wall
built both ways the generator glues it (Connect for every constraint, and Connect once then copies)
gives the same Rigid Body world, and the committed destruction.blend has the structure its docstring
promises. Generation runs in its own process, as a user's would."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import bpy
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from sample_scenes.destruction import BALL_MASS, BRICK, running_bond, touching_pairs  # noqa: E402

COURSES, PER_COURSE = 4, 5  # 22 pieces (the odd courses closed by half bricks), 48 constraints


def generate(path: Path, glue: str, *extra) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "sample_scenes/destruction.py", "--courses", str(COURSES),
                           "--bricks-per-course", str(PER_COURSE), "--glue", glue, "--output", str(path), *extra],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def world_structure(path: Path) -> dict:
    """What a user sees of the file's Rigid Body world: its bodies, its constraints and the ball's keys."""
    bpy.ops.wm.open_mainfile(filepath=str(path), load_ui=False)
    scene = bpy.context.scene
    world = scene.rigidbody_world
    constraints = []
    for obj in world.constraints.objects:
        con = obj.rigid_body_constraint
        constraints.append((con.object1.name, con.object2.name, tuple(round(v, 6) for v in obj.matrix_world.translation),
                            con.type, con.use_breaking, round(con.breaking_threshold, 6), con.disable_collisions,
                            con.enabled))
    bodies = {o.name: (o.rigid_body.type, o.rigid_body.collision_shape, round(o.rigid_body.mass, 4))
              for o in world.collection.objects}
    ball = bpy.data.objects.get("WreckingBall")
    path_speed, kinematic = None, {}
    if ball is not None:
        from sample_scenes.checks import action_fcurves

        world.enabled = False  # the animation alone, without stepping Bullet
        for frame in range(1, 25):
            scene.frame_set(frame)
            kinematic[frame] = bool(ball.rigid_body.kinematic)
        for curve in action_fcurves(ball.animation_data.action, ball):
            if curve.data_path == "location":
                assert all(k.interpolation == "LINEAR" for k in curve.keyframe_points)
        scene.frame_set(2)
        before = np.array(ball.matrix_world.translation)
        scene.frame_set(3)
        path_speed = float(np.linalg.norm(np.array(ball.matrix_world.translation) - before) * scene.render.fps)
        world.enabled = True
    return dict(enabled=world.enabled, constraints=sorted(constraints), bodies=bodies, kinematic=kinematic,
                path_speed=path_speed, frames=(world.point_cache.frame_start, world.point_cache.frame_end),
                scene_frames=(scene.frame_start, scene.frame_end), fps=scene.render.fps,
                ground=bodies.get("Ground"), camera=scene.camera is not None)


def test_running_bond_pieces_and_the_pairs_that_touch():
    pieces = running_bond(COURSES, PER_COURSE)
    assert len(pieces) == 2 * PER_COURSE + 2 * (PER_COURSE + 1)
    # every course spans the same length, the odd ones offset by half a brick
    for course in range(COURSES):
        spans = [(x - s / 2, x + s / 2) for c, x, s in pieces if c == course]
        assert spans[0][0] == pytest.approx(-PER_COURSE * BRICK[0] / 2)
        assert spans[-1][1] == pytest.approx(PER_COURSE * BRICK[0] / 2)
        assert all(a[1] == pytest.approx(b[0]) for a, b in zip(spans, spans[1:]))
    pairs = touching_pairs(pieces)
    # in a course: pieces - 1; between courses: each joint of the lower course adds one over-lap
    in_courses = sum(len([p for p in pieces if p[0] == c]) - 1 for c in range(COURSES))
    assert len(pairs) == in_courses + (COURSES - 1) * (2 * PER_COURSE)
    assert len(set(pairs)) == len(pairs) and all(i < j for i, j in pairs)


def test_connect_and_copies_make_the_same_world(tmp_path):
    connect, copies = tmp_path / "connect.blend", tmp_path / "copies.blend"
    generate(connect, "connect")
    generate(copies, "copies")
    by_connect, by_copies = world_structure(connect), world_structure(copies)
    assert by_connect == by_copies
    world = by_copies
    pieces = running_bond(COURSES, PER_COURSE)
    assert len(world["constraints"]) == len(touching_pairs(pieces)) == 48
    assert all(c[3] == "FIXED" and c[4] and c[5] > 0 and c[6] and c[7] for c in world["constraints"])
    assert world["enabled"] and world["frames"] == world["scene_frames"] and world["fps"] == 24
    bricks = {n: b for n, b in world["bodies"].items() if n.startswith("Brick.")}
    assert len(bricks) == len(pieces)
    assert all(t == "ACTIVE" and shape == "BOX" for t, shape, _ in bricks.values())
    masses = sorted({m for _, _, m in bricks.values()})
    assert masses == pytest.approx([15.625, 31.25])  # half and whole bricks at 1000 kg/m^3
    assert world["ground"][:2] == ("PASSIVE", "BOX") and world["camera"]
    # the ball: Animated up to its release frame, then handed to Bullet at its path's speed
    assert world["bodies"]["WreckingBall"] == ("ACTIVE", "SPHERE", BALL_MASS)
    release = max(f for f, on in world["kinematic"].items() if on)
    assert all(world["kinematic"][f] for f in range(1, release + 1))
    assert not any(world["kinematic"][f] for f in range(release + 1, 25))
    assert world["path_speed"] == pytest.approx(15.0, rel=1e-4)


def test_without_the_ball(tmp_path):
    path = tmp_path / "wall.blend"
    generate(path, "copies", "--no-ball")
    world = world_structure(path)
    assert "WreckingBall" not in world["bodies"] and len(world["constraints"]) == 48


def test_committed_scene(tmp_path):
    path = ROOT / "sample_scenes" / "destruction.blend"
    assert path.stat().st_size < 2_000_000, "keep sample .blend files small (compressed)"
    world = world_structure(path)
    bricks = [n for n in world["bodies"] if n.startswith("Brick.")]
    assert len(bricks) >= 2000
    assert len(world["constraints"]) >= len(bricks)
    assert all(c[3] == "FIXED" and c[4] for c in world["constraints"])
    assert world["path_speed"] == pytest.approx(15.0, rel=1e-4)
    print(json.dumps({"bricks": len(bricks), "constraints": len(world["constraints"])}))
