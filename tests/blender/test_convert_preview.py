"""Particle preview (addon.blender.preview) in background mode: same particles as the conversion, no GPU use."""
from __future__ import annotations

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import bpy  # noqa: E402

from addon.blender import convert, preview  # noqa: E402
from addon.core.rotations import quaternion_to_matrix  # noqa: E402


@pytest.fixture
def registered():
    bpy.ops.wm.read_factory_settings(use_empty=True)
    for cls in preview.classes:
        bpy.utils.register_class(cls)
    preview.register()
    yield
    preview.unregister()
    for cls in reversed(preview.classes):
        bpy.utils.unregister_class(cls)


def world_particles(model, b):
    first, count = model.body_first_particle[b], model.body_particle_count[b]
    rot = quaternion_to_matrix(model.body_orientation[b])
    return model.body_position[b] + model.particle_offset[first:first + count] @ rot.T


def sorted_rows(a):
    a = np.round(a, 6)
    return a[np.lexsort(a.T[::-1])]


def test_toggle_preview_in_background_matches_conversion(registered):
    assert bpy.app.background
    bpy.ops.mesh.primitive_cube_add(size=0.6, location=(1, 2, 3), rotation=(0.2, 0.5, -0.4))
    cube = bpy.context.view_layer.objects.active
    cube.scale = (1.0, 2.0, -1.0)
    bpy.ops.mesh.primitive_monkey_add(location=(-3, 0, 1))
    bpy.ops.object.empty_add()  # selected but not geometry: ignored by the preview
    for obj in bpy.context.scene.objects:
        obj.select_set(True)
    bpy.context.view_layer.update()
    assert bpy.ops.prb.toggle_preview() == {"FINISHED"}
    assert preview.is_enabled() and preview._state["handle"] is None  # no draw handler without a GPU
    preview._draw()  # the callback is a no-op in background mode
    points = preview.preview_points(bpy.context)
    objects = [o for o in bpy.context.scene.objects if o.type == "MESH"]
    conv = convert.convert_scene(bpy.context, objects, [], frame_start=1, frame_end=1)
    expected = np.concatenate([world_particles(conv.model, link.body_index) for link in conv.bodies])
    assert len(points) == conv.particle_count > 0
    assert np.allclose(sorted_rows(points), sorted_rows(expected), atol=1e-5)
    # moving an object moves its cached points without recomputing them
    cached = dict(preview._cache)
    cube.location.x += 5.0
    bpy.context.view_layer.update()
    moved = preview.preview_points(bpy.context)
    assert preview._cache[cube.name][1] is cached[cube.name][1]
    assert np.isclose(moved[:, 0].max(), points[:, 0].max() + 5.0)
    assert bpy.ops.prb.toggle_preview() == {"FINISHED"}
    assert not preview.is_enabled() and not preview._cache
