"""Numbers that cannot poison a bake, in the panel and the operator: a NaN or infinity in a transform
the add-on reads is refused before anything runs, with one line naming the object and the field,
which the sidebar shows (its draw never raises); a frame range whose step keys no frame after the
first is refused likewise; and a simulation whose state turns non-finite stops the bake, naming the
frame and the body, leaving the scene as it was. (The CLI's side: test_cli.py.)"""
from __future__ import annotations

import math
import os
import re

import numpy as np
import pytest

from prb_helpers import add_cube, bpy, draw_labels, fresh_scene, scene_snapshot

from addon.blender import job as job_module, panels  # noqa: E402
from addon.blender.bake_options import BakeError  # noqa: E402
from test_bake_instances import run_job  # noqa: E402
from test_bake_paths import _Event, _operator, _WindowContext  # noqa: E402

NAN, INF = math.nan, math.inf


def snapshot() -> str:
    """The scene snapshot as text: NaN equals NaN there (in tuples it need not)."""
    return repr(scene_snapshot())


def scene_with(case):
    """Two dynamic cubes (A in the given rotation mode, with a parent P), a static Ground; then
    ``case`` (object, field, index, value) set through the field, as a user typing it would (Blender
    keeps an infinity typed into a field as the largest float)."""
    name, field, index, value = case
    fresh_scene(1, 6)
    bpy.ops.object.empty_add(location=(0.0, 0.0, 0.0))
    bpy.context.object.name = "P"
    mode = "QUATERNION" if field == "rotation_quaternion" else "XYZ"
    a = add_cube("A", (0.0, 0.0, 1.0), rotation_mode=mode)
    a.parent = bpy.data.objects["P"]
    add_cube("B", (1.5, 0.0, 1.5))
    bpy.ops.mesh.primitive_plane_add(size=6.0)
    bpy.context.object.name = "Ground"
    bpy.context.object.prb.role = "STATIC"
    bpy.ops.object.select_all(action="DESELECT")
    target = bpy.data.objects[name]
    values = list(getattr(target, field))
    values[index] = value
    setattr(target, field, values)
    bpy.context.view_layer.update()


NON_FINITE = {  # (object, field, index, value): the message's words after 'Object '
    "body location nan": (("A", "location", 2, NAN), '"A" has a non-finite location (nan)'),
    "body rotation nan": (("A", "rotation_euler", 0, NAN), '"A" has a non-finite rotation (nan)'),
    "body rotation inf": (("A", "rotation_euler", 1, INF), '"A" has a non-finite rotation (inf)'),
    "body quaternion nan": (("A", "rotation_quaternion", 0, NAN), '"A" has a non-finite rotation (nan)'),
    "body scale nan": (("A", "scale", 1, NAN), '"A" has a non-finite scale (nan)'),
    "body scale inf": (("A", "scale", 2, INF), '"A" has a non-finite scale (inf)'),
    "body delta location -inf": (("B", "delta_location", 0, -INF), '"B" has a non-finite delta location (-inf)'),
    "body's parent scale nan": (("P", "scale", 0, NAN), '"P" (parent of "A") has a non-finite scale (nan)'),
    "collider location nan": (("Ground", "location", 0, NAN), '"Ground" has a non-finite location (nan)'),
    "collider rotation nan": (("Ground", "rotation_euler", 2, NAN), '"Ground" has a non-finite rotation (nan)'),
    "collider scale inf": (("Ground", "scale", 0, INF), '"Ground" has a non-finite scale (inf)'),
}


def refusal(labels, heading):
    """The line the panel wrapped under ``heading``, joined again (None when not drawn)."""
    if heading not in labels:
        return None
    lines = labels[labels.index(heading) + 1:]
    end = next((i for i, line in enumerate(lines) if line.startswith(("Device:", "No OpenCL"))), len(lines))
    return " ".join(lines[:end])


@pytest.mark.parametrize("case", sorted(NON_FINITE))
def test_the_panel_shows_and_the_operator_refuses_a_non_finite_transform(registered, case):
    values, words = NON_FINITE[case]
    scene_with(values)
    message = f"Object {words}: fix its transform before baking."
    before = snapshot()
    panels._summary["stale"] = True
    labels = draw_labels(panels.PRB_PT_main)  # raised "cannot convert float NaN to integer" for a body's NaN
    assert refusal(labels, "Objects refused:") == message, labels
    with pytest.raises(RuntimeError, match="^Error: Simulate & Bake failed: " + re.escape(message)):
        bpy.ops.prb.simulate_bake()
    assert snapshot() == before


def test_the_panel_and_the_operator_refuse_a_step_that_keys_no_frame_after_the_first(registered):
    fresh_scene(1, 6)
    add_cube("A", (0.0, 0.0, 1.0))
    s = bpy.context.scene.prb_settings
    s.use_scene_frame_range = False
    s.frame_start, s.frame_end, s.frame_step = 1, 3, 5
    message = ("frame step 5 is longer than the frame range 1-3: only frame 1 would be keyed and nothing "
               "simulated; use a step of at most 2, or a later end frame")
    before = snapshot()
    panels._summary["stale"] = True
    assert refusal(draw_labels(panels.PRB_PT_main), "Settings refused:") == message
    with pytest.raises(RuntimeError, match="Simulate & Bake failed: " + re.escape(message)):
        bpy.ops.prb.simulate_bake()
    assert snapshot() == before
    s.frame_step = 2  # keys frames 1 and 3
    panels._summary["stale"] = True
    assert refusal(draw_labels(panels.PRB_PT_main), "Settings refused:") is None
    assert bpy.ops.prb.simulate_bake() == {"FINISHED"}


def poison(job, name):
    """NaN into the momentum of ``name``'s body on the device: its pose turns NaN in the engine's
    own integration, and the frame's read-back is the add-on's own check."""
    engine = job.sim.engine
    body = [link.name for link in job.links].index(name)
    rows = engine._read(engine.arguments["body_momentum"], (engine.body_count, 4))
    rows[body, 0] = np.nan
    engine.cl.enqueue_copy(engine.queue, engine.arguments["body_momentum"], rows)


# B's NaN may reach A within the frame (it does on PoCL today: the message then names the first body
# in body order, and how many more), or stay B's
BLOWN_UP = re.compile(re.escape("Simulate & Bake failed: The simulation became non-finite at frame 4 (body ")
                      + '("B"|"A" and 1 more)' + re.escape("): nothing was baked. More substeps per frame (Substeps: "
                                                           "Manual) may keep it finite; check that body's mass and "
                                                           "initial velocity too"))


@pytest.mark.parametrize("mode", ["KEYFRAMES", "INSTANCES"])
def test_a_state_turning_non_finite_stops_the_modal_bake_and_leaves_the_scene(registered, monkeypatch, tmp_path,
                                                                               mode):
    from addon.blender import operators

    monkeypatch.setattr(operators, "STEP_BUDGET", 0.0)  # one frame per timer event
    fresh_scene(1, 6)
    add_cube("A", (0.0, 0.0, 1.0))
    add_cube("B", (1.5, 0.0, 1.5))
    bpy.ops.object.select_all(action="DESELECT")
    bpy.context.scene.prb_settings.bake_mode = mode
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "scene.blend"))
    before, files = snapshot(), sorted(os.listdir(tmp_path))
    op, context = _operator(monkeypatch), _WindowContext()
    assert op.invoke(context, _Event("LEFTMOUSE", "PRESS")) == {"RUNNING_MODAL"}
    for _ in range(2):
        assert op.modal(context, _Event("TIMER")) == {"RUNNING_MODAL"}
    poison(op._job, "B")
    assert op.modal(context, _Event("TIMER")) == {"CANCELLED"}
    kind, message = op.reports[-1]
    assert kind == {"ERROR"} and BLOWN_UP.fullmatch(message), message
    assert op._job is None and context.window_manager.timers == []
    assert snapshot() == before  # no keys, no cache object, nothing hidden, the bodies back in place
    assert sorted(os.listdir(tmp_path)) == files  # no point cache, no cache folder


def test_a_state_turning_non_finite_stops_the_blocking_bake(registered, monkeypatch):
    fresh_scene(1, 6)
    add_cube("A", (0.0, 0.0, 1.0))
    add_cube("B", (1.5, 0.0, 1.5))
    bpy.ops.object.select_all(action="DESELECT")
    real_keep = job_module.BakeJob._keep

    def keep_then_poison(job, frame):
        real_keep(job, frame)
        if frame.index == 2:
            poison(job, "B")

    monkeypatch.setattr(job_module.BakeJob, "_keep", keep_then_poison)
    before = snapshot()
    with pytest.raises(RuntimeError) as raised:
        bpy.ops.prb.simulate_bake()
    assert BLOWN_UP.search(str(raised.value)), raised.value
    assert snapshot() == before


def test_an_animated_collider_turning_non_finite_is_refused_before_simulating(registered):
    fresh_scene(1, 6)
    add_cube("A", (0.0, 0.0, 1.0))
    bpy.ops.mesh.primitive_plane_add(size=6.0)
    ground = bpy.context.object
    ground.name = "Ground"
    ground.prb.role = "STATIC"
    ground.keyframe_insert("location", index=2, frame=1)
    ground.location.z = NAN
    ground.keyframe_insert("location", index=2, frame=4)
    bpy.ops.object.select_all(action="DESELECT")
    bpy.context.scene.frame_set(1)
    before = snapshot()
    with pytest.raises(BakeError, match=re.escape('Object "Ground" has a non-finite location (nan) at frame 2: fix '
                                                  'its transform before baking.')):
        run_job()
    assert snapshot() == before


def test_an_instance_with_a_non_finite_transform_is_refused_before_simulating(registered, tmp_path):
    """A scatter's instance scale NaN (Instance on Points): the sidebar draws, and the bake stops at
    the conversion, naming the instancer, the instance and its source."""
    from addon.core import simulation
    from test_instancers import scatter_scene

    scatter_scene(tmp_path / "scatter.blend", scale=NAN)
    bpy.context.scene.prb_settings.bake_mode = "INSTANCES"
    panels._summary["stale"] = True
    labels = draw_labels(panels.PRB_PT_main)  # raised "cannot convert float NaN to integer"
    assert any(" bodies, 1 colliders, ~" in line for line in labels), labels
    before, files = snapshot(), sorted(os.listdir(tmp_path))
    simulated = []
    real = simulation.Simulation.__init__
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(simulation.Simulation, "__init__", lambda *a, **k: simulated.append(1) or real(*a, **k))
        with pytest.raises(BakeError, match=r'^Object "Scatter" has a non-finite transform on its instance 0 '
                                            r'\(of "Rock[AB]"\) \(nan\): fix the transforms of its instances before '
                                            r'baking\.$'):
            run_job(bake_mode="INSTANCES")
    assert simulated == []
    assert snapshot() == before and sorted(os.listdir(tmp_path)) == files
