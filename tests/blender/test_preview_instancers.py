"""The particle preview of an instancer shows its instances' particles, as the conversion makes them."""
from __future__ import annotations

import numpy as np

from prb_helpers import bpy

from addon.blender import convert, preview  # noqa: E402
from test_convert_preview import sorted_rows, world_particles  # noqa: E402
from test_instancers import scatter_scene  # noqa: E402


def test_preview_of_a_scatter_is_its_instances_particles(registered, tmp_path):
    scatter = scatter_scene(tmp_path / "scatter.blend")
    scatter.select_set(True)
    bpy.context.view_layer.objects.active = scatter
    assert preview.preview_objects(bpy.context) == [scatter]
    points = preview.preview_points(bpy.context)
    conv = convert.convert_scene(bpy.context, [scatter], [], radius=bpy.context.scene.prb_settings.particle_radius,
                                 frame_start=1, frame_end=1)
    assert len(conv.bodies) >= 12
    expected = np.concatenate([world_particles(conv.model, link.body_index) for link in conv.bodies])
    assert len(points) == conv.particle_count
    assert np.allclose(sorted_rows(points), sorted_rows(expected), atol=1e-5)
    preview._cache.clear()
