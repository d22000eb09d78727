"""Blender objects -> particle bodies and triangle colliders (addon.blender.convert), with the bpy module."""
from __future__ import annotations

import math

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import bpy  # noqa: E402
from mathutils import Matrix  # noqa: E402
from mathutils.bvhtree import BVHTree  # noqa: E402
from mathutils.kdtree import KDTree  # noqa: E402

from addon.blender import add_bodies, body_geometry, scene_objects  # noqa: E402
from addon.blender.add_bodies import object_matrix_at  # noqa: E402
from addon.blender.convert import ConversionError, convert_scene  # noqa: E402
from addon.core import voxelize as vox  # noqa: E402
from addon.core.rotations import quaternion_to_matrix  # noqa: E402
from addon.core.settings import SimulationSettings  # noqa: E402
from addon.core.simulation import Simulation  # noqa: E402


@pytest.fixture
def scene():
    bpy.ops.wm.read_factory_settings(use_empty=True)
    sc = bpy.context.scene
    sc.frame_start, sc.frame_end = 1, 50
    sc.frame_set(1)
    return sc


def run(dynamic, static=(), **kw):
    kw.setdefault("frame_start", 1)
    kw.setdefault("frame_end", 10)
    return convert_scene(bpy.context, list(dynamic), list(static), **kw)


def active():
    return bpy.context.view_layer.objects.active


def world_particles(model, b):
    first, count = model.body_first_particle[b], model.body_particle_count[b]
    rot = quaternion_to_matrix(model.body_orientation[b])
    return model.body_position[b] + model.particle_offset[first:first + count] @ rot.T


def world_mesh(obj):
    dg = bpy.context.evaluated_depsgraph_get()
    v, t = scene_objects.read_evaluated_mesh(obj, dg)
    m = np.array(obj.matrix_world)
    return v @ m[:3, :3].T + m[:3, 3], t


def test_primitives_counts_volumes_and_mass(scene):
    d = 0.1
    bpy.ops.mesh.primitive_cube_add(size=0.3, location=(0, 0, 1), rotation=(0.4, -0.3, 1.1))
    cube = active()
    bpy.ops.mesh.primitive_uv_sphere_add(radius=1.0, segments=48, ring_count=24, location=(3, 0, 1))
    sphere = active()
    bpy.ops.mesh.primitive_torus_add(major_radius=1.0, minor_radius=0.3, major_segments=64, minor_segments=24,
                                     location=(6, 0, 1))
    torus = active()
    bpy.ops.mesh.primitive_monkey_add(size=2.0, location=(10, 0, 1))
    monkey = active()
    conv = run([cube, sphere, torus, monkey], radius=d / 2)
    assert conv.radius == d / 2 and not conv.skipped
    links = {link.object_name: link for link in conv.bodies}
    model = conv.model

    # a rotated cube of side 3 diameters: the seed's 27 particles, along its own edges
    c = links["Cube"]
    assert c.particle_count == 27 and c.mode == "filled"
    local = (world_particles(model, c.body_index) - np.array(cube.location)) @ np.array(cube.matrix_world)[:3, :3]
    assert np.allclose(np.sort(np.unique(np.round(local / d, 6))), [-1, 0, 1])
    assert math.isclose(model.body_mass[c.body_index], 1000 * 0.3**3, rel_tol=1e-5)  # default density

    for name, analytic in [("Sphere", 4 / 3 * math.pi), ("Torus", 2 * math.pi**2 * 1.0 * 0.3**2)]:
        link = links[name]
        v, t = world_mesh(bpy.data.objects[name])
        mesh_volume = abs(vox.signed_volume(v, t))
        assert abs(mesh_volume - analytic) / analytic < 0.02
        assert link.mode == "filled"
        assert abs(link.particle_count * d**3 - mesh_volume) / mesh_volume < 0.05, name
        # mass from the density and the mesh volume, not the voxel count
        assert math.isclose(model.body_mass[link.body_index], 1000 * mesh_volume, rel_tol=1e-6)
    # the torus' hole stays empty
    p = world_particles(model, links["Torus"].body_index) - np.array(torus.location)
    radial = np.hypot(p[:, 0], p[:, 1])
    assert radial.min() > 0.7 - 1e-6 and np.hypot(radial - 1.0, p[:, 2]).max() < 0.3

    # Suzanne is an open mesh: a shell on her surface, covering it
    m = links["Suzanne"]
    assert m.mode == "shell"
    v, t = world_mesh(monkey)
    bvh = BVHTree.FromPolygons(v.tolist(), t.tolist())
    pts = world_particles(model, m.body_index)
    dist = np.array([bvh.find_nearest(p.tolist())[3] for p in pts])
    assert dist.max() <= math.sqrt(3) / 2 * d + 1e-6
    tree = KDTree(len(pts))
    for i, p in enumerate(pts):
        tree.insert(p.tolist(), i)
    tree.balance()
    samples = np.concatenate(list(vox.surface_samples(v, t, d / 2)))
    gap = max(tree.find(s.tolist())[2] for s in samples)
    assert gap <= math.sqrt(3) / 2 * d + 1e-6
    # each body's centre of mass is its particles' mean, and BodyLink mirrors the model
    for link in conv.bodies:
        assert np.allclose(link.com_local, model.body_com_local[link.body_index])
        assert np.allclose(link.com_local, world_particles(model, link.body_index).mean(axis=0))
    assert conv.particle_count == model.particle_count == sum(link.particle_count for link in conv.bodies)


def test_curves_text_and_modifiers_use_the_evaluated_mesh(scene):
    bpy.ops.mesh.primitive_cube_add(size=0.4)
    cube = active()
    mod = cube.modifiers.new("Array", "ARRAY")
    mod.count = 3
    mod.relative_offset_displace = (1.0, 0.0, 0.0)
    bpy.ops.curve.primitive_bezier_circle_add(radius=1.0, location=(0, 5, 0))
    curve = active()
    curve.data.bevel_depth = 0.2
    curve.data.bevel_resolution = 4
    bpy.ops.object.text_add(location=(0, -5, 0))
    text = active()
    text.data.extrude = 0.1
    conv = run([cube, curve, text], radius=0.05)
    links = {link.object_name: link for link in conv.bodies}
    assert set(links) == {cube.name, curve.name, text.name}
    # the array makes a 1.2 x 0.4 x 0.4 box: 12 x 4 x 4 particles
    assert links["Cube"].particle_count == 12 * 4 * 4 and links["Cube"].mode == "filled"
    # a tube of radius 0.2 around a circle of radius 1: volume 2 pi^2 R r^2
    tube = 2 * math.pi**2 * 1.0 * 0.2**2
    assert abs(links[curve.name].particle_count * 0.1**3 - tube) / tube < 0.1
    assert links[text.name].particle_count >= 8


def test_rotated_scaled_mirrored_origin_offset_object_maps_back_exactly(scene):
    d = 0.1
    bpy.ops.mesh.primitive_cube_add(size=1.0)
    obj = active()
    # move the geometry away from the origin: the origin is not the centre of mass
    for v in obj.data.vertices:
        v.co = (v.co.x * 0.2 + 0.7, v.co.y * 0.3 - 0.4, v.co.z * 0.4 + 0.25)
    obj.location = (1.0, -2.0, 3.0)
    obj.rotation_euler = (0.3, -0.7, 1.9)
    obj.scale = (-1.5, 1.0, 0.5)  # mirrored and non-uniform: box 0.3 x 0.3 x 0.2 in world
    bpy.context.view_layer.update()
    conv = run([obj], radius=d / 2)
    link = conv.bodies[0]
    assert link.particle_count == 3 * 3 * 2
    model = conv.model
    m0 = np.array(obj.matrix_world)
    assert np.allclose(link.matrix_world, m0)
    # particles in the object's own coordinates, fixed to it
    p0 = world_particles(model, 0)
    local = (np.c_[p0, np.ones(len(p0))] @ np.linalg.inv(m0).T)[:, :3]
    assert np.all(np.abs(local - (0.7, -0.4, 0.25)) <= (0.2, 0.3, 0.4))
    # its voxels are whole boxes along the object's own (rotated, mirrored) axes: sharp against
    # colliders (core.voxel_corners)
    assert np.all(model.particle_corner_reach[:link.particle_count] == 1.0)
    lattice = quaternion_to_matrix(model.body_lattice_orientation[0])
    axes = m0[:3, :3] / np.linalg.norm(m0[:3, :3], axis=0)
    assert np.allclose(np.abs(lattice.T @ axes), np.eye(3), atol=1e-6)

    # simulate a tumbling body (no contacts) and follow it through object_matrix_at
    model.body_velocity[0] = (0.5, -0.2, 2.0)
    model.body_angular_velocity[0] = (3.0, -1.0, 2.0)
    sim = Simulation(model, SimulationSettings(gravity=(0, 0, -9.81)), frame_rate=24, substeps_per_frame=4,
                     backend="reference")
    checked = 0
    for frame in sim.frames(12):
        m = object_matrix_at(link, frame.positions[0], frame.orientations[0])
        particles_now = sim.engine.particle_positions()[:len(p0)]
        mapped = (np.c_[local, np.ones(len(local))] @ m.T)[:, :3]
        assert np.allclose(mapped, particles_now, atol=1e-9)
        # the origin follows the centre of mass rigidly
        origin = m[:3, 3]
        rot = quaternion_to_matrix(frame.orientations[0])
        assert np.allclose(origin, frame.positions[0] + rot @ (m0[:3, 3] - link.com_local), atol=1e-12)
        # the matrix keeps the object's scale and mirroring
        assert np.allclose(np.linalg.svd(m[:3, :3], compute_uv=False), [1.5, 1.0, 0.5])
        assert np.linalg.det(m[:3, :3]) < 0
        checked += 1
    assert checked == 13
    # Blender's own matrix (as the bake would write it) reproduces the particles as well
    obj.matrix_world = Matrix(m.tolist())
    bpy.context.view_layer.update()
    back = np.array(obj.matrix_world)
    assert np.allclose((np.c_[local, np.ones(len(local))] @ back.T)[:, :3], particles_now, atol=1e-5)


def test_mirrored_object_is_the_mirrored_shape(scene):
    """An asymmetric mesh mirrored by its object's scale, along one axis or three, becomes the same body
    (particles, mass, centre of mass, inertia, lattice axes) as that mesh mirrored in its data and
    placed with the same rotation and a positive scale."""
    d = 0.1
    bpy.ops.mesh.primitive_cone_add(vertices=7, radius1=0.35, radius2=0.1, depth=0.8)
    cone = active()
    base = np.array([tuple(v.co) for v in cone.data.vertices])
    shear = np.array([[1.0, 0.0, 0.45], [0.25, 1.0, 0.0], [0.0, 0.1, 1.0]])
    base = base @ shear.T + (0.2, -0.1, 0.05)  # no symmetry left
    cone.data.calc_loop_triangles()
    triangles = np.array([tuple(t.vertices) for t in cone.data.loop_triangles], dtype=np.int64)
    bpy.data.objects.remove(cone)

    def body(name, vertices, tris, location, scale):
        mesh = bpy.data.meshes.new(name)
        mesh.from_pydata(vertices.tolist(), [], tris.tolist())
        obj = bpy.data.objects.new(name, mesh)
        bpy.context.scene.collection.objects.link(obj)
        obj.location, obj.rotation_euler, obj.scale = location, (0.4, -0.9, 0.3), scale
        return obj

    pairs = []
    for k, scale in enumerate(((1.0, 1.0, -1.0), (-0.9, -1.2, -1.1))):
        mirrored = body(f"Mirrored{k}", base, triangles, (3.0 * k, 0.0, 1.0), scale)
        # the same shape in the data: vertices mirrored (faces reversed, so normals stay outward), scale positive
        flip = np.sign(scale)
        twin = body(f"Twin{k}", base * flip, triangles[:, ::-1] if np.prod(flip) < 0 else triangles,
                    (3.0 * k, 3.0, 1.0), tuple(np.abs(scale)))
        pairs.append((mirrored, twin))
    bpy.context.view_layer.update()
    conv = run([o for pair in pairs for o in pair], radius=d / 2)
    model = conv.model
    links = {link.object_name: link for link in conv.bodies}
    for mirrored, twin in pairs:
        det = [np.linalg.det(np.array(o.matrix_world)[:3, :3]) for o in (mirrored, twin)]
        assert det[0] < 0 < det[1]
        a, b = links[mirrored.name], links[twin.name]
        shift = np.array(twin.location) - np.array(mirrored.location)
        pa = world_particles(model, a.body_index)
        pb = world_particles(model, b.body_index) - shift
        assert a.particle_count == b.particle_count > 100
        gaps = np.linalg.norm(pa[:, None] - pb[None], axis=-1)
        nearest = gaps.argmin(axis=1)
        assert len(set(nearest.tolist())) == len(pa) and gaps.min(axis=1).max() < 1e-6  # one to one
        np.testing.assert_allclose(model.body_mass[a.body_index], model.body_mass[b.body_index], rtol=1e-9)
        np.testing.assert_allclose(model.body_position[a.body_index], model.body_position[b.body_index] - shift,
                                   atol=1e-9)
        np.testing.assert_allclose(model.body_inertia_local[a.body_index], model.body_inertia_local[b.body_index],
                                   atol=1e-9)
        lattice = [quaternion_to_matrix(model.body_lattice_orientation[link.body_index]) for link in (a, b)]
        np.testing.assert_allclose(np.abs(lattice[0]), np.abs(lattice[1]), atol=1e-6)  # the same axes
        # the mesh is no mirror image of itself: an unmirrored body would have other particles
        m = np.array(mirrored.matrix_world)
        local = (pa - m[:3, 3]) @ np.linalg.inv(m[:3, :3]).T
        flipped = local * np.sign(mirrored.scale)
        assert np.abs(np.sort(local, axis=0) - np.sort(flipped, axis=0)).max() > d


def test_object_matrix_at_is_blenders_composition():
    """T(x) R(q) T(-com) M0 composed by mathutils, independent of core.rotations."""
    from mathutils import Quaternion, Vector

    rng = np.random.default_rng(0)
    for b in range(4):
        m0 = np.eye(4)
        m0[:3, :3] = rng.normal(size=(3, 3))
        m0[:3, 3] = rng.normal(size=3)
        com, x, q = rng.normal(size=3), rng.normal(size=3), rng.normal(size=4)
        q /= np.linalg.norm(q)
        expected = (Matrix.Translation(Vector(x)) @ Quaternion(q).to_matrix().to_4x4()
                    @ Matrix.Translation(Vector(-com)) @ Matrix(m0.tolist()))
        link = add_bodies.BodyLink("o", b, m0, com)
        assert np.allclose(object_matrix_at(link, x, q), np.array(expected), atol=1e-12)


def test_skips_name_objects_and_reasons(scene):
    bpy.ops.object.empty_add()
    empty = active()
    bpy.ops.object.camera_add()
    camera = active()
    mesh = bpy.data.meshes.new("NoFaces")
    mesh.from_pydata([(0, 0, 0), (1, 0, 0), (0, 1, 0)], [(0, 1)], [])
    no_faces = bpy.data.objects.new("NoFaces", mesh)
    scene.collection.objects.link(no_faces)
    point = bpy.data.meshes.new("Point")
    point.from_pydata([(0, 0, 0)] * 3, [], [(0, 1, 2)])
    degenerate = bpy.data.objects.new("Degenerate", point)
    scene.collection.objects.link(degenerate)
    bpy.ops.mesh.primitive_cube_add(size=1.0)
    flat = active()
    flat.name = "ZeroScale"
    flat.scale = (1.0, 0.0, 1.0)
    bpy.ops.mesh.primitive_cube_add(size=1.0, location=(5, 0, 0))
    good = active()
    bpy.context.view_layer.update()
    conv = run([empty, camera, no_faces, degenerate, flat, good], radius=0.1)
    reasons = dict(conv.skipped)
    assert set(reasons) == {"Empty", "Camera", "NoFaces", "Degenerate", "ZeroScale"}
    assert "Empty" in reasons["Empty"] and "Camera" in reasons["Camera"]
    assert "faces" in reasons["NoFaces"] and "zero" in reasons["Degenerate"] and "zero scale" in reasons["ZeroScale"]
    assert [link.object_name for link in conv.bodies] == ["Cube"] and conv.bodies[0].particle_count == 125
    # all skipped: no bodies, no error from the conversion itself (the caller reports)
    conv = run([empty, degenerate], radius=0.1)
    assert conv.bodies == [] and len(conv.skipped) == 2


def test_particle_limit_refused_before_allocation(scene, monkeypatch):
    bpy.ops.mesh.primitive_cube_add(size=1.0)
    cube = active()
    bpy.ops.mesh.primitive_plane_add(size=1.0, location=(3, 0, 0))
    plane = active()
    voxelized = []
    real_voxelize = vox.voxelize
    monkeypatch.setattr(vox, "voxelize", lambda *a, **k: voxelized.append(a) or real_voxelize(*a, **k))
    with pytest.raises(ConversionError) as info:
        run([cube, plane], radius=0.5 * 1e-8 ** (1 / 3), max_particles=20_000_000)  # ~1e8 particles
    assert voxelized == []  # refused from the estimate, before any particle array exists
    msg = str(info.value)
    assert "more than the limit of 20,000,000" in msg and "100," in msg
    suggested = float(msg.rsplit("at least ", 1)[1].split()[0])
    conv_estimate = sum(body_geometry._frame_shape(*world_mesh(o), np.eye(3)).estimate(suggested) for o in (cube, plane))
    assert conv_estimate <= 20_000_000
    # the suggestion works (with a small limit to keep the test quick)
    with pytest.raises(ConversionError) as info:
        run([cube], radius=0.02, max_particles=5000)
    suggested = float(str(info.value).rsplit("at least ", 1)[1].split()[0])
    conv = run([cube], radius=suggested, max_particles=5000)
    assert 8 <= conv.particle_count <= 5000


def test_too_few_particles_and_automatic_radius(scene):
    bpy.ops.mesh.primitive_cube_add(size=0.6)
    small = active()
    bpy.ops.mesh.primitive_cube_add(size=2.0, location=(4, 0, 0))
    big = active()
    with pytest.raises(ConversionError) as info:
        run([small, big], radius=0.3)  # the small cube: one particle
    msg = str(info.value)
    assert "too few particles" in msg and "Cube" in msg
    suggested = float(msg.rsplit("at most ", 1)[1].split()[0])
    assert suggested <= 0.1
    conv = run([small, big], radius=suggested)
    assert min(link.particle_count for link in conv.bodies) >= 8
    # automatic: three particles across the smallest object
    conv = run([small, big])
    assert conv.radius_auto and math.isclose(conv.radius, 0.1, rel_tol=1e-6)
    counts = {link.object_name: link.particle_count for link in conv.bodies}
    assert counts == {"Cube": 27, "Cube.001": 10**3}


def test_a_converted_ball_has_itself_as_its_voxels_support_sphere(scene):
    """The support spheres (core.support_spheres) go to the model in world space with the particles:
    turned, scaled and mirrored with the object, a sphere's voxels near its surface have the ball
    (so it rolls, tests/core/test_support_spheres.py); a cube's none."""
    bpy.ops.mesh.primitive_uv_sphere_add(radius=0.5, segments=32, ring_count=16, location=(1.0, -2.0, 3.0),
                                         rotation=(0.3, -0.7, 1.9))
    ball = active()
    ball.scale = (-1.5, 1.5, 1.5)
    bpy.ops.mesh.primitive_cube_add(size=0.5, location=(5, 0, 1), rotation=(0.4, -0.3, 1.1))
    cube = active()
    bpy.context.view_layer.update()
    conv = run([ball, cube], radius=0.05)
    links = {link.object_name: link for link in conv.bodies}
    model = conv.model
    first = model.body_first_particle[links["Sphere"].body_index]
    spheres = model.particle_support_sphere[first:first + links["Sphere"].particle_count]
    has = spheres[:, 3] > 0
    assert has.sum() > 100
    centres = world_particles(model, links["Sphere"].body_index)[has] + spheres[has, :3]
    # Blender's vertices are float32: the fitted spheres within 0.1 mm
    assert np.allclose(centres, ball.location, atol=1e-4)
    assert np.allclose(spheres[has, 3], 0.75, atol=1e-4)
    first = model.body_first_particle[links["Cube"].body_index]
    assert not model.particle_support_sphere[first:first + links["Cube"].particle_count].any()


def test_linked_duplicates_convert_once(scene, monkeypatch):
    bpy.ops.mesh.primitive_uv_sphere_add(radius=0.5, segments=16, ring_count=8)
    src = active()
    objs = [src]
    rng = np.random.default_rng(1)
    for i in range(59):
        o = src.copy()  # shares the mesh datablock
        o.location = rng.uniform(-10, 10, 3)
        o.rotation_euler = rng.uniform(-3, 3, 3)
        if i % 20 == 0:
            o.scale = (1.0, 1.0, 2.0)  # a different shape: converted on its own
        scene.collection.objects.link(o)
        objs.append(o)
    bpy.context.view_layer.update()
    calls = []
    real = body_geometry.read_evaluated_mesh
    monkeypatch.setattr(body_geometry, "read_evaluated_mesh", lambda o, dg: calls.append(o.name) or real(o, dg))
    conv = run(objs, radius=0.1)
    assert len(calls) == 2 and len(conv.bodies) == 60
    # every duplicate's particles equal those of a separately converted single-user copy
    monkeypatch.setattr(body_geometry, "read_evaluated_mesh", real)
    for k in (5, 20):
        single = objs[k].copy()
        single.data = objs[k].data.copy()
        scene.collection.objects.link(single)
        bpy.context.view_layer.update()
        alone = run([single], radius=0.1)
        a = world_particles(alone.model, 0)
        index = {link.object_name: link.body_index for link in conv.bodies}[objs[k].name]
        b = world_particles(conv.model, index)
        assert np.allclose(np.sort(a, axis=0), np.sort(b, axis=0), atol=1e-6)
        assert math.isclose(alone.model.body_mass[0], conv.model.body_mass[index], rel_tol=1e-6)


def test_settings_are_read_from_object_properties(scene):
    from addon.blender import properties

    for cls in properties.classes:
        bpy.utils.register_class(cls)
    properties.register()
    try:
        bpy.ops.mesh.primitive_cube_add(size=0.6)
        obj = active()
        obj.prb.mass_mode = "MASS"
        obj.prb.mass = 7.5
        obj.prb.friction = 0.8
        obj.prb.bounciness = 0.25
        obj.prb.initial_velocity = (1.0, 2.0, 3.0)
        obj.prb.initial_angular_velocity = (0.0, 0.0, 4.0)
        obj.prb.linear_damping = 0.1
        bpy.ops.mesh.primitive_cube_add(size=0.6, location=(2, 0, 0))
        dense = active()
        dense.prb.density = 500.0
        bpy.ops.mesh.primitive_cube_add(size=0.6, location=(4, 0, 0))
        ignored = active()
        ignored.prb.role = "IGNORED"
        conv = run([obj, dense, ignored], radius=0.1)
        m = conv.model
        assert [link.object_name for link in conv.bodies] == ["Cube", "Cube.001"]
        assert dict(conv.skipped)["Cube.002"] == "is set to Ignored"
        assert math.isclose(m.body_mass[0], 7.5) and math.isclose(m.body_mass[1], 500 * 0.6**3, rel_tol=1e-5)
        mat = m.materials[m.body_material[0]]
        assert (mat.friction, mat.restitution, mat.linear_damping) == pytest.approx((0.8, 0.25, 0.1))
        assert np.allclose(m.body_velocity[0], (1, 2, 3)) and np.allclose(m.body_angular_velocity[0], (0, 0, 4))
    finally:
        properties.unregister()
        for cls in reversed(properties.classes):
            bpy.utils.unregister_class(cls)


def test_animated_collider_frames_and_scene_left_as_it_was(scene):
    bpy.ops.mesh.primitive_cube_add(size=0.6, location=(0, 0, 2))
    body = active()
    bpy.ops.mesh.primitive_plane_add(size=4.0)
    ground = active()
    bpy.ops.mesh.primitive_cube_add(size=1.0, location=(-2, 0, 0.5))
    paddle = active()
    paddle.keyframe_insert("location", frame=1)
    paddle.location = (2, 0, 0.5)
    paddle.keyframe_insert("location", frame=21)
    paddle.rotation_euler = (0, 0, 1.0)
    paddle.keyframe_insert("rotation_euler", frame=21)
    scene.frame_set(7)
    before = np.array(paddle.matrix_world)
    conv = run([body], [ground, paddle], radius=0.1, frame_start=1, frame_end=21, frame_step=2)
    assert scene.frame_current == 7 and scene.frame_subframe == 0.0
    assert np.allclose(np.array(paddle.matrix_world), before)
    assert conv.colliders == ["Plane", "Cube.001"] and conv.frame_count == 10
    meshes = {c.object_name: c for c in conv.collider_meshes}
    assert meshes["Plane"].frames is None and meshes["Plane"].triangles.shape == (2, 3)
    frames = meshes["Cube.001"].frames
    assert frames.shape == (11, 8, 3)
    # each stored frame is the paddle's evaluated world mesh at frame_start + i * step
    for i in (0, 3, 10):
        scene.frame_set(1 + 2 * i)
        v, _ = world_mesh(paddle)
        assert np.allclose(frames[i], v, atol=1e-6)
    # the body was read at frame_start, whatever the current frame was
    assert np.allclose(conv.bodies[0].matrix_world[:3, 3], (0, 0, 2))
    assert conv.model.body_count == 1


def test_device_memory_limit_is_checked(scene):
    bpy.ops.mesh.primitive_cube_add(size=1.0)
    cube = active()
    with pytest.raises(ConversionError, match="of device memory") as info:
        run([cube], radius=0.01, device_memory=50 * 2**20)  # 125,000 particles, 50 MiB
    suggested = float(str(info.value).rsplit("at least ", 1)[1].split()[0])
    conv = run([cube], radius=suggested, device_memory=50 * 2**20)
    assert conv.particle_count <= 125_000


def test_duplicates_with_equal_modifier_stacks_share_one_conversion(scene, monkeypatch):
    bpy.ops.mesh.primitive_cube_add(size=0.5)
    src = active()
    bevel = src.modifiers.new("Bevel", "BEVEL")
    bevel.width = 0.1
    bevel.segments = 3
    objs = [src]
    for i in range(6):
        o = src.copy()
        o.location = (i + 1.0, 0.0, 0.0)
        scene.collection.objects.link(o)
        objs.append(o)
    objs[3].modifiers["Bevel"].width = 0.2  # a different result: converted on its own
    displaced = objs[4].modifiers.new("Displace", "DISPLACE")  # not shareable (texture space, strength)
    displaced.strength = 0.05
    bpy.context.view_layer.update()
    calls = []
    real = body_geometry.read_evaluated_mesh
    monkeypatch.setattr(body_geometry, "read_evaluated_mesh", lambda o, dg: calls.append(o.name) or real(o, dg))
    conv = run(objs, radius=0.04)
    assert sorted(calls) == sorted([src.name, objs[3].name, objs[4].name])
    volumes = {}
    for link in conv.bodies:
        volumes[link.object_name] = conv.model.body_mass[link.body_index] / 1000.0
    # a bevelled cube has less volume than the cube, the wider bevel even less
    assert volumes[objs[1].name] == pytest.approx(volumes[src.name], rel=1e-9)
    assert volumes[objs[3].name] < volumes[src.name] < 0.5**3
    monkeypatch.setattr(body_geometry, "read_evaluated_mesh", real)
    alone = run([objs[5]], radius=0.04)
    assert alone.model.body_mass[0] == pytest.approx(volumes[objs[5].name] * 1000.0, rel=1e-6)
