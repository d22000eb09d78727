"""Enabling the add-on where numpy or OpenCL is missing: it registers, Preferences and the sidebar say
what is missing and how to get it on this platform, and nothing prints a traceback. A missing module
is simulated in a fresh process (sys.modules[name] = None makes `import name` fail)."""
from __future__ import annotations

import json
import sys

import pytest

from test_register_cli import ROOT, run_python

# Records the labels a draw() puts in the layout, without a window.
DRAW = """
    import json, sys
    import bpy
    for name in sys.argv[1].split(","):
        if name:
            sys.modules[name] = None  # `import name` now raises ImportError, as where it is not installed
    if sys.argv[2] == "no-driver":  # pyopencl loads but its loader finds no driver (what clGetPlatformIDs says then)
        import pyopencl
        def no_platform():
            raise pyopencl.LogicError("clGetPlatformIDs failed: PLATFORM_NOT_FOUND_KHR")
        pyopencl.get_platforms = no_platform
    from tests.blender.prb_helpers import StrictLayout  # refuses names Blender's layout does not know
    def draw(cls):
        layout = StrictLayout()
        cls.draw(type("Self", (), {"layout": layout})(), bpy.context)
        return layout.drawn.labels
    import addon.blender as blender
    blender.register()
    try:
        from addon.blender import preferences
        panels = [c.__name__ for c in bpy.types.Panel.__subclasses__() if getattr(c, "bl_category", "") == "Particle Bodies" and c.is_registered]
        result = {"panels": panels, "preferences": draw(preferences.PRB_AP_preferences),
                  "operator": hasattr(bpy.types.Scene, "prb_settings")}
        main = bpy.types.Panel.bl_rna_get_subclass_py("PRB_PT_main") or bpy.types.Panel.bl_rna_get_subclass_py("PRB_PT_missing_dependencies")
        result["sidebar"] = draw(main)
    finally:
        blender.unregister()
    print("RESULT" + json.dumps(result))
"""


def _run(hidden: str, opencl: str = "as-installed"):
    proc = run_python(DRAW, hidden, opencl)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stdout + proc.stderr
    return json.loads(proc.stdout.split("RESULT", 1)[1]), proc


def test_without_numpy_the_add_on_says_so_and_how_to_get_it():
    result, proc = _run("numpy")
    assert not result["operator"]  # nothing that needs numpy is registered
    assert result["panels"] == ["PRB_PT_missing_dependencies"]
    for text in ("\n".join(result["preferences"]), "\n".join(result["sidebar"])):
        assert "numpy is missing" in text
        if sys.platform.startswith("linux"):
            assert "python3-numpy" in text.replace("\n", " ")
    assert "numpy is missing" in proc.stdout  # and in Blender's console, once


def test_without_pyopencl_the_panel_and_preferences_say_what_to_install():
    result, _ = _run("pyopencl")
    assert result["operator"]  # the add-on works otherwise (the NumPy reference engine, Clear Bake)
    for text in (" ".join(result["preferences"]), " ".join(result["sidebar"])):
        assert "pyopencl does not load" in text
        if sys.platform.startswith("linux"):
            assert "pocl-opencl-icd" in text and "binutils libc6-dev" in text


def test_without_an_opencl_driver_the_panel_says_what_to_install():
    result, _ = _run("", "no-driver")
    for text in (" ".join(result["preferences"]), " ".join(result["sidebar"])):
        assert "No OpenCL platform found" in text
        if sys.platform.startswith("linux"):
            assert "pocl-opencl-icd" in text and "binutils libc6-dev" in text


def test_with_everything_preferences_list_the_devices_and_the_command():
    result, _ = _run("")
    text = "\n".join(result["preferences"])
    assert "numpy " in text and "OpenCL device 0:0" in text
    assert "blender --command particle_bodies bake --scene FILE.blend" in text
    assert str(ROOT / "addon" / "cli.py") in text


def test_cli_without_numpy_is_one_line(tmp_path):
    proc = run_python("""
        import sys
        import bpy
        sys.modules["numpy"] = None
        sys.argv = ["python", "--scene", sys.argv[1], "--output", sys.argv[2]]
        from addon import cli
        cli.main()
    """, str(ROOT / "sample_scenes" / "ramp.blend"), str(tmp_path / "o.blend"))
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: numpy is missing") and (
        "python3-numpy" in last or not sys.platform.startswith("linux")), last
