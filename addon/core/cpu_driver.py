"""Intel's CPU OpenCL runtime, fetched from PyPI on the user's request into the user's data folder
(device.fetched_driver_folder()), where device.py finds it: for CPUs the PoCL bundled in the Linux
zip cannot compile for (its LLVM 14 predates AMD Zen 5 and Intel's newest cores).

Three wheels, pinned by version and SHA-256: intel-opencl-rt (the runtime), intel-cmplr-lib-rt
(libimf, libsvml, libirng and libintlc, which libintelocl.so needs but the wheel does not declare)
and tbb (libtbb.so.12). Only what the runtime loads is unpacked from each wheel's
``*.data/data/lib/`` (its licence texts beside it, in ``licensing/``). The wheels are Intel's, under
Intel's licence: they are downloaded only when the user asks (Preferences' Get CPU Driver button,
``get-cpu-driver`` on the command line), never by the add-on on its own.

An install is atomic: everything is downloaded, checked and unpacked into a temporary folder beside
the target, which is then renamed into place, so an interrupted fetch never leaves a half driver
where device.py looks. Linux on x86-64 only (the runtime exists for nothing else that the loader
here could use). Imports neither bpy nor numpy.
"""
from __future__ import annotations

import contextlib
import fnmatch
import glob
import hashlib
import http.client
import json
import os
import platform as platform_module
import re
import shutil
import ssl
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Callable

from . import device

PYPI_URL = "https://pypi.org"
URL_VARIABLE = "PRB_PYPI_URL"  # another index with PyPI's JSON API (a mirror; the tests' local server)
MARKER_NAME = "installed.json"
LIBRARY_FOLDER = "lib"
LICENSE_FOLDER = "licensing"
LICENSE_URL = "https://www.intel.com/content/www/us/en/developer/articles/license/end-user-license-agreement.html"
TIMEOUT = 30.0  # seconds without a byte before a connection is given up
CHUNK = 1 << 20


@dataclass(frozen=True)
class Wheel:
    """One wheel of the runtime and what is kept from its ``*.data/data/lib/``: the libraries named
    in ``keep``, or (``keep`` empty) every file but those matching ``leave_out``."""

    name: str
    version: str
    sha256: str
    keep: tuple[str, ...] = ()
    leave_out: tuple[str, ...] = ()

    def kept(self, library: str) -> bool:
        if self.keep:
            return library in self.keep
        return not any(fnmatch.fnmatchcase(library, pattern) for pattern in self.leave_out)


# The SHA-256 of each manylinux x86-64 wheel as PyPI lists it: a file on PyPI never changes under its
# name, so a different one (a compromised mirror or index) is refused before anything is unpacked.
# The 2024.2 release: the 2025 and 2026 ones call oneTBB 2022's get_thread_reference_vertex, which
# the TBB 2021.13 that Blender loads first lacks, so they fail to load inside Blender.
WHEELS = (
    # its libOpenCL.so* is a loader (pyopencl and Blender bring their own); the gdb script is for debugging
    Wheel("intel-opencl-rt", "2024.2.1", "196e8880856b5d7a1f820d1d4eb9ee8d949b39f5c9f0377ca91d33dead64d30d",
          leave_out=("libOpenCL.so*", "*-gdb.py")),
    # `readelf -d libintelocl.so` (and libcommon_clang.so): NEEDED libimf.so, libsvml.so, libirng.so,
    # libintlc.so.5 and libonnxruntime.1.12.22.721.so
    Wheel("intel-cmplr-lib-rt", "2024.2.1", "852f1ce98bc7bc9212202b0743dddeef95d4614f51de48b49e2d936048c9d93e",
          keep=("libimf.so", "libsvml.so", "libirng.so", "libintlc.so.5", "libonnxruntime.1.12.22.721.so")),
    # NEEDED libtbb.so.12; tbbbind and tbbmalloc are optional (TBB runs without them)
    Wheel("tbb", "2021.13.1", "d916359dc685579d09e4b344241550afc1cc034f7f5ec7234c258b6680912d70",
          keep=("libtbb.so.12",)),
)
DOWNLOAD_SIZE_TEXT = "about 250 MB"  # the three wheels' sizes on PyPI: 249,815,549 bytes
RUNTIME_NAME = "Intel's CPU OpenCL runtime"
RESTART_NOTE = "restart Blender to use it (the OpenCL loader reads its list of drivers once per process)"

Progress = Callable[[int, int], None]


class FetchError(RuntimeError):
    """Why the driver could not be fetched (or removed), in one line; nothing was installed."""


class Cancelled(FetchError):
    def __init__(self):
        super().__init__("cancelled: nothing was installed")


def unsupported_reason(platform: str | None = None, machine: str | None = None) -> str | None:
    """Why the driver cannot be fetched here (sys.platform, platform.machine() values), or None."""
    platform = sys.platform if platform is None else platform
    machine = (platform_module.machine() if machine is None else machine).lower()
    if not platform.startswith("linux"):
        return (f"{RUNTIME_NAME} is fetched on Linux only; here the GPU's or the CPU vendor's driver "
                f"provides OpenCL. {device.install_hint(platform)}")
    if machine not in ("x86_64", "amd64"):
        return f"{RUNTIME_NAME} exists for x86-64 CPUs only, not {machine}. {device.install_hint(platform)}"
    return None


def target_folder(folder=None) -> Path:
    return Path(folder) if folder is not None else device.fetched_driver_folder()


def installed(folder=None) -> dict | None:
    """The marker of the driver installed in ``folder`` (default: device.fetched_driver_folder())
    when its library is there, else None."""
    folder = target_folder(folder)
    try:
        marker = json.loads((folder / MARKER_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict) or not (folder / LIBRARY_FOLDER / device.INTEL_CPU_LIBRARY).is_file():
        return None
    return marker


def up_to_date(folder=None) -> dict | None:
    """The marker when the pinned wheels (WHEELS) are what is installed in ``folder``, else None."""
    marker = installed(folder)
    return marker if marker is not None and _same_wheels(marker, WHEELS) else None


def found_library() -> Path | None:
    """Intel's runtime library as device.py finds it (pip's copy in this Python's prefix first, else
    the fetched one), or None."""
    return next((p for p in device.bundled_drivers() if p.name == device.INTEL_CPU_LIBRARY), None)


def _same_wheels(marker: dict, wheels) -> bool:
    try:
        have = [(w["name"], w["version"], w["sha256"]) for w in marker["wheels"]]
    except (KeyError, TypeError):
        return False
    return have == [(w.name, w.version, w.sha256) for w in wheels]


def index_url(base_url: str | None = None) -> str:
    return (base_url or os.environ.get(URL_VARIABLE) or PYPI_URL).rstrip("/")


def _ssl_context() -> ssl.SSLContext:
    """The system's certificates; where this Python finds none (a Blender whose OpenSSL looks in its
    build machine's folders), certifi's, which Blender's Python brings."""
    context = ssl.create_default_context()
    if not context.cert_store_stats().get("x509_ca"):
        with contextlib.suppress(ImportError, OSError):
            import certifi

            context.load_verify_locations(certifi.where())
    return context


def _open(url: str, timeout: float):
    if not url.startswith(("https://", "http://")):
        raise FetchError(f"refused to download from {url}: only http(s) addresses")
    request = urllib.request.Request(url, headers={"User-Agent": "particle-rigid-bodies (Get CPU Driver)"})
    try:
        return urllib.request.urlopen(request, timeout=timeout,
                                      context=_ssl_context() if url.startswith("https://") else None)
    except urllib.error.HTTPError:
        raise
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise FetchError(f"cannot reach {url.split('/pypi/')[0]}: {reason}") from exc


@dataclass(frozen=True)
class _File:
    wheel: Wheel
    filename: str
    url: str
    size: int
    sha256: str


def _release_file(base: str, wheel: Wheel, timeout: float) -> _File:
    """The wheel's manylinux x86-64 file as the index lists it: PyPI's JSON API for the release, else
    (an index without that route) the project's, whose ``releases`` lists the same entries."""
    for url, entries in ((f"{base}/pypi/{wheel.name}/{wheel.version}/json", lambda data: data["urls"]),
                         (f"{base}/pypi/{wheel.name}/json", lambda data: data["releases"][wheel.version])):
        try:
            with _open(url, timeout) as response:
                data = json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                continue
            raise FetchError(f"{url}: HTTP {exc.code} {exc.reason}") from exc
        except (ValueError, OSError, http.client.HTTPException) as exc:
            raise FetchError(f"{url}: not PyPI's JSON ({exc})") from exc
        try:
            files = [f for f in entries(data) if re.search(r"manylinux[^-]*x86_64\.whl$", f["filename"])]
        except (KeyError, TypeError) as exc:
            raise FetchError(f"{url}: not PyPI's JSON (no {exc})") from exc
        if not files:
            raise FetchError(f"{url} lists no manylinux x86-64 wheel of {wheel.name} {wheel.version}")
        entry = files[0]
        try:
            # a mirror may list the file relative to the page, as the simple API allows
            found = _File(wheel, entry["filename"], urllib.parse.urljoin(url, entry["url"]), int(entry["size"]),
                          entry["digests"]["sha256"])
        except (KeyError, TypeError, ValueError) as exc:
            raise FetchError(f"{url}: a file entry without its {exc}") from exc
        if found.sha256.lower() != wheel.sha256.lower():
            raise FetchError(f"{url} lists {found.filename} with SHA-256 {found.sha256}, not the expected "
                             f"{wheel.sha256}: refused")
        return found
    raise FetchError(f"{base} has no {wheel.name} {wheel.version} (HTTP 404)")


def _download(file: _File, into: Path, done: int, total: int, progress: Progress | None, cancel,
              timeout: float) -> int:
    """Stream one wheel into ``into`` and check its size and SHA-256; the bytes done after it."""
    digest, got = hashlib.sha256(), 0
    try:
        with _open(file.url, timeout) as response, into.open("wb") as out:
            while True:
                if cancel is not None and cancel.is_set():
                    raise Cancelled()
                chunk = response.read(CHUNK)
                if not chunk:
                    break
                got += len(chunk)
                if got > file.size:
                    raise FetchError(f"{file.filename}: more than the {file.size:,} bytes the index lists: refused")
                digest.update(chunk)
                out.write(chunk)
                if progress is not None:
                    progress(done + got, total)
    except urllib.error.HTTPError as exc:
        raise FetchError(f"{file.url}: HTTP {exc.code} {exc.reason}") from exc
    except (OSError, http.client.HTTPException) as exc:  # a connection cut or timed out; a full disk
        raise FetchError(f"{file.filename}: download failed ({type(exc).__name__}: {exc})") from exc
    if got != file.size:
        raise FetchError(f"{file.filename}: {got:,} bytes arrived, the index lists {file.size:,}: refused")
    if digest.hexdigest() != file.sha256.lower():
        raise FetchError(f"{file.filename}: its SHA-256 is {digest.hexdigest()}, not the expected "
                         f"{file.sha256}: refused")
    return done + got


_LIB_MEMBER = re.compile(r"^[^/]+\.data/data/lib/([^/]+)$")
_LICENSE_MEMBER = re.compile(r"^[^/]+\.data/data/share/doc/[^/]+/licensing/([^/]+)$")


def _unpack(path: Path, wheel: Wheel, staging: Path, cancel) -> list[str]:
    """Unpack what the runtime needs from one wheel into ``staging``/lib (and its licence texts into
    ``staging``/licensing/<wheel>); the library names it holds."""
    lib = staging / LIBRARY_FOLDER
    with zipfile.ZipFile(path) as archive:
        members = {}
        for info in archive.infolist():
            found = _LIB_MEMBER.match(info.filename)
            if found and wheel.kept(found[1]) and found[1] not in (".", ".."):
                members[found[1]] = info
        missing = [name for name in wheel.keep if name not in members]
        if missing or not members:
            raise FetchError(f"{path.name} lacks {', '.join(missing) or 'any library'} in its data/lib: refused")
        # A wheel cannot hold a symbolic link, so it carries one library under several names
        # (libintelocl.so and libintelocl.so.2026.22.10.0, 100-200 MB each): the bytes are stored
        # once, under the longest name (the versioned one the others point to), the rest linked to it.
        copies: dict[tuple[int, int], list[str]] = {}
        for name, info in members.items():
            copies.setdefault((info.file_size, info.CRC), []).append(name)
        for names in copies.values():
            names.sort(key=lambda n: (-len(n), n))
            _copy_member(archive, members[names[0]], lib / names[0], cancel)
            for alias in names[1:]:
                os.symlink(names[0], lib / alias)
        licences = staging / LICENSE_FOLDER / wheel.name
        for info in archive.infolist():
            found = _LICENSE_MEMBER.match(info.filename)
            if found and found[1] not in (".", ".."):
                licences.mkdir(parents=True, exist_ok=True)
                _copy_member(archive, info, licences / found[1], cancel)
    return sorted(members)


def _copy_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, into: Path, cancel) -> None:
    with archive.open(info) as source, into.open("wb") as out:
        while chunk := source.read(CHUNK):
            if cancel is not None and cancel.is_set():
                raise Cancelled()
            out.write(chunk)
    mode = (info.external_attr >> 16) & 0o777
    into.chmod(mode | 0o644 if mode else 0o644)


@contextlib.contextmanager
def _locked(target: Path):
    """One fetch or removal at a time per target, across processes (two Blenders, Blender and the
    command line). Under it, what an interrupted fetch left beside the target is removed."""
    try:
        import fcntl
    except ImportError:  # Windows: never installed there, but remove() may look
        fcntl = None
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{target.name}.lock", "w") as lock:
        try:
            if fcntl is not None:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            raise FetchError(f"another fetch or removal of the CPU driver in {target} is running") from exc
        for leftover in target.parent.glob(f".{glob.escape(target.name)}-*"):
            if leftover.is_dir():
                shutil.rmtree(leftover, ignore_errors=True)
        yield


def _check_ours(target: Path) -> None:
    """Refuse to replace or remove a folder this module did not make (PRB_CPU_DRIVER_FOLDER may name
    any folder): it must be empty or hold the marker."""
    if target.is_dir() and not (target / MARKER_NAME).is_file() and any(target.iterdir()):
        raise FetchError(f"{target} holds files that are not a CPU driver this add-on installed: "
                         f"remove them or choose another folder (PRB_CPU_DRIVER_FOLDER)")
    if target.exists() and not target.is_dir():
        raise FetchError(f"{target} is a file, not a folder")


def _put_in_place(staging: Path, target: Path) -> None:
    """Rename the finished folder onto the target (a previous install first renamed aside)."""
    aside = None
    if target.exists():
        aside = Path(tempfile.mkdtemp(prefix=f".{target.name}-old-", dir=target.parent))
        aside.rmdir()
        os.rename(target, aside)
    try:
        os.rename(staging, target)
    except OSError:
        if aside is not None:
            os.rename(aside, target)
        raise
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)


def fetch(folder=None, *, base_url: str | None = None, wheels=None, progress: Progress | None = None,
          cancel=None, timeout: float = TIMEOUT) -> dict:
    """Download, check and install the runtime into ``folder`` (default device.fetched_driver_folder());
    the marker of what is installed. Nothing is done when the same wheels (default WHEELS) are
    installed there.
    ``progress(bytes done, bytes in all)`` is called as the wheels arrive; ``cancel`` (a
    threading.Event) stops it. Raises FetchError (Cancelled) with nothing installed or changed."""
    reason = unsupported_reason()
    if reason:
        raise FetchError(reason)
    wheels = WHEELS if wheels is None else wheels
    target = target_folder(folder)
    current = installed(target)
    if current is not None and _same_wheels(current, wheels):
        return current
    base = index_url(base_url)
    started = time.monotonic()
    try:
        with _locked(target):
            _check_ours(target)
            files = [_release_file(base, wheel, timeout) for wheel in wheels]
            total = sum(f.size for f in files)
            free = shutil.disk_usage(target.parent).free
            if free < 2.5 * total:  # the wheels and what is unpacked from them (about 1.4 times as much)
                raise FetchError(f"{target.parent} has {free / 1e6:,.0f} MB free; the driver needs about "
                                 f"{2.5 * total / 1e6:,.0f} MB while installing")
            staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-partial-", dir=target.parent))
            try:
                staging.chmod(0o755)  # mkdtemp's 0700 would hide a shared install (a render farm's) from others
                done = 0
                if progress is not None:
                    progress(0, total)
                downloads = []
                for file in files:
                    path = staging / file.filename
                    done = _download(file, path, done, total, progress, cancel, timeout)
                    downloads.append(path)
                (staging / LIBRARY_FOLDER).mkdir()
                libraries = []
                for file, path in zip(files, downloads):
                    libraries += _unpack(path, file.wheel, staging, cancel)
                    path.unlink()
                if device.INTEL_CPU_LIBRARY not in libraries:
                    raise FetchError(f"the wheels hold no {device.INTEL_CPU_LIBRARY}: refused")
                marker = {
                    "runtime": RUNTIME_NAME,
                    "version": files[0].wheel.version,
                    "wheels": [{"name": f.wheel.name, "version": f.wheel.version, "filename": f.filename,
                                "size": f.size, "sha256": f.sha256} for f in files],
                    "source": base,
                    "installed": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "seconds": round(time.monotonic() - started, 1),
                    "libraries": sorted(libraries),
                }
                (staging / MARKER_NAME).write_text(json.dumps(marker, indent=1) + "\n", encoding="utf-8")
                _put_in_place(staging, target)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    except OSError as exc:  # a folder that cannot be written, a full disk while unpacking
        raise FetchError(f"could not install into {target}: {exc}") from exc
    except zipfile.BadZipFile as exc:
        raise FetchError(f"a downloaded wheel is not a zip ({exc}): refused") from exc
    return marker


def remove(folder=None) -> bool:
    """Delete the fetched driver from ``folder`` (default device.fetched_driver_folder()); False when
    none was there. Renamed aside first, so that an interrupted removal leaves no half driver."""
    target = target_folder(folder)
    if not target.exists():
        return False
    try:
        with _locked(target):
            _check_ours(target)
            if not target.exists():
                return False
            aside = Path(tempfile.mkdtemp(prefix=f".{target.name}-old-", dir=target.parent))
            aside.rmdir()
            os.rename(target, aside)
            shutil.rmtree(aside, ignore_errors=True)
    except OSError as exc:
        raise FetchError(f"could not remove {target}: {exc}") from exc
    return True


def installed_size(folder=None) -> int:
    """Bytes the installed driver takes (each file once, links not followed)."""
    total = 0
    for path in target_folder(folder).rglob("*"):
        if path.is_file() and not path.is_symlink():
            total += path.stat().st_size
    return total


def describe(marker: dict, folder=None) -> str:
    """One line: what is installed, and where."""
    return (f"{marker.get('runtime', RUNTIME_NAME)} {marker.get('version', '?')} in "
            f"{target_folder(folder) / LIBRARY_FOLDER}")


def offer_text() -> str:
    """What Get CPU Driver does, for the button's tooltip, the Preferences and the command line."""
    return (f"Downloads {RUNTIME_NAME} ({DOWNLOAD_SIZE_TEXT}, under Intel's licence) from PyPI into "
            f"{device.fetched_driver_folder()}, for CPUs the bundled driver cannot compile for "
            f"(AMD Zen 5, Intel's newest).")
