"""The headless CLI's contract (addon/cli.py; `blender --command particle_bodies`): exit status 0 only
on success, one line "error: ..." otherwise, and every bad input refused before anything is
simulated or written. One Python process runs all the refusals in turn (fast: a tiny scene), with
the conversion and the simulation replaced by recorders, so a refusal that comes too late shows."""
from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys

import pytest

from test_register_cli import ROOT, run_python

from addon.core.contact_geometry import CONTACT_GEOMETRY
from addon.core.settings import SimulationSettings
from tests.skip_reasons import SKIP_ONE_CPU_DRIVER

SCENE = """
    import sys, bpy, addon.blender as blender
    blender.register()
    try:
        bpy.ops.wm.read_factory_settings(use_empty=True)
        scene = bpy.context.scene
        scene.frame_start, scene.frame_end = 1, 6
        bodies = bpy.data.collections.new("Bodies")
        scene.collection.children.link(bodies)
        for name, loc in (("A", (0, 0, 1)), ("B", (1.5, 0, 1.5))):
            bpy.ops.mesh.primitive_cube_add(size=0.4, location=loc)
            bpy.context.object.name = name
            bpy.context.object.prb.role = "DYNAMIC"
            bodies.objects.link(bpy.context.object)
        bpy.ops.mesh.primitive_plane_add(size=6)
        ground = bpy.context.object
        ground.name = "Ground"
        ground.prb.role = "STATIC"
        bodies.objects.link(ground)  # a collider in the collection stays a collider
        bpy.data.scenes.new("Empty")
        bpy.ops.wm.save_as_mainfile(filepath=sys.argv[1])
    finally:
        blender.unregister()
"""

# Runs each case through the real entry point in this one process. The conversion and the
# simulation are wrapped by recorders; the output folder is listed after each case.
DRIVER = """
    import contextlib, io, json, os, sys
    import bpy
    cases, folder = json.loads(sys.argv[1]), sys.argv[2]
    sys.argv = ["python"]
    from addon import cli
    import addon.blender.convert as convert
    import addon.core.simulation as simulation
    calls = []
    real_convert, real_simulation = convert.convert_scene, simulation.Simulation
    def recording_convert(*a, **k):
        calls.append("convert")
        return real_convert(*a, **k)
    class RecordingSimulation(real_simulation):
        def __init__(self, *a, **k):
            calls.append("simulate")
            super().__init__(*a, **k)
    convert.convert_scene = recording_convert
    simulation.Simulation = RecordingSimulation
    import dataclasses, addon.core.device as device
    real_choose = device.choose_device
    def small_device(*a, **k):  # this machine's device with the memory the test asks for
        return dataclasses.replace(real_choose(*a, **k), global_memory=int(os.environ["PRB_TEST_DEVICE_MEMORY"]))
    device.choose_device = small_device
    results = {}
    for name, (entry, argv) in cases.items():
        calls.clear()
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            if entry == "command":
                code = cli.command(argv)
            else:
                try:
                    cli.main(argv)
                    code = 0
                except SystemExit as exc:
                    code = exc.code
        results[name] = dict(code=code, stderr=err.getvalue(), calls=list(calls), files=sorted(os.listdir(folder)))
    print("RESULTS" + json.dumps(results))
"""


@pytest.fixture(scope="module")
def scene_file(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli")
    scene = folder / "scene.blend"
    proc = run_python(SCENE, str(scene))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return scene


def _cases(scene, out_dir):
    out = str(out_dir / "out.blend")
    base = ["python", "--scene", str(scene), "--output", out]
    return {
        # name: (entry point, argv), the argv as sys.argv would be (main) or Blender passes it (command)
        # /sys: no file can be created there, even by root (a read-only folder would not stop root)
        "unwritable output": ("main", ["python", "--scene", str(scene), "--output", "/sys/o.blend"]),
        "output folder missing": ("main", ["python", "--scene", str(scene), "--output", str(out_dir / "no" / "o.blend")]),
        "output not .blend": ("main", ["python", "--scene", str(scene), "--output", str(out_dir / "o.txt")]),
        "frames empty": ("main", base + ["--frames", "5", "5"]),
        "frames backwards": ("main", base + ["--frames", "9", "2"]),
        "frames not numbers": ("main", base + ["--frames", "1", "x"]),
        "scene file missing": ("main", ["python", "--scene", str(out_dir / "nope.blend"), "--output", out]),
        "scene name missing": ("main", base + ["--scene-name", "Nope"]),
        "object missing": ("main", base + ["--objects", "A,Nope"]),
        "object in another scene": ("main", base + ["--scene-name", "Empty", "--objects", "A"]),
        "collection missing": ("main", base + ["--collection", "Nope"]),
        "collider missing": ("main", base + ["--objects", "A", "--colliders", "Nope"]),
        "collider named as dynamic": ("main", base + ["--objects", "A,Ground"]),
        "dynamic named as collider": ("main", base + ["--objects", "A", "--colliders", "A"]),
        "device missing": ("main", base + ["--objects", "A", "--device", "nvidia"]),
        "step beyond the range": ("main", base + ["--frames", "1", "3", "--step", "5"]),
        "step 0": ("main", base + ["--step", "0"]),
        "substeps 0": ("main", base + ["--substeps", "0"]),
        "radius 0": ("main", base + ["--radius", "0"]),
        "sleep time 0": ("main", base + ["--sleep-time", "0"]),
        "contact geometry unknown": ("main", base + ["--contact-geometry", "cubes"]),
        "contact geometry retired": ("main", base + ["--contact-geometry", "sdf"]),  # Flat Faces
        "unknown option": ("main", base + ["--bogus"]),
        "max particles": ("main", base + ["--objects", "A", "--max-particles", "3"]),
        "device memory": ("main", base + ["--objects", "A", "--radius", "0.0005"]),
        "command: collider named as dynamic": ("command", ["bake"] + base[1:] + ["--objects", "Ground"]),
        "command: no action": ("command", ["--scene", str(scene)]),
        "command: no scene": ("command", ["bake", "--output", out]),
    }


@pytest.fixture(scope="module")
def refusals(scene_file, tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("cli-out")
    cases = _cases(scene_file, out_dir)
    # a device with 64 MB of memory, whatever this machine has: the memory check must refuse before converting
    env = {"PRB_TEST_DEVICE_MEMORY": str(64 << 20)}
    proc = run_python(DRIVER, json.dumps(cases), str(out_dir), env_extra=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout.split("RESULTS", 1)[1]), out_dir



EXPECTED = {  # case: (exit status, words the one-line message must hold)
    "unwritable output": (1, ["cannot write", "/sys"]),
    "output folder missing": (1, ["does not exist"]),
    "output not .blend": (1, [".blend"]),
    "frames empty": (1, ["frame range 5-5"]),
    "frames backwards": (1, ["frame range 9-2"]),
    "frames not numbers": (2, ["--frames", "invalid"]),
    "scene file missing": (1, ["scene file not found"]),
    "scene name missing": (1, ["scene 'Nope' not found"]),
    "object missing": (1, ["objects not found", "Nope"]),
    "object in another scene": (1, ["not in scene 'Empty'", "A"]),
    "collection missing": (1, ["collection 'Nope' not found"]),
    "collider missing": (1, ["colliders not found", "Nope"]),
    "collider named as dynamic": (1, ["Ground", "Static Collider"]),
    "dynamic named as collider": (1, ["both", "A"]),
    "device missing": (1, ["No OpenCL device matches 'nvidia'"]),
    "step beyond the range": (1, ["frame step 5 is longer than the frame range 1-3: only frame 1 would be keyed and "
                                  "nothing simulated; use a step of at most 2, or a later end frame"]),
    "step 0": (2, ["--step", "1 or more"]),
    "substeps 0": (2, ["--substeps", "1 or more"]),
    "radius 0": (2, ["--radius", "more than 0"]),
    "sleep time 0": (2, ["--sleep-time", "more than 0"]),
    "contact geometry unknown": (2, ["--contact-geometry", "invalid choice: 'cubes'", "particles", "voxels"]),
    "contact geometry retired": (2, ["--contact-geometry", "invalid choice: 'sdf'", "particles", "voxels"]),
    "unknown option": (2, ["--bogus"]),
    "max particles": (1, ["more than the limit of 3"]),
    "device memory": (1, ["device memory", "64.0 MB"]),
    "command: collider named as dynamic": (1, ["Ground", "Static Collider"]),
    "command: no action": (2, ["ACTION"]),
    "command: no scene": (2, ["--scene"]),
}


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_bad_input_is_refused_before_simulating(refusals, case):
    results, _ = refusals
    got = results[case]
    code, words = EXPECTED[case]
    lines = [line for line in got["stderr"].splitlines() if line.strip()]
    assert got["code"] == code, got
    assert lines and lines[-1].startswith("error: "), got["stderr"]
    assert "Traceback" not in got["stderr"]
    for word in words:
        assert word in lines[-1], (word, lines[-1])
    assert "simulate" not in got["calls"], got  # refused before any simulation
    if case != "max particles":  # the particle limit is the conversion's own check
        assert got["calls"] == [], got  # ...and before converting anything
    assert got["files"] == [], got  # nothing written, no temporary file left
    if case == "device missing":
        assert "using the CPU" not in got["stderr"], got["stderr"]  # no word of a fallback it will not use


# The scene of SCENE with one number of a body's (A) or a collider's (Ground) transform made NaN or
# infinite, a file per case. Blender's fields clamp an infinity typed into them to the largest float
# (which the add-on counts as an infinity); a world matrix set from Python puts a true one there.
NON_FINITE_SCENES = """
    import json, math, sys, bpy, addon.blender as blender
    from mathutils import Matrix
    cases, folder = json.loads(sys.argv[1]), sys.argv[2]
    blender.register()
    try:
        for name, (obj, field, value) in cases.items():
            bpy.ops.wm.open_mainfile(filepath=folder + "/scene.blend")
            target = bpy.data.objects[obj]
            if field == "matrix_world":  # a true infinity in the location
                target.matrix_world = Matrix.Translation((float(value), 0.0, 0.0)) @ target.matrix_world
            else:
                if field == "rotation_quaternion":
                    target.rotation_mode = "QUATERNION"
                values = list(getattr(target, field))
                values[1] = float(value)
                setattr(target, field, values)
            bpy.ops.wm.save_as_mainfile(filepath=f"{folder}/{name}.blend")
    finally:
        blender.unregister()
"""
NON_FINITE = {  # file: (object, field, value), the words after the object's name in the message
    "body-location-nan": (("A", "location", "nan"), "location (nan)"),
    "body-location-inf": (("A", "matrix_world", "inf"), "location (inf)"),
    "body-rotation-nan": (("A", "rotation_euler", "nan"), "rotation (nan)"),
    "body-rotation-inf": (("A", "rotation_euler", "-inf"), "rotation (-inf)"),
    "body-quaternion-nan": (("A", "rotation_quaternion", "nan"), "rotation (nan)"),
    "body-scale-nan": (("A", "scale", "nan"), "scale (nan)"),
    "body-scale-inf": (("A", "scale", "inf"), "scale (inf)"),
    "collider-location-nan": (("Ground", "location", "nan"), "location (nan)"),
    "collider-rotation-inf": (("Ground", "rotation_euler", "inf"), "rotation (inf)"),
    "collider-scale-nan": (("Ground", "scale", "nan"), "scale (nan)"),
    "collider-scale-inf": (("Ground", "scale", "inf"), "scale (inf)"),
}


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def non_finite_bakes(scene_file, tmp_path_factory):
    """{case: (result as the refusals' driver records it, whether the scene file is unchanged)}: each
    case's file baked with the collection's bodies and the Ground collider."""
    folder = scene_file.parent
    proc = run_python(NON_FINITE_SCENES, json.dumps({name: case for name, (case, _) in NON_FINITE.items()}),
                      str(folder))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    before = {name: _digest(folder / f"{name}.blend") for name in NON_FINITE}
    out_dir = tmp_path_factory.mktemp("non-finite-out")
    cases = {name: ("main", ["python", "--scene", str(folder / f"{name}.blend"), "--collection", "Bodies",
                             "--output", str(out_dir / "out.blend")]) for name in NON_FINITE}
    proc = run_python(DRIVER, json.dumps(cases), str(out_dir), env_extra={"PRB_TEST_DEVICE_MEMORY": str(1 << 40)})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads(proc.stdout.split("RESULTS", 1)[1])
    return {name: (results[name], _digest(folder / f"{name}.blend") == before[name]) for name in NON_FINITE}


@pytest.mark.parametrize("case", sorted(NON_FINITE))
def test_a_non_finite_transform_is_refused_before_converting(non_finite_bakes, case):
    got, input_unchanged = non_finite_bakes[case]
    (obj, _field, _value), words = NON_FINITE[case]
    assert got["code"] == 1, got
    assert got["stderr"].strip().splitlines()[-1] == (
        f'error: Object "{obj}" has a non-finite {words}: fix its transform before baking.'), got["stderr"]
    assert "Traceback" not in got["stderr"]
    assert got["calls"] == [] and got["files"] == [], got  # nothing converted, simulated or saved
    assert input_unchanged


# A bake whose state turns non-finite at the device after frame 3 (the driver's Simulation wrapped:
# once the job has kept the frame, B's momentum on the device becomes NaN; the engine's integration
# and the read-back's check are the add-on's own).
POISONED_BAKE = """
    import hashlib, os, sys
    import numpy as np
    import bpy
    from addon import cli
    from addon.blender import job as job_module
    real_keep = job_module.BakeJob._keep
    def keep_then_poison(job, frame):
        real_keep(job, frame)
        if frame.index == 2:
            engine = job.sim.engine
            body = [link.name for link in job.links].index("B")
            rows = engine._read(engine.arguments["body_momentum"], (engine.body_count, 4))
            rows[body, 0] = np.nan
            engine.cl.enqueue_copy(engine.queue, engine.arguments["body_momentum"], rows)
    job_module.BakeJob._keep = keep_then_poison
    sys.exit(cli.command(sys.argv[1:]))
"""


@pytest.mark.parametrize("mode", ["keyframes", "instances"])
def test_a_simulation_turning_non_finite_stops_the_bake_and_saves_nothing(scene_file, tmp_path, mode):
    before = _digest(scene_file)
    out = tmp_path / "o.blend"
    proc = run_python(POISONED_BAKE, "bake", "--scene", str(scene_file), "--objects", "A,B", "--output", str(out),
                      "--bake-mode", mode)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    # B's NaN may reach A within the frame (it does on PoCL today): the first body in body order is named
    assert re.match(r'error: The simulation became non-finite at frame 4 \(body ("B"|"A" and 1 more)\): nothing '
                    r'was baked\. ', last), last
    assert "Traceback" not in proc.stderr
    assert sorted(os.listdir(tmp_path)) == []  # no file, no point cache folder
    assert _digest(scene_file) == before


def test_help_of_the_command_and_the_script():
    proc = run_python("""
        import sys, contextlib, io
        import bpy
        from addon import cli
        for argv in (["--help"], ["bake", "--help"]):
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                code = cli.command(argv)
            print("CODE", code, "|".join(out.getvalue().split()))
    """)
    assert proc.returncode == 0, proc.stderr
    top, bake = [line for line in proc.stdout.splitlines() if line.startswith("CODE")]
    assert top.startswith("CODE 0") and "particle_bodies" in top and "bake" in top
    assert bake.startswith("CODE 0") and "--objects" in bake and "--scene" in bake and "--verbose" in bake
    # what automatic substeps are for each geometry (the default's from its row), and the default geometry
    default = SimulationSettings().contact_geometry
    words = "|".join(f"{1.0 / CONTACT_GEOMETRY[default].substep:g} per second for {default};".split())
    assert words in bake and f"default|{default}|or|the|scene's|setting" in bake, bake
    substeps = bake.split("|substeps|per|frame|", 1)[1].split("|--radius|", 1)[0]
    assert all(f"|{geometry}" in substeps for geometry in CONTACT_GEOMETRY), substeps
    proc = subprocess.run([sys.executable, str(ROOT / "addon" / "cli.py"), "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "--objects" in proc.stdout


def test_verbose_shows_the_traceback(scene_file, tmp_path):
    argv = [sys.executable, str(ROOT / "addon" / "cli.py"), "--scene", str(scene_file), "--objects", "A",
            "--frames", "1", "3", "--backend", "opencl", "--output", str(tmp_path / "o.blend")]
    env = dict(os.environ, PRB_OPENCL_DEVICE="no-such-device")
    quiet = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    loud = subprocess.run(argv + ["--verbose"], capture_output=True, text=True, env=env, timeout=300)
    assert quiet.returncode == loud.returncode == 1
    assert "Traceback" not in quiet.stderr and "Traceback" in loud.stderr
    assert quiet.stderr.strip().splitlines()[-1] == loud.stderr.strip().splitlines()[-1]
    assert "no-such-device" in quiet.stderr.strip().splitlines()[-1]


# The --python route as the Blender binary runs it: sys.argv is Blender's whole command line (the
# bpy module has no binary path, so the test tells the script it runs inside Blender).
INSIDE_BLENDER = """
    import runpy, sys
    import bpy
    import addon.cli
    addon.cli.INSIDE_BLENDER = True
    bpy.ops.wm.open_mainfile(filepath=sys.argv[1])
    sys.argv = ["blender", "--background", sys.argv[1], "--python", sys.argv[2]] + sys.argv[3:]
    runpy.run_path(sys.argv[4], run_name="__main__")
    print("SCRIPT RETURNED")
"""


@pytest.mark.parametrize("tail, named", [
    (["--objects", "A", "--output", "OUT"], "--objects"),  # Blender would read these itself
    ([], None),  # the script sees no options: no default bake
])
def test_forgetting_the_double_dash_is_refused(scene_file, tmp_path, tail, named):
    out = tmp_path / "o.blend"
    tail = [str(out) if a == "OUT" else a for a in tail]
    proc = run_python(INSIDE_BLENDER, str(scene_file), str(ROOT / "addon" / "cli.py"), *tail)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and "`--`" in last, last
    if named:
        assert named in last
    assert "PRB: baking" not in proc.stdout and "SCRIPT RETURNED" not in proc.stdout
    assert not out.exists() and not scene_file.with_suffix(".baked.blend").exists()
    assert sorted(os.listdir(tmp_path)) == []


def test_python_route_inside_blender_bakes_and_exits_0(scene_file, tmp_path):
    out = tmp_path / "o.blend"
    proc = run_python(INSIDE_BLENDER, str(scene_file), str(ROOT / "addon" / "cli.py"),
                      "--", "--objects", "A,B", "--frames", "1", "4", "--output", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SCRIPT RETURNED" in proc.stdout  # exit 0 inside Blender: Blender goes on with its own arguments
    assert out.exists() and "PRB: saved" in proc.stdout
    # progress on stderr, plain lines (not a terminal): frame n/N, bodies, rate, time
    progress = [line for line in proc.stderr.splitlines() if line.startswith("PRB: frame")]
    assert progress and progress[-1].startswith("PRB: frame 3/3 (100%), 2 bodies, ") and "frames/s" in progress[-1]
    assert "\r" not in proc.stderr


def test_command_bakes(scene_file, tmp_path):
    out = tmp_path / "o.blend"
    proc = run_python("""
        import sys, bpy
        from addon import cli
        sys.exit(cli.command(sys.argv[1:]))
    """, "bake", "--scene", str(scene_file), "--collection", "Bodies", "--frames", "1", "3", "--output", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the collection's Ground keeps its Static Collider role
    assert "PRB: baking 2 objects, 1 colliders" in proc.stdout
    assert out.exists() and sorted(os.listdir(tmp_path)) == ["o.blend"]


def test_contact_geometry_reaches_the_engine(scene_file, tmp_path):
    """--contact-geometry particles gives the engine particle contacts; without it the scene's
    setting applies (Contacts in the panel; this scene keeps the default, Rigid Voxels)."""
    proc = run_python("""
        import sys, bpy
        from addon import cli
        import addon.core.simulation as simulation
        real_simulation = simulation.Simulation
        class ReportingSimulation(real_simulation):
            def __init__(self, *a, **k):
                super().__init__(*a, **k)
                print("GEOMETRY", self.settings.contact_geometry, self.engine.voxel_contacts)
        simulation.Simulation = ReportingSimulation
        scene, folder = sys.argv[1:]
        for extra, out in ((["--contact-geometry", "particles"], "particles.blend"), ([], "default.blend")):
            code = cli.command(["bake", "--scene", scene, "--objects", "A,B", "--frames", "1", "3",
                                "--output", f"{folder}/{out}", *extra])
            print("CODE", code)
    """, str(scene_file), str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    reports = [line for line in proc.stdout.splitlines() if line.startswith(("GEOMETRY", "CODE"))]
    default = SimulationSettings().contact_geometry
    assert default == "voxels"
    assert reports == ["GEOMETRY particles False", "CODE 0", "GEOMETRY voxels True", "CODE 0"], proc.stdout + proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["default.blend", "particles.blend"]


KILLED_MID_SAVE = """
    import os, signal, sys
    import bpy
    import addon.blender.save as save
    def write_half_then_die(path):
        with open(path, "wb") as f:
            f.write(b"BLENDER-half")
        os.kill(os.getpid(), signal.SIGKILL)
    save.write_blend = write_half_then_die
    sys.argv = ["python"] + sys.argv[1:]
    from addon import cli
    cli.main()
"""


def test_kill_mid_save_leaves_the_previous_file(scene_file, tmp_path):
    out = tmp_path / "o.blend"
    out.write_bytes(b"previous")
    own_tmp = tmp_path / "tmp"  # what a killed process cannot clean up (Blender's session folder) stays in here
    own_tmp.mkdir()
    proc = run_python(KILLED_MID_SAVE, "--scene", str(scene_file), "--objects", "A", "--frames", "1", "3",
                      "--output", str(out), "--overwrite", env_extra={"TMPDIR": str(own_tmp)})
    assert proc.returncode == -signal.SIGKILL, proc.stdout + proc.stderr
    assert out.read_bytes() == b"previous"


def test_failed_save_leaves_the_previous_file_and_no_temporary(scene_file, tmp_path):
    out = tmp_path / "o.blend"
    out.write_bytes(b"previous")
    proc = run_python(KILLED_MID_SAVE.replace("os.kill(os.getpid(), signal.SIGKILL)", "raise OSError(28, 'No space left on device')"),
                      "--scene", str(scene_file), "--objects", "A", "--frames", "1", "3", "--output", str(out),
                      "--overwrite")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == f"error: could not save {out}: No space left on device"
    assert out.read_bytes() == b"previous" and sorted(os.listdir(tmp_path)) == ["o.blend"]


def test_the_add_on_registers_the_command_and_removes_it():
    proc = run_python("""
        import bpy
        import addon.blender as blender
        from addon.blender import command
        calls = []
        real_register, real_unregister = bpy.utils.register_cli_command, bpy.utils.unregister_cli_command
        def register(name, execute):
            calls.append(("register", name, execute.__module__ + "." + execute.__name__))
            return real_register(name, execute)
        def unregister(handle):
            calls.append(("unregister",))
            return real_unregister(handle)
        bpy.utils.register_cli_command, bpy.utils.unregister_cli_command = register, unregister
        blender.register()
        registered = command._handle is not None
        blender.unregister()
        print("CALLS", calls, registered, command._handle)
    """)
    assert proc.returncode == 0, proc.stderr
    assert "CALLS [('register', 'particle_bodies', 'addon.cli.command'), ('unregister',)] True None" in proc.stdout


def test_a_bake_where_the_first_cpu_driver_cannot_build_runs_on_the_next(scene_file, tmp_path):
    """As on an AMD Zen 5 CPU, where the bundled PoCL's compiler cannot target the CPU: the first
    driver's build fails (through its own compiler, PRB_OPENCL_FAIL_BUILD), the bake runs on the next
    inside this bpy's process, one line says what was skipped, and the compiler's printout stays out
    of the terminal. (Intel's runtime, first where installed, loads here beside the TBB Blender loads
    first: a runtime built on a newer TBB fails to load inside Blender.)"""
    from addon.core import device
    drivers = device.candidates(device.list_devices(), "cpu")
    if len(drivers) < 2:
        pytest.skip(SKIP_ONE_CPU_DRIVER)
    first, second = drivers[:2]
    out = tmp_path / "o.blend"
    env = dict(os.environ, PRB_OPENCL_FAIL_BUILD=first.platform_name, XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.pop("PRB_OPENCL_DEVICE", None)  # automatic, as a user's bake
    proc = subprocess.run([sys.executable, str(ROOT / "addon" / "cli.py"), "--scene", str(scene_file),
                           "--objects", "A,B", "--frames", "1", "6", "--output", str(out)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    printed = proc.stdout + proc.stderr
    skipped = [line for line in printed.splitlines() if "Skipped OpenCL device" in line]
    assert len(skipped) == 1 and first.label in skipped[0], printed
    assert f"build log: {tmp_path / 'cache'}" in skipped[0]
    assert f"on {second.label}" in printed  # the device the bake ran on
    assert "fails on purpose" not in printed.replace(skipped[0], "")  # the full log went to the file only
    assert "loop not vectorized" not in printed  # nor the compilers' notes on a build that succeeded
    assert out.exists()


def test_an_explicit_device_that_cannot_build_fails_loudly_in_one_line(scene_file, tmp_path):
    """--device names a device whose build fails: no fallback, exit 1, one line saying which device,
    what failed and where the build log is; nothing written."""
    from addon.core import device
    first = device.candidates(device.list_devices())[0]
    out = tmp_path / "o.blend"
    env = dict(os.environ, PRB_OPENCL_FAIL_BUILD=first.platform_name, XDG_CACHE_HOME=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, str(ROOT / "addon" / "cli.py"), "--scene", str(scene_file),
                           "--objects", "A,B", "--frames", "1", "6", "--device", first.platform_name,
                           "--output", str(out)], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: OpenCL device {first.label} cannot run the kernels: its kernel compiler failed")
    assert f"build log: {tmp_path / 'cache'}" in last and "Traceback" not in proc.stderr
    assert not out.exists()
