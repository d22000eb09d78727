"""OpenCL engine: the substep of ``reference.py`` as kernels, one file per stage in kernels/, built
as one program (opencl_program.py); its buffers are device_buffers.py's, the velocity solve's
launches solve_launches.py's.

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

Adding a stage: a kernels/NN_name.cl file (its number places it), a Stage entry in STAGES naming its
kernels, each new buffer or value in ``arguments`` under its parameter name (``_upload`` or
``_bind_arguments``; a buffer that grows with the particles or bodies as a row of ``DEVICE_BUFFERS``,
which sizes it and the memory estimate, any other in ``FIXED_SIZE_BUFFERS``), each new define a row
of ``kernel_defines``, and the kernel's work sizes in ``_work_sizes``.
"""
from __future__ import annotations

import math

import numpy as np

from .device import create_context
from .device_buffers import DeviceBuffers, quat_to_device, round_up, vec4
from .joint_solve import JointLaunches
from .kinematic import kinematic_step
from .model import Model
from .rotations import quaternion_to_matrix
from .opencl_program import (BODY_GROUP_SIZE, IMPACT_KERNELS, LAUNCH_ORDER, SCAN_LOCAL_SIZE, SOLVE_KERNELS, ByParity,
                             build_options,
                             build_program, choose_body_lanes, kernel_defines)
from .settings import FRICTION_SLOTS, WAKE_PASSES, SimulationSettings, SolverParameters, solver_parameters
from .solve_launches import SolveLaunches, one_launch_passes
from .state import BodyState, StateMixin

# Neighbour lists: the skin, a fraction of the particle diameter, is how far the lists reach beyond
# contact distance (grid cells are a diameter plus the skin wide); rebuilt once any body moved by a
# fraction of it. A list holds a number of other-body particles (slots); a particle with more
# searches the grid every substep until the next rebuild. Each contact geometry has its own
# (contact_geometry.ContactGeometry.neighbour_skin, neighbour_slots, rebuild_fraction).


class OpenCLEngine(DeviceBuffers, SolveLaunches, JointLaunches, StateMixin):
    def __init__(self, model: Model, parameters: SolverParameters | SimulationSettings | None = None,
                 profile: bool = False, neighbour_skin: float | None = None, neighbour_slots: int | None = None):
        """parameters: the solver's (Simulation's), or settings to derive them from (solver_parameters).
        neighbour_skin (fraction of the particle diameter) and neighbour_slots tune the neighbour
        lists; results do not depend on them beyond float rounding (tests and benchmarks vary them).
        None: the contact geometry's (contact_geometry.ContactGeometry)."""
        import pyopencl as cl

        self.cl = cl
        self.model = model
        self.params = solver_parameters(model, parameters)
        self.settings = self.params.settings
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
        self.kinematic = np.zeros(model.body_count, dtype=bool)  # moved by their paths now (set_body_frame)
        geometry = self.params.geometry
        self.voxel_contacts = geometry.voxel_pairs
        # the velocity solve over the contacts' records (kernels 60-62): Rigid Voxels only
        self.solve_passes = self.settings.solve_passes
        self.solving = self.params.solving
        if neighbour_skin is None:
            neighbour_skin = geometry.neighbour_skin
        if neighbour_slots is None:
            neighbour_slots = geometry.neighbour_slots
        if not (neighbour_skin > 0 and math.isfinite(neighbour_skin)) or neighbour_slots < 1:
            raise ValueError(f"neighbour skin must be > 0 and slots >= 1, got {neighbour_skin}, {neighbour_slots}")
        self.rebuild_fraction = geometry.rebuild_fraction
        if self.rebuild_fraction is None:  # Rigid Voxels: from their pair reach and this skin
            # every pair within VOXEL_PAIR_REACH listed: d (1 + skin (1 - 2 fraction)) >= reach, with 10 % to spare
            reach = self.params.voxel_pair_reach
            self.rebuild_fraction = 0.45 * (1.0 - (reach / 2.0 - 1.0) / neighbour_skin)
            if self.rebuild_fraction <= 0.0:
                raise ValueError(f"voxel contacts need a neighbour skin over {reach / 2 - 1:.3f}, "
                                 f"got {neighbour_skin}")
        self.neighbour_skin = float(neighbour_skin)
        self.neighbour_slots = int(neighbour_slots)
        self.body_lanes = choose_body_lanes(model.body_particle_count, self.device_info.is_gpu)
        self.kernel_defines = kernel_defines(model, self.params, self.neighbour_slots, self.body_lanes,
                                             self.device_info)
        self.build_options = tuple(build_options(self.kernel_defines))
        self.program, self.kernel_parameters = build_program(self.context, list(self.build_options))
        # one instance of each kernel per parity of the substep, so that the double buffers'
        # arguments never change between substeps
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
            self._size_substep_passes()
        # every kernel argument by its parameter name: a buffer, a value, or a ByParity pair of them
        self.arguments: dict[str, object] = {}
        self.substep_parity = 0
        # a world whose bodies all sleep is not stepped (_world_asleep); tests turn it off to compare
        self.skip_still_world = True
        self.skipped_substeps = 0
        self._woken_by_host = False
        self._awake_read = None  # (event, flag): the awake flag the last call's substeps left
        self._upload()
        self._upload_joints()
        self._bind_arguments()

    @property
    def device_name(self) -> str:
        return self.device_info.label

    # -- arguments --------------------------------------------------------------------------
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
            solve_constants=np.array([pr.solve_slop, self.settings.solve_push_speed, pr.solve_bias_rate,
                                      pr.solve_mass_scale], dtype=np.float32),
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
        particles = (round_up(particle_count),)
        scan_group = (SCAN_LOCAL_SIZE,)
        # (global size, local size) of each kernel
        self._work_sizes = {
            "assign_buckets": (particles, None),
            "scan_bucket_groups": ((self.scan_group_count * SCAN_LOCAL_SIZE,), scan_group),
            "scan_group_totals": (scan_group, scan_group),
            "scatter_to_buckets": (particles, None),
            "sort_buckets": ((round_up(self.bucket_total),), None),
            "gather_particles": (particles, None),
            # 64 work-items: 32 and 64 measured best on the H100 (256: slower)
            "sweep_fast_particles": (particles, None),
            "stop_at_impacts": ((round_up(body_count),), None),
            "compute_contacts": (particles, (64,)),
            "integrate_bodies": ((round_up(body_count, BODY_GROUP_SIZE // self.body_lanes) * self.body_lanes,),
                                 (BODY_GROUP_SIZE,)),
            "list_solve_pairs": ((round_up(body_count),), None),
            "spread_island_quiet": ((round_up(body_count),), None),
            "settle_islands": ((round_up(body_count),), None),
            **self._joint_work_sizes(),
        }
        # what a substep enqueues, in order: (kernel's two instances, global size, local size, name);
        # the solve's launches follow them (_enqueue_pair_solve)
        order = [name for name in LAUNCH_ORDER if name not in SOLVE_KERNELS and name not in IMPACT_KERNELS]
        self._launches = [(self._kernels[name], *self._work_sizes[name], name) for name in order]
        # every substep's last launches when solving (70_impacts.cl)
        self._impact_launches = ([(self._kernels[name], *self._work_sizes[name], name) for name in IMPACT_KERNELS]
                                 if self.solving else [])
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
            self.cl.enqueue_copy(self.queue, self.arguments["collider_vertex"], vec4(self.colliders.vertices))
            self.cl.enqueue_copy(self.queue, self.arguments["collider_velocity"], vec4(self.colliders.velocities))
            self._upload_triangle_grid()
            self._bind(self._TRIANGLE_GRID_ARGUMENTS)

    def set_body_frame(self, frame: int, frame_duration: float):
        """Kinematic bodies (core.kinematic), as ReferenceEngine.set_body_frame: a moved body gets its
        path's pose and velocities and an infinite mass and zero inverse inertia, which 50_bodies.cl
        reads as "move it along its velocities" and the solve (62_pair_solve.cl) as a side that holds;
        a released one gets its mass, inertia and momenta back from the velocities it last moved at."""
        if self.model.kinematic is None:
            return
        step = kinematic_step(self.model.kinematic, self.kinematic, frame, frame_duration)
        if step is None:
            return
        m, cl, queue, a = self.model, self.cl, self.queue, self.arguments

        def write(name, body, row):
            row = np.ascontiguousarray(row, dtype=np.float32).reshape(-1)
            cl.enqueue_copy(queue, a[name], row, dst_offset=int(body) * row.nbytes)

        def read(name, body, width):
            row = np.empty(width, dtype=np.float32)
            cl.enqueue_copy(queue, row, a[name], src_offset=int(body) * row.nbytes)
            return row

        for b in step.released:
            velocity = read("body_velocity", b, 4)[:3].astype(np.float64)
            omega = read("body_angular_velocity", b, 4)[:3].astype(np.float64)
            q = read("body_orientation", b, 4).astype(np.float64)
            rot = quaternion_to_matrix(np.concatenate([q[3:], q[:3]]))
            # momenta at the half substep, as for an initial velocity (DeviceBuffers._upload)
            mass = m.body_mass[b]
            write("body_momentum", b, vec4((velocity - 0.5 * self.params.gravity * self.params.substep) * mass))
            write("body_angular_momentum", b, vec4(rot @ m.body_inertia_local[b] @ rot.T @ omega))
            write("body_mass", b, [mass])
            write("body_inv_inertia", b, m.body_inv_inertia_local[b])
            self.kinematic[b] = False
        for k, b in enumerate(step.moved):
            if not self.kinematic[b]:
                write("body_mass", b, [np.inf])
                write("body_inv_inertia", b, np.zeros(9))
                self.kinematic[b] = True
            write("body_position", b, vec4(step.position[k]))
            write("body_orientation", b, quat_to_device(step.orientation[k]))
            write("body_velocity", b, vec4(step.velocity[k]))
            write("body_angular_velocity", b, vec4(step.angular_velocity[k]))
            write("body_momentum", b, vec4(step.velocity[k] * m.body_mass[b]))

    # -- stepping ---------------------------------------------------------------------------
    def step(self, count: int = 1):
        if self.body_count == 0:
            self.time += count * self.params.substep
            self.substeps_done += count
            return
        if self._world_asleep():
            self._skip_substeps(count)
            return
        self._woken_by_host = False
        for _ in range(count):
            self._enqueue_substep()
            self.substeps_done += 1
        self.time += count * self.params.substep
        if self._may_skip:
            # read as the device gets there: the next call takes it if it has arrived by then
            flag = np.ones(1, np.int32)
            self._awake_read = (self.cl.enqueue_copy(self.queue, flag, self.arguments["awake_bodies"],
                                                     is_blocking=False), flag)

    @property
    def _may_skip(self) -> bool:
        """Rigid Voxels with sleeping on: no collider or kinematic body moves (they turn sleeping off)."""
        return self.solving and self.sleep[0] > 0.0 and self.skip_still_world

    def _world_asleep(self) -> bool:
        """Whether every body slept through the last detection that ran, and the host woke none since
        (set_joints_enabled): its substeps changed nothing (a sleeper holds, computes no contacts,
        lists no pairs; every friction history was carried over), and neither would the next,
        until something wakes a body, which nothing in the scene can. Box2D's sleeping islands cost
        nothing either. The flag is the one the last call's substeps left, read without waiting: in
        a bake the frame's read of the poses has waited for it; where it has not arrived yet the
        substeps run (the same result either way)."""
        if not self._may_skip or self._woken_by_host or self._awake_read is None:
            return False
        event, flag = self._awake_read
        if event.command_execution_status != self.cl.command_execution_status.COMPLETE:
            return False
        return int(flag[0]) == 0

    def _skip_substeps(self, count: int):
        """``count`` substeps of a world asleep: the clocks and the double buffers' parity as if they
        had run (the buffers of each pair hold the same, carried over by the last detection)."""
        every = self.settings.substeps_per_detection
        for _ in range(count):
            if self.substeps_done % every == every - 1:
                self.substep_parity = 1 - self.substep_parity
            self.colliders.tau += self.params.substep
            self.substeps_done += 1
        self.skipped_substeps += count
        self.time += count * self.params.substep

    def _enqueue_substep(self):
        if self.model.triangle_count:
            self._set_argument("collider_tau", np.float32(self.colliders.tau))
        enqueue, queue, parity = self.cl.enqueue_nd_range_kernel, self.queue, self.substep_parity
        every = self.settings.substeps_per_detection
        phase = self.substeps_done % every
        detecting = phase == 0
        launches = self._launches
        if detecting:
            if every > 1:
                a = self.arguments
                self.cl.enqueue_copy(queue, a["detect_position"], a["body_position"])
                self.cl.enqueue_copy(queue, a["detect_orientation"], a["body_orientation"])
        elif every > 1:
            launches = self._integrate_launches
        if self.profile:
            for kernels, global_size, local_size, name in launches:
                self._record(name, enqueue(queue, kernels[parity], global_size, local_size))
        else:
            for kernels, global_size, local_size, _ in launches:
                enqueue(queue, kernels[parity], global_size, local_size)
        if self.solving:
            self._enqueue_pair_solve(parity, detecting, phase == every - 1)
            # fast bodies put back at their impacts before anything reads the substep's poses
            for kernels, global_size, local_size, name in self._impact_launches:
                self._enqueue(kernels[parity], name, global_size, local_size)
        # the double buffers (friction history, touched and rebuild flags) swap once per detection
        if phase == every - 1:
            self.substep_parity = 1 - parity
        self.colliders.tau += self.params.substep

    def _enqueue(self, kernel, name, global_size, local_size):
        event = self.cl.enqueue_nd_range_kernel(self.queue, kernel, global_size, local_size)
        if self.profile:
            self._record(name, event)

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