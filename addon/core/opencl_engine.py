"""OpenCL engine: the substep of ``reference.py`` as kernels (kernels/particle_bodies.cl).

All state stays on the device across substeps; ``body_state()`` reads back body poses only (once
per output frame in normal use). Kernels per substep: particle kinematics + bucket count, exclusive
scan (pyopencl's scan), scatter, per-bucket sort (determinism), contact forces, body integration.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from .colliders import DUPLICATE_POINT_TOLERANCE, ColliderMotion
from .device import create_context
from .model import STATIC_BODY, Model, quaternion_to_matrix
from .settings import FRICTION_SLOTS, ROLLING_REGULARIZATION, SimulationSettings, derive_contact_parameters
from .state import BodyState, StateMixin

KERNEL_FILE = Path(__file__).resolve().parents[2] / "kernels" / "particle_bodies.cl"
MIN_BITS_PER_AXIS = 2  # >= 4 cells per axis, so a cell's 27 neighbours never share a bucket
MAX_TOTAL_BITS = 28

# Bytes of device memory per particle and per body (see the buffers allocated below); used for the
# estimate users see before simulating.
BYTES_PER_PARTICLE = 16 * 7 + 4 * 5 + 2 * FRICTION_SLOTS * (4 + 16) + 4 * 2
BYTES_PER_BODY = 16 * 6 + 4 * 5 + 9 * 4 + 8


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
    def __init__(self, model: Model, settings: SimulationSettings | None = None, profile: bool = False):
        import pyopencl as cl
        import pyopencl.scan

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
        material_count = len(model.materials)
        options = [f"-DFRICTION_SLOTS={FRICTION_SLOTS}", f"-DMATERIAL_COUNT={material_count}",
                   f"-DROLLING_REGULARIZATION={ROLLING_REGULARIZATION!r}f",
                   f"-DDUPLICATE_POINT_TOLERANCE={DUPLICATE_POINT_TOLERANCE!r}f",
                   f"-DHAS_TRIANGLES={int(model.triangle_count > 0)}", "-cl-denorms-are-zero"]
        self.program = cl.Program(self.context, KERNEL_FILE.read_text()).build(options=options)
        self.k_kinematics = self.program.particle_kinematics
        self.k_scatter = self.program.scatter_to_buckets
        self.k_sort = self.program.sort_buckets
        self.k_gather = self.program.gather_sorted
        self.k_contacts = self.program.contact_forces
        self.k_integrate = self.program.integrate_bodies
        self.scan = pyopencl.scan.ExclusiveScanKernel(self.context, np.uint32, "a+b", neutral="0")
        self._upload()

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
        import pyopencl.array as cla

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
        self.b_pos = self._buffer(nbytes=16 * P)
        self.b_vel = self._buffer(nbytes=16 * P)
        self.b_force = self._buffer(np.zeros((P, 4), np.float32))
        self.b_torque = self._buffer(np.zeros((P, 4), np.float32))
        self.b_particle_bucket = self._buffer(nbytes=4 * P)
        self.b_sorted = self._buffer(nbytes=4 * P)
        self.b_sorted_pos = self._buffer(nbytes=16 * P)
        self.b_sorted_vel = self._buffer(nbytes=16 * P)
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
        self.b_body_contact_mass = self._buffer(m.body_effective_mass.astype(np.float32))
        self.b_body_inv_inertia = self._buffer(m.body_inv_inertia_local.reshape(-1).astype(np.float32))
        self.b_body_damping = self._buffer(np.ascontiguousarray(damping, dtype=np.float32))

        self.b_plane_point = self._buffer(_vec4(m.plane_point))
        self.b_plane_normal = self._buffer(_vec4(m.plane_normal))
        self.b_plane_material = self._buffer(m.plane_material.astype(np.int32))
        self.b_pair_zeta = self._buffer(pr.damping_ratio.astype(np.float32).ravel())
        self.b_pair_mu = self._buffer(pr.friction.astype(np.float32).ravel())
        self.b_pair_rolling = self._buffer(pr.rolling_friction.astype(np.float32).ravel())

        # triangle colliders
        self.colliders = ColliderMotion(m, m.particle_radius)
        tri = np.zeros((m.triangle_count, 4), dtype=np.int32)
        tri[:, :3] = m.mesh_triangles
        tri[:, 3] = m.triangle_material
        self.b_triangles = self._buffer(tri)
        self.b_collider_vertex = self._buffer(_vec4(self.colliders.vertices))
        self.b_collider_velocity = self._buffer(_vec4(self.colliders.velocities))
        self._upload_triangle_grid()

        # grid: bucket_count has one extra zero at the end so its scan ends with the particle count
        self.cell = 2.0 * m.particle_radius
        positions = self._initial_particle_positions()
        lower = positions.min(axis=0) if P else np.zeros(3)
        upper = positions.max(axis=0) if P else np.zeros(3)
        self.grid_bits = choose_grid_bits(P, lower, upper, self.cell)
        self.bucket_total = 1 << sum(self.grid_bits)
        # the scan allocates temporaries on every call: a memory pool makes that free after the first
        import pyopencl.tools

        self.allocator = pyopencl.tools.MemoryPool(pyopencl.tools.ImmediateAllocator(self.queue))
        self.a_bucket_count = cla.zeros(self.queue, self.bucket_total + 1, np.uint32, allocator=self.allocator)
        self.a_bucket_start = cla.empty(self.queue, self.bucket_total + 1, np.uint32, allocator=self.allocator)
        # kernel arguments that never change, built once instead of on every substep (host time
        # is most of a substep below 10k cubes on a GPU)
        self._constants = (
            np.float32(1.0 / self.cell),
            np.array([*self.grid_bits, 0], dtype=np.int32),
            np.array([pr.stiffness, pr.tangential_stiffness, pr.substep, pr.radius], dtype=np.float32),
            np.array([*pr.gravity, 0.0], dtype=np.float32),
        )
        self.queue.finish()

    def _upload_triangle_grid(self):
        grid = self.colliders.grid
        self.b_large_triangles = self._buffer(grid.large.astype(np.int32))
        self.b_triangle_start = self._buffer(grid.bucket_start.astype(np.uint32))
        self.b_triangle_items = self._buffer(grid.items.astype(np.int32))

    def set_collider_frame(self, frame: int, frame_duration: float):
        """Animated colliders: move them from output frame ``frame`` towards the next one."""
        if self.colliders.set_frame(frame, frame_duration):
            self.cl.enqueue_copy(self.queue, self.b_collider_vertex, _vec4(self.colliders.vertices))
            self.cl.enqueue_copy(self.queue, self.b_collider_velocity, _vec4(self.colliders.velocities))
            self._upload_triangle_grid()

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

    def _enqueue_substep(self):
        q = self.queue
        pr = self.params
        P, B = self.P, self.B
        inv_cell, bits, constants, gravity = self._constants
        record = self._record if self.profile else (lambda stage, event: None)
        record("kinematics", self.k_kinematics(
            q, (_round_up(P),), None, np.int32(P), inv_cell, bits,
            self.b_offset, self.b_particle_body, self.b_body_x, self.b_body_q, self.b_body_v, self.b_body_w,
            self.b_pos, self.b_vel, self.b_particle_bucket, self.a_bucket_count.data))
        before = self.cl.enqueue_marker(q) if self.profile else None
        self.scan(self.a_bucket_count, self.a_bucket_start, queue=q)  # several kernels: time between markers
        record("grid scan", (before, self.cl.enqueue_marker(q)) if self.profile else None)
        record("grid scatter", self.k_scatter(
            q, (_round_up(P),), None, np.int32(P), self.b_particle_bucket, self.a_bucket_start.data,
            self.a_bucket_count.data, self.b_sorted))
        record("grid sort", self.k_sort(q, (_round_up(self.bucket_total),), None, np.int32(self.bucket_total),
                                        self.a_bucket_start.data, self.b_sorted))
        record("grid gather", self.k_gather(q, (_round_up(P),), None, np.int32(P), self.b_sorted, self.b_pos,
                                            self.b_vel, self.b_particle_body, self.b_particle_material,
                                            self.b_sorted_pos, self.b_sorted_vel))
        h_in, h_out = self.history_in, 1 - self.history_in
        record("contacts", self.k_contacts(
            q, (_round_up(P),), (64,), np.int32(P), np.int32(self.model.plane_count), inv_cell, bits, constants,
            self.b_sorted, self.a_bucket_start.data, self.b_sorted_pos, self.b_sorted_vel, self.b_body_x,
            self.b_body_contact_mass, self.b_body_w,
            self.b_plane_point, self.b_plane_normal, self.b_plane_material, self.b_pair_zeta, self.b_pair_mu,
            self.b_pair_rolling,
            np.int32(len(self.colliders.grid.large)), np.float32(1.0 / self.colliders.grid.cell),
            np.uint32(self.colliders.grid.mask), np.float32(self.colliders.tau),
            self.b_triangles, self.b_collider_vertex, self.b_collider_velocity, self.b_large_triangles,
            self.b_triangle_start, self.b_triangle_items,
            self.b_hist_key[h_in], self.b_hist_xi[h_in], self.b_hist_key[h_out], self.b_hist_xi[h_out],
            self.b_force, self.b_torque))
        self.history_in = h_out
        self.colliders.tau += pr.substep
        record("bodies", self.k_integrate(
            q, (_round_up(B),), None, np.int32(B), np.float32(pr.substep), gravity, np.float32(pr.terminal_speed),
            self.b_body_first, self.b_body_count, self.b_body_mass, self.b_body_inv_inertia, self.b_body_damping,
            self.b_force, self.b_torque,
            self.b_body_x, self.b_body_q, self.b_body_P, self.b_body_L, self.b_body_v, self.b_body_w))

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
        """World positions of all particles at the start of the last substep (after kinematics)."""
        if self.substeps_done == 0:
            return self._initial_particle_positions()
        return self._read(self.b_pos, (self.P, 4))[:, :3].astype(np.float64)

    def contact_keys(self) -> set[tuple[int, int]]:
        """(particle, key) of every contact in the last substep, read from the friction history:
        key >= 0 is a partner particle, -2 - g plane g, -2 - planes - t triangle t.

        Only complete while no particle has more than FRICTION_SLOTS contacts; used by tests.
        """
        keys = self._read(self.b_hist_key[self.history_in], (self.P, FRICTION_SLOTS), np.int32)
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
