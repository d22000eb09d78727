"""Sample scenes: the committed .blend files are set up for Simulate & Bake, and each scene, built by
sample_scenes/generate.py (smaller where that keeps CI short), bakes headless through the real CLI
(addon/cli.py, its own process) with the physical outcome the scene is meant to show.

Generation, baking and reading back run in separate processes, like a user's or render node's runs,
so nothing here depends on the state of this process's bpy.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from sample_scenes.checks import rotation_angle  # noqa: E402
from sample_scenes.generate import dice_layout, large_model, tower_layout  # noqa: E402

FPS = 24



def _run(args, timeout=600):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, *map(str, args)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(map(str, args))} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n" \
                                 f"{proc.stderr[-3000:]}"
    return proc.stdout


def bake(tmp_path, scene, frames, read_frames, committed=False, cli_args=(), **params):
    """Bake frames 1..frames of ``scene`` with the CLI (and ``cli_args``) and read poses at
    read_frames: the committed sample_scenes/<scene>.blend itself, or a variant generated with ``params``."""
    if committed:
        blend = ROOT / "sample_scenes" / f"{scene}.blend"
    else:
        blend = tmp_path / f"{scene}.blend"
        gen = ["sample_scenes/generate.py", scene, "--output", blend, "--frames", frames]
        for key, value in params.items():
            gen += ["--param", f"{key}={json.dumps(value)}"]
        _run(gen)
    baked = tmp_path / f"{scene}_baked.blend"
    out = _run(["addon/cli.py", "--scene", blend, "--output", baked, "--frames", 1, frames, *cli_args])
    npz = tmp_path / f"{scene}.npz"
    _run(["sample_scenes/checks.py", baked, "--frames", *read_frames, "--npz", npz])
    data = dict(np.load(npz))
    assert len(data["names"]) > 0
    assert (data["keyed"] >= frames).all(), "every dynamic body must carry baked keys on every frame"
    data["cli_output"] = out
    return data


def positions(data, frame):
    i = list(data["frames"]).index(frame)
    return data["matrices"][i, :, :3, 3]


def select(data, prefix):
    return np.array([str(n).startswith(prefix) for n in data["names"]])


# -- layouts (no bake) --------------------------------------------------------------------------------


def test_dice_layout_matches_the_seed_formation():
    p = dice_layout(40, column_height=10)
    assert p.shape == (40, 3)
    column = p[:10]
    # each cube sits above the one below it without touching it ...
    dz = np.diff(column[:, 2])
    assert np.allclose(dz, dz[0]) and 1.0 < dz[0] < 1.2
    assert column[0, 2] > 0.5  # the lowest one is above the ground
    # ... moved to the next of four positions, by less than a cube, so sides and corners overlap
    dxy = np.abs(np.diff(column[:, :2], axis=0))
    assert np.all((dxy.max(axis=1) > 0.3) & (dxy.max(axis=1) < 1.0))
    assert len({tuple(np.round(q, 6)) for q in column[:, :2]}) == 4
    # columns do not overlap each other: the footprints of their 1 m cubes are disjoint
    columns = p.reshape(4, 10, 3)
    low, high = columns[:, :, :2].min(axis=1) - 0.5, columns[:, :, :2].max(axis=1) + 0.5
    for a in range(4):
        for b in range(a + 1, 4):
            assert np.any((high[a] <= low[b]) | (high[b] <= low[a])), (a, b)
    model = large_model(40)
    assert model.body_count == 40 and model.particle_count == 40 * 27


def test_large_model_cubes_start_apart():
    model = large_model(60, column_height=6)
    pos = model.body_position[model.particle_body] + model.particle_offset  # identity orientations
    d = np.linalg.norm(pos[:, None] - pos[None], axis=-1)
    other = model.particle_body[:, None] != model.particle_body[None]
    assert d[other].min() >= 2 * model.particle_radius  # no contact at the start


def test_tower_layout_has_four_sizes():
    layout = tower_layout()
    towers = {}
    for t, p in layout:
        towers.setdefault(t, []).append(p)
    assert len(towers) == 4
    sizes = sorted(len(v) for v in towers.values())
    assert len(set(sizes)) == 4


# -- the committed files ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["dice", "towers", "mixed", "ramp", "scatter"])
def test_committed_scene_is_ready_to_bake(tmp_path, name):
    path = ROOT / "sample_scenes" / f"{name}.blend"
    assert path.exists(), f"{path} missing: run sample_scenes/generate.py"
    assert path.stat().st_size < 2_000_000, "keep sample .blend files small (linked duplicates, compression)"
    script = tmp_path / "read_scene.py"
    script.write_text(
        "import bpy, json, sys\n"
        "import addon.blender as a\n"
        f"bpy.ops.wm.open_mainfile(filepath={str(path)!r}, load_ui=False)\n"
        "a.register()\n"
        "s = bpy.context.scene\n"
        "roles = {}\n"
        "for o in s.objects: roles.setdefault(o.prb.role, []).append(o.name)\n"
        "meshes = {o.data.name for o in s.objects if o.prb.role == 'DYNAMIC'}\n"
        "d = bpy.context.evaluated_depsgraph_get()\n"
        "instances = sum(1 for i in d.object_instances if i.is_instance and i.parent.original.prb.role == 'DYNAMIC')\n"
        "print('JSON' + json.dumps(dict(roles={k: len(v) for k, v in roles.items()}, meshes=len(meshes),\n"
        "      camera=s.camera is not None, fps=s.render.fps, start=s.frame_start, end=s.frame_end,\n"
        "      statics=roles.get('STATIC', []), instances=instances, bake_mode=s.prb_settings.bake_mode)))\n"
        "a.unregister()\n")
    out = _run([script], timeout=120)
    info = json.loads(out.split("JSON", 1)[1].splitlines()[0])
    assert info["camera"] and info["fps"] == FPS and info["start"] == 1
    assert info["roles"].get("NONE", 0) == 0, "every object has an explicit role"
    expected = {"dice": 1000, "towers": sum(a * a * h for a, h in tower_layout_sizes()) + 1}
    if name in expected:
        assert info["roles"]["DYNAMIC"] == expected[name]
    if name == "mixed":
        assert 200 <= info["roles"]["DYNAMIC"] <= 500 and info["meshes"] == 4 and "Bowl" in info["statics"]
    if name == "ramp":
        assert {"Ramp", "Stairs"} <= set(info["statics"])
    if name == "scatter":  # one Dynamic object, the scatter, whose instances are the bodies
        assert info["roles"]["DYNAMIC"] == 1 and 300 <= info["instances"] <= 600
        assert info["bake_mode"] == "INSTANCES"
    else:
        assert info["instances"] == 0 and info["bake_mode"] == "KEYFRAMES"
    assert "Ground" in info["statics"] or name == "mixed"
    assert info["meshes"] <= 4, "dynamic objects share their meshes (linked duplicates)"


@pytest.mark.parametrize("name, frames", [("dice", 4), ("mixed", 3), ("scatter", 3)])
def test_committed_scene_bakes_with_the_cli(tmp_path, name, frames):
    """The saved large scenes bake as they are, for a few frames (the outcome tests bake smaller
    variants; towers.blend and ramp.blend are baked as saved there): keys on every dynamic body,
    and nothing moves faster than it could."""
    baked = tmp_path / f"{name}_baked.blend"
    if name == "scatter":  # baked to instances, the scene's Bake To, without saying so on the command line
        _run(["addon/cli.py", "--scene", ROOT / "sample_scenes" / f"{name}.blend", "--output", baked,
              "--frames", 1, frames])
        poses = instance_poses(tmp_path, baked, [1, frames])
        assert len(poses[1]) == len(poses[frames]) >= 300
        t = (frames - 1) / FPS
        moved = np.linalg.norm(poses[frames][:, :3, 3] - poses[1][:, :3, 3], axis=1)
        assert 0.0 < moved.max() <= 0.5 * 9.81 * t * t + 0.05
        return
    _run(["addon/cli.py", "--scene", ROOT / "sample_scenes" / f"{name}.blend", "--output", baked,
          "--frames", 1, frames])
    npz = tmp_path / f"{name}.npz"
    _run(["sample_scenes/checks.py", baked, "--frames", 1, frames, "--npz", npz])
    data = np.load(npz)
    assert (data["keyed"] >= frames).all()
    expected = {"dice": 1000, "towers": sum(a * a * h for a, h in tower_layout_sizes()) + 1}.get(name)
    if expected:
        assert len(data["names"]) == expected
    t = (frames - 1) / FPS
    moved = np.linalg.norm(data["matrices"][-1, :, :3, 3] - data["matrices"][0, :, :3, 3], axis=1)
    fastest = 15.0 if name == "towers" else 0.0  # the thrown cube's initial speed
    assert moved.max() <= fastest * t + 0.5 * 9.81 * t * t + 0.05


# Opens a baked file in a process that never imports the add-on and prints the world matrices of the
# instances of its instance bake at the given frames, in body order.
READ_INSTANCES = """
import json, sys
import bpy
bpy.ops.wm.open_mainfile(filepath=sys.argv[1], load_ui=False)
out = {}
for frame in map(int, sys.argv[2:]):
    bpy.context.scene.frame_set(frame)
    deps = bpy.context.evaluated_depsgraph_get()
    out[frame] = [[list(r) for r in i.matrix_world] for i in deps.object_instances
                  if i.is_instance and i.parent.original.name.startswith("PRB Instances")]
print("JSON" + json.dumps(out))
"""


def instance_poses(tmp_path, baked, frames) -> dict:
    script = tmp_path / "read_instances.py"
    script.write_text(READ_INSTANCES)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, script, baked, *map(str, frames)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    data = json.loads(proc.stdout.split("JSON", 1)[1].splitlines()[0])
    return {int(frame): np.array(m) for frame, m in data.items()}


def tower_layout_sizes():
    from sample_scenes.generate import TOWER_SIZES

    return TOWER_SIZES


# -- baked outcomes ----------------------------------------------------------------------------------------


# each contact geometry a user can pick (--contact-geometry; the panel's Contacts)
@pytest.mark.parametrize("contacts", ["particles", "voxels"])
def test_dice_topple_tumble_and_come_to_rest(tmp_path, contacts):
    frames = 192  # the last cube stops rolling at about frame 170
    data = bake(tmp_path, "dice", frames, [1, frames - 6, frames], count=36, column_height=9,
                cli_args=("--contact-geometry", contacts))
    start, before, end = positions(data, 1), positions(data, frames - 6), positions(data, frames)
    m = data["matrices"]
    assert end[:, 2].max() < start[:, 2].max() - 3, "the columns fell"
    assert end[:, 2].min() > 0.3, "nothing sank into the ground"
    tilted = rotation_angle(m[0], m[-1])
    assert (tilted > 20).sum() >= len(tilted) // 4, "the overlapping corners made the cubes tumble"
    spread = np.ptp(end[:, :2], axis=0).max()
    assert spread > np.ptp(start[:, :2], axis=0).max() + 1, "they spread out into a pile"
    # at rest: over the last six frames (1/4 s) no cube moves more than 2 cm or turns more than 2 degrees
    assert np.linalg.norm(end - before, axis=1).max() < 0.02
    assert rotation_angle(m[1], m[2]).max() < 2.0


@pytest.mark.parametrize("contacts", ["particles", "voxels"])
def test_towers_stand_until_hit(tmp_path, contacts):
    frames = 48
    hit = FPS  # the projectile arrives after 1 s
    data = bake(tmp_path, "towers", frames, [1, hit - 3, frames], committed=True,
                cli_args=("--contact-geometry", contacts))
    start, before, end = positions(data, 1), positions(data, hit - 3), positions(data, frames)
    m = data["matrices"]
    target = select(data, "Tower2.")
    proj = select(data, "Projectile")
    assert proj.sum() == 1 and target.sum() > 0
    for t in (1, 3, 4):  # the towers not hit stand all the time
        sel = select(data, f"Tower{t}.")
        assert sel.sum() > 0
        assert np.linalg.norm(end[sel] - start[sel], axis=1).max() < 0.1, f"tower {t} moved"
        assert rotation_angle(m[0][sel], m[-1][sel]).max() < 3.0, f"tower {t} tilted"
    # the hit one stands until the projectile arrives ...
    assert np.linalg.norm(before[target] - start[target], axis=1).max() < 0.05
    # ... which then knocks cubes off it
    moved = np.linalg.norm(end[target] - start[target], axis=1)
    assert (moved > 0.5).sum() >= 2, f"the hit tower barely moved: {np.sort(moved)[-5:]}"
    assert np.linalg.norm(end[proj] - start[proj]) > 5


def test_mixed_shapes_stay_in_the_bowl(tmp_path):
    frames = 60
    data = bake(tmp_path, "mixed", frames, [1, frames], count=40)
    from sample_scenes.generate import build_mixed  # defaults of the bowl

    import inspect

    defaults = inspect.signature(build_mixed).parameters
    radius, depth = defaults["bowl_radius"].default, defaults["bowl_depth"].default
    start, end = positions(data, 1), positions(data, frames)
    kinds = {str(n).split(".")[0] for n in data["names"]}
    assert kinds == {"Torus", "Sphere", "Suzanne", "Banana"}
    assert start[:, 2].min() > depth, "poured from above the rim"
    r = np.hypot(end[:, 0], end[:, 1])
    assert r.max() < radius, f"a shape left the bowl: r = {r.max():.2f} m"
    assert end[:, 2].min() > -0.05 and end[:, 2].max() < depth, "all shapes lie inside the bowl"


def test_ramp_separates_sticking_from_sliding_cubes(tmp_path):
    frames = 48
    data = bake(tmp_path, "ramp", frames, [1, frames], committed=True)
    start, end = positions(data, 1), positions(data, frames)
    mu = data["friction"]
    angle = np.radians(30.0)
    critical = np.tan(angle) ** 2  # contact mu = sqrt(mu_cube * mu_ramp), mu_ramp = 1
    moved = np.linalg.norm(end - start, axis=1)
    slippery, rough = mu < critical, mu > critical
    assert slippery.sum() >= 2 and rough.sum() >= 2
    assert moved[rough].max() < 0.1, f"rough cubes slid: {moved[rough]}"
    assert moved[slippery].min() > 2.0, f"slippery cubes stuck: {moved[slippery]}"
    downhill = end[slippery, 0] - start[slippery, 0]
    assert (downhill > 2.0).all(), "they went down the slope (+x)"


def test_scattered_rocks_fall_into_a_pile(tmp_path):
    """The scatter scene (smaller: four layers) baked to instances by the CLI: every rock of the
    geometry-nodes scatter is a body; they fall onto the ground, none sinks into it, the heap ends lower
    and wider than it started, and after 4 s it has settled."""
    frames = 96
    blend = tmp_path / "scatter.blend"
    _run(["sample_scenes/generate.py", "scatter", "--output", blend, "--frames", frames,
          "--param", "layers=4", "--param", "side=4.0"])
    baked = tmp_path / "scatter_baked.blend"
    out = _run(["addon/cli.py", "--scene", blend, "--output", baked, "--frames", 1, frames, "--bake-mode", "instances"])
    poses = instance_poses(tmp_path, baked, [1, frames - 6, frames])
    start, before, end = (poses[f][:, :3, 3] for f in (1, frames - 6, frames))
    assert len(start) >= 40 and f"Baked {len(start)} bodies" in out
    assert f"PRB: baking {len(start):,} bodies ({len(start):,} of them instances)" in out
    assert (end[:, 2] < start[:, 2] - 0.3).all(), "every rock fell"
    assert end[:, 2].min() > 0.05, "none sank into the ground"
    assert np.ptp(end[:, :2], axis=0).max() > np.ptp(start[:, :2], axis=0).max(), "the heap spread"
    last = np.linalg.norm(end - before, axis=1)
    assert np.quantile(last, 0.9) < 0.001 and last.max() < 0.05, "settled: in the last 1/4 s 9 rocks in 10 move " \
                                                                 "less than 1 mm, none 5 cm"
