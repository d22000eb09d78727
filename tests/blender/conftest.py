"""Shared helpers for the Blender-layer tests (bpy module).

Run under another bpy version with a venv that has it, e.g.
    make test-blender BPY_VERSION=4.2.23 VENV=.venv-bpy4.2
"""
from __future__ import annotations

import os
import tempfile

os.environ.setdefault("BLENDER_USER_RESOURCES", tempfile.mkdtemp(prefix="prb-test-user-"))

import pytest  # noqa: E402

bpy = pytest.importorskip("bpy")


@pytest.fixture(scope="module")
def registered():
    """The add-on's classes registered for one test module, unregistered after it (and so before exit : bpy 4.2 segfaults otherwise)."""
    import addon.blender as blender

    blender.register()
    yield blender
    blender.unregister()
