"""The Rigid Body world's constraints read into the model's joints (rigid_body_constraints.py): each
Blender type into its rows, limits, springs and motors; a PASSIVE side as the world, an object1 on
the PASSIVE side read from object2; those Bullet leaves out left out with a note; Bullet's substep
for the breaking threshold; a keyed ``enabled`` per frame; a value that is not finite refused with
the scene unchanged. Baked end to end by the operator and the CLI on each engine of ENGINES, beside
Bullet's outcome on the same scene (stepped with frame_set in this bpy)."""
from __future__ import annotations

import math
import re

import bpy
import numpy as np
import pytest
from mathutils import Euler

from prb_helpers import draw_labels, scene_snapshot
from test_register_cli import run_python

from addon.blender import panels
from addon.blender.bake_objects import pick_objects
from addon.blender.bake_options import read_world
from addon.blender.convert import convert_scene
from addon.core.joints import FREE as F, LIMITED as M, LOCKED as L

G = 9.81
# the engines the end-to-end tests bake with: the kernels (65_joints.cl) and their NumPy specification
ENGINES = ["reference", "opencl"]


def bare_world(frames: int = 12):
    """A Rigid Body world without a ground, its cache (the bake's range) over frames 1..frames."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    bpy.ops.rigidbody.world_add()
    scene.rigidbody_world.point_cache.frame_start, scene.rigidbody_world.point_cache.frame_end = 1, frames
    return scene


def cube(name, location, passive=False, size=0.5, mass=1.0):
    bpy.ops.mesh.primitive_cube_add(size=size, location=location)
    obj = bpy.context.object
    obj.name = name
    bpy.ops.rigidbody.object_add()
    obj.rigid_body.collision_shape = "BOX"
    obj.rigid_body.mass = mass
    if passive:
        obj.rigid_body.type = "PASSIVE"
    return obj


def constraint(name, kind, one, two, location, rotation=(0.0, 0.0, 0.0), **values):
    """An empty with a rigid body constraint (Physics > Rigid Body Constraint) joining one and two."""
    bpy.ops.object.empty_add(location=location, rotation=rotation)
    obj = bpy.context.object
    obj.name = name
    bpy.ops.rigidbody.constraint_add()
    c = obj.rigid_body_constraint
    c.type, c.object1, c.object2 = kind, one, two
    for key, value in values.items():
        setattr(c, key, value)
    return obj


def converted(scene, frames: int = 12):
    """(world, ConvertedScene) as a bake of the scene's Rigid Body world converts it."""
    world = read_world(scene)
    dynamic, static = pick_objects(bpy.context, world=world)
    conv = convert_scene(bpy.context, dynamic, static, frame_start=1, frame_end=frames,
                         settings_of=world.settings.__getitem__, strict=True, kinematic_objects=world.animated,
                         constraints=world.joints)
    return world, conv


def heights(scene, obj, last: int) -> np.ndarray:
    """The object's z at frames 1..last as Blender shows it (Bullet while the world is on, the keys once
    it is off)."""
    out = []
    for frame in range(1, last + 1):
        scene.frame_set(frame)
        out.append(obj.matrix_world.translation.z)
    scene.frame_set(1)
    return np.array(out)


def bake(backend: str):
    panels._summary["stale"] = True
    assert bpy.ops.prb.simulate_bake(backend=backend) == {"FINISHED"}


# Blender type -> (constraint values, expected rows: mode, {row: lower}, {row: upper}, {row: stiffness},
# {row: damping}, {row: motor velocity}, {row: motor max impulse}); fields a type does not read are set
# too, to show they are not read
TYPES = {
    "FIXED": (dict(use_limit_lin_x=True), [L] * 6, {}, {}, {}, {}, {}, {}),
    "POINT": (dict(use_limit_ang_x=True), [L, L, L, F, F, F], {}, {}, {}, {}, {}, {}),
    "HINGE": (dict(use_limit_ang_z=True, limit_ang_z_lower=-0.5, limit_ang_z_upper=1.0, use_limit_lin_x=True),
              [L, L, L, L, L, M], {5: -0.5}, {5: 1.0}, {}, {}, {}, {}),
    "SLIDER": (dict(use_limit_lin_x=True, limit_lin_x_lower=-0.2, limit_lin_x_upper=0.3, use_limit_ang_z=True),
               [M, L, L, L, L, L], {0: -0.2}, {0: 0.3}, {}, {}, {}, {}),
    "PISTON": (dict(use_limit_lin_x=True, limit_lin_x_lower=-0.2, limit_lin_x_upper=0.3, use_limit_ang_x=True,
                    limit_ang_x_lower=-0.4, limit_ang_x_upper=0.6),
               [M, L, L, M, L, L], {0: -0.2, 3: -0.4}, {0: 0.3, 3: 0.6}, {}, {}, {}, {}),
    "GENERIC": (dict(use_limit_lin_y=True, limit_lin_y_lower=0.0, limit_lin_y_upper=0.0, use_limit_ang_z=True,
                     limit_ang_z_lower=-0.1, limit_ang_z_upper=0.2, use_spring_x=True),
                [F, L, F, F, F, M], {5: -0.1}, {5: 0.2}, {}, {}, {}, {}),
    "GENERIC_SPRING": (dict(spring_type="SPRING2", use_spring_z=True, spring_stiffness_z=50.0, spring_damping_z=2.0,
                            use_spring_ang_x=True, spring_stiffness_ang_x=5.0, spring_damping_ang_x=0.5,
                            spring_stiffness_y=99.0),
                       [F] * 6, {}, {}, {2: 50.0, 3: 5.0}, {2: 2.0, 3: 0.5}, {}, {}),
    "MOTOR": (dict(use_motor_ang=True, motor_ang_target_velocity=3.0, motor_ang_max_impulse=7.0,
                   motor_lin_target_velocity=4.0),
              [F] * 6, {}, {}, {}, {}, {3: 3.0}, {3: 7.0}),
}


def rows(values: dict) -> np.ndarray:
    out = np.zeros(6)
    for row, value in values.items():
        out[row] = value
    return out


@pytest.mark.parametrize("kind", sorted(TYPES))
def test_each_type_is_read_into_its_rows_at_the_constraint_objects_frame(registered, kind):
    values, mode, lower, upper, stiffness, damping, velocity, impulse = TYPES[kind]
    scene = bare_world()
    a, b = cube("A", (0.0, 0.0, 1.0)), cube("B", (0.5, 0.0, 1.0))
    turn = (0.3, -0.2, 0.5)
    empty = constraint("Joint", kind, a, b, (0.25, 0.1, 1.0), turn, **values)
    empty.scale = (2.0, 3.0, 0.5)  # the frame is the empty's location and rotation only
    world, conv = converted(scene)
    joints, model = conv.model.joints, conv.model
    assert joints.count == 1 and world.constraints_note() is None
    assert (joints.body_a[0], joints.body_b[0]) == (0, 1)  # A's body, B's body
    assert joints.mode[0].tolist() == mode
    np.testing.assert_allclose(joints.lower[0], rows(lower), atol=1e-6)
    np.testing.assert_allclose(joints.upper[0], np.where(np.array(mode) == M, rows(upper), rows(lower)), atol=1e-6)
    np.testing.assert_allclose(joints.spring_stiffness[0], rows(stiffness), atol=1e-6)
    np.testing.assert_allclose(joints.spring_damping[0], rows(damping), atol=1e-6)
    np.testing.assert_allclose(joints.motor_velocity[0], rows(velocity), atol=1e-6)
    np.testing.assert_allclose(joints.motor_max_impulse[0], rows(impulse), atol=1e-6)
    # the frame: the empty's rotation in both bodies (which start unturned), its origin from each centre
    expected = np.array(Euler(turn, "XYZ").to_quaternion())
    for frame in (joints.frame_a[0], joints.frame_b[0]):
        assert abs(abs(frame @ expected) - 1.0) < 1e-6, (frame, expected)
    pivot = np.array([0.25, 0.1, 1.0])
    np.testing.assert_allclose(joints.anchor_a[0], pivot - model.body_position[0], atol=1e-6)
    np.testing.assert_allclose(joints.anchor_b[0], pivot - model.body_position[1], atol=1e-6)
    assert joints.breaking_threshold[0] == math.inf and joints.disable_collisions[0] and joints.enabled[0]
    assert conv.joints == ["Joint"] and conv.joint_enabled_frames is None


def test_a_passive_side_is_the_world_and_an_object1_on_it_is_read_from_object2(registered):
    """object1 PASSIVE: the joint is read from object2's side, each coordinate's sign turned, so that
    the limits and a motor's velocity keep their meaning."""
    scene = bare_world()
    bob, post = cube("Bob", (0.0, 0.0, 1.0)), cube("Post", (2.0, 0.0, 1.0), passive=True)
    limits = dict(use_limit_ang_z=True, limit_ang_z_lower=-0.5, limit_ang_z_upper=1.0)
    constraint("Bob-Post", "HINGE", bob, post, (0.5, 0.0, 1.0), **limits)
    constraint("Post-Bob", "HINGE", post, bob, (0.5, 0.0, 1.0), **limits)
    motor = dict(use_motor_lin=True, motor_lin_target_velocity=2.0, motor_lin_max_impulse=5.0)
    constraint("Post-Bob motor", "MOTOR", post, bob, (0.5, 0.0, 1.0), **motor)
    _, conv = converted(scene)
    joints = conv.model.joints
    assert conv.joints == ["Bob-Post", "Post-Bob", "Post-Bob motor"]
    assert joints.body_a.tolist() == [0, 0, 0] and joints.body_b.tolist() == [-1, -1, -1]
    np.testing.assert_allclose(joints.anchor_b, [[0.5, 0.0, 1.0]] * 3, atol=1e-6)  # in the world
    np.testing.assert_allclose([joints.lower[0, 5], joints.upper[0, 5]], [-0.5, 1.0], atol=1e-6)
    np.testing.assert_allclose([joints.lower[1, 5], joints.upper[1, 5]], [-1.0, 0.5], atol=1e-6)
    np.testing.assert_allclose(joints.motor_velocity[2], [-2.0, 0, 0, 0, 0, 0], atol=1e-6)
    np.testing.assert_allclose(joints.motor_max_impulse[2], [5.0, 0, 0, 0, 0, 0], atol=1e-6)


@pytest.mark.parametrize("backend", ENGINES)
@pytest.mark.parametrize("passive_first", [False, True])
def test_a_slider_limit_stops_the_body_where_bullets_stops_whichever_side_is_object1(registered, backend,
                                                                                    passive_first):
    """A block on a vertical SLIDER to a PASSIVE post, free to drop 0.3 m: [0, 0.3] seen from the block
    (object1), [-0.3, 0] seen from the post. Both stop it 0.3 m down, as Bullet does."""
    scene = bare_world(frames=14)
    block, post = cube("Block", (0.0, 0.0, 3.0)), cube("Post", (2.0, 0.0, 3.0), passive=True)
    one, two, lower, upper = (post, block, -0.3, 0.0) if passive_first else (block, post, 0.0, 0.3)
    constraint("Slider", "SLIDER", one, two, (0.0, 0.0, 3.0), (0.0, -math.pi / 2, 0.0),  # its x points up
               use_limit_lin_x=True, limit_lin_x_lower=lower, limit_lin_x_upper=upper)
    bullet = heights(scene, block, 14)
    bake(backend)
    ours = heights(scene, block, 14)
    assert abs(bullet[-1] - 2.7) < 0.01 and abs(ours[-1] - 2.7) < 0.01, (bullet, ours)
    assert np.abs(ours - bullet).max() < 0.02


def test_constraints_bullet_leaves_out_are_left_out_and_named(registered):
    """Bullet makes no constraint of one with a side empty or outside the world's collection, between
    two PASSIVE objects or from an object to itself: Loose falls in Bullet and in the bake; the note
    names them."""
    scene = bare_world(frames=6)
    loose, glued = cube("Loose", (0.0, 0.0, 3.0)), cube("Glued", (3.0, 0.0, 3.0))
    posts = [cube(f"Post{k}", (6.0 + 2 * k, 0.0, 3.0), passive=True) for k in range(2)]
    bpy.ops.mesh.primitive_cube_add(location=(-3.0, 0.0, 3.0))  # a mesh outside the world
    outside = bpy.context.object
    outside.name = "Outside"
    constraint("NoSecond", "FIXED", loose, None, (0.0, 0.0, 3.5))
    constraint("ToOutside", "FIXED", loose, outside, (0.0, 0.0, 3.5))
    constraint("Itself", "FIXED", loose, loose, (0.0, 0.0, 3.5))
    constraint("Passives", "FIXED", posts[0], posts[1], (7.0, 0.0, 3.0))
    constraint("Glue", "FIXED", glued, posts[0], (3.0, 0.0, 3.0))
    bullet = heights(scene, loose, 6)
    world, conv = converted(scene, frames=6)
    assert world.summary() == "2 active, 2 passive, 5 constraints from the Rigid Body world"
    assert conv.joints == ["Glue"]
    assert world.constraints_note() == (
        '1 constraint left out as Bullet leaves them (a side with no object): "NoSecond"; '
        "1 constraint left out as Bullet leaves them (a side not in the Rigid Body world's collection): "
        '"ToOutside"; 1 constraint left out as Bullet leaves them (both sides the same object): "Itself"; '
        '1 constraint left out as Bullet leaves them (both sides PASSIVE): "Passives"')
    assert bullet[-1] < 2.8  # Bullet lets Loose fall
    labels = draw_labels(panels.PRB_PT_main)
    assert "Constraints:" in labels


def test_breaking_threshold_and_bullets_substep(registered):
    """breaking_threshold is an impulse per Bullet substep: the world's time scale / (fps x substeps per
    frame), fps_base included; without use_breaking the joint does not break."""
    scene = bare_world()
    scene.render.fps, scene.render.fps_base = 30, 1.001
    scene.rigidbody_world.substeps_per_frame, scene.rigidbody_world.time_scale = 20, 0.5
    a, b = cube("A", (0.0, 0.0, 1.0)), cube("B", (0.5, 0.0, 1.0))
    constraint("Breakable", "FIXED", a, b, (0.25, 0.0, 1.0), use_breaking=True, breaking_threshold=12.5)
    constraint("Unbreakable", "FIXED", a, b, (0.25, 0.0, 1.0), use_breaking=False, breaking_threshold=12.5)
    _, conv = converted(scene)
    joints = conv.model.joints
    assert joints.bullet_substep == pytest.approx(0.5 / (30 / 1.001 * 20), rel=1e-6)  # fps_base is a float32
    assert joints.breaking_threshold.tolist() == [12.5, math.inf]


def hanging_block(threshold_factor: float, frames: int = 12):
    """A 2 kg block hanging from a PASSIVE post by a FIXED constraint whose threshold is
    ``threshold_factor`` x its weight over Bullet's substep (1/240 s)."""
    scene = bare_world(frames)
    block, post = cube("Block", (0.0, 0.0, 2.75), mass=2.0), cube("Post", (2.0, 0.0, 3.0), passive=True)
    glue = constraint("Glue", "FIXED", block, post, (0.0, 0.0, 3.0), use_breaking=True,
                      breaking_threshold=threshold_factor * 2.0 * G / 240)
    return scene, block, glue


@pytest.mark.parametrize("backend", ENGINES)
@pytest.mark.parametrize("factor", [0.95, 1.05])
def test_a_hanging_block_breaks_its_glue_where_bullet_breaks_it(registered, backend, factor):
    """Bullet breaks the glue when weight x substep reaches the threshold (0.95: it falls at once;
    1.05: it holds); so does the bake, and the summary says how many broke."""
    scene, block, _ = hanging_block(factor)
    bullet = heights(scene, block, 12)
    bake(backend)
    ours = heights(scene, block, 12)
    fell = factor < 1
    assert (bullet[-1] < 2.0) == fell and (ours[-1] < 2.0) == fell, (bullet, ours)
    assert np.abs(ours - bullet).max() < 0.03


@pytest.mark.parametrize("backend", ENGINES)
def test_a_keyed_enabled_is_read_per_frame_and_lets_go_where_bullet_does(registered, backend):
    """enabled keyed on at frame 1 and off at frame 5: the joint is off in the step to frame 5 on, in
    Bullet and in the bake; a constraint not keyed stays on."""
    scene, block, glue = hanging_block(1000.0)
    other = cube("Other", (0.0, 3.0, 2.75))
    constraint("Steady", "POINT", other, bpy.data.objects["Post"], (0.0, 3.0, 3.0))
    c = glue.rigid_body_constraint
    glue.keyframe_insert("rigid_body_constraint.enabled", frame=1)
    c.enabled = False
    glue.keyframe_insert("rigid_body_constraint.enabled", frame=5)
    scene.frame_set(1)
    world, conv = converted(scene)
    assert [s.enabled_keyed for s in world.joints.setups] == [True, False]
    expected = np.ones((12, 2), dtype=bool)
    expected[4:, 0] = False  # frames 5..12
    assert conv.joint_enabled_frames.tolist() == expected.tolist()
    assert scene.frame_current == 1
    bullet = heights(scene, block, 12)
    bake(backend)
    ours = heights(scene, block, 12)
    assert np.abs(ours[:4] - 2.75).max() < 1e-3 and bullet[4] < 2.745 and ours[4] < 2.745
    # once let go it falls freely: each frame's drop grows by g / fps^2
    growth = np.diff(ours[4:], 2)
    assert np.abs(-growth / (9.81 / scene.render.fps ** 2) - 1.0).max() < 0.02, growth
    # Bullet in bpy 4.2 lets go a substep later in some runs of the whole suite (measured: 2.74234 m
    # at frame 5 instead of 2.74064, the same build; ours 2.74060 in both), 1.35 cm apart by frame 12
    assert np.abs(ours - bullet).max() < 0.02, (bullet, ours)


REFUSED = {
    "a NaN hinge limit": ("HINGE", dict(use_limit_ang_z=True, limit_ang_z_lower=float("nan")),
                          'Rigid body constraint "Joint": limit ang z lower must be a finite number, got nan. Fix it '
                          "in Physics > Rigid Body Constraint before baking."),
    "a NaN threshold": ("FIXED", dict(use_breaking=True, breaking_threshold=float("nan")),
                        'Rigid body constraint "Joint": breaking threshold must be a finite number, got nan. Fix it '
                        "in Physics > Rigid Body Constraint before baking."),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_constraint_value_that_is_not_finite_is_refused_and_the_scene_is_unchanged(registered, case):
    kind, values, message = REFUSED[case]
    scene = bare_world()
    a, b = cube("A", (0.0, 0.0, 1.0)), cube("B", (0.5, 0.0, 1.0))
    constraint("Joint", kind, a, b, (0.25, 0.0, 1.0), **values)
    before = scene_snapshot()
    panels._summary["stale"] = True
    labels = draw_labels(panels.PRB_PT_main)
    heading = labels.index("Objects refused:")
    assert " ".join(labels[heading + 1:]).startswith(message), labels
    with pytest.raises(RuntimeError, match="Simulate & Bake failed: " + re.escape(message)):
        bpy.ops.prb.simulate_bake()
    assert scene_snapshot() == before
    assert scene.rigidbody_world.enabled


def test_a_value_the_type_does_not_use_is_not_read(registered):
    scene = bare_world()
    a, b = cube("A", (0.0, 0.0, 1.0)), cube("B", (0.5, 0.0, 1.0))
    constraint("Joint", "FIXED", a, b, (0.25, 0.0, 1.0), use_limit_ang_z=True, limit_ang_z_lower=float("nan"),
               breaking_threshold=float("nan"))
    assert converted(scene)[1].model.joints.count == 1


def test_a_reversed_limit_is_no_limit_and_spring1_is_undamped_both_noted(registered):
    scene = bare_world()
    a, b = cube("A", (0.0, 0.0, 1.0)), cube("B", (0.5, 0.0, 1.0))
    constraint("Reversed", "HINGE", a, b, (0.25, 0.0, 1.0), use_limit_ang_z=True, limit_ang_z_lower=0.5,
               limit_ang_z_upper=-0.5)
    constraint("Old spring", "GENERIC_SPRING", a, b, (0.25, 0.0, 1.0), spring_type="SPRING1", use_spring_z=True,
               spring_stiffness_z=40.0, spring_damping_z=0.5)
    world, conv = converted(scene)
    joints = conv.model.joints
    assert joints.mode[0].tolist() == [L, L, L, L, L, F]
    assert joints.spring_stiffness[1, 2] == pytest.approx(40.0) and joints.spring_damping[1, 2] == 0.0
    assert world.constraints_note() == (
        "1 constraint read with (a limit's lower value above its upper one, which Bullet (and the bake) reads as "
        'no limit): "Reversed"; 1 constraint read with (spring type SPRING1, baked as an undamped spring of its '
        'stiffness (switch to SPRING2 for damping)): "Old spring"')


@pytest.mark.parametrize("backend", ENGINES)
def test_a_hanging_fixed_chain_sags_no_more_than_bullets_and_holds_still(registered, backend):
    """Ten 20 cm cubes of 1 kg hanging from a PASSIVE anchor, each glued to the one above by a FIXED
    constraint (Blender's default world: 10 substeps a frame, 10 iterations). Bullet's chain sags
    3.9 mm at its tip; ours sags no more (the soft step's springs: 3.5 mm), and once settled
    (frame 12) neither tip moves by 1 mm in the next second."""
    scene = bare_world(frames=36)
    size, top = 0.2, 3.0
    anchor = cube("Anchor", (0.0, 0.0, top + size / 2), passive=True, size=size)
    links = [cube(f"Link{k}", (0.0, 0.0, top - size * (k + 0.5)), size=size) for k in range(10)]
    constraint("Glue0", "FIXED", anchor, links[0], (0.0, 0.0, top))
    for k in range(1, 10):
        constraint(f"Glue{k}", "FIXED", links[k - 1], links[k], (0.0, 0.0, top - size * k))
    start = links[-1].matrix_world.translation.z
    bullet = start - heights(scene, links[-1], 36)
    bake(backend)
    ours = start - heights(scene, links[-1], 36)
    assert 2e-3 < bullet[-1] < 6e-3, bullet  # Bullet's own sag, as measured
    assert ours[-1] <= bullet[-1] and ours[-1] > 1e-3, (ours[-1], bullet[-1])
    assert np.ptp(bullet[11:]) < 1e-3 and np.ptp(ours[11:]) < 1e-3, (bullet, ours)


@pytest.mark.parametrize("backend", ENGINES)
def test_a_hinged_pendulum_swings_as_in_bullet(registered, backend):
    """A block on a HINGE to a PASSIVE post, its axis along y, let go level: it swings through the
    bottom and up the other side as Bullet's does, within a centimetre over a whole swing."""
    scene = bare_world(frames=22)
    bob, post = cube("Bob", (0.5, 0.0, 3.0)), cube("Post", (3.0, 0.0, 3.0), passive=True)
    constraint("Hinge", "HINGE", bob, post, (0.0, 0.0, 3.0), (math.pi / 2, 0.0, 0.0))  # its z along y
    bullet = heights(scene, bob, 22)
    panels._summary["stale"] = True
    assert "1 active, 1 passive, 1 constraints from the Rigid Body world" in draw_labels(panels.PRB_PT_main)
    bake(backend)
    ours = heights(scene, bob, 22)
    assert ours.min() < 2.52 and ours[-1] > 2.95  # down through the bottom (2.5) and up the other side
    assert np.abs(ours - bullet).max() < 0.01


@pytest.mark.parametrize("backend", ENGINES)
def test_the_cli_logs_the_broken_constraints_in_its_progress_lines(registered, backend, tmp_path):
    hanging_block(0.5, frames=4)
    path, out = tmp_path / "glue.blend", tmp_path / "glue.baked.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    proc = run_python("import sys; from addon import cli; sys.exit(cli.main(['cli', *sys.argv[1:]]))",
                      "--scene", str(path), "--output", str(out), "--backend", backend)
    assert proc.returncode == 0, proc.stderr
    assert "1 active, 1 passive, 1 constraints from the Rigid Body world" in proc.stdout
    assert "PRB: frame 3/3 (100%), 1 bodies, 1 constraint broken" in proc.stderr, proc.stderr
    assert "; 1 of 1 constraints broke" in proc.stdout


@pytest.mark.parametrize("backend", ENGINES)
def test_the_status_bar_says_how_many_constraints_have_broken_while_baking(registered, backend, monkeypatch):
    from types import SimpleNamespace

    from test_bake_paths import _Event, _WindowContext, operator_in_a_window

    from addon.blender import operators

    monkeypatch.setattr(operators, "STEP_BUDGET", 0.0)  # one frame per timer event
    hanging_block(0.5, frames=4)
    texts = []
    op = operator_in_a_window(monkeypatch, operators, operators.PRB_OT_simulate_bake,
                              ("_make_job", "_status", "_end", "_finish_report"), backend=backend, _job=None)
    context = _WindowContext()
    context.workspace = SimpleNamespace(status_text_set=texts.append)
    assert op.invoke(context, _Event("LEFTMOUSE", "PRESS")) == {"RUNNING_MODAL"}
    while op.modal(context, _Event("TIMER")) == {"RUNNING_MODAL"}:
        pass
    assert texts[0].startswith("Particle Rigid Bodies: frame 1 (0/3, 0%), 0 of 1 constraints broken on ")
    assert texts[-2].startswith("Particle Rigid Bodies: frame 4 (3/3, 100%), 1 of 1 constraints broken on ")
    assert texts[-1] is None  # cleared at the end
