"""OpenCL device discovery and choice: selectors, fallbacks and the messages users get."""
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
