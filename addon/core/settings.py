"""Simulation settings and the solver's parameters derived from them once (SolverParameters).

Stiffness comes from a physical target rather than a magic number: a particle at the bottom of a
column of material ``load_height`` tall (default: ten times the tallest body) may sink at most
``target_penetration`` of its radius. The substep then follows from the stiffness and the lightest
contact mass, so the explicit integrator stays well inside its stability limit. Both can be
overridden.

Damping comes from the requested restitution e through the damping ratio zeta of a linear
spring-dashpot, c = 2 zeta sqrt(m_eff k), with zeta found for the force law actually used (see
``damping_ratio_for_restitution``), so a flat-face impact of a body rebounds with speed ratio e.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .contact_geometry import CONTACT_GEOMETRIES, CONTACT_GEOMETRY, ContactGeometry
from .model import Material, Model
from .voxel_corners import collider_reach
from .voxel_pairs import PUSH_OUT_BIRTH_LOAD, voxel_pair_reach

# Fraction of the contact's natural period per substep: 2*pi/omega / SUBSTEP_FRACTION. Below
# ~1/15 the explicit scheme loses energy visibly; far below it only costs time.
SUBSTEPS_PER_CONTACT_PERIOD = 30.0
# Tangential (friction) spring stiffness relative to the normal one (Cundall-Strack style; 2/7
# is the elastic-sphere value).
TANGENTIAL_STIFFNESS_RATIO = 2.0 / 7.0
# Below this relative rolling speed (rad/s) rolling resistance fades out linearly, so a body at
# rest feels no torque flipping sign from substep to substep.
ROLLING_REGULARIZATION = 0.05
# Fixed-point sweeps of the implicit-midpoint rotation step (ReferenceEngine._rotation_step): each
# shrinks the residual by about dt |w| / 2, under 1e-2 at 10 rad/s and a 1.7 ms substep.
ROTATION_SWEEPS = 4
# Largest number of friction contacts one particle remembers between substeps.
FRICTION_SLOTS = 8
# Cap on a contact's dashpot, c <= DAMPING_LIMIT * m_share / dt (m_share: the harmonic sum of each
# body's mass over its contacts of the previous substep): each substep damps a body's velocity by at
# most this fraction, under the explicit scheme's limit of 2 (docs/experiments/damping-cap.md).
DAMPING_LIMIT = 0.9
# Rigid Voxels' solve (the rigid step, docs/experiments/rigid-step.md; contact-solve.md E13-E16 for
# its forms): the body pairs coloured so that no two of a colour share a body, solved colour after
# colour (Gauss-Seidel across pairs), each pair's manifold point after point; a contact takes all of
# its last impulses to start from (warm start, as Box2D). A contact may go solve_slop deep before it
# stops closing (a fraction of the particle radius) and is soft beyond it (Box2D's soft step) at
# solve_hertz_fraction of the substep rate; its spring is a damped one of this damping ratio
# (Box2D's contact damping ratio).
DEFAULT_SOLVE_SLOP = 0.001
SOLVE_DAMPING_RATIO = 10.0


def solve_softness(substep: float, hertz_fraction: float) -> tuple[float, float]:
    """(bias rate in 1/s, mass scale) of the solve's soft contacts (Box2D's b2MakeSoft): a contact
    deeper than the slop by d is pushed out at bias rate x d, each pass reaching mass scale of the
    impulse that would do it and leaking 1 - mass scale of what it holds. Rigid (0): (0, 1)."""
    if hertz_fraction == 0.0:
        return 0.0, 1.0
    omega = 2.0 * math.pi * hertz_fraction / substep
    a1 = 2.0 * SOLVE_DAMPING_RATIO + substep * omega
    a2 = substep * omega * a1
    return omega / a1, a2 / (1.0 + a2)


# A contact closing faster than this (m/s; Box2D's restitution threshold) is an impact: the solve
# makes it part at its restitution times the fastest it closed since it last parted; slower ones
# stop (contact-solve.md, E13).
IMPACT_SPEED = 1.0
# A resting pair whose upper body is more than this many times as heavy as the lower one is solved
# as if it were this many times (the lower body's inverse mass scaled down in the pair's passes:
# 60_solve.cl support_scales). 10:1 unscaled sags 1.2 mm; unscaled, 100:1 sags 8 mm and 1000:1
# sinks through the light body (docs/experiments/impacts.md). "Upper": the pair's first normal
# within 60 degrees of straight up (against gravity); no gravity, no scaling. The price: the lower
# body takes only the scaled share of the pair's impulses, so such a pair's momentum is not
# conserved (what stands under the light body carries less than the whole load).
SUPPORT_MASS_RATIO = 10.0
SUPPORT_COSINE = 0.5
# Rigid Voxels: a voxel's record against a plane holds the body point that touches this far
# through the step (a fraction of the time until the next detection), not the one touching now:
# the depth then follows that point as the body turns (30_colliders.cl voxel_support_turned)
TURNING_ANCHOR = 1.0
# Rigid Voxels' sleepers wake in the detection an awake body's records first reach them, and so
# do the sleepers their records reach in turn, this many contacts deep (each a launch of
# compute_contacts): Box2D wakes a touched island whole, before the step's solve; a sleeper further
# away holds like static ground for the detection and wakes at the next
WAKE_PASSES = 4
# Speculative contacts without springs (SimulationSettings.speculative_margin), in particle radii
SPECULATIVE_MARGIN = 0.25
# Without springs a contact's margin also grows by how far it closes until the next detection
# (Box2D's speculative distance, made to follow the closing speed so a fast body meets a record
# before it arrives), by at most this many particle radii: the reach the neighbour lists and the
# collider lookups are built to cover (the margin grows face-on up to 1.5 radii, so a body of three
# voxels across meets the ground from 24 m/s at 240 substeps per second detected every 4)
SPECULATIVE_REACH = 1.5
# Against triangle colliders (static: no neighbour list to grow) the growth reaches further: a
# cube's edge closing at 20 m/s moves 2 radii between detections, and at 1.5 it met a mesh ground a
# detection late and went 4-14 cm deep
COLLIDER_SPECULATIVE_REACH = 4.0
MAX_SOLVE_PASSES = 64
# Restitution passes at a detection's last substep, with manifolds (62_pair_solve.cl restitution
# kind): each pass moves a struck body's support a fraction of the way to holding it (a cube
# dropped on a resting one shares its rebound with it, half of what is left per pass)
MANIFOLD_RESTITUTION_PASSES = 4
# How a contact combines its two sides' friction and restitution (SimulationSettings.material_combine;
# docs/usage.md, "Blender's Rigid Body world"). The add-on's own: the geometric mean of the frictions and
# the mean of the restitutions. Bullet's (btManifoldResult::calculateCombinedFriction/Restitution), for a
# scene set up in Blender's Rigid Body world, so that it gives what it gave in Bullet: the products, the
# friction clamped to BULLET_MAX_FRICTION. Rolling friction, which Blender's bodies do not have, combines
# as the geometric mean under both.
MATERIAL_COMBINE_MEAN = "mean"
MATERIAL_COMBINE_BULLET = "bullet"
MATERIAL_COMBINES = (MATERIAL_COMBINE_MEAN, MATERIAL_COMBINE_BULLET)
BULLET_MAX_FRICTION = 10.0


@dataclass
class SimulationSettings:
    gravity: tuple = (0.0, 0.0, -9.81)
    # Particles' springs: the fraction of the particle radius a contact sinks under the design load;
    # None: the contact geometry's (ContactGeometry.target_penetration), filled in on construction
    target_penetration: float | None = None
    load_height: float | None = None  # metres of material resting on a contact; None: 10 x tallest body
    stiffness: float | None = None  # N/m per particle contact; overrides the target when set
    substep: float | None = None  # seconds; None: the geometry's (ContactGeometry.substep) or from stiffness and mass
    terminal_speed: float = 0.0  # m/s, 0 = unlimited (the seed's momentum clamp)
    # Sleeping (Blender/Bullet call it deactivation): a body whose fastest point moves slower than
    # sleep_speed for sleep_time seconds stops moving. With springs (Particles) body by body, while
    # not accelerated, until a contact or lost support accelerates it again; with the solve (Rigid
    # Voxels) by islands of touching bodies, until an awake body touches one (63_islands.cl).
    # 0 turns it off.
    sleep_speed: float = 0.02  # m/s
    sleep_time: float = 0.5  # s
    device: str | None = None  # OpenCL device selector, see core.device
    # How two bodies meet: a name in contact_geometry.CONTACT_GEOMETRY, where each says what it does
    # and costs and which of the settings below it defaults
    contact_geometry: str = "voxels"
    # Rigid Voxels' solve (kernels/61_pair_colouring.cl, 62_pair_solve.cl): its passes over the
    # contacts each substep, then its relax passes (without the push-out, on the velocities only);
    # how deep a contact may go before it stops closing (a fraction of the particle radius: each
    # layer of a stack sits this deep), how fast a deeper one is pushed out (m/s), and the soft
    # step's frequency (a fraction of the substep rate; 0: rigid). None: the geometry's.
    solve_passes: int | None = None
    relax_passes: int | None = None
    solve_slop: float | None = None
    solve_push_speed: float = 0.5
    solve_hertz_fraction: float | None = None
    # How far apart (fraction of the particle radius) two voxels, or a voxel and a collider, may be
    # and still be a contact of the solve (Box2D's speculative contacts: the solve lets it close at
    # most the gap); None: SPECULATIVE_MARGIN with the solve
    speculative_margin: float | None = None
    # Substeps per detection of the contacts: between detections each record's depth follows from
    # its bodies' motion (Rigid Voxels only). None: the geometry's.
    substeps_per_detection: int | None = None
    # How a contact combines its sides' friction and restitution: MATERIAL_COMBINES
    material_combine: str = MATERIAL_COMBINE_MEAN

    @property
    def geometry(self) -> ContactGeometry:
        return CONTACT_GEOMETRY[self.contact_geometry]

    @property
    def contact_springs(self) -> bool:
        """Whether contacts are springs (Particles) rather than solved (Rigid Voxels)."""
        return self.geometry.springs

    def __post_init__(self):
        self.gravity = tuple(float(g) for g in self.gravity)
        if len(self.gravity) != 3 or not all(math.isfinite(g) for g in self.gravity):
            raise ValueError(f"gravity must be three finite numbers, got {self.gravity}")
        if self.contact_geometry not in CONTACT_GEOMETRIES:
            raise ValueError(f"contact geometry must be one of {', '.join(CONTACT_GEOMETRIES)}, "
                             f"got {self.contact_geometry!r}")
        if self.material_combine not in MATERIAL_COMBINES:
            raise ValueError(f"material combine must be one of {', '.join(MATERIAL_COMBINES)}, "
                             f"got {self.material_combine!r}")
        geometry = self.geometry
        for name in ("solve_passes", "relax_passes", "substeps_per_detection"):
            value = getattr(self, name)
            if value is None:
                value = getattr(geometry, name)
            if isinstance(value, bool) or int(value) != value or not 0 <= value <= MAX_SOLVE_PASSES:
                raise ValueError(f"{name.replace('_', ' ')} must be a whole number from 0 to {MAX_SOLVE_PASSES}, "
                                 f"got {value!r}")
            setattr(self, name, int(value))
        if geometry.springs and (self.solve_passes or self.relax_passes or self.substeps_per_detection != 1):
            raise ValueError(f"{geometry.label} contacts are springs: they take no solve passes and are detected "
                             f"every substep, got {self.solve_passes} solve passes, {self.relax_passes} relax passes, "
                             f"{self.substeps_per_detection} substeps per detection")
        if not geometry.springs and not self.solve_passes:
            raise ValueError(f"{geometry.label} need at least one solve pass, got 0")
        if self.substeps_per_detection < 1:
            raise ValueError(f"substeps per detection must be a whole number >= 1, got {self.substeps_per_detection}")
        if self.speculative_margin is None:
            self.speculative_margin = 0.0 if geometry.springs else SPECULATIVE_MARGIN
        if not (0.0 <= self.speculative_margin <= 1.0):
            raise ValueError(f"speculative margin must be in [0, 1] particle radii, got {self.speculative_margin}")
        if self.target_penetration is None:
            self.target_penetration = geometry.target_penetration
        if self.solve_slop is None:
            self.solve_slop = DEFAULT_SOLVE_SLOP
        if self.solve_hertz_fraction is None:
            self.solve_hertz_fraction = geometry.solve_hertz_fraction
        if not (0 <= self.solve_hertz_fraction <= 1):
            raise ValueError(f"solve hertz fraction must be in [0, 1] (0: rigid), got {self.solve_hertz_fraction}")
        if not (0 < self.solve_slop <= 1):
            raise ValueError(f"solve slop must be in (0, 1], got {self.solve_slop}")
        if not (self.solve_push_speed > 0 and math.isfinite(self.solve_push_speed)):
            raise ValueError(f"solve push speed must be positive, got {self.solve_push_speed}")
        if not (0 < self.target_penetration <= 1):
            raise ValueError(f"target penetration must be in (0, 1], got {self.target_penetration}")
        for name in ("load_height", "stiffness", "substep"):
            value = getattr(self, name)
            if value is not None and not (value > 0 and math.isfinite(value)):
                raise ValueError(f"{name.replace('_', ' ')} must be positive, got {value}")
        if self.terminal_speed < 0:
            raise ValueError("terminal speed must be >= 0")
        for name in ("sleep_speed", "sleep_time"):
            value = getattr(self, name)
            if not (value >= 0 and math.isfinite(value)):
                raise ValueError(f"{name.replace('_', ' ')} must be 0 or more, got {value}")


# What an object is in a scene (the Blender layer's ``Object.prb.role``); the core itself sees only
# bodies and colliders.
ROLE_FOLLOW_SELECTION = "NONE"  # a dynamic body when selected at bake time
ROLE_DYNAMIC = "DYNAMIC"
ROLE_STATIC = "STATIC"  # a triangle collider
ROLE_IGNORED = "IGNORED"
ROLES = (ROLE_FOLLOW_SELECTION, ROLE_DYNAMIC, ROLE_STATIC, ROLE_IGNORED)


@dataclass(frozen=True)
class ObjectSettings:
    """One object's part in the simulation (``Object.prb`` in Blender; its defaults are these)."""

    role: str = ROLE_FOLLOW_SELECTION
    mass_mode: str = "DENSITY"  # or "MASS"
    density: float = 1000.0  # kg/m^3 (mass = density x volume)
    mass: float = 1.0  # kg, with mass_mode "MASS"
    friction: float = Material.friction
    bounciness: float = Material.restitution
    initial_velocity: tuple = (0.0, 0.0, 0.0)  # m/s, world
    initial_angular_velocity: tuple = (0.0, 0.0, 0.0)  # rad/s about the world axes
    linear_damping: float = Material.linear_damping
    angular_damping: float = Material.angular_damping

    def material(self) -> Material:
        return Material(friction=float(self.friction), restitution=float(self.bounciness),
                        linear_damping=float(self.linear_damping), angular_damping=float(self.angular_damping))


@dataclass(frozen=True)
class ConversionSettings:
    """How objects become particles."""

    radius: float | None = None  # particle radius; None: automatic from the smallest body
    max_particles: int = 20_000_000  # refuse a scene that needs more

    def __post_init__(self):
        if self.radius is not None and not (self.radius > 0 and math.isfinite(self.radius)):
            raise ValueError(f"particle radius must be more than 0, got {self.radius}")
        if not self.max_particles >= 1:
            raise ValueError(f"the particle limit must be at least 1, got {self.max_particles}")


@dataclass(frozen=True)
class FrameSettings:
    """Which frames a bake simulates and keys, and the substeps of each."""

    frame_start: int = 1
    frame_end: int = 250
    frame_step: int = 1  # key every Nth frame (the simulation samples at this step too)
    substeps: int | None = None  # per frame; None: automatic (simulation.substeps_for_frame)

    def __post_init__(self):
        if self.frame_end <= self.frame_start:
            raise ValueError(f"frame range {self.frame_start}-{self.frame_end} is empty: the end must be after "
                             f"the start")
        if self.frame_step < 1:
            raise ValueError("frame step must be at least 1")
        span = self.frame_end - self.frame_start
        if self.frame_step > span:  # a bake keys the start frame and every step after it up to the end
            raise ValueError(f"frame step {self.frame_step} is longer than the frame range {self.frame_start}-"
                             f"{self.frame_end}: only frame {self.frame_start} would be keyed and nothing simulated; "
                             f"use a step of at most {span}, or a later end frame")
        if self.substeps is not None and self.substeps < 1:
            raise ValueError(f"substeps per frame must be at least 1, got {self.substeps}")

    @property
    def frame_count(self) -> int:
        """Simulated frames after the first one."""
        return (self.frame_end - self.frame_start) // self.frame_step


# Where a manual particle radius and substep count start (automatic, None, is the default of both)
MANUAL_PARTICLE_RADIUS = 0.05
MANUAL_SUBSTEPS = 100


@dataclass(frozen=True)
class SolverParameters:
    """What the engines step with, derived once from a Model and SimulationSettings
    (derive_solver_parameters). Simulation derives them and hands them to its engine, as NVIDIA
    Newton sets its solver up once; an engine built from settings alone derives them itself
    (solver_parameters). The kernels take each under the same name (opencl_program.kernel_defines,
    OpenCLEngine.arguments)."""

    settings: SimulationSettings = field(repr=False)  # what they are derived from, the substep included
    geometry: ContactGeometry = field(repr=False)  # settings.geometry
    radius: float
    stiffness: float
    tangential_stiffness: float
    substep: float
    gravity: np.ndarray
    terminal_speed: float
    sleep_speed: float  # 0: no sleeping
    sleep_time: float
    wake_acceleration: float  # m/s^2: a body accelerated more than this is awake
    materials: np.ndarray = field(repr=False)  # (M, 5) friction, restitution, lin/ang damping, rolling friction
    damping_ratio: np.ndarray = field(repr=False)  # (M, M) zeta for each material pair
    friction: np.ndarray = field(repr=False)  # (M, M) mu for each material pair
    rolling_friction: np.ndarray = field(repr=False)  # (M, M) rolling resistance for each pair
    restitution: np.ndarray = field(repr=False)  # (M, M) e for each material pair (the velocity solve)
    # Rigid Voxels' velocity solve (contacts that are not springs: settings.solve_passes > 0)
    solving: bool
    solve_slop: float  # metres a contact may go deep before it stops closing
    solve_bias_rate: float  # 1/s and
    solve_mass_scale: float  # of the soft contacts (solve_softness; rigid: 0 and 1)
    # Speculative contacts: seconds a closing speed is projected over at a detection (until the next
    # one; none with springs, which push out whatever they find), and how far apart (particle radii)
    # two whole voxels' centres may be and still be a pair (voxel_pairs.voxel_pair_reach)
    speculative_time: float
    voxel_pair_reach: float
    # how far from a particle's centre (metres) a collider may touch it, speculation included: the
    # triangle lookups' growth and the kernels' COLLIDER_REACH
    collider_reach: float
    push_out_birth_depth: float  # metres a new voxel pair may push in its first substep (voxel_pairs)
    # the unit direction against gravity, along which support scaling measures "upper" (None: no
    # gravity, no scaling)
    support_up: tuple | None = None

    def sleep_argument(self, colliders_moving: bool) -> np.ndarray:
        """The kernels' ``sleep`` (and the reference's): the speed under which a body is still (0: no
        sleeping), what its quiet count reaches asleep, the acceleration that wakes it (springs), and
        1 where a sleeper skips its contacts. With springs quiet counts seconds. With the solve it
        counts substeps, exactly, so every device and the reference put a body to sleep at the same
        substep; bodies sleep by islands (63_islands.cl), and not while colliders move (a moving
        collider touching a sleeper would not wake it)."""
        speed = self.sleep_speed
        threshold = self.sleep_time
        if self.solving:
            threshold = float(max(2, round(self.sleep_time / self.substep)))
            if colliders_moving:
                speed = 0.0
        return np.array([speed, threshold, self.wake_acceleration, 0.0 if colliders_moving else 1.0],
                        dtype=np.float32)


# A body counts as accelerated (awake) when its centre plus its extent times the angular
# acceleration exceed this fraction of g: a body on a support that went away accelerates at g, one
# at rest on settled contacts at ~0; a resting contact still ringing at 1 cm/s gives ~0.1 g.
WAKE_ACCELERATION_FRACTION = 0.25
MAX_DAMPING_RATIO = 2.0  # beyond this the dashpot itself limits the explicit substep


def _clamped_restitution_table(samples: int = 400):
    """Rebound speed ratio of a linear spring-dashpot whose force is clamped at zero (no pull).

    The textbook relation e = exp(-pi zeta / sqrt(1 - zeta^2)) assumes the dashpot may pull the
    bodies together at the end of a contact; ours may not (a contact that pulls is not a contact),
    which makes every impact bouncier than the formula says (zeta 0.2155: 0.55, not 0.50). So the
    relation is integrated once here, in dimensionless form (x'' = -max(0, x + 2 zeta x'),
    x(0) = 0, x'(0) = 1), for all zeta at once, and inverted by interpolation.
    """
    zeta = np.linspace(0.0, MAX_DAMPING_RATIO, samples)
    x = np.zeros(samples)
    v = np.ones(samples)
    rebound = np.full(samples, np.nan)
    h = 2e-3
    for _ in range(20000):
        v = v - np.maximum(0.0, x + 2 * zeta * v) * h
        x = x + v * h
        left = (x < 0) & np.isnan(rebound)
        rebound[left] = -v[left]
        if not np.isnan(rebound).any():
            break
    return zeta, rebound


_ZETA_TABLE, _RESTITUTION_TABLE = _clamped_restitution_table()


def damping_ratio_for_restitution(e):
    """zeta whose clamped spring-dashpot impact rebounds with speed ratio e (e = 0: most damping)."""
    e = np.clip(np.asarray(e, dtype=np.float64), 0.0, 1.0)
    # the table falls monotonically with zeta; np.interp wants increasing x
    return np.interp(e, _RESTITUTION_TABLE[::-1], _ZETA_TABLE[::-1])


def body_span(model: Model) -> np.ndarray:
    """(B,) each body's largest span along a body axis, particle size included (the height it would
    stand; model.body_extents is the reach from its centre, a different measure)."""
    d = 2 * model.particle_radius
    if model.body_count == 0:
        return np.zeros(0)
    first = model.body_first_particle
    offsets = model.particle_offset[:model.dynamic_particle_count]
    span = np.maximum.reduceat(offsets, first, axis=0) - np.minimum.reduceat(offsets, first, axis=0)
    return span.max(axis=1) + d


def combined_materials(materials: np.ndarray, rule: str) -> tuple[np.ndarray, np.ndarray]:
    """(M, M) friction and restitution of each pair of the (M, 5) material table under ``rule``
    (MATERIAL_COMBINES)."""
    friction, restitution = materials[:, 0], materials[:, 1]
    if rule == MATERIAL_COMBINE_BULLET:
        return np.minimum(np.outer(friction, friction), BULLET_MAX_FRICTION), np.outer(restitution, restitution)
    return np.sqrt(np.outer(friction, friction)), 0.5 * (restitution[:, None] + restitution[None, :])


def contact_stiffness(model: Model, settings: SimulationSettings) -> float:
    """N/m per particle contact: the settings' stiffness, else the one under which a contact carrying
    a column of the heaviest particles load_height tall sinks target_penetration of a radius."""
    if settings.stiffness is not None:
        return float(settings.stiffness)
    d = 2 * model.particle_radius
    g = float(np.linalg.norm(settings.gravity)) or 9.81
    if model.body_count:
        particle_mass = model.body_mass / np.maximum(model.body_particle_count, 1)
        heaviest_particle = float(particle_mass.max())
        tallest = float(body_span(model).max())
    else:
        heaviest_particle = 1.0
        tallest = d
    load_height = settings.load_height if settings.load_height is not None else 10.0 * tallest
    # weight of a column of particles load_height tall, carried by one contact
    load = heaviest_particle * g * max(load_height / d, 1.0)
    return load / (settings.target_penetration * model.particle_radius)


def automatic_substep(model: Model, settings: SimulationSettings) -> float:
    """Seconds: the settings' substep, else the contact geometry's, else SUBSTEPS_PER_CONTACT_PERIOD
    of a contact's period at the contact stiffness and the lightest contact mass."""
    if settings.substep is not None:
        return float(settings.substep)
    if settings.geometry.substep is not None:
        return settings.geometry.substep
    lightest_contact_mass = float(model.body_effective_mass.min()) if model.body_count else 1.0
    omega = math.sqrt(contact_stiffness(model, settings) / lightest_contact_mass)
    return 2 * math.pi / omega / SUBSTEPS_PER_CONTACT_PERIOD


def derive_solver_parameters(model: Model, settings: SimulationSettings) -> SolverParameters:
    r = model.particle_radius
    k = contact_stiffness(model, settings)
    substep = automatic_substep(model, settings)
    springs = settings.contact_springs
    materials = model.material_table()
    mu, e_pair = combined_materials(materials, settings.material_combine)
    bias_rate, mass_scale = solve_softness(substep, settings.solve_hertz_fraction)
    collider_speculative_reach = settings.speculative_margin + (0.0 if springs else COLLIDER_SPECULATIVE_REACH)
    return SolverParameters(
        settings=settings,
        geometry=settings.geometry,
        radius=r,
        stiffness=k,
        tangential_stiffness=k * TANGENTIAL_STIFFNESS_RATIO,
        substep=substep,
        gravity=np.asarray(settings.gravity, dtype=np.float64),
        terminal_speed=float(settings.terminal_speed),
        sleep_speed=float(settings.sleep_speed) if settings.sleep_time > 0 else 0.0,
        sleep_time=float(settings.sleep_time),
        wake_acceleration=WAKE_ACCELERATION_FRACTION * max(float(np.linalg.norm(settings.gravity)), 1.0),
        materials=materials,
        damping_ratio=damping_ratio_for_restitution(e_pair),
        friction=mu,
        rolling_friction=np.sqrt(np.outer(materials[:, 4], materials[:, 4])),
        restitution=e_pair,
        solving=settings.solve_passes > 0,
        solve_slop=settings.solve_slop * r,
        solve_bias_rate=bias_rate,
        solve_mass_scale=mass_scale,
        speculative_time=0.0 if springs else settings.substeps_per_detection * substep,
        voxel_pair_reach=voxel_pair_reach(settings.speculative_margin),
        collider_reach=collider_reach(model) + collider_speculative_reach * r,
        push_out_birth_depth=PUSH_OUT_BIRTH_LOAD * settings.target_penetration * r,
        support_up=(tuple(float(-g / g_size) for g in settings.gravity)
                    if (g_size := float(np.linalg.norm(settings.gravity))) else None),
    )


def solver_parameters(model: Model, given: SolverParameters | SimulationSettings | None) -> SolverParameters:
    """An engine's parameters: ``given`` as they are (Simulation's), or derived from the settings
    given (None: the defaults) for an engine built on its own (tests, benchmarks)."""
    if isinstance(given, SolverParameters):
        return given
    return derive_solver_parameters(model, given or SimulationSettings())

