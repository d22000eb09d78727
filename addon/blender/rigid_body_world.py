"""Blender's Rigid Body world (``scene.rigidbody_world``) read as the bake's setup.

A scene whose world is on (or was turned off by our own bake, ``WORLD_OFF_BY_BAKE``) is baked as it
is set up there, with no roles: the objects of the world's collection that are ACTIVE become bodies
and the PASSIVE ones triangle colliders (moving ones, Animated or not, follow their animation), each
with its own mass, friction, bounciness and damping. The world gives the gravity (the scene's, times
the world's gravity weights), the time scale and, by default, the frame range of its cache. Contacts
combine friction and bounciness as Bullet does (settings.MATERIAL_COMBINE_BULLET), so that a scene
gives what it gave in Bullet. A scene without a world, or whose world the user turned off, keeps the
add-on's roles.

The world's constraints become the model's joints as Bullet builds them (rigid_body_constraints.py):
those Bullet leaves out (a side empty or outside the world, both sides PASSIVE) the bake leaves
out too, and says so with what it reads differently (``RigidBodyWorld.constraints_note``).

What cannot be simulated is refused in one line naming the object (``WorldRefused``): an object of
the collection that is not a mesh, a value that is not finite or out of its range, a body of zero
scale or without faces, a constraint value that is not finite.

An ACTIVE body that is Animated or has Dynamic off (now or keyed) is a kinematic body
(core/kinematic.py): moved by its animation with infinite mass in the frames Bullet would, handed to
the simulation with its animation's velocity when the flag goes off.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from ..core.settings import MATERIAL_COMBINE_BULLET, ROLE_DYNAMIC, ROLE_STATIC, ObjectSettings
from .rigid_body_constraints import ENABLED_PATH, ConstraintRefused, ConstraintsRead, read_constraints

# A scene's custom property: our bake turned the world off so that Play shows the keys instead of
# re-simulating them (item 8 of issue 47); the world still is the setup a bake reads, and
# restore_world() turns it back on.
WORLD_OFF_BY_BAKE = "prb_world_off_by_bake"
ACTIVE, PASSIVE = "ACTIVE", "PASSIVE"
# The keyable flags that hand an ACTIVE body to its animation (Bullet's kinematic state)
ANIMATION_FLAGS = ("rigid_body.kinematic", "rigid_body.enabled")


class WorldRefused(ValueError):
    """The world's setup cannot be simulated: one line for the user, naming the object."""


@dataclass
class RigidBodyWorld:
    collection: str  # the world's collection
    active: list  # the ACTIVE objects (bodies), in the collection's order
    passive: list  # the PASSIVE objects (triangle colliders)
    constraints: list  # the objects of the world's constraints collection that are in the scene
    settings: dict  # object name -> ObjectSettings, from its rigid_body
    # the ACTIVE objects that follow their animation for some frames (Animated on, Dynamic off, or
    # either keyed): kinematic bodies (core.kinematic), their paths read per frame (read_paths)
    animated: list = field(default_factory=list)
    off_by_bake: bool = False  # enabled off because our bake turned it off (WORLD_OFF_BY_BAKE)
    notes: list = field(default_factory=list)
    # the constraints as the joints read them (those simulated, those left out as Bullet leaves them)
    joints: ConstraintsRead | None = None

    def summary(self) -> str:
        animated = f" ({len(self.animated)} Animated)" if self.animated else ""
        return (f"{len(self.active)} active{animated}, {len(self.passive)} passive, {len(self.constraints)} "
                "constraints from the Rigid Body world")

    def constraints_note(self) -> str | None:
        """The line that names the constraints left out as Bullet leaves them and those read
        differently from Bullet (ConstraintsRead.note), or None when every one is simulated as is."""
        return self.joints.note() if self.joints is not None else None


def world_gravity(scene) -> tuple:
    """Bullet's gravity in Blender: the scene's (when Gravity is on) times the world's gravity and All
    effector weights."""
    world = scene.rigidbody_world
    if not scene.use_gravity:
        return (0.0, 0.0, 0.0)
    weights = world.effector_weights
    scale = float(weights.gravity) * float(weights.all)
    return tuple(float(g) * scale for g in scene.gravity)


def is_setup(scene) -> bool:
    """Whether the scene's Rigid Body world is the bake's setup (else the add-on's roles are)."""
    world = getattr(scene, "rigidbody_world", None)
    if world is None or world.collection is None:
        return False
    return bool(world.enabled or scene.get(WORLD_OFF_BY_BAKE))


def _finite_in(name: str, value: float, low: float, high: float, what: str) -> float:
    value = float(value)
    if not (math.isfinite(value) and low <= value <= high):
        bounds = f"from {low:g} to {high:g}" if math.isfinite(high) else f"of {low:g} or more"
        raise WorldRefused(f'Rigid body "{name}": {what} must be a finite number {bounds}, got {value:g}. '
                           "Fix it in Physics > Rigid Body before baking.")
    return value


def rigid_body_settings(obj) -> ObjectSettings:
    """The add-on's settings of an object of the world, from its rigid_body (refused when a value is
    not finite or out of Blender's range)."""
    rb = obj.rigid_body
    name = obj.name
    active = rb.type == ACTIVE
    mass = float(rb.mass)
    if active and not (math.isfinite(mass) and mass > 0):
        raise WorldRefused(f'Rigid body "{name}": mass must be a finite number more than 0, got {mass:g} kg. '
                           "Fix it in Physics > Rigid Body before baking.")
    friction = _finite_in(name, rb.friction, 0.0, math.inf, "friction")
    bounciness = _finite_in(name, rb.restitution, 0.0, 1.0, "bounciness")
    # the core's damping is a fraction lost per second below 1 (a body that loses all of its speed
    # every second cannot move at all)
    linear = _finite_in(name, rb.linear_damping, 0.0, 1.0, "linear damping")
    angular = _finite_in(name, rb.angular_damping, 0.0, 1.0, "angular damping")
    for what, value in (("linear damping", linear), ("angular damping", angular)):
        if value >= 1.0:
            raise WorldRefused(f'Rigid body "{name}": {what} 1 stops the body outright; use less than 1.')
    return ObjectSettings(role=ROLE_DYNAMIC if active else ROLE_STATIC, mass_mode="MASS",
                          mass=mass if active else 1.0, friction=friction, bounciness=bounciness,
                          linear_damping=linear, angular_damping=angular)


def _animated_flags(obj, paths=ANIMATION_FLAGS) -> list[str]:
    """The data paths of ``paths`` (the rigid body flags by default) that the object's action or drivers key."""
    from .bake import PREV_ACTION, action_fcurves, is_bake_action

    ad = obj.animation_data
    if ad is None:
        return []
    curves = list(ad.drivers)
    action = ad.action
    if is_bake_action(action):  # baked before: the user's own action waits under the bake's
        action = obj.get(PREV_ACTION)
    curves += action_fcurves(action)
    return sorted({c.data_path for c in curves if c.data_path in paths})


def _follows_animation(obj) -> bool:
    """Whether Bullet moves this ACTIVE body by its animation for some frames (Bullet's kinematic
    state: Animated on or Dynamic off, now or keyed)."""
    rb = obj.rigid_body
    return bool(rb.kinematic or not rb.enabled or _animated_flags(obj))


def follows_animation_now(obj) -> bool:
    rb = obj.rigid_body
    return bool(rb.kinematic or not rb.enabled)


@contextmanager
def animation_shown(scene, objects):
    """The objects moved by their own animation while inside: the world off (else Bullet's simulation
    places its bodies) and, on an object baked before, the user's action in place of the bake's
    (bake.PREV_ACTION). Both put back on leaving."""
    from .bake import PREV_ACTION, PREV_SLOT, assign_action, is_bake_action

    world = scene.rigidbody_world
    was_enabled = world.enabled
    swapped = []
    try:
        world.enabled = False
        for obj in objects:
            ad = obj.animation_data
            if ad is not None and is_bake_action(ad.action):
                slot = ad.action_slot.identifier if getattr(ad, "action_slot", None) is not None else None
                swapped.append((obj, ad.action, slot))
                assign_action(obj, obj.get(PREV_ACTION), obj.get(PREV_SLOT))
        yield
    finally:
        for obj, action, slot in swapped:
            assign_action(obj, action, slot)
        world.enabled = was_enabled


def read_paths(scene, objects, frame_start: int, frame_step: int, frame_count: int):
    """(moved (F + 1, K) bool, matrices (F + 1, K, 4, 4)) of the objects over the output frames: whether
    Bullet moves each by its animation at that frame (follows_animation_now) and its world matrix as
    its animation places it. Changes the scene's frame (the caller puts it back)."""
    moved = np.zeros((frame_count + 1, len(objects)), dtype=bool)
    matrices = np.zeros((frame_count + 1, len(objects), 4, 4))
    with animation_shown(scene, objects):
        for f in range(frame_count + 1):
            scene.frame_set(frame_start + f * frame_step)
            for k, obj in enumerate(objects):
                moved[f, k] = follows_animation_now(obj)
                matrices[f, k] = np.array(obj.matrix_world, dtype=np.float64)
    return moved, matrices


def _no_volume(obj) -> str | None:
    """Why a mesh object of the world has nothing to simulate (before its mesh is evaluated: the
    conversion refuses what its modifiers leave empty, convert_scene strict), or None."""
    m = obj.matrix_world
    columns = [math.sqrt(sum(m[row][col] ** 2 for row in range(3))) for col in range(3)]
    if sorted(columns)[1] <= 0.0:  # a point or a line: a flat object still collides
        return "has zero scale"
    if len(obj.data.polygons) == 0 and not obj.modifiers:
        return "has no faces"
    return None


def read_world(scene) -> RigidBodyWorld | None:
    """The scene's Rigid Body world as the bake's setup, or None when the scene has none (or the user
    turned it off): then the add-on's roles apply. Raises WorldRefused for a setup it cannot bake."""
    if not is_setup(scene):
        return None
    world = scene.rigidbody_world
    collection = world.collection
    in_scene = set(scene.objects.keys())
    active, passive, settings, animated = [], [], {}, []
    for obj in collection.all_objects:
        if obj.name not in in_scene:
            continue
        if obj.type != "MESH":
            raise WorldRefused(
                f'"{obj.name}" is in the Rigid Body world\'s collection "{collection.name}" but is '
                f"{'an' if obj.type[0] in 'AEIOU' else 'a'} {obj.type.title()}, which cannot be a rigid body: "
                "take it out of the collection")
        if obj.rigid_body is None:
            raise WorldRefused(
                f'"{obj.name}" is in the Rigid Body world\'s collection "{collection.name}" but has no rigid body '
                "settings: add them (Physics > Rigid Body) or take it out of the collection")
        settings[obj.name] = rigid_body_settings(obj)
        reason = _no_volume(obj)
        if reason:
            what = "rigid body" if obj.rigid_body.type == ACTIVE else "passive rigid body"
            raise WorldRefused(f'The {what} "{obj.name}" {reason}: it has no volume to simulate. Give it faces and a '
                               "non-zero scale, or take it out of the Rigid Body world's collection")
        if obj.rigid_body.type == ACTIVE:
            if _follows_animation(obj):
                animated.append(obj.name)
            active.append(obj)
        else:
            passive.append(obj)
    constraints = [o for o in (world.constraints.all_objects if world.constraints is not None else ())
                   if o.rigid_body_constraint is not None and o.name in in_scene]
    return RigidBodyWorld(collection.name, active, passive, constraints, settings, animated,
                          off_by_bake=not world.enabled, joints=_read_joints(scene, constraints, active, passive))


def _read_joints(scene, constraints, active, passive) -> ConstraintsRead:
    from .bake_objects import animated_chain

    moving = {o.name for o in passive if animated_chain(o)}
    keyed = {o.name for o in constraints if _animated_flags(o, (ENABLED_PATH,))}
    try:
        return read_constraints(scene, constraints, {o.name for o in active}, {o.name for o in passive}, moving,
                                keyed)
    except ConstraintRefused as exc:
        raise WorldRefused(str(exc)) from exc


def world_values(scene) -> dict:
    """The world's part of the bake's settings, by the names of the settings' fields (bake_options.BakeOptions):
    its gravity, time scale, cache range (the default frame range) and Bullet's combining rule."""
    world = scene.rigidbody_world
    cache = world.point_cache
    return dict(gravity=world_gravity(scene), time_scale=float(world.time_scale),
                frame_start=int(cache.frame_start), frame_end=int(cache.frame_end),
                material_combine=MATERIAL_COMBINE_BULLET)


def turn_off_after_bake(scene) -> bool:
    """Turn the scene's Rigid Body world off after a bake of its bodies, so that Play shows the baked
    keys (with it on, Bullet simulates the bodies again over them), and mark that our bake did it
    (WORLD_OFF_BY_BAKE: the world still is the setup the next bake reads). Returns whether it was on."""
    world = scene.rigidbody_world
    if world is None or not world.enabled:
        return False
    world.enabled = False
    scene[WORLD_OFF_BY_BAKE] = True
    return True


def restore_world(scene) -> bool:
    """Turn back on a Rigid Body world that our bake turned off (turn_off_after_bake). Returns whether
    it did."""
    world = scene.rigidbody_world
    if not scene.get(WORLD_OFF_BY_BAKE):
        return False
    del scene[WORLD_OFF_BY_BAKE]
    if world is None:
        return False
    world.enabled = True
    return True
