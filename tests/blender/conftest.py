"""Shared helpers for the Blender-layer tests (bpy module).

Run under another bpy version with a venv that has it, e.g.
    make test-blender BPY_VERSION=4.2.23 VENV=.venv-bpy4.2

If ``import bpy`` fails (the module or a system library it needs is missing) the run fails: the
Blender layer must never vanish from a green run. PRB_ALLOW_SKIP_BPY=1 skips it instead, for a
developer working on the core without bpy; CI never sets it.
"""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import warnings

# Blender's user folder for this run and the processes it starts (else ~/.config/blender), removed
# at exit. The test modules rely on it being set here, before they import bpy.
if "BLENDER_USER_RESOURCES" not in os.environ:
    os.environ["BLENDER_USER_RESOURCES"] = tempfile.mkdtemp(prefix="prb-test-user-")
    atexit.register(shutil.rmtree, os.environ["BLENDER_USER_RESOURCES"], ignore_errors=True)

import pytest  # noqa: E402

from tests.skip_reasons import SKIP_NO_BPY  # noqa: E402

try:
    import bpy  # noqa: E402,F401
except ImportError as exc:
    if os.environ.get("PRB_ALLOW_SKIP_BPY") != "1":
        raise ImportError(f"the Blender-layer tests need the bpy module and it does not import: {exc}. "
                          f"Install it (make venv), or set PRB_ALLOW_SKIP_BPY=1 to skip these tests "
                          f"on purpose") from exc
    collect_ignore_glob = ["test_*.py"]
    warnings.warn(SKIP_NO_BPY)


@pytest.fixture(scope="module")
def registered():
    """The add-on's classes registered for one test module, unregistered after it (and so before exit : bpy 4.2 segfaults otherwise)."""
    import addon.blender as blender

    blender.register()
    yield blender
    blender.unregister()
