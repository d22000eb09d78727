"""The sidebar's draw() reads a cached scene summary: redraws do not walk the scene, a depsgraph
change or the Refresh button brings it up to date, and unregistering leaves no handler or timer."""
from __future__ import annotations

import bpy
import pytest

from prb_helpers import add_cube, draw_labels, fresh_scene

from addon.blender import panels


def draw_main():
    return draw_labels(panels.PRB_PT_main)


@pytest.fixture
def counted(registered, monkeypatch):
    fresh_scene(1, 10)
    calls = []
    real = panels.compute_summary
    monkeypatch.setattr(panels, "compute_summary", lambda context: calls.append(1) or real(context))
    panels._summary["stale"] = True
    return calls


def test_redraws_use_the_cached_summary(counted):
    add_cube("A", (0, 0, 1))
    add_cube("B", (1, 0, 1))
    bpy.context.view_layer.update()
    for _ in range(5):
        text = draw_main()
    assert len(counted) == 1
    assert any(line.startswith("2 bodies, 0 colliders") for line in text), text


def test_a_depsgraph_update_or_refresh_brings_the_summary_up_to_date(counted):
    add_cube("A", (0, 0, 1))
    bpy.context.view_layer.update()
    assert any(line.startswith("1 bodies") for line in draw_main())
    add_cube("B", (1, 0, 1))
    bpy.context.view_layer.update()  # depsgraph_update_post: marked stale (no timer in background)
    assert any(line.startswith("2 bodies") for line in draw_main())
    draw_main()
    assert len(counted) == 2
    bpy.data.objects["B"].prb.role = "STATIC"  # no depsgraph evaluation yet: the sidebar still says 2
    assert any(line.startswith("2 bodies, 0 colliders") for line in draw_main())
    assert bpy.ops.prb.refresh_summary() == {"FINISHED"}
    assert any(line.startswith("1 bodies, 1 colliders") for line in draw_main())


def test_opening_a_file_marks_the_summary_stale(counted):
    draw_main()
    assert not panels._summary["stale"]
    # only load_post under test: in a window the depsgraph handler would wait for its timer
    bpy.app.handlers.depsgraph_update_post.remove(panels._on_depsgraph_update)
    try:
        bpy.ops.wm.read_factory_settings(use_empty=True)  # load_post; a scene of the same name
    finally:
        bpy.app.handlers.depsgraph_update_post.append(panels._on_depsgraph_update)
    assert panels._summary["stale"]


def test_the_debounce_timer_marks_the_summary_stale_once():
    panels._summary["stale"] = False
    assert panels._summary_after_quiet() is None  # a one-shot timer
    assert panels._summary["stale"]


def test_unregister_removes_handler_and_pending_timer(registered):
    assert panels._on_depsgraph_update in bpy.app.handlers.depsgraph_update_post
    assert panels._on_load_post in bpy.app.handlers.load_post
    bpy.app.timers.register(panels._summary_after_quiet, first_interval=3600.0)
    assert bpy.app.timers.is_registered(panels._summary_after_quiet)
    registered.unregister()
    try:
        assert panels._on_depsgraph_update not in bpy.app.handlers.depsgraph_update_post
        assert panels._on_load_post not in bpy.app.handlers.load_post
        assert not bpy.app.timers.is_registered(panels._summary_after_quiet)
    finally:
        registered.register()
