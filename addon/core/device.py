"""OpenCL platform and device discovery, and the choice of device.

Choice order: an explicit selector (argument), else the ``PRB_OPENCL_DEVICE`` environment variable,
else "auto" (the first GPU, else a CPU device with a message saying so).

Selectors: "auto", "gpu", "cpu", "P:D" (platform and device index as listed by ``list_devices``),
or any other text, matched case-insensitively against "platform / device" names.
A device the kernels cannot run on (below OpenCL C 1.2, or lacking an extension they need) is
refused: left out of the list and of "auto", with a message saying why when a selector names it.
"""
from __future__ import annotations

import atexit
import glob
import logging
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)
ENV_VARIABLE = "PRB_OPENCL_DEVICE"
NVIDIA_LIBRARY_GLOBS = (
    "/usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1",
    "/usr/lib64/libnvidia-opencl.so.1",
    "/usr/local/nvidia/lib64/libnvidia-opencl.so.1",
    "/usr/lib/wsl/lib/libnvidia-opencl.so.1",
)

def install_hint(platform: str | None = None) -> str:
    """How to get an OpenCL driver on this platform (sys.platform values)."""
    platform = sys.platform if platform is None else platform
    if platform.startswith("win"):
        return ("Install or update the GPU driver from NVIDIA, AMD or Intel: their Windows drivers include "
                "OpenCL (a driver from Windows Update may not).")
    if platform == "darwin":
        return ("macOS includes OpenCL: update macOS; if no device is listed, the Mac's GPU or this Blender's "
                "build may lack it (run Blender natively, not under Rosetta).")
    return ("Install an OpenCL driver: the GPU driver's OpenCL (NVIDIA: the driver's OpenCL ICD, Debian/Ubuntu "
            "nvidia-opencl-icd; AMD: ROCm OpenCL; Intel: intel-opencl-icd), or the CPU driver PoCL "
            "(Debian/Ubuntu: apt install pocl-opencl-icd). The PoCL bundled in the Linux zip also needs the "
            "system linker and C libraries at run time: apt install binutils libc6-dev gcc (for libgcc).")


INSTALL_HINT = install_hint()


POCL_PLATFORM = "Portable Computing Language"
POCL_TOOLCHAIN_HINT = (
    "The CPU OpenCL driver (PoCL) links every kernel with the system's linker and C library, and "
    "they are missing here ({missing}): install them (Debian/Ubuntu: apt install binutils gcc "
    "libc6-dev), or install the distribution's PoCL package (pocl-opencl-icd), which brings them."
)


def pocl_toolchain_missing() -> list[str]:
    """What PoCL needs to link kernels on Linux and cannot find (without it, PoCL aborts the process)."""
    if not sys.platform.startswith("linux"):
        return []
    missing = []
    if shutil.which("ld") is None:
        missing.append("ld (binutils)")
    if not any(glob.glob(p) for p in ("/usr/lib/gcc/*/*/libgcc.a", "/usr/lib64/gcc/*/*/libgcc.a",
                                       "/usr/lib/gcc/*/*/libgcc_s.so")):
        missing.append("libgcc (gcc)")
    if not any(os.path.exists(p) for p in ("/usr/lib/x86_64-linux-gnu/libc.so", "/usr/lib64/libc.so",
                                            "/usr/lib/libc.so", "/usr/lib/aarch64-linux-gnu/libc.so")):
        missing.append("libc.so (libc6-dev)")
    return missing


def _expose_bundled_pocl() -> None:
    """Make the PoCL that ships in pyopencl's wheel visible to whichever OpenCL loader is in the process.

    pyopencl's own loader finds it, but a Blender built against the system's libOpenCL (Linux
    distribution packages) resolves OpenCL to the system loader, which only reads
    /etc/OpenCL/vendors. OCL_ICD_VENDORS pointing at a folder with the system's ICD files plus one
    naming the bundled library serves both loaders. Set only when the user has not set it.
    """
    if os.environ.get("OCL_ICD_VENDORS") or not sys.platform.startswith("linux"):
        return
    try:
        import pyopencl
    except ImportError:
        return
    libs = Path(pyopencl.__file__).resolve().parent / ".libs"
    bundled = sorted(libs.glob("libpocl*.so*"))
    if not bundled:
        return
    folder = Path(tempfile.mkdtemp(prefix="prb-opencl-vendors-"))
    # The loader reads the folder when OpenCL is first used, and processes started from this one
    # inherit the variable: it lives as long as this process, no longer.
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    for icd in glob.glob("/etc/OpenCL/vendors/*.icd"):
        shutil.copy(icd, folder / Path(icd).name)
    (folder / "prb-bundled-pocl.icd").write_text(str(bundled[0]) + "\n")
    os.environ["OCL_ICD_VENDORS"] = str(folder)


# The kernels are OpenCL C 1.2, built with -cl-std=CL1.2 on every device (opencl_engine.py): what
# macOS provides, and what OpenCL 3.0 drivers still compile. A device below it is refused.
KERNEL_OPENCL_C = (1, 2)
# Extensions the kernels enable beyond OpenCL C 1.2 core (each `#pragma OPENCL EXTENSION` in kernels/
# names one of these: tests/core/test_opencl_c.py): a device lacking one is refused. None: Apple's
# GPUs lack cl_khr_fp64 and cl_khr_int64_base_atomics, so the kernels use float arithmetic and 32-bit
# atomics only (core since OpenCL 1.1).
KERNEL_EXTENSIONS: tuple[str, ...] = ()
CHOOSE_ANOTHER = "update its driver, or choose another device (the Device setting, or --device)"


class OpenCLUnavailable(RuntimeError):
    """No usable OpenCL platform or device; the message says what to install."""


@dataclass(frozen=True)
class DeviceInfo:
    platform_index: int
    device_index: int
    platform_name: str
    device_name: str
    is_gpu: bool
    global_memory: int  # bytes
    opencl_c_version: tuple[int, int]  # (major, minor) the device compiles; (0, 0): unreadable
    extensions: frozenset[str]

    @property
    def selector(self) -> str:
        return f"{self.platform_index}:{self.device_index}"

    @property
    def label(self) -> str:
        kind = "GPU" if self.is_gpu else "CPU"
        return f"{self.device_name.strip()} ({kind}, {self.platform_name.strip()})"

    @property
    def problem(self) -> str | None:
        """Why the kernels cannot run on this device (it is refused), or None."""
        if self.opencl_c_version < KERNEL_OPENCL_C:
            found = ("an unreadable OpenCL C version" if self.opencl_c_version == (0, 0)
                     else "OpenCL C %d.%d" % self.opencl_c_version)
            return (f"{self.label} is left out: it compiles {found}, and the kernels need OpenCL C "
                    f"{'%d.%d' % KERNEL_OPENCL_C} or later: {CHOOSE_ANOTHER}.")
        missing = [name for name in KERNEL_EXTENSIONS if name not in self.extensions]
        if missing:
            return (f"{self.label} is left out: the kernels need the OpenCL extension {', '.join(missing)}, "
                    f"which its driver lacks: {CHOOSE_ANOTHER}.")
        return None


def _opencl_c_version(cl, device) -> tuple[int, int]:
    """The OpenCL C version a pyopencl device compiles (OpenCL 1.0 devices lack the query: their
    platform version says it)."""
    try:
        text = device.opencl_c_version  # "OpenCL C 1.2 <vendor text>"
    except cl.Error:
        text = device.version  # "OpenCL 1.0 <vendor text>"
    found = re.search(r"OpenCL(?: C)? (\d+)\.(\d+)", text or "")
    return (int(found[1]), int(found[2])) if found else (0, 0)


def _nvidia_icd_hint() -> str:
    found = [p for pattern in NVIDIA_LIBRARY_GLOBS for p in glob.glob(pattern)]
    if not found:
        return ""
    return (
        f" The NVIDIA OpenCL library exists ({found[0]}) but no ICD file names it: create a folder with "
        f"a file 'nvidia.icd' containing that path and set OCL_ICD_VENDORS to the folder "
        f"(or install the driver's ICD file in /etc/OpenCL/vendors)."
    )


def _import_pyopencl():
    try:
        import pyopencl
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise OpenCLUnavailable(
            f"pyopencl does not load ({exc}). The extension's zip brings it for Blender's Python on its "
            f"platform: install the zip made for this platform (with the bpy module: pip install pyopencl). "
            f"{INSTALL_HINT}") from exc
    return pyopencl


def _all_devices() -> list[DeviceInfo]:
    """Every OpenCL device found, those refused (``problem``) included."""
    _expose_bundled_pocl()
    cl = _import_pyopencl()
    try:
        platforms = cl.get_platforms()
    except cl.Error as exc:  # "PLATFORM_NOT_FOUND_KHR" when no ICD is installed
        raise OpenCLUnavailable(f"No OpenCL platform found ({exc}). {INSTALL_HINT}{_nvidia_icd_hint()}") from exc
    devices = []
    pocl_missing = None
    for pi, platform in enumerate(platforms):
        if POCL_PLATFORM in platform.name:
            # a kernel build would abort the whole process (Blender included): leave PoCL out
            pocl_missing = pocl_toolchain_missing()
            if pocl_missing:
                log.warning(POCL_TOOLCHAIN_HINT.format(missing=", ".join(pocl_missing)))
                continue
        try:
            platform_devices = platform.get_devices()
        except cl.Error:
            continue
        for di, device in enumerate(platform_devices):
            if any(d.platform_name == platform.name and d.device_name == device.name for d in devices):
                continue  # the same driver reached through two ICD files
            devices.append(DeviceInfo(
                pi, di, platform.name, device.name,
                bool(device.type & cl.device_type.GPU), int(device.global_mem_size),
                _opencl_c_version(cl, device), frozenset(device.extensions.split()),
            ))
    if not devices:
        if pocl_missing:
            raise OpenCLUnavailable(POCL_TOOLCHAIN_HINT.format(missing=", ".join(pocl_missing)) + _nvidia_icd_hint())
        raise OpenCLUnavailable(f"OpenCL platforms exist but expose no device. {INSTALL_HINT}{_nvidia_icd_hint()}")
    return devices


def _usable(devices: list[DeviceInfo]) -> list[DeviceInfo]:
    """The devices the kernels run on; none: the refusals, and what to install."""
    usable = [d for d in devices if d.problem is None]
    if not usable:
        raise OpenCLUnavailable(" ".join(d.problem for d in devices) + f" {INSTALL_HINT}")
    return usable


def list_devices() -> list[DeviceInfo]:
    """The usable OpenCL devices; each refused one is logged with why."""
    devices = _all_devices()
    for d in devices:
        if d.problem:
            log.warning(d.problem)
    return _usable(devices)


def choose_device(selector: str | None = None, *, announce: bool = True) -> DeviceInfo:
    """The device a selector names; ``announce``: warn when "auto" falls back to a CPU or leaves a
    device out. A selector naming only refused devices raises with the reason."""
    found = _all_devices()
    selector = (selector or os.environ.get(ENV_VARIABLE) or "auto").strip()
    key = selector.lower()
    if key not in ("auto", "gpu", "cpu"):
        matches = ([d for d in found if key == d.selector]
                   or [d for d in found if key in f"{d.platform_name} / {d.device_name}".lower()])
        chosen = next((d for d in matches if d.problem is None), matches[0] if matches else None)
        if chosen is not None and chosen.problem:
            raise OpenCLUnavailable(chosen.problem)
        if chosen is not None:
            return chosen
    devices = _usable(found)
    if key == "auto":
        if announce:
            for d in found:
                if d.problem:
                    log.warning(d.problem)
        gpus = [d for d in devices if d.is_gpu]
        if gpus:
            return gpus[0]
        if announce:
            log.warning("No OpenCL GPU found; using the CPU device %s.%s", devices[0].label, _nvidia_icd_hint())
        return devices[0]
    if key in ("gpu", "cpu"):
        wanted = [d for d in devices if d.is_gpu == (key == "gpu")]
        if not wanted:
            refused = "".join(f" {d.problem}" for d in found if d.problem and d.is_gpu == (key == "gpu"))
            raise OpenCLUnavailable(
                f"No usable OpenCL {key.upper()} device. Available: {', '.join(d.label for d in devices)}."
                + refused + (_nvidia_icd_hint() if key == "gpu" else ""))
        return wanted[0]
    raise OpenCLUnavailable(
        f"No OpenCL device matches {selector!r}. Available: "
        + "; ".join(f"{d.selector} {d.label}" for d in devices))


def create_context(selector: str | None = None):
    """(pyopencl Context, DeviceInfo) for the chosen device."""
    cl = _import_pyopencl()
    info = choose_device(selector)
    device = cl.get_platforms()[info.platform_index].get_devices()[info.device_index]
    return cl.Context([device]), info
