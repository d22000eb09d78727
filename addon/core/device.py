"""OpenCL platform and device discovery, and the choice of device.

Choice order: an explicit selector (argument), else the ``PRB_OPENCL_DEVICE`` environment variable,
else "auto": the GPUs, then the CPU drivers (Intel's runtime, then PoCL), the first whose probe kernel
builds and runs (probe_device), with one line logged for each skipped and a message saying so when it
falls back to a CPU.

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

from .device_probe import build_log_path, cpu_description, probe_device

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


# Intel's CPU OpenCL runtime as pip installs it (intel-opencl-rt, with tbb and intel-cmplr-lib-rt):
# its library lands in <prefix>/lib, and the ICD file the wheel brings names a placeholder path.
INTEL_CPU_LIBRARY = "libintelocl.so"


def fetched_driver_folder() -> Path:
    """Where the add-on installs the CPU driver it fetches on the user's request (cpu_driver.py): the
    user's data folder, shared by Blender, the bpy module and the command line, and kept across
    updates of the extension. PRB_CPU_DRIVER_FOLDER overrides (tests)."""
    override = os.environ.get("PRB_CPU_DRIVER_FOLDER")
    if override:
        return Path(override)
    if sys.platform.startswith("win"):
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "particle-rigid-bodies" / "cpu-driver"


def bundled_drivers() -> list[Path]:
    """The OpenCL driver libraries that come with the add-on's Python packages rather than the
    system: the PoCL in pyopencl's Linux wheel, and Intel's CPU runtime where pip installed it into
    this Python's prefix or the add-on fetched it."""
    found = []
    try:
        import pyopencl
        found += sorted((Path(pyopencl.__file__).resolve().parent / ".libs").glob("libpocl*.so*"))[:1]
    except ImportError:
        pass
    for folder in (Path(sys.prefix) / "lib", fetched_driver_folder() / "lib"):
        library = folder / INTEL_CPU_LIBRARY
        if library.is_file():
            found.append(library)
            break
    return found


def _expose_bundled_drivers() -> None:
    """Make the drivers that ship with the add-on's packages visible to whichever OpenCL loader is in
    the process, beside the system's (or the user's OCL_ICD_VENDORS folder's) own.

    pyopencl's own loader finds its PoCL, but a Blender built against the system's libOpenCL (Linux
    distribution packages) resolves OpenCL to the system loader, which only reads
    /etc/OpenCL/vendors, and neither finds Intel's runtime, whose ICD file pip installs with a
    placeholder path. OCL_ICD_VENDORS pointing at a folder with the system's (or the user's) ICD
    files plus one naming each bundled library serves both loaders.
    """
    if not sys.platform.startswith("linux") or os.environ.get("PRB_OPENCL_VENDORS_EXPOSED"):
        return
    drivers = bundled_drivers()
    if not drivers:
        return
    given = os.environ.get("OCL_ICD_VENDORS")
    folder = Path(tempfile.mkdtemp(prefix="prb-opencl-vendors-"))
    # The loader reads the folder when OpenCL is first used, and processes started from this one
    # inherit the variable: it lives as long as this process, no longer.
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    if given and Path(given).is_file():
        shutil.copy(given, folder / Path(given).name)
    else:
        for icd in glob.glob(os.path.join(given or "/etc/OpenCL/vendors", "*.icd")):
            shutil.copy(icd, folder / Path(icd).name)
    for library in drivers:
        (folder / f"prb-bundled-{library.name.split('.')[0]}.icd").write_text(str(library) + "\n")
    os.environ["OCL_ICD_VENDORS"] = str(folder)
    os.environ["PRB_OPENCL_VENDORS_EXPOSED"] = "1"


# The kernels are OpenCL C 1.2, built with -cl-std=CL1.2 on every device (opencl_program.py): what
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
    platform_version: str = ""
    # NVIDIA's CL_DEVICE_KERNEL_EXEC_TIMEOUT_NV: the display's watchdog ends (and on Windows resets
    # the driver over) any launch longer than about 2 s
    kernel_timeout: bool = False

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


def _kernel_timeout(cl, device, extensions) -> bool:
    """Whether NVIDIA's driver bounds a launch's time on this device (a GPU driving a display)."""
    if "cl_nv_device_attribute_query" not in extensions:
        return False
    try:
        return bool(device.kernel_exec_timeout_nv)
    except (cl.Error, AttributeError):
        return True  # unreadable: assume the watchdog, the safe side


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
    _expose_bundled_drivers()
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
            extensions = frozenset(device.extensions.split())
            devices.append(DeviceInfo(
                pi, di, platform.name, device.name,
                bool(device.type & cl.device_type.GPU), int(device.global_mem_size),
                _opencl_c_version(cl, device), extensions, str(getattr(platform, "version", "")),
                _kernel_timeout(cl, device, extensions),
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


_skips_logged: set[str] = set()  # the devices skipped so far in this process, each logged once


def _cpu_driver_rank(info: DeviceInfo) -> int:
    """The order CPU drivers are tried in, by the drivers' table in docs/performance.md (the 1000-cube
    pile on 2 cores): Intel's runtime where it is installed (its 2024.2 release 0.71x PoCL 3.0's time
    per frame; it also needs no system linker), then PoCL (the zip's, or the system's), then any other."""
    if info.platform_name.lower().startswith("intel"):
        return 0
    if POCL_PLATFORM in info.platform_name:
        return 1
    return 2


def candidates(devices: list[DeviceInfo], kind: str = "auto") -> list[DeviceInfo]:
    """The usable devices in the order they are tried: GPUs as the system lists them, then the CPU
    drivers by rank; ``kind`` "gpu" or "cpu" keeps only those."""
    gpus = [d for d in devices if d.is_gpu and d.problem is None]
    cpus = sorted((d for d in devices if not d.is_gpu and d.problem is None), key=_cpu_driver_rank)
    return {"gpu": gpus, "cpu": cpus}.get(kind, gpus + cpus)


def cpu_driver_hint() -> str:
    """What to install when no CPU driver builds the kernels."""
    if sys.platform.startswith("linux"):
        return ("Get a CPU OpenCL driver that knows this CPU: Intel's OpenCL runtime (runs on AMD CPUs "
                "too; in Blender: Preferences > Add-ons > Particle Rigid Bodies > Get CPU Driver; "
                "headless: blender --command particle_bodies get-cpu-driver; with the bpy module: "
                "pip install 'intel-opencl-rt==2024.2.*' 'intel-cmplr-lib-rt==2024.2.*'), or the "
                "distribution's PoCL (Debian/Ubuntu: apt install pocl-opencl-icd), or the GPU driver's "
                "OpenCL.")
    return INSTALL_HINT


def _unusable(info: DeviceInfo, reason: str) -> OpenCLUnavailable:
    return OpenCLUnavailable(f"OpenCL device {info.label} cannot run the kernels: {reason}. {CHOOSE_ANOTHER}.")


def choose_device(selector: str | None = None, *, announce: bool = True) -> DeviceInfo:
    """The device a selector names, after its probe kernel built and ran (probe_device). "auto",
    "gpu" and "cpu" try the candidates in order and log one line for each skipped; ``announce``:
    warn when "auto" falls back to a CPU or leaves a device out. A selector naming only refused
    devices, or one whose probe fails, raises with the reason in one line."""
    found = _all_devices()
    selector = (selector or os.environ.get(ENV_VARIABLE) or "auto").strip()
    key = selector.lower()
    if key not in ("auto", "gpu", "cpu"):
        # a platform's name before a device's: "intel" is Intel's runtime, though PoCL names its CPU
        # device after the processor ("pthread-Intel(R) Xeon(R) ...")
        matches = ([d for d in found if key == d.selector]
                   or [d for d in found if key in d.platform_name.lower()]
                   or [d for d in found if key in f"{d.platform_name} / {d.device_name}".lower()])
        chosen = next((d for d in matches if d.problem is None), matches[0] if matches else None)
        if chosen is not None and chosen.problem:
            raise OpenCLUnavailable(chosen.problem)
        if chosen is not None:
            reason = probe_device(chosen)
            if reason:
                raise _unusable(chosen, reason)
            return chosen
        devices = _usable(found)
        raise OpenCLUnavailable(
            f"No OpenCL device matches {selector!r}. Available: "
            + "; ".join(f"{d.selector} {d.label}" for d in devices))
    devices = _usable(found)
    if announce and key == "auto":
        for d in found:
            if d.problem:
                log.warning(d.problem)
    tried = []
    for d in candidates(devices, key):
        reason = probe_device(d)
        if reason is None:
            if key == "auto" and not d.is_gpu and announce:
                log.warning("No OpenCL GPU found; using the CPU device %s.%s", d.label, _nvidia_icd_hint())
            return d
        if d.label not in _skips_logged:  # once a process: the panel and the bake both choose
            _skips_logged.add(d.label)
            log.warning("Skipped OpenCL device %s: %s", d.label, reason)
        tried.append(f"{d.label} [{d.platform_version.strip() or 'version unknown'}]: {reason.split('; build log')[0]}")
    if not tried and key in ("gpu", "cpu"):
        refused = "".join(f" {d.problem}" for d in found if d.problem and d.is_gpu == (key == "gpu"))
        raise OpenCLUnavailable(
            f"No usable OpenCL {key.upper()} device. Available: {', '.join(d.label for d in devices)}."
            + refused + (_nvidia_icd_hint() if key == "gpu" else ""))
    raise OpenCLUnavailable(
        f"No OpenCL device could run the kernels on this machine ({cpu_description()}). Tried: "
        + "; ".join(tried) + f". {cpu_driver_hint()} Full build log: {build_log_path()}")


def create_context(selector: str | None = None):
    """(pyopencl Context, DeviceInfo) for the chosen device."""
    cl = _import_pyopencl()
    info = choose_device(selector)
    device = cl.get_platforms()[info.platform_index].get_devices()[info.device_index]
    return cl.Context([device]), info
