"""The installable zip: Blender's validator accepts the manifest; the zip built for this machine
installs with Blender's own installer, its bundled wheels (pyopencl, PoCL) load, and it bakes."""
from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

from test_register_cli import ROOT, run_python

from addon.core.opencl_program import STAGES

PY = f"{sys.version_info.major}.{sys.version_info.minor}"


def test_manifest_is_valid_for_blender():
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "build_extension.py"), "--validate"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


INSTALL_AND_BAKE = """
    import os, sys, glob, bpy, addon_utils
    bpy.ops.extensions.package_install_files(filepath=sys.argv[1], repo="user_default", enable_on_install=True)
    site = glob.glob(os.path.join(bpy.utils.user_resource("EXTENSIONS", path=".local"), "lib", "python*", "site-packages"))
    assert len(site) == 1, site
    sys.path.insert(0, site[0])  # the bundled wheels before the test venv's own pyopencl
    assert "pyopencl" not in sys.modules
    module = "bl_ext.user_default.particle_rigid_bodies"
    assert module in sys.modules and hasattr(bpy.types.Scene, "prb_settings")  # enabled by the install
    try:
        import pyopencl
        assert pyopencl.__file__.startswith(site[0]), pyopencl.__file__
        ext = sys.modules[module]
        scene = bpy.context.scene
        for o in list(bpy.data.objects):
            bpy.data.objects.remove(o)
        scene.frame_start, scene.frame_end = 1, 6
        for name, x in (("A", 0.0), ("B", 2.0)):
            bpy.ops.mesh.primitive_cube_add(size=0.4, location=(x, 0, 1))
            bpy.context.object.name = name
            bpy.context.object.prb.role = "DYNAMIC"
        assert bpy.ops.prb.simulate_bake() == {"FINISHED"}
        job_module = sys.modules[module + ".addon.blender.job"]
        assert job_module.__file__.startswith(os.path.dirname(ext.__file__))
        for name in ("A", "B"):
            action = bpy.data.objects[name].animation_data.action
            assert action.name == "PRB_Bake_" + name
        scene.frame_set(6)
        z = bpy.data.objects["A"].matrix_world.translation.z
        assert z < 0.9, z
        print("BAKED", z)
    finally:
        addon_utils.disable(module, default_set=True)
    assert not hasattr(bpy.types.Scene, "prb_settings")
"""


def test_built_zip_installs_and_bakes(tmp_path):
    zip_path = tmp_path / "prb.zip"
    # offline: the wheels come from the cache that `make venv` fills (build_extension.py --fetch-only);
    # pip is told not to reach any index, so a missing wheel fails here instead of downloading
    env = dict(os.environ, PIP_NO_INDEX="1")
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "build_extension.py"), "--platform", "linux-x64",
                           "--python", PY, "--output", str(zip_path)], capture_output=True, text=True, timeout=900,
                          env=env)
    assert proc.returncode == 0, ("build failed; run `make venv` to fill .cache/wheels\n" + proc.stdout
                                  + proc.stderr)
    names = zipfile.ZipFile(zip_path).namelist()
    assert "blender_manifest.toml" in names and "__init__.py" in names
    assert {f"kernels/{stage.file}" for stage in STAGES} <= set(names)
    assert any(n.startswith("addon/blender/") for n in names) and "addon/cli.py" in names
    wheels = [n for n in names if n.startswith("wheels/")]
    assert any("pyopencl" in w for w in wheels) and any("mako" in w for w in wheels)
    assert not any("numpy" in w for w in wheels)  # Blender ships numpy
    assert not any(n.startswith(("tests/", ".venv/", ".cache/")) for n in names)
    proc = run_python(INSTALL_AND_BAKE, str(zip_path), env_extra={"BLENDER_USER_RESOURCES": str(tmp_path / "user")})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "BAKED" in proc.stdout


def test_each_platform_zip_gets_its_own_wheels_only():
    """--split-platforms: per platform, pyopencl for both Pythons, the pure-Python wheels, PoCL on Linux only."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import build_extension as build
    finally:
        sys.path.pop(0)
    names = [n.split("/")[-1] for n in build.manifest_wheels(build.MANIFEST.read_text())]
    assert all(build.wheel_platforms(n) for n in names), names
    for platform in build.PLATFORMS:
        own = [n for n in names if platform in build.wheel_platforms(n)]
        for python in build.PYTHONS:
            tag = "cp" + python.replace(".", "")
            assert any(n.startswith("pyopencl-") and f"-{tag}-" in n for n in own), (platform, python)
        assert any(n.startswith("mako-") for n in own)
        assert any(n.startswith("pocl_binary_distribution") for n in own) == (platform == "linux-x64")
        others = [n for n in own if build.wheel_platforms(n) != set(build.PLATFORMS)]
        assert all(build.wheel_platforms(n) == {platform} for n in others), (platform, others)
