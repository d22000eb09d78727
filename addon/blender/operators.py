"""Operators: Simulate & Bake (modal with live viewport, or blocking/headless), Clear Bake, Refresh Devices."""
from __future__ import annotations

import traceback

import bpy
from bpy.props import EnumProperty

from . import bake, bake_instances, rigid_body_world
from .bake_objects import pick_objects
from .bake_options import BakeError, BakeOptions, read_world
from .clear_bake import clear_bakes
from .job import BakeJob, print_log
from .progress import ProgressPrinter

BACKEND_ITEMS = (
    ("opencl", "OpenCL", "The OpenCL engine (GPU or CPU device)"),
    ("reference", "NumPy Reference", "Slow plain NumPy engine, for checking results on small scenes"),
)
TIMER_INTERVAL = 0.01
STEP_BUDGET = 0.08  # seconds of simulation per timer tick: keeps the UI responsive


def user_message(exc: BaseException) -> tuple[str, bool]:
    """(message, expected): expected errors are reported without a traceback."""
    from ..core.device import OpenCLUnavailable

    if isinstance(exc, (BakeError, OpenCLUnavailable, ValueError)):
        return str(exc), True
    if isinstance(exc, MemoryError):
        return "out of memory: use fewer or larger particles (Particle Size: Manual, larger radius)", True
    return f"{type(exc).__name__}: {exc}", False


def _report_failure(op, exc) -> None:
    message, expected = user_message(exc)
    if not expected:
        traceback.print_exc()
    if bpy.app.background:
        print(f"PRB: error: {message}", flush=True)
    op.report({"ERROR"}, f"Simulate & Bake failed: {message}")


class PRB_OT_simulate_bake(bpy.types.Operator):
    """Simulate the selected objects (and those with a role) as particle rigid bodies and bake keyframes"""

    bl_idname = "prb.simulate_bake"
    bl_label = "Simulate & Bake"
    bl_options = {"REGISTER", "UNDO"}

    backend: EnumProperty(name="Engine", items=BACKEND_ITEMS, default="opencl", options={"SKIP_SAVE"})

    _job = None
    _timer = None

    @classmethod
    def poll(cls, context):
        return context.scene is not None and context.mode == "OBJECT"

    def _make_job(self, context, live: bool) -> BakeJob:
        world = read_world(context.scene)
        dynamic, static = pick_objects(context, world=world)
        options = BakeOptions.from_scene(context.scene, backend=self.backend)
        headless = bpy.app.background
        return BakeJob(context, dynamic, static, options, live=live, log=print_log if headless else None,
                       progress=ProgressPrinter() if headless else None, world=world)

    def _finish_report(self, result) -> None:
        self.report({"WARNING"} if result.warnings else {"INFO"}, result.summary())

    def execute(self, context):
        wm = context.window_manager
        job = None
        try:
            job = self._make_job(context, live=False)
            job.start()
            wm.progress_begin(0, max(job.frames_total, 1))
            try:
                while not job.step(0.25):
                    wm.progress_update(job.frames_done)
            finally:
                wm.progress_end()
            result = job.finish()
        except BaseException as exc:
            if job is not None:
                job.cancel()
            if isinstance(exc, KeyboardInterrupt):
                raise
            _report_failure(self, exc)
            return {"CANCELLED"}
        self._finish_report(result)
        return {"FINISHED"}

    def invoke(self, context, event):
        if bpy.app.background or context.window is None:
            return self.execute(context)
        try:
            self._job = self._make_job(context, live=True)
            self._job.start()
        except Exception as exc:
            if self._job is not None:
                self._job.cancel()
            self._job = None
            _report_failure(self, exc)
            return {"CANCELLED"}
        wm = context.window_manager
        wm.progress_begin(0, max(self._job.frames_total, 1))
        self._timer = wm.event_timer_add(TIMER_INTERVAL, window=context.window)
        wm.modal_handler_add(self)
        self._status(context)
        return {"RUNNING_MODAL"}

    def _status(self, context, text=None) -> None:
        job = self._job
        if text is None and job is not None:
            frames = job.options.frames
            frame = frames.frame_start + job.frames_done * frames.frame_step
            broken = (f", {job.constraints_broken:,} of {job.constraint_count:,} constraints broken"
                      if job.constraint_count else "")
            text = (f"Particle Rigid Bodies: frame {frame} ({job.frames_done}/{job.frames_total}, "
                    f"{100 * job.progress:.0f}%){broken} on {job.device_name} - Esc to cancel")
        if context.workspace is not None:
            context.workspace.status_text_set(text)
        if context.area is not None:
            context.area.header_text_set(text)

    def _end(self, context) -> None:
        wm = context.window_manager
        if self._timer is not None:
            wm.event_timer_remove(self._timer)
            self._timer = None
        wm.progress_end()
        self._job = None  # first: with no job, _status(None) clears the texts instead of redrawing progress
        self._status(context, None)

    def modal(self, context, event):
        job = self._job
        if job is None:
            return {"CANCELLED"}
        if event.type in {"ESC", "RIGHTMOUSE"} and event.value == "PRESS":
            job.cancel()
            self._end(context)
            self.report({"WARNING"}, "Simulate & Bake cancelled: nothing was baked")
            return {"CANCELLED"}
        if event.type != "TIMER":
            return {"PASS_THROUGH"}
        try:
            done = job.step(STEP_BUDGET)
            context.window_manager.progress_update(job.frames_done)
            self._status(context)
            if not done:
                for area in context.screen.areas if context.screen else ():
                    if area.type == "VIEW_3D":
                        area.tag_redraw()
                return {"RUNNING_MODAL"}
            result = job.finish()
        except Exception as exc:
            job.cancel()
            self._end(context)
            _report_failure(self, exc)
            return {"CANCELLED"}
        self._end(context)
        self._finish_report(result)
        return {"FINISHED"}

    def cancel(self, context):  # Blender calls this when the operator is stopped from outside (file load, quit)
        if self._job is not None:
            self._job.cancel()
            self._end(context)


def baked_objects(context, only_selected: bool):
    objects = context.selected_objects if only_selected else context.scene.objects
    return [o for o in objects if bake.has_bake(o)]


class PRB_OT_clear_bake(bpy.types.Operator):
    """Remove the baked keys of the selected objects (all baked objects when none is selected) and restore their previous animation"""

    bl_idname = "prb.clear_bake"
    bl_label = "Clear Bake"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        return context.scene is not None

    def execute(self, context):
        objects = baked_objects(context, only_selected=True)
        caches = bake_instances.caches_to_clear(context, selected_only=True)
        if not objects and not caches:
            objects = baked_objects(context, only_selected=False)
            caches = bake_instances.caches_to_clear(context, selected_only=False)
        if not objects and not caches:
            self.report({"INFO"}, "No baked objects")
            return {"CANCELLED"}
        cleared = clear_bakes(objects) if objects else 0
        cleared += sum(bake_instances.clear_instances(cache) for cache in caches)
        text = f"Cleared the bake of {cleared} object{'s' if cleared != 1 else ''}"
        # the last bake gone: Bullet may simulate the world's bodies again
        if not baked_objects(context, only_selected=False) and not bake_instances.caches_to_clear(
                context, selected_only=False) and rigid_body_world.restore_world(context.scene):
            text += "; the Rigid Body world is on again"
        self.report({"INFO"}, text)
        return {"FINISHED"}


class PRB_OT_restore_rigid_body_world(bpy.types.Operator):
    """Turn the Rigid Body world back on (a bake turned it off so that Play shows the baked keys; with it on, Blender simulates the bodies again over them)"""

    bl_idname = "prb.restore_rigid_body_world"
    bl_label = "Turn Rigid Body World On"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        return context.scene is not None and bool(context.scene.get(rigid_body_world.WORLD_OFF_BY_BAKE))

    def execute(self, context):
        if not rigid_body_world.restore_world(context.scene):
            self.report({"INFO"}, "The scene has no Rigid Body world that a bake turned off")
            return {"CANCELLED"}
        self.report({"INFO"}, "The Rigid Body world is on: Play simulates its bodies in Blender again")
        return {"FINISHED"}


class PRB_OT_refresh_devices(bpy.types.Operator):
    """List the OpenCL devices again (after installing a driver)"""

    bl_idname = "prb.refresh_devices"
    bl_label = "Refresh Devices"

    def execute(self, context):
        from . import properties

        properties.refresh_devices()
        items = properties.device_items(None, context)
        if len(items) <= 1:
            self.report({"WARNING"}, properties.opencl_problem() or "No OpenCL device found")
        else:
            self.report({"INFO"}, f"{len(items) - 1} OpenCL device(s)")
        return {"FINISHED"}


classes = (PRB_OT_simulate_bake, PRB_OT_clear_bake, PRB_OT_restore_rigid_body_world, PRB_OT_refresh_devices)
