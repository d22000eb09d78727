"""A stand-in for PyPI on 127.0.0.1: small wheels laid out as Intel's runtime wheels are (libraries in
``*.data/data/lib/``, one library under several names, a loader and a gdb script to leave out), and
PyPI's JSON API listing them, served by http.server from a thread. Shared by the core's and the CLI's
tests of addon/core/cpu_driver.py."""
from __future__ import annotations

import hashlib
import io
import json
import posixpath
import threading
import zipfile
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from addon.core import cpu_driver

# what each fake wheel holds in its data/lib: name -> content (the same bytes: one library, two names)
INTELOCL = b"\x7fELF fake libintelocl " * 40
CLANG = b"\x7fELF fake libcommon_clang " * 60
TBB = b"\x7fELF fake libtbb " * 30
LIBRARIES = {
    "intel-opencl-rt": {
        "libintelocl.so": INTELOCL, "libintelocl.so.2026.22.10.0": INTELOCL,
        "libcommon_clang.so": CLANG, "libcommon_clang.so.2026.22.10.0": CLANG,
        "cl.cfg": b"CL_CONFIG_USE_VECTORIZER=True\n", "clbltfnz1.rtl": b"fake builtins z1",
        "libocl_svml_z1.so": b"fake svml z1",
        "libOpenCL.so": b"fake loader", "libOpenCL.so.1": b"fake loader", "libOpenCL.so.1.0.0": b"fake loader",
        "libintelocl.so-gdb.py": b"# gdb script\n",
    },
    "intel-cmplr-lib-rt": {
        "libimf.so": b"fake imf", "libsvml.so": b"fake svml", "libirng.so": b"fake irng",
        "libintlc.so.5": b"fake intlc", "libintlc.so": b"INPUT (libintlc.so.5)", "icx-lto.so": b"fake lto",
        "libirc.so": b"fake irc", "libonnxruntime.1.12.22.721.so": b"fake onnxruntime",
    },
    "tbb": {"libtbb.so": TBB, "libtbb.so.12": TBB, "libtbb.so.12.20": TBB, "libtbbmalloc.so.2": b"fake malloc"},
}
# what the install's lib folder holds: files, and links -> the file they name
EXPECTED_FILES = {"libintelocl.so.2026.22.10.0", "libcommon_clang.so.2026.22.10.0", "cl.cfg", "clbltfnz1.rtl",
                  "libocl_svml_z1.so", "libimf.so", "libsvml.so", "libirng.so", "libintlc.so.5", "libtbb.so.12",
                  "libonnxruntime.1.12.22.721.so"}
EXPECTED_LINKS = {"libintelocl.so": "libintelocl.so.2026.22.10.0",
                  "libcommon_clang.so": "libcommon_clang.so.2026.22.10.0"}
EULA = b"Intel End User License Agreement for Developer Tools (fake)\n"


def make_wheel(name: str, version: str, libraries: dict[str, bytes]) -> tuple[str, bytes]:
    """(file name, bytes) of a wheel with ``libraries`` in its data/lib."""
    dist = f"{name.replace('-', '_')}-{version}"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for library, content in libraries.items():
            info = zipfile.ZipInfo(f"{dist}.data/data/lib/{library}")
            info.external_attr = 0o100755 << 16
            archive.writestr(info, content)
        archive.writestr(f"{dist}.data/data/etc/OpenCL/vendors/intel-cpu.icd", b"/opt/placeholder/libintelocl.so\n")
        archive.writestr(f"{dist}.data/data/share/doc/{name}/licensing/EULA.txt", EULA)
        archive.writestr(f"{dist}.dist-info/METADATA", f"Name: {name}\nVersion: {version}\n")
    return f"{dist}-py2.py3-none-manylinux_2_28_x86_64.whl", buffer.getvalue()


class FakeIndex:
    """The server: ``base`` to give fetch(), ``wheels`` (cpu_driver.WHEELS with these files' hashes),
    ``requests`` (the paths asked for, in order). Change ``files`` (path -> bytes) or ``listed``
    (name -> the JSON entries) to serve something else; ``per_release_route`` False answers only the
    project route, as an index without PyPI's per-release route would; ``relative_urls`` lists the
    files relative to the page, as a mirror may; ``cut_after`` sends only that many bytes of each
    wheel and closes the connection; ``hold`` cleared keeps each wheel waiting until it is set."""

    def __init__(self):
        self.files: dict[str, bytes] = {}
        self.listed: dict[str, list] = {}
        self.requests: list[str] = []
        self.per_release_route = True
        self.relative_urls = False
        self.hold = threading.Event()  # cleared: each wheel waits until it is set again (a slow download)
        self.hold.set()
        self.cut_after: int | None = None
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.wheels = tuple(self.add_release(spec) for spec in cpu_driver.WHEELS)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def add_release(self, spec, version: str | None = None, libraries: dict | None = None):
        """Serve a wheel for ``spec`` (a cpu_driver.Wheel); the spec with its version and hash."""
        version = version or spec.version
        filename, content = make_wheel(spec.name, version, libraries or LIBRARIES[spec.name])
        self.files[f"/files/{filename}"] = content
        digest = hashlib.sha256(content).hexdigest()
        self.listed[f"{spec.name}/{version}"] = [
            {"filename": filename.replace("manylinux_2_28_x86_64", "win_amd64"), "url": f"{self.base}/files/nope",
             "size": 1, "digests": {"sha256": "0" * 64}, "packagetype": "bdist_wheel"},
            {"filename": filename, "url": f"{self.base}/files/{filename}", "size": len(content),
             "digests": {"sha256": digest}, "packagetype": "bdist_wheel"},
        ]
        return replace(spec, version=version, sha256=digest)

    def download_size(self) -> int:
        return sum(self.listed[f"{w.name}/{w.version}"][1]["size"] for w in self.wheels)

    def _handler(self):
        index = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _entries(self, entries):
                if entries is None or not index.relative_urls:
                    return entries
                page = posixpath.dirname(self.path)
                return [dict(e, url=posixpath.relpath(e["url"].removeprefix(index.base), page)) for e in entries]

            def do_GET(self):
                index.requests.append(self.path)
                parts = self.path.strip("/").split("/")
                body = None
                if parts[0] == "pypi" and len(parts) == 4 and parts[3] == "json" and index.per_release_route:
                    entries = self._entries(index.listed.get(f"{parts[1]}/{parts[2]}"))
                    body = json.dumps({"urls": entries}).encode() if entries is not None else None
                elif parts[0] == "pypi" and len(parts) == 3 and parts[2] == "json":
                    releases = {key.split("/")[1]: self._entries(entries) for key, entries in index.listed.items()
                                if key.split("/")[0] == parts[1]}
                    body = json.dumps({"releases": releases, "urls": []}).encode() if releases else None
                elif self.path in index.files:
                    index.hold.wait(10)
                    body = index.files[self.path]
                    if index.cut_after is not None:
                        self.send_response(200)
                        self.send_header("Content-Length", str(len(body)))
                        self.end_headers()
                        self.wfile.write(body[:index.cut_after])
                        self.close_connection = True
                        return
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler

    def wheel_specs(self) -> list[dict]:
        """``wheels`` as JSON, for a process that sets cpu_driver.WHEELS to them."""
        return [dict(vars(w), keep=list(w.keep), leave_out=list(w.leave_out)) for w in self.wheels]

    def close(self):
        self.hold.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()
