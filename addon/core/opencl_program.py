"""The kernels' program: the stage files (STAGES) built as one program, with its build options.

STAGES lists the stage files in the order of their numbers and the kernels each launches, in
launch order: the grid (bucket, scan, scatter, sort; only in substeps that rebuild it), the gather
into bucket order, the contact forces per particle (colliders and each geometry's particle pairs:
functions the contact kernel calls), per body the sum of its particles' forces and the
integration, and Rigid Voxels' solve and islands.

Every ``-D`` option comes from one table, ``kernel_defines``: a row per define (name, value, what
it means). The constants Python and the kernels share (SOLVE_FIELDS, SCAN_LOCAL_SIZE,
SCAN_PER_ITEM, SOLVE_PASS_BACKWARD, STATIC_BODY) are rows of it too, so the kernels take them from
here rather than from a #define of their own.
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .colliders import DUPLICATE_POINT_TOLERANCE
from .device import KERNEL_OPENCL_C
from .device_probe import build_quietly
from .manifold import (MANIFOLD_DEPTH_BAND, MANIFOLD_GROUPS, MANIFOLD_NORMAL_COSINE, MANIFOLD_PECKING,
                       MANIFOLD_POINTS, MANIFOLD_TOLERANCE)
from .impacts import (IMPACT_CLOSING, IMPACT_DEPTH, IMPACT_DISTANCE, IMPACT_MOTION, MAX_IMPACT_SAMPLES,
                      TRIANGLE_IMPACT_DEPTH, TRIANGLE_IMPACT_DISTANCE)
from .joints import (JOINT_AT_THRESHOLD, JOINT_BROKEN, JOINT_ENABLED, JOINT_IMPULSE_KINDS, JOINT_IMPULSES,
                     JOINT_MODE_LIMITS, JOINT_MODE_MOTORS, JOINT_MODE_SPRINGS, JOINT_NO_COLLISIONS, JOINT_ROW_FIELDS,
                     JOINT_ROW_VALUES, LIMITED, LOCKED, ROWS)
from .model import STATIC_BODY
from .pair_colouring import MAX_PAIR_COLOURS, OVERFLOW_PAIRS, PAIR_COLOUR_COUNTS
from .settings import (COLLIDER_SPECULATIVE_REACH, DAMPING_LIMIT, FRICTION_SLOTS, IMPACT_SPEED,
                       ROLLING_REGULARIZATION, ROTATION_SWEEPS, SPECULATIVE_REACH, SUPPORT_COSINE, SUPPORT_MASS_RATIO,
                       TURNING_ANCHOR, WAKE_PASSES)
from .voxel_corners import CORNER_SOFTNESS, FACE_LIKE_COSINE, SUPPORT_SPHERE_REACH
from .voxel_pairs import EDGE_AXIS_BIAS, FACE_COMPONENT_FRACTION, PARALLEL_EDGES, PUSH_OUT_SPEED, WHOLE_VOXEL_REACH

KERNEL_DIR = Path(__file__).resolve().parents[2] / "kernels"



@dataclass(frozen=True)
class Stage:
    """A kernel file (kernels/NN_name, NN its place in the substep) and its kernels in launch order."""
    file: str
    kernels: tuple[str, ...] = ()

    @property
    def number(self) -> int:
        return int(self.file.split("_", 1)[0])


STAGES = (
    Stage("00_common.h"),  # types and maths, the grid's hashing, the contact law
    Stage("05_grid_barrier.cl"),  # a barrier across a launch: functions solve_substep_passes calls
    Stage("10_grid.cl", ("assign_buckets", "scan_bucket_groups", "scan_group_totals", "scatter_to_buckets",
                         "sort_buckets")),
    Stage("20_gather.cl", ("gather_particles",)),
    Stage("30_colliders.cl"),  # planes and triangles: functions compute_contacts calls
    # each contact geometry between bodies' particles: functions compute_contacts calls
    Stage("32_sphere_pairs.cl"),  # sphere against sphere (Particles; Rigid Voxels' round voxels)
    Stage("34_voxel_pairs.cl"),  # whole voxel against whole voxel, box against box (Rigid Voxels)
    Stage("40_contacts.cl", ("compute_contacts",)),
    Stage("50_bodies.cl", ("integrate_bodies",)),
    Stage("60_solve.cl"),  # the solve's passes over one record: functions solve_pair_contacts calls
    # if solving (Rigid Voxels): the body pairs listed and coloured (_colour_pairs), then the warm
    # start and the passes, a launch per colour and the overflow's, or on NVIDIA GPUs one launch a
    # substep (_enqueue_pair_solve)
    Stage("61_pair_colouring.cl", ("list_solve_pairs", "reduce_pair_manifolds", "bid_for_colour", "take_colour", "start_colours",
                                   "gather_colour_pairs", "sort_overflow_pairs")),
    Stage("62_pair_solve.cl", ("solve_pair_contacts", "solve_substep_passes")),
    # after a detection's first substep: islands of touching bodies sleep together
    Stage("63_islands.cl", ("spread_island_quiet", "settle_islands")),
    # the joints' colours (functions solve_substep_passes calls, or a launch per colour), the
    # sleepers they wake before the passes, their breaking after them (joint_solve.py)
    Stage("64_joint_rows.cl"),  # a joint's rows and its locked block: functions 65_joints.cl calls
    Stage("65_joints.cl", ("solve_joint_colour_pass", "wake_joined_sleepers", "apply_joint_wakes", "break_joints")),
    # if solving, the substep's last: fast bodies swept and put back at their impacts (impacts.py)
    Stage("70_impacts.cl", ("sweep_fast_particles", "stop_at_impacts")),
)
SOLVE_KERNELS = tuple(kernel for stage in STAGES if 60 <= stage.number < 70 for kernel in stage.kernels)
IMPACT_KERNELS = tuple(kernel for stage in STAGES if stage.number == 70 for kernel in stage.kernels)
# the same OpenCL C on every device, macOS's included (device.py refuses a device below it)
OPENCL_C_STANDARD = "-cl-std=CL%d.%d" % KERNEL_OPENCL_C
# shared with the kernels, which take them from the build options (kernel_defines)
SOLVE_PASS_BACKWARD = 4  # added to a pass's kind: each pair's points swept last to first (62_pair_solve.cl)
SOLVE_FIELDS = 5  # float4s per contact record (00_common.h)
SCAN_LOCAL_SIZE = 256  # work-items of a scan group (10_grid.cl)
SCAN_PER_ITEM = 8  # buckets each of them scans
SCAN_GROUP_ITEMS = SCAN_LOCAL_SIZE * SCAN_PER_ITEM
LAUNCH_ORDER = tuple(kernel for stage in STAGES for kernel in stage.kernels)


def program_source() -> str:
    """The stage files concatenated in stage order: one program."""
    numbers = [stage.number for stage in STAGES]
    if numbers != sorted(set(numbers)):
        raise ValueError(f"STAGES must be in increasing order of their numbers, got {numbers}")
    return "\n".join((KERNEL_DIR / stage.file).read_text() for stage in STAGES)


_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_KERNEL = re.compile(r"__kernel\s+(?:__attribute__\s*\(\(.*?\)\)\s*)?void\s+(\w+)\s*\(([^)]*)\)", re.S)


def kernel_parameters(source: str) -> dict[str, tuple[str, ...]]:
    """Each kernel's parameter names in order, read from its signature in the source."""
    found = {}
    for name, parameters in _KERNEL.findall(_COMMENT.sub("", source)):
        found[name] = tuple(re.findall(r"(\w+)\s*$", p.strip())[0] for p in parameters.split(",") if p.strip())
    return found


class ByParity(tuple):
    """A kernel argument that alternates between substeps: (even substeps' value, odd substeps')."""


BODY_GROUP_SIZE = 64
# lanes per body in the body kernel: 8 measured best on the H100 for 27-particle cubes (32: slower)
MAX_BODY_LANES = 8
# A pair's points the passes read into private memory before solving the first, on a GPU
# (62_pair_solve.cl PAIR_CACHE): a colour's launch lasts its slowest pair's chain of dependent
# loads (H200 pile window, 10k: 424 -> 350 ms per simulated second). A CPU reads each point as it
# comes (with the cache PoCL's passes took 22 % longer).
PAIR_CACHE_GPU = 8
# How long a group waits at the barrier across the launch before it gives up: far above a colour's
# pass (the longest single launch at a million bodies is in docs/performance.md), far below a hang
GRID_BARRIER_TIMEOUT_NS = 1_000_000_000


def pair_cache(is_gpu: bool) -> int:
    """The points of a pair the passes read before solving the first (PAIR_CACHE_GPU on a GPU, none
    on a CPU). PRB_PAIR_CACHE overrides (tests run the GPU path on a CPU with it)."""
    override = os.environ.get("PRB_PAIR_CACHE")
    if override:
        return int(override)
    return PAIR_CACHE_GPU if is_gpu else 0


def is_nvidia(device_info) -> bool:
    """An NVIDIA device (its driver's own extension): its OpenCL C takes inline PTX."""
    return "cl_nv_device_attribute_query" in device_info.extensions


def choose_body_lanes(particles_per_body: np.ndarray, is_gpu: bool) -> int:
    """Work-items that sum one body's particle forces: on a GPU up to one per particle of a typical
    body (a power of two), on a CPU one per body (no barriers, no idle lanes). PRB_BODY_LANES
    overrides (tests run the GPU path on a CPU with it)."""
    override = os.environ.get("PRB_BODY_LANES")
    if override:
        return int(override)
    if not is_gpu or len(particles_per_body) == 0:
        return 1
    typical = int(np.median(particles_per_body))
    return min(MAX_BODY_LANES, 1 << max(0, math.ceil(math.log2(max(typical, 1)))))


@dataclass(frozen=True)
class Define:
    """A ``-D`` build option: a float is written as a float literal (``f``), an int as an integer
    (negative in parentheses), a str as it stands (a literal with its own suffix)."""
    name: str
    value: float | int | str
    meaning: str

    @property
    def option(self) -> str:
        value = self.value
        if isinstance(value, bool):
            value = int(value)
        if isinstance(value, float):
            text = f"{value!r}f"
        elif isinstance(value, int):
            text = f"({value})" if value < 0 else str(value)
        else:
            text = value
        return f"-D{self.name}={text}"


def kernel_defines(model, params, neighbour_slots: int, body_lanes: int, device_info) -> tuple[Define, ...]:
    """Every define the kernels are built with, in the order of their options (params: the solver's,
    settings.SolverParameters; the rest as in OpenCLEngine)."""
    settings = params.settings
    radius = model.particle_radius
    margin = float(settings.speculative_margin)
    up = params.support_up or (0.0, 0.0, 1.0)  # (no gravity: SUPPORT_MASS_RATIO 0, unused)
    return (
        # shared with Python
        Define("STATIC_BODY", STATIC_BODY, "the body index of a static particle or side (model.py)"),
        Define("SOLVE_FIELDS", SOLVE_FIELDS, "float4s per contact record of the solve"),
        Define("SOLVE_PASS_BACKWARD", SOLVE_PASS_BACKWARD, "added to a pass's kind: a pair's points last to first"),
        Define("SCAN_LOCAL_SIZE", SCAN_LOCAL_SIZE, "work-items of a scan group of the grid's buckets"),
        Define("SCAN_PER_ITEM", SCAN_PER_ITEM, "buckets each scan work-item scans"),
        # the scene and the contact law
        Define("FRICTION_SLOTS", FRICTION_SLOTS, "contacts a particle keeps a friction history for"),
        Define("NEIGHBOUR_SLOTS", neighbour_slots, "other-body particles a neighbour list holds"),
        Define("MATERIAL_COUNT", len(model.materials), "materials (the pair tables are its square)"),
        Define("DAMPING_LIMIT", float(DAMPING_LIMIT), "the contact dashpot's cap, a fraction of m_share / dt"),
        Define("ROLLING_REGULARIZATION", float(ROLLING_REGULARIZATION),
               "relative rolling speed (rad/s) below which rolling resistance fades"),
        Define("ROTATION_SWEEPS", ROTATION_SWEEPS, "fixed-point sweeps of the implicit-midpoint rotation step"),
        Define("DUPLICATE_POINT_TOLERANCE", float(DUPLICATE_POINT_TOLERANCE),
               "colliders' points this close (in radii) are one"),
        Define("CORNER_SOFTNESS", float(CORNER_SOFTNESS), "how soft a voxel's corner is against colliders"),
        Define("FACE_LIKE_COSINE", float(FACE_LIKE_COSINE),
               "a triangle's edge contact this close to its normal is its face's"),
        Define("SUPPORT_SPHERE_REACH", float(SUPPORT_SPHERE_REACH),
               "how far (radii) a support sphere's patch may reach"),
        Define("COLLIDER_REACH", float(params.collider_reach / radius), "colliders' reach from a particle, in radii"),
        Define("HAS_TRIANGLES", int(model.triangle_count > 0), "1 if the scene has triangle colliders"),
        Define("BODY_LANES", body_lanes, "work-items summing one body's particles"),
        Define("BODY_GROUP_SIZE", BODY_GROUP_SIZE, "work-items per group of integrate_bodies"),
        # one fact: Rigid Voxels' contacts are voxel pairs, each a record of the solve, and no
        # springs (ContactGeometry.springs); Particles' are springs between spheres
        Define("RIGID_VOXELS", int(params.solving), "1: voxel pairs and the velocity solve; 0: springs"),
        Define("VOXEL_PAIR_REACH2", float((params.voxel_pair_reach * radius) ** 2),
               "squared centre distance within which two voxels are a pair"),
        Define("SPECULATIVE_MARGIN", margin, "the speculative contacts' margin"),
        Define("SPECULATIVE_TIME", float(params.speculative_time),
               "seconds a closing speed is projected over at a detection"),
        Define("SPECULATIVE_REACH", float(SPECULATIVE_REACH), "the speculative growth's cap, in radii"),
        Define("COLLIDER_SPECULATIVE_REACH", float(COLLIDER_SPECULATIVE_REACH), "the same against triangle colliders"),
        Define("WHOLE_VOXEL_REACH", float(WHOLE_VOXEL_REACH),
               "a voxel at least this solid (corner reach) meets another as a cube"),
        Define("EDGE_AXIS_BIAS", float(EDGE_AXIS_BIAS),
               "how much smaller an edge axis' overlap must be to win over a face's"),
        Define("FACE_COMPONENT_FRACTION", float(FACE_COMPONENT_FRACTION),
               "lattice axes this big a share of the contact axis are faces pressed on"),
        Define("PARALLEL_EDGES", float(PARALLEL_EDGES), "lattice axes' cross products shorter than this are parallel"),
        Define("PUSH_OUT_SPEED", float(PUSH_OUT_SPEED),
               "the push-out's depth grows by the closing speed plus this (m/s)"),
        Define("PUSH_OUT_BIRTH_DEPTH", float(params.push_out_birth_depth),
               "how deep a new voxel pair may push in its first substep"),
        Define("SUBSTEPS_PER_DETECTION", settings.substeps_per_detection, "substeps per contact detection"),
        Define("IMPACT_SPEED", float(IMPACT_SPEED), "closing speed (m/s) above which a contact is an impact"),
        Define("PARTICLE_RADIUS", float(radius), "the particle radius (m)"),
        Define("IMPACT_MOTION", float(IMPACT_MOTION), "radii a body moves in a step beyond which it is swept"),
        Define("IMPACT_DISTANCE", float(IMPACT_DISTANCE), "centre distance (radii) at which two voxels first touch"),
        Define("IMPACT_DEPTH", float(IMPACT_DEPTH), "a sweep this close (radii) to a particle went through it"),
        Define("IMPACT_CLOSING", float(IMPACT_CLOSING), "a sweep closing less (radii) in its substep is a loaded contact"),
        Define("TRIANGLE_IMPACT_DISTANCE", float(TRIANGLE_IMPACT_DISTANCE),
               "distance (radii) from a triangle's plane at which a voxel first touches it"),
        Define("TRIANGLE_IMPACT_DEPTH", float(TRIANGLE_IMPACT_DEPTH),
               "a sweep ending this close (radii) to a triangle's plane went into it"),
        Define("MAX_IMPACT_SAMPLES", MAX_IMPACT_SAMPLES, "grid lookups along one particle's sweep at most"),
        Define("SUPPORT_MASS_RATIO", float(SUPPORT_MASS_RATIO) if params.support_up else 0.0,
               "a resting pair heavier above than this ratio is solved at it (0: no gravity, none)"),
        Define("SUPPORT_COSINE", float(SUPPORT_COSINE), "a pair's normal within this cosine of straight up: resting"),
        Define("SUPPORT_UP", "(float3)(" + ",".join(f"{x!r}f" for x in up) + ")", "the unit direction against gravity"),
        Define("WAKE_PASSES", WAKE_PASSES, "woken passes of compute_contacts per detection"),
        Define("TURNING_ANCHOR", float(TURNING_ANCHOR),
               "fraction of the time to the next detection a plane record's point is taken at"),
        Define("MAX_PAIR_COLOURS", MAX_PAIR_COLOURS, "colours of the solve's pairs at most"),
        Define("PAIR_CACHE", pair_cache(device_info.is_gpu), "a pair's points read before the first is solved"),
        Define("GRID_FENCE_MEMBAR", int(is_nvidia(device_info)), "1: PTX membar.gl in the launch barrier"),
        Define("GRID_BARRIER_TIMEOUT_NS", f"{GRID_BARRIER_TIMEOUT_NS}UL", "the launch barrier's give-up time"),
        Define("PAIR_COLOUR_COUNTS", PAIR_COLOUR_COUNTS, "pair_totals' index of the first colour count"),
        Define("OVERFLOW_PAIRS", OVERFLOW_PAIRS, "pair_totals' index of the overflow's count"),
        # the manifolds: the reduction (61_pair_colouring.cl) and the friction at their centres
        Define("MANIFOLD_POINTS", MANIFOLD_POINTS, "points a manifold keeps at most (Box3D's)"),
        Define("MANIFOLD_GROUPS", MANIFOLD_GROUPS, "a pair's normal groups at most (beyond: all records kept)"),
        Define("MANIFOLD_NORMAL_COSINE", float(MANIFOLD_NORMAL_COSINE),
               "a record joins a group whose normal is this close (cosine)"),
        Define("MANIFOLD_PECKING", float(MANIFOLD_PECKING),
               "a later candidate replaces the best only beating it by this factor"),
        Define("MANIFOLD_TIE", float((1.0 - MANIFOLD_PECKING) * radius),
               "scores this close (m) tie, for the first point"),
        Define("MANIFOLD_DEPTH_BAND", float(MANIFOLD_DEPTH_BAND * radius),
               "the first point is chosen within this depth (m) of the deepest"),
        Define("MANIFOLD_TOLERANCE2", float((MANIFOLD_TOLERANCE * radius) ** 2),
               "squared distance (m) within which points add nothing"),
        *joint_defines(model.joints.count if model.joints is not None else 0),
    )


def joint_defines(joint_count: int) -> tuple[Define, ...]:
    """The joints' defines (opencl_program.kernel_defines): the count, the state bits, the row
    modes and the layouts of joint_rows and joint_impulse."""
    return (
        Define("JOINT_COUNT", int(joint_count), "constraints between bodies (0: their code compiled out)"),
        Define("JOINT_ENABLED", JOINT_ENABLED, "joint_state bit: Blender's enabled"),
        Define("JOINT_BROKEN", JOINT_BROKEN, "joint_state bit: broken for good"),
        Define("JOINT_NO_COLLISIONS", JOINT_NO_COLLISIONS, "joint_state bit: Blender's disable_collisions"),
        Define("JOINT_AT_THRESHOLD", JOINT_AT_THRESHOLD, "joint_state bit: a row held at the breaking threshold"),
        Define("ROW_LOCKED", LOCKED, "a row's mode: held (joints.LOCKED)"),
        Define("ROW_LIMITED", LIMITED, "a row's mode: between limits (joints.LIMITED)"),
        Define("JOINT_MODE_SPRINGS", JOINT_MODE_SPRINGS, "joint_row_mode bit: some row has a spring"),
        Define("JOINT_MODE_MOTORS", JOINT_MODE_MOTORS, "joint_row_mode bit: some row has a motor"),
        Define("JOINT_MODE_LIMITS", JOINT_MODE_LIMITS, "joint_row_mode bit: some row is limited"),
        Define("JOINT_ROW_VALUES", JOINT_ROW_VALUES, "floats of joint_rows per joint"),
        *(Define(f"ROW_{field.upper()}", k * ROWS, f"joint_rows' first {field.replace('_', ' ')}")
          for k, field in enumerate(JOINT_ROW_FIELDS)),
        Define("JOINT_IMPULSES", JOINT_IMPULSES, "floats of joint_impulse per joint"),
        *(Define(f"IMPULSE_{kind.upper()}", k * ROWS, f"joint_impulse's first {kind} impulse")
          for k, kind in enumerate(JOINT_IMPULSE_KINDS)),
    )


def build_options(defines) -> list[str]:
    """The build options: the defines, then the floating-point mode and the OpenCL C standard."""
    return [define.option for define in defines] + ["-cl-denorms-are-zero", OPENCL_C_STANDARD]


def build_program(context, options):
    """The program and each kernel's parameter names from its signature (a kernel of kernels/ not
    in STAGES, or one listed there that is not defined, is an error)."""
    import pyopencl as cl

    source = program_source()
    program = build_quietly(cl.Program(context, source), options)
    parameters = kernel_parameters(source)
    unlisted = set(parameters) ^ set(LAUNCH_ORDER)
    if unlisted:
        raise RuntimeError(f"kernels defined in kernels/ and listed in STAGES differ: {sorted(unlisted)}")
    return program, parameters
