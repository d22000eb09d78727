"""Saving the baked .blend: written under a temporary name in the target's folder, then renamed over
the target, so that a process killed mid-save leaves the previous file (or none), never a truncated one."""
from __future__ import annotations

import os
import tempfile


def check_writable(folder: str, error=OSError) -> None:
    """Raise ``error`` unless a file can be created in ``folder`` (what the save does first)."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".prb-write-test-", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise error(f"cannot write in {folder} ({exc.strerror or exc})") from exc
    os.close(fd)
    os.unlink(probe)


def save_copy_atomically(path: str) -> None:
    """Save the open file as a copy at ``path`` (the open file keeps its own path)."""
    folder, name = os.path.split(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp.blend", dir=folder)
    os.close(fd)
    # Blender moves an existing file at the save path to <path>1 (Save Versions): give it a free name.
    os.unlink(temporary)
    try:
        write_blend(temporary)
        os.replace(temporary, path)
    except BaseException:
        for leftover in (temporary, temporary + "@", temporary + "1"):
            if os.path.exists(leftover):
                os.unlink(leftover)
        raise


def write_blend(path: str) -> None:
    import bpy

    # A copy: the open file keeps its path. The same folder as the target: relative paths (textures,
    # libraries) stay valid after the rename.
    bpy.ops.wm.save_as_mainfile(filepath=path, copy=True)
