"""Ten thousand bodies through the headless CLI (addon/cli.py), baked to instances (the Bake To
target for scenes this size): the point cache holds every body's pose on every frame, every body
fell as gravity and the ground allow from where the scene put it, and the baked file plays them
without the add-on. Few frames keep it cheap (about 20 s on 2 cores); the default contacts."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from test_register_cli import ROOT

from addon.core import point_cache  # noqa: E402
from sample_scenes.generate import dice_layout  # noqa: E402

BODIES = 10_000
FRAMES = (1, 6)  # 5 frames at 24 fps: the three lowest layers of cubes land, the others still fall
G = 9.81

# In a fresh interpreter that never imports the add-on: the instances' origins at frame sys.argv[2].
PLAY = """
    import json, sys
    import bpy
    bpy.ops.wm.open_mainfile(filepath=sys.argv[1], load_ui=False)
    assert not hasattr(bpy.types.Scene, "prb_settings"), "the add-on must not be registered here"
    bpy.context.scene.frame_set(int(sys.argv[2]))
    deps = bpy.context.evaluated_depsgraph_get()
    origins = [list(inst.matrix_world.translation) for inst in deps.object_instances
               if inst.is_instance and inst.parent.original.name.startswith("PRB")]
    print("RESULT" + json.dumps(origins))
"""


def rows_sorted(points: np.ndarray) -> np.ndarray:
    return points[np.lexsort(points.T[::-1])]


@pytest.fixture(scope="module")
def baked(tmp_path_factory):
    """The large sample scene with BODIES cubes, baked by the CLI: (the CLI's process, output path)."""
    folder = tmp_path_factory.mktemp("ten_thousand")
    scene = folder / "large.blend"
    made = subprocess.run([sys.executable, "sample_scenes/generate.py", "large", "--count", str(BODIES),
                           "--frames", str(FRAMES[1]), "--output", str(scene)], cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=600)
    assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-2000:]
    out = folder / "baked.blend"
    proc = subprocess.run([sys.executable, "addon/cli.py", "--scene", str(scene), "--output", str(out),
                           "--bake-mode", "instances", "--frames", *map(str, FRAMES)], cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc, out


def test_the_cli_bakes_ten_thousand_bodies_to_a_cache_of_every_frame(baked):
    proc, out = baked
    assert f"PRB: baking {BODIES} objects" in proc.stdout
    assert f"Baked {BODIES} bodies" in proc.stdout
    (cache,) = (out.parent / "prb_cache").glob("*.pc2")
    header = point_cache.read_header(str(cache))
    samples = FRAMES[1] - FRAMES[0] + 1
    assert header["points"] == point_cache.POINTS_PER_BODY * BODIES and header["samples"] == samples
    per = point_cache.POINTS_PER_BODY
    first = point_cache.read_frame(str(cache), 0).reshape(BODIES, per, 3).astype(np.float64)
    last = point_cache.read_frame(str(cache), samples - 1).reshape(BODIES, per, 3).astype(np.float64)
    assert np.isfinite(first).all() and np.isfinite(last).all()
    # the first frame is where the scene put each cube
    np.testing.assert_allclose(rows_sorted(first[:, 0]), rows_sorted(dice_layout(BODIES)), atol=1e-5)
    # each pose's axes (the tips AXIS_LENGTH from the origin) stay unit length and at right angles
    x_axis, y_axis = last[:, 1] - last[:, 0], last[:, 2] - last[:, 0]
    np.testing.assert_allclose(np.linalg.norm(x_axis, axis=1), point_cache.AXIS_LENGTH, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(y_axis, axis=1), point_cache.AXIS_LENGTH, atol=1e-5)
    assert np.abs(np.einsum("ij,ij->i", x_axis, y_axis)).max() < 1e-5

    seconds = (FRAMES[1] - FRAMES[0]) / 24.0
    free_fall = 0.5 * G * seconds**2
    drop = first[:, 0, 2] - last[:, 0, 2]
    # every body moved: the lowest layer, 5 cm above the ground, lands on it (a solid cube tipped by the
    # one landing on its edge rises by a few millimetres: 5 mm at 0.85 degrees), the others fall further
    assert drop.min() > 0.04, "every body moved"
    assert drop.max() < free_fall + 1e-4, "none faster than gravity"
    # none sinks into the ground: the cubes' half side less 1 cm (3.7 mm measured after landing)
    assert last[:, 0, 2].min() > 0.49
    # the layers above 4 m meet nothing in these frames (5 cm apart, stopped one after the other from
    # the ground up: with solid contacts the fourth layer, at 3.7 m, is reached in the last frame): free fall,
    # straight down
    untouched = first[:, 0, 2] > 4.0
    assert untouched.sum() >= 0.6 * BODIES
    np.testing.assert_allclose(drop[untouched], free_fall, atol=1e-4)
    np.testing.assert_allclose(last[untouched, 0, :2], first[untouched, 0, :2], atol=1e-6)


def test_the_baked_file_plays_the_ten_thousand_bodies_without_the_add_on(baked):
    _, out = baked
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    played = subprocess.run([sys.executable, "-c", textwrap.dedent(PLAY), str(out), str(FRAMES[1])],
                            cwd=out.parent, env=env, capture_output=True, text=True, timeout=300)
    assert played.returncode == 0, played.stdout[-2000:] + played.stderr[-2000:]
    origins = np.array(json.loads(played.stdout.split("RESULT", 1)[1]))
    (cache,) = (out.parent / "prb_cache").glob("*.pc2")
    cached = point_cache.read_frame(str(cache), FRAMES[1] - FRAMES[0]).reshape(BODIES, -1, 3)[:, 0]
    assert origins.shape == (BODIES, 3)
    np.testing.assert_allclose(rows_sorted(origins), rows_sorted(cached.astype(np.float64)), atol=1e-4)
