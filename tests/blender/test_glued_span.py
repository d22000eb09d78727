"""Issue 47's Blender-authored destruction scenes, baked as they are (no roles set by the add-on),
beside Bullet's outcome on the same scene (stepped with frame_set in this bpy before the bake):
a span of six cubes between two PASSIVE pillars, glued by Blender's own Connect (breakable FIXED
constraints), holds under gravity; the same span without the glue falls; a heavy block dropped on
the glued span breaks it, by the panel's operator and by the CLI with no role flags alike. (An
Animated body released at a frame: test_rigid_body_world.py.)"""
from __future__ import annotations

import bpy
import numpy as np
import pytest

from test_register_cli import run_python

from addon.blender import panels

FRAMES = 30
PIECES = [(-1.25 + 0.5 * k, 0.0, 3.0) for k in range(6)]  # 0.5 m cubes, x from -1.5 to 1.5
PILLARS = [(-2.0, 0.0, 2.0), (2.0, 0.0, 2.0)]  # 0.5 x 0.5 x 2.5 m, their tops at 3.25 m
# Blender's units: an impulse per Bullet substep (1/240 s here). The span's own weight loads its
# rows with at most about 0.2 (the bending at a pillar: 3 kg x g x 1.5 m / 240); the block's impact
# with hundreds
THRESHOLD = 2.0


def span_scene(glued: bool, heavy_block: bool):
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    bpy.ops.rigidbody.world_add()
    scene.rigidbody_world.point_cache.frame_start, scene.rigidbody_world.point_cache.frame_end = 1, FRAMES
    objects = []
    for k, location in enumerate(PILLARS):
        bpy.ops.mesh.primitive_cube_add(size=1.0, location=location, scale=(0.25, 0.25, 1.25))
        pillar = bpy.context.object
        pillar.name = f"Pillar{k}"
        bpy.ops.rigidbody.object_add()
        pillar.rigid_body.type = "PASSIVE"
        pillar.rigid_body.collision_shape = "BOX"
        objects.append(pillar)
    pieces = []
    for k, location in enumerate(PIECES):
        bpy.ops.mesh.primitive_cube_add(size=0.5, location=location)
        piece = bpy.context.object
        piece.name = f"Piece{k}"
        bpy.ops.rigidbody.object_add()
        piece.rigid_body.collision_shape = "BOX"  # 1 kg, Blender's default
        pieces.append(piece)
    if glued:
        # Blender's Connect on each pair of neighbours (pillar, six pieces, pillar): a FIXED
        # constraint at the midpoint of their centres
        chain = [objects[0], *pieces, objects[1]]
        for one, two in zip(chain, chain[1:]):
            for obj in bpy.context.selected_objects:
                obj.select_set(False)
            one.select_set(True)
            two.select_set(True)
            bpy.context.view_layer.objects.active = one
            bpy.ops.rigidbody.connect(con_type="FIXED", pivot_type="CENTER")
        for constraint in scene.rigidbody_world.constraints.objects:
            constraint.rigid_body_constraint.use_breaking = True
            constraint.rigid_body_constraint.breaking_threshold = THRESHOLD
    if heavy_block:
        bpy.ops.mesh.primitive_cube_add(size=0.5, location=(0.25, 0.0, 4.5))
        block = bpy.context.object
        block.name = "Heavy"
        bpy.ops.rigidbody.object_add()
        block.rigid_body.collision_shape = "BOX"
        block.rigid_body.mass = 200.0
    scene.frame_set(1)
    return scene, pieces


def heights(scene, pieces) -> np.ndarray:
    """(frames, pieces) z of each piece at frames 1..FRAMES as Blender shows them (Bullet while the
    world is on, the keys once the bake turned it off)."""
    out = []
    for frame in range(1, FRAMES + 1):
        scene.frame_set(frame)
        out.append([p.matrix_world.translation.z for p in pieces])
    scene.frame_set(1)
    return np.array(out)


def bake_with_panel():
    panels._summary["stale"] = True
    assert bpy.ops.prb.simulate_bake() == {"FINISHED"}


def test_connect_glues_the_span_to_its_pillars(registered):
    scene, _ = span_scene(glued=True, heavy_block=False)
    assert len(scene.rigidbody_world.constraints.objects) == 7  # pillar, 5 between pieces, pillar
    panels._summary["stale"] = True
    from prb_helpers import draw_labels

    assert "6 active, 2 passive, 7 constraints from the Rigid Body world" in draw_labels(panels.PRB_PT_main)


def test_the_glued_span_holds_under_gravity_as_in_bullet(registered):
    scene, pieces = span_scene(glued=True, heavy_block=False)
    bullet = heights(scene, pieces)
    bake_with_panel()
    ours = heights(scene, pieces)
    print("sag at the last frame, Bullet:", (3.0 - bullet[-1]).round(4).tolist())
    print("sag at the last frame, ours:  ", (3.0 - ours[-1]).round(4).tolist())
    assert np.abs(bullet - 3.0).max() < 0.02
    assert np.abs(ours - 3.0).max() < 0.02


def test_the_span_without_glue_falls_as_in_bullet(registered):
    scene, pieces = span_scene(glued=False, heavy_block=False)
    bullet = heights(scene, pieces)
    bake_with_panel()
    ours = heights(scene, pieces)
    # nothing under it: free fall for the 29 frames, 9.81 x (29 / 24)^2 / 2 = 7.2 m (no ground)
    fall = 9.81 * (29 / 24) ** 2 / 2
    assert np.allclose(3.0 - bullet[-1], fall, rtol=0.02)
    assert np.allclose(3.0 - ours[-1], fall, rtol=0.02)


def _broken_span(bullet: np.ndarray, ours: np.ndarray):
    """The block lands on the fourth piece: in both the glue breaks and that piece falls with the block,
    more than 2 m by the last frame. Beside each other (printed): Bullet breaks that piece's two
    constraints alone and the rest of the span holds; ours breaks them too, then the falling piece,
    whose contacts with its neighbours come back with its joints gone, drags them down and the span
    breaks at the pillars as well, so that all of it falls (the known difference,
    docs/experiments/impact-breaking.md)."""
    print("drop at the last frame, Bullet:", (3.0 - bullet[-1]).round(3).tolist())
    print("drop at the last frame, ours:  ", (3.0 - ours[-1]).round(3).tolist())
    for heights_at_end in (bullet[-1], ours[-1]):
        assert 3.0 - heights_at_end[3] > 2.0


def test_a_heavy_block_dropped_on_the_glued_span_breaks_it_beside_bullet(registered):
    scene, pieces = span_scene(glued=True, heavy_block=True)
    bullet = heights(scene, pieces)
    bake_with_panel()
    ours = heights(scene, pieces)
    _broken_span(bullet, ours)


def test_the_cli_bakes_the_heavy_block_scene_with_no_role_flags(registered, tmp_path):
    scene, pieces = span_scene(glued=True, heavy_block=True)
    bullet = heights(scene, pieces)
    names = [p.name for p in pieces]
    path, out = tmp_path / "span.blend", tmp_path / "span.baked.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    proc = run_python("import sys; from addon import cli; sys.exit(cli.main(['cli', *sys.argv[1:]]))",
                      "--scene", str(path), "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "7 active, 2 passive, 7 constraints from the Rigid Body world" in proc.stdout
    broken = [line for line in proc.stdout.splitlines() if "constraints broke" in line]
    assert broken and not broken[-1].rstrip().endswith("0 of 7 constraints broke"), proc.stdout[-2000:]
    bpy.ops.wm.open_mainfile(filepath=str(out))
    scene = bpy.context.scene
    assert not scene.rigidbody_world.enabled
    ours = heights(scene, [bpy.data.objects[name] for name in names])
    _broken_span(bullet, ours)


def test_the_glued_span_bakes_to_instances_as_to_keyframes(registered, tmp_path):
    """Issue 47's both bake modes: the span hit by the block baked to keyframes, then to instances
    (its cache beside the saved .blend): the same constraints broken, the same last poses."""
    from addon.blender import bake_objects, bake_options, rigid_body_world
    from addon.blender.clear_bake import clear_bakes
    from addon.blender.job import BakeJob

    scene, _ = span_scene(glued=True, heavy_block=True)
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "span.blend"))
    jobs, results = [], []
    for mode in ("KEYFRAMES", "INSTANCES"):
        world = bake_options.read_world(scene)
        dynamic, static = bake_objects.pick_objects(bpy.context, world=world)
        job = BakeJob(bpy.context, dynamic, static, bake_options.BakeOptions.from_scene(scene, bake_mode=mode),
                      world=world)
        results.append(job.run())
        jobs.append(job)
        if mode == "KEYFRAMES":
            clear_bakes(job.objects)
            rigid_body_world.restore_world(scene)
    keyed, instanced = results
    assert keyed.constraints == instanced.constraints == 7
    assert instanced.constraints_broken == keyed.constraints_broken > 0
    assert instanced.cache_object and bpy.data.objects.get(instanced.cache_object) is not None
    # the instance bake streams its frames to the cache and keeps the last one
    np.testing.assert_allclose(jobs[1].world_matrices()[-1], jobs[0].world_matrices()[-1], atol=1e-6)
