"""Constraints between bodies (Blender's Rigid Body Constraints) as flat arrays: the joints' model.

Blender users glue fractured pieces, hang chains and build hinges with ``rigid_body_constraint``
(types FIXED, POINT, HINGE, SLIDER, PISTON, GENERIC, GENERIC_SPRING, MOTOR). Bullet builds every one
of them on a constraint frame (the constraint empty's world transform) held in each body's frame, and
constrains the six relative coordinates of body b's frame in body a's frame: three linear ones along
frame a's axes and three angles, Bullet's 6-DOF convention (btGeneric6DofConstraint: the relative
rotation read as XYZ Euler angles). So does this model: every kind is six *rows*, each

- FREE: not constrained (POINT's angles, MOTOR's everything),
- LOCKED: held at 0 (FIXED's six rows, HINGE's x and y angles, ...),
- LIMITED: kept between a lower and an upper value (HINGE's z angle with ``use_limit_ang_z``,
  SLIDER's x with ``use_limit_lin_x``, GENERIC's rows; lower == upper is LOCKED at that value),

and independently of its mode may carry a spring (GENERIC_SPRING: stiffness N/m or N m/rad, damping
N s/m or N m s/rad, towards the pose at the start: Blender's spring_type SPRING2, Bullet's
btGeneric6DofSpring2Constraint; SPRING1's damping is another quantity, not read here) and a motor (MOTOR: a target
relative velocity along x / about x, its impulse capped). A joint's kind only chooses the modes;
the solver (reference_joints.py) sees rows. Axes as Blender's: HINGE turns about the frame's z,
SLIDER and PISTON slide along its x, MOTOR drives along and about its x.

Units as Blender's, read by Bullet: ``breaking_threshold`` is an impulse per Bullet substep (1 / (scene
fps x world substeps_per_frame) seconds: ``JointModel.bullet_substep``) and constraint row
(btSequentialImpulseConstraintSolver clamps each row's impulse to it and disables a constraint when
one row's applied impulse reaches it). The solver scales it to its own substep and does the same, so
a steady load breaks a joint where it broke Bullet's, when force x bullet_substep reaches the
threshold, and a joint that breaks under an impact passes on no more than the threshold. A motor's
``max_impulse``, despite its name, is a force (N) or torque (N m): Blender stores it in Bullet's
m_maxMotorForce, which btGeneric6DofConstraint caps per substep at m_maxMotorForce / fps, so it does
not depend on the substeps.

Body b may be STATIC_BODY (-1): the world (a passive object or an empty); its frame is then given in
world space. ``disable_collisions`` (Blender's default on) skips the contacts of the joint's two
bodies while it is unbroken (Bullet's checkCollideWithOverride ignores disabled constraints).
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from .rotations import quaternion_multiply, quaternion_to_matrix

STATIC_SIDE = -1  # body b index of a joint to the world (model.STATIC_BODY)

JOINT_KINDS = ("FIXED", "POINT", "HINGE", "SLIDER", "PISTON", "GENERIC", "GENERIC_SPRING", "MOTOR")

# a row's mode
FREE, LOCKED, LIMITED = 0, 1, 2
ROWS = 6  # linear x, y, z along frame a's axes, then the XYZ Euler angles of frame b in frame a
# Blender's default world: 24 fps, 10 substeps per frame
DEFAULT_BULLET_SUBSTEP = 1.0 / 240.0
# The locked and limit rows' softness: Box2D v3's soft step (damping ratio 2, b2DefaultJointDef) at
# this fraction of the substep rate. Box2D's own (60 Hz, capped at a quarter of the substep rate: 60 Hz
# at Blender's 240 Hz substeps) is softer than Bullet's rigid rows: a hanging 10-link FIXED chain
# sagged 6.9 mm against Bullet's 3.9 mm, and the destruction scene's ball broke 16 of the wall's bonds
# against Bullet's 48 and stopped in it. At 0.35 (84 Hz): 3.5 mm, 49 bonds, and the ball goes
# through. At 0.5 and above one solve pass and one relax pass no longer settle a stiff chain: a
# standing glued wall rings and shakes 41 % of its bonds apart (docs/experiments/joint-stiffness.md).
JOINT_HERTZ_FRACTION = 0.35
JOINT_DAMPING_RATIO = 2.0


def joint_hertz(joints, substep: float) -> float:
    """The locked and limit rows' soft step frequency at a substep."""
    return joints.hertz_fraction / substep


# The kernels' tables per joint (kernels/65_joints.cl, joint_solve.py): the six rows' values of each
# field, and their accumulated impulses of each kind, field after field
JOINT_ROW_FIELDS = ("lower", "upper", "spring_stiffness", "spring_damping", "motor_velocity", "motor_max_impulse")
JOINT_IMPULSE_KINDS = ("locked", "lower", "upper", "spring", "motor")
JOINT_ROW_VALUES = ROWS * len(JOINT_ROW_FIELDS)
JOINT_IMPULSES = ROWS * len(JOINT_IMPULSE_KINDS)
# The kernels' state bits per joint: Blender's enabled (set by the host, keyable), broken (by the
# kernels, for good), Blender's disable_collisions (the joined bodies' contacts left out while it
# holds), a row held at the breaking threshold in this substep's passes (it breaks after them)
JOINT_ENABLED, JOINT_BROKEN, JOINT_NO_COLLISIONS, JOINT_AT_THRESHOLD = 1, 2, 4, 8
# The kernels' row modes per joint, two bits a row, and above them whether any row has a spring, a
# motor or limits (a glue bond has none: its passes skip straight to its locked rows)
JOINT_MODE_SPRINGS, JOINT_MODE_MOTORS, JOINT_MODE_LIMITS = 1 << 12, 1 << 13, 1 << 14


@dataclass
class JointModel:
    """The joints of a Model as flat arrays (J joints). Built by ``ModelBuilder.add_joint`` / finalize."""

    body_a: np.ndarray  # (J,) int32, a dynamic body
    body_b: np.ndarray  # (J,) int32, a dynamic body or STATIC_SIDE (-1)
    # each side's constraint frame: its origin from the body's centre of mass and its rotation, in the
    # body's frame (for a STATIC_SIDE: in the world)
    anchor_a: np.ndarray  # (J, 3)
    anchor_b: np.ndarray  # (J, 3)
    frame_a: np.ndarray  # (J, 4) (w, x, y, z)
    frame_b: np.ndarray  # (J, 4)
    mode: np.ndarray  # (J, 6) int8: FREE, LOCKED, LIMITED per row
    lower: np.ndarray  # (J, 6) limits (m, rad); a LOCKED row is held at ``lower``
    upper: np.ndarray  # (J, 6)
    spring_stiffness: np.ndarray  # (J, 6) N/m, N m/rad (0: none)
    spring_damping: np.ndarray  # (J, 6) N s/m, N m s/rad
    motor_velocity: np.ndarray  # (J, 6) target relative velocity, m/s or rad/s
    motor_max_impulse: np.ndarray  # (J, 6) Blender's max impulse: a force or torque in effect; 0: no motor
    breaking_threshold: np.ndarray  # (J,) impulse per Bullet substep and row; inf: unbreakable
    disable_collisions: np.ndarray  # (J,) bool
    enabled: np.ndarray  # (J,) bool (Blender's ``enabled``: a disabled joint does nothing)
    bullet_substep: float = DEFAULT_BULLET_SUBSTEP  # s, 1 / (fps x substeps_per_frame)
    hertz_fraction: float = JOINT_HERTZ_FRACTION  # the locked and limit rows' soft step, of the substep rate
    damping_ratio: float = JOINT_DAMPING_RATIO

    @property
    def count(self) -> int:
        return int(self.body_a.shape[0])


def _triple(value, name):
    v = np.broadcast_to(np.asarray(value, dtype=np.float64), (3,)).copy()
    if not np.all(np.isfinite(v)):
        raise ValueError(f"{name} must be finite")
    return v


def limit_rows(kind) -> np.ndarray:
    """(6,) bool: the rows whose limit fields (use_limit_lin/ang, limit_*_lower/upper) a joint of Blender
    type ``kind`` reads, as Blender's panel shows them: HINGE z's angle, SLIDER x's distance, PISTON
    both of x's, GENERIC and GENERIC_SPRING all six, the others none."""
    if kind not in JOINT_KINDS:
        raise ValueError(f"joint kind must be one of {', '.join(JOINT_KINDS)}, got {kind!r}")
    rows = np.zeros(ROWS, dtype=bool)
    rows[{"HINGE": [5], "SLIDER": [0], "PISTON": [0, 3], "GENERIC": slice(None),
          "GENERIC_SPRING": slice(None)}.get(kind, [])] = True
    return rows


def joint_rows(kind, use_limit_lin=(False,) * 3, use_limit_ang=(False,) * 3, limit_lin_lower=0.0,
               limit_lin_upper=0.0, limit_ang_lower=0.0, limit_ang_upper=0.0):
    """(mode, lower, upper), each (6,), of a joint of Blender type ``kind`` and its limit fields (only
    those of the rows ``limit_rows(kind)`` count)."""
    use = np.concatenate([np.broadcast_to(use_limit_lin, (3,)), np.broadcast_to(use_limit_ang, (3,))]).astype(bool)
    lower = np.concatenate([_triple(limit_lin_lower, "lower limits"), _triple(limit_ang_lower, "lower limits")])
    upper = np.concatenate([_triple(limit_lin_upper, "upper limits"), _triple(limit_ang_upper, "upper limits")])
    free = np.full(ROWS, FREE, dtype=np.int8)
    locked = np.full(ROWS, LOCKED, dtype=np.int8)
    if kind == "FIXED":
        mode = locked
    elif kind == "POINT":
        mode = np.array([LOCKED] * 3 + [FREE] * 3, dtype=np.int8)
    elif kind == "HINGE":
        mode = np.array([LOCKED] * 5 + [FREE], dtype=np.int8)
    elif kind == "SLIDER":
        mode = np.array([FREE] + [LOCKED] * 5, dtype=np.int8)
    elif kind == "PISTON":
        mode = np.array([FREE, LOCKED, LOCKED, FREE, LOCKED, LOCKED], dtype=np.int8)
    else:  # MOTOR, GENERIC, GENERIC_SPRING
        mode = free
    mode = mode.copy()
    limited = limit_rows(kind) & use
    if np.any(lower[limited] > upper[limited]):
        raise ValueError("a joint's lower limit must not exceed its upper limit")
    mode[limited] = LIMITED
    mode[limited & (lower == upper)] = LOCKED
    lower = np.where(mode == LIMITED, lower, np.where(mode == LOCKED, np.where(limited, lower, 0.0), 0.0))
    upper = np.where(mode == LIMITED, upper, lower)
    return mode, lower, upper


def _frames_in_bodies(body, pivot, frame, body_position, body_orientation):
    """(anchor (J, 3), frame (J, 4)) of joints at world ``pivot`` (J, 3) with world ``frame`` (J, 4) seen
    from ``body`` (J,) at its initial pose: the pivot from its centre of mass and the frame's rotation,
    in the body's frame; a STATIC_SIDE keeps the world's."""
    static = body == STATIC_SIDE
    index = np.where(static, 0, body)
    q = body_orientation[index]
    anchor = np.einsum("kji,kj->ki", quaternion_to_matrix(q), pivot - body_position[index])
    local = quaternion_multiply(q * np.array([1.0, -1.0, -1.0, -1.0]), frame)
    return np.where(static[:, None], pivot, anchor), np.where(static[:, None], frame, local)


def joint_model(specs: list[dict], body_position: np.ndarray, body_orientation: np.ndarray,
                bullet_substep: float = DEFAULT_BULLET_SUBSTEP) -> JointModel | None:
    """The JointModel of the joints ``specs`` (ModelBuilder.add_joint's, pivot and frame in world
    space) on bodies at their initial poses (centres of mass); None when there are none."""
    if not specs:
        return None
    stack = lambda key, dtype=np.float64: np.array([s[key] for s in specs], dtype=dtype)  # noqa: E731
    body_a, body_b, pivot, frame = stack("body_a", np.int32), stack("body_b", np.int32), stack("pivot"), stack("frame")
    anchor_a, frame_a = _frames_in_bodies(body_a, pivot, frame, body_position, body_orientation)
    anchor_b, frame_b = _frames_in_bodies(body_b, pivot, frame, body_position, body_orientation)
    return JointModel(
        body_a=body_a, body_b=body_b, anchor_a=anchor_a, anchor_b=anchor_b, frame_a=frame_a, frame_b=frame_b,
        mode=stack("mode", np.int8), lower=stack("lower"), upper=stack("upper"),
        spring_stiffness=stack("spring_stiffness"), spring_damping=stack("spring_damping"),
        motor_velocity=stack("motor_velocity"), motor_max_impulse=stack("motor_max_impulse"),
        breaking_threshold=stack("breaking_threshold"), disable_collisions=stack("disable_collisions", bool),
        enabled=stack("enabled", bool), bullet_substep=float(bullet_substep))


def fixed_joint_model(body_a, body_b, pivot, breaking_threshold, body_position: np.ndarray,
                      body_orientation: np.ndarray, disable_collisions=True,
                      bullet_substep: float = DEFAULT_BULLET_SUBSTEP) -> JointModel:
    """The JointModel of J FIXED joints given as arrays (glue's bonds: ModelBuilder.add_bonds), the
    same joints ``joint_model`` makes of add_joint("FIXED", a, b, pivot, breaking_threshold=...) specs:
    frames the world's axes at the bodies' initial poses, rows joint_rows("FIXED")."""
    body_a = np.asarray(body_a, dtype=np.int32).reshape(-1)
    count = len(body_a)
    body_b = np.asarray(body_b, dtype=np.int32).reshape(count)
    pivot = np.asarray(pivot, dtype=np.float64).reshape(count, 3)
    frame = np.tile([1.0, 0.0, 0.0, 0.0], (count, 1))
    anchor_a, frame_a = _frames_in_bodies(body_a, pivot, frame, body_position, body_orientation)
    anchor_b, frame_b = _frames_in_bodies(body_b, pivot, frame, body_position, body_orientation)
    mode, lower, upper = joint_rows("FIXED")
    rows = lambda row: np.tile(row, (count, 1))  # noqa: E731
    return JointModel(
        body_a=body_a, body_b=body_b, anchor_a=anchor_a, anchor_b=anchor_b, frame_a=frame_a, frame_b=frame_b,
        mode=rows(mode), lower=rows(lower), upper=rows(upper), spring_stiffness=np.zeros((count, ROWS)),
        spring_damping=np.zeros((count, ROWS)), motor_velocity=np.zeros((count, ROWS)),
        motor_max_impulse=np.zeros((count, ROWS)),
        breaking_threshold=np.broadcast_to(np.asarray(breaking_threshold, dtype=np.float64), (count,)).copy(),
        disable_collisions=np.broadcast_to(np.asarray(disable_collisions, dtype=bool), (count,)).copy(),
        enabled=np.ones(count, dtype=bool), bullet_substep=float(bullet_substep))


def concatenate_joints(models) -> JointModel | None:
    """One JointModel of the joints of ``models`` (None entries left out) in their order; None when
    there are none. They must share bullet_substep, hertz_fraction and damping ratio (one world's)."""
    models = [m for m in models if m is not None]
    if not models:
        return None
    first = models[0]
    for m in models[1:]:
        if (m.bullet_substep, m.hertz_fraction, m.damping_ratio) != (first.bullet_substep, first.hertz_fraction,
                                                                  first.damping_ratio):
            raise ValueError("joints of one model must share their Bullet substep and softness")
    arrays = {f.name: np.concatenate([getattr(m, f.name) for m in models])
              for f in fields(JointModel) if isinstance(getattr(first, f.name), np.ndarray)}
    return JointModel(**arrays, bullet_substep=first.bullet_substep, hertz_fraction=first.hertz_fraction,
                      damping_ratio=first.damping_ratio)


def frame_from_axis(axis, primary: int) -> np.ndarray:
    """A constraint frame (w, x, y, z) whose axis ``primary`` (0: x, 2: z) points along ``axis``."""
    a = np.asarray(axis, dtype=np.float64)
    a = a / np.linalg.norm(a)
    e = np.zeros(3)
    e[primary] = 1.0
    c = float(e @ a)
    if c < -1.0 + 1e-12:  # opposite: half a turn about a perpendicular axis
        perpendicular = np.array([0.0, 1.0, 0.0]) if primary != 1 else np.array([1.0, 0.0, 0.0])
        return np.concatenate([[0.0], perpendicular])
    q = np.concatenate([[1.0 + c], np.cross(e, a)])
    return q / np.linalg.norm(q)


def joint_spec(kind, body_a, body_b, pivot, *, orientation=None, axis=None, use_limit_lin=(False,) * 3,
               use_limit_ang=(False,) * 3, limit_lin_lower=0.0, limit_lin_upper=0.0, limit_ang_lower=0.0,
               limit_ang_upper=0.0, use_spring=(False,) * 6, spring_stiffness=0.0, spring_damping=0.0,
               motor_lin_velocity=None, motor_lin_max_impulse=1.0, motor_ang_velocity=None,
               motor_ang_max_impulse=1.0, breaking_threshold=None, disable_collisions=True, enabled=True) -> dict:
    """One joint's fields, checked (``ModelBuilder.add_joint`` documents them)."""
    mode, lower, upper = joint_rows(kind, use_limit_lin, use_limit_ang, limit_lin_lower, limit_lin_upper,
                                    limit_ang_lower, limit_ang_upper)
    if orientation is not None and axis is not None:
        raise ValueError("give a joint's orientation or its axis, not both")
    if axis is not None:
        frame = frame_from_axis(axis, 2 if kind == "HINGE" else 0)
    else:
        frame = np.asarray(orientation if orientation is not None else (1.0, 0.0, 0.0, 0.0), dtype=np.float64)
        if not np.linalg.norm(frame) > 0:
            raise ValueError("a joint's orientation must be a non-zero quaternion")
        frame = frame / np.linalg.norm(frame)
    stiffness = np.broadcast_to(np.asarray(spring_stiffness, dtype=np.float64), (ROWS,)).copy()
    damping = np.broadcast_to(np.asarray(spring_damping, dtype=np.float64), (ROWS,)).copy()
    sprung = np.broadcast_to(np.asarray(use_spring, dtype=bool), (ROWS,)) & (kind == "GENERIC_SPRING")
    if np.any(stiffness < 0) or np.any(damping < 0):
        raise ValueError("spring stiffness and damping must be >= 0")
    velocity, max_impulse = np.zeros(ROWS), np.zeros(ROWS)
    if kind == "MOTOR":
        for row, target, cap in ((0, motor_lin_velocity, motor_lin_max_impulse),
                                 (3, motor_ang_velocity, motor_ang_max_impulse)):
            if target is not None:
                if not cap >= 0:
                    raise ValueError("a motor's max impulse must be >= 0")
                velocity[row], max_impulse[row] = float(target), float(cap)
    threshold = np.inf if breaking_threshold is None else float(breaking_threshold)
    if not threshold >= 0:
        raise ValueError(f"breaking threshold must be >= 0, got {breaking_threshold}")
    return dict(body_a=int(body_a), body_b=int(body_b), pivot=_triple(pivot, "pivot"), frame=frame,
                mode=mode, lower=lower, upper=upper, spring_stiffness=np.where(sprung, stiffness, 0.0),
                spring_damping=np.where(sprung, damping, 0.0), motor_velocity=velocity,
                motor_max_impulse=max_impulse, breaking_threshold=threshold,
                disable_collisions=bool(disable_collisions), enabled=bool(enabled))


def joint_colouring(body_a: np.ndarray, body_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The joints in colours that share no dynamic body (the world, STATIC_SIDE, is shared freely),
    so that a colour's joints are solved side by side (kernels/65_joints.cl) and in the same order
    by the reference (reference_joints.py): greedily, each joint in index order taking the lowest
    colour neither of its bodies has yet, as Box2D's constraint graph colours its joints. Joints
    are few beside contacts and fixed for a simulation (they only break), so they are coloured once
    on the host. Returns (colour_start (C + 1,), order (J,)): colour c's joints are
    order[colour_start[c]:colour_start[c + 1]], in index order."""
    count = len(body_a)
    colour = np.zeros(count, dtype=np.int64)
    used: dict[int, int] = {}  # body -> bit mask of its joints' colours
    for k, (a, b) in enumerate(zip(body_a.tolist(), body_b.tolist())):
        taken = used.get(a, 0) | (used.get(b, 0) if b != STATIC_SIDE else 0)
        c = (~taken & (taken + 1)).bit_length() - 1  # the lowest clear bit
        colour[k] = c
        used[a] = used.get(a, 0) | (1 << c)
        if b != STATIC_SIDE:
            used[b] = used.get(b, 0) | (1 << c)
    order = np.argsort(colour, kind="stable").astype(np.int32)
    colours = int(colour.max()) + 1 if count else 0
    colour_start = np.searchsorted(colour[order], np.arange(colours + 1)).astype(np.int32)
    return colour_start, order
