"""The destruction sample scene: a glued brick wall in Blender's Rigid Body world, hit by a wrecking ball.

    PYTHONPATH=. .venv/bin/python sample_scenes/destruction.py                     # sample_scenes/destruction.blend
    PYTHONPATH=. .venv/bin/python sample_scenes/destruction.py --bricks-per-course 400 --output /tmp/wall8000.blend
    PYTHONPATH=. .venv/bin/python sample_scenes/destruction.py --glue connect --courses 4 --bricks-per-course 5 \\
        --output /tmp/wall_small.blend                                             # every constraint made by Connect

Everything simulated is set up with Blender's own Rigid Body tools, the way a user sets it up, so
the file is a Bullet scene first (press Play) and the add-on bakes it as it is, with no roles:

- the bricks: 0.5 x 0.25 x 0.25 m boxes (linked duplicates of one mesh, the half bricks that close
  the offset courses of another) in a one-brick-thick running bond, ``courses`` high and
  ``bricks_per_course`` long; ``rigidbody.world_add``, then ``rigidbody.objects_add`` (ACTIVE) on
  all of them, Box shape, and ``rigidbody.mass_calculate`` at 1000 kg/m^3 (31.25 kg a brick);
- the ground: a PASSIVE Box (``rigidbody.object_add``);
- the glue: a breakable FIXED constraint between every two bricks that touch (neighbours in a course,
  and each brick and the one or two it rests on), its pivot halfway between their origins, as
  ``rigidbody.connect`` (Selected to Active, pivot Center) makes it; then Breakable and a threshold
  set on each (``BREAKING_THRESHOLD``) as users do, in a loop;
- the wrecking ball: a 2,000 kg sphere (r 0.5 m, Sphere shape), Animated on a straight path with
  Linear keys, so that Bullet hands it over at the path's speed (``ball_speed``), keyed Animated
  off at ``release_frame``, about 1 m before the wall, at a third of its height.

How the glue is made (``glue``):
- ``connect``: ``rigidbody.connect`` once per brick, the brick active and its neighbours selected.
  Blender rebuilds the dependency graph of the whole scene around every constraint it adds (each
  constraint_add), so a constraint costs in proportion to the scene, whatever is selected: 0.22-0.26 s
  each at 2,000 bricks on 2 cores with 20 bricks selected (bench/probes/connect_cost.py), like the
  0.28 s of a Connect of all 2,000 (568 s). The wall's ~5,800 constraints would take about half an
  hour at 2,000 bricks and many hours at 8,000.
- ``copies`` (the default): Connect makes the first constraint, it is made breakable, and every other
  constraint is a copy of that empty (``Object.copy()``, what Duplicate does to it) linked into the
  same collections (the scene's and the world's RigidBodyConstraints), with its two bricks and its
  pivot set: the same constraints (tests/blender/test_destruction_scene.py checks that both ways
  give the same pairs, pivots and settings) without a scene update per constraint.
  Generation of the committed file (2,010 bricks, 5,790 constraints) takes about 13 s on a shared
  2-core CPU (2 s of it the constraints), the 8,010-brick wall (``--bricks-per-course 400``, 23,190
  constraints, 2.9 MB: made by bench/destruction.py, not kept) about 42 s (5 s).

The threshold: ``breaking_threshold`` is an impulse per Bullet substep (10 per frame by default) and
constraint row. In Bullet the 20-course wall (5 m high, 50 m long) stands under gravity alone at
BREAKING_THRESHOLD = 100 (no constraint broken in 4 s) but slumps at 25 (44 % broken), and at 100 the
ball breaks the glue where it hits and throws bricks out of the wall
(bench/results/destruction_threshold_*.json, from ``bench/destruction.py --courses 20
--bricks-per-course 100 --threshold T [--no-ball] --engines bullet --no-keys``). A 40-course wall
leans under its own weight in Bullet (its top 0.6 m off the line in 4 s, glue intact).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sample_scenes.generate import (add_camera_and_lights, add_object, box_mesh, material,  # noqa: E402
                                    new_collection, render_defaults, reset_file, save)

BRICK = (0.5, 0.25, 0.25)  # length (x), thickness (y), height (z), metres
DENSITY = 1000.0  # kg/m^3: a brick weighs 31.25 kg
BREAKING_THRESHOLD = 100.0  # see the module's docstring
BALL_MASS = 2000.0
BALL_RADIUS = 0.5
FRAMES = 96  # 4 s at 24 fps
GLUE_WAYS = ("copies", "connect")


def running_bond(courses: int, bricks_per_course: int):
    """The wall's pieces: (course, x of the piece's centre, length) for every brick, course by course,
    left to right. Even courses hold ``bricks_per_course`` whole bricks; odd courses are offset by half
    a brick and closed by a half brick at each end."""
    length = BRICK[0]
    left = -bricks_per_course * length / 2
    pieces = []
    for course in range(courses):
        if course % 2 == 0:
            spans = [(left + i * length, length) for i in range(bricks_per_course)]
        else:
            spans = [(left, length / 2)]
            spans += [(left + length / 2 + i * length, length) for i in range(bricks_per_course - 1)]
            spans.append((left + bricks_per_course * length - length / 2, length / 2))
        pieces += [(course, x0 + span / 2, span) for x0, span in spans]
    return pieces


def touching_pairs(pieces):
    """(i, j), i < j, for every two pieces that touch: neighbours in a course, and a piece and each piece
    of the course above whose span overlaps its own."""
    by_course: dict[int, list[int]] = {}
    for index, (course, _x, _span) in enumerate(pieces):
        by_course.setdefault(course, []).append(index)
    pairs = []
    for course, members in sorted(by_course.items()):
        pairs += list(zip(members[:-1], members[1:]))
        for i in members:
            _c, xi, si = pieces[i]
            for j in by_course.get(course + 1, ()):
                _c, xj, sj = pieces[j]
                overlap = min(xi + si / 2, xj + sj / 2) - max(xi - si / 2, xj - sj / 2)
                if overlap > 1e-6:
                    pairs.append((i, j))
    return pairs


def _select(bpy, objects, active):
    for obj in bpy.context.selected_objects:
        obj.select_set(False)
    for obj in objects:
        obj.select_set(True)
    bpy.context.view_layer.objects.active = active


def _make_breakable(constraint_object, threshold: float):
    con = constraint_object.rigid_body_constraint
    con.use_breaking = True
    con.breaking_threshold = threshold


def glue_with_connect(bpy, bricks, pairs, threshold: float):
    """Blender's Connect once per brick (active) with its later neighbours selected, then every constraint
    made breakable in a loop."""
    later: dict[int, list[int]] = {}
    for i, j in pairs:
        later.setdefault(i, []).append(j)
    for i, neighbours in sorted(later.items()):
        _select(bpy, [bricks[i]] + [bricks[j] for j in neighbours], bricks[i])
        result = bpy.ops.rigidbody.connect(con_type="FIXED", pivot_type="CENTER",
                                           connection_pattern="SELECTED_TO_ACTIVE")
        if result != {"FINISHED"}:
            raise RuntimeError(f"rigidbody.connect returned {result}")
    for obj in bpy.context.scene.rigidbody_world.constraints.objects:
        _make_breakable(obj, threshold)


def glue_with_copies(bpy, bricks, pairs, threshold: float):
    """Connect makes the first pair's constraint, made breakable; every other pair gets a copy of it."""
    first, rest = pairs[0], pairs[1:]
    _select(bpy, [bricks[first[0]], bricks[first[1]]], bricks[first[0]])
    result = bpy.ops.rigidbody.connect(con_type="FIXED", pivot_type="CENTER", connection_pattern="SELECTED_TO_ACTIVE")
    if result != {"FINISHED"}:
        raise RuntimeError(f"rigidbody.connect returned {result}")
    template = next(o for o in bpy.context.scene.rigidbody_world.constraints.objects
                    if o.rigid_body_constraint.object2 == bricks[first[1]])
    _make_breakable(template, threshold)
    collections = list(template.users_collection)
    to_link = None
    for i, j in rest:
        copy = template.copy()
        if to_link is None:  # a constraint's copy joins the world's collection by itself, the scene's not
            joined = {c.name for c in copy.users_collection}
            to_link = [c for c in collections if c.name not in joined]
        a, b = bricks[i], bricks[j]
        copy.location = (a.location + b.location) / 2.0
        copy.rigid_body_constraint.object1 = a
        copy.rigid_body_constraint.object2 = b
        for collection in to_link:
            collection.objects.link(copy)


def animate_ball(ball, start, velocity, release_frame: int, fps: int) -> None:
    """Animated along a straight line at ``velocity`` from frame 1 to ``release_frame`` (Linear keys: the
    speed Bullet hands over is the path's), Animated off from the next frame."""
    seconds = (release_frame - 1) / fps
    ball.rigid_body.kinematic = True
    for frame, t in ((1, 0.0), (release_frame, seconds)):
        ball.location = tuple(s + v * t for s, v in zip(start, velocity))
        ball.keyframe_insert("location", frame=frame)
    ball.keyframe_insert("rigid_body.kinematic", frame=release_frame)
    ball.rigid_body.kinematic = False
    ball.keyframe_insert("rigid_body.kinematic", frame=release_frame + 1)
    from sample_scenes.checks import action_fcurves

    for curve in action_fcurves(ball.animation_data.action, ball):
        if curve.data_path == "location":
            for key in curve.keyframe_points:
                key.interpolation = "LINEAR"


def build_destruction(courses: int = 20, bricks_per_course: int = 100, threshold: float = BREAKING_THRESHOLD,
                      glue: str = "copies", ball: bool = True, ball_speed: float = 15.0, release_frame: int = 20,
                      frame_end: int = FRAMES, seed: int = 47) -> dict:
    """Build the scene in the current (reset) file; returns its description."""
    import bpy

    if glue not in GLUE_WAYS:
        raise ValueError(f"glue must be one of {GLUE_WAYS}, got {glue!r}")
    started = time.perf_counter()
    scene = reset_file()
    scene.frame_start, scene.frame_end, scene.frame_current = 1, frame_end, 1
    fps = scene.render.fps
    rng = np.random.default_rng(seed)
    brick_material = material("Brick", from_object=True, roughness=0.8)
    meshes = {}
    for span in (BRICK[0], BRICK[0] / 2):
        mesh = box_mesh("Brick" if span == BRICK[0] else "HalfBrick", (span, BRICK[1], BRICK[2]))
        mesh.materials.append(brick_material)
        meshes[span] = mesh
    wall = new_collection("Wall")
    pieces = running_bond(courses, bricks_per_course)
    bricks = []
    for index, (course, x, span) in enumerate(pieces):
        shade = 0.75 + 0.25 * rng.random()
        color = (0.55 * shade, 0.2 * shade, 0.13 * shade)
        bricks.append(add_object(f"Brick.{index:05d}", meshes[span], location=(x, 0.0, (course + 0.5) * BRICK[2]),
                                 collection=wall, color=color))

    bpy.ops.rigidbody.world_add()
    world = scene.rigidbody_world
    world.point_cache.frame_start, world.point_cache.frame_end = 1, frame_end
    _select(bpy, bricks, bricks[0])
    bpy.ops.rigidbody.objects_add(type="ACTIVE")
    bricks[0].rigid_body.collision_shape = "BOX"
    bpy.ops.rigidbody.object_settings_copy()  # Copy from Active: the Box shape on every brick
    bpy.ops.rigidbody.mass_calculate(material="Custom", density=DENSITY)

    wall_length = bricks_per_course * BRICK[0]
    ground_size = max(120.0, 3 * wall_length)
    ground = add_object("Ground", box_mesh("Ground", (ground_size, ground_size, 1.0)), location=(0.0, 0.0, -0.5))
    ground.data.materials.append(material("Ground", color=(0.42, 0.43, 0.45), roughness=0.85))
    _select(bpy, [ground], ground)
    bpy.ops.rigidbody.object_add(type="PASSIVE")
    ground.rigid_body.collision_shape = "BOX"

    pairs = touching_pairs(pieces)
    glue_started = time.perf_counter()
    (glue_with_copies if glue == "copies" else glue_with_connect)(bpy, bricks, pairs, threshold)
    glue_seconds = time.perf_counter() - glue_started

    height = courses * BRICK[2]
    aim_z = max(BALL_RADIUS, height / 3)
    velocity = (0.0, ball_speed, 0.0)
    release_y = -(BRICK[1] / 2 + BALL_RADIUS + 1.0)
    start = (0.0, release_y - ball_speed * (release_frame - 1) / fps, aim_z)
    if ball:
        bpy.ops.mesh.primitive_uv_sphere_add(radius=BALL_RADIUS, segments=24, ring_count=12, location=start)
        ball_object = bpy.context.object
        ball_object.name = ball_object.data.name = "WreckingBall"
        ball_object.data.materials.append(material("Iron", color=(0.08, 0.08, 0.09), roughness=0.35))
        bpy.ops.object.shade_smooth()
        bpy.ops.rigidbody.object_add(type="ACTIVE")
        ball_object.rigid_body.collision_shape = "SPHERE"
        ball_object.rigid_body.mass = BALL_MASS
        animate_ball(ball_object, start, velocity, release_frame, fps)

    view = min(max(wall_length, 12.0), 24.0)  # the wall's middle, where the ball hits, not its whole length
    add_camera_and_lights((-0.55 * view, -1.25 * view, 0.12 * view + height / 2), (0.0, 0.0, height * 0.35),
                          lens=35.0)
    render_defaults(scene)
    _select(bpy, [], None)
    scene.frame_set(1)
    return dict(scene="destruction", bricks=len(bricks), courses=courses, bricks_per_course=bricks_per_course,
                constraints=len(world.constraints.objects), pairs=len(pairs), threshold=threshold, glue=glue,
                ball="WreckingBall" if ball else None, ball_mass=BALL_MASS, ball_speed=ball_speed,
                release_frame=release_frame, release_location=[0.0, release_y, aim_z], frame_end=frame_end,
                wall_height=height, wall_length=wall_length, glue_seconds=glue_seconds,
                build_seconds=time.perf_counter() - started)


def generate(output=None, **params) -> dict:
    """Build the scene and save it, compressed (``output`` or sample_scenes/destruction.blend)."""
    info = build_destruction(**params)
    info["path"] = str(save(output or HERE / "destruction.blend"))
    info["size_bytes"] = os.path.getsize(info["path"])
    info["seconds"] = info["build_seconds"]
    return info


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--output", help="output .blend (default sample_scenes/destruction.blend)")
    p.add_argument("--courses", type=int, default=20)
    p.add_argument("--bricks-per-course", type=int, default=100)
    p.add_argument("--threshold", type=float, default=BREAKING_THRESHOLD, help="the glue's breaking threshold")
    p.add_argument("--glue", choices=GLUE_WAYS, default="copies", help="how the constraints are made (see above)")
    p.add_argument("--no-ball", action="store_true", help="the wall alone (does it stand?)")
    p.add_argument("--frames", type=int, default=FRAMES, help="last frame")
    args = p.parse_args(argv)
    info = generate(args.output, courses=args.courses, bricks_per_course=args.bricks_per_course,
                    threshold=args.threshold, glue=args.glue, ball=not args.no_ball, frame_end=args.frames)
    print(f"destruction: {info['path']} ({info['size_bytes'] / 1024:.0f} KiB): {info['bricks']} bricks, "
          f"{info['constraints']} constraints ({args.glue}: {info['glue_seconds']:.1f} s), built in "
          f"{info['build_seconds']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
