"""OpenCL engine: the substep of ``reference.py`` as kernels (kernels/particle_bodies.cl).

All state stays on the device across substeps; ``body_state()`` reads back body poses only (once
per output frame in normal use). Kernels per substep: bucket of every particle + count, exclusive
scan (two kernels), scatter, per-bucket sort (determinism), gather into bucket order, contact
forces per particle, and per body their sum and the integration. Every kernel's arguments are set
once, so a substep costs eight enqueue calls on the host (pyopencl's argument handling and its
scan object were most of a substep below 10k bodies on a GPU).

The grid and per-particle neighbour lists are rebuilt only when some body has moved by more than
0.45 of the skin (a little under half) since the last rebuild (Verlet lists); the device decides,
through a flag the body kernel sets and the next substep's kernels read, so the host never waits.
In between, the grid kernels return at once and the contact kernel walks each particle's short
list instead of 27 cells.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from .colliders import DUPLICATE_POINT_TOLERANCE, ColliderMotion
from .device import create_context
from .model import STATIC_BODY, Model, body_extents, quaternion_to_matrix
from .settings import (DAMPING_LIMIT, FRICTION_SLOTS, ROLLING_REGULARIZATION, SimulationSettings,
                       derive_contact_parameters)
from .state import BodyState, StateMixin
from .voxel_corners import CORNER_SOFTNESS, FACE_LIKE_COSINE, collider_reach

KERNEL_FILE = Path(__file__).resolve().parents[2] / "kernels" / "particle_bodies.cl"
MIN_BITS_PER_AXIS = 2  # >= 4 cells per axis, so a cell's 27 neighbours never share a bucket
MAX_TOTAL_BITS = 28
SCAN_LOCAL_SIZE = 256  # keep equal to the kernels' SCAN_LOCAL_SIZE and SCAN_PER_ITEM
SCAN_GROUP_ITEMS = SCAN_LOCAL_SIZE * 8
BODY_GROUP_SIZE = 64
# lanes per body in the body kernel: 8 measured best on the H100 for 27-particle cubes (0.054 ms at
# 100k cubes against 0.079 with 32)
MAX_BODY_LANES = 8
# Neighbour lists: the skin, a fraction of the particle diameter, is how far the lists reach beyond
# contact distance (grid cells are a diameter plus the skin wide); rebuilt once any body moved by
# 0.45 of it (a little under half, for float rounding). NEIGHBOUR_SLOTS other-body particles per
# list; a particle with more searches the grid every substep until the next rebuild.
NEIGHBOUR_SKIN = 0.5
NEIGHBOUR_SLOTS = 16

# Bytes of device memory per particle and per body (see the buffers allocated below); used for the
# estimate users see before simulating. The grid's two bucket arrays hold up to two buckets per
# particle.
BYTES_PER_PARTICLE = (16 + 5 * 4 + 16 + 16 * 2 + 1 + 2 * FRICTION_SLOTS * (4 + 16) + 2 * 2 * 4
                      + 4 * (NEIGHBOUR_SLOTS + 1))
BYTES_PER_BODY = 16 * 9 + 4 * 6 + 9 * 4 + 8


def estimate_device_memory(particle_count: int, body_count: int) -> int:
    """Bytes of OpenCL memory a simulation of this size allocates (grid table included)."""
    return particle_count * BYTES_PER_PARTICLE + body_count * BYTES_PER_BODY


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
                 neighbour_skin: float = NEIGHBOUR_SKIN, neighbour_slots: int = NEIGHBOUR_SLOTS):
        """neighbour_skin (fraction of the particle diameter) and neighbour_slots tune the neighbour
        lists; results do not depend on them beyond float rounding (tests and benchmarks vary them)."""
        import pyopencl as cl

        self.cl = cl
        self.model = model
        self.settings = settings or SimulationSettings()
        self.params = derive_contact_parameters(model, self.settings)
        self.context, self.device_info = create_context(self.settings.device)
        # profile: record an event per stage so benchmarks can split the substep (costs a little)
        self.profile = profile
        self.stage_seconds: dict[str, float] = {}
        self._events: list[tuple[str, object]] = []
        properties = cl.command_queue_properties.PROFILING_ENABLE if profile else 0
        self.queue = cl.CommandQueue(self.context, properties=properties)
        self.time = 0.0
        self.substeps_done = 0
        if not (neighbour_skin > 0 and math.isfinite(neighbour_skin)) or neighbour_slots < 1:
            raise ValueError(f"neighbour skin must be > 0 and slots >= 1, got {neighbour_skin}, {neighbour_slots}")
        self.neighbour_skin = float(neighbour_skin)
        self.neighbour_slots = int(neighbour_slots)
        material_count = len(model.materials)
        self.body_lanes = choose_body_lanes(model.body_particle_count, self.device_info.is_gpu)
        # how far colliders reach from a particle's centre: a define, and the triangle lookups' growth
        self.collider_reach = collider_reach(model)
        options = [f"-DFRICTION_SLOTS={FRICTION_SLOTS}", f"-DNEIGHBOUR_SLOTS={self.neighbour_slots}",
                   f"-DMATERIAL_COUNT={material_count}", f"-DDAMPING_LIMIT={DAMPING_LIMIT!r}f",
                   f"-DROLLING_REGULARIZATION={ROLLING_REGULARIZATION!r}f",
                   f"-DDUPLICATE_POINT_TOLERANCE={DUPLICATE_POINT_TOLERANCE!r}f",
                   f"-DCORNER_SOFTNESS={CORNER_SOFTNESS!r}f", f"-DFACE_LIKE_COSINE={FACE_LIKE_COSINE!r}f",
                   f"-DCOLLIDER_REACH={self.collider_reach / model.particle_radius!r}f",
                   f"-DHAS_TRIANGLES={int(model.triangle_count > 0)}",
                   f"-DBODY_LANES={self.body_lanes}", f"-DBODY_GROUP_SIZE={BODY_GROUP_SIZE}",
                   "-cl-denorms-are-zero"]
        self.program = cl.Program(self.context, KERNEL_FILE.read_text()).build(options=options)
        # one instance of each kernel per parity of the substep: the friction history, the "touched"
        # flags and the rebuild flag are double buffers, so arguments never change between substeps
        def pair(name):
            return [cl.Kernel(self.program, name) for _ in range(2)]

        self.k_buckets = pair("particle_buckets")
        self.k_scan_groups = pair("scan_groups")
        self.k_scan_totals = pair("scan_group_totals")
        self.k_scatter = pair("scatter_to_buckets")
        self.k_sort = pair("sort_buckets")
        self.k_gather = pair("gather_sorted")
        self.k_sum_integrate = pair("sum_and_integrate_bodies")
        self.k_contacts = pair("particle_contacts_sorted")
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

    def _upload(self):
        m = self.model
        pr = self.params
        B, P = m.body_count, m.particle_count
        self.B, self.P = B, P
        dynamic = m.particle_body != STATIC_BODY
        particle_material = np.zeros(P, dtype=np.int32)
        particle_material[dynamic] = m.body_material[m.particle_body[dynamic]]
        particle_material[~dynamic] = m.static_particle_material
        # gravity's half kick: momenta live at half substeps (leapfrog), so free fall is exact
        momentum = m.body_velocity * m.body_mass[:, None] - 0.5 * m.body_mass[:, None] * pr.gravity * pr.substep
        rot = quaternion_to_matrix(m.body_orientation).reshape(-1, 3, 3)
        inertia_world = rot @ m.body_inertia_local @ np.swapaxes(rot, 1, 2)
        angular_momentum = np.einsum("bij,bj->bi", inertia_world, m.body_angular_velocity).reshape(-1, 3)
        damping = pr.materials[m.body_material][:, 2:4].astype(np.float32) if B else np.zeros((0, 2), np.float32)

        self.b_offset = self._buffer(_vec4(m.particle_offset))
        self.b_particle_body = self._buffer(m.particle_body.astype(np.int32))
        self.b_particle_material = self._buffer(particle_material)
        self.b_corner_reach = self._buffer(m.particle_corner_reach.astype(np.float32))
        self.b_body_lattice = self._buffer(_quat_to_device(m.body_lattice_orientation))
        self.b_particle_bucket = self._buffer(nbytes=4 * P)
        self.b_sorted = self._buffer(nbytes=4 * P)
        self.b_sorted_pos = self._buffer(nbytes=16 * P)
        self.b_force = self._buffer(nbytes=16 * P)
        self.b_torque = self._buffer(nbytes=16 * P)
        self.b_has_force = self._buffer(nbytes=P)
        # slot-major (slot s of particle i at s * P + i): measured faster than particle-major on the
        # H100 (contacts 0.66 against 0.72 ms at 100k cubes)
        empty_keys = np.full(P * FRICTION_SLOTS, -1, dtype=np.int32)
        self.b_hist_key = [self._buffer(empty_keys), self._buffer(empty_keys)]
        zeros_xi = np.zeros((P * FRICTION_SLOTS, 4), np.float32)
        self.b_hist_xi = [self._buffer(zeros_xi), self._buffer(zeros_xi)]
        self.history_in = 0

        self.b_body_x = self._buffer(_vec4(m.body_position))
        self.b_body_q = self._buffer(_quat_to_device(m.body_orientation))
        self.b_body_P = self._buffer(_vec4(momentum))
        self.b_body_L = self._buffer(_vec4(angular_momentum))
        self.b_body_v = self._buffer(_vec4(momentum / m.body_mass[:, None]) if B else np.zeros((0, 4), np.float32))
        self.b_body_w = self._buffer(_vec4(m.body_angular_velocity))
        self.b_body_first = self._buffer(m.body_first_particle.astype(np.int32))
        self.b_body_count = self._buffer(m.body_particle_count.astype(np.int32))
        self.b_body_mass = self._buffer(m.body_mass.astype(np.float32))
        # (flat-face share, share of the contacts of the previous substep): see contact_mass()
        self.b_body_contact_mass = self._buffer(
            np.repeat(m.body_effective_mass.astype(np.float32)[:, None], 2, axis=1).reshape(-1, 2))
        self.b_body_inv_inertia = self._buffer(m.body_inv_inertia_local.reshape(-1).astype(np.float32))
        self.b_body_damping = self._buffer(np.ascontiguousarray(damping, dtype=np.float32))
        self.b_body_extent = self._buffer(body_extents(m).astype(np.float32))
        self.b_body_quiet = self._buffer(np.zeros(B, np.float32))
        # "an awake body touched this sleeping one": written by the contacts of one substep, read by
        # the next (double buffer, swapped with the friction history)
        self.b_body_touched = [self._buffer(np.zeros(B, np.int32)), self._buffer(np.zeros(B, np.int32))]
        # neighbour lists: rebuild flag per parity (the first substep builds), rebuild counter,
        # per bucket slot the list, and per body the pose the lists were built from
        self.b_rebuild = [self._buffer(np.array([1], np.int32)), self._buffer(np.array([0], np.int32))]
        self.b_rebuild_count = self._buffer(np.zeros(1, np.uint32))
        self.b_neighbour_count = self._buffer(np.zeros(P, np.int32))
        self.b_neighbour = self._buffer(nbytes=4 * P * self.neighbour_slots)
        self.b_build_x = self._buffer(_vec4(m.body_position))
        self.b_build_q = self._buffer(_quat_to_device(m.body_orientation))

        self.b_plane_point = self._buffer(_vec4(m.plane_point))
        self.b_plane_normal = self._buffer(_vec4(m.plane_normal))
        self.b_plane_material = self._buffer(m.plane_material.astype(np.int32))
        self.b_pair_zeta = self._buffer(pr.damping_ratio.astype(np.float32).ravel())
        self.b_pair_mu = self._buffer(pr.friction.astype(np.float32).ravel())
        self.b_pair_rolling = self._buffer(pr.rolling_friction.astype(np.float32).ravel())

        # triangle colliders
        self.colliders = ColliderMotion(m, self.collider_reach)
        tri = np.zeros((m.triangle_count, 4), dtype=np.int32)
        tri[:, :3] = m.mesh_triangles
        tri[:, 3] = m.triangle_material
        self.b_triangles = self._buffer(tri)
        self.b_collider_vertex = self._buffer(_vec4(self.colliders.vertices))
        self.b_collider_velocity = self._buffer(_vec4(self.colliders.velocities))
        self._upload_triangle_grid()

        # grid: the bucket arrays have one extra zero at the end, so the scan ends with the particle
        # count, and are padded to whole scan groups
        self.cell = 2.0 * m.particle_radius * (1.0 + self.neighbour_skin)
        positions = self._initial_particle_positions()
        lower = positions.min(axis=0) if P else np.zeros(3)
        upper = positions.max(axis=0) if P else np.zeros(3)
        self.grid_bits = choose_grid_bits(P, lower, upper, self.cell)
        self.bucket_total = 1 << sum(self.grid_bits)
        padded = _round_up(self.bucket_total + 1, SCAN_GROUP_ITEMS)
        self.scan_group_count = padded // SCAN_GROUP_ITEMS
        self.b_bucket_count = self._buffer(np.zeros(padded, np.uint32))
        self.b_scan_local = self._buffer(nbytes=4 * padded)
        self.b_group_offset = self._buffer(nbytes=4 * self.scan_group_count)
        self.queue.finish()

    def _bind_arguments(self):
        """Set every kernel's arguments once; a substep then only enqueues (and moves the animated
        colliders' clock)."""
        m, pr = self.model, self.params
        P, B = self.P, self.B
        inv_cell = np.float32(1.0 / self.cell)
        bits = np.array([*self.grid_bits, 0], dtype=np.int32)
        # sleeping bodies skip their contacts unless an awake body touches them; a moving collider
        # would not wake them, so not while colliders move
        sleep = np.array([pr.sleep_speed, pr.sleep_time, pr.wake_acceleration, 0.0 if self.colliders.moving else 1.0],
                         dtype=np.float32)
        grid = self.colliders.grid
        gravity = np.array([*pr.gravity, 0.0], dtype=np.float32)
        body_arrays = [self.b_body_mass, self.b_body_inv_inertia, self.b_body_damping, self.b_body_extent,
                       self.b_body_quiet, self.b_body_x, self.b_body_q,
                       self.b_body_P, self.b_body_L, self.b_body_v, self.b_body_w, self.b_build_x, self.b_build_q]
        diameter = 2.0 * pr.radius
        reach2 = np.float32((diameter * (1.0 + self.neighbour_skin)) ** 2)
        rebuild_distance = np.float32(0.45 * diameter * self.neighbour_skin)  # a little under half: rounding
        for h_in in range(2):
            h_out = 1 - h_in
            rebuild = self.b_rebuild[h_in]
            self.k_buckets[h_in].set_args(rebuild, np.int32(P), inv_cell, bits, self.b_offset, self.b_particle_body,
                                          self.b_body_x, self.b_body_q, self.b_particle_bucket, self.b_bucket_count)
            self.k_scan_groups[h_in].set_args(rebuild, self.b_bucket_count, self.b_scan_local, self.b_group_offset)
            self.k_scan_totals[h_in].set_args(rebuild, np.uint32(self.scan_group_count), self.b_group_offset)
            self.k_scatter[h_in].set_args(rebuild, np.int32(P), self.b_particle_bucket, self.b_scan_local,
                                          self.b_group_offset, self.b_bucket_count, self.b_sorted)
            self.k_sort[h_in].set_args(rebuild, np.int32(self.bucket_total), self.b_scan_local, self.b_group_offset,
                                       self.b_sorted)
            self.k_gather[h_in].set_args(
                rebuild, self.b_rebuild[h_out], self.b_rebuild_count, np.int32(P), self.b_sorted, self.b_offset,
                self.b_particle_body, self.b_body_x, self.b_body_q, self.b_sorted_pos)
            self.k_sum_integrate[h_in].set_args(
                np.int32(B), np.float32(pr.substep), gravity, np.float32(pr.terminal_speed), sleep,
                self.b_body_first, self.b_body_count, self.b_force, self.b_torque, self.b_has_force,
                self.b_body_touched[h_in],
                *body_arrays, rebuild, self.b_rebuild[h_out], rebuild_distance, self.b_body_contact_mass)
            contact_arguments = [
                np.int32(m.plane_count), inv_cell, bits,
                np.array([pr.stiffness, pr.tangential_stiffness, pr.substep, pr.radius], dtype=np.float32),
                self.b_scan_local, self.b_group_offset, self.b_sorted_pos, self.b_sorted, self.b_particle_material,
                self.b_body_contact_mass, self.b_plane_point, self.b_plane_normal, self.b_plane_material,
                self.b_pair_zeta, self.b_pair_mu, self.b_pair_rolling,
                np.int32(len(grid.large)), np.float32(1.0 / grid.cell), np.uint32(grid.mask),
                np.float32(self.colliders.tau),
                self.b_triangles, self.b_collider_vertex, self.b_collider_velocity, self.b_large_triangles,
                self.b_triangle_start, self.b_triangle_items, self.b_triangle_bounds,
                np.int32(P), self.b_hist_key[h_in], self.b_hist_xi[h_in], self.b_hist_key[h_out],
                self.b_hist_xi[h_out]]
            self.k_contacts[h_in].set_args(
                np.int32(P), *contact_arguments, self.b_body_x, self.b_force, self.b_torque, sleep,
                self.b_body_touched[h_in], self.b_body_touched[h_out], rebuild, reach2,
                self.b_neighbour_count, self.b_neighbour, self.b_body_v, self.b_body_w, self.b_body_quiet,
                self.b_has_force, self.b_corner_reach, self.b_body_q, self.b_body_lattice)
        self._sizes = {
            "buckets": (_round_up(P),),
            "scan groups": (self.scan_group_count * SCAN_LOCAL_SIZE,),
            "scan totals": (SCAN_LOCAL_SIZE,),
            "sort": (_round_up(self.bucket_total),),
            "gather": (_round_up(P),),
            "bodies": (_round_up(B, BODY_GROUP_SIZE // self.body_lanes) * self.body_lanes,),
        }

    def _upload_triangle_grid(self):
        grid = self.colliders.grid
        self.b_triangle_bounds = self._buffer(self.colliders.bounds)
        self.b_large_triangles = self._buffer(grid.large.astype(np.int32))
        self.b_triangle_start = self._buffer(grid.bucket_start.astype(np.uint32))
        self.b_triangle_items = self._buffer(grid.items.astype(np.int32))

    def set_collider_frame(self, frame: int, frame_duration: float):
        """Animated colliders: move them from output frame ``frame`` towards the next one."""
        if self.colliders.set_frame(frame, frame_duration):
            self.cl.enqueue_copy(self.queue, self.b_collider_vertex, _vec4(self.colliders.vertices))
            self.cl.enqueue_copy(self.queue, self.b_collider_velocity, _vec4(self.colliders.velocities))
            self._upload_triangle_grid()
            self._bind_arguments()

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
        if self.B == 0:
            self.time += count * self.params.substep
            self.substeps_done += count
            return
        for _ in range(count):
            self._enqueue_substep()
        self.time += count * self.params.substep
        self.substeps_done += count

    # index of the collider clock among the contact kernels' arguments
    _COLLIDER_TAU_ARG = 20

    def _enqueue_substep(self):
        cl, q = self.cl, self.queue
        sizes = self._sizes
        record = self._record if self.profile else (lambda stage, event: None)
        h = self.history_in
        record("buckets", cl.enqueue_nd_range_kernel(q, self.k_buckets[h], sizes["buckets"], None))
        before = cl.enqueue_marker(q) if self.profile else None
        cl.enqueue_nd_range_kernel(q, self.k_scan_groups[h], sizes["scan groups"], (SCAN_LOCAL_SIZE,))
        cl.enqueue_nd_range_kernel(q, self.k_scan_totals[h], sizes["scan totals"], (SCAN_LOCAL_SIZE,))
        record("scan", (before, cl.enqueue_marker(q)) if self.profile else None)
        record("scatter", cl.enqueue_nd_range_kernel(q, self.k_scatter[h], sizes["buckets"], None))
        record("sort", cl.enqueue_nd_range_kernel(q, self.k_sort[h], sizes["sort"], None))
        record("gather", cl.enqueue_nd_range_kernel(q, self.k_gather[h], sizes["gather"], None))
        kernel = self.k_contacts[h]
        if self.model.triangle_count:
            kernel.set_arg(self._COLLIDER_TAU_ARG, np.float32(self.colliders.tau))
        # 64 work-items: 32 and 64 measured best on the H100 (0.55 ms at 100k cubes; 256: 0.68 ms)
        record("contacts", cl.enqueue_nd_range_kernel(q, kernel, sizes["gather"], (64,)))
        record("bodies", cl.enqueue_nd_range_kernel(q, self.k_sum_integrate[h], sizes["bodies"], (BODY_GROUP_SIZE,)))
        self.history_in = 1 - self.history_in
        self.colliders.tau += self.params.substep

    @property
    def rebuilds(self) -> int:
        """Substeps so far that rebuilt the grid and the neighbour lists (reads the device)."""
        return int(self._read(self.b_rebuild_count, (1,), np.uint32)[0])

    def _record(self, stage, event):
        self._events.append((stage, event))
        if len(self._events) > 600:
            self.collect_profile()

    def collect_profile(self) -> dict[str, float]:
        """Seconds spent per stage on the device so far (profile=True only)."""
        for stage, event in self._events:
            if isinstance(event, tuple):
                event[1].wait()
                seconds = (event[1].profile.end - event[0].profile.end) * 1e-9
            else:
                event.wait()
                seconds = (event.profile.end - event.profile.start) * 1e-9
            self.stage_seconds[stage] = self.stage_seconds.get(stage, 0.0) + seconds
        self._events.clear()
        return dict(self.stage_seconds)

    # -- read back --------------------------------------------------------------------------
    def _read(self, buffer, shape, dtype=np.float32):
        out = np.empty(shape, dtype=dtype)
        if out.size:
            self.cl.enqueue_copy(self.queue, out, buffer)
        return out

    def body_state(self) -> BodyState:
        B = self.B
        x = self._read(self.b_body_x, (B, 4))
        q = self._read(self.b_body_q, (B, 4))
        v = self._read(self.b_body_v, (B, 4))
        w = self._read(self.b_body_w, (B, 4))
        orientation = np.concatenate([q[:, 3:4], q[:, :3]], axis=1).astype(np.float64)
        return BodyState(x[:, :3].astype(np.float64), orientation, v[:, :3].astype(np.float64),
                         w[:, :3].astype(np.float64))

    def body_poses(self) -> tuple[np.ndarray, np.ndarray]:
        """(positions (B,3), orientations (B,4) w,x,y,z): the only per-frame read-back in a bake."""
        B = self.B
        x = self._read(self.b_body_x, (B, 4))
        q = self._read(self.b_body_q, (B, 4))
        return x[:, :3].astype(np.float64), np.concatenate([q[:, 3:4], q[:, :3]], axis=1).astype(np.float64)

    def particle_positions(self) -> np.ndarray:
        """World positions of all particles at the start of the last substep."""
        if self.substeps_done == 0:
            return self._initial_particle_positions()
        sorted_position = self._read(self.b_sorted_pos, (self.P, 4))
        index = self._read(self.b_sorted, (self.P,), np.int32)
        out = np.empty((self.P, 3))
        out[index] = sorted_position[:, :3]
        return out

    def contact_keys(self) -> set[tuple[int, int]]:
        """(particle, key) of every contact in the last substep, read from the friction history:
        key >= 0 is a partner particle, -2 - g plane g, -2 - planes - t triangle t.

        Only complete while no particle has more than FRICTION_SLOTS contacts; used by tests.
        """
        keys = self._read(self.b_hist_key[self.history_in], (FRICTION_SLOTS, self.P), np.int32).T
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
