"""The Blender layer: registers every module's ``classes`` (properties first, panels last).

Modules expose a ``classes`` tuple and optionally ``register()``/``unregister()`` for what is not a
class (pointer properties, handlers).
Without numpy only preferences.py's page and a sidebar panel saying what is missing are registered.
"""
from __future__ import annotations

import importlib

import bpy

_MODULE_NAMES = ("properties", "operators", "cpu_driver", "bake_instances", "instancers", "preview", "panels",
                 "command", "preferences")
_registered: list = []  # (module, classes) actually registered, in order


def _modules():
    return [importlib.import_module(f"{__name__}.{name}") for name in _MODULE_NAMES]


def register():
    if _registered:
        return
    from . import dependencies, preferences

    missing = dependencies.numpy_problem()
    if missing:
        # Without numpy nothing else imports: register only what says so (Preferences, the sidebar tab).
        print(f"Particle Rigid Bodies: {missing}", flush=True)
        for cls in preferences.fallback_classes:
            bpy.utils.register_class(cls)
        _registered.append((dependencies, preferences.fallback_classes))
        return
    try:
        for mod in _modules():
            classes = tuple(getattr(mod, "classes", ()))
            done = []
            try:
                for cls in classes:
                    bpy.utils.register_class(cls)
                    done.append(cls)
                if hasattr(mod, "register"):
                    mod.register()
            except BaseException:
                for cls in reversed(done):
                    bpy.utils.unregister_class(cls)
                raise
            _registered.append((mod, classes))
    except BaseException:
        unregister()
        raise


def unregister():
    while _registered:
        mod, classes = _registered.pop()
        if hasattr(mod, "unregister"):
            mod.unregister()
        for cls in reversed(classes):
            if getattr(cls, "is_registered", True):
                bpy.utils.unregister_class(cls)
