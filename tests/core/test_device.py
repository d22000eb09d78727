"""OpenCL device discovery and choice: selectors, fallbacks and the messages users get."""
import re
from types import SimpleNamespace

import pyopencl as cl
import pytest

from addon.core import device
from tests.skip_reasons import SKIP_NOT_POCL_ONLY


def test_selectors_pick_devices():
    devices = device.list_devices()
    assert devices
    first = devices[0]
    assert device.choose_device(first.selector) == first
    assert device.choose_device(first.device_name[:10].lower()).device_name == first.device_name
    gpus = [d for d in devices if d.is_gpu]
    # auto prefers a GPU and falls back to the CPU (CI has none: PoCL's CPU device)
    assert device.choose_device("auto") == (gpus[0] if gpus else first)
    if any(not d.is_gpu for d in devices):
        assert not device.choose_device("cpu").is_gpu


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


def test_pocl_without_its_linker_is_left_out_with_a_message(monkeypatch):
    if not all(device.POCL_PLATFORM in d.platform_name for d in device.list_devices()):
        pytest.skip(SKIP_NOT_POCL_ONLY)
    monkeypatch.setattr(device, "pocl_toolchain_missing", lambda: ["ld (binutils)"])
    with pytest.raises(device.OpenCLUnavailable, match="binutils"):
        device.list_devices()


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
