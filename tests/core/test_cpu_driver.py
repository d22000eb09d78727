"""Get CPU Driver (addon/core/cpu_driver.py) against a fake PyPI on 127.0.0.1 (tests/core/fake_pypi.py):
what is downloaded, checked and unpacked, that a refused or interrupted fetch installs nothing
device.py could pick up, the marker, the second call that does nothing, and the removal."""
from __future__ import annotations

import json
import os
import socket
import sys
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from addon.core import cpu_driver, device
from tests.core.fake_pypi import EULA, EXPECTED_FILES, EXPECTED_LINKS, INTELOCL, LIBRARIES, FakeIndex


@pytest.fixture
def index():
    served = FakeIndex()
    yield served
    served.close()


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """PRB_CPU_DRIVER_FOLDER in a fresh folder, and this Python's prefix somewhere without pip's
    copy of the runtime, so that device.bundled_drivers() can find only the fetched one."""
    target = tmp_path / "user-data" / "cpu-driver"
    monkeypatch.setenv("PRB_CPU_DRIVER_FOLDER", str(target))
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "prefix"))
    monkeypatch.delenv(cpu_driver.URL_VARIABLE, raising=False)
    return target


def intel_drivers() -> list[Path]:
    return [p for p in device.bundled_drivers() if p.name == device.INTEL_CPU_LIBRARY]


def beside(target: Path) -> list[str]:
    """What is in the target's parent folder besides the target and the lock file."""
    if not target.parent.exists():
        return []
    return sorted(p.name for p in target.parent.iterdir() if p.name not in (target.name, f".{target.name}.lock"))


def test_fetch_unpacks_what_the_runtime_needs_and_device_finds_it(index, folder):
    assert intel_drivers() == []
    calls = []
    marker = cpu_driver.fetch(base_url=index.base, wheels=index.wheels, progress=lambda *a: calls.append(a))
    lib = folder / "lib"
    files = {p.name for p in lib.iterdir() if not p.is_symlink()}
    links = {p.name: os.readlink(p) for p in lib.iterdir() if p.is_symlink()}
    assert files == EXPECTED_FILES
    assert links == EXPECTED_LINKS  # one copy of each library the wheel holds under two names
    assert (lib / "libintelocl.so").read_bytes() == INTELOCL
    assert (lib / "libimf.so").read_bytes() == LIBRARIES["intel-cmplr-lib-rt"]["libimf.so"]
    assert os.access(lib / "libintelocl.so.2026.22.10.0", os.X_OK)  # the wheel's file mode
    assert (folder / "licensing" / "intel-opencl-rt" / "EULA.txt").read_bytes() == EULA
    assert sorted(p.name for p in folder.iterdir()) == ["installed.json", "lib", "licensing"]
    assert folder.stat().st_mode & 0o777 == 0o755
    assert beside(folder) == []  # the wheels and the temporary folder are gone
    # progress: bytes done of all three wheels, rising to the total the index lists
    total = index.download_size()
    assert calls[0] == (0, total) and calls[-1] == (total, total)
    assert all(t == total for _, t in calls) and [d for d, _ in calls] == sorted(d for d, _ in calls)
    # the marker says what is installed
    on_disk = json.loads((folder / "installed.json").read_text())
    assert on_disk == marker == cpu_driver.installed()
    assert marker["version"] == "2024.2.1" and marker["source"] == index.base
    assert [(w["name"], w["version"], w["sha256"]) for w in marker["wheels"]] == [
        (w.name, w.version, w.sha256) for w in index.wheels]
    assert marker["installed"].startswith("20") and marker["installed"].endswith("Z")
    assert intel_drivers() == [folder / "lib" / "libintelocl.so"]
    assert cpu_driver.found_library() == folder / "lib" / "libintelocl.so"
    assert cpu_driver.describe(marker) == f"Intel's CPU OpenCL runtime 2024.2.1 in {folder / 'lib'}"


def test_a_second_fetch_of_the_same_wheels_does_nothing(index, folder, monkeypatch):
    first = cpu_driver.fetch(base_url=index.base, wheels=index.wheels)
    assert cpu_driver.up_to_date() is None  # not the pinned wheels
    monkeypatch.setattr(cpu_driver, "WHEELS", index.wheels)
    assert cpu_driver.up_to_date() == first
    inode = (folder / "lib").stat().st_ino
    asked = len(index.requests)
    assert cpu_driver.fetch(base_url=index.base, wheels=index.wheels) == first
    assert cpu_driver.fetch(base_url=index.base) == first  # WHEELS by default
    assert len(index.requests) == asked  # not even the index
    assert (folder / "lib").stat().st_ino == inode


def test_other_wheels_replace_the_install(index, folder):
    cpu_driver.fetch(base_url=index.base, wheels=index.wheels)
    newer_lib = dict(LIBRARIES["intel-opencl-rt"], **{"libintelocl.so": b"newer", "libintelocl.so.2026.22.10.0": b"newer"})
    newer = (index.add_release(index.wheels[0], "2026.3.0", newer_lib),) + index.wheels[1:]
    marker = cpu_driver.fetch(base_url=index.base, wheels=newer)
    assert marker["version"] == "2026.3.0" == cpu_driver.installed()["version"]
    assert (folder / "lib" / "libintelocl.so").read_bytes() == b"newer"
    assert beside(folder) == []  # the previous install is gone, not left aside


def test_the_environment_variable_names_the_index(index, folder, monkeypatch):
    monkeypatch.setenv(cpu_driver.URL_VARIABLE, index.base + "/")
    cpu_driver.fetch(wheels=index.wheels)
    assert index.requests[0] == "/pypi/intel-opencl-rt/2024.2.1/json"
    assert cpu_driver.installed()["source"] == index.base


def test_an_index_without_the_per_release_route_is_read_through_the_project_route(index, folder):
    index.per_release_route = False
    cpu_driver.fetch(base_url=index.base, wheels=index.wheels)
    assert "/pypi/intel-opencl-rt/json" in index.requests
    assert intel_drivers() == [folder / "lib" / "libintelocl.so"]


@pytest.mark.parametrize("per_release_route", [True, False])
def test_files_listed_relative_to_the_page_are_found(index, folder, per_release_route):
    index.relative_urls, index.per_release_route = True, per_release_route
    cpu_driver.fetch(base_url=index.base, wheels=index.wheels)
    assert intel_drivers() == [folder / "lib" / "libintelocl.so"]


def test_the_pinned_hashes_are_the_manylinux_wheels_of_the_pinned_versions():
    assert [(w.name, w.version) for w in cpu_driver.WHEELS] == [
        ("intel-opencl-rt", "2024.2.1"), ("intel-cmplr-lib-rt", "2024.2.1"), ("tbb", "2021.13.1")]
    assert all(len(w.sha256) == 64 and int(w.sha256, 16) for w in cpu_driver.WHEELS)


def _refused(folder: Path, match: str, fetch):
    with pytest.raises(cpu_driver.FetchError, match=match):
        fetch()
    assert not folder.exists() and beside(folder) == []
    assert cpu_driver.installed() is None and intel_drivers() == []


def test_a_wheel_whose_bytes_do_not_match_the_hash_is_refused_and_nothing_installed(index, folder):
    path = f"/files/{index.listed['tbb/2021.13.1'][1]['filename']}"
    content = bytearray(index.files[path])
    content[-1] ^= 1  # same size, other bytes
    index.files[path] = bytes(content)
    _refused(folder, "its SHA-256 is .* not the expected",
             lambda: cpu_driver.fetch(base_url=index.base, wheels=index.wheels))


def test_an_index_listing_another_hash_than_the_pinned_one_is_refused_before_downloading(index, folder):
    pinned = (replace(index.wheels[0], sha256="ab" * 32),) + index.wheels[1:]
    _refused(folder, "not the expected", lambda: cpu_driver.fetch(base_url=index.base, wheels=pinned))
    assert not any(r.startswith("/files/") for r in index.requests)


def test_an_interrupted_download_installs_nothing(index, folder):
    index.cut_after = 100
    _refused(folder, "download failed|bytes arrived", lambda: cpu_driver.fetch(base_url=index.base, wheels=index.wheels))


@pytest.mark.parametrize("stop", ["cancel", "interrupt"])
def test_a_fetch_stopped_midway_installs_nothing(index, folder, stop):
    """Cancelled (the UI's Esc) or interrupted (Ctrl+C) after the first wheel: the partial folder goes."""
    cancel = threading.Event()
    first_size = index.listed["intel-opencl-rt/2024.2.1"][1]["size"]

    def progress(done, total):
        if done > first_size:
            if stop == "cancel":
                cancel.set()
            else:
                raise KeyboardInterrupt

    fetch = lambda: cpu_driver.fetch(base_url=index.base, wheels=index.wheels, progress=progress, cancel=cancel)  # noqa: E731
    if stop == "cancel":
        _refused(folder, "cancelled: nothing was installed", fetch)
        # the download stops at once, not after the other wheels (the runtime's is 225 MB)
        assert [r for r in index.requests if r.startswith("/files/")] == [
            f"/files/{index.listed[f'{w.name}/{w.version}'][1]['filename']}" for w in index.wheels[:2]]
    else:
        with pytest.raises(KeyboardInterrupt):
            fetch()
        assert not folder.exists() and beside(folder) == [] and intel_drivers() == []


def test_what_a_killed_fetch_left_is_never_found_and_the_next_fetch_clears_it(index, folder):
    partial = folder.parent / f".{folder.name}-partial-x1y2"
    (partial / "lib").mkdir(parents=True)
    (partial / "lib" / "libintelocl.so").write_bytes(b"half")
    assert intel_drivers() == []
    cpu_driver.fetch(base_url=index.base, wheels=index.wheels)
    assert not partial.exists() and beside(folder) == []


def test_an_unreachable_index_is_one_line(folder):
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    _refused(folder, r"cannot reach http://127\.0\.0\.1:\d+",
             lambda: cpu_driver.fetch(base_url=f"http://127.0.0.1:{port}", timeout=5))


def test_a_release_missing_from_the_index_is_named(index, folder):
    del index.listed["tbb/2021.13.1"]
    _refused(folder, "has no tbb 2021.13.1", lambda: cpu_driver.fetch(base_url=index.base, wheels=index.wheels))


def test_a_folder_holding_other_files_is_neither_replaced_nor_removed(index, folder):
    folder.mkdir(parents=True)
    (folder / "notes.txt").write_text("mine")
    for action in (lambda: cpu_driver.fetch(base_url=index.base, wheels=index.wheels), cpu_driver.remove):
        with pytest.raises(cpu_driver.FetchError, match="not a CPU driver this add-on installed"):
            action()
        assert (folder / "notes.txt").read_text() == "mine"


def test_remove_deletes_the_install(index, folder):
    assert cpu_driver.remove() is False
    cpu_driver.fetch(base_url=index.base, wheels=index.wheels)
    assert intel_drivers()
    assert cpu_driver.remove() is True
    assert not folder.exists() and beside(folder) == []
    assert cpu_driver.installed() is None and intel_drivers() == []
    assert cpu_driver.remove() is False


def test_only_linux_on_x86_64_is_offered(index, folder, monkeypatch):
    assert cpu_driver.unsupported_reason("linux", "x86_64") is None
    assert "Linux only" in cpu_driver.unsupported_reason("win32", "AMD64")
    assert "Linux only" in cpu_driver.unsupported_reason("darwin", "arm64")
    assert "x86-64 CPUs only, not aarch64" in cpu_driver.unsupported_reason("linux", "aarch64")
    monkeypatch.setattr(cpu_driver.platform_module, "machine", lambda: "aarch64")
    _refused(folder, "x86-64 CPUs only", lambda: cpu_driver.fetch(base_url=index.base, wheels=index.wheels))
    assert index.requests == []


def test_the_hint_names_both_pip_packages_the_library_needs(monkeypatch):
    """intel-opencl-rt does not declare intel-cmplr-lib-rt, whose libimf.so, libsvml.so, libirng.so and
    libintlc.so.5 libintelocl.so loads: pip installing the first alone leaves a library that fails to load."""
    monkeypatch.setattr(device.sys, "platform", "linux")
    hint = device.cpu_driver_hint()
    assert "pip install 'intel-opencl-rt==2024.2.*' 'intel-cmplr-lib-rt==2024.2.*'" in hint
    assert "Get CPU Driver" in hint and "get-cpu-driver" in hint
