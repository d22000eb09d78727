"""Get CPU Driver in the add-on's Preferences (Linux x86-64): downloads Intel's CPU OpenCL runtime
(addon/core/cpu_driver.py) in a background thread while a modal operator shows its progress (Esc
cancels), only when the user clicks it and Blender's Allow Online Access is on; Remove deletes it.
The OpenCL loader reads its list of drivers once per process: the fetched driver is used from
Blender's next start."""
from __future__ import annotations

import importlib.util
import threading

import bpy

from ..core import cpu_driver

TIMER_INTERVAL = 0.2
# The download in progress (one per Blender), written by its thread, read by the operator and the
# Preferences box: thread, cancel (threading.Event), done and total bytes, then marker or error.
_download: dict = {"thread": None}
# Installed or removed since Blender started: the loader still has the driver list it read then.
_changed = {"restart": False}


def online_access() -> bool:
    """Blender's Allow Online Access (Preferences > System > Network, or --online-mode and
    --offline-mode); True in a Blender before 4.2, which has no such setting. Read here, and nowhere
    else, so that tests can replace it (bpy.app.online_access is read-only)."""
    return bool(getattr(bpy.app, "online_access", True))


def online_access_problem(command_line: bool = False) -> str | None:
    """Why Blender must not go online now, with how to allow it; None when it may."""
    if online_access():
        return None
    again = "blender --online-mode --command particle_bodies get-cpu-driver"
    if getattr(bpy.app, "online_access_override", False):
        return (f"Blender was started with --offline-mode: start it without, or run: {again}" if not command_line
                else f"--offline-mode forbids going online: run {again}")
    where = "allow it in Preferences > System > Network (Allow Online Access)"
    return (f"Online access is off: {where}, then click Get CPU Driver again" if not command_line
            else f"online access is off in Blender's Preferences: {where}, or run {again}")


def offered() -> bool:
    """Whether Get CPU Driver is offered: Linux x86-64 with pyopencl (without it no driver helps)."""
    return cpu_driver.unsupported_reason() is None and importlib.util.find_spec("pyopencl") is not None


def needed() -> bool:
    """Offered, and neither fetched nor found beside this Python (pip's intel-opencl-rt)."""
    return offered() and cpu_driver.installed() is None and cpu_driver.found_library() is None


def downloading() -> bool:
    thread = _download.get("thread")
    return thread is not None and thread.is_alive()


def _start() -> None:
    cancel = threading.Event()
    state = _download
    state.clear()
    state.update(cancel=cancel, done=0, total=0, marker=None, error=None)

    def progress(done, total):
        state["done"], state["total"] = done, total

    def run():
        try:
            state["marker"] = cpu_driver.fetch(progress=progress, cancel=cancel)
        except cpu_driver.FetchError as exc:
            state["error"] = str(exc)
        except Exception as exc:  # noqa: BLE001 - reported by the operator, never lost in a thread
            state["error"] = f"{type(exc).__name__}: {exc}"

    state["thread"] = threading.Thread(target=run, name="prb-get-cpu-driver", daemon=True)
    state["thread"].start()


def progress_text() -> str:
    done, total = _download.get("done", 0), _download.get("total", 0)
    if not total:
        return f"Get CPU Driver: asking PyPI for {cpu_driver.RUNTIME_NAME}"
    if done >= total:
        return f"Get CPU Driver: unpacking {cpu_driver.RUNTIME_NAME}"
    return (f"Get CPU Driver: {100 * done // total}% ({done / 1e6:,.0f} of {total / 1e6:,.0f} MB) "
            f"- Esc to cancel")


def _installed_message(marker: dict) -> str:
    return f"Installed {cpu_driver.describe(marker)}: {cpu_driver.RESTART_NOTE}"


def _redraw_preferences(context) -> None:
    for window in context.window_manager.windows:
        for area in window.screen.areas:
            if area.type == "PREFERENCES":
                area.tag_redraw()


class PRB_OT_get_cpu_driver(bpy.types.Operator):
    bl_idname = "prb.get_cpu_driver"
    bl_label = "Get CPU Driver"
    bl_description = (f"Download {cpu_driver.RUNTIME_NAME} ({cpu_driver.DOWNLOAD_SIZE_TEXT}, under Intel's "
                      f"licence) from PyPI into your user folder, for CPUs the bundled OpenCL driver cannot "
                      f"compile for (AMD Zen 5, Intel's newest)")

    _timer = None

    def _refused(self) -> bool:
        """Reported and True when nothing is to be downloaded: not offered here, already installed,
        online access off, a download already running."""
        reason = cpu_driver.unsupported_reason()
        current = cpu_driver.up_to_date() if reason is None else None
        if current is not None:
            self.report({"INFO"}, f"Already installed: {cpu_driver.describe(current)}")
            return True
        problem = reason or online_access_problem()
        if problem is None and downloading():
            problem = "Get CPU Driver is already downloading"
        if problem:
            self.report({"ERROR"}, problem)
        return problem is not None

    def execute(self, context):  # scripts and background mode: the download blocks
        if self._refused():
            return {"CANCELLED"}
        try:
            marker = cpu_driver.fetch()
        except cpu_driver.FetchError as exc:
            self.report({"ERROR"}, f"Get CPU Driver failed: {exc}")
            return {"CANCELLED"}
        _changed["restart"] = True
        self.report({"INFO"}, _installed_message(marker))
        return {"FINISHED"}

    def invoke(self, context, event):
        if bpy.app.background or context.window is None:
            return self.execute(context)
        if self._refused():
            return {"CANCELLED"}
        _start()
        wm = context.window_manager
        self._timer = wm.event_timer_add(TIMER_INTERVAL, window=context.window)
        wm.modal_handler_add(self)
        self._status(context, progress_text())
        return {"RUNNING_MODAL"}

    def _status(self, context, text) -> None:
        workspace = getattr(context, "workspace", None)
        if workspace is not None:
            workspace.status_text_set(text)
        _redraw_preferences(context)

    def _end(self, context) -> None:
        if self._timer is not None:
            context.window_manager.event_timer_remove(self._timer)
            self._timer = None
        self._status(context, None)

    def modal(self, context, event):
        if event.type == "ESC" and event.value == "PRESS":
            self.cancel(context)
            self.report({"WARNING"}, "Get CPU Driver cancelled: nothing was installed")
            return {"CANCELLED"}
        if event.type != "TIMER":
            return {"PASS_THROUGH"}
        if downloading():
            self._status(context, progress_text())
            return {"RUNNING_MODAL"}
        self._end(context)
        if _download.get("error"):
            self.report({"ERROR"}, f"Get CPU Driver failed: {_download['error']}")
            return {"CANCELLED"}
        _changed["restart"] = True
        self.report({"INFO"}, _installed_message(_download["marker"]))
        return {"FINISHED"}

    def cancel(self, context):  # Esc, and Blender stopping the operator (a file loaded, quitting)
        _stop()
        self._end(context)


def _stop() -> None:
    """Cancel a download in progress and wait for its thread (it stops within a chunk, removing
    what it had downloaded)."""
    if downloading():
        _download["cancel"].set()
        _download["thread"].join(timeout=10)


class PRB_OT_remove_cpu_driver(bpy.types.Operator):
    bl_idname = "prb.remove_cpu_driver"
    bl_label = "Remove"
    bl_description = f"Delete the {cpu_driver.RUNTIME_NAME} that Get CPU Driver installed"

    def invoke(self, context, event):
        return context.window_manager.invoke_confirm(self, event)

    def execute(self, context):
        if downloading():
            self.report({"ERROR"}, "Get CPU Driver is downloading: wait for it or press Esc")
            return {"CANCELLED"}
        try:
            removed = cpu_driver.remove()
        except cpu_driver.FetchError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        if not removed:
            self.report({"INFO"}, "No CPU driver was installed")
            return {"CANCELLED"}
        _changed["restart"] = True
        self.report({"INFO"}, f"Removed {cpu_driver.RUNTIME_NAME}: restart Blender to stop using it")
        return {"FINISHED"}


def draw_box(layout, width: int) -> None:
    """The Preferences' "CPU driver" box (Linux x86-64 only): the runtime installed (version, where)
    with Remove, or found beside this Python, or the Get CPU Driver button with what it downloads."""
    if not offered():
        return
    from .preferences import draw_wrapped

    box = layout.box()
    box.label(text="CPU driver", icon="DESKTOP")
    if downloading():
        box.label(text=progress_text(), icon="IMPORT")
        return
    marker = cpu_driver.installed()
    found = cpu_driver.found_library()
    if marker is not None:
        box.label(text=cpu_driver.describe(marker), icon="CHECKMARK")
        if found is not None and found != cpu_driver.target_folder() / cpu_driver.LIBRARY_FOLDER / found.name:
            draw_wrapped(box, f"Blender uses the copy beside its Python first: {found}", "INFO", width)
        box.operator(PRB_OT_remove_cpu_driver.bl_idname, icon="TRASH")
    elif found is not None:
        box.label(text=f"{cpu_driver.RUNTIME_NAME}: {found}", icon="CHECKMARK")
    else:
        draw_wrapped(box, cpu_driver.offer_text() + f" Licence: {cpu_driver.LICENSE_URL}", "INFO", width)
        box.operator(PRB_OT_get_cpu_driver.bl_idname, icon="IMPORT")
        box.label(text="Headless: blender --command particle_bodies get-cpu-driver")
    if _changed["restart"]:
        draw_wrapped(box, f"Changed since Blender started: {cpu_driver.RESTART_NOTE}", "ERROR", width)
    error = _download.get("error")
    if error and marker is None:
        draw_wrapped(box, f"Last try failed: {error}", "ERROR", width)


classes = (PRB_OT_get_cpu_driver, PRB_OT_remove_cpu_driver)


def unregister():
    _stop()
