"""Bake paths the end-to-end tests in test_bake.py do not reach: the re-bake guard, the modal
operator's invoke/modal/cancel, one-step undo, frame-step timing, scene gravity and settings,
dynamic children of dynamic parents, constraints, delta rotations."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from prb_helpers import action_snapshot, add_cube, bpy, fresh_scene, scene_snapshot

from addon.blender import bake, operators  # noqa: E402
from addon.blender.bake_objects import pick_objects  # noqa: E402
from addon.blender.bake_options import BakeError, BakeOptions  # noqa: E402
from addon.blender.job import BakeJob  # noqa: E402
from addon.core.contact_geometry import CONTACT_GEOMETRY  # noqa: E402
from addon.core.settings import CONTACT_GEOMETRIES, SimulationSettings  # noqa: E402
from test_bake import assert_keys_match_engine, run_job  # noqa: E402

G = 9.81


def key_values(obj, path, index):
    curve = next(fc for fc in bake.action_fcurves(obj.animation_data.action)
                 if fc.data_path == path and fc.array_index == index)
    return [tuple(k.co) for k in curve.keyframe_points]


def assert_plain_bake(obj, frame_count):
    """The object's action is a bake: exactly location + its rotation channels, LINEAR keys on the
    bake's frames and nothing else."""
    action = obj.animation_data.action
    assert bake.is_bake_action(action) and action.users == 1
    curves = bake.action_fcurves(action)
    assert sorted((fc.data_path, fc.array_index) for fc in curves) == sorted(
        [("location", i) for i in range(3)] + [("rotation_euler", i) for i in range(3)])
    for fc in curves:
        assert len(fc.keyframe_points) == frame_count
        assert {k.interpolation for k in fc.keyframe_points} == {"LINEAR"}


# -- the re-bake guard: an earlier bake action is rewritten in place only if it is still untouched ----


def test_rebake_never_writes_into_a_bake_action_another_object_uses(registered):
    fresh_scene(1, 8)
    obj = add_cube("Thrown", (0.0, 0.0, 1.0))
    bpy.ops.object.select_all(action="DESELECT")
    run_job()
    first_bake = obj.animation_data.action
    bpy.ops.mesh.primitive_cube_add(size=0.4, location=(3.0, 0.0, 1.0))
    borrower = bpy.context.object
    borrower.name = "Borrower"
    borrower.prb.role = "IGNORED"
    borrower.animation_data_create().action = first_bake  # the user reuses the bake on another object
    if bake.layered_actions():
        borrower.animation_data.action_slot = first_bake.slots[0]
    borrowed = action_snapshot(first_bake)
    obj.prb.initial_velocity = (3.0, 0.0, 0.0)
    job, _ = run_job()
    assert obj.animation_data.action != first_bake  # a new action, not the shared one rewritten
    assert_plain_bake(obj, 8)
    assert borrower.animation_data.action == first_bake
    assert action_snapshot(first_bake) == borrowed  # the other object's animation is untouched
    assert_keys_match_engine(job, [0, 7])


def _interpolation_changed(obj):
    bake.action_fcurves(obj.animation_data.action)[0].keyframe_points[3].interpolation = "BEZIER"


def _key_inserted(obj):
    obj.keyframe_insert("location", index=2, frame=4.5)  # a key between the bake's frames


def _channel_added(obj):
    """Scale keys on exactly the bake's frames, LINEAR: only the channel set tells them apart."""
    for frame in range(1, 9):
        obj.keyframe_insert("scale", index=0, frame=frame)
    for fc in bake.action_fcurves(obj.animation_data.action):
        for key in fc.keyframe_points:
            key.interpolation = "LINEAR"


@pytest.mark.parametrize("edit", [_interpolation_changed, _key_inserted, _channel_added],
                         ids=["interpolation", "extra key", "extra channel"])
def test_rebake_replaces_a_bake_action_edited_by_hand(registered, edit):
    """A re-bake over the same frames writes into the earlier bake's keys only while they are
    exactly the bake's (bake.py, _reusable_curves); an action the user edited is replaced by a
    plain bake, so no edit survives half-overwritten."""
    fresh_scene(1, 8)
    obj = add_cube("Edited", (0.0, 0.0, 1.0))
    bpy.ops.object.select_all(action="DESELECT")
    run_job()
    edit(obj)
    obj.prb.initial_velocity = (3.0, 0.0, 0.0)
    job, _ = run_job()
    assert_plain_bake(obj, 8)
    assert obj.animation_data.action.name == "PRB_Bake_Edited"
    assert_keys_match_engine(job, [0, 3, 7])


# -- the modal operator: invoke, modal until done, cancel ------------------------------------------------


class _WindowManager:
    """The window manager calls of the modal path, recorded (background bpy has no window)."""

    def __init__(self, real):
        self.real, self.timers, self.handlers = real, [], []

    def event_timer_add(self, interval, window=None):
        timer = SimpleNamespace(interval=interval, window=window)
        self.timers.append(timer)
        return timer

    def event_timer_remove(self, timer):
        self.timers.remove(timer)

    def modal_handler_add(self, operator):
        self.handlers.append(operator)
        return True

    def __getattr__(self, name):  # progress_begin/update/end
        return getattr(self.real, name)


class _WindowContext:
    """bpy.context as a window would give it to invoke(): a window, its window manager."""

    def __init__(self):
        self.window = SimpleNamespace(name="window")
        self.window_manager = _WindowManager(bpy.context.window_manager)
        self.workspace = self.area = self.screen = None

    def __getattr__(self, name):
        return getattr(bpy.context, name)


class _Event:
    def __init__(self, type_, value="NOTHING"):
        self.type, self.value = type_, value


class _Delegate:
    """A module or object with some attributes replaced, the rest its own."""

    def __init__(self, real, **replaced):
        self._real = real
        self.__dict__.update(replaced)

    def __getattr__(self, name):
        return getattr(self._real, name)


def operator_in_a_window(monkeypatch, module, op_class, methods=(), **attributes):
    """``op_class``'s own invoke, modal, cancel and execute, and ``methods``, on a plain object that
    keeps its reports (Blender creates operator instances only through bpy.ops, which runs execute()
    in background mode), with bpy.app.background False for ``module``, as in a Blender window."""
    monkeypatch.setattr(module, "bpy", _Delegate(bpy, app=_Delegate(bpy.app, background=False)))

    def report(self, kind, message):
        self.reports.append((kind, message))

    namespace = {name: getattr(op_class, name) for name in ("invoke", "modal", "cancel", "execute", *methods)}
    operator = type("Operator", (), {**namespace, "_timer": None, **attributes, "report": report})()
    operator.reports = []
    return operator


def _operator(monkeypatch):
    return operator_in_a_window(monkeypatch, operators, operators.PRB_OT_simulate_bake,
                                ("_make_job", "_status", "_end", "_finish_report"), backend="opencl", _job=None)


def _scene_for_the_operator():
    fresh_scene(1, 10)
    add_cube("A", (0.0, 0.0, 1.0)).prb.initial_angular_velocity = (0.0, 3.0, 0.0)
    add_cube("B", (2.0, 0.0, 1.0))
    bpy.ops.object.select_all(action="DESELECT")


def test_modal_operator_invokes_runs_to_the_end_and_bakes(registered, monkeypatch):
    monkeypatch.setattr(operators, "STEP_BUDGET", 0.0)  # one frame per timer event
    _scene_for_the_operator()
    op, context = _operator(monkeypatch), _WindowContext()
    wm = context.window_manager
    assert op.invoke(context, _Event("LEFTMOUSE", "PRESS")) == {"RUNNING_MODAL"}
    assert wm.handlers == [op] and len(wm.timers) == 1 and wm.timers[0].window is context.window
    job = op._job
    assert job.live and job.frames_done == 0
    start = tuple(bpy.data.objects["A"].location)
    results = [op.modal(context, _Event("TIMER"))]
    assert results[0] == {"RUNNING_MODAL"} and job.frames_done == 1
    assert tuple(bpy.data.objects["A"].location) != start  # the live view shows the simulated frame
    assert op.modal(context, _Event("MOUSEMOVE")) == {"PASS_THROUGH"}  # the UI stays usable
    while results[-1] == {"RUNNING_MODAL"} and len(results) < 100:
        results.append(op.modal(context, _Event("TIMER")))
    assert results[-1] == {"FINISHED"} and len(results) == job.frames_total, op.reports
    assert wm.timers == [] and op._job is None  # the timer is removed with the job
    assert op.reports[-1][0] == {"INFO"} and "Baked 2 bodies" in op.reports[-1][1]
    for name in ("A", "B"):
        assert bpy.data.objects[name].animation_data.action.name == f"PRB_Bake_{name}"
    assert_keys_match_engine(job, [0, 5, job.frames_total])


def test_modal_operator_cancelled_from_outside_leaves_the_scene_as_it_was(registered, monkeypatch):
    """Blender calls cancel() when a modal operator is stopped from outside (file load, quit)."""
    monkeypatch.setattr(operators, "STEP_BUDGET", 0.0)
    _scene_for_the_operator()
    before = scene_snapshot()
    op, context = _operator(monkeypatch), _WindowContext()
    assert op.invoke(context, _Event("LEFTMOUSE", "PRESS")) == {"RUNNING_MODAL"}
    for _ in range(3):
        assert op.modal(context, _Event("TIMER")) == {"RUNNING_MODAL"}
    assert scene_snapshot() != before  # the live view moved the objects
    op.cancel(context)
    assert scene_snapshot() == before
    assert context.window_manager.timers == [] and op._job is None


def test_modal_operator_with_nothing_to_bake_reports_and_adds_no_timer(registered, monkeypatch):
    fresh_scene(1, 10)
    before = scene_snapshot()
    op, context = _operator(monkeypatch), _WindowContext()
    assert op.invoke(context, _Event("LEFTMOUSE", "PRESS")) == {"CANCELLED"}
    assert "nothing to simulate" in op.reports[-1][1]
    assert context.window_manager.timers == [] and context.window_manager.handlers == []
    assert scene_snapshot() == before


# -- undo ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("operator", ["simulate_bake", "clear_bake"])
def test_one_undo_step_takes_the_operator_back(registered, operator):
    """bpy.ops.<op>('EXEC_DEFAULT', True) pushes the undo step Blender pushes after an operator
    with the UNDO option (the step a user's Ctrl+Z takes back); background bpy keeps an undo
    stack. One undo must restore the scene exactly, and redo bring the result back."""
    _scene_for_the_operator()
    if operator == "clear_bake":
        run_job()
    bpy.ops.ed.undo_push(message="before")
    before = scene_snapshot()
    assert getattr(bpy.ops.prb, operator)("EXEC_DEFAULT", True) == {"FINISHED"}
    after = scene_snapshot()
    assert after != before
    bpy.ops.ed.undo()
    assert scene_snapshot() == before
    bpy.ops.ed.redo()
    assert scene_snapshot() == after


# -- timing, gravity, settings -------------------------------------------------------------------------


def test_frame_step_keys_are_frame_step_frames_of_simulated_time_apart(registered):
    """A free fall keyed every 4th frame at 24 fps: the key at frame 1 + 4k is 4k/24 s into the fall."""
    scene = fresh_scene(1, 13)
    scene.render.fps, scene.render.fps_base = 24, 1.0
    obj = add_cube("Falling", (0.0, 0.0, 10.0))
    bpy.ops.object.select_all(action="DESELECT")
    job, _ = run_job(frame_step=4)
    z = key_values(obj, "location", 2)
    assert [frame for frame, _ in z] == [1, 5, 9, 13]
    for k, (frame, value) in enumerate(z):
        t = 4 * k / 24
        # semi-implicit Euler: exact up to g t substep / 2 (< 2 mm here)
        assert abs(value - (10.0 - 0.5 * G * t * t)) < 3e-3, (frame, value)


@pytest.mark.parametrize("use_gravity", [True, False])
def test_the_scene_gravity_drives_the_bake(registered, use_gravity):
    scene = fresh_scene(1, 13)
    scene.render.fps, scene.render.fps_base = 24, 1.0
    scene.use_gravity = use_gravity
    scene.gravity = (1.5, 0.0, -3.0)
    obj = add_cube("Falling", (0.0, 0.0, 10.0))
    bpy.ops.object.select_all(action="DESELECT")
    job, _ = run_job()
    t = 12 / 24
    expected = np.array([0.0, 0.0, 10.0]) + (0.5 * np.array(scene.gravity) * t * t if use_gravity else 0.0)
    scene.frame_set(13)
    np.testing.assert_allclose(np.array(obj.matrix_world.translation), expected, atol=3e-3)


def test_scene_settings_reach_the_simulation(registered):
    scene = fresh_scene(1, 40)
    add_cube("Cube", (0.0, 0.0, 1.0))
    bpy.ops.object.select_all(action="DESELECT")
    s = scene.prb_settings
    assert BakeOptions.from_scene(scene).simulation.contact_geometry == SimulationSettings().contact_geometry == "voxels"
    items = s.bl_rna.properties["contact_geometry"].enum_items
    assert tuple(item.identifier for item in items) == CONTACT_GEOMETRIES
    assert [item.name for item in items] == ["Particles (fast)", "Rigid Voxels"]
    s.use_scene_frame_range = False
    s.frame_start, s.frame_end, s.frame_step = 3, 11, 2
    s.substeps_mode, s.substeps = "MANUAL", 37
    s.radius_mode, s.particle_radius = "MANUAL", 0.05
    s.target_penetration = 0.1
    # a target set before Stiffness existed (its mode never set) still applies
    assert BakeOptions.from_scene(scene).simulation.target_penetration == pytest.approx(0.1)
    s.stiffness_mode = "AUTO"  # not used while the stiffness is automatic
    s.contact_geometry = "voxels"  # the panel's Contacts: Rigid Voxels
    voxels = BakeOptions.from_scene(scene).simulation
    # Rigid Voxels solve their contacts: their solve's passes and detections from the geometry's row
    geometry = CONTACT_GEOMETRY["voxels"]
    assert voxels.contact_geometry == "voxels" and not voxels.contact_springs
    assert voxels.target_penetration == geometry.target_penetration
    assert (voxels.solve_passes, voxels.relax_passes, voxels.substeps_per_detection) == (
        geometry.solve_passes, geometry.relax_passes, geometry.substeps_per_detection)
    s.stiffness_mode = "MANUAL"
    s.use_sleep, s.sleep_speed, s.sleep_time = True, 0.05, 0.7
    s.max_particles = 5000
    options = BakeOptions.from_scene(scene)
    frames, conversion, simulation = options.frames, options.conversion, options.simulation
    assert (frames.frame_start, frames.frame_end, frames.frame_step) == (3, 11, 2)
    assert (frames.substeps, conversion.radius, simulation.target_penetration) == (37, pytest.approx(0.05),
                                                                                   pytest.approx(0.1))
    assert (simulation.sleep_speed, simulation.sleep_time) == (pytest.approx(0.05), pytest.approx(0.7))
    assert simulation.contact_geometry == "voxels"
    assert conversion.max_particles == 5000 and simulation.device is None
    dynamic, static = pick_objects(bpy.context)
    job = BakeJob(bpy.context, dynamic, static, options)
    job.start()
    try:
        settings = job.sim.settings
        assert job.sim.substeps_per_frame == 37 and job.converted.radius == pytest.approx(0.05)
        assert settings.target_penetration == pytest.approx(0.1)
        assert settings.contact_geometry == "voxels" and job.sim.engine.voxel_contacts
        assert (settings.sleep_speed, settings.sleep_time) == (pytest.approx(0.05), pytest.approx(0.7))
        assert list(job.key_frames()) == [3, 5, 7, 9, 11]
    finally:
        job.cancel()
    s.use_sleep = False
    assert BakeOptions.from_scene(scene).simulation.sleep_speed == 0.0
    s.use_scene_frame_range = True
    frames = BakeOptions.from_scene(scene).frames
    assert (frames.frame_start, frames.frame_end) == (1, 40)
    with pytest.raises(BakeError, match="contact geometry must be one of particles, voxels, got 'cubes'"):
        BakeOptions.from_scene(scene, contact_geometry="cubes")
    s.max_particles = 10  # the limit is the scene's: the 0.4 m cube at radius 0.05 needs 64
    with pytest.raises(BakeError, match="limit of 10"):
        BakeJob(bpy.context, dynamic, static, BakeOptions.from_scene(scene)).start()


def test_a_scene_saved_with_a_retired_contacts_choice_gets_one_message(registered):
    """A .blend stores Contacts as its item's number, fixed per item: a scene saved with Rigid Voxels
    (2) or Particles (0) reads back as itself; one saved with Flat Faces (1, retired) reads as no item,
    and baking it is refused with one message naming it and what to choose, leaving the scene as it
    was. A --contact-geometry given on top of the scene bakes it."""
    scene = fresh_scene(1, 10)
    add_cube("Cube", (0.0, 0.0, 1.0))
    s = scene.prb_settings
    for number, identifier in ((2, "voxels"), (0, "particles")):
        s["contact_geometry"] = number  # what a saved file holds
        assert s.contact_geometry == identifier
        assert BakeOptions.from_scene(scene).simulation.contact_geometry == identifier
    s["contact_geometry"] = 1
    assert s.contact_geometry == ""
    with pytest.raises(BakeError) as refused:
        BakeOptions.from_scene(scene)
    assert str(refused.value) == ("Contacts is Flat Faces, which was retired (Rigid Voxels rest faces flat and stand "
                                  "stacks and walls): choose Particles (fast) or Rigid Voxels in the Simulation "
                                  "panel (or --contact-geometry)")
    assert s.get("contact_geometry") == 1  # the scene untouched
    assert BakeOptions.from_scene(scene, contact_geometry="voxels").simulation.contact_geometry == "voxels"


@pytest.mark.parametrize("geometry", ["particles", "voxels"])
def test_a_manual_stiffness_applies_only_to_contacts_that_are_springs(registered, geometry):
    """A Stiffness Target (Stiffness: Manual) reaches the core with every geometry: Particles' springs
    stiffen, so their automatic substeps and the motion change; Rigid Voxels solve their contacts, so
    the bake is the same to the bit (the panel hides Stiffness for them, a file may still hold it)."""
    scene = fresh_scene(1, 16)
    bpy.ops.mesh.primitive_plane_add(size=4.0)
    bpy.context.object.prb.role = "STATIC"
    add_cube("Lower", (0.0, 0.0, 0.25))
    add_cube("Upper", (0.1, 0.0, 0.7), rotation=(0.0, 0.3, 0.0))
    bpy.ops.object.select_all(action="DESELECT")
    s = scene.prb_settings
    s.contact_geometry = geometry
    baked = {}
    for mode in ("AUTO", "MANUAL"):
        s.stiffness_mode, s.target_penetration = mode, 0.005
        job, _ = run_job()
        assert job.sim.settings.target_penetration == pytest.approx(0.005 if mode == "MANUAL" else 0.05)
        # the engine's poses (the keys also hold the rounding of the previous bake's start pose)
        baked[mode] = job.sim.substeps_per_frame, np.concatenate([job.positions.ravel(), job.orientations.ravel()])
    (auto_substeps, auto), (manual_substeps, manual) = baked["AUTO"], baked["MANUAL"]
    if CONTACT_GEOMETRY[geometry].springs:
        assert manual_substeps > auto_substeps and not np.array_equal(manual, auto)
    else:
        assert manual_substeps == auto_substeps and np.array_equal(manual, auto)


# -- hierarchies, constraints, delta transforms ---------------------------------------------------------


def test_dynamic_child_of_a_dynamic_parent_follows_the_engine(registered):
    """Both simulated: the child's keys are relative to its parent's baked motion."""
    fresh_scene(1, 10)
    parent = add_cube("Parent", (0.0, 0.0, 2.0), rotation=(0.3, 0.0, 0.5))
    parent.prb.initial_angular_velocity = (0.0, 0.0, 4.0)
    parent.prb.initial_velocity = (1.0, 0.0, 0.0)
    child = add_cube("Child", (1.0, 0.5, 2.5), rotation=(0.0, 0.2, 0.0))
    world = child.matrix_world.copy()
    child.parent = parent
    child.matrix_world = world
    bpy.context.view_layer.update()
    bpy.ops.object.select_all(action="DESELECT")
    job, _ = run_job()
    assert {o.name for o in job.objects} == {"Child", "Parent"}
    assert_keys_match_engine(job, [0, 4, 9])
    assert child.animation_data.action.name == "PRB_Bake_Child"


def test_child_of_a_parent_moved_by_a_constraint_follows_the_engine(registered):
    """The parent has no keys of its own: a Copy Location constraint moves it after an animated
    target, so its motion must be sampled frame by frame (bake_objects.animated_chain)."""
    fresh_scene(1, 10)
    bpy.ops.object.empty_add(location=(0.0, 0.0, 0.0))
    target = bpy.context.object
    target.name = "Target"
    target.keyframe_insert("location", frame=1)
    target.location = (3.0, 1.0, 2.0)
    target.keyframe_insert("location", frame=10)
    bpy.ops.object.empty_add(location=(0.0, 0.0, 0.0))
    holder = bpy.context.object
    holder.name = "Holder"
    constraint = holder.constraints.new("COPY_LOCATION")
    constraint.target = target
    for o in (target, holder):
        o.prb.role = "IGNORED"
    bpy.context.scene.frame_set(1)
    kid = add_cube("Kid", (0.5, 0.0, 2.0))
    kid.parent = holder
    bpy.context.view_layer.update()
    bpy.ops.object.select_all(action="DESELECT")
    job, _ = run_job()
    assert [o.name for o in job.objects] == ["Kid"]
    assert_keys_match_engine(job, [0, 4, 9])
    assert holder.animation_data is None  # the constrained parent was not keyed


def test_delta_rotations_are_taken_out_of_the_keys(registered):
    """Blender composes delta rotation @ rotation; the keyed rotation must leave the delta out so
    the world matrix is the engine's (euler and quaternion deltas, with a delta location)."""
    fresh_scene(1, 10)
    euler = add_cube("DeltaEuler", (0.0, 0.0, 1.0), rotation=(0.1, 0.2, 0.3))
    euler.delta_rotation_euler = (0.4, -0.3, 0.8)
    euler.delta_location = (0.2, 0.0, 0.1)
    euler.prb.initial_angular_velocity = (2.0, 0.0, 1.0)
    quat = add_cube("DeltaQuat", (2.0, 0.0, 1.0), rotation=(0.0, 0.3, 0.0), rotation_mode="QUATERNION")
    quat.delta_rotation_quaternion = (0.8, 0.2, -0.4, 0.4)
    quat.prb.initial_angular_velocity = (0.0, 3.0, 0.0)
    bpy.context.view_layer.update()
    bpy.ops.object.select_all(action="DESELECT")
    job, _ = run_job()
    assert {o.name for o in job.objects} == {"DeltaEuler", "DeltaQuat"}
    assert_keys_match_engine(job, [0, 4, 9])
    assert tuple(euler.delta_rotation_euler) == pytest.approx((0.4, -0.3, 0.8))  # left as the user set it


def test_dynamic_object_under_a_child_of_constraint_follows_the_engine(registered):
    """A Child Of constraint to a fixed, turned empty (a rig's usual setup): the keys are written
    in the space the constraint puts them in, so the world matrices are the engine's."""
    fresh_scene(1, 10)
    bpy.ops.object.empty_add(location=(1.0, 0.5, 0.3), rotation=(0.2, 0.1, 0.7))
    rig = bpy.context.object
    rig.prb.role = "IGNORED"
    cube = add_cube("Rigged", (0.0, 0.0, 2.0))
    cube.prb.initial_angular_velocity = (0.0, 2.0, 0.0)
    constraint = cube.constraints.new("CHILD_OF")
    constraint.target = rig
    if hasattr(constraint, "set_inverse_pending"):
        constraint.set_inverse_pending = False  # no inverse: the rig's transform applies in full
    bpy.context.view_layer.update()
    # the constraint moves and turns the cube: its world matrix is not its own channels'
    assert np.abs(np.array(cube.matrix_world) - np.array(cube.matrix_basis)).max() > 0.1
    bpy.ops.object.select_all(action="DESELECT")
    job, _ = run_job()
    assert_keys_match_engine(job, [0, 4, 9])


@pytest.mark.parametrize("kind", ["COPY_ROTATION", "LIMIT_LOCATION", "CHILD_OF_PARTIAL", "CHILD_OF_MOVING"])
def test_keyframe_bake_refuses_constraints_that_would_move_bodies_off_their_motion(registered, kind):
    """Keys under a constraint whose result depends on the keyed channels (or a Child Of that does
    not use all of them, or follows a moving target) would not give the simulated motion: the bake is
    refused before converting, naming the object and the constraint, and the scene is untouched."""
    fresh_scene(1, 10)
    bpy.ops.object.empty_add(location=(1.0, 0.5, 0.3), rotation=(0.2, 0.1, 0.7))
    rig = bpy.context.object
    rig.name = "Rig"
    rig.prb.role = "IGNORED"
    cube = add_cube("Held", (0.0, 0.0, 2.0))
    add_cube("Free", (2.0, 0.0, 2.0))
    if kind == "COPY_ROTATION":
        cube.constraints.new("COPY_ROTATION").target = rig
    elif kind == "LIMIT_LOCATION":
        limit = cube.constraints.new("LIMIT_LOCATION")
        limit.use_min_z, limit.min_z = True, 1.5
    else:
        child_of = cube.constraints.new("CHILD_OF")
        child_of.target = rig
        if kind == "CHILD_OF_PARTIAL":
            child_of.use_rotation_z = False
        else:
            rig.keyframe_insert("location", frame=1)
            rig.location.z += 1.0
            rig.keyframe_insert("location", frame=10)
    bpy.context.view_layer.update()
    bpy.ops.object.select_all(action="DESELECT")
    before = scene_snapshot()
    dynamic, static = pick_objects(bpy.context)
    job = BakeJob(bpy.context, dynamic, static, BakeOptions.from_scene(bpy.context.scene))
    with pytest.raises(BakeError, match=r"Held: .* constraint") as refused:
        job.check()
    assert "Free" not in str(refused.value) and "Mute or remove" in str(refused.value)
    assert job.converted is None and job.sim is None
    assert scene_snapshot() == before


def test_muted_constraints_and_instance_bakes_are_not_refused(registered):
    """A muted constraint (or one at influence 0) does not act; a bake to instances shows the
    simulated poses from the cache whatever the originals' constraints do."""
    fresh_scene(1, 6)
    cube = add_cube("Held", (0.0, 0.0, 2.0))
    muted = cube.constraints.new("LIMIT_LOCATION")
    muted.use_min_z, muted.min_z, muted.mute = True, 5.0, True
    faded = cube.constraints.new("COPY_ROTATION")
    faded.influence = 0.0
    bpy.context.view_layer.update()
    bpy.ops.object.select_all(action="DESELECT")
    job, _ = run_job()
    assert_keys_match_engine(job, [0, 5])
    muted.mute = False
    dynamic, static = pick_objects(bpy.context)
    with pytest.raises(BakeError, match="Limit Location"):
        BakeJob(bpy.context, dynamic, static, BakeOptions.from_scene(bpy.context.scene)).check()
    BakeJob(bpy.context, dynamic, static,
            BakeOptions.from_scene(bpy.context.scene, bake_mode="INSTANCES")).check()


def test_collider_moved_by_a_constraint_moves_in_the_simulation(registered):
    """A floor without keys of its own, lifted by a Copy Location constraint after an animated
    empty: its motion is sampled per frame (static_colliders._possibly_animated), and it lifts the cube."""
    fresh_scene(1, 24)
    bpy.ops.object.empty_add(location=(0.0, 0.0, 0.0))
    lift = bpy.context.object
    lift.name = "Lift"
    lift.prb.role = "IGNORED"
    lift.keyframe_insert("location", frame=1)
    lift.location = (0.0, 0.0, 1.0)
    lift.keyframe_insert("location", frame=24)
    bpy.ops.mesh.primitive_plane_add(size=4.0, location=(0.0, 0.0, 0.0))
    floor = bpy.context.object
    floor.name = "Floor"
    floor.prb.role = "STATIC"
    floor.constraints.new("COPY_LOCATION").target = lift
    bpy.context.scene.frame_set(1)
    cube = add_cube("Rider", (0.0, 0.0, 0.21))
    bpy.ops.object.select_all(action="DESELECT")
    run_job()
    bpy.context.scene.frame_set(24)
    assert cube.matrix_world.translation.z > 1.1  # carried up by about a metre with the floor
