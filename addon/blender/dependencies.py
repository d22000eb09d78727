"""What the add-on needs from the Python it runs in (numpy; pyopencl and an OpenCL driver), and how
to get what is missing on this platform. Imports neither numpy nor the core, so that the add-on can
still register and say what is missing."""
from __future__ import annotations

import sys


def numpy_hint(platform: str | None = None) -> str:
    platform = sys.platform if platform is None else platform
    if platform.startswith("linux"):
        return ("Blender from blender.org ships numpy. A distribution's Blender (Debian/Ubuntu, Fedora, Arch "
                "packages) runs on the system's Python: install its numpy (Debian/Ubuntu: sudo apt install "
                "python3-numpy; Fedora: sudo dnf install python3-numpy; Arch: sudo pacman -S python-numpy), "
                "then restart Blender.")
    return ("Blender from blender.org ships numpy; this Blender's Python has none: reinstall Blender from "
            "blender.org (or install numpy into the Python this Blender runs on), then restart Blender.")


def numpy_problem() -> str | None:
    """Why numpy cannot be used (with how to get it), or None."""
    try:
        import numpy  # noqa: F401
    except ImportError as exc:
        return f"numpy is missing ({exc}). {numpy_hint()}"
    return None
