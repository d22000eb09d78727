"""OpenCL engine: the substep of ``reference.py`` as kernels, one file per stage in kernels/.

STAGES lists the stage files in the order of their numbers and the kernels each launches, in
launch order: the grid (bucket, scan, scatter, sort; only in substeps that rebuild it), the gather
into bucket order, the contact forces per particle (colliders: functions the contact kernel calls),
and per body the sum of its particles' forces and the integration. The files are built as one
program, in that order.

Every kernel argument is bound by its parameter name, read from the kernel's signature, out of
one table (``OpenCLEngine.arguments``): a name means the same buffer or value in every kernel.
Arguments are set once (the friction history, the "touched" flags and the rebuild flag are double
buffers: one instance of each kernel per parity of the substep), so a substep only enqueues; only
the animated colliders' clock is set again, by name. pyopencl's argument handling and its scan
object were most of a substep below 10k bodies on a GPU.

All state stays on the device across substeps; ``body_state()`` reads back body poses only (once
per output frame in normal use). The grid and per-particle neighbour lists are rebuilt only when
some body has moved by more than 0.45 of the skin (a little under half) since the last rebuild
(Verlet lists); the device decides, through a flag the body kernel sets and the next substep's
kernels read, so the host never waits. In between, the grid kernels return at once and the
contact kernel walks each particle's short list instead of 27 cells.

Adding a stage: a kernels/NN_name.cl file (its number places it), a Stage entry below naming its
kernels, each new buffer or value in ``arguments`` under its parameter name (``_upload`` or
``_bind_arguments``; a buffer that grows with the particles or bodies as a row of ``DEVICE_BUFFERS``,
which sizes it and the memory estimate, any other in ``FIXED_SIZE_BUFFERS``), and the kernel's work
sizes in ``_work_sizes``.
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .voxel_pairs import (EDGE_AXIS_BIAS, FACE_COMPONENT_FRACTION, PARALLEL_EDGES, PUSH_OUT_SPEED,
                          WHOLE_VOXEL_REACH, exposed_faces, push_out_birth_depth,
                          voxel_pair_reach)
from .colliders import DUPLICATE_POINT_TOLERANCE, ColliderMotion
from .contact_geometry import CONTACT_GEOMETRY
from .device import KERNEL_OPENCL_C, build_quietly, create_context
from .model import STATIC_BODY, Model, body_extents
from .rotations import quaternion_to_matrix
from .manifold import manifold_defines
from .pair_colouring import (INITIAL_MAX_PAIRS, MAX_PAIR_COLOURS, OVERFLOW_PAIRS, PAIR_COLOUR_COUNTS,
                             SPARE_COLOUR_ROUNDS, TooManyPairs, grown_max_pairs)
from .settings import (COLLIDER_SPECULATIVE_REACH, DAMPING_LIMIT, FRICTION_SLOTS, IMPACT_SPEED, TURNING_ANCHOR, WAKE_PASSES,
                       MANIFOLD_RESTITUTION_PASSES, ROLLING_REGULARIZATION, ROTATION_SWEEPS, SPECULATIVE_REACH,
                       SimulationSettings, collider_speculative_reach, derive_contact_parameters, sleep_argument,
                       solve_softness, speculative_time)
from .state import BodyState, StateMixin
from .voxel_corners import CORNER_SOFTNESS, FACE_LIKE_COSINE, SUPPORT_SPHERE_REACH, collider_reach

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
)
SOLVE_KERNELS = tuple(kernel for stage in STAGES if stage.number >= 60 for kernel in stage.kernels)
# the same OpenCL C on every device, macOS's included (device.py refuses a device below it)
OPENCL_C_STANDARD = "-cl-std=CL%d.%d" % KERNEL_OPENCL_C
SOLVE_PASS_BACKWARD = 4  # added to a pass's kind: each pair's points swept last to first (62_pair_solve.cl)
SOLVE_FIELDS = 5  # float4s per contact record: keep equal to 00_common.h's SOLVE_FIELDS
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


MIN_BITS_PER_AXIS = 2  # >= 4 cells per axis, so a cell's 27 neighbours never share a bucket
MAX_TOTAL_BITS = 28
SCAN_LOCAL_SIZE = 256  # keep equal to the kernels' SCAN_LOCAL_SIZE and SCAN_PER_ITEM
SCAN_GROUP_ITEMS = SCAN_LOCAL_SIZE * 8
BODY_GROUP_SIZE = 64
# lanes per body in the body kernel: 8 measured best on the H100 for 27-particle cubes (32: slower)
MAX_BODY_LANES = 8
# Neighbour lists: the skin, a fraction of the particle diameter, is how far the lists reach beyond
# contact distance (grid cells are a diameter plus the skin wide); rebuilt once any body moved by a
# fraction of it. A list holds a number of other-body particles (slots); a particle with more
# searches the grid every substep until the next rebuild. Each contact geometry has its own
# (contact_geometry.ContactGeometry.neighbour_skin, neighbour_slots, rebuild_fraction).

# Device buffers whose size grows with the scene, one row each: what _upload and _allocate_pairs
# allocate (a row's size is checked against any array uploaded into it) and what the memory
# estimate users see before simulating adds up (estimate_device_memory). A buffer a row does not
# need (the solve's without the solve, the detection's poses when every substep detects) is a
# PLACEHOLDER_BYTES placeholder, so that every kernel argument has a buffer.
#
# Outside the table, their size fixed by the scene's materials, planes, triangles or the grid
# rather than by its particles and bodies: FIXED_SIZE_BUFFERS. The grid's bucket arrays are sized by
# choose_grid_bits (one to two buckets per particle, padded to whole scan groups); the estimate
# counts them as GRID_BUCKETS_PER_PARTICLE buckets per particle in each of its two arrays.
PARTICLE, BODY = "particle", "body"
NEIGHBOUR_SLOTS, PAIR_SLOTS = "neighbour slots", "pair slots"
PLACEHOLDER_BYTES = 16
GRID_BUCKETS_PER_PARTICLE = 2
GRID_BYTES_PER_PARTICLE = 2 * 4 * GRID_BUCKETS_PER_PARTICLE  # bucket_count and scan_local, uint32 each


@dataclass(frozen=True)
class BufferCounts:
    """What the sizes of the table's buffers depend on."""
    particles: int
    bodies: int
    neighbour_slots: int  # per particle
    pair_slots: int  # per body (OpenCLEngine.max_pairs)
    solving: bool  # Rigid Voxels' velocity solve (OpenCLEngine.solving)
    detect_per_step: bool  # contacts detected once every few substeps (substeps_per_detection > 1)


@dataclass(frozen=True)
class DeviceBuffer:
    """A buffer of ``item_bytes`` per particle or per body, times the neighbour or pair slots where
    ``slots`` names them; ``double``: two of them that swap roles (``name``_in, ``name``_out)."""
    name: str
    per: str  # PARTICLE or BODY
    item_bytes: int
    slots: str | None = None  # NEIGHBOUR_SLOTS or PAIR_SLOTS
    solve_only: bool = False  # only the velocity solve uses it
    detect_per_step: bool = False  # only detecting once every few substeps uses it
    double: bool = False

    def nbytes(self, counts: BufferCounts) -> int:
        """Bytes of one of its buffers at these counts; 0 where it is a placeholder."""
        if (self.solve_only and not counts.solving) or (self.detect_per_step and not counts.detect_per_step):
            return 0
        items = counts.particles if self.per == PARTICLE else counts.bodies
        slots = {None: 1, NEIGHBOUR_SLOTS: counts.neighbour_slots, PAIR_SLOTS: counts.pair_slots}[self.slots]
        return items * slots * self.item_bytes

    def total_bytes(self, counts: BufferCounts) -> int:
        return self.nbytes(counts) * (2 if self.double else 1)


_FRICTION_SLOT_BYTES = FRICTION_SLOTS * 4  # an int or float per friction slot
_FRICTION_SLOT_VECTORS = FRICTION_SLOTS * 16  # a float4 per friction slot
DEVICE_BUFFERS = (
    # the model, per particle
    DeviceBuffer("particle_offset", PARTICLE, 16),
    DeviceBuffer("particle_body", PARTICLE, 4),
    DeviceBuffer("particle_material", PARTICLE, 4),
    DeviceBuffer("particle_corner_reach", PARTICLE, 4),
    DeviceBuffer("particle_support_sphere", PARTICLE, 16),
    DeviceBuffer("particle_faces", PARTICLE, 1),
    # the grid's order and the contacts' sums
    DeviceBuffer("particle_bucket", PARTICLE, 4),
    DeviceBuffer("sorted_particle", PARTICLE, 4),
    DeviceBuffer("sorted_position", PARTICLE, 16),
    DeviceBuffer("particle_force", PARTICLE, 16),
    DeviceBuffer("particle_torque", PARTICLE, 16),
    DeviceBuffer("particle_has_force", PARTICLE, 1),
    # the friction history (slot-major) and the neighbour lists
    DeviceBuffer("history_key", PARTICLE, _FRICTION_SLOT_BYTES, double=True),
    DeviceBuffer("history_xi", PARTICLE, _FRICTION_SLOT_VECTORS, double=True),
    DeviceBuffer("neighbour_count", PARTICLE, 4),
    DeviceBuffer("neighbour_list", PARTICLE, 4, slots=NEIGHBOUR_SLOTS),
    # the velocity solve, per particle: its records, their count, the impulses' history, and the
    # lists of each pair's records
    DeviceBuffer("solve_record", PARTICLE, SOLVE_FIELDS * _FRICTION_SLOT_VECTORS, solve_only=True),
    DeviceBuffer("solve_count", PARTICLE, 1, solve_only=True),
    DeviceBuffer("history_impulse", PARTICLE, _FRICTION_SLOT_VECTORS, solve_only=True, double=True),
    DeviceBuffer("pair_records", PARTICLE, _FRICTION_SLOT_BYTES, solve_only=True),
    # the bodies: model, state, and the poses the neighbour lists were built from
    DeviceBuffer("body_lattice", BODY, 16),
    DeviceBuffer("body_position", BODY, 16),
    DeviceBuffer("body_orientation", BODY, 16),
    DeviceBuffer("body_momentum", BODY, 16),
    DeviceBuffer("body_angular_momentum", BODY, 16),
    DeviceBuffer("body_velocity", BODY, 16),
    DeviceBuffer("body_angular_velocity", BODY, 16),
    DeviceBuffer("body_first_particle", BODY, 4),
    DeviceBuffer("body_particle_count", BODY, 4),
    DeviceBuffer("body_mass", BODY, 4),
    DeviceBuffer("body_contact_mass", BODY, 8),
    DeviceBuffer("body_inv_inertia", BODY, 36),
    DeviceBuffer("body_damping", BODY, 8),
    DeviceBuffer("body_extent", BODY, 4),
    DeviceBuffer("body_quiet", BODY, 4),
    DeviceBuffer("body_quiet_snapshot", BODY, 4, solve_only=True),
    DeviceBuffer("body_touched", BODY, 4, double=True),
    DeviceBuffer("body_reached", BODY, 4),
    DeviceBuffer("build_position", BODY, 16),
    DeviceBuffer("build_orientation", BODY, 16),
    # the poses at the detection and at each substep's start
    DeviceBuffer("start_position", BODY, 16, detect_per_step=True),
    DeviceBuffer("start_orientation", BODY, 16, detect_per_step=True),
    DeviceBuffer("detect_position", BODY, 16, detect_per_step=True),
    DeviceBuffer("detect_orientation", BODY, 16, detect_per_step=True),
    # the solve's pair lists (slot's other side, first record and record count, colour, rank in its
    # colour; in a colour's list, the pair's slot and those three again, so that a pass reads them
    # in one load) at max_pairs slots per body (grown if a body needs more), the pair count, the
    # impact flag, two rounds' bids and the colour masks
    *(DeviceBuffer(name, BODY, 4, slots=PAIR_SLOTS, solve_only=True)
      for name in ("pair_other", "pair_record_start", "pair_record_count", "pair_colour", "pair_rank")),
    DeviceBuffer("colour_pairs", BODY, 16, slots=PAIR_SLOTS, solve_only=True),
    DeviceBuffer("pair_count", BODY, 4, solve_only=True),
    DeviceBuffer("body_impact", BODY, 4, solve_only=True),
    DeviceBuffer("pair_bid", BODY, 2 * 4, solve_only=True),
    DeviceBuffer("body_colours", BODY, MAX_PAIR_COLOURS // 8, solve_only=True),
)
DEVICE_BUFFER = {row.name: row for row in DEVICE_BUFFERS}
PAIR_SLOT_BUFFERS = tuple(row.name for row in DEVICE_BUFFERS if row.slots == PAIR_SLOTS)
# the kernels' other buffers, by what fixes their size: the colouring's totals and colour starts,
# the barrier's counter and generation (05_grid_barrier.cl);
# the rebuild flags (a double buffer) and counter; the planes', materials' and triangles' tables;
# the grid's bucket counts, their scan and its groups' offsets (see GRID_BUCKETS_PER_PARTICLE)
FIXED_SIZE_BUFFERS = ("pair_totals", "colour_start", "grid_sync", "rebuild", "next_rebuild", "rebuild_count",
                      "pair_restitution", "pair_damping_ratio", "pair_friction", "pair_rolling",
                      "plane_point", "plane_normal", "plane_material",
                      "triangle_vertices", "collider_vertex", "collider_velocity", "triangle_bounds",
                      "large_triangles", "triangle_bucket_start", "triangle_items",
                      "bucket_count", "scan_local", "group_offset")
# A colour's launch holds this many times the pairs the colour had at the last detection (its
# work-items take more than one pair each past that)
COLOUR_LAUNCH_MARGIN = 1.25
# Work-items of the solve's passes per work-group: one per pair, as a pair's manifold points are
# solved one after another (32 lanes per pair, sharing out its records, left 31 idle: the 10k pile
# 647 -> 459 ms per simulated second on the H100 with one, rigid-step.md)
PAIRS_PER_GROUP = 64
# Work-items per work-group of solve_substep_passes (at most what the device allows the kernel):
# enough to hold a colour's pairs of the 100k pile in one sweep of the compute units
SUBSTEP_PASSES_GROUP_SIZE = 256
# A pair's points the passes read into private memory before solving the first, on a GPU
# (62_pair_solve.cl PAIR_CACHE): a colour's launch lasts its slowest pair's chain of dependent
# loads (H200 pile window, 10k: 424 -> 350 ms per simulated second). A CPU reads each point as it
# comes (with the cache PoCL's passes took 22 % longer).
PAIR_CACHE_GPU = 8
# solve_pair_contacts' launches as the profile names them, by solve_kind (62_pair_solve.cl)
SOLVE_STAGES = tuple(f"solve_pair_contacts.{kind}" for kind in ("warm", "solve", "relax", "restitution"))


def _geometries(contact_geometry: str | None):
    return CONTACT_GEOMETRY.values() if contact_geometry is None else [CONTACT_GEOMETRY[contact_geometry]]


def _may_solve(contact_geometry: str | None) -> bool:
    """Whether the velocity solve may run with this contact geometry (None: with any of them)."""
    return any(geometry.solve_passes for geometry in _geometries(contact_geometry))


def _estimate_counts(particle_count: int, body_count: int, contact_geometry: str | None) -> BufferCounts:
    """The largest the table's buffers get with this geometry (None: any) before anything is known
    of the settings: its neighbour slots, INITIAL_MAX_PAIRS pair slots, the solve where it may run,
    and the detection's poses unless contacts are springs (settings detect those every substep)."""
    geometries = _geometries(contact_geometry)
    return BufferCounts(particles=particle_count, bodies=body_count,
                        neighbour_slots=max(geometry.neighbour_slots for geometry in geometries),
                        pair_slots=INITIAL_MAX_PAIRS, solving=_may_solve(contact_geometry),
                        detect_per_step=any(not geometry.springs for geometry in geometries))


def table_bytes(counts: BufferCounts, solve_only: bool = False) -> int:
    """Bytes of the table's buffers at these counts (only the solve's where ``solve_only``)."""
    return sum(row.total_bytes(counts) for row in DEVICE_BUFFERS if row.solve_only or not solve_only)


def bytes_per_particle(contact_geometry: str | None = None) -> int:
    """Device bytes per particle with this contact geometry (contact_geometry.CONTACT_GEOMETRY),
    the grid's buckets included; None: the largest."""
    return table_bytes(_estimate_counts(1, 0, contact_geometry)) + GRID_BYTES_PER_PARTICLE


def solve_bytes_per_particle(contact_geometry: str | None = None) -> int:
    """Device bytes per particle of the velocity solve (its records, the impulses' history, the
    record count, the lists of each pair's records) where the geometry may solve
    (None: the largest)."""
    return table_bytes(_estimate_counts(1, 0, contact_geometry), solve_only=True)


def estimate_device_memory(particle_count: int, body_count: int, contact_geometry: str | None = None) -> int:
    """Bytes of OpenCL memory a simulation of this size allocates (grid buckets included; the
    scene's fixed-size tables, FIXED_SIZE_BUFFERS, left out)."""
    return (table_bytes(_estimate_counts(particle_count, body_count, contact_geometry))
            + particle_count * GRID_BYTES_PER_PARTICLE)


def solve_bytes_per_body(contact_geometry: str | None = None) -> int:
    """Device bytes per body of the velocity solve's pair lists where the geometry may solve
    (None: the largest), at INITIAL_MAX_PAIRS slots."""
    return table_bytes(_estimate_counts(0, 1, contact_geometry), solve_only=True)


def choose_grid_bits(particle_count: int, lower: np.ndarray, upper: np.ndarray, cell: float) -> tuple[int, int, int]:
    """Bits per axis of the hashed grid: one to two buckets per particle, shaped like the scene."""
    total = min(MAX_TOTAL_BITS, max(3 * MIN_BITS_PER_AXIS, math.ceil(math.log2(max(particle_count, 64)))))
    needed = np.maximum((np.asarray(upper) - np.asarray(lower)) / cell + 3.0, 1.0)
    bits = [MIN_BITS_PER_AXIS] * 3
    while sum(bits) < total:
        # grow the axis that is most short of cells
        shortfall = [needed[a] / (1 << bits[a]) for a in range(3)]
        axis = int(np.argmax(shortfall))
        if shortfall[axis] <= 1.0:
            break
        bits[axis] += 1
    return tuple(bits)


def pair_cache(is_gpu: bool) -> int:
    """The points of a pair the passes read before solving the first (PAIR_CACHE_GPU on a GPU, none
    on a CPU). PRB_PAIR_CACHE overrides (tests run the GPU path on a CPU with it)."""
    override = os.environ.get("PRB_PAIR_CACHE")
    if override:
        return int(override)
    return PAIR_CACHE_GPU if is_gpu else 0


ONE_LAUNCH_VARIABLE = "PRB_ONE_LAUNCH_PASSES"
# For tests: solve_substep_passes launched with this many work-groups per compute unit, more than
# can be resident at once, so that its barrier's guard must end the launch (05_grid_barrier.cl)
OVERSUBSCRIBE_VARIABLE = "PRB_ONE_LAUNCH_GROUPS_PER_UNIT"
# How long a group waits at the barrier across the launch before it gives up: far above a colour's
# pass (the longest single launch at a million bodies is in docs/performance.md), far below a hang
GRID_BARRIER_TIMEOUT_NS = 1_000_000_000


class PassesInOneLaunchFailed(RuntimeError):
    """solve_substep_passes' barrier across the launch gave up: the device ran fewer of its
    work-groups at once than it reported it could."""

    def __init__(self):
        super().__init__(
            "The solver's one-launch passes stopped: this GPU did not run all their work-groups at once "
            "(a GPU shared with other work?), so their barrier gave up rather than hang it; nothing after "
            f"that step is valid. Bake again with the environment variable {ONE_LAUNCH_VARIABLE}=0 "
            "(a launch per colour, a little slower).")


def one_launch_passes(device_info) -> bool:
    """Whether a substep's passes run in one launch (62_pair_solve.cl solve_substep_passes) rather
    than a launch per colour and pass: on NVIDIA GPUs, whose barrier across a launch needs PTX's
    fence (05_grid_barrier.cl), unless the driver's watchdog bounds a launch's time (a GPU driving a
    display: a launch per colour stays short). PRB_ONE_LAUNCH_PASSES=1 or 0 overrides (tests run it
    on a CPU, as one work-group)."""
    override = os.environ.get(ONE_LAUNCH_VARIABLE)
    if override:
        return override == "1"
    return is_nvidia(device_info) and not device_info.kernel_timeout


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


def _round_up(n: int, multiple: int = 64) -> int:
    return max(multiple, (n + multiple - 1) // multiple * multiple)


def _vec4(a) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64).reshape(-1, 3)
    out = np.zeros((len(a), 4), dtype=np.float32)
    out[:, :3] = a
    return out


def _quat_to_device(q_wxyz) -> np.ndarray:
    q = np.asarray(q_wxyz, dtype=np.float64).reshape(-1, 4)
    return np.ascontiguousarray(np.concatenate([q[:, 1:], q[:, :1]], axis=1), dtype=np.float32)


class OpenCLEngine(StateMixin):
    def __init__(self, model: Model, settings: SimulationSettings | None = None, profile: bool = False,
                 neighbour_skin: float | None = None, neighbour_slots: int | None = None):
        """neighbour_skin (fraction of the particle diameter) and neighbour_slots tune the neighbour
        lists; results do not depend on them beyond float rounding (tests and benchmarks vary them).
        None: the contact geometry's (contact_geometry.ContactGeometry)."""
        import pyopencl as cl

        self.cl = cl
        self.model = model
        self.settings = settings or SimulationSettings()
        self.params = derive_contact_parameters(model, self.settings)
        self.context, self.device_info = create_context(self.settings.device)
        # profile: record an event per kernel so benchmarks can split the substep (costs a little)
        self.profile = profile
        self.stage_seconds: dict[str, float] = {}
        self.stage_longest_seconds: dict[str, float] = {}
        self._events: list[tuple[str, object]] = []
        properties = cl.command_queue_properties.PROFILING_ENABLE if profile else 0
        self.queue = cl.CommandQueue(self.context, properties=properties)
        self.time = 0.0
        self.substeps_done = 0
        self.voxel_contacts = self.settings.contact_geometry == "voxels"
        # the velocity solve over the contacts' records (kernels 60-62): Rigid Voxels only
        self.solve_passes = self.settings.solve_passes
        self.solving = self.solve_passes > 0
        geometry = CONTACT_GEOMETRY[self.settings.contact_geometry]
        if neighbour_skin is None:
            neighbour_skin = geometry.neighbour_skin
        if neighbour_slots is None:
            neighbour_slots = geometry.neighbour_slots
        if not (neighbour_skin > 0 and math.isfinite(neighbour_skin)) or neighbour_slots < 1:
            raise ValueError(f"neighbour skin must be > 0 and slots >= 1, got {neighbour_skin}, {neighbour_slots}")
        self.rebuild_fraction = geometry.rebuild_fraction
        if self.rebuild_fraction is None:  # Rigid Voxels: from their pair reach and this skin
            # every pair within VOXEL_PAIR_REACH listed: d (1 + skin (1 - 2 fraction)) >= reach, with 10 % to spare
            reach = voxel_pair_reach(self.settings.speculative_margin)
            self.rebuild_fraction = 0.45 * (1.0 - (reach / 2.0 - 1.0) / neighbour_skin)
            if self.rebuild_fraction <= 0.0:
                raise ValueError(f"voxel contacts need a neighbour skin over {reach / 2 - 1:.3f}, "
                                 f"got {neighbour_skin}")
        self.neighbour_skin = float(neighbour_skin)
        self.neighbour_slots = int(neighbour_slots)
        material_count = len(model.materials)
        self.body_lanes = choose_body_lanes(model.body_particle_count, self.device_info.is_gpu)
        # how far colliders reach from a particle's centre: a define, and the triangle lookups' growth
        self.collider_reach = collider_reach(model) + collider_speculative_reach(self.settings) * model.particle_radius
        options = [f"-DFRICTION_SLOTS={FRICTION_SLOTS}", f"-DNEIGHBOUR_SLOTS={self.neighbour_slots}",
                   f"-DMATERIAL_COUNT={material_count}", f"-DDAMPING_LIMIT={DAMPING_LIMIT!r}f",
                   f"-DROLLING_REGULARIZATION={ROLLING_REGULARIZATION!r}f", f"-DROTATION_SWEEPS={ROTATION_SWEEPS}",
                   f"-DDUPLICATE_POINT_TOLERANCE={DUPLICATE_POINT_TOLERANCE!r}f",
                   f"-DCORNER_SOFTNESS={CORNER_SOFTNESS!r}f", f"-DFACE_LIKE_COSINE={FACE_LIKE_COSINE!r}f",
                   f"-DSUPPORT_SPHERE_REACH={SUPPORT_SPHERE_REACH!r}f",
                   f"-DCOLLIDER_REACH={self.collider_reach / model.particle_radius!r}f",
                   f"-DHAS_TRIANGLES={int(model.triangle_count > 0)}",
                   f"-DBODY_LANES={self.body_lanes}", f"-DBODY_GROUP_SIZE={BODY_GROUP_SIZE}",
                   # one fact: Rigid Voxels' contacts are voxel pairs, each a record of the solve,
                   # and no springs (ContactGeometry.springs); Particles' are springs between spheres
                   f"-DRIGID_VOXELS={int(self.solving)}",
                   f"-DVOXEL_PAIR_REACH2={float((voxel_pair_reach(self.settings.speculative_margin) * model.particle_radius) ** 2)!r}f",
                   f"-DSPECULATIVE_MARGIN={float(self.settings.speculative_margin)!r}f",
                   f"-DSPECULATIVE_TIME={float(speculative_time(self.settings, self.params.substep))!r}f",
                   f"-DSPECULATIVE_REACH={float(SPECULATIVE_REACH)!r}f",
                   f"-DCOLLIDER_SPECULATIVE_REACH={float(COLLIDER_SPECULATIVE_REACH)!r}f",
                   f"-DWHOLE_VOXEL_REACH={WHOLE_VOXEL_REACH!r}f", f"-DEDGE_AXIS_BIAS={EDGE_AXIS_BIAS!r}f",
                   f"-DFACE_COMPONENT_FRACTION={FACE_COMPONENT_FRACTION!r}f",
                   f"-DPARALLEL_EDGES={PARALLEL_EDGES!r}f", f"-DPUSH_OUT_SPEED={PUSH_OUT_SPEED!r}f",
                   f"-DPUSH_OUT_BIRTH_DEPTH={float(push_out_birth_depth(self.params, self.settings))!r}f",
                   f"-DSUBSTEPS_PER_DETECTION={self.settings.substeps_per_detection}",
                   f"-DIMPACT_SPEED={IMPACT_SPEED!r}f", f"-DWAKE_PASSES={WAKE_PASSES}",
                   f"-DTURNING_ANCHOR={TURNING_ANCHOR!r}f",
                   f"-DMAX_PAIR_COLOURS={MAX_PAIR_COLOURS}",
                   f"-DPAIR_CACHE={pair_cache(self.device_info.is_gpu)}",
                   f"-DGRID_FENCE_MEMBAR={int(is_nvidia(self.device_info))}",
                   f"-DGRID_BARRIER_TIMEOUT_NS={GRID_BARRIER_TIMEOUT_NS}UL",
                   f"-DPAIR_COLOUR_COUNTS={PAIR_COLOUR_COUNTS}", f"-DOVERFLOW_PAIRS={OVERFLOW_PAIRS}",
                   *manifold_defines(model.particle_radius),
                   "-cl-denorms-are-zero", OPENCL_C_STANDARD]
        source = program_source()
        self.build_options = tuple(options)
        self.program = build_quietly(cl.Program(self.context, source), options)
        # every kernel's parameter names, from its signature; one instance of each kernel per parity
        # of the substep, so that the double buffers' arguments never change between substeps
        self.kernel_parameters = kernel_parameters(source)
        unlisted = set(self.kernel_parameters) ^ set(LAUNCH_ORDER)
        if unlisted:
            raise RuntimeError(f"kernels defined in kernels/ and listed in STAGES differ: {sorted(unlisted)}")
        self._kernels = {name: (cl.Kernel(self.program, name), cl.Kernel(self.program, name))
                         for name in LAUNCH_ORDER}
        # argument name -> [(the kernel's two instances, the argument's index)]
        self._argument_users: dict[str, list[tuple[tuple, int]]] = {}
        for name, parameters in self.kernel_parameters.items():
            for index, parameter in enumerate(parameters):
                self._argument_users.setdefault(parameter, []).append((self._kernels[name], index))
        # compute_contacts' later launches of a detection (woken_pass k: the sleepers the launch
        # before reached), their own instances so that no argument changes between the launches
        self._woken_contacts = [(cl.Kernel(self.program, "compute_contacts"),
                                 cl.Kernel(self.program, "compute_contacts")) for _ in range(WAKE_PASSES)]
        for woken_pass, kernels in enumerate(self._woken_contacts, start=1):
            for index, parameter in enumerate(self.kernel_parameters["compute_contacts"]):
                if parameter == "woken_pass":
                    for kernel in kernels:
                        kernel.set_arg(index, np.int32(woken_pass))
                else:
                    self._argument_users[parameter].append((kernels, index))
        self.one_launch_passes = self.solving and one_launch_passes(self.device_info)
        if self.one_launch_passes:
            # one work-group per compute unit, so that all are resident (the barrier across them
            # waits for every one); a CPU asked to runs one
            device = self.context.devices[0]
            limit = self._kernels["solve_substep_passes"][0].get_work_group_info(
                cl.kernel_work_group_info.WORK_GROUP_SIZE, device)
            local = min(SUBSTEP_PASSES_GROUP_SIZE, limit)
            groups = device.max_compute_units if self.device_info.is_gpu else 1
            groups *= int(os.environ.get(OVERSUBSCRIBE_VARIABLE) or 1)
            self._substep_passes_size = ((groups * local,), (local,))
        # every kernel argument by its parameter name: a buffer, a value, or a ByParity pair of them
        self.arguments: dict[str, object] = {}
        self.substep_parity = 0
        self._upload()
        self._bind_arguments()

    @property
    def device_name(self) -> str:
        return self.device_info.label

    # -- setup ------------------------------------------------------------------------------
    def _buffer(self, array=None, nbytes=None):
        mf = self.cl.mem_flags
        if array is not None:
            array = np.ascontiguousarray(array)
            if array.nbytes == 0:
                array = np.zeros(4, dtype=array.dtype)
            return self.cl.Buffer(self.context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=array)
        return self.cl.Buffer(self.context, mf.READ_WRITE, size=max(int(nbytes), 16))

    def _double_buffer(self, name_in: str, name_out: str, first, second):
        """Two buffers that swap roles every substep: one substep writes name_out, the next reads it
        as name_in."""
        self.arguments[name_in] = ByParity((first, second))
        self.arguments[name_out] = ByParity((second, first))

    @property
    def buffer_counts(self) -> BufferCounts:
        """The counts that size the buffers of DEVICE_BUFFERS' rows in this engine."""
        return BufferCounts(particles=self.particle_count, bodies=self.body_count,
                            neighbour_slots=self.neighbour_slots, pair_slots=self.max_pairs, solving=self.solving,
                            detect_per_step=self.settings.substeps_per_detection > 1)

    def _table_buffer(self, name: str, initial=None):
        """The buffer of DEVICE_BUFFERS' row ``name`` at this engine's counts: ``initial`` is an
        array of exactly its size, or a value (a numpy scalar) every element starts at, or None
        (left as allocated); a PLACEHOLDER_BYTES placeholder where the row is not needed."""
        nbytes = DEVICE_BUFFER[name].nbytes(self.buffer_counts)
        if initial is None:
            return self._buffer(nbytes=nbytes or PLACEHOLDER_BYTES)
        if np.ndim(initial) == 0:
            return self._buffer(np.full((nbytes or PLACEHOLDER_BYTES) // initial.itemsize, initial))
        if initial.nbytes != nbytes:
            raise RuntimeError(f"buffer {name!r}: {initial.nbytes} bytes uploaded, DEVICE_BUFFERS says {nbytes}")
        return self._buffer(initial)

    def _table_double_buffer(self, name: str, initial):
        """Row ``name``'s double buffer (``name``_in, ``name``_out), both starting at ``initial``."""
        self._double_buffer(name + "_in", name + "_out", self._table_buffer(name, initial),
                            self._table_buffer(name, initial))

    def _upload(self):
        m = self.model
        pr = self.params
        body_count, particle_count = m.body_count, m.particle_count
        self.body_count, self.particle_count = body_count, particle_count
        dynamic = m.particle_body != STATIC_BODY
        particle_material = np.zeros(particle_count, dtype=np.int32)
        particle_material[dynamic] = m.body_material[m.particle_body[dynamic]]
        particle_material[~dynamic] = m.static_particle_material
        # gravity's half kick: momenta live at half substeps (leapfrog), so free fall is exact
        momentum = m.body_velocity * m.body_mass[:, None] - 0.5 * m.body_mass[:, None] * pr.gravity * pr.substep
        rot = quaternion_to_matrix(m.body_orientation).reshape(-1, 3, 3)
        inertia_world = rot @ m.body_inertia_local @ np.swapaxes(rot, 1, 2)
        angular_momentum = np.einsum("bij,bj->bi", inertia_world, m.body_angular_velocity).reshape(-1, 3)
        damping = (pr.materials[m.body_material][:, 2:4].astype(np.float32) if body_count
                   else np.zeros((0, 2), np.float32))

        buffer, table = self._buffer, self._table_buffer
        a = self.arguments
        self.max_pairs = INITIAL_MAX_PAIRS
        a["particle_offset"] = table("particle_offset", _vec4(m.particle_offset))
        a["particle_body"] = table("particle_body", m.particle_body.astype(np.int32))
        a["particle_material"] = table("particle_material", particle_material)
        a["particle_corner_reach"] = table("particle_corner_reach", m.particle_corner_reach.astype(np.float32))
        a["particle_support_sphere"] = table("particle_support_sphere",
                                             m.particle_support_sphere.astype(np.float32).reshape(-1, 4))
        a["body_lattice"] = table("body_lattice", _quat_to_device(m.body_lattice_orientation))
        a["particle_faces"] = table("particle_faces", exposed_faces(m) if self.voxel_contacts
                                    else np.zeros(particle_count, np.uint8))
        for name in ("particle_bucket", "sorted_particle", "sorted_position", "particle_force", "particle_torque",
                     "particle_has_force", "solve_record"):
            a[name] = table(name)
        a["solve_count"] = table("solve_count", np.uint8(0))
        self._allocate_pairs()
        for name in ("pair_bid", "body_impact", "pair_records", "body_colours"):
            a[name] = table(name)
        a["pair_totals"] = buffer(nbytes=4 * (PAIR_COLOUR_COUNTS + MAX_PAIR_COLOURS))
        a["colour_start"] = buffer(nbytes=4 * (MAX_PAIR_COLOURS + 2))
        a["grid_sync"] = buffer(np.zeros(3, np.int32))  # arrived, generation, gave up (05_grid_barrier.cl)
        # what the detections so far needed, as read back (the first detection's at once, every
        # later one's at the detection after it): the colouring rounds and the colours a detection
        # enqueues, and each colour's pairs (its launch's size)
        self.colour_rounds = 1
        self.colour_limit = 1
        self._launch_counts = np.zeros(0, np.int64)
        self._pair_totals = np.zeros(PAIR_COLOUR_COUNTS + MAX_PAIR_COLOURS, np.int32)
        self._totals_read = None  # the event of the last detection's read of pair_totals
        self.detections_with_dropped_pairs = 0  # detections where a body had more others than slots
        self._colour_kernels = {}
        # solve_substep_passes' instances: (kernel, the colour_limit it was given)
        self._substep_passes_kernels = {}
        a["pair_restitution"] = buffer(pr.restitution.astype(np.float32).ravel())
        self._table_double_buffer("history_impulse", np.float32(0))
        # slot-major (slot s of particle i at s * P + i): measured faster than particle-major on the H100
        self._table_double_buffer("history_key", np.int32(-1))
        self._table_double_buffer("history_xi", np.float32(0))

        a["body_position"] = table("body_position", _vec4(m.body_position))
        a["body_orientation"] = table("body_orientation", _quat_to_device(m.body_orientation))
        a["body_momentum"] = table("body_momentum", _vec4(momentum))
        a["body_angular_momentum"] = table("body_angular_momentum", _vec4(angular_momentum))
        a["body_velocity"] = table("body_velocity", _vec4(momentum / m.body_mass[:, None]) if body_count
                                   else np.zeros((0, 4), np.float32))
        a["body_angular_velocity"] = table("body_angular_velocity", _vec4(m.body_angular_velocity))
        # contacts detected once per step: the bodies' poses at the detection and at each substep's start
        for name in ("start_position", "start_orientation", "detect_position", "detect_orientation"):
            a[name] = table(name)
        a["body_first_particle"] = table("body_first_particle", m.body_first_particle.astype(np.int32))
        a["body_particle_count"] = table("body_particle_count", m.body_particle_count.astype(np.int32))
        a["body_mass"] = table("body_mass", m.body_mass.astype(np.float32))
        # (flat-face share, share of the contacts of the previous substep): see contact_mass()
        a["body_contact_mass"] = table("body_contact_mass", np.repeat(
            m.body_effective_mass.astype(np.float32)[:, None], 2, axis=1).reshape(-1, 2))
        a["body_inv_inertia"] = table("body_inv_inertia", m.body_inv_inertia_local.reshape(-1).astype(np.float32))
        a["body_damping"] = table("body_damping", np.ascontiguousarray(damping, dtype=np.float32))
        a["body_extent"] = table("body_extent", body_extents(m).astype(np.float32))
        a["body_quiet"] = table("body_quiet", np.float32(0))
        a["body_quiet_snapshot"] = table("body_quiet_snapshot", np.float32(0))
        # "an awake body touched this sleeping one": written by the contacts of one substep, read by
        # the next
        self._table_double_buffer("body_touched", np.int32(0))
        # Rigid Voxels: the sleepers an awake body's records reached, woken in the same detection
        a["body_reached"] = table("body_reached", np.int32(0))
        # neighbour lists: the rebuild flag (the first substep builds), rebuild counter, per bucket
        # slot the list, and per body the pose the lists were built from
        self._double_buffer("rebuild", "next_rebuild", buffer(np.array([1], np.int32)),
                            buffer(np.array([0], np.int32)))
        a["rebuild_count"] = buffer(np.zeros(1, np.uint32))
        a["neighbour_count"] = table("neighbour_count", np.int32(0))
        a["neighbour_list"] = table("neighbour_list")
        a["build_position"] = table("build_position", _vec4(m.body_position))
        a["build_orientation"] = table("build_orientation", _quat_to_device(m.body_orientation))

        a["plane_point"] = buffer(_vec4(m.plane_point))
        a["plane_normal"] = buffer(_vec4(m.plane_normal))
        a["plane_material"] = buffer(m.plane_material.astype(np.int32))
        a["pair_damping_ratio"] = buffer(pr.damping_ratio.astype(np.float32).ravel())
        a["pair_friction"] = buffer(pr.friction.astype(np.float32).ravel())
        a["pair_rolling"] = buffer(pr.rolling_friction.astype(np.float32).ravel())

        # triangle colliders
        self.colliders = ColliderMotion(m, self.collider_reach)
        self.sleep = sleep_argument(self.params, self.solving, self.colliders.moving)
        triangle_vertices = np.zeros((m.triangle_count, 4), dtype=np.int32)
        triangle_vertices[:, :3] = m.mesh_triangles
        triangle_vertices[:, 3] = m.triangle_material
        a["triangle_vertices"] = buffer(triangle_vertices)
        a["collider_vertex"] = buffer(_vec4(self.colliders.vertices))
        a["collider_velocity"] = buffer(_vec4(self.colliders.velocities))
        self._upload_triangle_grid()

        # grid: the bucket arrays have one extra zero at the end, so the scan ends with the particle
        # count, and are padded to whole scan groups
        self.grid_cell_size = 2.0 * m.particle_radius * (1.0 + self.neighbour_skin)
        positions = self._initial_particle_positions()
        lower = positions.min(axis=0) if particle_count else np.zeros(3)
        upper = positions.max(axis=0) if particle_count else np.zeros(3)
        self.grid_bits = choose_grid_bits(particle_count, lower, upper, self.grid_cell_size)
        self.bucket_total = 1 << sum(self.grid_bits)
        padded = _round_up(self.bucket_total + 1, SCAN_GROUP_ITEMS)
        self.scan_group_count = padded // SCAN_GROUP_ITEMS
        a["bucket_count"] = buffer(np.zeros(padded, np.uint32))
        a["scan_local"] = buffer(nbytes=4 * padded)
        a["group_offset"] = buffer(nbytes=4 * self.scan_group_count)
        self.queue.finish()

    def _allocate_pairs(self):
        """The solve's pair lists at max_pairs slots per body (placeholders otherwise)."""
        for name in (*PAIR_SLOT_BUFFERS, "pair_count"):
            self.arguments[name] = self._table_buffer(name)

    def _bind_arguments(self):
        """The values of the table, then every kernel's arguments, set once: a substep then only
        enqueues (and moves the animated colliders' clock)."""
        m, pr = self.model, self.params
        particle_count, body_count = self.particle_count, self.body_count
        diameter = 2.0 * pr.radius
        self.arguments.update(
            particle_count=np.int32(particle_count),
            body_count=np.int32(body_count),
            history_stride=np.int32(particle_count),
            inv_cell=np.float32(1.0 / self.grid_cell_size),
            grid_bits=np.array([*self.grid_bits, 0], dtype=np.int32),
            bucket_total=np.int32(self.bucket_total),
            scan_group_count=np.uint32(self.scan_group_count),
            plane_count=np.int32(m.plane_count),
            contact_constants=np.array([pr.stiffness, pr.tangential_stiffness, pr.substep, pr.radius],
                                       dtype=np.float32),
            substep=np.float32(pr.substep),
            gravity=np.array([*pr.gravity, 0.0], dtype=np.float32),
            terminal_speed=np.float32(pr.terminal_speed),
            # sleeping bodies skip their contacts unless an awake body touches them; a moving
            # collider would not wake them, so not while colliders move
            sleep=self.sleep,
            neighbour_reach2=np.float32((diameter * (1.0 + self.neighbour_skin)) ** 2),
            # the geometry's rebuild fraction of the skin: under half, both bodies of a pair may move that far
            rebuild_distance=np.float32(self.rebuild_fraction * diameter * self.neighbour_skin),
            solve_constants=np.array([self.settings.solve_slop * pr.radius, self.settings.solve_push_speed,
                                      *solve_softness(pr.substep, self.settings.solve_hertz_fraction)],
                                     dtype=np.float32),
            max_pairs=np.int32(self.max_pairs),
            colour_limit=np.int32(1),  # set per detection by _colour_pairs
            # set per launch by _enqueue_pair_solve
            solve_colour=np.int32(0), solve_kind=np.int32(0), colour_round=np.int32(0),
            # solve_substep_passes' (the restitution passes and the sweep set per instance by
            # _substep_passes_kernel)
            solve_passes=np.int32(self.solve_passes), relax_passes=np.int32(self.settings.relax_passes),
            restitution_passes=np.int32(0), sweep_backward=np.int32(0),
            woken_pass=np.int32(0),  # 1, 2, ... in the instances of _woken_contacts, set once
        )
        self._bind()
        particles = (_round_up(particle_count),)
        scan_group = (SCAN_LOCAL_SIZE,)
        # (global size, local size) of each kernel
        self._work_sizes = {
            "assign_buckets": (particles, None),
            "scan_bucket_groups": ((self.scan_group_count * SCAN_LOCAL_SIZE,), scan_group),
            "scan_group_totals": (scan_group, scan_group),
            "scatter_to_buckets": (particles, None),
            "sort_buckets": ((_round_up(self.bucket_total),), None),
            "gather_particles": (particles, None),
            # 64 work-items: 32 and 64 measured best on the H100 (256: slower)
            "compute_contacts": (particles, (64,)),
            "integrate_bodies": ((_round_up(body_count, BODY_GROUP_SIZE // self.body_lanes) * self.body_lanes,),
                                 (BODY_GROUP_SIZE,)),
            "list_solve_pairs": ((_round_up(body_count),), None),
            "spread_island_quiet": ((_round_up(body_count),), None),
            "settle_islands": ((_round_up(body_count),), None),
        }
        # what a substep enqueues, in order: (kernel's two instances, global size, local size, name);
        # the solve's launches follow them (_enqueue_pair_solve)
        order = [name for name in LAUNCH_ORDER if name not in SOLVE_KERNELS]
        self._launches = [(self._kernels[name], *self._work_sizes[name], name) for name in order]
        if self.solving and self.sleep[0] > 0.0:
            # the sleepers the contacts' records reached compute theirs before the bodies integrate
            at = order.index("compute_contacts") + 1
            self._launches[at:at] = [(kernels, *self._work_sizes["compute_contacts"], "compute_contacts")
                                     for kernels in self._woken_contacts]
        # between detections (substeps_per_detection > 1) a substep only integrates the bodies
        self._integrate_launches = [launch for launch in self._launches if launch[3] == "integrate_bodies"]

    def _bind(self, names=None):
        """Set the kernels' arguments named ``names`` (all by default) from the table."""
        for name in self._argument_users if names is None else names:
            if name not in self.arguments:
                kernels = ", ".join(kernels[0].function_name for kernels, _ in self._argument_users[name])
                raise RuntimeError(f"kernel argument {name!r} ({kernels}) has no value in OpenCLEngine.arguments")
            value = self.arguments[name]
            for kernels, index in self._argument_users.get(name, ()):
                for parity, kernel in enumerate(kernels):
                    kernel.set_arg(index, value[parity] if isinstance(value, ByParity) else value)

    def _set_argument(self, name: str, value):
        """Set one argument of the kernels of this substep's parity (the next launches use it)."""
        self.arguments[name] = value
        for kernels, index in self._argument_users[name]:
            kernels[self.substep_parity].set_arg(index, value)

    def _upload_triangle_grid(self):
        grid = self.colliders.grid
        self.arguments.update(
            triangle_bounds=self._buffer(self.colliders.bounds),
            large_triangles=self._buffer(grid.large.astype(np.int32)),
            triangle_bucket_start=self._buffer(grid.bucket_start.astype(np.uint32)),
            triangle_items=self._buffer(grid.items.astype(np.int32)),
            large_triangle_count=np.int32(len(grid.large)),
            triangle_inv_cell=np.float32(1.0 / grid.cell),
            triangle_mask=np.uint32(grid.mask),
            collider_tau=np.float32(self.colliders.tau),
        )

    _TRIANGLE_GRID_ARGUMENTS = ("triangle_bounds", "large_triangles", "triangle_bucket_start", "triangle_items",
                                "large_triangle_count", "triangle_inv_cell", "triangle_mask", "collider_tau")

    def set_collider_frame(self, frame: int, frame_duration: float):
        """Animated colliders: move them from output frame ``frame`` towards the next one."""
        if self.colliders.set_frame(frame, frame_duration):
            self.cl.enqueue_copy(self.queue, self.arguments["collider_vertex"], _vec4(self.colliders.vertices))
            self.cl.enqueue_copy(self.queue, self.arguments["collider_velocity"], _vec4(self.colliders.velocities))
            self._upload_triangle_grid()
            self._bind(self._TRIANGLE_GRID_ARGUMENTS)

    def _initial_particle_positions(self) -> np.ndarray:
        m = self.model
        pos = m.particle_offset.copy()
        dyn = m.particle_body != STATIC_BODY
        rot = quaternion_to_matrix(m.body_orientation).reshape(-1, 3, 3)
        pos[dyn] = m.body_position[m.particle_body[dyn]] + np.einsum(
            "pij,pj->pi", rot[m.particle_body[dyn]], m.particle_offset[dyn])
        return pos

    # -- stepping ---------------------------------------------------------------------------
    def step(self, count: int = 1):
        if self.body_count == 0:
            self.time += count * self.params.substep
            self.substeps_done += count
            return
        for _ in range(count):
            self._enqueue_substep()
            self.substeps_done += 1
        self.time += count * self.params.substep

    def _enqueue_substep(self):
        if self.model.triangle_count:
            self._set_argument("collider_tau", np.float32(self.colliders.tau))
        enqueue, queue, parity = self.cl.enqueue_nd_range_kernel, self.queue, self.substep_parity
        every = self.settings.substeps_per_detection
        phase = self.substeps_done % every
        detecting = phase == 0
        launches = self._launches
        if every > 1:
            if detecting:
                a = self.arguments
                self.cl.enqueue_copy(queue, a["detect_position"], a["body_position"])
                self.cl.enqueue_copy(queue, a["detect_orientation"], a["body_orientation"])
            else:
                launches = self._integrate_launches
        if self.profile:
            for kernels, global_size, local_size, name in launches:
                self._record(name, enqueue(queue, kernels[parity], global_size, local_size))
        else:
            for kernels, global_size, local_size, _ in launches:
                enqueue(queue, kernels[parity], global_size, local_size)
        if self.solving:
            self._enqueue_pair_solve(parity, detecting, phase == every - 1)
        # the double buffers (friction history, touched and rebuild flags) swap once per detection
        if phase == every - 1:
            self.substep_parity = 1 - parity
        self.colliders.tau += self.params.substep

    def _colour_kernel(self, name, colour, kind, parity):
        """The instance of coloured-solve kernel ``name`` for one colour (and pass kind), its arguments
        set once, so that a substep's launches only enqueue (setting an argument per launch cost
        more host time than the launch)."""
        key = (name, colour, kind, parity)
        kernel = self._colour_kernels.get(key)
        if kernel is None:
            kernel = self.cl.Kernel(self.program, name)
            for index, parameter in enumerate(self.kernel_parameters[name]):
                value = {"solve_colour": np.int32(colour), "colour_round": np.int32(colour),
                         "solve_kind": np.int32(kind)}.get(
                    parameter, self.arguments[parameter])
                kernel.set_arg(index, value[parity] if isinstance(value, ByParity) else value)
            self._colour_kernels[key] = kernel
        return kernel

    def _enqueue(self, kernel, name, global_size, local_size):
        event = self.cl.enqueue_nd_range_kernel(self.queue, kernel, global_size, local_size)
        if self.profile:
            self._record(name, event)

    def _colour_pairs(self, parity):
        """List and colour a detection's body pairs (61_pair_colouring.cl) without waiting for the
        device. The rounds enqueued are the most an earlier detection needed and SPARE_COLOUR_ROUNDS
        more, the colours launched the most an earlier one used; a pair they leave uncoloured, or
        coloured past them, is the overflow's, which one work-item solves after the colours, one
        pair after another (Box2D's overflow constraints). The totals are read back as the device
        gets there and taken at the next detection, which grows the pair slots if a body filled its
        own. The first detection has nothing earlier to go by: it waits for its totals."""
        cl, a = self.cl, self.arguments
        totals = self._pair_totals
        first = self._totals_read is None
        if not first:
            self._take_totals()
        while True:
            cl.enqueue_fill_buffer(self.queue, a["pair_totals"], np.int32(0), 0, totals.nbytes)
            cl.enqueue_fill_buffer(self.queue, a["body_impact"], np.int32(0), 0, 4 * self.body_count)
            self._enqueue(self._kernels["list_solve_pairs"][parity], "list_solve_pairs",
                          *self._work_sizes["list_solve_pairs"])
            slots = (_round_up(self.body_count * self.max_pairs),)
            self._enqueue(self._kernels["reduce_pair_manifolds"][parity], "reduce_pair_manifolds", slots, None)
            rounds = 0
            while True:
                for colour_round in range(rounds, rounds + self.colour_rounds + SPARE_COLOUR_ROUNDS):
                    for name in ("bid_for_colour", "take_colour"):
                        self._enqueue(self._colour_kernel(name, colour_round, 0, parity), name, slots, None)
                rounds = colour_round + 1
                if not first:
                    break
                cl.enqueue_copy(self.queue, totals, a["pair_totals"])
                if totals[3] > MAX_PAIR_COLOURS:
                    raise TooManyPairs()
                if totals[1] > self.max_pairs or totals[2] == totals[0]:
                    break
            if not first or totals[1] <= self.max_pairs:
                break
            self._grow_pair_slots(int(totals[1]))
        if first:
            self._raise_colours(totals)
        self._set_argument("colour_limit", np.int32(self.colour_limit))
        one = ((1,), (1,))
        self._enqueue(self._kernels["start_colours"][parity], "start_colours", *one)
        self._enqueue(self._kernels["gather_colour_pairs"][parity], "gather_colour_pairs", slots, None)
        self._enqueue(self._kernels["sort_overflow_pairs"][parity], "sort_overflow_pairs", *one)
        self._totals_read = cl.enqueue_copy(self.queue, totals, a["pair_totals"], is_blocking=False)

    def _take_totals(self):
        """The last detection's pair totals (read back as the device got there): refuse a body
        with more colours than MAX_PAIR_COLOURS, grow the slots if a body filled its own, and raise
        the rounds and colours to what it needed."""
        self._totals_read.wait()
        totals = self._pair_totals
        if totals[3] > MAX_PAIR_COLOURS:
            raise TooManyPairs()
        if totals[1] > self.max_pairs:
            self.detections_with_dropped_pairs += 1
        if totals[1] >= self.max_pairs:
            self._grow_pair_slots(self.max_pairs + 1)
        self._raise_colours(totals)

    def _raise_colours(self, totals):
        """The rounds and colours raised to what a detection's ``totals`` needed (both start from
        1), and each colour's next launch sized from its count."""
        self.colour_rounds = max(self.colour_rounds, int(totals[4]))
        self.colour_limit = max(self.colour_limit, int(totals[3]))
        self._launch_counts = totals[PAIR_COLOUR_COUNTS:PAIR_COLOUR_COUNTS + totals[3]].astype(np.int64)

    def _grow_pair_slots(self, needed: int):
        """Every body's pair slots grown (doubled) to hold ``needed``."""
        self.max_pairs = grown_max_pairs(self.max_pairs, needed)
        self._allocate_pairs()
        self.arguments["max_pairs"] = np.int32(self.max_pairs)
        self._bind((*PAIR_SLOT_BUFFERS, "pair_count", "max_pairs"))
        self._colour_kernels.clear()
        self._substep_passes_kernels.clear()

    def _last_totals(self):
        """The last detection's pair totals once the device has them; None before any."""
        if not self.solving or self._totals_read is None:
            return None
        self._totals_read.wait()
        return self._pair_totals

    @property
    def colour_pair_counts(self) -> np.ndarray:
        """The pairs of each colour at the last detection (reads the device)."""
        totals = self._last_totals()
        if totals is None:
            return np.zeros(0, np.int64)
        return totals[PAIR_COLOUR_COUNTS:PAIR_COLOUR_COUNTS + min(int(totals[3]), MAX_PAIR_COLOURS)].astype(np.int64)

    @property
    def overflow_pair_count(self) -> int:
        """The pairs the last detection's overflow held (reads the device)."""
        totals = self._last_totals()
        return 0 if totals is None else int(totals[OVERFLOW_PAIRS])

    def _enqueue_pair_solve(self, parity, detecting=True, last_of_detection=True):
        """The solve's launches (62_pair_solve.cl): the warm start, the solve passes and the relax
        passes, at a detection's last substep the restitution passes, each a launch per colour in
        work-groups of PAIRS_PER_GROUP pairs and one of a single work-item for the overflow; the
        pairs listed and coloured when the contacts were detected."""
        if detecting:
            self._colour_pairs(parity)
        backward = self.substeps_done % 2 == 1
        if self.one_launch_passes:
            kernel = self._substep_passes_kernel(last_of_detection, backward, parity)
            self._enqueue(kernel, "solve_substep_passes", *self._substep_passes_size)
        else:
            self._enqueue_colour_launches(parity, last_of_detection, backward)
        if detecting and self.sleep[0] > 0.0:
            for name in ("spread_island_quiet", "settle_islands"):
                self._enqueue(self._kernels[name][parity], name, *self._work_sizes[name])

    def _substep_passes_kernel(self, last_of_detection, backward, parity):
        """The instance of solve_substep_passes for a substep with or without the restitution
        passes, swept forward or backward, its arguments set once but for the colours launched
        (raised by the detections)."""
        key = (last_of_detection, backward, parity)
        kernel, colour_limit = self._substep_passes_kernels.get(key, (None, None))
        if kernel is None:
            kernel = self.cl.Kernel(self.program, "solve_substep_passes")
            for index, parameter in enumerate(self.kernel_parameters["solve_substep_passes"]):
                value = {"restitution_passes": np.int32(MANIFOLD_RESTITUTION_PASSES if last_of_detection else 0),
                         "sweep_backward": np.int32(backward)}.get(parameter, self.arguments[parameter])
                kernel.set_arg(index, value[parity] if isinstance(value, ByParity) else value)
            colour_limit = int(self.arguments["colour_limit"])
        if colour_limit != self.colour_limit:
            kernel.set_arg(0, np.int32(self.colour_limit))  # colour_limit: the kernel's first parameter
        self._substep_passes_kernels[key] = (kernel, self.colour_limit)
        return kernel

    def _enqueue_colour_launches(self, parity, last_of_detection, backward):
        """The passes as a launch per colour and pass kind, and one of a single work-item for the
        overflow."""
        kinds = [0] + [1] * self.solve_passes + [2] * self.settings.relax_passes
        if last_of_detection:
            kinds += [3] * MANIFOLD_RESTITUTION_PASSES  # once per detection (62_pair_solve.cl)
        if backward:
            # every other substep each pair's points last to first (reference.py _solve_pairs)
            kinds = [kind | SOLVE_PASS_BACKWARD if kind else kind for kind in kinds]
        counts = np.zeros(self.colour_limit, np.int64)
        known = min(len(self._launch_counts), self.colour_limit)
        counts[:known] = self._launch_counts[:known]
        sizes = [((_round_up(int(COLOUR_LAUNCH_MARGIN * count) + 1, PAIRS_PER_GROUP),), (PAIRS_PER_GROUP,))
                 for count in counts]
        sizes.append(((1,), (1,)))  # the overflow, one pair after another
        for kind in kinds:
            # profiled per kind: a pass's launches last as long as their slowest pair
            stage = SOLVE_STAGES[kind & 3]
            for colour, (global_size, local_size) in enumerate(sizes):
                self._enqueue(self._colour_kernel("solve_pair_contacts", colour, kind, parity),
                              stage, global_size, local_size)

    @property
    def rebuilds(self) -> int:
        """Substeps so far that rebuilt the grid and the neighbour lists (reads the device)."""
        return int(self._read(self.arguments["rebuild_count"], (1,), np.uint32)[0])

    def _record(self, stage, event):
        self._events.append((stage, event))
        if len(self._events) > 600:
            self.collect_profile()

    def collect_profile(self) -> dict[str, float]:
        """Seconds spent per kernel on the device so far (profile=True only)."""
        for stage, event in self._events:
            event.wait()
            seconds = (event.profile.end - event.profile.start) * 1e-9
            self.stage_seconds[stage] = self.stage_seconds.get(stage, 0.0) + seconds
            # the longest single launch: what a display GPU's watchdog (about 2 s) would see
            self.stage_longest_seconds[stage] = max(self.stage_longest_seconds.get(stage, 0.0), seconds)
        self._events.clear()
        return dict(self.stage_seconds)

    # -- read back --------------------------------------------------------------------------
    def _read(self, buffer, shape, dtype=np.float32):
        out = np.empty(shape, dtype=dtype)
        if out.size:
            self.cl.enqueue_copy(self.queue, out, buffer)
        return out

    def _check_one_launch(self) -> None:
        """Raise PassesInOneLaunchFailed if a barrier of solve_substep_passes gave up since the start
        (read with the bodies, a read the caller waits for anyway)."""
        if not self.one_launch_passes:
            return
        sync = self._read(self.arguments["grid_sync"], (3,), np.int32)
        if sync[2]:
            raise PassesInOneLaunchFailed()

    def body_state(self) -> BodyState:
        self._check_one_launch()
        body_count = self.body_count
        x = self._read(self.arguments["body_position"], (body_count, 4))
        q = self._read(self.arguments["body_orientation"], (body_count, 4))
        v = self._read(self.arguments["body_velocity"], (body_count, 4))
        w = self._read(self.arguments["body_angular_velocity"], (body_count, 4))
        orientation = np.concatenate([q[:, 3:4], q[:, :3]], axis=1).astype(np.float64)
        return BodyState(x[:, :3].astype(np.float64), orientation, v[:, :3].astype(np.float64),
                         w[:, :3].astype(np.float64))

    def body_poses(self) -> tuple[np.ndarray, np.ndarray]:
        """(positions (B,3), orientations (B,4) w,x,y,z): the only per-frame read-back in a bake."""
        self._check_one_launch()
        x = self._read(self.arguments["body_position"], (self.body_count, 4))
        q = self._read(self.arguments["body_orientation"], (self.body_count, 4))
        return x[:, :3].astype(np.float64), np.concatenate([q[:, 3:4], q[:, :3]], axis=1).astype(np.float64)

    def particle_positions(self) -> np.ndarray:
        """World positions of all particles at the start of the last substep."""
        if self.substeps_done == 0:
            return self._initial_particle_positions()
        sorted_position = self._read(self.arguments["sorted_position"], (self.particle_count, 4))
        index = self._read(self.arguments["sorted_particle"], (self.particle_count,), np.int32)
        out = np.empty((self.particle_count, 3))
        out[index] = sorted_position[:, :3]
        return out

    def contact_keys(self) -> set[tuple[int, int]]:
        """(particle, key) of every contact in the last substep, read from the friction history:
        key >= 0 is a partner particle, -2 - g plane g, -2 - planes - t triangle t.

        Only complete while no particle has more than FRICTION_SLOTS contacts; used by tests.
        Between detections (substeps_per_detection > 1) they are the last detection's.
        """
        # the double buffers swap at a detection's last substep: until then the detection's keys
        # are in the buffer it wrote
        swapped = self.substeps_done % self.settings.substeps_per_detection == 0
        history = self.arguments["history_key_in" if swapped else "history_key_out"][self.substep_parity]
        keys = self._read(history, (FRICTION_SLOTS, self.particle_count), np.int32).T
        found = set()
        for i, row in enumerate(keys):
            for key in row:
                if key == -1:
                    break
                found.add((i, int(key)))
        return found

    def contact_pairs(self) -> set[tuple[int, int]]:
        """Particle pairs (i, j) in contact in the last substep (see ``contact_keys``)."""
        return {(i, key) for i, key in self.contact_keys() if key >= 0}
