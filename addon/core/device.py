"""OpenCL platform and device discovery, and the choice of device.

Choice order: an explicit selector (argument), else the ``PRB_OPENCL_DEVICE`` environment variable,
else "auto" (the first GPU, else a CPU device with a message saying so).

Selectors: "auto", "gpu", "cpu", "P:D" (platform and device index as listed by ``list_devices``),
or any other text, matched case-insensitively against "platform / device" names.
"""
from __future__ import annotations

import glob
import logging
import os
from dataclasses import dataclass

log = logging.getLogger(__name__)
ENV_VARIABLE = "PRB_OPENCL_DEVICE"
NVIDIA_LIBRARY_GLOBS = (
    "/usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1",
    "/usr/lib64/libnvidia-opencl.so.1",
    "/usr/local/nvidia/lib64/libnvidia-opencl.so.1",
    "/usr/lib/wsl/lib/libnvidia-opencl.so.1",
)

INSTALL_HINT = (
    "Install an OpenCL driver: NVIDIA (the driver's OpenCL ICD), AMD (ROCm/Adrenalin OpenCL), "
    "Intel (intel-opencl-icd / compute-runtime), Apple (built in), or on Linux a CPU driver "
    "(Debian/Ubuntu package 'pocl-opencl-icd', or 'pip install pocl-binary-distribution')."
)


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
        raise OpenCLUnavailable(f"pyopencl is not installed ({exc}). pip install pyopencl. {INSTALL_HINT}") from exc
    return pyopencl


def list_devices() -> list[DeviceInfo]:
    cl = _import_pyopencl()
    try:
        platforms = cl.get_platforms()
    except cl.Error as exc:  # "PLATFORM_NOT_FOUND_KHR" when no ICD is installed
        raise OpenCLUnavailable(f"No OpenCL platform found ({exc}). {INSTALL_HINT}{_nvidia_icd_hint()}") from exc
    devices = []
    for pi, platform in enumerate(platforms):
        try:
            platform_devices = platform.get_devices()
        except cl.Error:
            continue
        for di, device in enumerate(platform_devices):
            devices.append(DeviceInfo(
                pi, di, platform.name, device.name,
                bool(device.type & cl.device_type.GPU), int(device.global_mem_size),
            ))
    if not devices:
        raise OpenCLUnavailable(f"OpenCL platforms exist but expose no device. {INSTALL_HINT}{_nvidia_icd_hint()}")
    return devices


def choose_device(selector: str | None = None) -> DeviceInfo:
    devices = list_devices()
    selector = (selector or os.environ.get(ENV_VARIABLE) or "auto").strip()
    key = selector.lower()
    if key == "auto":
        gpus = [d for d in devices if d.is_gpu]
        if gpus:
            return gpus[0]
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
