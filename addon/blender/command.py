"""`blender --command particle_bodies bake ...`: the headless CLI (addon/cli.py) of the installed
extension, registered with Blender's command-line command API (Blender 4.2+)."""
from __future__ import annotations

import bpy

_handle = None


def register():
    global _handle
    if _handle is None and hasattr(bpy.utils, "register_cli_command"):
        from .. import cli

        _handle = bpy.utils.register_cli_command(cli.COMMAND, cli.command)


def unregister():
    global _handle
    if _handle is not None:
        bpy.utils.unregister_cli_command(_handle)
        _handle = None
