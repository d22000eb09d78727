"""Bake to instances with the bpy module: poses equal to the keyframe bake's on every frame, in a
process without the add-on too; Clear Bake, one-step undo, re-bake, cancel and bad cache folders."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from prb_helpers import add_cube, bpy, fresh_scene, scene_snapshot

from addon.blender import bake, bake_instances, clear_bake, instance_cache_object  # noqa: E402
from addon.blender.bake_objects import pick_objects  # noqa: E402
from addon.blender.bake_options import BakeError, BakeOptions  # noqa: E402
from addon.blender.job import BakeJob  # noqa: E402
from addon.core import point_cache  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FRAMES = (1, 10)
BODY_COUNT = 11  # the dynamic objects of build_scene

# Run in a fresh interpreter that never imports the add-on: opens a baked file, plays it frame by frame
# (and at half frames, as motion blur samples them) and prints the instances' world matrices as JSON.
PLAYBACK = textwrap.dedent("""
    import json, sys
    import bpy
    path, first, last = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    bpy.ops.wm.open_mainfile(filepath=path, load_ui=False)
    assert not hasattr(bpy.types.Scene, "prb_settings"), "the add-on must not be registered here"
    scene = bpy.context.scene
    out = {}
    for frame in range(first, last + 1):
        for sub in (0.0, 0.5):
            scene.frame_set(frame, subframe=sub)
            deps = bpy.context.evaluated_depsgraph_get()
            out[f"{frame + sub}"] = [
                [inst.object.original.data.name, [list(row) for row in inst.matrix_world]]
                for inst in deps.object_instances if inst.is_instance and inst.parent.original.name.startswith("PRB")]
    print("RESULT" + json.dumps(out))
""")


def build_scene(path: Path):
    """Cubes in several rotation modes (one scaled, one parented to a scaled empty), mirrored ones (two
    linked duplicates of one mesh mirrored along z, one mirrored along all three axes, one along two, a
    mirrored child of the scaled empty, a child of a mirrored empty), a cone, a static ground; saved at
    ``path``. ``BODY_COUNT`` dynamic objects."""
    scene = fresh_scene(*FRAMES)
    add_cube("Euler", (0.0, 0.0, 1.0), rotation=(0.3, 0.2, 0.1)).prb.initial_angular_velocity = (0.0, 3.0, 1.0)
    q = add_cube("Quat", (1.5, 0.0, 1.2), rotation=(0.0, 0.5, 0.2), rotation_mode="QUATERNION")
    q.prb.initial_angular_velocity = (8.0, 0.0, 0.0)
    scaled = add_cube("Scaled", (3.0, 0.0, 1.1), rotation=(0.2, 0.0, 0.4), rotation_mode="AXIS_ANGLE")
    scaled.scale = (1.5, 0.7, 1.0)
    mirrored = add_cube("Mirrored", (0.0, 2.0, 1.3), rotation=(1.0, 0.1, 0.2), rotation_mode="ZYX")
    mirrored.scale = (1.0, 1.0, -1.0)
    twin = mirrored.copy()  # linked duplicate: shares the mesh, so one proxy for both
    twin.name = "Twin"
    twin.location = (1.5, 2.0, 1.0)
    scene.collection.objects.link(twin)
    bpy.ops.object.empty_add(location=(5.0, 1.0, 0.5), rotation=(0.0, 0.0, 0.7))
    parent = bpy.context.object
    parent.name = "Parent"
    parent.scale = (1.5, 1.5, 1.5)
    child = add_cube("Child", (6.0, 2.0, 2.0), rotation=(0.1, 0.2, 0.3))
    world = child.matrix_world.copy()
    child.parent = parent
    child.matrix_world = world
    inverted = add_cube("Inverted", (0.0, 4.0, 1.2), rotation=(0.4, -0.3, 0.9), rotation_mode="QUATERNION")
    inverted.scale = (-0.8, -1.2, -1.0)
    inverted.prb.initial_angular_velocity = (2.0, -4.0, 1.0)
    flipped = add_cube("Flipped", (1.5, 4.0, 1.1), rotation=(-0.2, 0.6, 0.1), rotation_mode="AXIS_ANGLE")
    flipped.scale = (-1.0, -1.3, 1.0)  # a rotation by half a turn, kept in the scale as the user set it
    mirrored_child = add_cube("MirroredChild", (5.0, 3.0, 1.5), rotation=(0.5, 0.1, -0.3))
    world = mirrored_child.matrix_world.copy()
    mirrored_child.parent = parent
    mirrored_child.matrix_world = world
    mirrored_child.scale = (0.7, -0.6, 0.7)  # in its parent's space: mirrored along its own y
    bpy.ops.object.empty_add(location=(3.0, 5.0, 0.5), rotation=(0.2, 0.0, -0.4))
    mirror_parent = bpy.context.object
    mirror_parent.name = "MirrorParent"
    mirror_parent.scale = (-1.2, 1.2, 1.2)
    bpy.context.view_layer.update()  # matrix_world follows the scale
    plain_child = add_cube("ChildOfMirror", (3.0, 4.0, 1.4), rotation=(0.3, 0.2, 0.1), rotation_mode="YXZ")
    world = plain_child.matrix_world.copy()
    plain_child.parent = mirror_parent
    plain_child.matrix_world = world  # not mirrored in the world: its scale undoes its parent's mirroring
    bpy.ops.mesh.primitive_cone_add(radius1=0.3, depth=0.6, location=(3.0, 2.0, 1.0))
    cone = bpy.context.object
    cone.name = "Cone"
    cone.prb.role = "DYNAMIC"
    material = bpy.data.materials.new("Red")
    cone.data.materials.append(material)
    bpy.ops.mesh.primitive_plane_add(size=20.0, location=(0.0, 0.0, 0.0))
    bpy.context.object.name = "Ground"
    bpy.context.object.prb.role = "STATIC"
    bpy.ops.object.select_all(action="DESELECT")
    bpy.context.view_layer.update()
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    return scene


def run_job(**kw):
    dynamic, static = pick_objects(bpy.context)
    job = BakeJob(bpy.context, dynamic, static, BakeOptions.from_scene(bpy.context.scene, **kw))
    return job, job.run()


def keyframe_matrices(job) -> dict:
    """{frame: (B, 4, 4)} world matrices of the keyed objects, in body order."""
    scene = bpy.context.scene
    out = {}
    for frame in job.key_frames():
        scene.frame_set(int(frame))
        out[int(frame)] = np.array([np.array(o.matrix_world) for o in job.objects])
    return out


def play_without_addon(path: Path) -> dict:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([sys.executable, "-c", PLAYBACK, str(path), str(FRAMES[0]), str(FRAMES[1])],
                          cwd=path.parent, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT"))
    return json.loads(line[len("RESULT"):])


@pytest.fixture
def blend(tmp_path):
    return tmp_path / "pile.blend"


def test_keys_instances_and_simulation_agree_on_every_frame_without_the_addon(registered, blend):
    """Every body on every frame, mirrored ones too: the keyframe bake's world matrices are the simulated
    poses, and the instance bake (played in a Blender without the add-on) shows the same matrices on
    whole frames and halfway between the keys at half frames."""
    scene = build_scene(blend)
    start = {o.name: np.array(o.matrix_world) for o in scene.objects}
    keyed_job, _ = run_job()
    keys = keyframe_matrices(keyed_job)
    simulated = keyed_job.world_matrices()  # (frames, bodies, 4, 4): the poses the engine gave
    bodies = [o.name for o in keyed_job.objects]
    data_names = [o.data.name for o in keyed_job.objects]
    # the mirrorings taking part: in the world along one axis (Mirrored, Twin, MirroredChild) or three
    # (Inverted); a negative scale on two axes (Flipped) or three (ChildOfMirror, under a mirrored parent)
    # that is no mirroring in the world
    mirrored = sorted(name for name in bodies if np.linalg.det(start[name][:3, :3]) < 0)
    assert mirrored == ["Inverted", "Mirrored", "MirroredChild", "Twin"]
    negative = {name: sum(s < 0 for s in bpy.data.objects[name].scale) for name in bodies}
    assert [negative[n] for n in ("Mirrored", "MirroredChild", "Inverted", "Flipped", "ChildOfMirror")] == [
        1, 1, 3, 2, 3]
    for f, frame in enumerate(keyed_job.key_frames()):
        for b, name in enumerate(bodies):
            np.testing.assert_allclose(keys[int(frame)][b], simulated[f, b], atol=2e-5,
                                       err_msg=f"{name}'s keys, frame {frame}")
    moved = np.linalg.norm(simulated[-1, :, :3, 3] - simulated[0, :, :3, 3], axis=1)
    assert (moved > 0.1).all(), dict(zip(bodies, moved))  # every body fell: the comparison means something
    clear_bake.clear_bakes(keyed_job.objects)

    job, result = run_job(bake_mode="INSTANCES")
    assert [o.name for o in job.objects] == bodies
    cache = bpy.data.objects[result.cache_object]
    assert result.keyed_objects == [] and not any(bake.has_bake(o) for o in job.objects)
    assert cache.users_collection[0].name == instance_cache_object.collection_name(scene)
    assert all(o.hide_viewport and o.hide_render for o in job.objects)
    meshes = cache[instance_cache_object.MESHES]
    assert len(meshes.objects) == len(set(data_names))  # linked duplicates share one proxy
    assert "Red" in [m.name for m in bpy.data.objects[
        next(p.name for p in meshes.objects if p.data.name == "Cone")].data.materials]
    assert cache.modifiers["PRB Point Cache"].filepath.startswith("//prb_cache/")
    cache_file = Path(bake_instances.cache_file(cache))
    assert cache_file.stat().st_size == point_cache.cache_size(len(bodies), FRAMES[1] - FRAMES[0] + 1)
    bpy.ops.wm.save_mainfile()

    played = play_without_addon(blend)
    np.testing.assert_allclose([m for _n, m in played[f"{float(FRAMES[0])}"]], [start[n] for n in bodies], atol=2e-5)
    for frame in range(FRAMES[0], FRAMES[1] + 1):
        got = played[f"{float(frame)}"]
        assert [name for name, _m in got] == data_names, f"frame {frame}: one instance per body, in body order"
        matrices = np.array([m for _n, m in got])
        np.testing.assert_allclose(matrices, keys[frame], atol=2e-5, err_msg=f"instances, frame {frame}")
        if frame < FRAMES[1]:  # motion blur samples between frames: the cache interpolates the points
            half = np.array([m for _n, m in played[f"{frame + 0.5}"]])
            keyed = [keys[f][:, :3, 3] for f in (frame, frame + 1)]
            np.testing.assert_allclose(half[:, :3, 3], (keyed[0] + keyed[1]) / 2, atol=2e-5)
            assert not np.allclose(half[:, :3, 3], keyed[0], atol=1e-4)


def test_clear_bake_restores_everything(registered, blend):
    build_scene(blend)
    bpy.context.scene.prb_settings.bake_mode = "INSTANCES"
    before = scene_snapshot()
    hidden = {o.name: (o.hide_viewport, o.hide_render) for o in bpy.data.objects}
    assert bpy.ops.prb.simulate_bake() == {"FINISHED"}
    cache = bake_instances.cache_objects(bpy.context.scene)[0]
    cache_file = Path(bake_instances.cache_file(cache))
    assert cache_file.is_file()
    group = cache.modifiers["PRB Instances"].node_group.name
    assert all(bpy.data.objects[n].hide_viewport for n in ("Euler", "Cone", "Child"))
    assert bpy.ops.prb.clear_bake() == {"FINISHED"}
    assert scene_snapshot() == before
    assert {o.name: (o.hide_viewport, o.hide_render) for o in bpy.data.objects} == hidden
    assert group not in bpy.data.node_groups
    assert not cache_file.exists() and not cache_file.parent.exists()


def test_rebake_replaces_only_its_own_cache_and_cancel_keeps_it(registered, blend):
    scene = build_scene(blend)
    other = bpy.data.scenes.new("Other")  # another simulation's cache, which must survive
    other_file = blend.parent / "prb_cache" / "other.pc2"
    other_file.parent.mkdir()
    other_file.write_bytes(b"not ours")
    stranger = bpy.data.objects.new("PRB Instances Other", bpy.data.meshes.new("x"))
    stranger[instance_cache_object.CACHE_SCENE] = other.name
    stranger.modifiers.new("cache", "MESH_CACHE").filepath = "//prb_cache/other.pc2"
    other.collection.objects.link(stranger)

    _job, first = run_job(bake_mode="INSTANCES")
    cache_file = Path(bake_instances.cache_file(bpy.data.objects[first.cache_object]))
    first_bytes = cache_file.read_bytes()
    scene.prb_settings.use_scene_frame_range = False
    scene.prb_settings.frame_start, scene.prb_settings.frame_end = FRAMES[0], FRAMES[1] + 2
    dynamic, static = pick_objects(bpy.context)
    assert len(dynamic) == BODY_COUNT  # the hidden bodies of the first bake are still the dynamic set
    before = scene_snapshot()
    hidden = {o.name: (o.hide_viewport, o.hide_render) for o in bpy.data.objects}
    job = BakeJob(bpy.context, dynamic, static, BakeOptions.from_scene(scene, bake_mode="INSTANCES"))
    job.start()
    job.step(0.0)
    job.cancel()
    assert scene_snapshot() == before and cache_file.read_bytes() == first_bytes
    assert {o.name: (o.hide_viewport, o.hide_render) for o in bpy.data.objects} == hidden
    assert sorted(os.listdir(cache_file.parent)) == sorted([cache_file.name, "other.pc2"])

    _job, second = run_job(bake_mode="INSTANCES")
    assert bake_instances.cache_objects(scene) == [bpy.data.objects[second.cache_object]]
    assert point_cache.read_header(str(cache_file))["samples"] == FRAMES[1] - FRAMES[0] + 3
    assert stranger.name in bpy.data.objects and other_file.read_bytes() == b"not ours"
    assert bpy.ops.prb.clear_bake() == {"FINISHED"}
    assert stranger.name in bpy.data.objects and other_file.exists() and not cache_file.exists()


def _visibility() -> dict:
    return {o.name: (o.hide_viewport, o.hide_render) for o in bpy.data.objects}


@pytest.mark.parametrize("operator", ["simulate_bake", "clear_bake"])
def test_one_undo_step_takes_an_instance_bake_or_its_clearing_back(registered, blend, operator):
    """As test_bake_paths' undo test: bpy.ops.<op>('EXEC_DEFAULT', True) pushes the undo step a user's
    Ctrl+Z takes back. The cache file stays on disk through undo (Blender's undo restores data-blocks,
    not files), so redo shows the bake again."""
    build_scene(blend)
    bpy.context.scene.prb_settings.bake_mode = "INSTANCES"
    if operator == "clear_bake":
        assert bpy.ops.prb.simulate_bake() == {"FINISHED"}
    bpy.ops.ed.undo_push(message="before")
    before, hidden = scene_snapshot(), _visibility()
    groups = sorted(g.name for g in bpy.data.node_groups)
    assert getattr(bpy.ops.prb, operator)("EXEC_DEFAULT", True) == {"FINISHED"}
    after, hidden_after = scene_snapshot(), _visibility()
    assert after != before and hidden_after != hidden
    bpy.ops.ed.undo()
    assert _visibility() == hidden
    assert _without_hidden_matrices(scene_snapshot()) == _without_hidden_matrices(before)
    assert sorted(g.name for g in bpy.data.node_groups) == groups
    bpy.ops.ed.redo()
    assert _visibility() == hidden_after
    assert _without_hidden_matrices(scene_snapshot()) == _without_hidden_matrices(after)
    caches = bake_instances.cache_objects(bpy.context.scene)
    assert len(caches) == (1 if operator == "simulate_bake" else 0)
    if caches:
        assert Path(bake_instances.cache_file(caches[0])).is_file()
        # the redone bake clears as any other: the bodies come back where they were
        assert bpy.ops.prb.clear_bake() == {"FINISHED"}
        assert scene_snapshot() == before and _visibility() == hidden
    else:
        assert scene_snapshot() == after  # nothing hidden: every matrix evaluated


def _without_hidden_matrices(snapshot: dict) -> dict:
    """A snapshot without the world matrices of hidden objects: Blender does not evaluate hidden objects,
    and after undo/redo their matrix_world reads as identity until they are shown again."""
    objects = {name: {k: v for k, v in obj.items() if k != "matrix_world" or not bpy.data.objects[name].hide_viewport}
               for name, obj in snapshot["objects"].items()}
    return dict(snapshot, objects=objects)


def test_simulate_bake_button_refuses_an_unwritable_cache_folder(registered, blend, monkeypatch):
    """The panel's button (the operator): refused with the reason, before converting, nothing changed."""
    build_scene(blend)
    (blend.parent / "afile").write_text("x")
    settings = bpy.context.scene.prb_settings
    settings.bake_mode, settings.cache_folder = "INSTANCES", "//afile/cache"
    from addon.blender import convert

    def no_simulation(*_args, **_kw):
        raise AssertionError("the scene was converted before the cache folder was checked")

    monkeypatch.setattr(convert, "convert_scene", no_simulation)
    before, hidden, files = scene_snapshot(), _visibility(), sorted(os.listdir(blend.parent))
    # bpy.ops raises the operator's error report
    with pytest.raises(RuntimeError, match="Simulate & Bake failed: cannot bake to instances: the cache folder .* "
                                           "cannot be created: .*afile is a file; choose another cache folder"):
        bpy.ops.prb.simulate_bake()
    assert scene_snapshot() == before and _visibility() == hidden and sorted(os.listdir(blend.parent)) == files


@pytest.mark.parametrize("problem", ["through_a_file", "unsaved"])
def test_unwritable_cache_folder_is_refused_before_simulating(registered, blend, monkeypatch, problem):
    build_scene(blend)
    scene = bpy.context.scene
    if problem == "through_a_file":
        (blend.parent / "afile").write_text("x")
        scene.prb_settings.cache_folder = "//afile/cache"
        expected = "cache folder"
    else:
        bpy.ops.wm.read_homefile(use_empty=True)
        scene = bpy.context.scene
        add_cube("A", (0.0, 0.0, 1.0))
        expected = "save the .blend file first"
    from addon.blender import convert

    def no_simulation(*_args, **_kw):
        raise AssertionError("the scene was converted before the cache folder was checked")

    monkeypatch.setattr(convert, "convert_scene", no_simulation)
    before = scene_snapshot()
    files = sorted(os.listdir(blend.parent))
    with pytest.raises(BakeError, match=expected):
        run_job(bake_mode="INSTANCES")
    assert scene_snapshot() == before and sorted(os.listdir(blend.parent)) == files


def test_missing_cache_warns_on_load_and_plays_the_first_frame(registered, blend, capfd):
    build_scene(blend)
    job, result = run_job(bake_mode="INSTANCES")
    first = np.array([np.array(o.matrix_world) for o in job.objects])  # hidden, still at the first frame
    cache = bpy.data.objects[result.cache_object]
    Path(bake_instances.cache_file(cache)).unlink()
    bpy.ops.wm.save_mainfile()
    bpy.ops.wm.open_mainfile(filepath=str(blend))
    assert [name for name, _path in bake_instances.missing_at_load()] == [result.cache_object]
    # in a window a timer runs this operator after loading: its warning goes to the status bar
    capfd.readouterr()
    assert bpy.ops.prb.report_missing_caches() == {"FINISHED"}
    assert f"the instance cache of '{result.cache_object}' is missing" in capfd.readouterr().out
    played = play_without_addon(blend)  # no crash; the bodies stay where they started
    got = np.array([m for _n, m in played[f"{float(FRAMES[1])}"]])
    np.testing.assert_allclose(got, first, atol=2e-5)
    # baked again, the cache is back: no warning left in the panel; cleared, none either
    run_job(bake_mode="INSTANCES")
    assert bake_instances.missing_at_load() == []
    Path(bake_instances.cache_file(bpy.data.objects[result.cache_object])).unlink()
    assert [name for name, _path in bake_instances.missing_at_load()] == [result.cache_object]
    bake_instances.clear_scene_instances(bpy.context.scene)
    assert bake_instances.missing_at_load() == []


def test_cli_bakes_instances_beside_the_output_and_refuses_an_unwritable_folder(registered, blend, tmp_path):
    build_scene(blend)
    out = tmp_path / "renders" / "baked.blend"
    out.parent.mkdir()
    env = dict(os.environ, BLENDER_USER_RESOURCES=str(tmp_path / "user"))
    cli = [sys.executable, str(ROOT / "addon" / "cli.py"), "--scene", str(blend), "--frames", "1", "4"]
    proc = subprocess.run(cli + ["--bake-mode", "instances", "--cache-folder", str(blend) + "/cache",
                                 "--output", str(out)], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 1 and not out.exists()
    assert proc.stderr.strip().splitlines()[-1].startswith("error: cannot bake to instances: the cache folder")
    assert "PRB: frame" not in proc.stderr  # refused before simulating (progress goes to stderr)

    proc = subprocess.run(cli + ["--bake-mode", "instances", "--output", str(out)], capture_output=True, text=True,
                          timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cache_files = list((out.parent / "prb_cache").iterdir())
    assert len(cache_files) == 1 and point_cache.read_header(str(cache_files[0]))["samples"] == 4
    assert not (blend.parent / "prb_cache").exists()
    played = play_without_addon(out)
    assert len(played["4.0"]) == BODY_COUNT


def test_motion_blur_renders_the_cached_motion(registered, tmp_path):
    """Cycles renders a cube moving 2 m per frame from an instance cache: with motion blur (shutter 0.5
    frame) it is smeared over the 1 m it moves while the shutter is open, as the Mesh Cache samples
    subframes. The smear length comes from the row's second moment (linear EXR): a box of width w
    smeared over m has variance (w^2 + m^2) / 12."""
    fresh_scene(1, 3)
    scene = bpy.context.scene
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "blur.blend"))
    bpy.ops.mesh.primitive_cube_add(size=1.0)
    cube = bpy.context.object
    material = bpy.data.materials.new("Glow")
    material.use_nodes = True
    bsdf = material.node_tree.nodes["Principled BSDF"]
    bsdf.inputs["Emission Color"].default_value = (1, 1, 1, 1)
    bsdf.inputs["Emission Strength"].default_value = 5.0
    cube.data.materials.append(material)
    bpy.ops.object.camera_add(location=(0.0, 0.0, 10.0))
    scene.camera = bpy.context.object
    scene.camera.data.type = "ORTHO"
    scene.camera.data.ortho_scale = 8.0  # 128 px over 8 m: 16 px per metre
    scene.world = None
    scene.render.engine = "CYCLES"
    scene.cycles.samples = 16
    scene.cycles.device = "CPU"
    scene.render.resolution_x = scene.render.resolution_y = 128
    scene.render.motion_blur_shutter = 0.5
    scene.view_settings.view_transform = "Standard"
    scene.render.image_settings.file_format = "OPEN_EXR"

    class Link:
        com_local = np.zeros(3)
        matrix_world = np.identity(4)

    job = bake_instances.InstanceBake(scene, None, 1, 1)
    job.begin([cube], [Link()], 3)
    for x in (-2.0, 0.0, 2.0):
        job.write(np.array([[x, 0.0, 0.0]]), np.array([[1.0, 0.0, 0.0, 0.0]]))
    job.finish()
    scene.frame_set(2)

    def row_variance(blur: bool) -> float:
        scene.render.use_motion_blur = blur
        scene.render.filepath = str(tmp_path / f"blur_{blur}.exr")
        bpy.ops.render.render(write_still=True)
        image = bpy.data.images.load(scene.render.filepath)
        row = np.array(image.pixels[:]).reshape(128, 128, 4)[64, :, 0]
        bpy.data.images.remove(image)
        x = np.arange(128)
        mean = (row * x).sum() / row.sum()
        assert abs(mean - 63.5) < 1.5  # centred on x = 0 either way
        return float((row * (x - mean) ** 2).sum() / row.sum())

    still, blurred = row_variance(False), row_variance(True)
    assert abs(np.sqrt(12 * still) - 16) < 2  # the 1 m cube
    smear = np.sqrt(12 * (blurred - still))
    assert abs(smear - 16) < 3, smear


def test_keyframes_refuse_bodies_an_instance_bake_shows(registered, blend):
    """Keys on objects that an instance bake hides and shows would bake them twice: refused, Clear Bake first."""
    build_scene(blend)
    _job, result = run_job(bake_mode="INSTANCES")
    before = scene_snapshot()
    with pytest.raises(BakeError, match=f"the dynamic objects are shown by the instance bake {result.cache_object}: "
                                        "Clear Bake first to bake them to keyframes, or bake to Instances again"):
        run_job(bake_mode="KEYFRAMES")
    assert scene_snapshot() == before
    assert bpy.ops.prb.clear_bake() == {"FINISHED"}
    keyed_job, keyed = run_job(bake_mode="KEYFRAMES")
    assert len(keyed.keyed_objects) == BODY_COUNT


def test_the_cache_folder_property_defaults_to_where_the_bake_writes_without_one(registered, tmp_path):
    """One default for the instance cache's folder: the Cache Folder property's is the bake's own
    (bake_instances.DEFAULT_CACHE_FOLDER), and both name the same file."""
    scene = fresh_scene(1, 2)
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "default.blend"))
    assert scene.prb_settings.cache_folder == bake_instances.DEFAULT_CACHE_FOLDER
    assert bake_instances.cache_paths(scene, scene.prb_settings.cache_folder) == bake_instances.cache_paths(scene, None)
