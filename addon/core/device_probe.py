"""The probe a device must pass before it is chosen (device.choose_device): a small kernel built and
run on it, the one line that says why one failed, and the build log the full text goes to. Also
the build of any program with a successful compiler's notes kept out of the terminal."""
from __future__ import annotations

import logging
import os
import re
import sys
import tempfile
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .device import DeviceInfo

log = logging.getLogger(__name__)


# A small kernel every candidate device must build and run before it is chosen: drivers that list
# a device but cannot compile for it (PoCL 3.0's LLVM 14 on CPUs newer than itself asks clang for
# the target CPU 'generic' and fails every build) are skipped for the next candidate. It uses what
# the engine's kernels use: local memory and its barrier, global atomics, float maths.
PROBE_SOURCE = """
#ifdef PRB_FAIL_BUILD
#error "PRB_OPENCL_FAIL_BUILD names this device: its build fails on purpose"
#endif
__kernel void probe(__global float *values, volatile __global int *count)
{
    __local float mirrored[PROBE_ITEMS];
    int i = get_local_id(0);
    mirrored[PROBE_ITEMS - 1 - i] = values[i];
    barrier(CLK_LOCAL_MEM_FENCE);
    values[i] = sqrt(mirrored[i]) * 2.0f + 1.0f;
    atomic_inc(count);
}
"""
PROBE_ITEMS = 64
# For tests: a device whose "platform / device / platform version" holds this text fails its probe's
# build, through its own compiler, as on a CPU its driver cannot target.
FAIL_BUILD_VARIABLE = "PRB_OPENCL_FAIL_BUILD"
BUILD_LOG_NAME = "opencl-build.log"
_probe_results: dict[tuple[str, str, str], str | None] = {}
_build_log_written: set[Path] = set()


def build_log_path() -> Path:
    """Where the full build logs of failed probes go (the messages name it; never the panel or the
    terminal): the user's cache folder."""
    if sys.platform.startswith("win"):
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "particle-rigid-bodies" / BUILD_LOG_NAME


def _write_build_log(info: DeviceInfo, text: str) -> Path:
    """Append one failure's full text to the build log (started afresh by each process)."""
    path = build_log_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a" if path in _build_log_written else "w", encoding="utf-8") as log_file:
            log_file.write(f"=== {info.label} [{info.platform_version.strip()}] on {cpu_description()}\n"
                           f"{text.rstrip()}\n\n")
        _build_log_written.add(path)
    except OSError as exc:  # a read-only home: the message still says what failed
        log.debug("build log not written to %s: %s", path, exc)
    return path


def _first_error_line(text: str) -> str:
    """The line of a build log that says what failed (compilers print notes and warnings around it),
    without the temporary file's name the compiler gives the source."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    line = next((line for line in lines if "error" in line.lower() and "clBuildProgram failed" not in line
                 and not line.startswith(("(options", "Build on"))),
                lines[0] if lines else "no message")
    # from "error:" on, less the source's place before it ("1:3:2: error: ...", Intel's) or after it
    # ("error: /path/tempfile.cl:3:2: ...", PoCL's)
    found = re.search(r"(?:fatal )?error:.*", line, re.IGNORECASE)
    line = found.group(0) if found else line
    return re.sub(r"^((?:fatal )?error:\s*)\S+:\d+:\d+:\s*", r"\1", line, flags=re.IGNORECASE)[:200]


@contextmanager
def _stderr_captured():
    """Collect what a driver writes to the process's standard error (PoCL's compiler prints its
    diagnostics there itself) into a list of one string, for the build log instead of the terminal."""
    captured = [""]
    try:
        saved = os.dup(2)
    except OSError:  # no standard error to redirect (a process without one)
        yield captured
        return
    with tempfile.TemporaryFile() as sink:
        try:
            sys.stderr.flush()
            os.dup2(sink.fileno(), 2)
            yield captured
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            captured[0] = sink.read().decode("utf-8", errors="replace")


def cpu_description() -> str:
    """The processor, as a user would look it up ("AMD Ryzen 9 9950X, family 26")."""
    model, family = "", ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and not model:
                    model = value.strip()
                elif key.strip() == "cpu family" and not family:
                    family = value.strip()
                if model and family:
                    break
    except OSError:
        import platform
        model = platform.processor() or platform.machine()
    return f"{model or 'unknown CPU'}" + (f", family {family}" if family else "")


@contextmanager
def _quietly():
    """What a driver prints (the list of one string _stderr_captured gives) kept from the terminal,
    and pyopencl's CompilerWarning too: a compiler's notes on a build that succeeded say nothing a
    user can act on."""
    with _stderr_captured() as printed, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield printed


def build_quietly(program, options):
    """Build a pyopencl Program without the compiler's notes on a build that succeeded reaching the
    terminal (Intel's compiler prints "loop not vectorized" remarks itself; pyopencl warns that the
    output was not empty): they say nothing a user can act on. A failed build still raises with its
    log."""
    with _quietly() as printed:
        program = program.build(options=options)
    if printed[0].strip():
        log.debug("the OpenCL compiler printed: %s", printed[0].strip())
    return program


def probe_device(info: DeviceInfo) -> str | None:
    """Build and run the probe kernel on a device: None if it ran right, else one line saying what
    failed (the full text goes to build_log_path()). Once per device and process."""
    fail_build = os.environ.get(FAIL_BUILD_VARIABLE, "").strip().lower()
    key = (info.platform_name, info.device_name, fail_build)
    if key in _probe_results:
        return _probe_results[key]
    import pyopencl as cl  # loaded already: the device was found through it

    from .opencl_program import OPENCL_C_STANDARD  # the kernels' own standard (it imports this module)
    options = [OPENCL_C_STANDARD, f"-DPROBE_ITEMS={PROBE_ITEMS}"]
    if fail_build and fail_build in f"{info.platform_name} / {info.device_name} / {info.platform_version}".lower():
        options.append("-DPRB_FAIL_BUILD")
    with _quietly() as printed:
        reason = _run_probe(cl, info, options)
    if reason is not None:
        stage, text = reason
        if printed[0].strip():
            text += "\n\nThe driver printed:\n" + printed[0]
        path = _write_build_log(info, f"{stage}\n{text}")
        reason = f"{stage} ({_first_error_line(text)}); build log: {path}"
    _probe_results[key] = reason
    return reason


def _run_probe(cl, info: DeviceInfo, options: list[str]) -> tuple[str, str] | None:
    """(what failed, the driver's full text), or None when the probe ran right."""
    import numpy as np
    stage = "could not be opened"
    try:
        device = cl.get_platforms()[info.platform_index].get_devices()[info.device_index]
        context = cl.Context([device])
        queue = cl.CommandQueue(context)
        stage = "its kernel compiler failed"
        program = cl.Program(context, PROBE_SOURCE).build(options=options)
        stage = "its probe kernel did not run"
        values = np.arange(PROBE_ITEMS, dtype=np.float32)
        count = np.zeros(1, np.int32)
        mf = cl.mem_flags
        values_buffer = cl.Buffer(context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=values)
        count_buffer = cl.Buffer(context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=count)
        program.probe(queue, (PROBE_ITEMS,), (PROBE_ITEMS,), values_buffer, count_buffer)
        result = np.empty_like(values)
        cl.enqueue_copy(queue, result, values_buffer)
        cl.enqueue_copy(queue, count, count_buffer)
        queue.finish()
        expected = np.sqrt(values[::-1]) * 2.0 + 1.0
        if count[0] != PROBE_ITEMS or not np.allclose(result, expected, rtol=1e-5, atol=1e-5):
            stage = "its probe kernel computed wrong values"
            raise RuntimeError(f"expected {expected.tolist()} and {PROBE_ITEMS} atomic counts, "
                               f"got {result.tolist()} and {int(count[0])}")
    except Exception as exc:  # any driver failure: the device is skipped, not the bake
        return stage, f"{type(exc).__name__}: {exc}"
    return None
