"""Build the sample scenes (.blend files) of the Particle Rigid Bodies add-on.

Every scene is built from nothing with the bpy API, so it stays in step with the add-on: the
add-on's properties are registered (``addon.blender.register()``) and each object gets its role
and settings (``Object.prb``), the scene its simulation settings (``Scene.prb_settings``), so
Simulate & Bake (or ``addon/cli.py``) works on the saved file at once.

    PYTHONPATH=. .venv/bin/python sample_scenes/generate.py                 # all five .blend files
    PYTHONPATH=. .venv/bin/python sample_scenes/generate.py dice --count 200 --output /tmp/dice200.blend
    blender --background --python sample_scenes/generate.py -- towers       # with a Blender install
    PYTHONPATH=. .venv/bin/python sample_scenes/generate.py large --count 100000 --output /tmp/large.blend

Scenes (all lengths in metres, Z up, 24 fps):
- dice:   the seed's initial state (Fossum 2011, sec. 6.2.1, fig. 6.6): 1 m cubes placed above each
          other while moving back and forth between four positions whose sides and corners still
          overlap, so they topple and tumble when they land. A single column of 1000 cubes would be
          1 km tall, so the cubes are split into a grid of such columns (default 10 x 10 columns of
          10), close enough to fall into one another.
- towers: the seed's four towers of different sizes (fig. 6.12), here square towers of 1 m cubes
          (1x1x4, 2x2x6, 3x3x7, 4x4x8 cubes) that stand until a cube three times as dense, thrown
          with an initial velocity, hits the second one after 1 s and brings it down.
- mixed:  a few hundred mixed shapes (tori, spheres, Suzanne, curved "bananas", the seed's example
          of a well-suited shape, fig. 8.1) poured into a static bowl (a triangle-mesh collider,
          radius 6 m, 3 m deep), particle radius 8 cm (set in the file).
- ramp:   cubes of different friction on a 30 degree ramp that ends in a flight of stairs: the rough
          ones stick, the slippery ones slide off and tumble down the stairs.
- scatter: rocks scattered by geometry nodes, never objects: the Dynamic object "Scatter" is a stack
          of horizontal squares whose modifier distributes points on them (Distribute Points on
          Faces, Poisson disk, so no two rocks start in contact) and puts one of three rock meshes
          on each (Instance on Points from the collection "Rocks", random rock and rotation). Each
          instance is a body; the block falls onto the ground into a pile. Bake To is Instances.
- large:  N cubes (10k - 1M) in the dice pattern for benchmarks and GPUs; written only where asked
          (``--output``), never kept in the repository. ``large_model()`` builds the same layout as a
          bpy-free core ``Model`` for engine benchmarks.

Each ``build_*`` function clears the current file, builds the scene and returns a dict describing
it (object names by group, expected outcome parameters); ``--param KEY=JSON`` passes any of their
keywords from the command line (the tests build smaller variants this way).
Every object has bounciness 0.1, see BOUNCINESS.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from addon.core.settings import ROLE_DYNAMIC, ROLE_IGNORED, ROLE_STATIC  # noqa: E402

SCENES = ("dice", "towers", "mixed", "ramp", "scatter")
FPS = 24
# Bounciness (restitution) of every object: a little bounce, about right for wooden blocks. (It was
# chosen above 0 because e = 0, the largest dashpot damping, made landings gain energy in the engine
# of that time; the engine has been fixed since, and a 2 cm drop with e = 0 now lands cleanly. The
# scenes and their tests are tuned and checked with 0.1.)
BOUNCINESS = 0.1

# -- layouts that need no bpy (also used for the large benchmark model) -------------------------------


def dice_layout(count: int = 1000, column_height: int = 10, step: float = 0.7, spacing: float = 1.9,
                gap: float = 0.05, seed: int = 6):
    """World positions (count, 3) of the centres of 1 m cubes in the seed's initial formation.

    Cubes go into columns of ``column_height``; inside a column each cube sits ``1 + gap`` above the
    one below it and moves to the next of four positions on a square of side ``step`` (< 1 m, so
    consecutive cubes overlap along a side, and the corners of all four overlap in the middle).
    Columns sit on a near-square grid ``spacing`` apart, each starting at a different corner.
    """
    if count < 1:
        raise ValueError("count must be >= 1")
    columns = math.ceil(count / column_height)
    nx = math.ceil(math.sqrt(columns))
    ny = math.ceil(columns / nx)
    rng = np.random.default_rng(seed)
    phases = rng.integers(0, 4, size=columns)
    corners = np.array([(-1, -1), (1, -1), (1, 1), (-1, 1)], dtype=np.float64) * (step / 2)
    out = np.zeros((count, 3))
    for i in range(count):
        c, level = divmod(i, column_height)
        cx = (c % nx - (nx - 1) / 2) * spacing
        cy = (c // nx - (ny - 1) / 2) * spacing
        dx, dy = corners[(level + phases[c]) % 4]
        out[i] = (cx + dx, cy + dy, 0.5 + gap + level * (1.0 + gap))
    return out


def large_model(count: int, particle_radius: float = 1.0 / 6.0, friction: float = 0.5, column_height: int = 10):
    """The dice formation with ``count`` cubes as a core ``Model`` (27 particles each, ground plane at z=0),
    built without Blender for engine benchmarks of 10k - 1M cubes."""
    from addon.core.model import Material
    from addon.core.model_builder import ModelBuilder
    from addon.core.shapes import cube_particles

    builder = ModelBuilder(particle_radius=particle_radius)
    material = Material(friction=friction, restitution=BOUNCINESS)
    local = cube_particles(1.0, int(round(1.0 / (2 * particle_radius))))
    for p in dice_layout(count, column_height=column_height):
        builder.add_body(local, density=1000.0, position=p, material=material)
    builder.add_ground_plane(0.0, material=material)
    return builder.finalize()


# -- Blender helpers -------------------------------------------------------------------------------------


def _bpy():
    import bpy

    return bpy


_ADDON_REGISTERED = []


def register_addon(required: bool = True) -> bool:
    """Register the add-on's properties (and the rest of addon.blender) for this session.

    Returns True when ``Object.prb`` exists afterwards. With ``required`` a missing add-on is an error,
    since a sample scene without roles would not bake as it is.
    """
    bpy = _bpy()
    if hasattr(bpy.types.Object, "prb") and hasattr(bpy.types.Scene, "prb_settings"):
        return True
    try:
        import addon.blender as prb_addon

        prb_addon.register()
        _ADDON_REGISTERED.append(prb_addon)
    except Exception as exc:  # the add-on does not import or register
        if required:
            raise RuntimeError(f"cannot register the add-on (addon.blender): {exc}") from exc
        print(f"warning: add-on not registered ({exc}); saving geometry without simulation settings")
        return False
    return hasattr(bpy.types.Object, "prb")


def unregister_addon() -> None:
    while _ADDON_REGISTERED:
        _ADDON_REGISTERED.pop().unregister()


def reset_file():
    """An empty file (no cube, camera or light) with metric units and 24 fps."""
    bpy = _bpy()
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.unit_settings.system = "METRIC"
    scene.render.fps = FPS
    scene.render.fps_base = 1.0
    return scene


def set_prb(obj, **values) -> None:
    """Set ``obj.prb.<key> = value`` for each key (when the add-on's properties are registered)."""
    prb = getattr(obj, "prb", None)
    if prb is None:
        return
    for key, value in values.items():
        if not hasattr(prb, key):
            raise AttributeError(f"Object.prb has no property {key!r}; the add-on changed, update generate.py")
        setattr(prb, key, value)


def set_scene_settings(scene, *, frame_end: int, particle_radius: float | None = None, **values) -> None:
    """Frame range 1..frame_end and the add-on's scene settings (automatic particle size unless given)."""
    scene.frame_start = 1
    scene.frame_end = frame_end
    scene.frame_current = 1
    settings = getattr(scene, "prb_settings", None)
    if settings is None:
        return
    if hasattr(settings, "use_scene_frame_range"):
        settings.use_scene_frame_range = True
    if particle_radius is not None:
        settings.radius_mode = "MANUAL"
        settings.particle_radius = particle_radius
    for key, value in values.items():
        setattr(settings, key, value)


def mesh_from_pydata(name, verts, faces):
    bpy = _bpy()
    me = bpy.data.meshes.new(name)
    me.from_pydata([tuple(map(float, v)) for v in verts], [], [tuple(int(i) for i in f) for f in faces])
    me.validate()
    me.update()
    return me


def bmesh_mesh(name, build, smooth=False):
    """A mesh datablock made by ``build(bm)`` with bmesh (works without a window or context)."""
    bpy = _bpy()
    import bmesh

    bm = bmesh.new()
    build(bm)
    if smooth:
        for f in bm.faces:
            f.smooth = True
    me = bpy.data.meshes.new(name)
    bm.to_mesh(me)
    bm.free()
    return me


def cube_mesh(name="Cube", size=1.0):
    import bmesh

    return bmesh_mesh(name, lambda bm: bmesh.ops.create_cube(bm, size=size))


def box_mesh(name, size):
    """Axis-aligned box of ``size`` (x, y, z) centred on its origin."""
    sx, sy, sz = (s / 2 for s in size)
    verts = [(-sx, -sy, -sz), (sx, -sy, -sz), (sx, sy, -sz), (-sx, sy, -sz),
             (-sx, -sy, sz), (sx, -sy, sz), (sx, sy, sz), (-sx, sy, sz)]
    faces = [(0, 3, 2, 1), (4, 5, 6, 7), (0, 1, 5, 4), (1, 2, 6, 5), (2, 3, 7, 6), (3, 0, 4, 7)]
    return mesh_from_pydata(name, verts, faces)


def torus_mesh(name, major=0.35, minor=0.14, segments=20, rings=10):
    verts, faces = [], []
    for i in range(segments):
        u = 2 * math.pi * i / segments
        for j in range(rings):
            v = 2 * math.pi * j / rings
            r = major + minor * math.cos(v)
            verts.append((r * math.cos(u), r * math.sin(u), minor * math.sin(v)))
    for i in range(segments):
        for j in range(rings):
            a = i * rings + j
            b = ((i + 1) % segments) * rings + j
            c = ((i + 1) % segments) * rings + (j + 1) % rings
            d = i * rings + (j + 1) % rings
            faces.append((a, b, c, d))
    return mesh_from_pydata(name, verts, faces)


def banana_mesh(name, length=1.0, thickness=0.3, bend=math.radians(75), segments=14, sides=10):
    """A curved, tapered capsule: a circle of varying radius swept along an arc (closed at both tips)."""
    radius_arc = length / bend
    verts, faces = [], []
    for i in range(segments + 1):
        t = i / segments
        ang = -bend / 2 + bend * t
        centre = np.array([radius_arc * math.sin(ang), 0.0, radius_arc * (1 - math.cos(ang))])
        tangent = np.array([math.cos(ang), 0.0, math.sin(ang)])
        normal = np.array([-math.sin(ang), 0.0, math.cos(ang)])
        binormal = np.cross(tangent, normal)
        r = 0.5 * thickness * max(math.sin(math.pi * t) ** 0.6, 0.12)
        for j in range(sides):
            phi = 2 * math.pi * j / sides
            verts.append(tuple(centre + r * (math.cos(phi) * normal + math.sin(phi) * binormal)))
    for i in range(segments):
        for j in range(sides):
            a = i * sides + j
            faces.append((a, a + sides, i * sides + sides + (j + 1) % sides, i * sides + (j + 1) % sides))
    faces.append(tuple(reversed(range(sides))))
    faces.append(tuple(segments * sides + j for j in range(sides)))
    me = mesh_from_pydata(name, verts, faces)
    # centre the mesh on its bounding box, so the origin is inside the banana's hull
    co = np.array([v.co[:] for v in me.vertices])
    mid = (co.min(axis=0) + co.max(axis=0)) / 2
    for v in me.vertices:
        v.co = tuple(np.array(v.co[:]) - mid)
    me.update()
    return me


def bowl_mesh(name, radius=5.0, depth=3.0, rim=0.8, segments=48, rings=12):
    """An open bowl (a spherical cap, the inside facing up) with a flat rim, as one triangle-mesh surface."""
    # sphere of radius R through the rim circle (radius, depth) and the bottom (0, 0)
    big = (radius**2 + depth**2) / (2 * depth)
    top = math.asin(radius / big)
    verts, faces = [(0.0, 0.0, 0.0)], []
    for j in range(1, rings + 1):
        theta = top * j / rings
        for i in range(segments):
            phi = 2 * math.pi * i / segments
            verts.append((big * math.sin(theta) * math.cos(phi), big * math.sin(theta) * math.sin(phi),
                          big - big * math.cos(theta)))
    for i in range(segments):  # rim: a flat ring outwards
        phi = 2 * math.pi * i / segments
        verts.append(((radius + rim) * math.cos(phi), (radius + rim) * math.sin(phi), depth))
    for i in range(segments):
        faces.append((0, 1 + i, 1 + (i + 1) % segments))
    for j in range(rings):
        base0 = 1 + (j - 1) * segments if j else None
        if j == 0:
            continue
        for i in range(segments):
            a, b = base0 + i, base0 + (i + 1) % segments
            faces.append((a, a + segments, b + segments, b))
    last = 1 + (rings - 1) * segments
    rim0 = 1 + rings * segments
    for i in range(segments):
        a, b = last + i, last + (i + 1) % segments
        faces.append((a, rim0 + i, rim0 + (i + 1) % segments, b))
    # faces wound so that normals point up/inwards (into the bowl's hollow)
    faces = [tuple(reversed(f)) for f in faces]
    return mesh_from_pydata(name, verts, faces)


def stairs_mesh(name, steps, step_depth, step_height, width):
    """A flight of ``steps`` stairs going down along +x from height steps*step_height: one closed box
    per step (from the ground up to the step's tread), all in one mesh."""
    verts, faces = [], []
    box_faces = [(0, 3, 2, 1), (4, 5, 6, 7), (0, 1, 5, 4), (1, 2, 6, 5), (2, 3, 7, 6), (3, 0, 4, 7)]
    w = width / 2
    for k in range(steps):
        x0, x1 = k * step_depth, (k + 1) * step_depth
        h = (steps - k) * step_height
        base = len(verts)
        verts += [(x0, -w, 0), (x1, -w, 0), (x1, w, 0), (x0, w, 0), (x0, -w, h), (x1, -w, h), (x1, w, h), (x0, w, h)]
        faces += [tuple(base + i for i in f) for f in box_faces]
    return mesh_from_pydata(name, verts, faces)


def material(name, color=None, from_object=False, roughness=0.5):
    """A Principled material; ``from_object``: the base colour is the object's colour (Object Info)."""
    bpy = _bpy()
    mat = bpy.data.materials.new(name)
    if mat.node_tree is None:  # Blender < 5 makes node trees only on request
        mat.use_nodes = True
    nodes = mat.node_tree.nodes
    bsdf = nodes.get("Principled BSDF")
    bsdf.inputs["Roughness"].default_value = roughness
    if color is not None:
        bsdf.inputs["Base Color"].default_value = (*color, 1.0)
        mat.diffuse_color = (*color, 1.0)
    if from_object:
        info = nodes.new("ShaderNodeObjectInfo")
        mat.node_tree.links.new(info.outputs["Color"], bsdf.inputs["Base Color"])
    return mat


def palette_color(rng):
    """A saturated random colour (HSV with random hue), like the seed's random cube colours."""
    import colorsys

    h = rng.random()
    s = 0.65 + 0.3 * rng.random()
    v = 0.55 + 0.4 * rng.random()
    return colorsys.hsv_to_rgb(h, s, v)


def add_object(name, mesh, location=(0, 0, 0), rotation=(0, 0, 0), collection=None, color=None):
    bpy = _bpy()
    obj = bpy.data.objects.new(name, mesh)
    obj.location = location
    obj.rotation_euler = rotation
    (collection or bpy.context.scene.collection).objects.link(obj)
    if color is not None:
        obj.color = (*color, 1.0)
    return obj


def new_collection(name):
    bpy = _bpy()
    coll = bpy.data.collections.new(name)
    bpy.context.scene.collection.children.link(coll)
    return coll


def add_ground(size=200.0, friction=0.5, name="Ground"):
    """A flat square static collider at z = 0 (two triangles)."""
    h = size / 2
    me = mesh_from_pydata(name, [(-h, -h, 0), (h, -h, 0), (h, h, 0), (-h, h, 0)], [(0, 1, 2, 3)])
    me.materials.append(material("Ground", color=(0.42, 0.43, 0.45), roughness=0.8))
    obj = add_object(name, me)
    set_prb(obj, role=ROLE_STATIC, friction=friction, bounciness=BOUNCINESS)
    # a much larger plane just below it, only for the picture (no horizon edge in the renders)
    far = 2000.0
    backdrop = add_object("Backdrop", mesh_from_pydata("Backdrop", [(-far, -far, -0.01), (far, -far, -0.01),
                                                                    (far, far, -0.01), (-far, far, -0.01)],
                                                       [(0, 1, 2, 3)]))
    backdrop.data.materials.append(me.materials[0])
    set_prb(backdrop, role=ROLE_IGNORED)
    return obj


def look_at(obj, target):
    from mathutils import Vector

    direction = Vector(target) - obj.location
    obj.rotation_euler = direction.to_track_quat("-Z", "Y").to_euler()


def add_camera_and_lights(location, target, lens=35.0, sun_rotation=(math.radians(50), 0, math.radians(30))):
    bpy = _bpy()
    scene = bpy.context.scene
    cam = bpy.data.cameras.new("Camera")
    cam.lens = lens
    cam.clip_end = 1000.0
    cam_obj = add_object("Camera", cam, location=location)
    look_at(cam_obj, target)
    scene.camera = cam_obj
    sun = bpy.data.lights.new("Sun", "SUN")
    sun.energy = 4.0
    sun.angle = math.radians(8)
    add_object("Sun", sun, rotation=sun_rotation)
    world = bpy.data.worlds.new("World")
    if world.node_tree is None:
        world.use_nodes = True
    nodes = world.node_tree.nodes
    bg = nodes.get("Background") or nodes.new("ShaderNodeBackground")
    if not bg.outputs["Background"].links:
        out = nodes.get("World Output") or nodes.new("ShaderNodeOutputWorld")
        world.node_tree.links.new(bg.outputs["Background"], out.inputs["Surface"])
    bg.inputs["Color"].default_value = (0.5, 0.58, 0.7, 1.0)
    bg.inputs["Strength"].default_value = 0.35
    scene.world = world
    for obj in (cam_obj, bpy.data.objects["Sun"]):
        set_prb(obj, role=ROLE_IGNORED)
    return cam_obj


def render_defaults(scene, width=960, height=540):
    """Cycles on the CPU at modest settings (the headless route; EEVEE needs a GL context)."""
    scene.render.engine = "CYCLES"
    scene.cycles.device = "CPU"
    scene.cycles.samples = 32
    scene.render.resolution_x = width
    scene.render.resolution_y = height
    scene.render.resolution_percentage = 100
    try:
        scene.view_settings.view_transform = "AgX"
        scene.view_settings.look = "AgX - Punchy"
    except TypeError:  # an older colour-management configuration
        pass


# -- the scenes -----------------------------------------------------------------------------------------


def build_dice(count: int = 1000, column_height: int = 10, frame_end: int = 250, friction: float = 0.5):
    """The seed's initial state: ``count`` 1 m cubes in zig-zag columns above a ground plane."""
    scene = reset_file()
    positions = dice_layout(count, column_height=column_height)
    mesh = cube_mesh("Die")
    mesh.materials.append(material("Dice", from_object=True, roughness=0.35))
    coll = new_collection("Dice")
    rng = np.random.default_rng(2011)
    names = []
    for i, p in enumerate(positions):
        obj = add_object(f"Die.{i:04d}", mesh, location=tuple(p), collection=coll, color=palette_color(rng))
        set_prb(obj, role=ROLE_DYNAMIC, friction=friction, bounciness=BOUNCINESS, mass_mode="DENSITY", density=1000.0)
        names.append(obj.name)
    add_ground(size=max(200.0, 4 * float(np.ptp(positions[:, :2], axis=0).max())), friction=friction)
    span = float(max(np.ptp(positions[:, 0]), np.ptp(positions[:, 1]))) + 2
    height = float(positions[:, 2].max()) + 1
    target = (0.0, 0.0, min(height, span) * 0.3)
    dist = 1.4 * max(span, height) + 6  # room for the pile, which spreads wider than the columns stood
    add_camera_and_lights((dist * 0.8, -dist * 1.0, dist * 0.55), target)
    set_scene_settings(scene, frame_end=frame_end)
    render_defaults(scene)
    return dict(scene="dice", dynamic=names, ground="Ground", count=count,
                start_top=float(positions[:, 2].max() + 0.5))


TOWER_SIZES = ((1, 4), (2, 6), (3, 7), (4, 8))  # (cubes across, cubes high), the seed's fig. 6.12 has four sizes


def tower_layout(sizes=TOWER_SIZES, gap=0.02, spacing=3.0):
    """(tower index, world centre) of every cube of the towers, which stand in a row along x.

    Cubes are ``gap`` apart side by side; layers touch (a gap would let each layer drop onto the
    next at the start, and the seed's stacking trouble begins with exactly such jolts)."""
    out = []
    x = 0.0
    for t, (across, high) in enumerate(sizes):
        if t:
            x += (sizes[t - 1][0] + across) / 2 + spacing
        for level in range(high):
            for i in range(across):
                for j in range(across):
                    out.append((t, (x + (i - (across - 1) / 2) * (1 + gap),
                                    (j - (across - 1) / 2) * (1 + gap),
                                    0.5 + level * 1.0)))
    return out


def build_towers(sizes=TOWER_SIZES, target: int = 1, frame_end: int = 120, speed: float = 12.0,
                 projectile_mass_ratio: float = 3.0, launch_frame_delay: float = 1.0):
    """Four square towers of 1 m cubes and one heavy cube thrown at tower ``target``.

    The projectile starts ``speed * launch_frame_delay`` seconds-worth of flight away (with gravity
    compensated so it arrives at the height of the tower's upper third), so the towers first stand
    on their own for about ``launch_frame_delay`` seconds, then the target is hit.
    """
    scene = reset_file()
    mesh = cube_mesh("TowerCube")
    mesh.materials.append(material("Towers", from_object=True, roughness=0.45))
    rng = np.random.default_rng(612)
    towers = {}
    colls = []
    tower_colors = [palette_color(rng) for _ in sizes]
    layout = tower_layout(sizes)
    for t in range(len(sizes)):
        colls.append(new_collection(f"Tower{t + 1}"))
    for k, (t, p) in enumerate(layout):
        shade = 0.85 + 0.3 * rng.random()
        color = tuple(min(1.0, c * shade) for c in tower_colors[t])
        obj = add_object(f"Tower{t + 1}.{len(towers.get(t, [])):03d}", mesh, location=p, collection=colls[t],
                         color=color)
        set_prb(obj, role=ROLE_DYNAMIC, friction=0.6, bounciness=BOUNCINESS, mass_mode="DENSITY", density=500.0)
        towers.setdefault(t, []).append(obj.name)
    # the projectile: thrown from the camera's side (-y) along +y at the target tower's upper part
    xs = [p[0] for t, p in layout if t == target]
    tx = (min(xs) + max(xs)) / 2
    high = sizes[target][1]
    aim_z = 0.5 + (high - 1.5)
    flight = launch_frame_delay
    y0 = -(sizes[target][0] / 2 + 0.6 + speed * flight)
    vz = 0.5 * 9.81 * flight  # rises and falls back to aim_z after ``flight`` seconds
    z0 = aim_z
    pmesh = cube_mesh("Projectile")
    pmesh.materials.append(material("Projectile", color=(0.9, 0.12, 0.08), roughness=0.3))
    proj = add_object("Projectile", pmesh, location=(tx, y0, z0))
    set_prb(proj, role=ROLE_DYNAMIC, friction=0.6, bounciness=BOUNCINESS, mass_mode="DENSITY",
            density=500.0 * projectile_mass_ratio, initial_velocity=(0.0, speed, vz))
    add_ground(friction=0.6)
    xs_all = [p[0] for _, p in layout]
    cx = (min(xs_all) + max(xs_all)) / 2
    add_camera_and_lights((cx + 2.0, -31.0, 12.0), (cx - 1.5, -4.0, 3.0), lens=28.0)
    set_scene_settings(scene, frame_end=frame_end)
    render_defaults(scene)
    return dict(scene="towers", towers=[towers[t] for t in range(len(sizes))], target=target,
                projectile="Projectile", sizes=[list(s) for s in sizes], hit_time=flight)


SHAPE_KINDS = ("torus", "sphere", "suzanne", "banana")


def build_mixed(count: int = 300, frame_end: int = 200, bowl_radius: float = 6.0, bowl_depth: float = 3.0,
                particle_radius: float = 0.08):
    """``count`` mixed shapes (one mesh per kind, linked duplicates) in layers above a static bowl."""
    import bmesh

    scene = reset_file()
    meshes = {
        "torus": torus_mesh("Torus"),
        "sphere": bmesh_mesh("Sphere", lambda bm: bmesh.ops.create_uvsphere(
            bm, u_segments=16, v_segments=8, radius=0.33), smooth=True),
        "suzanne": bmesh_mesh("Suzanne", lambda bm: bmesh.ops.create_monkey(bm), smooth=True),
        "banana": banana_mesh("Banana"),
    }
    shared = material("Shapes", from_object=True, roughness=0.4)
    for me in meshes.values():
        me.materials.append(shared)
    bowl = add_object("Bowl", bowl_mesh("Bowl", radius=bowl_radius, depth=bowl_depth))
    bowl.data.materials.append(material("Bowl", color=(0.8, 0.78, 0.72), roughness=0.3))
    set_prb(bowl, role=ROLE_STATIC, friction=0.4, bounciness=BOUNCINESS)
    # layers of shapes on a square grid inside the bowl's rim, starting above it; the pitch is the
    # largest bounding-sphere diameter, so no two shapes touch at the start whatever their rotation
    scales = {"suzanne": 0.38}
    pitch = 0.06 + 2 * max(scales.get(k, 1.0) * max(v.co.length for v in me.vertices) for k, me in meshes.items())
    per_row = max(2, int((2 * bowl_radius * 0.85) / pitch) + 1)
    xy = [((i - (per_row - 1) / 2) * pitch, (j - (per_row - 1) / 2) * pitch)
          for i in range(per_row) for j in range(per_row)]
    xy = [p for p in xy if math.hypot(*p) < bowl_radius * 0.85 - 0.5]
    rng = np.random.default_rng(81)
    coll = new_collection("Shapes")
    names = []
    kind_colors = {"torus": (0.9, 0.55, 0.1), "sphere": (0.15, 0.45, 0.9), "suzanne": (0.55, 0.3, 0.7),
                   "banana": (0.98, 0.85, 0.15)}
    for k in range(count):
        layer, slot = divmod(k, len(xy))
        kind = SHAPE_KINDS[k % len(SHAPE_KINDS)]
        x, y = xy[slot]
        x += (rng.random() - 0.5) * 0.1
        y += (rng.random() - 0.5) * 0.1
        z = bowl_depth + 1.2 + layer * pitch
        rot = tuple(rng.random(3) * 2 * math.pi)
        shade = 0.8 + 0.35 * rng.random()
        color = tuple(min(1.0, c * shade) for c in kind_colors[kind])
        scale = scales.get(kind, 1.0)
        obj = add_object(f"{kind.title()}.{k:03d}", meshes[kind], location=(x, y, z), rotation=rot,
                         collection=coll, color=color)
        obj.scale = (scale,) * 3
        set_prb(obj, role=ROLE_DYNAMIC, friction=0.5, bounciness=BOUNCINESS, mass_mode="DENSITY", density=800.0)
        names.append(obj.name)
    add_ground(friction=0.5)
    top = bowl_depth + 1.2 + ((count - 1) // len(xy)) * pitch
    add_camera_and_lights((12.5, -16.0, 10.0 + 0.3 * top), (0.0, 0.0, 0.35 * top + 0.8), lens=30.0)
    set_scene_settings(scene, frame_end=frame_end, particle_radius=particle_radius)
    render_defaults(scene)
    return dict(scene="mixed", dynamic=names, bowl="Bowl", bowl_radius=bowl_radius, bowl_depth=bowl_depth,
                rim=0.8, count=count)


RAMP_FRICTIONS = (0.02, 0.1, 0.6, 1.2)


def build_ramp(frictions=RAMP_FRICTIONS, angle_deg: float = 30.0, ramp_length: float = 9.0, frame_end: int = 120,
               stair_steps: int = 5):
    """A 30 degree ramp (static box) ending above a flight of stairs, with one row of cubes per friction.

    Contact friction is sqrt(mu_cube * mu_ramp) (the ramp has mu = 1), so on a 30 degree slope
    (tan 30 = 0.577) cubes with mu < 0.33 slide and the rest stick.
    """
    scene = reset_file()
    angle = math.radians(angle_deg)
    width = 2.2 * len(frictions) + 1.0
    stair_h, stair_d = 0.6, 1.2
    stairs_top = stair_steps * stair_h
    # ramp: a solid wedge whose sloping top ends (low end) at x = 0, z = stairs_top, on the top step
    c, s = math.cos(angle), math.sin(angle)
    x_top, z_top = -ramp_length * c, stairs_top + ramp_length * s
    w = width / 2
    ramp_mesh = mesh_from_pydata(
        "Ramp",
        [(0, -w, 0), (0, -w, stairs_top), (x_top, -w, z_top), (x_top, -w, 0),
         (0, w, 0), (0, w, stairs_top), (x_top, w, z_top), (x_top, w, 0)],
        [(0, 1, 2, 3), (7, 6, 5, 4), (1, 5, 6, 2), (0, 4, 5, 1), (3, 2, 6, 7), (0, 3, 7, 4)])
    ramp_mesh.materials.append(material("Ramp", color=(0.45, 0.28, 0.15), roughness=0.8))
    ramp = add_object("Ramp", ramp_mesh)
    set_prb(ramp, role=ROLE_STATIC, friction=1.0, bounciness=BOUNCINESS)
    stairs = add_object("Stairs", stairs_mesh("Stairs", stair_steps, stair_d, stair_h, width))
    stairs.data.materials.append(ramp_mesh.materials[0])
    set_prb(stairs, role=ROLE_STATIC, friction=1.0, bounciness=BOUNCINESS)
    add_ground(friction=0.8)
    cube = cube_mesh("RampCube")
    cube.materials.append(material("RampCubes", from_object=True, roughness=0.4))
    names = {}
    colors = [(0.1, 0.5, 0.95), (0.2, 0.8, 0.9), (0.95, 0.55, 0.1), (0.85, 0.15, 0.1)]
    # cubes sit on the slope, resting on the top face, in a row across it, two cubes per friction
    import mathutils

    rot = mathutils.Euler((0.0, angle, 0.0)).to_matrix()
    normal = rot @ mathutils.Vector((0, 0, 1))
    downhill = rot @ mathutils.Vector((1, 0, 0))  # +x of the ramp box, pointing down the slope
    if downhill.z > 0:
        downhill = -downhill
    if normal.z < 0:
        normal = -normal
    top_low = mathutils.Vector((0.0, 0.0, stairs_top))
    for k, mu in enumerate(frictions):
        y = (k - (len(frictions) - 1) / 2) * 2.2
        for along in (2.2, 4.6):
            p = top_low - downhill * (ramp_length - along) + normal * 0.51 + mathutils.Vector((0, y, 0))
            obj = add_object(f"Cube_mu{mu:g}.{len(names.get(mu, []))}", cube, location=tuple(p),
                             rotation=tuple(rot.to_euler()), color=colors[k % 4])
            set_prb(obj, role=ROLE_DYNAMIC, friction=mu, bounciness=BOUNCINESS, mass_mode="DENSITY", density=1000.0)
            names.setdefault(mu, []).append(obj.name)
    add_camera_and_lights((5.0, -18.0, 7.5), (-0.5, 0.0, 2.8), lens=28.0)
    set_scene_settings(scene, frame_end=frame_end)
    render_defaults(scene)
    critical = math.tan(angle) ** 2 / 1.0  # mu_cube below which sqrt(mu_cube * 1) < tan(angle)
    return dict(scene="ramp", cubes={float(mu): n for mu, n in names.items()}, angle=angle_deg,
                critical_friction=critical, downhill=tuple(downhill), ramp="Ramp", stairs="Stairs")


def rock_mesh(name, size, squash, seed, subdivisions=1):
    """A lumpy rock: an icosphere of diameter ``size`` scaled by ``squash`` (x, y, z), each vertex
    pushed in or out by up to 15 %."""
    import bmesh

    rng = np.random.default_rng(seed)

    def build(bm):
        bmesh.ops.create_icosphere(bm, subdivisions=subdivisions, radius=size / 2)
        for v in bm.verts:
            v.co = tuple(np.array(v.co[:]) * np.array(squash) * (1.0 + 0.15 * (2 * rng.random() - 1)))

    return bmesh_mesh(name, build)


def _socket(sockets, identifier):
    """A node's socket by identifier (Random Value has one "Max" input and one "Value" output per type)."""
    return next(s for s in sockets if s.identifier == identifier)


def points_on_faces_group(name, distance, density, seed=None):
    """A geometry-nodes group whose input mesh goes into Distribute Points on Faces (Poisson disk: points
    at least ``distance`` apart, at most ``density`` per square metre). Returns (group, points node,
    group output node): the caller instances something on the points and links it to the output."""
    bpy = _bpy()
    group = bpy.data.node_groups.new(name, "GeometryNodeTree")
    group.interface.new_socket("Geometry", in_out="INPUT", socket_type="NodeSocketGeometry")
    group.interface.new_socket("Geometry", in_out="OUTPUT", socket_type="NodeSocketGeometry")
    nodes = group.nodes
    group_in, group_out = nodes.new("NodeGroupInput"), nodes.new("NodeGroupOutput")
    points = nodes.new("GeometryNodeDistributePointsOnFaces")
    points.distribute_method = "POISSON"
    points.inputs["Distance Min"].default_value = distance
    points.inputs["Density Max"].default_value = density
    if seed is not None:
        points.inputs["Seed"].default_value = seed
    group.links.new(group_in.outputs[0], points.inputs["Mesh"])
    return group, points, group_out


def scatter_node_group(name, rocks, distance, density, seed, size_spread=0.0):
    """Distribute Points on Faces (Poisson disk: points at least ``distance`` apart) + Instance on Points
    of a random child of ``rocks`` with a random rotation (and, with ``size_spread``, a random size of
    1 +- size_spread): the scatter a user builds by hand."""
    group, points, group_out = points_on_faces_group(name, distance, density, seed)
    nodes, links = group.nodes, group.links
    rocks_info = nodes.new("GeometryNodeCollectionInfo")
    rocks_info.inputs["Collection"].default_value = rocks
    rocks_info.inputs["Separate Children"].default_value = True
    rocks_info.inputs["Reset Children"].default_value = True
    which = nodes.new("FunctionNodeRandomValue")
    which.data_type = "INT"
    which.inputs["Min"].default_value = 0
    _socket(which.inputs, "Max_002").default_value = len(rocks.objects) - 1
    _socket(which.inputs, "Seed").default_value = seed + 1
    turn = nodes.new("FunctionNodeRandomValue")
    turn.data_type = "FLOAT_VECTOR"
    _socket(turn.inputs, "Max").default_value = (2 * math.pi,) * 3
    _socket(turn.inputs, "Seed").default_value = seed + 2
    instance = nodes.new("GeometryNodeInstanceOnPoints")
    links.new(points.outputs["Points"], instance.inputs["Points"])
    links.new(rocks_info.outputs[0], instance.inputs["Instance"])
    instance.inputs["Pick Instance"].default_value = True
    links.new(_socket(which.outputs, "Value_002"), instance.inputs["Instance Index"])
    links.new(_socket(turn.outputs, "Value"), instance.inputs["Rotation"])
    if size_spread:
        size = nodes.new("FunctionNodeRandomValue")
        size.data_type = "FLOAT"
        _socket(size.inputs, "Min_001").default_value = 1.0 - size_spread
        _socket(size.inputs, "Max_001").default_value = 1.0 + size_spread
        _socket(size.inputs, "Seed").default_value = seed + 3
        links.new(_socket(size.outputs, "Value_001"), instance.inputs["Scale"])
    links.new(instance.outputs["Instances"], group_out.inputs[0])
    return group


def build_scatter(side: float = 6.0, layers: int = 14, layer_gap: float = 0.9, taper: float = 0.7,
                  rock_size: float = 0.6, density: float = 10.0, frame_end: int = 120, seed: int = 20,
                  particle_radius: float = 0.05, roundness: float = 0.0, size_spread: float = 0.0):
    """Rocks scattered by geometry nodes on ``layers`` squares ``layer_gap`` apart from 1 m up, the lowest
    ``side`` metres wide, each higher one narrower (the top one by ``taper``): a heap of rocks in the
    air that falls into a pile. About ``density`` rocks per square metre, fewer where the Poisson disk
    (distance 1.05 x the largest rock's extent) leaves no room. The rocks are instances of the objects
    in the collection "Rocks" (excluded from the view layer, role Ignored); the Dynamic object
    "Scatter" carries the physics settings of all of them. ``roundness`` 1 makes every rock as round
    as the round one (fewer particles per rock for a given radius: the 100k-rock picture);
    ``size_spread`` 0.2 gives each rock a random size of 0.8 to 1.2 (the Poisson distance then
    follows the largest size)."""
    bpy = _bpy()
    scene = reset_file()
    rocks = bpy.data.collections.new("Rocks")
    scene.collection.children.link(rocks)
    shapes = (("RockRound", (1.0, 0.9, 0.8), (0.45, 0.42, 0.38)),
              ("RockFlat", (1.0, 0.8, 0.5), (0.55, 0.5, 0.44)),
              ("RockLong", (1.0, 0.6, 0.6), (0.36, 0.35, 0.34)))
    extent = 0.0
    for k, (name, squash, color) in enumerate(shapes):
        squash = tuple(a + roundness * (r - a) for a, r in zip(squash, shapes[0][1]))
        mesh = rock_mesh(name, rock_size, squash, seed=seed + k)
        mesh.materials.append(material(name, color=color, roughness=0.9))
        rock = add_object(name, mesh, location=(0.0, 0.0, -10.0), collection=rocks)
        set_prb(rock, role=ROLE_IGNORED)
        extent = max(extent, max(v.co.length for v in mesh.vertices) * 2)
    bpy.context.view_layer.layer_collection.children["Rocks"].exclude = True
    verts, faces = [], []
    for k in range(layers):
        z = 1.0 + k * layer_gap
        h = side / 2 * (1.0 - taper * k / max(layers - 1, 1))
        verts += [(-h, -h, z), (h, -h, z), (h, h, z), (-h, h, z)]
        faces.append(tuple(range(4 * k, 4 * k + 4)))
    scatter = add_object("Scatter", mesh_from_pydata("Scatter", verts, faces))
    modifier = scatter.modifiers.new("Scatter", "NODES")
    modifier.node_group = scatter_node_group("Scatter Rocks", rocks, 1.05 * extent * (1.0 + size_spread), density,
                                             seed, size_spread)
    set_prb(scatter, role=ROLE_DYNAMIC, friction=0.7, bounciness=BOUNCINESS, mass_mode="DENSITY", density=2500.0)
    add_ground(friction=0.7)
    top = 1.0 + (layers - 1) * layer_gap
    add_camera_and_lights((1.5 * side + 6, -2.0 * side - 8, 0.5 * top + 4), (0.0, 0.0, 0.35 * top), lens=35.0)
    set_scene_settings(scene, frame_end=frame_end, particle_radius=particle_radius)
    if hasattr(scene, "prb_settings"):
        scene.prb_settings.bake_mode = "INSTANCES"
    render_defaults(scene)
    bpy.context.view_layer.update()
    depsgraph = bpy.context.evaluated_depsgraph_get()
    count = sum(1 for inst in depsgraph.object_instances
                if inst.is_instance and inst.parent is not None and inst.parent.original.name == "Scatter")
    return dict(scene="scatter", instancer="Scatter", rocks=[name for name, _s, _c in shapes], count=count,
                side=side, top=top)


def build_large(count: int = 10_000, frame_end: int = 100, column_height: int = 10):
    """The dice formation with ``count`` cubes for benchmarks (no camera-friendly framing)."""
    info = build_dice(count=count, column_height=column_height, frame_end=frame_end)
    info["scene"] = "large"
    return info


BUILDERS = dict(dice=build_dice, towers=build_towers, mixed=build_mixed, ramp=build_ramp, scatter=build_scatter,
                large=build_large)


def save(path) -> Path:
    """Save the current file compressed, without a .blend1 backup and without UI data."""
    bpy = _bpy()
    path = Path(path).resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    bpy.ops.wm.save_as_mainfile(filepath=str(path), compress=True, check_existing=False)
    backup = path.with_suffix(".blend1")
    if backup.exists():
        backup.unlink()
    return path


def generate(name: str, output=None, require_addon: bool = True, **params) -> dict:
    """Build scene ``name`` and save it (``output`` or sample_scenes/<name>.blend); returns its description."""
    if name == "large" and output is None:
        raise ValueError("the large scene is not kept in the repository: give an output path")
    has_addon = register_addon(required=require_addon)
    info = BUILDERS[name](**params)
    info["path"] = str(save(output or HERE / f"{name}.blend"))
    info["addon"] = has_addon
    return info


def _args(argv):
    if "--" in argv:  # blender --background --python generate.py -- args
        argv = argv[argv.index("--") + 1:]
    elif argv and argv[0].endswith(".py"):
        argv = argv[1:]
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("scenes", nargs="*", metavar="SCENE",
                   help=f"scenes to build, of {', '.join(BUILDERS)} (default: the five sample scenes)")
    p.add_argument("--output", help="output .blend (one scene only); default sample_scenes/<name>.blend")
    p.add_argument("--count", type=int, help="number of bodies (dice, mixed, large)")
    p.add_argument("--frames", type=int, help="last frame of the scene's frame range")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="any keyword of the scene's build_* function, VALUE in JSON (e.g. sizes=[[1,3],[2,4]])")
    p.add_argument("--no-addon", action="store_true", help="build geometry even if the add-on cannot be registered")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = _args(sys.argv if argv is None else argv)
    scenes = args.scenes or list(SCENES)
    unknown = [s for s in scenes if s not in BUILDERS]
    if unknown:
        raise SystemExit(f"unknown scene(s) {', '.join(unknown)}; choose from {', '.join(BUILDERS)}")
    if args.output and len(scenes) != 1:
        raise SystemExit("--output needs exactly one scene")
    try:
        for name in scenes:
            params = {}
            if args.count is not None and name in ("dice", "mixed", "large"):
                params["count"] = args.count
            if args.frames is not None:
                params["frame_end"] = args.frames
            for item in args.param:
                key, _, value = item.partition("=")
                params[key.strip()] = json.loads(value)
            info = generate(name, args.output, require_addon=not args.no_addon, **params)
            size = os.path.getsize(info["path"]) / 1024
            print(f"{name}: {info['path']} ({size:.0f} KiB)")
    finally:
        unregister_addon()
    return 0


if __name__ == "__main__":
    sys.exit(main())
