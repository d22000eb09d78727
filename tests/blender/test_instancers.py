"""Bodies from instancers (addon/blender/instancers.py) with the bpy module: a geometry-nodes scatter and
a particle system become one body per instance, each distinct mesh voxelized once; the instance bake
equals a keyframe bake of the same instances made real (Blender's Make Instances Real), frame by frame,
played in a process without the add-on; Keyframes mode refuses an instancer before simulating;
Clear Bake leaves the file as it was."""
from __future__ import annotations

import math

import numpy as np
import pytest
from mathutils import Matrix

from prb_helpers import StrictLayout, bpy, data_counts, draw_labels, fresh_scene, scene_snapshot

from addon.blender import bake, bake_instances, body_geometry, convert, instancers  # noqa: E402
from addon.blender import instance_cache_object, voxelize_bodies  # noqa: E402
from addon.blender.bake_objects import estimate  # noqa: E402
from addon.blender.bake_options import BakeError  # noqa: E402
from sample_scenes.generate import _socket, points_on_faces_group  # noqa: E402
from test_bake_instances import keyframe_matrices, play_without_addon, run_job  # noqa: E402

FRAMES = (1, 10)


def _ground():
    bpy.ops.mesh.primitive_plane_add(size=40.0, location=(0.0, 0.0, 0.0))
    ground = bpy.context.object
    ground.name = "Ground"
    ground.prb.role = "STATIC"


def _rocks_collection():
    """Two rock objects in a collection excluded from the view layer (as a user keeps scatter sources)."""
    rocks = bpy.data.collections.new("Rocks")
    bpy.context.scene.collection.children.link(rocks)
    made = []
    for name, add in (("RockA", bpy.ops.mesh.primitive_ico_sphere_add), ("RockB", bpy.ops.mesh.primitive_cube_add)):
        add(location=(0.0, 0.0, -5.0))
        obj = bpy.context.object
        obj.name = name
        obj.scale = (0.3, 0.25, 0.2) if name == "RockA" else (0.25, 0.2, 0.15)
        bpy.ops.object.transform_apply(location=False, rotation=False, scale=True)
        for coll in obj.users_collection:
            coll.objects.unlink(obj)
        rocks.objects.link(obj)
        obj.prb.role = "IGNORED"
        material = bpy.data.materials.new(f"{name}Stone")
        obj.data.materials.append(material)
        made.append(obj)
    bpy.context.view_layer.layer_collection.children["Rocks"].exclude = True
    return rocks


def scatter_scene(path, scale=0.8):
    """A geometry-nodes scatter on a plane 2 m up: Distribute Points on Faces (Poisson disk, 1.3 m) +
    Instance on Points of a random rock of the collection "Rocks" (object instances) with a random
    rotation and ``scale``, joined with cubes made by a Cube node (geometry instances) 1.5 m higher."""
    fresh_scene(*FRAMES)
    rocks = _rocks_collection()
    bpy.ops.mesh.primitive_plane_add(size=6.0, location=(0.0, 0.0, 2.0))
    scatter = bpy.context.object
    scatter.name = "Scatter"
    group, points, group_out = points_on_faces_group("Scatter", distance=1.3, density=3.0)
    nodes, links = group.nodes, group.links
    info = nodes.new("GeometryNodeCollectionInfo")
    info.inputs["Collection"].default_value = rocks
    info.inputs["Separate Children"].default_value = True
    info.inputs["Reset Children"].default_value = True
    which = nodes.new("FunctionNodeRandomValue")
    which.data_type = "INT"
    _socket(which.inputs, "Max_002").default_value = 1
    turn = nodes.new("FunctionNodeRandomValue")
    turn.data_type = "FLOAT_VECTOR"
    _socket(turn.inputs, "Max").default_value = (2 * math.pi,) * 3
    rocks_on_points = nodes.new("GeometryNodeInstanceOnPoints")
    links.new(points.outputs["Points"], rocks_on_points.inputs["Points"])
    links.new(info.outputs[0], rocks_on_points.inputs["Instance"])
    rocks_on_points.inputs["Pick Instance"].default_value = True
    links.new(_socket(which.outputs, "Value_002"), rocks_on_points.inputs["Instance Index"])
    links.new(_socket(turn.outputs, "Value"), rocks_on_points.inputs["Rotation"])
    rocks_on_points.inputs["Scale"].default_value = (scale,) * 3
    cube = nodes.new("GeometryNodeMeshCube")
    cube.inputs["Size"].default_value = (0.4, 0.4, 0.4)
    cubes_on_points = nodes.new("GeometryNodeInstanceOnPoints")
    links.new(points.outputs["Points"], cubes_on_points.inputs["Points"])
    links.new(cube.outputs[0], cubes_on_points.inputs["Instance"])
    links.new(_socket(turn.outputs, "Value"), cubes_on_points.inputs["Rotation"])
    lift = nodes.new("GeometryNodeTranslateInstances")
    lift.inputs["Translation"].default_value = (0.0, 0.0, 1.5)
    links.new(cubes_on_points.outputs[0], lift.inputs["Instances"])
    join = nodes.new("GeometryNodeJoinGeometry")
    links.new(lift.outputs[0], join.inputs[0])
    links.new(rocks_on_points.outputs[0], join.inputs[0])
    links.new(join.outputs[0], group_out.inputs[0])
    scatter.modifiers.new("Scatter", "NODES").node_group = group
    scatter.prb.role = "DYNAMIC"
    scatter.prb.initial_angular_velocity = (0.0, 0.0, 2.0)
    _ground()
    scene = bpy.context.scene
    scene.prb_settings.radius_mode, scene.prb_settings.particle_radius = "MANUAL", 0.04
    bpy.ops.object.select_all(action="DESELECT")
    bpy.context.view_layer.update()
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    return scatter


def instance_matrices(name: str) -> np.ndarray:
    deps = bpy.context.evaluated_depsgraph_get()
    return np.array([np.array(inst.matrix_world) for inst in deps.object_instances
                     if inst.is_instance and inst.parent.original.name == name])


@pytest.fixture
def blend(tmp_path):
    return tmp_path / "scatter.blend"


def test_a_scatter_bakes_like_its_instances_made_real(registered, blend):
    scatter = scatter_scene(blend)
    start = instance_matrices("Scatter")
    count = len(start)
    assert count >= 12 and count % 2 == 0  # a rock and a cube on every point
    assert estimate(bpy.context, [scatter])["bodies"] == count

    job, result = run_job(bake_mode="INSTANCES")
    assert result.bodies == count and len(job.links) == count
    assert {link.object_name for link in job.links} == {"Scatter"}
    np.testing.assert_allclose(sorted(np.array([link.matrix_world for link in job.links])[:, :3, 3].tolist()),
                               sorted(start[:, :3, 3].tolist()), atol=1e-6)
    assert scatter.hide_viewport and scatter.hide_render
    cache = bpy.data.objects[result.cache_object]
    # one proxy per distinct mesh: RockA, RockB and the Cube node's mesh, with their materials
    proxies = cache[instance_cache_object.MESHES].objects
    assert len(proxies) == 3
    assert sorted(m.name for p in proxies for m in p.data.materials if m) == ["RockAStone", "RockBStone"]
    assert not [o for o in bpy.data.objects if o.name.startswith("Scatter ")]  # no temporary object left
    bpy.ops.wm.save_mainfile()
    played = play_without_addon(blend)
    assert bpy.ops.prb.clear_bake() == {"FINISHED"}

    # the same instances as objects, baked to keyframes: one object per instance with its world matrix and
    # mesh (Blender's Make Instances Real does this for object instances only: a geometry instance made
    # real is a copy of the scatter object itself)
    deps = bpy.context.evaluated_depsgraph_get()
    (found,) = instancers.gather(deps, [scatter])
    made = instancers.mesh_copies(deps, "Scatter", [m.ordinal for m in found.meshes if not m.source_object])
    meshes = [bpy.data.objects[m.source_object].data if m.source_object else made[m.ordinal] for m in found.meshes]
    for k in range(found.count):
        obj = bpy.data.objects.new(f"Real{k:03d}", meshes[found.mesh_index[k]])
        bpy.context.scene.collection.objects.link(obj)
        obj.matrix_world = Matrix(found.matrices[k].tolist())
        obj.prb.role = "DYNAMIC"
        obj.prb.initial_angular_velocity = (0.0, 0.0, 2.0)
    scatter.prb.role = "IGNORED"
    scatter.hide_viewport = True
    bpy.context.view_layer.update()
    keyed_job, _ = run_job()
    keys = keyframe_matrices(keyed_job)
    # bodies of both bakes matched by where they start
    first = np.array([m for _n, m in played[f"{float(FRAMES[0])}"]])
    order = [int(np.argmin(np.linalg.norm(keys[FRAMES[0]][:, :3, 3] - m[:3, 3], axis=1))) for m in first]
    assert sorted(order) == list(range(count))
    for frame in range(FRAMES[0], FRAMES[1] + 1):
        got = np.array([m for _n, m in played[f"{float(frame)}"]])
        np.testing.assert_allclose(got, keys[frame][order], atol=2e-5, err_msg=f"frame {frame}")
    moved = np.linalg.norm(got[:, :3, 3] - first[:, :3, 3], axis=1)
    assert moved.min() > 0.3  # they fell


def test_each_distinct_mesh_is_voxelized_once(registered, blend, monkeypatch):
    scatter_scene(blend)
    calls = []
    real = voxelize_bodies.vox.voxelize

    def counted(vertices, *args, **kw):
        calls.append(len(vertices))
        return real(vertices, *args, **kw)

    monkeypatch.setattr(voxelize_bodies.vox, "voxelize", counted)
    job, result = run_job(bake_mode="INSTANCES")
    assert result.bodies >= 12 and len(calls) == 3  # RockA, RockB, the Cube node's cube


def test_particle_system_instances_are_bodies_with_their_scale(registered, blend):
    fresh_scene(*FRAMES)
    bpy.ops.mesh.primitive_cube_add(size=1.0, location=(0.0, 0.0, -5.0))
    pebble = bpy.context.object
    pebble.name = "Pebble"
    pebble.prb.role = "IGNORED"
    bpy.ops.mesh.primitive_plane_add(size=4.0, location=(0.0, 0.0, 1.5))
    emitter = bpy.context.object
    emitter.name = "Emitter"
    emitter.modifiers.new("Particles", "PARTICLE_SYSTEM")
    settings = emitter.particle_systems[0].settings
    settings.count, settings.frame_start, settings.frame_end = 6, 1, 1
    settings.physics_type = "NO"
    settings.render_type = "OBJECT"
    settings.instance_object = pebble
    settings.particle_size = 0.4
    settings.use_rotation_instance = True
    emitter.prb.role = "DYNAMIC"
    _ground()
    bpy.ops.object.select_all(action="DESELECT")
    bpy.context.scene.frame_set(FRAMES[0])
    bpy.ops.wm.save_as_mainfile(filepath=str(blend))
    start = instance_matrices("Emitter")
    assert len(start) == 6
    np.testing.assert_allclose(np.linalg.norm(start[:, :3, :3], axis=1), 0.4, atol=1e-5)  # the particles' size

    job, result = run_job(bake_mode="INSTANCES")
    assert result.bodies == 6
    assert all(link.particle_count >= 27 for link in job.links)  # 0.4 m cubes, 0.08 m particles: the scaled size
    bpy.ops.wm.save_mainfile()
    played = play_without_addon(blend)
    first = np.array([m for _n, m in played[f"{float(FRAMES[0])}"]])
    assert {name for name, _m in played[f"{float(FRAMES[0])}"]} == {pebble.data.name}
    np.testing.assert_allclose(sorted(first[:, :3, 3].tolist()), sorted(start[:, :3, 3].tolist()), atol=2e-5)
    np.testing.assert_allclose(np.linalg.norm(first[:, :3, :3], axis=1), 0.4, atol=2e-5)
    last = np.array([m for _n, m in played[f"{float(FRAMES[1])}"]])
    assert (last[:, 2, 3] < first[:, 2, 3] - 0.3).all()


def test_keyframes_refuse_an_instancer_before_simulating(registered, blend, monkeypatch):
    scatter_scene(blend)
    count = len(instance_matrices("Scatter"))

    def no_simulation(*_args, **_kw):
        raise AssertionError("converted before the instancer was refused")

    monkeypatch.setattr(convert, "convert_scene", no_simulation)
    before = scene_snapshot()
    with pytest.raises(BakeError, match=rf"instancers bake to Instances only: Scatter \({count:,} instances\)\. "
                                        r"Keyframes need an object per body: set Bake To: Instances$"):
        run_job(bake_mode="KEYFRAMES")
    assert scene_snapshot() == before


def test_clear_bake_of_a_scatter_leaves_the_file_as_it_was(registered, blend):
    scatter = scatter_scene(blend)
    bpy.context.scene.prb_settings.bake_mode = "INSTANCES"
    before, counts = scene_snapshot(), data_counts()
    meshes = sorted(m.name for m in bpy.data.meshes)
    assert bpy.ops.prb.simulate_bake() == {"FINISHED"}
    assert scatter.hide_viewport and not instance_matrices("Scatter").size
    assert bpy.ops.prb.simulate_bake() == {"FINISHED"}  # a re-bake reads the hidden scatter again
    assert len(bake_instances.cache_objects(bpy.context.scene)) == 1
    assert bpy.ops.prb.clear_bake() == {"FINISHED"}
    assert scene_snapshot() == before and data_counts() == counts
    assert sorted(m.name for m in bpy.data.meshes) == meshes
    assert not scatter.hide_viewport and len(instance_matrices("Scatter")) >= 12
    assert not any(bake.has_bake(o) for o in bpy.data.objects)


def test_gather_reads_each_mesh_once_and_every_matrix(registered, blend):
    scatter = scatter_scene(blend)
    deps = bpy.context.evaluated_depsgraph_get()
    (bodies,) = instancers.gather(deps, [scatter])
    assert bodies.instancer == "Scatter" and bodies.count == len(instance_matrices("Scatter"))
    assert sorted(m.source_object for m in bodies.meshes) == ["", "RockA", "RockB"]
    assert sorted(np.bincount(bodies.mesh_index).tolist())[-1] == bodies.count // 2  # a cube on every point
    np.testing.assert_allclose(bodies.matrices, instance_matrices("Scatter"), atol=0)
    assert instancers.count_instances(deps, [scatter]) == {"Scatter": bodies.count}


def test_instances_of_random_size_share_voxelizations_by_size_and_keep_their_own_size(registered, monkeypatch):
    """About 200 cubes of sizes 0.9-1.1 (Random Value into Instance on Points' Scale): voxelized once per 1 % of
    size (body_geometry.INSTANCE_SIZE_STEP), not once per instance; each body still has its own size (its
    particles span its own cube) and its own mass (density x its own volume)."""
    fresh_scene(1, 2)
    bpy.ops.mesh.primitive_plane_add(size=12.0, location=(0.0, 0.0, 2.0))
    scatter = bpy.context.object
    scatter.name = "Scatter"
    group, points, group_out = points_on_faces_group("Sizes", distance=0.55, density=4.0)
    nodes, links = group.nodes, group.links
    cube = nodes.new("GeometryNodeMeshCube")
    cube.inputs["Size"].default_value = (0.4, 0.4, 0.4)
    size = nodes.new("FunctionNodeRandomValue")
    size.data_type = "FLOAT"
    _socket(size.inputs, "Min_001").default_value = 0.9
    _socket(size.inputs, "Max_001").default_value = 1.1
    on_points = nodes.new("GeometryNodeInstanceOnPoints")
    links.new(points.outputs["Points"], on_points.inputs["Points"])
    links.new(cube.outputs[0], on_points.inputs["Instance"])
    links.new(_socket(size.outputs, "Value_001"), on_points.inputs["Scale"])
    links.new(on_points.outputs[0], group_out.inputs[0])
    scatter.modifiers.new("Sizes", "NODES").node_group = group
    scatter.prb.role = "DYNAMIC"
    scatter.prb.density = 1000.0
    start = instance_matrices("Scatter")
    sizes = np.linalg.norm(start[:, :3, :3], axis=1)[:, 0]
    assert len(start) >= 150 and sizes.min() < 0.92 and sizes.max() > 1.08
    calls = []
    real = voxelize_bodies.vox.voxelize

    def counted(vertices, *args, **kw):
        calls.append(len(vertices))
        return real(vertices, *args, **kw)

    monkeypatch.setattr(voxelize_bodies.vox, "voxelize", counted)
    converted = convert.convert_scene(bpy.context, [scatter], [], radius=0.04, frame_start=1, frame_end=1)
    model = converted.model
    assert model.body_count == len(start)
    bins = int(np.ceil(np.log(sizes.max() / sizes.min()) / body_geometry.INSTANCE_SIZE_STEP)) + 1
    assert len(calls) <= bins <= 22, (len(calls), bins)
    spans = []
    for link in converted.bodies:
        s = sizes[np.argmin(np.linalg.norm(start[:, :3, 3] - link.matrix_world[:3, 3], axis=1))]
        b = link.body_index
        np.testing.assert_allclose(model.body_mass[b], 1000.0 * (0.4 * s) ** 3, rtol=1e-5)  # its own volume
        world = model.particle_offset[model.particle_body == b] + model.body_position[b]
        extent = np.ptp(world @ link.matrix_world[:3, :3] / s, axis=0)  # in the cube's own axes
        np.testing.assert_allclose(extent, extent[0], rtol=1e-6)  # a cube
        assert abs(extent[0] - (0.4 * s - 0.08)) < 0.1  # about its size: the edge less a particle diameter
        spans.append(round(float(extent[0] / s), 6))
    # the particles of a shared voxelization are stretched to each body's own size: their span over
    # the size is the same for every body sharing one (not the same span for different sizes)
    assert len(set(spans)) <= len(calls)


def _sidebar_labels() -> list:
    return draw_labels(bpy.types.Panel.bl_rna_get_subclass_py("PRB_PT_main"))


def test_the_sidebar_counts_instances_and_says_a_scatter_needs_instances(registered, blend):
    scatter_scene(blend)
    count = len(instance_matrices("Scatter"))
    settings = bpy.context.scene.prb_settings
    settings.bake_mode = "KEYFRAMES"
    labels = _sidebar_labels()
    assert any(text.startswith(f"{count} bodies, 1 colliders") for text in labels), labels
    assert f"Scatter: {count:,} instances bake to Instances only" in labels
    settings.bake_mode = "INSTANCES"
    assert not any("bake to Instances only" in text for text in _sidebar_labels())


def test_bake_to_suggests_instances_above_ten_thousand_bodies(registered):
    fresh_scene(1, 2)
    scene = bpy.context.scene

    def labels(bodies, mode, scatters=None):
        scene.prb_settings.bake_mode = mode
        layout = StrictLayout()
        bake_instances.draw_bake_to(layout, scene, bodies, scatters)
        return layout.drawn.labels

    assert labels(10_001, "KEYFRAMES") == ["10,001 bodies: Bake To Instances is lighter"]
    assert labels(10_000, "KEYFRAMES") == []
    assert labels(50_000, "INSTANCES") == []
    assert labels(50_000, "KEYFRAMES", {"Scatter": 50_000}) == ["Scatter: 50,000 instances bake to Instances only"]


def test_the_modal_bake_of_a_scatter_leaves_the_scatter_object_in_place(registered, blend, monkeypatch):
    """The live view moves the bodies' own objects while the modal operator runs; a scatter's bodies are
    its instances, so the scatter object itself must stay where it is (and the bake still completes)."""
    from addon.blender import operators
    from test_bake_paths import _Event, _WindowContext, _operator

    monkeypatch.setattr(operators, "STEP_BUDGET", 0.0)  # one frame per timer event
    scatter = scatter_scene(blend)
    bpy.context.scene.prb_settings.bake_mode = "INSTANCES"
    start = np.array(scatter.matrix_world)
    op, context = _operator(monkeypatch), _WindowContext()
    assert op.invoke(context, _Event("LEFTMOUSE", "PRESS")) == {"RUNNING_MODAL"}
    results = []
    while not results or results[-1] == {"RUNNING_MODAL"}:
        results.append(op.modal(context, _Event("TIMER")))
        np.testing.assert_array_equal(np.array(scatter.matrix_world), start)
        assert len(results) < 50
    assert results[-1] == {"FINISHED"}, op.reports
    assert len(bake_instances.cache_objects(bpy.context.scene)) == 1 and scatter.hide_viewport
