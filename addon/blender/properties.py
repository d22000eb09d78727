"""Scene and per-object settings of the add-on (``Scene.prb_settings``, ``Object.prb``).

Names follow docs/ARCHITECTURE.md; scene_objects.py, the CLI and the sample scenes read them. Defaults
come from the core's settings dataclasses (core/settings.py), the one place they are set.
"""
from __future__ import annotations

import bpy
from bpy.props import (BoolProperty, EnumProperty, FloatProperty, FloatVectorProperty, IntProperty,
                       PointerProperty, StringProperty)

from ..core.contact_geometry import CONTACT_GEOMETRY, automatic_substeps, listed
from ..core.glue import GlueSettings
from .bake_instances import DEFAULT_CACHE_FOLDER
from ..core.settings import (MANUAL_PARTICLE_RADIUS, MANUAL_SUBSTEPS, ROLE_DYNAMIC, ROLE_FOLLOW_SELECTION,
                             ROLE_IGNORED, ROLE_STATIC, ConversionSettings, FrameSettings, ObjectSettings,
                             SimulationSettings)

ROLE_ITEMS = (
    (ROLE_FOLLOW_SELECTION, "Follow Selection", "Simulated as a dynamic body when selected at Simulate & Bake time"),
    (ROLE_DYNAMIC, "Dynamic Body", "Always simulated as a moving rigid body"),
    (ROLE_STATIC, "Static Collider", "Does not move; dynamic bodies collide with it"),
    (ROLE_IGNORED, "Ignored", "Never part of the simulation, even when selected"),
)
ROLE_LABELS = {identifier: label for identifier, label, _ in ROLE_ITEMS}
# SimulationSettings.contact_geometry. Each item has the number a .blend stores for it
# (ContactGeometry.number); RETIRED_CONTACT_GEOMETRIES says what a file still holding a retired one chose.
RETIRED_CONTACT_GEOMETRIES = {
    1: "Flat Faces, which was retired (Rigid Voxels rest faces flat and stand stacks and walls)"}
CONTACT_GEOMETRY_ITEMS = tuple((g.name, g.label, g.tooltip(), g.number)
                               for g in CONTACT_GEOMETRY.values())
# Bake To (bake_options.BAKE_MODES); the first is the default
BAKE_MODE_ITEMS = (
    ("KEYFRAMES", "Keyframes", "Key each body's object: editable per object, up to ~10,000 bodies"),
    ("INSTANCES", "Instances", "One object shows every body from a point cache beside the .blend "
                               "(plays and renders without the add-on; for 10,000 bodies and more)"),
)
_FRAMES = FrameSettings()
_OBJECT = ObjectSettings()
_SIMULATION = SimulationSettings()
_CONVERSION = ConversionSettings()
_GLUE = GlueSettings()
# Object.prb.glue: its own glue, or its collection's (glue_bodies.object_glue)
GLUE_FROM_COLLECTION, GLUE_ON, GLUE_OFF = "COLLECTION", "ON", "OFF"
GLUE_ITEMS = (
    (GLUE_FROM_COLLECTION, "From Collection", "As the object's collection sets it (Collection Properties > "
                                              "Particle Rigid Body Glue); not glued when none of its collections glues"),
    (GLUE_ON, "Glued", "Bond to the touching pieces of the same glue group, whatever the collection says"),
    (GLUE_OFF, "Not Glued", "Never bond, whatever the collection says"),
)
_GLUE_STRENGTH_DESCRIPTION = (
    "Stress the glue holds, in pascals (N/m²): a bond breaks under a pull or shear of strength × its contact "
    "area. In Blender's terms its Breaking Threshold is strength × area / (fps × Substeps per Frame); 100 kPa "
    "is a weak mortar, concrete holds 2-5 MPa")
_GLUE_GROUP_DESCRIPTION = (
    "Only pieces of the same glue group bond; empty: the collection's name, so the pieces of one collection "
    "stick together and not to another's")


# The contact geometries whose contacts are springs: only they have a stiffness (the others solve
# their contacts), and the panel shows Stiffness for them alone
_SPRINGS = tuple(g for g in CONTACT_GEOMETRY.values() if g.springs)
_SOLVED = tuple(g for g in CONTACT_GEOMETRY.values() if not g.springs)


def _labels(geometries) -> str:
    return listed(g.label for g in geometries)


def _automatic_stiffness() -> str:
    """Stiffness: Automatic's tooltip: the stiffness target of each geometry whose contacts are springs."""
    targets = {g.target_penetration for g in _SPRINGS}
    if len(targets) == 1:
        return f"The stiffness target {targets.pop():g}"
    return "The contact geometry's stiffness target (" + ", ".join(
        f"{g.label} {g.target_penetration:g}" for g in _SPRINGS) + ")"


def _automatic_substeps() -> str:
    """Substeps: Automatic's tooltip: what each contact geometry's substep comes from."""
    return "Substeps per frame from the contact geometry: " + automatic_substeps()


def _springs_only() -> str:
    """What the stiffness settings' descriptions add: the geometries they apply to."""
    text = f"Only for {_labels(_SPRINGS)}, whose contacts are springs"
    return text + f" ({_labels(_SOLVED)} solve theirs: no stiffness)" if _SOLVED else text


def contact_geometry_gone(s) -> str:
    """Why a scene's Contacts (``s.contact_geometry``, read as '' when the file holds a number no item
    has) cannot bake: the retired choice it holds, and what to choose instead."""
    number = s.get("contact_geometry")
    held = RETIRED_CONTACT_GEOMETRIES.get(number, f"a choice this version does not have (number {number})")
    choices = " or ".join(g.label for g in CONTACT_GEOMETRY.values())
    return f"Contacts is {held}: choose {choices} in the Simulation panel (or --contact-geometry)"


def _mode(core_default) -> str:
    """A Substeps, Particle Size or Stiffness mode's default: Automatic where the core's is None."""
    return "AUTO" if core_default is None else "MANUAL"


# 4.5+ warns about '//' paths in a path property without this option, which 4.2 does not know
_BLEND_RELATIVE = ({"PATH_SUPPORTS_BLEND_RELATIVE"}
                   if "is_path_supports_blend_relative" in bpy.types.StringProperty.bl_rna.properties else set())
_device_items_cache: list = []
_device_state = {"problem": None, "auto": None}


def device_items(_self, _context):
    """OpenCL devices for the enum: 'AUTO' plus one item per device (listed once, cached).

    Blender keeps the identifier strings only while a reference to them is alive, hence the cache.
    """
    if not _device_items_cache:
        items = [("AUTO", "Automatic", "Prefer a GPU, fall back to a CPU OpenCL device")]
        for selector, label in list_devices():
            items.append((selector, label, f"OpenCL device {selector}: {label}"))
        _device_items_cache[:] = items
    return _device_items_cache


def list_devices() -> list[tuple[str, str]]:
    """(selector, label) of each usable OpenCL device; empty (and ``opencl_problem()`` set) without OpenCL."""
    _device_state["problem"] = None
    _device_state["auto"] = None
    try:
        from ..core import device as core_device

        devices = core_device.list_devices()
        try:  # listing is not choosing: no "using the CPU" warning here
            _device_state["auto"] = core_device.choose_device(None, announce=False).label
        except Exception:
            pass
        return [(d.selector, d.label) for d in devices]
    except Exception as exc:  # OpenCLUnavailable, or pyopencl failing to load
        _device_state["problem"] = str(exc)
        return []


def opencl_problem() -> str | None:
    """Why no OpenCL device is listed (with what to install), or None."""
    device_items(None, None)
    return _device_state["problem"]


def automatic_device() -> str | None:
    """The label of the device Automatic picks; None when none runs the kernels (no device listed,
    or each one's probe kernel failed: a CPU its driver cannot compile for)."""
    device_items(None, None)
    return _device_state["auto"]


def device_label(selector: str) -> str:
    """Label of the chosen device for the summary line ('AUTO': the device auto picks)."""
    items = device_items(None, None)
    if selector in ("", "AUTO"):
        return _device_state["auto"] or "no OpenCL device"
    for identifier, label, _ in items:
        if identifier == selector:
            return label
    return selector


def refresh_devices() -> None:
    _device_items_cache.clear()
    _device_state["problem"] = None
    _device_state["auto"] = None


class PRB_SceneSettings(bpy.types.PropertyGroup):
    use_scene_frame_range: BoolProperty(
        name="Scene Frame Range", default=True,
        description="Simulate the scene's frame range; off: use the range below")
    frame_start: IntProperty(name="Start", default=_FRAMES.frame_start, description="First frame of the bake")
    frame_end: IntProperty(name="End", default=_FRAMES.frame_end, description="Last frame of the bake")
    frame_step: IntProperty(name="Step", default=_FRAMES.frame_step, min=1, soft_max=10,
                            description="Key every Nth frame (the simulation samples at this step too)")
    substeps_mode: EnumProperty(
        name="Substeps", default=_mode(FrameSettings.substeps),
        items=(("AUTO", "Automatic", _automatic_substeps()),
               ("MANUAL", "Manual", "Use the number of substeps per frame given below")))
    substeps: IntProperty(name="Substeps per Frame", default=MANUAL_SUBSTEPS, min=1, soft_max=2000)
    radius_mode: EnumProperty(
        name="Particle Size", default=_mode(ConversionSettings.radius),
        items=(("AUTO", "Automatic", "Choose the particle radius from the size of the bodies"),
               ("MANUAL", "Manual", "Use the particle radius given below")))
    particle_radius: FloatProperty(name="Particle Radius", default=MANUAL_PARTICLE_RADIUS, min=1e-5, soft_max=1.0,
                                   subtype="DISTANCE", unit="LENGTH", precision=4)
    stiffness_mode: EnumProperty(
        name="Stiffness", default=_mode(SimulationSettings.target_penetration),
        description=f"How stiff the contacts are. {_springs_only()}",
        items=(("AUTO", "Automatic", _automatic_stiffness()),
               ("MANUAL", "Manual", "Use the stiffness target given below")))
    target_penetration: FloatProperty(
        name="Stiffness Target", default=_SIMULATION.target_penetration, min=0.0001, max=1.0, subtype="FACTOR",
        precision=4,
        description="How far a particle may sink into another under the weight of a tall stack, as a fraction "
                    f"of its radius (smaller: stiffer contacts, more substeps). {_springs_only()}")
    contact_geometry: EnumProperty(
        name="Contacts", default=_SIMULATION.contact_geometry, items=CONTACT_GEOMETRY_ITEMS,
        description="How bodies meet each other (the ground and static colliders are the same either way). "
                    + ". ".join(f"{g.label}: {g.summary}; {g.cost}" for g in CONTACT_GEOMETRY.values()))
    use_sleep: BoolProperty(
        name="Sleeping", default=_SIMULATION.sleep_speed > 0 and _SIMULATION.sleep_time > 0,
        description="Let bodies that have come to rest stop exactly (Blender's rigid bodies call it deactivation): "
                    "a settled pile then costs almost nothing. They wake when hit or when what they rest on moves "
                    "away. With Rigid Voxels bodies that touch fall asleep together once all of them are still, "
                    "and none sleeps while an animated collider moves")
    sleep_speed: FloatProperty(
        name="Sleep Speed", default=_SIMULATION.sleep_speed, min=1e-4, soft_max=1.0, unit="VELOCITY",
        precision=3, description="A body whose fastest point moves slower than this is still")
    sleep_time: FloatProperty(
        name="Sleep Time", default=_SIMULATION.sleep_time, min=0.01, soft_max=5.0, subtype="TIME_ABSOLUTE", unit="TIME_ABSOLUTE",
        description="Seconds a body must stay still before it sleeps")
    device: EnumProperty(name="Device", items=device_items,
                         description="OpenCL device that runs the simulation")
    max_particles: IntProperty(name="Particle Limit", default=_CONVERSION.max_particles, min=1,
                               description="Refuse to simulate more particles than this")
    bake_mode: EnumProperty(name="Bake To", default=BAKE_MODE_ITEMS[0][0], items=BAKE_MODE_ITEMS)
    cache_folder: StringProperty(
        name="Cache Folder", default=DEFAULT_CACHE_FOLDER, subtype="DIR_PATH", options=_BLEND_RELATIVE,
        description="Where Bake To Instances writes its point cache ('//' is the folder of the .blend)")


class PRB_ObjectSettings(bpy.types.PropertyGroup):
    role: EnumProperty(name="Role", items=ROLE_ITEMS, default=_OBJECT.role)
    mass_mode: EnumProperty(
        name="Mass From", default=_OBJECT.mass_mode,
        items=(("DENSITY", "Density", "Mass from the object's volume and a density"),
               ("MASS", "Mass", "Total mass of the object")))
    density: FloatProperty(name="Density", default=_OBJECT.density, min=1e-6, soft_max=20000.0,
                           description="kg/m³ (water: 1000, wood: ~600, steel: ~7850)")
    mass: FloatProperty(name="Mass", default=_OBJECT.mass, min=1e-6, soft_max=10000.0, unit="MASS")
    friction: FloatProperty(name="Friction", default=_OBJECT.friction, min=0.0, soft_max=2.0)
    bounciness: FloatProperty(name="Bounciness", default=_OBJECT.bounciness, min=0.0, max=1.0, subtype="FACTOR",
                              description="Coefficient of restitution")
    initial_velocity: FloatVectorProperty(name="Initial Velocity", size=3, subtype="VELOCITY", unit="VELOCITY",
                                           default=_OBJECT.initial_velocity)
    initial_angular_velocity: FloatVectorProperty(
        name="Initial Angular Velocity", size=3, subtype="XYZ", default=_OBJECT.initial_angular_velocity,
        description="Radians per second about the world axes")
    linear_damping: FloatProperty(name="Linear Damping", default=_OBJECT.linear_damping, min=0.0, max=0.99, subtype="FACTOR",
                                  description="Fraction of linear velocity lost per second")
    angular_damping: FloatProperty(name="Angular Damping", default=_OBJECT.angular_damping, min=0.0, max=0.99, subtype="FACTOR",
                                   description="Fraction of angular velocity lost per second")
    glue: EnumProperty(name="Glue", items=GLUE_ITEMS, default=GLUE_FROM_COLLECTION,
                       description="Bond this piece to the pieces it touches when converted (fractured pieces, "
                                   "bricks): breakable FIXED bonds, found from the particles, no object per bond")
    glue_strength: FloatProperty(name="Glue Strength (Pa)", default=_GLUE.strength, min=1e-3, soft_min=100.0,
                                 soft_max=1e7, precision=0, description=_GLUE_STRENGTH_DESCRIPTION)
    glue_group: StringProperty(name="Glue Group", default=_GLUE.group, description=_GLUE_GROUP_DESCRIPTION)


class PRB_CollectionGlue(bpy.types.PropertyGroup):
    use_glue: BoolProperty(name="Glue", default=_GLUE.enabled,
                           description="Bond the collection's pieces to the pieces they touch when converted "
                                       "(each object may set its own Glue instead)")
    glue_strength: FloatProperty(name="Glue Strength (Pa)", default=_GLUE.strength, min=1e-3, soft_min=100.0,
                                 soft_max=1e7, precision=0, description=_GLUE_STRENGTH_DESCRIPTION)
    glue_group: StringProperty(name="Glue Group", default=_GLUE.group, description=_GLUE_GROUP_DESCRIPTION)


classes = (PRB_SceneSettings, PRB_ObjectSettings, PRB_CollectionGlue)


def register():
    bpy.types.Scene.prb_settings = PointerProperty(type=PRB_SceneSettings)
    bpy.types.Object.prb = PointerProperty(type=PRB_ObjectSettings)
    bpy.types.Collection.prb_glue = PointerProperty(type=PRB_CollectionGlue)


def unregister():
    del bpy.types.Collection.prb_glue
    del bpy.types.Object.prb
    del bpy.types.Scene.prb_settings
    refresh_devices()
