"""Glue set on objects and collections (Object.prb.glue, Collection.prb_glue) read into the model's bonds
on conversion: by convert_scene, in a Rigid Body world's ACTIVE objects, from a saved .blend by the
CLI; a bad strength refused naming the object; the panels show it."""
from __future__ import annotations

import math

import bpy
import numpy as np
import pytest

from prb_helpers import StrictLayout, add_cube, draw_panel, fresh_scene
from test_register_cli import run_python

from addon.blender import panels
from addon.blender.convert import ConversionError, convert_scene
from addon.blender.rigid_body_world import read_world
from addon.core.glue import DEFAULT_GLUE_STRENGTH
from addon.core.joints import DEFAULT_BULLET_SUBSTEP

R = 0.05  # a 0.3 m cube is 3 x 3 x 3 particles
FACE = (6 * R) ** 2  # a cube's face: 9 voxel faces


def collection(name, glue=False, strength=DEFAULT_GLUE_STRENGTH, group=""):
    coll = bpy.data.collections.new(name)
    bpy.context.scene.collection.children.link(coll)
    coll.prb_glue.use_glue, coll.prb_glue.glue_strength, coll.prb_glue.glue_group = glue, strength, group
    return coll


def row_of_cubes(coll, names, first_x=0.0):
    """0.3 m cubes in a row along x, face to face, moved into ``coll``."""
    cubes = []
    for k, name in enumerate(names):
        cube = add_cube(name, (first_x + 0.3 * k, 0.0, 1.0), size=0.3)
        for other in cube.users_collection:
            other.objects.unlink(cube)
        coll.objects.link(cube)
        cubes.append(cube)
    bpy.context.view_layer.update()
    return cubes


def bonds(objects):
    """((name a, name b), threshold) of each bond of the converted objects."""
    conv = convert_scene(bpy.context, objects, [], radius=R, frame_start=1, frame_end=2)
    joints = conv.model.joints
    name = {link.body_index: link.object_name for link in conv.bodies}
    if joints is None:
        assert conv.bond_count == 0
        return {}
    assert conv.bond_count == joints.count
    return {tuple(sorted((name[a], name[b]))): t for a, b, t in
            zip(joints.body_a, joints.body_b, joints.breaking_threshold)}


def threshold(strength):
    return strength * FACE * DEFAULT_BULLET_SUBSTEP


def test_a_collections_glue_bonds_its_touching_pieces(registered):
    fresh_scene()
    wall = collection("Wall", glue=True, strength=200_000.0)
    loose = collection("Loose")
    cubes = row_of_cubes(wall, ["A", "B", "C"]) + row_of_cubes(loose, ["D"], first_x=0.9)
    found = bonds(cubes)
    assert set(found) == {("A", "B"), ("B", "C")}
    assert np.allclose(list(found.values()), threshold(200_000.0))
    wall.prb_glue.use_glue = False
    assert bonds(cubes) == {}


def test_an_objects_own_glue_overrides_its_collections(registered):
    """D (a collection without glue) glued on its own into Wall's group bonds to C with the weaker
    strength; B set Not Glued leaves Wall's glue."""
    fresh_scene()
    wall = collection("Wall", glue=True, strength=200_000.0)
    loose = collection("Loose")
    a, b, c = row_of_cubes(wall, ["A", "B", "C"])
    (d,) = row_of_cubes(loose, ["D"], first_x=0.9)
    d.prb.glue, d.prb.glue_strength, d.prb.glue_group = "ON", 50_000.0, "Wall"
    b.prb.glue = "OFF"
    found = bonds([a, b, c, d])
    assert set(found) == {("C", "D")}
    assert math.isclose(found["C", "D"], threshold(50_000.0))
    d.prb.glue_group = ""  # its own collection's name: Loose, another group
    assert set(bonds([a, b, c, d])) == set()


def test_pieces_of_two_glued_collections_bond_only_within_each_unless_grouped(registered):
    fresh_scene()
    left, right = collection("Left", glue=True), collection("Right", glue=True)
    cubes = row_of_cubes(left, ["A", "B"]) + row_of_cubes(right, ["C", "D"], first_x=0.6)
    assert set(bonds(cubes)) == {("A", "B"), ("C", "D")}
    left.prb_glue.glue_group = right.prb_glue.glue_group = "Tower"
    assert set(bonds(cubes)) == {("A", "B"), ("B", "C"), ("C", "D")}


def test_a_rigid_body_worlds_active_objects_are_glued(registered):
    """A Rigid Body world's ACTIVE cubes take their collection's glue (the add-on's setting) through the
    world's path (its settings, strict)."""
    fresh_scene()
    bpy.ops.rigidbody.world_add()
    wall = collection("Wall", glue=True)
    cubes = row_of_cubes(wall, ["A", "B", "C"])
    for cube in cubes:
        bpy.context.view_layer.objects.active = cube
        bpy.ops.rigidbody.object_add()
    world = read_world(bpy.context.scene)
    assert [o.name for o in world.active] == ["A", "B", "C"]
    conv = convert_scene(bpy.context, world.active, world.passive, radius=R, frame_start=1, frame_end=2,
                         settings_of=world.settings.__getitem__, strict=True)
    assert conv.bond_count == 2 and conv.model.joints.count == 2
    assert np.allclose(conv.model.joints.breaking_threshold, threshold(DEFAULT_GLUE_STRENGTH))


def test_a_non_finite_strength_is_refused_naming_the_object(registered):
    fresh_scene()
    wall = collection("Wall", glue=True)
    cubes = row_of_cubes(wall, ["A", "B"])
    cubes[1].prb.glue = "ON"
    cubes[1].prb.glue_strength = float("inf")
    if math.isfinite(cubes[1].prb.glue_strength):  # this Blender clamps an infinity to the float range's end
        cubes[1].prb.glue_strength = float("nan")
    if not math.isnan(cubes[1].prb.glue_strength) and math.isfinite(cubes[1].prb.glue_strength):
        pytest.fail(f"Blender stored {cubes[1].prb.glue_strength} for an infinite and a NaN strength")
    before = [tuple(c.matrix_world.translation) for c in cubes]
    with pytest.raises(ConversionError, match='Object "B": glue strength must be a finite number'):
        bonds(cubes)
    assert [tuple(c.matrix_world.translation) for c in cubes] == before


def test_the_panels_show_an_objects_glue_and_its_collections(registered):
    fresh_scene()
    wall = collection("Wall", glue=True, strength=300_000.0)
    (a,) = row_of_cubes(wall, ["A"])
    bpy.context.view_layer.objects.active = a
    layout = StrictLayout()
    assert draw_panel(panels.PRB_PT_object, layout)
    assert {("PRB_ObjectSettings", "glue"), ("PRB_CollectionGlue", "use_glue")} <= layout.drawn.props
    assert 'Collection "Wall"' in layout.drawn.labels
    a.prb.glue = "ON"
    layout = StrictLayout()
    draw_panel(panels.PRB_PT_object_properties, layout)
    assert ("PRB_ObjectSettings", "glue_strength") in layout.drawn.props
    assert 'Group: "Wall" (its collection)' in layout.drawn.labels
    layout = StrictLayout()
    panels.draw_collection_glue(layout, wall)
    assert layout.drawn.props == {("PRB_CollectionGlue", p) for p in ("use_glue", "glue_strength", "glue_group")}
    a.prb.role = "STATIC"  # a collider is never glued: no glue to show
    layout = StrictLayout()
    draw_panel(panels.PRB_PT_object_properties, layout)
    assert not any(prop.startswith("glue") for _, prop in layout.drawn.props)


def test_the_cli_bakes_the_glue_saved_in_the_blend(registered, tmp_path):
    """The CLI reads the collection's glue from the .blend: its two cubes bake bonded."""
    fresh_scene(1, 3)
    wall = collection("Wall", glue=True)
    row_of_cubes(wall, ["A", "B"])
    bpy.context.scene.prb_settings.radius_mode = "MANUAL"
    bpy.context.scene.prb_settings.particle_radius = R
    path = tmp_path / "glued.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    out = tmp_path / "out.blend"
    proc = run_python("""
        import sys
        from addon import cli
        sys.exit(cli.command(sys.argv[1:]))
    """, "bake", "--scene", str(path), "--collection", "Wall", "--frames", "1", "3", "--output", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PRB: 2 bodies, 1 glue bonds," in proc.stdout, proc.stdout
