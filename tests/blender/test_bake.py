"""Simulate & Bake end to end with the bpy module: keys, their values, user actions, cancel and errors."""
from __future__ import annotations

import math

import numpy as np
import pytest

from prb_helpers import add_cube, bpy, fresh_scene, scene_snapshot

from addon.blender import bake, local_channels  # noqa: E402
from addon.blender.bake_objects import pick_objects  # noqa: E402
from addon.blender.bake_options import BakeOptions  # noqa: E402
from addon.blender.job import BakeJob  # noqa: E402
from addon.core.rotations import quaternion_to_matrix  # noqa: E402
FRAMES = (1, 12)


def build_scene():
    """Four dynamic cubes (every rotation mode, one parented to a rotated, scaled empty), a static
    object and an unrelated object."""
    scene = fresh_scene(*FRAMES)
    add_cube("Euler", (0.0, 0.0, 1.0), rotation=(0.3, 0.2, 0.1)).prb.initial_angular_velocity = (0.0, 3.0, 1.0)
    q = add_cube("Quat", (1.5, 0.0, 1.2), rotation=(0.0, 0.5, 0.2), rotation_mode="QUATERNION")
    q.prb.initial_angular_velocity = (8.0, 0.0, 0.0)  # fast spin: a half turn in a few frames
    add_cube("AxisAngle", (3.0, 0.0, 1.1), rotation=(0.2, 0.0, 0.4), rotation_mode="AXIS_ANGLE").prb.initial_velocity = (0, 0, 2)
    add_cube("ZYX", (0.0, 2.0, 1.3), rotation=(1.0, 0.1, 0.2), rotation_mode="ZYX")
    bpy.ops.object.empty_add(location=(5.0, 1.0, 0.5), rotation=(0.0, 0.0, 0.7))
    parent = bpy.context.object
    parent.name = "Parent"
    parent.scale = (1.5, 1.5, 1.5)
    child = add_cube("Child", (6.0, 2.0, 2.0), rotation=(0.1, 0.2, 0.3))
    world = child.matrix_world.copy()
    child.parent = parent
    child.matrix_world = world  # keep its place; matrix_parent_inverse stays identity
    child.delta_location = (0.1, 0.0, 0.0)
    bpy.ops.mesh.primitive_cube_add(size=0.6, location=(-3.0, 0.0, 0.0))
    bpy.context.object.name = "Bystander"  # role NONE and not selected: must not be touched
    bpy.ops.mesh.primitive_plane_add(size=20.0, location=(0.0, 0.0, 0.0))
    bpy.context.object.name = "Ground"
    bpy.context.object.prb.role = "STATIC"
    bpy.ops.object.select_all(action="DESELECT")
    bpy.context.view_layer.update()
    return scene


def run_job(**kw):
    dynamic, static = pick_objects(bpy.context)
    job = BakeJob(bpy.context, dynamic, static, BakeOptions.from_scene(bpy.context.scene, **kw))
    result = job.run()
    return job, result


def assert_keys_match_engine(job, frames_to_check):
    scene = bpy.context.scene
    world = job.world_matrices()
    key_frames = job.key_frames()
    for idx in frames_to_check:
        scene.frame_set(int(key_frames[idx]))
        for b, obj in enumerate(job.objects):
            got = np.array(obj.matrix_world)
            np.testing.assert_allclose(got, world[idx, b], atol=2e-4, err_msg=f"{obj.name} frame {key_frames[idx]}")
            # independent of the matrix formula: the object's centre of mass is where the engine put it
            m0 = np.asarray(job.links[b].matrix_world)
            com_in_object = np.linalg.solve(m0, np.append(job.links[b].com_local, 1.0))
            np.testing.assert_allclose((got @ com_in_object)[:3], job.positions[idx, b], atol=2e-4)


def test_bake_writes_keys_matching_the_engine(registered):
    build_scene()
    before = scene_snapshot()
    job, result = run_job()
    names = {"Euler", "Quat", "AxisAngle", "ZYX", "Child"}
    assert {o.name for o in job.objects} == names
    assert result.bodies == 5 and result.particles > 0 and result.frames == FRAMES[1] - FRAMES[0] + 1
    for obj in bpy.data.objects:
        action = obj.animation_data.action if obj.animation_data else None
        if obj.name in names:
            assert action is not None and action.name == f"PRB_Bake_{obj.name}"
            curves = bake.action_fcurves(action)
            rot_path = {"QUATERNION": "rotation_quaternion", "AXIS_ANGLE": "rotation_axis_angle"}.get(
                obj.rotation_mode, "rotation_euler")
            assert sorted((fc.data_path, fc.array_index) for fc in curves) == sorted(
                [("location", i) for i in range(3)] + [(rot_path, i) for i in range(4 if rot_path != "rotation_euler" else 3)])
            for fc in curves:
                assert len(fc.keyframe_points) == FRAMES[1] - FRAMES[0] + 1
                assert [k.co[0] for k in fc.keyframe_points] == list(range(FRAMES[0], FRAMES[1] + 1))
                assert {k.interpolation for k in fc.keyframe_points} == {"LINEAR"}
        else:  # static, bystander and parent: untouched
            assert before["objects"][obj.name] == scene_snapshot()["objects"][obj.name]
    assert scene_snapshot()["frame"] == before["frame"]
    assert_keys_match_engine(job, [0, 3, 7, len(job.key_frames()) - 1])
    # the bodies really moved (fell / spun), so the comparison above is not trivial
    assert job.positions[-1, :, 2].max() < job.positions[0, :, 2].max() - 0.1
    # quaternion keys stay in one hemisphere, euler keys have no 2*pi jumps
    quat = bpy.data.objects["Quat"]
    keys = np.array([[k.co[1] for k in fc.keyframe_points] for fc in sorted(
        (fc for fc in bake.action_fcurves(quat.animation_data.action) if fc.data_path == "rotation_quaternion"),
        key=lambda fc: fc.array_index)]).T
    assert (np.einsum("ij,ij->i", keys[1:], keys[:-1]) > 0).all()
    for name in ("Euler", "ZYX"):
        action = bpy.data.objects[name].animation_data.action
        for fc in bake.action_fcurves(action):
            if fc.data_path == "rotation_euler":
                values = np.array([k.co[1] for k in fc.keyframe_points])
                assert np.abs(np.diff(values)).max() < math.pi


def test_frame_step_keys_every_nth_frame(registered):
    fresh_scene(1, 9)
    obj = add_cube("Solo", (0.0, 0.0, 1.0))
    job, _ = run_job(frame_step=4)
    frames = [k.co[0] for k in bake.action_fcurves(obj.animation_data.action)[0].keyframe_points]
    assert frames == [1, 5, 9]
    assert_keys_match_engine(job, [0, 1, 2])


def make_user_action(obj):
    """A keyed user action on obj (the usual way, keyframe_insert), returned with its snapshot."""
    obj.location = (0.0, 0.0, 1.0)
    obj.keyframe_insert("location", frame=1)
    obj.location = (0.0, 0.0, 2.0)
    obj.keyframe_insert("location", frame=12)
    action = obj.animation_data.action
    action.name = "UserAction"
    return action


def test_user_action_survives_bake_rebake_and_clear(registered):
    fresh_scene(*FRAMES)
    obj = add_cube("Animated", (0.0, 0.0, 1.0))
    other = add_cube("Plain", (2.0, 0.0, 1.0))
    make_user_action(obj)
    bpy.ops.object.select_all(action="DESELECT")
    bpy.context.scene.frame_set(1)
    before = scene_snapshot()
    user = before["actions"]["UserAction"]

    run_job()
    assert obj.animation_data.action.name == "PRB_Bake_Animated"
    assert scene_snapshot()["actions"]["UserAction"] == user  # kept, unmodified
    first_bake = obj.animation_data.action.as_pointer()

    obj.prb.initial_velocity = (2.0, 0.0, 0.0)  # something to re-bake: the first bake's keys change
    run_job()  # re-bake over the same frames: the values go into our previous bake's keys
    assert obj.animation_data.action.as_pointer() == first_bake
    assert sorted(a.name for a in bpy.data.actions) == ["PRB_Bake_Animated", "PRB_Bake_Plain", "UserAction"]
    assert scene_snapshot()["actions"]["UserAction"] == user
    bpy.context.scene.frame_set(FRAMES[1])
    assert obj.matrix_world.translation.x > 0.5  # the new values (it used to fall straight down)

    bpy.context.scene.frame_end = FRAMES[1] + 3  # other frames: a new bake action replaces ours
    run_job()
    assert obj.animation_data.action.name == "PRB_Bake_Animated"
    assert first_bake not in [a.as_pointer() for a in bpy.data.actions]  # the earlier bake was removed
    assert sorted(a.name for a in bpy.data.actions) == ["PRB_Bake_Animated", "PRB_Bake_Plain", "UserAction"]
    assert len(bake.action_fcurves(obj.animation_data.action)[0].keyframe_points) == FRAMES[1] + 3
    assert scene_snapshot()["actions"]["UserAction"] == user
    bpy.context.scene.frame_end = FRAMES[1]

    assert bpy.ops.prb.clear_bake() == {"FINISHED"}
    bpy.context.scene.frame_set(1)
    after = scene_snapshot()
    assert after == before
    assert other.animation_data is None


def test_operator_bakes_selection_and_clear_bake_restores(registered):
    fresh_scene(1, 8)
    a = add_cube("A", (0.0, 0.0, 1.0), role="NONE")
    b = add_cube("B", (2.0, 0.0, 1.0), role="NONE")
    add_cube("Ignored", (4.0, 0.0, 1.0), role="IGNORED")
    before = scene_snapshot()
    bpy.ops.object.select_all(action="SELECT")
    assert bpy.ops.prb.simulate_bake() == {"FINISHED"}
    assert a.animation_data.action.name == "PRB_Bake_A" and b.animation_data.action.name == "PRB_Bake_B"
    assert bpy.data.objects["Ignored"].animation_data is None
    # one undo step would revert this; Clear Bake must too
    assert bpy.ops.prb.clear_bake() == {"FINISHED"}
    after = scene_snapshot()
    before["selected"] = after["selected"]
    assert after == before


def test_no_objects_is_a_clear_error(registered):
    fresh_scene(1, 8)
    before = scene_snapshot()
    with pytest.raises(RuntimeError, match="nothing to simulate"):
        bpy.ops.prb.simulate_bake()
    assert scene_snapshot() == before


def test_cancel_halfway_leaves_scene_as_before(registered):
    build_scene()
    run_job()  # an earlier bake exists: cancelling a re-bake must keep it
    bpy.context.scene.frame_set(5)
    before = scene_snapshot()
    dynamic, static = pick_objects(bpy.context)
    job = BakeJob(bpy.context, dynamic, static, BakeOptions.from_scene(bpy.context.scene), live=True)
    job.start()
    assert not job.step(time_budget=0.0)  # one frame, objects moved to it (the modal operator's live view)
    job.step(time_budget=0.0)
    assert 0 < job.frames_done < job.frames_total
    moved = bpy.data.objects["Euler"]
    assert tuple(moved.location) != before["objects"]["Euler"]["location"]
    job.cancel()
    assert scene_snapshot() == before


class _FailingEngine:
    def __init__(self, engine, fail_after):
        self._engine, self._left = engine, fail_after

    def __getattr__(self, name):
        return getattr(self._engine, name)

    def step(self, count=1):
        self._left -= 1
        if self._left < 0:
            raise RuntimeError("forced engine failure")
        return self._engine.step(count)


def test_engine_error_leaves_scene_as_before(registered, monkeypatch):
    import addon.core.simulation as simulation

    build_scene()
    before = scene_snapshot()
    real = simulation.create_engine
    monkeypatch.setattr(simulation, "create_engine", lambda *a, **k: _FailingEngine(real(*a, **k), 4))
    bpy.ops.object.select_all(action="DESELECT")
    with pytest.raises(RuntimeError, match="forced engine failure"):
        bpy.ops.prb.simulate_bake()
    assert scene_snapshot() == before


@pytest.mark.parametrize("rebake", ["in place", "new actions"])
def test_error_while_writing_keys_writes_nothing(registered, monkeypatch, rebake):
    """A re-bake over the same frames writes into the earlier bake's keys, one over other frames
    makes new actions: a failure halfway through either leaves the earlier bake exactly as it was."""
    build_scene()
    run_job()  # earlier bake: must survive the failed re-bake intact
    if rebake == "new actions":
        bpy.context.scene.frame_end = FRAMES[1] + 2
    for obj in bpy.data.objects:  # thrown upwards: the re-bake would change every key
        if obj.type == "MESH" and obj.prb.role != "STATIC":
            obj.prb.initial_velocity = (0.0, 0.0, 3.0)
    bpy.context.scene.frame_set(1)
    before = scene_snapshot()
    name = "_write_values" if rebake == "in place" else "write_action"
    real = getattr(bake, name)
    calls = []

    def failing(*args, **kwargs):
        calls.append(args)
        if len(calls) == 3:
            raise RuntimeError("forced key writing failure")
        return real(*args, **kwargs)

    monkeypatch.setattr(bake, name, failing)
    with pytest.raises(RuntimeError, match="forced key writing failure"):
        bpy.ops.prb.simulate_bake()
    assert len(calls) == 3
    assert scene_snapshot() == before


def test_euler_conversion_matches_mathutils():
    from mathutils import Quaternion

    rng = np.random.default_rng(3)
    q = rng.normal(size=(40, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    for order in local_channels.EULER_ORDERS:
        eul = local_channels.continuous_eulers(quaternion_to_matrix(q)[:, None], order)[:, 0]
        for e, qq in zip(eul, q):
            from mathutils import Euler

            diff = Euler(e, order).to_quaternion().rotation_difference(Quaternion(qq)).angle
            assert min(diff, 2 * math.pi - diff) < 1e-5  # q and -q are the same rotation


def assert_channels_reproduce_moves(objects, frames: int = 5, seed: int = 7):
    """Turn and move the objects' world matrices at random, key them through local_channels and set
    those channels on the objects: Blender's matrix_world must be the moved matrix on every frame."""
    bpy.context.view_layer.update()
    start = np.array([np.array(o.matrix_world) for o in objects])
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(frames, len(objects), 4))
    rigid = np.zeros((frames, len(objects), 4, 4))
    rigid[..., :3, :3] = quaternion_to_matrix(q / np.linalg.norm(q, axis=-1, keepdims=True))
    rigid[..., :3, 3] = rng.normal(size=(frames, len(objects), 3))
    rigid[..., 3, 3] = 1.0
    world = rigid @ start[None]
    channels = local_channels.local_channels(objects, world)
    for f in range(frames):
        for obj, ch in zip(objects, channels):
            obj.location = ch.location[f]
            setattr(obj, ch.rotation_path, ch.rotation[f])
        bpy.context.view_layer.update()
        for b, obj in enumerate(objects):
            np.testing.assert_allclose(np.array(obj.matrix_world), world[f, b], atol=1e-5, err_msg=f"{obj.name}, {f}")
    return start


ROTATION_MODES = ["XYZ", "ZYX", "QUATERNION", "AXIS_ANGLE"]


def _with_deltas(obj):
    obj.delta_location = (0.1, -0.2, 0.3)
    obj.delta_rotation_euler = (0.1, 0.0, 0.2)
    obj.delta_rotation_quaternion = (1.8, 0.2, 0.0, 0.6)  # not normalised: Blender normalises it before use
    return obj


@pytest.mark.parametrize("rotation_mode", ROTATION_MODES)
def test_local_channels_take_out_the_delta_rotation_blender_applies(registered, rotation_mode):
    """Blender puts the delta quaternion, normalised, before a quaternion rotation and the delta euler
    before an euler one; an axis-angle rotation has a delta of its own that Python cannot set (DNA's
    drotAxis/drotAngle), so neither of the others applies to it."""
    fresh_scene(1, 2)
    objects = [_with_deltas(add_cube(f"Cube{k}", (k, 0.0, 1.0), rotation=(0.4, 0.1 * k, -0.6),
                                     rotation_mode=rotation_mode)) for k in range(3)]
    assert_channels_reproduce_moves(objects)


@pytest.mark.parametrize("rotation_mode", ROTATION_MODES)
def test_local_channels_of_mirrored_objects_reproduce_their_world_matrices(registered, rotation_mode):
    """Keys hold location and rotation; the scale stays the object's own. With one, two or three negative
    axes (in scale or delta scale, of the object or of its parent) the channels local_channels makes
    from turned and moved world matrices give those matrices back in Blender."""
    fresh_scene(1, 2)
    bpy.ops.object.empty_add(location=(1.0, -2.0, 0.5), rotation=(0.3, -0.2, 0.9))
    parent = bpy.context.object
    parent.scale = (1.3, -1.3, 1.3)
    cases = {"plain": ((1.0, 1.0, 1.0), (1.0, 1.0, 1.0)), "z": ((1.0, 1.0, -1.0), (1.0, 1.0, 1.0)),
             "xy": ((-0.7, -1.2, 0.9), (1.0, 1.0, 1.0)), "xyz": ((-0.8, -1.1, -1.0), (1.0, 1.0, 1.0)),
             "delta x": ((0.9, 1.1, 1.0), (-1.0, 1.0, 1.2)), "y and delta y": ((1.0, -1.5, 1.0), (1.0, -1.0, 1.0))}
    objects = []
    for k, (name, (scale, delta_scale)) in enumerate(cases.items()):
        for parented in (False, True):
            obj = _with_deltas(add_cube(f"{name}{' child' if parented else ''}", (k, 0.0, 1.0),
                                        rotation=(0.4, 0.1 * k, -0.6), rotation_mode=rotation_mode))
            obj.scale, obj.delta_scale = scale, delta_scale
            if parented:
                obj.parent = parent
            objects.append(obj)
    start = assert_channels_reproduce_moves(objects)
    det = np.linalg.det(start[:, :3, :3])
    assert (det < 0).sum() == 6 and (det > 0).sum() == 6  # mirrored in the world, and not


class _Event:
    def __init__(self, type_, value="NOTHING"):
        self.type, self.value = type_, value


def _modal_driver():
    """The operator's modal() and helpers on a plain object (no window in background mode)."""
    from addon.blender.operators import PRB_OT_simulate_bake as Op

    class Driver:
        modal = Op.modal
        _status = Op._status
        _end = Op._end
        _finish_report = Op._finish_report
        _timer = None

        def __init__(self, job):
            self._job = job
            self.reports = []

        def report(self, kind, message):
            self.reports.append((kind, message))

    return Driver


def _live_job():
    dynamic, static = pick_objects(bpy.context)
    job = BakeJob(bpy.context, dynamic, static, BakeOptions.from_scene(bpy.context.scene), live=True)
    job.start()
    return job


def test_modal_steps_move_objects_then_bake_or_cancel_on_esc(registered, monkeypatch):
    # one frame per timer tick (the job always pulls at least one): the small scene would otherwise
    # bake completely within the first tick's time budget on a fast machine
    monkeypatch.setattr("addon.blender.operators.STEP_BUDGET", 0.0)
    build_scene()
    before = scene_snapshot()
    driver = _modal_driver()(_live_job())
    assert driver.modal(bpy.context, _Event("MOUSEMOVE")) == {"PASS_THROUGH"}
    assert driver.modal(bpy.context, _Event("TIMER")) == {"RUNNING_MODAL"}
    assert tuple(bpy.data.objects["Euler"].location) != before["objects"]["Euler"]["location"]  # live view
    assert driver.modal(bpy.context, _Event("ESC", "PRESS")) == {"CANCELLED"}
    assert "cancelled" in driver.reports[-1][1]
    assert scene_snapshot() == before

    driver = _modal_driver()(_live_job())
    result = None
    for _ in range(1000):
        result = driver.modal(bpy.context, _Event("TIMER"))
        if result != {"RUNNING_MODAL"}:
            break
    assert result == {"FINISHED"}, driver.reports
    assert "Baked 5 bodies" in driver.reports[-1][1]
    for name in ("Euler", "Quat", "AxisAngle", "ZYX", "Child"):
        assert bpy.data.objects[name].animation_data.action.name == f"PRB_Bake_{name}"
    # transforms the live view changed were put back before the keys were written
    for name in ("Euler", "Quat"):
        obj = before["objects"][name]
        assert bpy.data.objects[name].get("_prb_rest") is not None
        assert tuple(bpy.data.objects[name]["_prb_rest"])[:3] == pytest.approx(obj["location"])


def test_child_of_an_animated_parent_follows_the_engine_in_world_space(registered):
    fresh_scene(1, 8)
    bpy.ops.object.empty_add(location=(0.0, 0.0, 0.0))
    parent = bpy.context.object
    parent.name = "MovingParent"
    parent.keyframe_insert("location", frame=1)
    parent.keyframe_insert("rotation_euler", frame=1)
    parent.location = (2.0, 0.0, 1.0)
    parent.rotation_euler = (0.0, 0.0, 1.5)
    parent.keyframe_insert("location", frame=8)
    parent.keyframe_insert("rotation_euler", frame=8)
    parent.prb.role = "IGNORED"
    bpy.context.scene.frame_set(1)
    child = add_cube("Kid", (0.5, 0.0, 2.0))
    child.parent = parent
    bpy.context.view_layer.update()
    bpy.ops.object.select_all(action="DESELECT")
    job, _ = run_job()
    assert [o.name for o in job.objects] == ["Kid"]
    assert_keys_match_engine(job, [0, 3, 7])  # world matrices match although the parent moves
    assert parent.animation_data.action.name != "PRB_Bake_MovingParent"
