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

import math
import sys
import time
from dataclasses import dataclass, field, fields, replace

import bpy
import numpy as np

from . import bake, instancers, rigid_body_world
from ..core.device_buffers import estimate_device_memory
from ..core.rotations import pose_matrices
from ..core.settings import (ROLE_DYNAMIC, ROLE_FOLLOW_SELECTION, ROLE_IGNORED, ROLE_STATIC, ConversionSettings,
                             FrameSettings, SimulationSettings)
from .properties import BAKE_MODE_ITEMS, contact_geometry_gone

BAKE_MODES = tuple(identifier for identifier, _label, _description in BAKE_MODE_ITEMS)


class BakeError(Exception):
    """A user-facing reason the bake cannot run (no objects, bad settings, no OpenCL)."""


def manual_stiffness(s) -> bool:
    """Whether the scene's Stiffness Target applies: Stiffness set to Manual, or a target set in a
    file saved before Stiffness existed (its mode was never set), which then keeps its meaning."""
    if s.stiffness_mode == "MANUAL":
        return True
    return not s.is_property_set("stiffness_mode") and s.is_property_set("target_penetration")


def _scene_values(scene) -> dict:
    """The scene's add-on settings (``Scene.prb_settings``) by the names of the core settings' fields
    they fill (the frames and gravity alone where the add-on has none)."""
    values = dict(frame_start=scene.frame_start, frame_end=scene.frame_end, gravity=scene_gravity(scene))
    if rigid_body_world.is_setup(scene):  # its gravity, time scale, cache range and Bullet's combining
        values.update(rigid_body_world.world_values(scene))
    s = getattr(scene, "prb_settings", None)
    if s is None:
        return values
    if not s.use_scene_frame_range:
        values.update(frame_start=s.frame_start, frame_end=s.frame_end)
    values.update(
        frame_step=s.frame_step,
        substeps=s.substeps if s.substeps_mode == "MANUAL" else None,
        radius=s.particle_radius if s.radius_mode == "MANUAL" else None,
        max_particles=s.max_particles,
        target_penetration=s.target_penetration if manual_stiffness(s) else None,
        contact_geometry=s.contact_geometry,
        sleep_speed=s.sleep_speed if s.use_sleep else 0.0,
        sleep_time=s.sleep_time,
        device=s.device if s.device not in ("", "AUTO") else None,
        bake_mode=s.bake_mode,
        cache_folder=s.cache_folder,
    )
    return values


@dataclass
class BakeOptions:
    """What a bake runs with: the core's settings, each of which checks its own values, and how the
    job runs and writes the result."""

    frames: FrameSettings = field(default_factory=FrameSettings)
    conversion: ConversionSettings = field(default_factory=ConversionSettings)
    simulation: SimulationSettings = field(default_factory=SimulationSettings)
    backend: str = "opencl"
    bake_mode: str = BAKE_MODES[0]  # or "INSTANCES" (bake_instances.py)
    cache_folder: str | None = None  # instances: where the point cache goes; None: bake_instances' default
    # simulated seconds per second of the scene's frames (the Rigid Body world's Speed)
    time_scale: float = 1.0

    def __post_init__(self):
        if self.bake_mode not in BAKE_MODES:
            raise BakeError(f"bake mode must be one of {', '.join(BAKE_MODES)}, got {self.bake_mode!r}")
        if not (self.time_scale > 0 and math.isfinite(self.time_scale)):
            raise BakeError(f"the Rigid Body world's Speed (time scale) must be a finite number more than 0, got "
                            f"{self.time_scale:g}")

    @classmethod
    def from_scene(cls, scene, **overrides) -> "BakeOptions":
        """The scene's settings with ``overrides`` (those not None) on top, each given by the name of
        the field it sets (``frame_step``, ``radius``, ``contact_geometry``, ``bake_mode``...). A value
        the core refuses raises BakeError with the core's message."""
        values = _scene_values(scene)
        values.update((name, value) for name, value in overrides.items() if value is not None)
        if values.get("contact_geometry") == "":  # a Contacts choice this version does not have
            raise BakeError(contact_geometry_gone(scene.prb_settings))

        def take(kind):
            names = {f.name for f in fields(kind)}
            return kind(**{name: values.pop(name) for name in list(values) if name in names})

        try:
            settings = dict(frames=take(FrameSettings), conversion=take(ConversionSettings),
                            simulation=take(SimulationSettings))
        except ValueError as exc:
            raise BakeError(str(exc)) from exc
        return cls(**settings, **values)


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

    def summary(self) -> str:
        text = (f"Baked {self.bodies} bodies ({self.particles:,} particles) on {self.device}: "
                f"{self.simulated_seconds:.2f} s simulated in {self.wall_seconds:.1f} s, "
                f"{self.steps_per_second:,.0f} substeps/s")
        if self.skipped:
            text += f"; skipped {len(self.skipped)}: " + ", ".join(f"{n} ({why})" for n, why in self.skipped[:5])
        for warning in self.warnings:
            text += f"; warning: {warning}"
        return text


def scene_gravity(scene) -> tuple:
    return tuple(scene.gravity) if scene.use_gravity else (0.0, 0.0, 0.0)


def frame_rate(scene) -> float:
    return scene.render.fps / scene.render.fps_base


def read_world(scene):
    """The scene's Rigid Body world as the bake's setup (rigid_body_world.read_world), or None where the
    add-on's roles apply; a setup it cannot bake raises BakeError naming the object."""
    try:
        return rigid_body_world.read_world(scene)
    except rigid_body_world.WorldRefused as exc:
        raise BakeError(str(exc)) from exc


def pick_objects(context, selected=None, world=None):
    """(dynamic, static) objects for Simulate & Bake.

    With the scene's Rigid Body world (``world``, read_world): its ACTIVE objects and its PASSIVE ones.
    Else dynamic: objects whose role is Dynamic, plus selected mesh objects whose role is Follow Selection;
    static: objects whose role is Static Collider. Ignored objects never take part.
    """
    if world is not None:
        return list(world.active), list(world.passive)
    scene = context.scene
    if selected is None:
        selected = list(getattr(context, "selected_objects", None) or [])
    objects = list(scene.objects)
    dynamic = [o for o in objects if o.prb.role == ROLE_DYNAMIC]
    seen = set(o.name for o in dynamic)
    for o in selected:
        if o.type == "MESH" and o.prb.role == ROLE_FOLLOW_SELECTION and o.name not in seen:
            dynamic.append(o)
            seen.add(o.name)
    static = [o for o in objects if o.prb.role == ROLE_STATIC and o.name not in seen]
    return dynamic, static


def estimate(context, dynamic, options: BakeOptions | None = None) -> dict:
    """Cheap estimate for the panel: bodies, particles (from bounding boxes), memory in bytes.

    An instancer (instancers.py) counts as its instances, each with its mesh's bounding box."""
    radius = options.conversion.radius if options else None
    counts, volumes = [], []
    per_instancer = {}
    if dynamic and any(instancers.may_instance(o) for o in dynamic):
        per_instancer = instancers.instance_volumes(context.evaluated_depsgraph_get(), dynamic)
    for o in dynamic:
        if o.name in per_instancer:
            for count, volume in per_instancer[o.name]:
                counts.append(count)
                volumes.append(volume)
            continue
        dims = np.asarray(o.dimensions, dtype=np.float64)
        counts.append(1)
        volumes.append(float(np.prod(np.maximum(dims, 1e-9))))
    counts, volumes = np.array(counts, dtype=np.int64), np.array(volumes, dtype=np.float64)
    bodies = int(counts.sum())
    instanced = {name: sum(count for count, _v in entries) for name, entries in per_instancer.items()}
    # a body whose size is NaN or infinite (its transform is: the bake refuses it, transform_problem)
    # counts as a body without particles
    counts, volumes = counts[np.isfinite(volumes)], volumes[np.isfinite(volumes)]
    if not len(volumes):
        return dict(bodies=bodies, particles=0, memory=0, radius=radius, instancers=instanced)
    if radius is None:
        # same spirit as the automatic radius: the smallest body about 3 particles across
        radius = max(volumes.min() ** (1.0 / 3.0) / 6.0, 1e-4)
    particles = int((counts * np.maximum(1.0, volumes / (2 * radius) ** 3)).sum())
    memory = int(estimate_device_memory(particles, bodies, options.simulation.contact_geometry if options else None))
    return dict(bodies=bodies, particles=particles, memory=memory, radius=radius, instancers=instanced)


def transform_problem(objects) -> str | None:
    """The first of ``objects`` taking part (not Ignored) whose transform holds a NaN or infinity, as
    the line that refuses the bake (scene_objects.transform_problem); None when every one is finite."""
    from .scene_objects import transform_problem as problem_of

    for obj in objects:
        if obj.prb.role != ROLE_IGNORED:
            problem = problem_of(obj)
            if problem:
                return problem
    return None


def _refuse_instancers(context, dynamic) -> None:
    """Keyframes need an object per body: instancers bake to instances only (why: instancers.py)."""
    candidates = [o for o in dynamic if instancers.may_instance(o)]
    if not candidates:
        return
    counts = instancers.count_instances(context.evaluated_depsgraph_get(), candidates)
    if counts:
        raise BakeError(_instancers_message(counts))


def _instancers_message(counts: dict) -> str:
    names = ", ".join(f"{name} ({count:,} instances)" for name, count in counts.items())
    return (f"instancers bake to Instances only: {names}. Keyframes need an object per body: set Bake To: "
            "Instances")


def format_bytes(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024.0
    return f"{n:.1f} GB"


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
            refused = [problem for obj in self.dynamic for problem in _constraint_problems(obj)]
            if refused:
                raise BakeError(
                    f"constraints would move baked bodies off their simulated motion: {'; '.join(refused)}. "
                    "Mute or remove them (or bake to Instances, which ignores them)")
            from .bake_instances import HIDDEN_BY

            shown = sorted({o[HIDDEN_BY].name for o in self.dynamic if o.get(HIDDEN_BY) is not None})
            if shown:
                raise BakeError(f"the dynamic objects are shown by the instance bake {', '.join(shown)}: Clear Bake "
                                "first to bake them to keyframes, or bake to Instances again")
            _refuse_instancers(self.context, self.dynamic)
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
                    strict=self.world is not None, kinematic_objects=self.world.animated if self.world else ())
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
                needed = estimate_device_memory(conv.particle_count, conv.model.body_count,
                                                opts.simulation.contact_geometry)
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
                                      substeps_per_frame=frames.substeps, backend=opts.backend)
            except ValueError as exc:
                raise BakeError(str(exc)) from exc
            bodies = conv.model.body_count
            # instances stream each frame to the cache and keep only the latest one (live preview)
            kept = 1 if self.instances is not None else self.frames_total + 1
            self.positions = np.empty((kept, bodies, 3))
            self.orientations = np.empty((kept, bodies, 4))
            if self.instances is not None:
                from .bake_instances import body_sources

                sources, body_source, hide = body_sources(
                    self.objects, links, {b.instancer: b for b in getattr(conv, "instancers", ())})
                self.instances.begin(sources, links, self.frames_total + 1, body_source=body_source, hide=hide)
            elif getattr(conv, "instancers", None):  # check() counted none: the scene changed since
                raise BakeError(_instancers_message({b.instancer: b.count for b in conv.instancers}))
            self._frames = self.sim.frames(self.frames_total)
            self._keep(self._next_frame())
            if self.live:
                self._saved_transforms = {o.name: _transform_values(o) for o in self._objects_shown_live()}
            self._say(f"PRB: {bodies} bodies, {conv.particle_count:,} particles, device {self.device_name}, "
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
            elif _animated_chain(parent):
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
                channels = bake.local_channels(self.objects, world, self._moving_parents(world))
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
            warnings=[note for note in [self.world.constraints_note() if self.world is not None else None] if note])
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


# Keys go on the object's own channels and its constraints act on top of them afterwards. That is
# undone exactly only when the constraint's result is a fixed matrix times the channels' matrix: a Child
# Of using every channel, to a target that does not move (local_channels then writes the keys in the
# space the constraint puts them in). Any other constraint depends on the channels themselves (Copy
# Rotation replaces the rotation, Limit Location clamps it, Track To turns the body), so the baked motion
# would not be the simulated one.
_CHILD_OF_CHANNELS = tuple(f"use_{kind}_{axis}" for kind in ("location", "rotation", "scale") for axis in "xyz")


def _constraint_problems(obj) -> list[str]:
    problems = []
    for con in obj.constraints:
        if con.mute or con.influence == 0.0:
            continue
        what = f"{obj.name}: {con.type.replace('_', ' ').title()} constraint '{con.name}'"
        if con.type != "CHILD_OF":
            problems.append(what)
        elif con.influence != 1.0 or not all(getattr(con, name, True) for name in _CHILD_OF_CHANNELS):
            problems.append(f"{what} (not every channel, or influence below 1)")
        elif con.target is not None and _animated_chain(con.target):
            problems.append(f"{what} (its target moves)")
    return problems


def _animated_chain(obj) -> bool:
    while obj is not None:
        ad = obj.animation_data
        if ad and (ad.action is not None or len(ad.drivers) or len(ad.nla_tracks)):
            return True
        if len(obj.constraints):
            return True
        obj = obj.parent
    return False


def print_log(text: str) -> None:
    print(text, flush=True)
    sys.stdout.flush()
