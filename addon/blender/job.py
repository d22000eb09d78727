"""The bake job: a resumable stepper shared by the operator (modal or blocking) and the CLI.

    job = BakeJob(context, dynamic_objects, static_objects, BakeOptions.from_scene(scene))
    job.start()                  # converts the objects, creates the Simulation (may raise)
    while not job.step(0.1):     # pulls frames for about 0.1 s; True when all frames are in
        ...
    result = job.finish()        # writes all keys in one go; or job.cancel() to leave no trace

Nothing is written to Blender before ``finish()``; ``live=True`` only moves the objects to the
latest simulated frame (viewport preview) and ``finish()``/``cancel()`` put them back first. The
scene's current frame is set to the first bake frame while the job runs and restored at the end.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field, replace

import bpy
import numpy as np

from . import bake, rigid_body_world
from ..core.device_buffers import estimate_device_memory
from ..core.rotations import pose_matrices
from .bake_objects import (animated_chain, constraint_problems, estimate, format_bytes, instancers_message,
                           refuse_instancers, transform_problem)
from .bake_options import BakeError, BakeOptions, frame_rate
from .local_channels import local_channels


@dataclass
class BakeResult:
    bodies: int
    particles: int
    device: str
    frames: int
    simulated_seconds: float
    wall_seconds: float
    steps_per_second: float
    skipped: list = field(default_factory=list)
    keyed_objects: list = field(default_factory=list)
    cache_object: str = ""  # instance bakes: the object that shows the bodies
    warnings: list = field(default_factory=list)  # what the bake left out of the setup, one line each
    constraints: int = 0  # rigid body constraints simulated (the model's joints)
    constraints_broken: int = 0  # of them, broken by the last frame

    def summary(self) -> str:
        text = (f"Baked {self.bodies} bodies ({self.particles:,} particles) on {self.device}: "
                f"{self.simulated_seconds:.2f} s simulated in {self.wall_seconds:.1f} s, "
                f"{self.steps_per_second:,.0f} substeps/s")
        if self.constraints:
            text += f"; {self.constraints_broken:,} of {self.constraints:,} constraints broke"
        if self.skipped:
            text += f"; skipped {len(self.skipped)}: " + ", ".join(f"{n} ({why})" for n, why in self.skipped[:5])
        for warning in self.warnings:
            text += f"; warning: {warning}"
        return text


def _transform_values(obj):
    return (tuple(obj.location), tuple(obj.rotation_euler), tuple(obj.rotation_quaternion),
            tuple(obj.rotation_axis_angle), tuple(obj.scale))


def _set_transform_values(obj, values):
    obj.location, obj.rotation_euler, obj.rotation_quaternion, obj.rotation_axis_angle, obj.scale = values


class BakeJob:
    def __init__(self, context, dynamic_objects, static_objects=(), options: BakeOptions | None = None, *,
                 live: bool = False, log=None, progress=None, world=None):
        self.context = context
        # the scene's Rigid Body world when it is the setup (read_world): the objects' values come from it
        self.world = world
        self.scene = context.scene
        self.dynamic = list(dynamic_objects)
        self.static = list(static_objects)
        self.options = options or BakeOptions.from_scene(self.scene)
        self.live = live
        self.log = log
        self.progress_callback = progress  # called with the job after each simulated frame
        self.checked = None  # what check() found: device, estimate
        self.converted = None
        self.sim = None
        self._frames = None
        self._done = 0
        self._saved_frame = None
        self._saved_transforms = {}
        self.positions = None
        self.orientations = None
        self.objects = []  # dynamic objects in body order
        self.finished = False
        self.started_wall = None
        self.instances = None  # bake_instances.InstanceBake when baking to instances
        # the constraints broken by each frame kept so far (cumulative; a broken one stays broken)
        self.broken_by_frame: list[int] = []

    # ---------------------------------------------------------------------------------------------
    @property
    def frames_total(self) -> int:
        return self.options.frames.frame_count

    @property
    def frames_done(self) -> int:
        return self._done

    @property
    def progress(self) -> float:
        return self._done / self.frames_total if self.frames_total else 1.0

    @property
    def device_name(self) -> str:
        return self.sim.device_name if self.sim else ""

    @property
    def constraint_count(self) -> int:
        """The rigid body constraints simulated (0 before start())."""
        return len(self.converted.joints) if self.converted is not None else 0

    @property
    def constraints_broken(self) -> int:
        """The constraints broken by the latest frame simulated."""
        return self.broken_by_frame[-1] if self.broken_by_frame else 0

    def check(self) -> dict:
        """Refuse what can be refused before converting or simulating: settings, objects, roles, the
        device and its memory (the panel's estimate). Returns the estimate with the chosen device."""
        opts = self.options
        if not self.dynamic:
            if self.world is not None:
                raise BakeError(f"nothing to simulate: the Rigid Body world's collection \"{self.world.collection}\" "
                                "has no ACTIVE objects")
            raise BakeError("nothing to simulate: select mesh objects or set their role to Dynamic Body")
        both = sorted({o.name for o in self.dynamic} & {o.name for o in self.static})
        if both:
            raise BakeError(f"objects both dynamic and static colliders: {', '.join(both)}")
        problem = transform_problem(self.dynamic + self.static)
        if problem:
            raise BakeError(problem)
        if opts.bake_mode == "KEYFRAMES":
            refused = [problem for obj in self.dynamic for problem in constraint_problems(obj)]
            if refused:
                raise BakeError(
                    f"constraints would move baked bodies off their simulated motion: {'; '.join(refused)}. "
                    "Mute or remove them (or bake to Instances, which ignores them)")
            from .instance_cache_object import HIDDEN_BY

            shown = sorted({o[HIDDEN_BY].name for o in self.dynamic if o.get(HIDDEN_BY) is not None})
            if shown:
                raise BakeError(f"the dynamic objects are shown by the instance bake {', '.join(shown)}: Clear Bake "
                                "first to bake them to keyframes, or bake to Instances again")
            refuse_instancers(self.context, self.dynamic)
        device = None
        if opts.backend == "opencl":
            from ..core.device import choose_device

            device = choose_device(opts.simulation.device)
        est = estimate(self.context, self.dynamic, opts)
        if device is not None and est["memory"] > device.global_memory:
            raise BakeError(
                f"about {format_bytes(est['memory'])} of device memory needed for ~{est['particles']:,} particles, "
                f"{device.label} has {format_bytes(device.global_memory)}: use larger particles (Particle Size: "
                f"Manual, a larger radius) or fewer objects")
        self.checked = dict(est, device=device)
        if self.world is not None:
            self._say(f"PRB: {self.world.summary()}")
            note = self.world.constraints_note()
            if note:
                self._say(f"PRB: warning: {note}")
        return self.checked

    def start(self) -> None:
        from .convert import ConversionError, convert_scene
        from ..core.simulation import Simulation

        opts = self.options
        frames = opts.frames
        if self.checked is None:
            self.check()
        device = self.checked["device"]
        self.started_wall = time.perf_counter()
        self._saved_frame = (self.scene.frame_current, self.scene.frame_subframe)
        try:
            if opts.bake_mode == "INSTANCES":  # refuses an unwritable cache folder before simulating
                from .bake_instances import InstanceBake, InstanceBakeError
                try:
                    self.instances = InstanceBake(self.scene, opts.cache_folder, frames.frame_start,
                                                  frames.frame_step)
                except InstanceBakeError as exc:
                    raise BakeError(str(exc)) from exc
                self.instances.show_previous_originals()
            if self.scene.frame_current != frames.frame_start:
                self.scene.frame_set(frames.frame_start)
            try:
                self.converted = convert_scene(
                    self.context, self.dynamic, self.static, radius=opts.conversion.radius,
                    max_particles=opts.conversion.max_particles, frame_start=frames.frame_start,
                    frame_end=frames.frame_end, frame_step=frames.frame_step, gravity=opts.simulation.gravity,
                    settings_of=self.world.settings.__getitem__ if self.world is not None else None,
                    strict=self.world is not None, kinematic_objects=self.world.animated if self.world else (),
                    constraints=self.world.joints if self.world is not None else None)
            except ConversionError as exc:
                raise BakeError(str(exc)) from exc
            conv = self.converted
            if not conv.bodies:
                reasons = "; ".join(f"{n}: {why}" for n, why in conv.skipped) or "no usable objects"
                raise BakeError(f"no object could be turned into a rigid body ({reasons})")
            objects_by_name = {o.name: o for o in self.dynamic}
            links = sorted(conv.bodies, key=lambda link: link.body_index)
            self.objects = [objects_by_name.get(link.object_name) or bpy.data.objects[link.object_name]
                            for link in links]
            self.links = links
            if device is not None:
                joints = conv.model.joints.count if conv.model.joints is not None else 0
                needed = estimate_device_memory(conv.particle_count, conv.model.body_count,
                                                opts.simulation.contact_geometry, joints)
                if needed > device.global_memory:
                    raise BakeError(
                        f"{conv.particle_count:,} particles need about {format_bytes(needed)} of device memory, "
                        f"{device.label} has {format_bytes(device.global_memory)}: use larger particles or "
                        f"fewer objects")
            # the device check() chose (and measured the memory of), not the selector it was chosen by
            settings = opts.simulation if device is None else replace(opts.simulation, device=device.selector)
            try:
                # the world's Speed: each frame simulates time_scale frames' worth of seconds, as in Bullet
                self.sim = Simulation(conv.model, settings,
                                      frame_rate=frame_rate(self.scene) / frames.frame_step / opts.time_scale,
                                      substeps_per_frame=frames.substeps, backend=opts.backend,
                                      joint_enabled_frames=conv.joint_enabled_frames)
            except ValueError as exc:
                raise BakeError(str(exc)) from exc
            bodies = conv.model.body_count
            # instances stream each frame to the cache and keep only the latest one (live preview)
            kept = 1 if self.instances is not None else self.frames_total + 1
            self.positions = np.empty((kept, bodies, 3))
            self.orientations = np.empty((kept, bodies, 4))
            if self.instances is not None:
                from .instance_cache_object import body_sources

                sources, body_source, hide = body_sources(
                    self.objects, links, {b.instancer: b for b in getattr(conv, "instancers", ())})
                self.instances.begin(sources, links, self.frames_total + 1, body_source=body_source, hide=hide)
            elif getattr(conv, "instancers", None):  # check() counted none: the scene changed since
                raise BakeError(instancers_message({b.instancer: b.count for b in conv.instancers}))
            self._frames = self.sim.frames(self.frames_total)
            self._keep(self._next_frame())
            if self.live:
                self._saved_transforms = {o.name: _transform_values(o) for o in self._objects_shown_live()}
            joints = f", {len(conv.joints):,} constraints" if conv.joints else ""
            glued = f", {conv.bond_count:,} glue bonds" if conv.bond_count else ""
            self._say(f"PRB: {bodies} bodies{joints}{glued}, {conv.particle_count:,} particles, device {self.device_name}, "
                      f"{self.sim.substeps_per_frame} substeps per frame, frames {frames.frame_start}-{frames.frame_end}"
                      + (f" step {frames.frame_step}" if frames.frame_step > 1 else ""))
        except BaseException:
            self._cleanup()
            raise

    def step(self, time_budget: float | None = None) -> bool:
        """Pull frames until ``time_budget`` seconds have passed (one frame at least; None: all)."""
        if self._frames is None:
            raise RuntimeError("start() the job first")
        t0 = time.perf_counter()
        try:
            while self._done < self.frames_total:
                frame = self._next_frame()
                self._done = frame.index
                self._keep(frame)
                if self.progress_callback is not None:
                    self.progress_callback(self)
                if time_budget is not None and time.perf_counter() - t0 >= time_budget:
                    break
        except BaseException:
            self._cleanup()
            raise
        if self.live:
            self._show_frame(self._done)
        return self._done >= self.frames_total

    def _next_frame(self):
        from ..core.simulation import NonFiniteState

        try:
            return next(self._frames)
        except NonFiniteState as exc:  # the callers' cleanup leaves the scene as it was
            frames = self.options.frames
            frame = frames.frame_start + exc.frame_index * frames.frame_step
            others = f" and {exc.count - 1:,} more" if exc.count > 1 else ""
            raise BakeError(
                f'The simulation became non-finite at frame {frame} (body "{self.links[exc.body].name}"{others}): '
                "nothing was baked. More substeps per frame (Substeps: Manual) may keep it finite; check that "
                "body's mass and initial velocity too") from exc

    def _keep(self, frame) -> None:
        self.broken_by_frame.append(self.sim.broken_joint_count)
        row = frame.index
        if self.instances is not None:
            self.instances.write(frame.positions, frame.orientations)
            row = 0
        self.positions[row] = frame.positions
        self.orientations[row] = frame.orientations

    def _show_frame(self, index: int) -> None:
        if self.instances is not None:
            index = 0
        world = self.world_matrices(index, index + 1)[0]
        from mathutils import Matrix

        for body, obj in self._objects_shown_live(indices=True):
            obj.matrix_world = Matrix(world[body].tolist())

    def _objects_shown_live(self, indices: bool = False) -> list:
        """The bodies' own objects, which the live view moves: not instancers (their instances are bodies)."""
        shown = [(b, o) for b, (o, link) in enumerate(zip(self.objects, self.links)) if not getattr(link, "instancer", "")]
        return shown if indices else [o for _b, o in shown]

    def world_matrices(self, first: int = 0, stop: int | None = None) -> np.ndarray:
        stop = self.frames_total + 1 if stop is None else stop
        links = self.links
        return pose_matrices(
            self.positions[first:stop], self.orientations[first:stop],
            np.array([link.com_local for link in links]),
            np.array([np.asarray(link.matrix_world, dtype=np.float64) for link in links]))

    def key_frames(self) -> np.ndarray:
        frames = self.options.frames
        return frames.frame_start + frames.frame_step * np.arange(self.frames_total + 1)

    def _moving_parents(self, world) -> dict:
        """(F, 4, 4) parent world matrices over the keyed frames, for objects whose parent moves."""
        index = {o.name: i for i, o in enumerate(self.objects)}
        out = {}
        sample = []
        for obj in self.objects:
            parent = obj.parent
            if parent is None:
                continue
            if parent.name in index:
                out[obj.name] = world[:, index[parent.name]]
            elif animated_chain(parent):
                sample.append(obj)
        if sample:
            frames = self.key_frames()
            mats = {o.name: np.empty((len(frames), 4, 4)) for o in sample}
            scene = self.scene
            for f, frame in enumerate(frames):
                scene.frame_set(int(frame))
                for o in sample:
                    mats[o.name][f] = np.array([list(r) for r in o.parent.matrix_world])
            scene.frame_set(self.options.frames.frame_start)
            out.update(mats)
        return out

    def finish(self) -> BakeResult:
        """Write the keys of all frames (all or nothing) and return the report."""
        if self._done < self.frames_total:
            raise RuntimeError("the simulation has not reached the last frame yet")
        try:
            self._restore_live()
            if self.scene.frame_current != self.options.frames.frame_start:
                self.scene.frame_set(self.options.frames.frame_start)
            self.context.view_layer.update()
            t0 = time.perf_counter()
            if self.instances is not None:
                cache_object = self.instances.finish().name
                self.instances = None
            else:
                cache_object = ""
                world = self.world_matrices()
                channels = local_channels(self.objects, world, self._moving_parents(world))
                bake.write_bake(self.key_frames(), channels)
            if self.world is not None and rigid_body_world.turn_off_after_bake(self.scene):
                self._say("PRB: the Rigid Body world is off now, so that Play shows the bake (Clear Bake, or Turn "
                          "Rigid Body World On, turns it back on)")
            key_seconds = time.perf_counter() - t0
        finally:
            self._cleanup()
        self.finished = True
        sim = self.sim
        result = BakeResult(
            bodies=len(self.objects), particles=self.converted.particle_count, device=sim.device_name,
            frames=self.frames_total + 1, simulated_seconds=sim.simulated_seconds,
            wall_seconds=time.perf_counter() - self.started_wall, steps_per_second=sim.substeps_per_second,
            skipped=list(self.converted.skipped), keyed_objects=[] if cache_object else [o.name for o in self.objects],
            cache_object=cache_object,
            warnings=[note for note in [self.world.constraints_note() if self.world is not None else None] if note],
            constraints=self.constraint_count, constraints_broken=self.constraints_broken)
        self._say(result.summary() + (f" (instances in {cache_object!r}, made in {key_seconds:.2f} s)" if cache_object
                                      else f" (keys written in {key_seconds:.2f} s)"))
        return result

    def cancel(self) -> None:
        """Stop and leave the scene as it was before the job."""
        self._cleanup()

    def run(self) -> BakeResult:
        """Start (if needed), simulate every frame and write the keys."""
        if self._frames is None:
            self.start()
        self.step(None)
        return self.finish()

    # ---------------------------------------------------------------------------------------------
    def _restore_live(self) -> None:
        if not self._saved_transforms:
            return
        for name, values in self._saved_transforms.items():
            obj = bpy.data.objects.get(name)
            if obj is not None:
                _set_transform_values(obj, values)
        self._saved_transforms = {}
        self.context.view_layer.update()  # matrix_world follows the restored values now, not at the next redraw

    def _cleanup(self) -> None:
        self._restore_live()
        if self.instances is not None:  # not finished: no cache file, earlier bake untouched
            self.instances.cancel()
            self.instances = None
        if self._frames is not None:
            self._frames.close()
            self._frames = None
        if self._saved_frame is not None:
            frame, sub = self._saved_frame
            self._saved_frame = None
            if (self.scene.frame_current, self.scene.frame_subframe) != (frame, sub):
                self.scene.frame_set(frame, subframe=sub)

    def _say(self, text: str) -> None:
        if self.log:
            self.log(text)


def print_log(text: str) -> None:
    print(text, flush=True)
    sys.stdout.flush()
