"""Numbers that cannot poison a bake, in the panel and the operator: a frame range whose step keys
no frame after the first is refused before anything runs, with one line the sidebar shows. (The
CLI's side: test_cli.py.)"""
from __future__ import annotations

import re

import pytest

from prb_helpers import add_cube, bpy, draw_labels, fresh_scene, scene_snapshot

from addon.blender import panels  # noqa: E402


def snapshot() -> str:
    """The scene snapshot as text: NaN equals NaN there (in tuples it need not)."""
    return repr(scene_snapshot())


def refusal(labels, heading):
    """The line the panel wrapped under ``heading``, joined again (None when not drawn)."""
    if heading not in labels:
        return None
    lines = labels[labels.index(heading) + 1:]
    end = next((i for i, line in enumerate(lines) if line.startswith(("Device:", "No OpenCL"))), len(lines))
    return " ".join(lines[:end])


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
