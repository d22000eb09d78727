"""Blender meshes as static triangle colliders, simulated: a bowl, a ramp, a keyframed paddle.

Scenes are built with bpy, converted with ``convert_scene`` and run with the default (OpenCL) engine.
Bodies are 27-particle cubes (side 3 diameters), like the engine tests.
"""
from __future__ import annotations

import math

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import bpy  # noqa: E402
import bmesh  # noqa: E402

from addon.blender.add_bodies import object_matrix_at  # noqa: E402
from addon.blender.convert import convert_scene  # noqa: E402
from addon.core import SimulationSettings  # noqa: E402
from addon.core.simulation import Simulation  # noqa: E402

G = 9.81
FPS = 24

@pytest.fixture
def scene():
    bpy.ops.wm.read_factory_settings(use_empty=True)
    sc = bpy.context.scene
    sc.render.fps = FPS
    sc.frame_set(1)
    return sc


def active():
    return bpy.context.view_layer.objects.active


def simulate(dynamic, static, frames, radius, frame_step=1, sleep_speed=0.02):
    conv = convert_scene(bpy.context, dynamic, static, radius=radius, frame_start=1,
                         frame_end=1 + frames * frame_step, frame_step=frame_step)
    sim = Simulation(conv.model, SimulationSettings(gravity=(0, 0, -G), sleep_speed=sleep_speed),
                     frame_rate=FPS / frame_step)
    results = list(sim.frames(conv.frame_count))
    positions = np.array([r.positions for r in results])  # (F, B, 3)
    orientations = np.array([r.orientations for r in results])
    return conv, positions, orientations


def test_body_dropped_into_a_bowl_comes_to_rest_inside(scene):
    # a hemispherical bowl (open mesh: the upper half of a UV sphere removed), rim at z = 1.2
    bpy.ops.mesh.primitive_uv_sphere_add(radius=1.2, segments=32, ring_count=16, location=(0, 0, 1.2))
    bowl = active()
    bm = bmesh.new()
    bm.from_mesh(bowl.data)
    bmesh.ops.delete(bm, geom=[v for v in bm.verts if v.co.z > 1e-6], context="VERTS")
    bm.to_mesh(bowl.data)
    bm.free()
    bpy.ops.mesh.primitive_cube_add(size=0.3, location=(0.45, 0.2, 1.3), rotation=(0.3, 0.5, 0.1))
    cube = active()
    conv, pos, _ = simulate([cube], [bowl], frames=3 * FPS, radius=0.05)
    assert conv.colliders == [bowl.name] and conv.bodies[0].particle_count == 27
    centre = np.array([0, 0, 1.2])
    path = pos[:, 0]
    # it never left the bowl: always inside the sphere, and never below it
    assert np.all(np.linalg.norm(path - centre, axis=1) < 1.2)
    final = path[-1]
    # at rest in the lower part of the bowl (friction 0.5 holds a cube on slopes up to ~27 degrees,
    # i.e. within ~0.5 m of the axis here), about half a cube above the surface
    speed = np.linalg.norm(path[-1] - path[-4]) / (3 / FPS)
    assert speed < 0.05, speed
    assert np.hypot(final[0], final[1]) < 0.55, final
    assert 0.1 < final[2] < 0.45, final
    surface_gap = 1.2 - np.linalg.norm(final - centre)
    assert 0.1 < surface_gap < 0.3, surface_gap  # resting on it, not sunk in or floating


def ramp_run(scene, angle_degrees, seconds):
    theta = math.radians(angle_degrees)
    bpy.ops.mesh.primitive_plane_add(size=12.0, rotation=(theta, 0, 0))  # rises towards +y
    ramp = active()
    normal = np.array([0.0, -math.sin(theta), math.cos(theta)])
    side = 1.0
    bpy.ops.mesh.primitive_cube_add(size=side, location=tuple(normal * side / 2), rotation=(theta, 0, 0))
    cube = active()
    # sleeping off: a cube creeping down the ramp must show, not be frozen once slow
    conv, pos, _ = simulate([cube], [ramp], frames=int(seconds * FPS), radius=side / 6, sleep_speed=0.0)
    downhill = np.array([0.0, -math.cos(theta), -math.sin(theta)])
    times = np.arange(len(pos)) / FPS
    settle = int(0.3 * FPS)
    distances = (pos[settle:, 0] - pos[settle, 0]) @ downhill
    height = (pos[:, 0] @ normal)
    return times[settle:] - times[settle], distances, height, theta


def test_cube_sticks_on_a_20_degree_ramp_mesh(scene):
    _, distances, height, _ = ramp_run(scene, 20.0, 1.3)
    assert abs(distances[-1]) < 2e-3, distances
    assert np.all(np.abs(height - 0.5) < 0.05)  # resting on the ramp's surface, not through it


def test_cube_slides_down_a_35_degree_ramp_mesh_with_coulomb_acceleration(scene):
    times, distances, height, theta = ramp_run(scene, 35.0, 1.3)
    expected = G * (math.sin(theta) - 0.5 * math.cos(theta))  # friction 0.5 (defaults) on both
    a = 2 * np.polyfit(times, distances, 2)[0]
    assert abs(a - expected) < 0.1 * expected, (a, expected)
    assert np.all(np.abs(height - 0.5) < 0.05)


def test_keyframed_paddle_pushes_a_body(scene):
    bpy.ops.mesh.primitive_plane_add(size=10.0)
    ground = active()
    bpy.ops.mesh.primitive_cube_add(size=0.6, location=(0.0, 0.0, 0.3))
    body = active()
    # a wall-like paddle sweeping along +x through the body's place, parented to an animated empty
    bpy.ops.object.empty_add(location=(-1.0, 0.0, 0.0))
    driver = active()
    bpy.ops.mesh.primitive_cube_add(size=1.0, location=(-1.0, 0.0, 0.4))
    paddle = active()
    paddle.scale = (0.2, 1.5, 0.8)
    paddle.parent = driver
    paddle.matrix_parent_inverse = driver.matrix_world.inverted()
    driver.keyframe_insert("location", frame=1)
    driver.location = (1.0, 0.0, 0.0)
    driver.keyframe_insert("location", frame=1 + FPS)  # 2 m in 1 s
    for fc in _fcurves(driver):
        for key in fc.keyframe_points:
            key.interpolation = "LINEAR"
    bpy.context.view_layer.update()
    conv, pos, _ = simulate([body], [ground, paddle], frames=int(1.5 * FPS), radius=0.1)
    meshes = {c.object_name: c for c in conv.collider_meshes}
    assert meshes[paddle.name].frames is not None and meshes[ground.name].frames is None
    path = pos[:, 0]
    paddle_x = meshes[paddle.name].frames[:, :, 0].max(axis=1)  # front face of the paddle
    # pushed: it ends well beyond where it started, in front of the paddle's front face
    assert path[-1, 0] > 0.8, path[-1]
    front = min(FPS, len(path) - 1)
    assert path[front, 0] >= paddle_x[front] + 0.3 - 0.05
    # and it stayed on the ground
    assert np.all(path[:, 2] > 0.2)


def _fcurves(obj):
    action = obj.animation_data.action
    if hasattr(action, "fcurves") and "slots" not in type(action).bl_rna.properties:
        return list(action.fcurves)
    out = []
    for layer in action.layers:
        for strip in layer.strips:
            for slot in action.slots:
                bag = strip.channelbag(slot)
                if bag is not None:
                    out.extend(bag.fcurves)
    return out


def test_baked_origin_follows_the_simulated_body(scene):
    """Origin-offset, rotated, scaled object on a ramp: the matrix from object_matrix_at keeps the
    particles fixed to the object at every frame."""
    bpy.ops.mesh.primitive_plane_add(size=8.0, rotation=(math.radians(30), 0, 0))
    ramp = active()
    ramp_normal = np.array([0.0, -math.sin(math.radians(30)), math.cos(math.radians(30))])
    bpy.ops.mesh.primitive_cube_add(size=1.0)
    obj = active()
    for v in obj.data.vertices:
        v.co = (v.co.x * 0.3 + 0.4, v.co.y * 0.3, v.co.z * 0.3 - 0.2)
    obj.location = (0.2, 0.0, 1.5)  # its particles start 0.5 m or more above the ramp
    obj.rotation_euler = (0.4, 0.1, 0.7)
    obj.scale = (1.0, 1.0, 1.5)
    bpy.context.view_layer.update()
    conv, pos, ori = simulate([obj], [ramp], frames=FPS, radius=0.05)
    link = conv.bodies[0]
    m0 = link.matrix_world
    model = conv.model
    first, count = model.body_first_particle[0], model.body_particle_count[0]
    local_particles = (model.particle_offset[first:first + count] + model.body_com_local[0])
    local = (np.c_[local_particles, np.ones(count)] @ np.linalg.inv(m0).T)
    from addon.core.rotations import quaternion_to_matrix

    moved = 0.0
    for f in range(0, len(pos), 6):
        m = object_matrix_at(link, pos[f, 0], ori[f, 0])
        expected = pos[f, 0] + model.particle_offset[first:first + count] @ quaternion_to_matrix(ori[f, 0]).T
        assert np.allclose((local @ m.T)[:, :3], expected, atol=1e-6)
        # never through the ramp: particle centres stay about a radius above its plane
        assert (expected @ ramp_normal).min() > 0.03
        moved = max(moved, np.linalg.norm(m[:3, 3] - m0[:3, 3]))
    assert moved > 0.5  # it did move (fell onto the ramp and slid/tumbled)
