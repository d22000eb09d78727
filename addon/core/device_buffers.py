"""The engine's device buffers: the table of those that grow with the scene (DEVICE_BUFFERS), the
others (FIXED_SIZE_BUFFERS), the memory estimate users see before simulating
(estimate_device_memory), and their allocation and upload (DeviceBuffers, a part of OpenCLEngine).

A buffer that grows with the particles or bodies is a row of DEVICE_BUFFERS, which sizes it and the
estimate; any other is named in FIXED_SIZE_BUFFERS. Each is put in ``OpenCLEngine.arguments`` under
its kernel parameter name.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .colliders import ColliderMotion
from .contact_geometry import CONTACT_GEOMETRY
from .model import STATIC_BODY, body_extents
from .opencl_program import SCAN_GROUP_ITEMS, SOLVE_FIELDS, ByParity
from .pair_colouring import INITIAL_MAX_PAIRS, MAX_PAIR_COLOURS, PAIR_COLOUR_COUNTS
from .joints import JOINT_IMPULSES, JOINT_ROW_VALUES
from .rotations import quaternion_to_matrix
from .settings import FRICTION_SLOTS
from .voxel_pairs import exposed_faces

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
PARTICLE, BODY, JOINT = "particle", "body", "joint"
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
    joints: int = 0  # constraints between bodies (Model.joints)


@dataclass(frozen=True)
class DeviceBuffer:
    """A buffer of ``item_bytes`` per particle, body or joint, times the neighbour or pair slots where
    ``slots`` names them; ``double``: two of them that swap roles (``name``_in, ``name``_out)."""
    name: str
    per: str  # PARTICLE, BODY or JOINT
    item_bytes: int
    slots: str | None = None  # NEIGHBOUR_SLOTS or PAIR_SLOTS
    solve_only: bool = False  # only the velocity solve uses it
    detect_per_step: bool = False  # only detecting once every few substeps uses it
    double: bool = False
    joints_only: bool = False  # only a model with joints uses it
    # the poses at each substep's start: detecting once every few substeps, or solving joints
    substep_start: bool = False

    def nbytes(self, counts: BufferCounts) -> int:
        """Bytes of one of its buffers at these counts; 0 where it is a placeholder."""
        if (self.solve_only and not counts.solving) or (self.detect_per_step and not counts.detect_per_step):
            return 0
        if (self.joints_only and not counts.joints) or (
                self.substep_start and not (counts.detect_per_step or counts.joints)):
            return 0
        items = {PARTICLE: counts.particles, BODY: counts.bodies, JOINT: counts.joints}[self.per]
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
    DeviceBuffer("start_position", BODY, 16, substep_start=True),
    DeviceBuffer("start_orientation", BODY, 16, substep_start=True),
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
    # the time-of-impact sweep (70_impacts.cl): each body's time of impact, and its pose at the end
    # of the last substep, where its next sweep starts
    DeviceBuffer("body_impact_time", BODY, 4, solve_only=True),
    DeviceBuffer("impact_start_position", BODY, 16, solve_only=True),
    DeviceBuffer("impact_start_orientation", BODY, 16, solve_only=True),
    DeviceBuffer("pair_bid", BODY, 2 * 4, solve_only=True),
    DeviceBuffer("body_colours", BODY, MAX_PAIR_COLOURS // 8, solve_only=True),
    # the joints (65_joints.cl; joint_solve.py): the model (bodies, anchors, frames, row modes, the
    # rows' limits, springs and motors, the breaking impulse), the state bits, the accumulated
    # impulses, the colour order, and per body its joints (first and count in the list, where each joint is under both its bodies)
    # and the wake marks
    DeviceBuffer("joint_body", JOINT, 8, joints_only=True),
    *(DeviceBuffer(name, JOINT, 16, joints_only=True)
      for name in ("joint_anchor_a", "joint_anchor_b", "joint_frame_a", "joint_frame_b")),
    DeviceBuffer("joint_row_mode", JOINT, 4, joints_only=True),
    DeviceBuffer("joint_rows", JOINT, 4 * JOINT_ROW_VALUES, joints_only=True),
    DeviceBuffer("joint_break_impulse", JOINT, 4, joints_only=True),
    DeviceBuffer("joint_state", JOINT, 4, joints_only=True),
    DeviceBuffer("joint_impulse", JOINT, 4 * JOINT_IMPULSES, joints_only=True),
    DeviceBuffer("joint_colour_order", JOINT, 4, joints_only=True),
    DeviceBuffer("body_joint_list", JOINT, 8, joints_only=True),
    DeviceBuffer("body_joint_range", BODY, 8, joints_only=True),
    DeviceBuffer("body_joint_wake", BODY, 4, joints_only=True),
)
DEVICE_BUFFER = {row.name: row for row in DEVICE_BUFFERS}
PAIR_SLOT_BUFFERS = tuple(row.name for row in DEVICE_BUFFERS if row.slots == PAIR_SLOTS)
# the kernels' other buffers, by what fixes their size: the colouring's totals and colour starts,
# the barrier's counter and generation (05_grid_barrier.cl);
# the rebuild flags (a double buffer) and counter; the planes', materials' and triangles' tables;
# the grid's bucket counts, their scan and its groups' offsets (see GRID_BUCKETS_PER_PARTICLE)
FIXED_SIZE_BUFFERS = ("pair_totals", "colour_start", "grid_sync", "rebuild", "next_rebuild", "rebuild_count",
                      "joint_colour_start", "broken_joint_total", "awake_bodies",
                      "pair_restitution", "pair_damping_ratio", "pair_friction", "pair_rolling",
                      "plane_point", "plane_normal", "plane_material",
                      "triangle_vertices", "collider_vertex", "collider_velocity", "triangle_bounds",
                      "large_triangles", "triangle_bucket_start", "triangle_items",
                      "bucket_count", "scan_local", "group_offset")


def _geometries(contact_geometry: str | None):
    return CONTACT_GEOMETRY.values() if contact_geometry is None else [CONTACT_GEOMETRY[contact_geometry]]


def _may_solve(contact_geometry: str | None) -> bool:
    """Whether the velocity solve may run with this contact geometry (None: with any of them)."""
    return any(geometry.solve_passes for geometry in _geometries(contact_geometry))


def _estimate_counts(particle_count: int, body_count: int, contact_geometry: str | None,
                     joint_count: int = 0) -> BufferCounts:
    """The largest the table's buffers get with this geometry (None: any) before anything is known
    of the settings: its neighbour slots, INITIAL_MAX_PAIRS pair slots, the solve where it may run,
    and the detection's poses unless contacts are springs (settings detect those every substep)."""
    geometries = _geometries(contact_geometry)
    return BufferCounts(particles=particle_count, bodies=body_count,
                        neighbour_slots=max(geometry.neighbour_slots for geometry in geometries),
                        pair_slots=INITIAL_MAX_PAIRS, solving=_may_solve(contact_geometry),
                        detect_per_step=any(not geometry.springs for geometry in geometries), joints=joint_count)


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


def estimate_device_memory(particle_count: int, body_count: int, contact_geometry: str | None = None,
                           joint_count: int = 0) -> int:
    """Bytes of OpenCL memory a simulation of this size allocates (grid buckets included; the
    scene's fixed-size tables, FIXED_SIZE_BUFFERS, left out)."""
    return (table_bytes(_estimate_counts(particle_count, body_count, contact_geometry, joint_count))
            + particle_count * GRID_BYTES_PER_PARTICLE)


def solve_bytes_per_body(contact_geometry: str | None = None) -> int:
    """Device bytes per body of the velocity solve's pair lists where the geometry may solve
    (None: the largest), at INITIAL_MAX_PAIRS slots."""
    return table_bytes(_estimate_counts(0, 1, contact_geometry), solve_only=True)


MIN_BITS_PER_AXIS = 2  # >= 4 cells per axis, so a cell's 27 neighbours never share a bucket
MAX_TOTAL_BITS = 28


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


def round_up(n: int, multiple: int = 64) -> int:
    return max(multiple, (n + multiple - 1) // multiple * multiple)


def vec4(a) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64).reshape(-1, 3)
    out = np.zeros((len(a), 4), dtype=np.float32)
    out[:, :3] = a
    return out


def quat_to_device(q_wxyz) -> np.ndarray:
    q = np.asarray(q_wxyz, dtype=np.float64).reshape(-1, 4)
    return np.ascontiguousarray(np.concatenate([q[:, 1:], q[:, :1]], axis=1), dtype=np.float32)


class DeviceBuffers:
    """OpenCLEngine's buffers: allocated at the sizes of DEVICE_BUFFERS' rows and uploaded from the
    model (``_upload``), each in ``arguments`` under its kernel parameter name."""

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
                            detect_per_step=self.settings.substeps_per_detection > 1, joints=self.joint_count)

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
        a["particle_offset"] = table("particle_offset", vec4(m.particle_offset))
        a["particle_body"] = table("particle_body", m.particle_body.astype(np.int32))
        a["particle_material"] = table("particle_material", particle_material)
        a["particle_corner_reach"] = table("particle_corner_reach", m.particle_corner_reach.astype(np.float32))
        a["particle_support_sphere"] = table("particle_support_sphere",
                                             m.particle_support_sphere.astype(np.float32).reshape(-1, 4))
        a["body_lattice"] = table("body_lattice", quat_to_device(m.body_lattice_orientation))
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

        a["body_position"] = table("body_position", vec4(m.body_position))
        a["body_orientation"] = table("body_orientation", quat_to_device(m.body_orientation))
        a["body_momentum"] = table("body_momentum", vec4(momentum))
        a["body_angular_momentum"] = table("body_angular_momentum", vec4(angular_momentum))
        a["body_velocity"] = table("body_velocity", vec4(momentum / m.body_mass[:, None]) if body_count
                                   else np.zeros((0, 4), np.float32))
        a["body_angular_velocity"] = table("body_angular_velocity", vec4(m.body_angular_velocity))
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
        # whether some body was awake in the last detection (1 until one has run)
        a["awake_bodies"] = buffer(np.ones(1, np.int32))
        a["neighbour_count"] = table("neighbour_count", np.int32(0))
        a["neighbour_list"] = table("neighbour_list")
        a["build_position"] = table("build_position", vec4(m.body_position))
        a["build_orientation"] = table("build_orientation", quat_to_device(m.body_orientation))
        # no impact yet (1.0: the whole motion), every sweep's start at the pose the bodies start at
        a["body_impact_time"] = table("body_impact_time", np.float32(1.0).view(np.uint32))
        a["impact_start_position"] = table("impact_start_position", vec4(m.body_position) if self.solving else None)
        a["impact_start_orientation"] = table("impact_start_orientation",
                                              quat_to_device(m.body_orientation) if self.solving else None)

        a["plane_point"] = buffer(vec4(m.plane_point))
        a["plane_normal"] = buffer(vec4(m.plane_normal))
        a["plane_material"] = buffer(m.plane_material.astype(np.int32))
        a["pair_damping_ratio"] = buffer(pr.damping_ratio.astype(np.float32).ravel())
        a["pair_friction"] = buffer(pr.friction.astype(np.float32).ravel())
        a["pair_rolling"] = buffer(pr.rolling_friction.astype(np.float32).ravel())

        # triangle colliders
        self.colliders = ColliderMotion(m, self.params.collider_reach)
        # nothing sleeps while colliders or kinematic bodies move (a moving one would not wake a sleeper)
        self.sleep = self.params.sleep_argument(self.colliders.moving or m.has_kinematic_bodies)
        triangle_vertices = np.zeros((m.triangle_count, 4), dtype=np.int32)
        triangle_vertices[:, :3] = m.mesh_triangles
        triangle_vertices[:, 3] = m.triangle_material
        a["triangle_vertices"] = buffer(triangle_vertices)
        a["collider_vertex"] = buffer(vec4(self.colliders.vertices))
        a["collider_velocity"] = buffer(vec4(self.colliders.velocities))
        self._upload_triangle_grid()

        # grid: the bucket arrays have one extra zero at the end, so the scan ends with the particle
        # count, and are padded to whole scan groups
        self.grid_cell_size = 2.0 * m.particle_radius * (1.0 + self.neighbour_skin)
        positions = self._initial_particle_positions()
        lower = positions.min(axis=0) if particle_count else np.zeros(3)
        upper = positions.max(axis=0) if particle_count else np.zeros(3)
        self.grid_bits = choose_grid_bits(particle_count, lower, upper, self.grid_cell_size)
        self.bucket_total = 1 << sum(self.grid_bits)
        padded = round_up(self.bucket_total + 1, SCAN_GROUP_ITEMS)
        self.scan_group_count = padded // SCAN_GROUP_ITEMS
        a["bucket_count"] = buffer(np.zeros(padded, np.uint32))
        a["scan_local"] = buffer(nbytes=4 * padded)
        a["group_offset"] = buffer(nbytes=4 * self.scan_group_count)
        self.queue.finish()

    def _allocate_pairs(self):
        """The solve's pair lists at max_pairs slots per body (placeholders otherwise)."""
        for name in (*PAIR_SLOT_BUFFERS, "pair_count"):
            self.arguments[name] = self._table_buffer(name)

    def _initial_particle_positions(self) -> np.ndarray:
        m = self.model
        pos = m.particle_offset.copy()
        dyn = m.particle_body != STATIC_BODY
        rot = quaternion_to_matrix(m.body_orientation).reshape(-1, 3, 3)
        pos[dyn] = m.body_position[m.particle_body[dyn]] + np.einsum(
            "pij,pj->pi", rot[m.particle_body[dyn]], m.particle_offset[dyn])
        return pos
