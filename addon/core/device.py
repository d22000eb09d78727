"""OpenCL platform and device discovery, and the choice of device.

Choice order: an explicit selector (argument), else the ``PRB_OPENCL_DEVICE`` environment variable,
else "auto" (the first GPU, else a CPU device with a message saying so).

Selectors: "auto", "gpu", "cpu", "P:D" (platform and device index as listed by ``list_devices``),
or any other text, matched case-insensitively against "platform / device" names.
"""
from __future__ import annotations

import atexit
import glob
import logging
import os
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

    @property
    def selector(self) -> str:
        return f"{self.platform_index}:{self.device_index}"

    @property
    def label(self) -> str:
        kind = "GPU" if self.is_gpu else "CPU"
        return f"{self.device_name.strip()} ({kind}, {self.platform_name.strip()})"


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


def list_devices() -> list[DeviceInfo]:
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
            ))
    if not devices:
        if pocl_missing:
            raise OpenCLUnavailable(POCL_TOOLCHAIN_HINT.format(missing=", ".join(pocl_missing)) + _nvidia_icd_hint())
        raise OpenCLUnavailable(f"OpenCL platforms exist but expose no device. {INSTALL_HINT}{_nvidia_icd_hint()}")
    return devices


def choose_device(selector: str | None = None, *, announce: bool = True) -> DeviceInfo:
    """The device a selector names; ``announce``: warn when "auto" falls back to a CPU."""
    devices = list_devices()
    selector = (selector or os.environ.get(ENV_VARIABLE) or "auto").strip()
    key = selector.lower()
    if key == "auto":
        gpus = [d for d in devices if d.is_gpu]
        if gpus:
            return gpus[0]
        if announce:
            log.warning("No OpenCL GPU found; using the CPU device %s.%s", devices[0].label, _nvidia_icd_hint())
        return devices[0]
    if key in ("gpu", "cpu"):
        wanted = [d for d in devices if d.is_gpu == (key == "gpu")]
        if not wanted:
            raise OpenCLUnavailable(
                f"No OpenCL {key.upper()} device. Available: {', '.join(d.label for d in devices)}."
                + (_nvidia_icd_hint() if key == "gpu" else ""))
        return wanted[0]
    for d in devices:
        if key == d.selector:
            return d
    matches = [d for d in devices if key in f"{d.platform_name} / {d.device_name}".lower()]
    if matches:
        return matches[0]
    raise OpenCLUnavailable(
        f"No OpenCL device matches {selector!r}. Available: "
        + "; ".join(f"{d.selector} {d.label}" for d in devices))


def create_context(selector: str | None = None):
    """(pyopencl Context, DeviceInfo) for the chosen device."""
    cl = _import_pyopencl()
    info = choose_device(selector)
    device = cl.get_platforms()[info.platform_index].get_devices()[info.device_index]
    return cl.Context([device]), info
