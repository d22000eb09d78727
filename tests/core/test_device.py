"""OpenCL device discovery and choice: selectors, fallbacks and the messages users get."""
import os
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pyopencl as cl
import pytest

from addon.core import device, device_probe
from tests.skip_reasons import SKIP_NOT_POCL_ONLY, SKIP_ONE_CPU_DRIVER


@pytest.fixture(autouse=True)
def no_build_failing_on_purpose(monkeypatch):
    """These tests make builds fail themselves where they need to: one forced for the whole run (a
    run with PRB_OPENCL_FAIL_BUILD, as on a CPU a driver cannot compile for) stays out of them."""
    monkeypatch.delenv(device_probe.FAIL_BUILD_VARIABLE, raising=False)


def test_selectors_pick_devices():
    devices = device.list_devices()
    assert devices
    first = devices[0]
    assert device.choose_device(first.selector) == first
    assert device.choose_device(first.device_name[:10].lower()).device_name == first.device_name
    # auto prefers a GPU and falls back to the CPU drivers, Intel's runtime first (CI has no GPU)
    assert device.choose_device("auto") == device.candidates(devices)[0]
    if any(not d.is_gpu for d in devices):
        assert not device.choose_device("cpu").is_gpu
        assert device.choose_device("cpu") == device.candidates(devices, "cpu")[0]


def test_unknown_selector_lists_what_exists():
    with pytest.raises(device.OpenCLUnavailable, match="Available"):
        device.choose_device("no-such-device-anywhere")


def test_no_platform_names_what_to_install(monkeypatch):
    def no_platforms():
        raise cl.LogicError("clGetPlatformIDs failed: PLATFORM_NOT_FOUND_KHR")

    monkeypatch.setattr(cl, "get_platforms", no_platforms)
    with pytest.raises(device.OpenCLUnavailable) as info:
        device.list_devices()
    assert "pocl" in str(info.value).lower() and "NVIDIA" in str(info.value)


def test_nvidia_library_without_icd_file_is_explained(monkeypatch):
    monkeypatch.setattr(device.glob, "glob", lambda pattern: [pattern] if "nvidia" in pattern else [])
    monkeypatch.setattr(cl, "get_platforms", lambda: [])
    with pytest.raises(device.OpenCLUnavailable, match="OCL_ICD_VENDORS"):
        device.list_devices()


def test_pocl_without_its_linker_is_left_out_with_a_message(monkeypatch, caplog):
    others = [d for d in device.list_devices() if device.POCL_PLATFORM not in d.platform_name]
    if others and all(d.is_gpu for d in others):
        pytest.skip(SKIP_NOT_POCL_ONLY)
    monkeypatch.setattr(device, "pocl_toolchain_missing", lambda: ["ld (binutils)"])
    if not others:
        with pytest.raises(device.OpenCLUnavailable, match="binutils"):
            device.list_devices()
        return
    # beside another CPU driver (Intel's runtime, in the venv): PoCL is left out, the other chosen
    assert all(device.POCL_PLATFORM not in d.platform_name for d in device.list_devices())
    assert "binutils" in caplog.text
    assert not device.choose_device("cpu").is_gpu


class _OpenCL10Device(SimpleNamespace):
    """A device of an OpenCL 1.0 driver: it lacks the OpenCL C version query."""

    @property
    def opencl_c_version(self):
        raise cl.LogicError("clGetDeviceInfo failed: INVALID_VALUE")


def _fake_device(name, opencl_c, gpu=True, extensions="cl_khr_byte_addressable_store", kind=SimpleNamespace):
    return kind(name=name, type=cl.device_type.GPU if gpu else cl.device_type.CPU, global_mem_size=2 ** 30,
                opencl_c_version=opencl_c, version="OpenCL 1.0 old driver", extensions=extensions)


def _fake_platform(monkeypatch, *devices):
    platform = SimpleNamespace(name="Fake Platform", get_devices=lambda: list(devices))
    monkeypatch.setattr(cl, "get_platforms", lambda: [platform])
    monkeypatch.setattr(device, "probe_device", lambda info: None)  # no driver behind them to build on


def test_a_device_below_opencl_c_1_2_is_refused_with_the_reason(monkeypatch, caplog):
    _fake_platform(monkeypatch, _fake_device("Old GPU", "OpenCL C 1.1 "),
                   _fake_device("New CPU", "OpenCL C 1.2 ", gpu=False))
    reason = (r"Old GPU \(GPU, Fake Platform\) is left out: it compiles OpenCL C 1\.1, and the kernels "
              r"need OpenCL C 1\.2")
    assert [d.device_name for d in device.list_devices()] == ["New CPU"]
    assert re.search(reason, caplog.text)
    assert device.choose_device("auto", announce=False).device_name == "New CPU"
    with pytest.raises(device.OpenCLUnavailable, match=reason + ".*update its driver, or choose another device"):
        device.choose_device("0:0")
    with pytest.raises(device.OpenCLUnavailable, match=reason):
        device.choose_device("old gpu")
    with pytest.raises(device.OpenCLUnavailable, match="No usable OpenCL GPU device.*" + reason):
        device.choose_device("gpu")


def test_only_refused_devices_say_why(monkeypatch):
    _fake_platform(monkeypatch, _fake_device("Older GPU", None, kind=_OpenCL10Device))
    with pytest.raises(device.OpenCLUnavailable, match="Older GPU .* it compiles OpenCL C 1.0, and the kernels need"):
        device.list_devices()
    with pytest.raises(device.OpenCLUnavailable, match="it compiles OpenCL C 1.0"):
        device.choose_device("auto")


def test_a_device_lacking_a_kernel_extension_is_refused_by_its_name(monkeypatch):
    """No kernel needs an extension today (device.KERNEL_EXTENSIONS); one that did would refuse a
    device without it, by name."""
    monkeypatch.setattr(device, "KERNEL_EXTENSIONS", ("cl_khr_fp64",))
    _fake_platform(monkeypatch, _fake_device("Mac GPU", "OpenCL C 1.2 "),
                   _fake_device("Other GPU", "OpenCL C 1.2 ", extensions="cl_khr_fp64 cl_khr_byte_addressable_store"))
    with pytest.raises(device.OpenCLUnavailable, match="Mac GPU .* the kernels need the OpenCL extension cl_khr_fp64, "
                                                       "which its driver lacks"):
        device.choose_device("mac gpu")
    assert device.choose_device("auto").device_name == "Other GPU"


# -- the probe: a device is chosen only after a small kernel built and ran on it ---------------------

@pytest.fixture
def fresh_probes(monkeypatch, tmp_path):
    """Probes run anew (not the process's earlier results), their build log under tmp_path."""
    monkeypatch.setattr(device_probe, "_probe_results", {})
    monkeypatch.setattr(device_probe, "_build_log_written", set())
    monkeypatch.setattr(device, "_skips_logged", set())
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "particle-rigid-bodies" / device_probe.BUILD_LOG_NAME


def _tried_in_order():
    """The devices "auto" tries, in order (CI: Intel's runtime, then PoCL; a GPU machine: its GPUs)."""
    return device.candidates(device.list_devices())


def test_a_device_whose_build_fails_is_skipped_for_the_next_with_one_line(monkeypatch, fresh_probes, caplog,
                                                                           capfd):
    """As on an AMD Zen 5 CPU, where the bundled PoCL's compiler cannot target the CPU: the first
    driver's build fails (through its own compiler, PRB_OPENCL_FAIL_BUILD), the next is chosen, the
    log says in one line what was skipped and why, the full build log goes to a file, none of it to
    the terminal, and the engine runs a scene on the driver chosen."""
    drivers = _tried_in_order()
    if len(drivers) < 2:
        pytest.skip(SKIP_ONE_CPU_DRIVER)
    first, second = drivers[:2]
    monkeypatch.setenv(device_probe.FAIL_BUILD_VARIABLE, first.platform_name)
    chosen = device.choose_device("auto")
    assert chosen == second
    skipped = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Skipped OpenCL device")]
    assert len(skipped) == 1 and "\n" not in skipped[0]
    assert skipped[0].startswith(f"Skipped OpenCL device {first.label}: its kernel compiler failed (error: ")
    assert "fails on purpose" in skipped[0] and skipped[0].endswith(f"build log: {fresh_probes}")
    log_text = fresh_probes.read_text()
    assert first.label in log_text and "fails on purpose" in log_text and "-DPRB_FAIL_BUILD" in log_text
    assert "fails on purpose" not in capfd.readouterr().err  # the compiler's own printout went to the log
    from addon.core import SimulationSettings
    from addon.core.opencl_engine import OpenCLEngine
    from bench.scenes import cube_pile
    engine = OpenCLEngine(cube_pile(8), SimulationSettings(device="auto"))
    assert engine.device_info == second
    engine.step(40)
    assert np.isfinite(engine.body_state().position).all()


def test_when_every_device_fails_one_message_names_the_cpu_the_drivers_and_what_to_install(
        monkeypatch, fresh_probes, capfd):
    drivers = _tried_in_order()
    monkeypatch.setenv(device_probe.FAIL_BUILD_VARIABLE, " / ")  # in every "platform / device" name
    for selector in ("auto", "cpu") if any(not d.is_gpu for d in drivers) else ("auto",):
        with pytest.raises(device.OpenCLUnavailable) as info:
            device.choose_device(selector)
        message = str(info.value)
        assert "\n" not in message
        assert message.startswith(f"No OpenCL device could run the kernels on this machine ({device_probe.cpu_description()})")
        for d in (drivers if selector == "auto" else [d for d in drivers if not d.is_gpu]):
            assert d.label in message and d.platform_version.strip() in message
        assert "intel-opencl-rt" in message and "pocl-opencl-icd" in message
        assert message.endswith(f"Full build log: {fresh_probes}")
        assert "Build on" not in message and "(options" not in message  # the log's bulk stays in the file
    assert all(d.label in fresh_probes.read_text() for d in drivers)
    assert "fails on purpose" not in capfd.readouterr().err


def test_an_explicit_device_whose_build_fails_fails_loudly_in_one_line(monkeypatch, fresh_probes):
    first = _tried_in_order()[0]
    monkeypatch.setenv(device_probe.FAIL_BUILD_VARIABLE, first.platform_name)
    with pytest.raises(device.OpenCLUnavailable) as info:
        device.choose_device(first.selector)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"OpenCL device {first.label} cannot run the kernels: its kernel compiler failed")
    assert f"build log: {fresh_probes}" in message and "choose another device" in message


def test_a_probe_that_computes_wrong_values_refuses_the_device(monkeypatch, fresh_probes):
    """A driver that builds but runs the kernel wrong is skipped like one that cannot build."""
    first = _tried_in_order()[0]
    monkeypatch.setattr(device_probe, "PROBE_SOURCE", device_probe.PROBE_SOURCE.replace("* 2.0f + 1.0f", "* 2.0f + 1.5f"))
    reason = device_probe.probe_device(first)
    assert reason.startswith("its probe kernel computed wrong values (")
    assert "expected" in fresh_probes.read_text()


def test_the_build_log_line_names_the_error_without_the_compilers_temporary_file():
    text = ("RuntimeError: clBuildProgram failed: BUILD_PROGRAM_FAILURE - clBuildProgram failed\n\n"
            "Build on <pyopencl.Device 'cpu' on 'Portable Computing Language'>:\n\n"
            "error: unknown target CPU 'generic'\nnote: valid target CPU values are: nocona, core2\n"
            "(options: -cl-std=CL1.2)")
    assert device_probe._first_error_line(text) == "error: unknown target CPU 'generic'"
    assert device_probe._first_error_line("error: /root/.cache/pocl/kcache/tempfile_ab.cl:3:2: bad thing") == \
        "error: bad thing"
    assert device_probe._first_error_line('1:3:2: error: "bad thing"') == 'error: "bad thing"'  # Intel's form


def test_intels_runtime_is_tried_before_pocl():
    """By the drivers' table in docs/performance.md: Intel's runtime 0.73-0.75x PoCL 3.0's time per
    frame on the 1000-cube pile."""
    pocl = device.DeviceInfo(0, 0, "Portable Computing Language", "pthread-CPU", False, 2 ** 30, (1, 2), frozenset())
    intel = device.DeviceInfo(1, 0, "Intel(R) OpenCL", "CPU", False, 2 ** 30, (3, 0), frozenset())
    other = device.DeviceInfo(2, 0, "Other CPU driver", "CPU", False, 2 ** 30, (1, 2), frozenset())
    gpu = device.DeviceInfo(3, 0, "NVIDIA CUDA", "GPU", True, 2 ** 30, (3, 0), frozenset())
    assert device.candidates([other, pocl, intel, gpu]) == [gpu, intel, pocl, other]
    assert device.candidates([other, pocl, intel, gpu], "cpu") == [intel, pocl, other]


def test_intels_runtime_in_the_pythons_prefix_is_exposed_to_the_loader(monkeypatch, tmp_path):
    """pip puts Intel's CPU runtime in <prefix>/lib with an ICD file naming a placeholder path: the
    add-on writes one naming the real library, beside the user's own OCL_ICD_VENDORS drivers."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / device.INTEL_CPU_LIBRARY).write_bytes(b"")
    user = tmp_path / "vendors"
    user.mkdir()
    (user / "gpu.icd").write_text("/opt/gpu/libgpu.so\n")
    monkeypatch.setattr(device.sys, "prefix", str(tmp_path))
    monkeypatch.setenv("OCL_ICD_VENDORS", str(user))
    monkeypatch.delenv("PRB_OPENCL_VENDORS_EXPOSED", raising=False)
    monkeypatch.setattr(device.sys, "platform", "linux")
    device._expose_bundled_drivers()
    folder = Path(os.environ["OCL_ICD_VENDORS"])
    assert folder != user
    files = {path.name: path.read_text().strip() for path in folder.glob("*.icd")}
    assert files["gpu.icd"] == "/opt/gpu/libgpu.so"
    assert str(tmp_path / "lib" / device.INTEL_CPU_LIBRARY) in files.values()


def test_a_gpu_under_a_display_watchdog_keeps_a_launch_per_colour(monkeypatch):
    """NVIDIA's driver ends (and on Windows resets itself over) a launch longer than about 2 s on a GPU
    that drives a display (CL_DEVICE_KERNEL_EXEC_TIMEOUT_NV): there the passes stay a launch per
    colour, each short, rather than a substep's passes in one launch; elsewhere NVIDIA GPUs take the
    one launch."""
    from addon.core.solve_launches import ONE_LAUNCH_VARIABLE, one_launch_passes
    monkeypatch.delenv(ONE_LAUNCH_VARIABLE, raising=False)
    nvidia = frozenset({"cl_nv_device_attribute_query"})
    compute = device.DeviceInfo(0, 0, "NVIDIA CUDA", "H100", True, 2 ** 36, (1, 2), nvidia, "", False)
    display = device.DeviceInfo(0, 0, "NVIDIA CUDA", "RTX", True, 2 ** 33, (1, 2), nvidia, "", True)
    assert one_launch_passes(compute) and not one_launch_passes(display)
    monkeypatch.setenv(ONE_LAUNCH_VARIABLE, "1")
    assert one_launch_passes(display)  # the override still rules


def test_the_watchdog_flag_is_read_from_nvidias_query_and_assumed_when_unreadable():
    class Unreadable:
        @property
        def kernel_exec_timeout_nv(self):
            raise cl.LogicError("clGetDeviceInfo failed: INVALID_VALUE")

    nvidia = {"cl_nv_device_attribute_query"}
    assert device._kernel_timeout(cl, SimpleNamespace(kernel_exec_timeout_nv=1), nvidia) is True
    assert device._kernel_timeout(cl, SimpleNamespace(kernel_exec_timeout_nv=0), nvidia) is False
    assert device._kernel_timeout(cl, Unreadable(), nvidia) is True
    assert device._kernel_timeout(cl, Unreadable(), set()) is False  # not NVIDIA: no such watchdog query


def test_a_selector_matches_a_platforms_name_before_a_devices(monkeypatch):
    """PoCL names its CPU device after the processor ("pthread-Intel(R) Xeon(R) ..."), so "intel" must
    mean Intel's runtime wherever it is listed."""
    pocl = SimpleNamespace(name="Portable Computing Language", version="OpenCL 3.0 PoCL 3.0",
                           get_devices=lambda: [_fake_device("pthread-Intel(R) Xeon(R) Processor", "OpenCL C 1.2 ", gpu=False)])
    intel = SimpleNamespace(name="Intel(R) OpenCL", version="OpenCL 3.0 LINUX",
                            get_devices=lambda: [_fake_device("Intel(R) Xeon(R) Processor", "OpenCL C 3.0 ", gpu=False)])
    monkeypatch.setattr(cl, "get_platforms", lambda: [pocl, intel])
    monkeypatch.setattr(device, "probe_device", lambda info: None)
    assert device.choose_device("intel").platform_name == "Intel(R) OpenCL"
    assert device.choose_device("xeon").platform_name == "Portable Computing Language"  # the first listed
    assert device.choose_device("portable").platform_name == "Portable Computing Language"
