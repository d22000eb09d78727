"""Blender's rigid body constraints (the Rigid Body world's ``constraints`` collection, each object's
``rigid_body_constraint``) read as the model's joints (core/joints.py), the way Blender builds
them for Bullet (rigidbody.cc, rigidbody_validate_sim_constraint):

- Sides. Bullet joins object1 and object2 only when both are objects of the world; otherwise it
  makes no constraint at all. So does the bake: a constraint with a side empty or outside the
  world's collection is left out, with a note naming it, as is one between two PASSIVE objects
  (nothing to move) or from an object to itself. An ACTIVE side is its body, a PASSIVE side the
  world (body -1, core.joints.STATIC_SIDE).
- Frame. The constraint object's world transform at the bake's first frame, its scale taken out
  (Blender's mat4_to_loc_quat), is the joint's frame in both bodies as they are then.
- Swapped sides. Bullet constrains object2's frame as seen from object1's; the core's body a must
  move, so a constraint whose object1 is the PASSIVE side is read from object2. Seen from the other
  side every coordinate changes sign: limits [lower, upper] become [-upper, -lower] and a motor's
  target velocity its negative. That is exact for every row Blender's types limit one at a time
  (HINGE's z angle, SLIDER's and PISTON's x); a GENERIC turning about two axes at once reads its
  Euler angles from the other side, where they are not exactly the negated ones.
- Values. Type, limits (a lower value above the upper one is no limit in Bullet, and here, with a
  note), springs (GENERIC_SPRING; spring type SPRING2's stiffness and damping as the core reads
  them; SPRING1's stiffness as an undamped spring, with a note: Bullet's SPRING1 drives the spring
  as a motor whose "damping" scales the motor's target speed, not a damping force), motors (MOTOR),
  breaking (``use_breaking``, ``breaking_threshold``), ``disable_collisions`` and ``enabled``. A value
  the constraint uses that is not finite refuses the setup in one line naming it (WorldRefused).
- Units. ``breaking_threshold`` is an impulse per Bullet substep: the world's time scale / (scene
  fps x ``substeps_per_frame``) seconds (``bullet_substep``).
- Not read: ``use_override_solver_iterations`` / ``solver_iterations`` (the core solves joints in its
  own passes), and a PASSIVE side's motion: a constraint to a moving PASSIVE object holds to where
  that object is at the first frame (noted).
- ``enabled`` may be keyed: it is then read at every output frame (``enabled_frames``), as Blender
  reads it at the frame it steps to.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from ..core.joints import ROWS, limit_rows
from ..core.rotations import matrix_quaternions
from ..core.voxelize import polar_decomposition

ENABLED_PATH = "rigid_body_constraint.enabled"
AXES = ("x", "y", "z")
# what is read differently from Bullet, as the note says it (ConstraintsRead.remarks)
REVERSED_LIMIT = "a limit's lower value above its upper one, which Bullet (and the bake) reads as no limit"
SPRING1 = "spring type SPRING1, baked as an undamped spring of its stiffness (switch to SPRING2 for damping)"
MOVING_ANCHOR = "a side that is a moving PASSIVE object, held where that object is at the first frame"


class ConstraintRefused(ValueError):
    """A constraint's value the bake cannot simulate: one line naming the constraint."""


@dataclass
class ConstraintSetup:
    """One constraint read for ModelBuilder.add_joint: its sides as object names, its fields in body
    a's sense (sides swapped already)."""

    name: str  # the constraint's object
    kind: str  # Blender's type, a core.joints.JOINT_KINDS
    body_object: str  # the ACTIVE object whose body is the joint's body a
    other_object: str | None  # the ACTIVE object of body b, or None: the world (a PASSIVE object)
    fields: dict  # add_joint's keyword fields but the orientation
    enabled_keyed: bool = False  # its ``enabled`` is animated (read per frame)
    swapped: bool = False  # object1 was the PASSIVE side: read from object2


@dataclass
class ConstraintsRead:
    """The world's constraints as the bake reads them."""

    setups: list  # ConstraintSetup, in the constraints collection's order: the joints' order
    left_out: list = field(default_factory=list)  # (constraint name, why Bullet makes no constraint of it)
    remarks: list = field(default_factory=list)  # (constraint name, what is read differently: the *_LIMIT... texts)
    bullet_substep: float = 1.0 / 240.0  # s: what an impulse of breaking_threshold is per

    @property
    def enabled_keyed(self) -> bool:
        return any(s.enabled_keyed for s in self.setups)

    def note(self) -> str | None:
        """One line for the panel and the log: the constraints left out and those read differently
        from Bullet, by reason, naming the first few; None when there are none."""
        parts = []
        for what, entries in (("left out as Bullet leaves them", self.left_out), ("read with", self.remarks)):
            by_reason: dict = {}
            for name, why in entries:
                by_reason.setdefault(why, []).append(name)
            for why, names in by_reason.items():
                shown = ", ".join(f'"{n}"' for n in names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
                count = f"{len(names)} constraint{'s' if len(names) != 1 else ''}"
                parts.append(f"{count} {what} ({why}): {shown}")
        return "; ".join(parts) or None


def bullet_substep(scene) -> float:
    """Bullet's substep in Blender (rigidbody.cc BKE_rigidbody_do_simulation): the world's time scale
    / (scene fps x substeps_per_frame) seconds."""
    world = scene.rigidbody_world
    fps = scene.render.fps / scene.render.fps_base
    return float(world.time_scale) / (fps * max(int(world.substeps_per_frame), 1))


def _number(name: str, constraint, attribute: str) -> float:
    value = float(getattr(constraint, attribute))
    if not math.isfinite(value):
        label = attribute.replace("_", " ")
        raise ConstraintRefused(f'Rigid body constraint "{name}": {label} must be a finite number, got {value:g}. '
                                "Fix it in Physics > Rigid Body Constraint before baking.")
    return value


@lru_cache(maxsize=None)
def _limited(kind: str) -> tuple:
    return tuple(int(row) for row in np.flatnonzero(limit_rows(kind)))


def _limits(name: str, c, kind: str, remarks: list) -> dict:
    """The limit fields of the rows the type reads (core.joints.limit_rows); a used row whose lower
    value is above its upper one is no limit (Bullet's reading). Plain Python: the panel reads
    thousands of constraints at a refresh."""
    use, lower, upper = [False] * ROWS, [0.0] * ROWS, [0.0] * ROWS
    reversed_limit = False
    for row in _limited(kind):
        part, axis = ("lin", AXES[row]) if row < 3 else ("ang", AXES[row - 3])
        if not getattr(c, f"use_limit_{part}_{axis}"):
            continue
        lower[row] = _number(name, c, f"limit_{part}_{axis}_lower")
        upper[row] = _number(name, c, f"limit_{part}_{axis}_upper")
        if lower[row] > upper[row]:
            reversed_limit = True
            continue
        use[row] = True
    if reversed_limit:
        remarks.append((name, REVERSED_LIMIT))
    return dict(use_limit_lin=tuple(use[:3]), use_limit_ang=tuple(use[3:]), limit_lin_lower=tuple(lower[:3]),
                limit_lin_upper=tuple(upper[:3]), limit_ang_lower=tuple(lower[3:]), limit_ang_upper=tuple(upper[3:]))


def _springs(name: str, c, remarks: list) -> dict:
    suffixes = [axis for axis in AXES] + [f"ang_{axis}" for axis in AXES]
    use = tuple(bool(getattr(c, f"use_spring_{s}")) for s in suffixes)
    stiffness, damping = np.zeros(ROWS), np.zeros(ROWS)
    spring1 = c.spring_type == "SPRING1"
    for row, suffix in enumerate(suffixes):
        if use[row]:
            stiffness[row] = _number(name, c, f"spring_stiffness_{suffix}")
            damping[row] = 0.0 if spring1 else _number(name, c, f"spring_damping_{suffix}")
    if spring1 and any(use):
        remarks.append((name, SPRING1))
    return dict(use_spring=use, spring_stiffness=stiffness, spring_damping=damping)


def _motor(name: str, c) -> dict:
    fields = {}
    for part in ("lin", "ang"):
        if getattr(c, f"use_motor_{part}"):
            fields[f"motor_{part}_velocity"] = _number(name, c, f"motor_{part}_target_velocity")
            fields[f"motor_{part}_max_impulse"] = _number(name, c, f"motor_{part}_max_impulse")
    return fields


def constraint_fields(obj, remarks: list) -> dict:
    """add_joint's fields of the constraint object ``obj`` as object1 sees it (before any swap): only
    what its type uses is read (and must be finite)."""
    c = obj.rigid_body_constraint
    name, kind = obj.name, c.type
    fields = _limits(name, c, kind, remarks)
    if kind == "GENERIC_SPRING":
        fields.update(_springs(name, c, remarks))
    if kind == "MOTOR":
        fields.update(_motor(name, c))
    fields.update(breaking_threshold=_number(name, c, "breaking_threshold") if c.use_breaking else None,
                  disable_collisions=bool(c.disable_collisions), enabled=bool(c.enabled))
    return fields


def seen_from_object2(fields: dict) -> dict:
    """The fields of a constraint read from its object2's side: every row's coordinate negated."""
    out = dict(fields)
    for part in ("lin", "ang"):
        lower, upper = np.asarray(fields[f"limit_{part}_lower"]), np.asarray(fields[f"limit_{part}_upper"])
        out[f"limit_{part}_lower"], out[f"limit_{part}_upper"] = -upper, -lower
        if f"motor_{part}_velocity" in fields:
            out[f"motor_{part}_velocity"] = -fields[f"motor_{part}_velocity"]
    return out


def _side(obj, active: set, passive: set) -> tuple[str | None, str | None]:
    """("body" | "world", None) for an object of the world, (None, why not) otherwise."""
    if obj is None:
        return None, None
    if obj.name in active:
        return "body", None
    if obj.name in passive:
        return "world", None
    return None, "a side not in the Rigid Body world's collection"


def read_constraints(scene, objects, active: set, passive: set, moving: set, keyed: set) -> ConstraintsRead:
    """The constraints of the constraint objects ``objects``: ``active``/``passive`` the names of the
    world's ACTIVE and PASSIVE objects, ``moving`` those of the PASSIVE ones that move, ``keyed`` those
    of the constraint objects whose ``enabled`` is animated. Raises ConstraintRefused."""
    read = ConstraintsRead([], bullet_substep=bullet_substep(scene))
    for obj in objects:
        c = obj.rigid_body_constraint
        name = obj.name
        one, two = c.object1, c.object2
        (side1, why1), (side2, why2) = _side(one, active, passive), _side(two, active, passive)
        if one is None or two is None:
            read.left_out.append((name, "a side with no object"))
            continue
        if why1 or why2:
            read.left_out.append((name, why1 or why2))
            continue
        if one.name == two.name:
            read.left_out.append((name, "both sides the same object"))
            continue
        if side1 == side2 == "world":
            read.left_out.append((name, "both sides PASSIVE"))
            continue
        fields = constraint_fields(obj, read.remarks)
        swapped = side1 == "world"
        if swapped:
            fields = seen_from_object2(fields)
            one, two = two, one
        if two.name in moving:
            read.remarks.append((name, MOVING_ANCHOR))
        read.setups.append(ConstraintSetup(name, c.type, one.name, two.name if side2 == side1 == "body" else None,
                                           fields, enabled_keyed=name in keyed, swapped=swapped))
    return read


def constraint_frame(matrix_world) -> tuple[np.ndarray, np.ndarray]:
    """(pivot (3,), orientation (w, x, y, z)) of a constraint object's world matrix: its location and
    its rotation without scale (Blender's mat4_to_loc_quat; a mirrored one turned, as Blender does, by
    negating the matrix)."""
    m = np.asarray(matrix_world, dtype=np.float64)
    rotation, _ = polar_decomposition(m[:3, :3])
    if np.linalg.det(rotation) < 0:
        rotation = -rotation
    return m[:3, 3].copy(), matrix_quaternions(rotation)


def add_joints(builder, read: ConstraintsRead, links, objects_by_name) -> list[str]:
    """Add the joints of ``read`` to ``builder`` on the bodies of ``links`` (add_bodies' BodyLinks), each
    at its constraint object's world transform now (the bake's first frame), and set Bullet's substep.
    Returns the constraint names in joint order. Raises ConstraintRefused for a constraint that cannot
    be joined (a side that became several bodies, a transform that is not finite)."""
    bodies: dict = {}
    for link in links:
        bodies.setdefault(link.object_name, []).append(link.body_index)

    def body_of(object_name: str, constraint: str) -> int:
        found = bodies.get(object_name, [])
        if len(found) != 1:
            raise ConstraintRefused(f'Rigid body constraint "{constraint}" joins "{object_name}", which is '
                                    f"{len(found)} bodies (its instances): a constraint joins one body to another")
        return found[0]

    builder.bullet_substep = read.bullet_substep
    names = []
    for setup in read.setups:
        matrix = np.array(objects_by_name[setup.name].matrix_world, dtype=np.float64)
        if not np.isfinite(matrix).all():
            raise ConstraintRefused(f'Rigid body constraint "{setup.name}": its object\'s world matrix is not '
                                    "finite at the first frame: fix its transform before baking.")
        pivot, orientation = constraint_frame(matrix)
        a = body_of(setup.body_object, setup.name)
        b = -1 if setup.other_object is None else body_of(setup.other_object, setup.name)
        try:
            builder.add_joint(setup.kind, a, b, pivot, orientation=orientation, **setup.fields)
        except ValueError as exc:
            raise ConstraintRefused(f'Rigid body constraint "{setup.name}": {exc}') from exc
        names.append(setup.name)
    return names


def enabled_frames(scene, read: ConstraintsRead, objects_by_name, frame_start: int, frame_step: int,
                   frame_count: int) -> np.ndarray:
    """(F + 1, J) bool: each joint's ``enabled`` at the output frames (row f: the step that ends at
    frame f, as Blender reads a keyed ``enabled`` at the frame it steps to). Only the keyed ones are
    read per frame. Changes the scene's frame (the caller puts it back)."""
    from .rigid_body_world import animation_shown

    flags = np.array([[s.fields["enabled"] for s in read.setups]] * (frame_count + 1), dtype=bool)
    keyed = [(k, objects_by_name[s.name]) for k, s in enumerate(read.setups) if s.enabled_keyed]
    with animation_shown(scene, []):  # the world off: stepping frames does not run Bullet
        for f in range(frame_count + 1):
            scene.frame_set(frame_start + f * frame_step)
            for k, obj in keyed:
                flags[f, k] = obj.rigid_body_constraint.enabled
    return flags
