"""Registration, the headless CLI and the installable extension zip, each in a fresh process."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_python(code: str, *args, timeout=600, env_extra=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_register_unregister_leaves_nothing_behind():
    proc = run_python("""
        import bpy, addon.blender as blender
        from addon.blender import operators, panels, properties
        classes = [c for m in (properties, operators, panels) for c in m.classes]
        for cycle in range(2):
            blender.register()
            assert hasattr(bpy.types.Scene, "prb_settings") and hasattr(bpy.types.Object, "prb")
            assert all(c.is_registered for c in classes), classes
            assert "simulate_bake" in dir(bpy.ops.prb)
            bpy.context.scene.prb_settings.frame_step = 2
            blender.unregister()
            assert not hasattr(bpy.types.Scene, "prb_settings") and not hasattr(bpy.types.Object, "prb")
            left = [c for c in classes if c.is_registered]
            assert not left, left
            assert "prb_settings" not in bpy.types.Scene.bl_rna.properties
            assert "prb" not in bpy.types.Object.bl_rna.properties
        print("OK", len(classes))
    """)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK" in proc.stdout


MAKE_SCENE = """
    import sys, bpy, addon.blender as blender
    blender.register()
    try:
        bpy.ops.wm.read_factory_settings(use_empty=True)
        scene = bpy.context.scene
        scene.frame_start, scene.frame_end = 1, 30
        scene.render.fps = 30
        for name, loc in (("A", (0, 0, 1)), ("B", (1.5, 0, 1.5)), ("C", (3, 0, 1))):
            bpy.ops.mesh.primitive_cube_add(size=0.4, location=loc)
            bpy.context.object.name = name
        bpy.data.objects["B"].rotation_mode = "QUATERNION"
        bpy.data.objects["B"].prb.initial_angular_velocity = (0, 4, 0)
        bpy.ops.wm.save_as_mainfile(filepath=sys.argv[1])
    finally:
        blender.unregister()
"""

READ_KEYS = """
    import sys, json, bpy
    bpy.ops.wm.open_mainfile(filepath=sys.argv[1])
    from addon.blender.bake import action_fcurves
    out = {}
    for obj in bpy.data.objects:
        ad = obj.animation_data
        if ad and ad.action:
            out[obj.name] = {"action": ad.action.name,
                             "curves": {f"{fc.data_path}[{fc.array_index}]": [list(k.co) for k in fc.keyframe_points]
                                        for fc in action_fcurves(ad.action)}}
            bpy.context.scene.frame_set(8)
            out[obj.name]["z8"] = obj.matrix_world.translation.z
    print("JSON" + json.dumps(out))
"""


def test_cli_bakes_a_saved_file_read_back_by_another_process(tmp_path):
    scene = tmp_path / "scene.blend"
    proc = run_python(MAKE_SCENE, str(scene))
    assert proc.returncode == 0, proc.stderr
    digest = hashlib.sha256(scene.read_bytes()).hexdigest()
    out = tmp_path / "out.blend"
    cli = [sys.executable, str(ROOT / "addon" / "cli.py"), "--scene", str(scene), "--objects", "A,B",
           "--frames", "1", "8", "--output", str(out)]
    env = dict(os.environ, BLENDER_USER_RESOURCES=str(tmp_path / "user"))
    proc = subprocess.run(cli, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PRB: frame 7/7 (100%), 2 bodies" in proc.stderr  # progress lines
    assert hashlib.sha256(scene.read_bytes()).hexdigest() == digest  # input untouched

    proc = run_python(READ_KEYS, str(out))
    assert proc.returncode == 0, proc.stderr
    keys = json.loads(proc.stdout.split("JSON", 1)[1])
    assert sorted(keys) == ["A", "B"]  # C was not asked for
    assert keys["A"]["action"] == "PRB_Bake_A"
    assert sorted(keys["B"]["curves"]) == [f"location[{i}]" for i in range(3)] + [
        f"rotation_quaternion[{i}]" for i in range(4)]
    for curve in keys["A"]["curves"].values():
        assert [k[0] for k in curve] == list(range(1, 9))
    # the scene's own frame rate applies: 7 frames at 30 fps of free fall
    t = 7 / 30
    assert keys["A"]["z8"] == pytest.approx(1 - 0.5 * 9.81 * t * t, abs=0.01)

    # refuses to overwrite, exits non-zero with a one-line reason
    proc = subprocess.run(cli, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1].startswith("error: ") and "exists" in proc.stderr
    proc = subprocess.run(cli[:-2] + ["--output", str(scene)], capture_output=True, text=True, env=env)
    assert proc.returncode == 1 and "--overwrite" in proc.stderr
    bad = cli[:4] + ["--objects", "A,Nope", "--output", str(tmp_path / "x.blend")]
    proc = subprocess.run(bad, capture_output=True, text=True, env=env)
    assert proc.returncode == 1 and proc.stderr.strip().splitlines()[-1] == "error: objects not found in the file: Nope"
    assert not (tmp_path / "x.blend").exists()
    bad = cli[:-2] + ["--sleep-speed", "-1", "--output", str(tmp_path / "x.blend")]
    proc = subprocess.run(bad, capture_output=True, text=True, env=env)
    assert proc.returncode == 2 and "--sleep-speed" in proc.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "x.blend").exists()


def test_cli_without_opencl_says_what_to_install(tmp_path):
    scene = tmp_path / "scene.blend"
    assert run_python(MAKE_SCENE, str(scene)).returncode == 0
    env = dict(os.environ, BLENDER_USER_RESOURCES=str(tmp_path / "user"), OCL_ICD_VENDORS=str(tmp_path / "none"),
               OCL_ICD_FILENAMES="", PRB_OPENCL_DEVICE="gpu")
    proc = subprocess.run([sys.executable, str(ROOT / "addon" / "cli.py"), "--scene", str(scene), "--frames", "1", "3",
                           "--objects", "A", "--output", str(tmp_path / "o.blend")],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and "OpenCL" in last and "install" in last.lower(), last
    assert not (tmp_path / "o.blend").exists()
