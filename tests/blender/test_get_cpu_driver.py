"""Get CPU Driver in Blender and on the command line, against a fake PyPI on 127.0.0.1
(tests/core/fake_pypi.py): `blender --command particle_bodies get-cpu-driver` and the script's
--get-cpu-driver (exit status, progress lines, one error line), the operator (its download thread
and modal timer, Esc, Allow Online Access off), the Preferences box in each state and the sidebar's
pointer to it when no device runs the kernels."""
from __future__ import annotations

import json
import socket
import sys
import threading
import time

import pytest

from prb_helpers import StrictLayout, bpy, draw_panel
from test_bake_paths import _Delegate, _Event, _WindowContext, operator_in_a_window
from test_register_cli import run_python

from addon.blender import cpu_driver as driver_ui
from addon.blender import panels, preferences, properties
from addon.core import cpu_driver, device
from tests.core.fake_pypi import FakeIndex


@pytest.fixture
def index():
    served = FakeIndex()
    yield served
    served.close()


def _closed_port() -> int:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        return unused.getsockname()[1]


# -- the command line ------------------------------------------------------------------------------

# Runs each case through the real entry points in this one process, with the fake wheels' hashes
# pinned instead of PyPI's; before each case it asks the server for /case/<name>, so that the
# server's log tells which requests each case made.
DRIVER = """
    import contextlib, io, json, os, sys, urllib.request
    import bpy
    cases = json.loads(sys.argv[1])
    sys.argv = ["python"]
    from addon import cli
    from addon.blender import cpu_driver as driver_ui
    from addon.core import cpu_driver
    results = {}
    for name, case in cases.items():
        cpu_driver.WHEELS = tuple(cpu_driver.Wheel(**dict(w, keep=tuple(w["keep"]), leave_out=tuple(w["leave_out"])))
                                  for w in case["wheels"])
        os.environ.update(PRB_PYPI_URL=case["url"], PRB_CPU_DRIVER_FOLDER=case["folder"])
        cli.INSIDE_BLENDER = case.get("inside_blender", False)
        driver_ui.online_access = lambda: case.get("online", True)
        with contextlib.suppress(OSError):
            urllib.request.urlopen(case["url"] + "/case/" + name.replace(" ", "-"), timeout=5)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            if case["entry"] == "command":
                code = cli.command(case["argv"])
            else:
                try:
                    cli.main(case["argv"])
                    code = 0
                except SystemExit as exc:
                    code = exc.code
        results[name] = dict(code=code, stdout=out.getvalue(), stderr=err.getvalue())
    print("RESULTS" + json.dumps(results))
"""


@pytest.fixture(scope="module")
def cli_runs(tmp_path_factory):
    """{case: (exit code, stdout, stderr, the requests it made)}, and the folders they used."""
    folders = {k: tmp_path_factory.mktemp("cli-driver") / "cpu-driver" for k in ("command", "script", "bad", "off")}
    good, bad = FakeIndex(), FakeIndex()
    try:
        tbb = f"/files/{bad.listed['tbb/2021.13.1'][1]['filename']}"
        bad.files[tbb] = bad.files[tbb][:-1] + bytes([bad.files[tbb][-1] ^ 1])  # same size, other bytes
        at = dict(url=good.base, wheels=good.wheel_specs())
        cases = {
            "fetch": dict(at, entry="command", argv=["get-cpu-driver"], folder=str(folders["command"])),
            "again": dict(at, entry="command", argv=["get-cpu-driver"], folder=str(folders["command"])),
            "remove": dict(at, entry="command", argv=["get-cpu-driver", "--remove"], folder=str(folders["command"])),
            "remove again": dict(at, entry="command", argv=["get-cpu-driver", "--remove"],
                                 folder=str(folders["command"])),
            "script": dict(at, entry="main", argv=["python", "--get-cpu-driver"], folder=str(folders["script"])),
            "script remove": dict(at, entry="main", argv=["python", "--remove-cpu-driver"],
                                  folder=str(folders["script"])),
            "bad hash": dict(url=bad.base, wheels=bad.wheel_specs(), entry="command", argv=["get-cpu-driver"],
                             folder=str(folders["bad"])),
            "bad hash verbose": dict(url=bad.base, wheels=bad.wheel_specs(), entry="command",
                                     argv=["get-cpu-driver", "--verbose"], folder=str(folders["bad"])),
            "unreachable": dict(url=f"http://127.0.0.1:{_closed_port()}", wheels=good.wheel_specs(),
                                entry="command", argv=["get-cpu-driver"], folder=str(folders["bad"])),
            "offline in Blender": dict(at, entry="command", argv=["get-cpu-driver"], folder=str(folders["off"]),
                                       inside_blender=True, online=False),
            "online in Blender": dict(at, entry="command", argv=["get-cpu-driver"], folder=str(folders["off"]),
                                      inside_blender=True, online=True),
            "help": dict(at, entry="command", argv=["--help"], folder=str(folders["off"])),
        }
        proc = run_python(DRIVER, json.dumps(cases))
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        results = json.loads(proc.stdout.split("RESULTS", 1)[1])
        requests = {}
        for log in (good.requests, bad.requests):
            name = None
            for path in log:
                if path.startswith("/case/"):
                    name = path.removeprefix("/case/").replace("-", " ")
                    requests.setdefault(name, [])
                else:
                    requests[name].append(path)
        return {name: (r["code"], r["stdout"], r["stderr"], requests.get(name, [])) for name, r in results.items()}, \
            folders, good
    finally:
        good.close()
        bad.close()


def test_the_command_fetches_with_progress_lines_and_exits_0(cli_runs):
    runs, folders, good = cli_runs
    code, out, err, asked = runs["fetch"]
    assert code == 0 and err == "", err
    lines = out.splitlines()
    assert lines[0].startswith("PRB: Downloads Intel's CPU OpenCL runtime (about 250 MB, under Intel's licence) "
                               f"from PyPI into {folders['command']}")
    progress = [line for line in lines if line.startswith("PRB: downloaded ")]
    total = good.download_size() / 1e6
    assert progress[0] == f"PRB: downloaded 0 of {total:,.0f} MB (0%)"
    assert progress[-1] == f"PRB: downloaded {total:,.0f} of {total:,.0f} MB (100%)"
    assert lines[-1] == (f"PRB: installed Intel's CPU OpenCL runtime 2024.2.1 in {folders['command'] / 'lib'}; "
                         f"Blender and the command line use it from their next start")
    assert sum(p.startswith("/files/") for p in asked) == 3


def test_a_second_run_says_it_is_installed_without_going_online(cli_runs):
    code, out, err, asked = cli_runs[0]["again"]
    assert code == 0 and err == "" and asked == []
    assert out.splitlines()[-1].startswith("PRB: already installed: Intel's CPU OpenCL runtime 2024.2.1 in ")


def test_remove_deletes_it_and_says_so(cli_runs):
    runs, folders, _ = cli_runs
    assert runs["remove"][:3] == (0, f"PRB: removed Intel's CPU OpenCL runtime from {folders['command']}\n", "")
    assert runs["remove again"][:3] == (0, f"PRB: no CPU driver was installed in {folders['command']}\n", "")
    assert not folders["command"].exists()


def test_the_script_route_fetches_and_removes_too(cli_runs):
    runs, folders, _ = cli_runs
    code, out, err, asked = runs["script"]
    assert code == 0 and err == "" and "PRB: installed Intel's CPU OpenCL runtime 2024.2.1" in out
    assert sum(p.startswith("/files/") for p in asked) == 3
    assert runs["script remove"][:3] == (0, f"PRB: removed Intel's CPU OpenCL runtime from {folders['script']}\n", "")
    assert not folders["script"].exists()


def test_a_bad_hash_is_one_error_line_and_nothing_installed(cli_runs):
    runs, folders, _ = cli_runs
    code, out, err, _ = runs["bad hash"]
    assert code == 1 and "Traceback" not in err
    assert err.splitlines() == [err.strip()]  # one line
    assert err.startswith("error: tbb-2021.13.1-py2.py3-none-manylinux_2_28_x86_64.whl: its SHA-256 is ")
    assert "not the expected" in err and "refused" in err
    assert not folders["bad"].exists()
    code, _, err, _ = runs["bad hash verbose"]
    assert code == 1 and "Traceback" in err and err.splitlines()[-1].startswith("error: tbb-")


def test_an_unreachable_index_is_one_error_line(cli_runs):
    code, out, err, _ = cli_runs[0]["unreachable"]
    assert code == 1 and "Traceback" not in err and len(err.splitlines()) == 1
    assert err.startswith("error: cannot reach http://127.0.0.1:"), err


def test_inside_blender_the_command_respects_allow_online_access(cli_runs):
    runs, folders, _ = cli_runs
    code, out, err, asked = runs["offline in Blender"]
    assert (code, asked) == (1, [])
    assert err.strip() == ("error: online access is off in Blender's Preferences: allow it in Preferences > "
                           "System > Network (Allow Online Access), or run blender --online-mode --command "
                           "particle_bodies get-cpu-driver")
    code, out, err, asked = runs["online in Blender"]
    assert code == 0 and "PRB: installed" in out


def test_the_command_help_lists_get_cpu_driver(cli_runs):
    code, out, _, _ = cli_runs[0]["help"]
    assert code == 0 and "get-cpu-driver download Intel's CPU OpenCL runtime (about 250 MB" in " ".join(out.split())


# -- the operator, the Preferences box and the sidebar --------------------------------------------


@pytest.fixture
def driver(registered, index, tmp_path, monkeypatch):
    """Get CPU Driver aimed at the fake index, into a fresh folder, with this Python's prefix (where
    pip's copy of the runtime may be) moved away."""
    # the OpenCL loader's driver list as this process has it (once per process, from the real
    # prefix): moving the prefix below must not hide pip's copy from the tests that come after
    device._expose_bundled_drivers()
    folder = tmp_path / "cpu-driver"
    monkeypatch.setenv("PRB_CPU_DRIVER_FOLDER", str(folder))
    monkeypatch.setenv(cpu_driver.URL_VARIABLE, index.base)
    monkeypatch.setattr(cpu_driver, "WHEELS", index.wheels)
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "prefix"))
    monkeypatch.setattr(driver_ui, "_download", {"thread": None})
    monkeypatch.setattr(driver_ui, "_changed", {"restart": False})
    index.folder = folder
    return index


def box(width=200):
    """The Preferences box: (labels, operators)."""
    layout = StrictLayout()
    driver_ui.draw_box(layout, width)
    return layout.drawn.labels, layout.drawn.operators


def test_offline_the_operator_refuses_and_downloads_nothing(driver, monkeypatch):
    monkeypatch.setattr(driver_ui, "online_access", lambda: False)
    with pytest.raises(RuntimeError, match=r"Online access is off: allow it in Preferences > System > Network"):
        bpy.ops.prb.get_cpu_driver()
    op, context = _modal_operator(monkeypatch), _WindowContext()
    assert op.invoke(context, _Event("LEFTMOUSE", "PRESS")) == {"CANCELLED"}
    assert op.reports == [({"ERROR"}, "Online access is off: allow it in Preferences > System > Network "
                                      "(Allow Online Access), then click Get CPU Driver again")]
    assert driver_ui._download["thread"] is None and context.window_manager.timers == []
    assert driver.requests == [] and not driver.folder.exists()


def test_started_with_offline_mode_the_message_says_so(driver, monkeypatch):
    monkeypatch.setattr(driver_ui, "online_access", lambda: False)
    monkeypatch.setattr(driver_ui, "bpy", _Delegate(bpy, app=_Delegate(bpy.app, online_access_override=True)))
    assert "started with --offline-mode" in driver_ui.online_access_problem()
    assert "--offline-mode forbids going online" in driver_ui.online_access_problem(command_line=True)


def test_execute_fetches_and_remove_deletes(driver, monkeypatch):
    monkeypatch.setattr(driver_ui, "online_access", lambda: True)
    labels, operators = box()
    assert operators == {"prb.get_cpu_driver"}
    text = " ".join(labels)
    assert "about 250 MB, under Intel's licence) from PyPI" in text and str(driver.folder) in text
    assert bpy.ops.prb.get_cpu_driver() == {"FINISHED"}
    assert (driver.folder / "lib" / "libintelocl.so").is_file()
    labels, operators = box()
    assert operators == {"prb.remove_cpu_driver"}
    assert f"Intel's CPU OpenCL runtime 2024.2.1 in {driver.folder / 'lib'}" in labels
    assert any("restart Blender to use it" in line for line in labels)  # the loader read its list at start
    assert bpy.ops.prb.remove_cpu_driver() == {"FINISHED"}
    assert not driver.folder.exists()
    assert box()[1] == {"prb.get_cpu_driver"}


def _modal_operator(monkeypatch):
    return operator_in_a_window(monkeypatch, driver_ui, driver_ui.PRB_OT_get_cpu_driver, ("_refused", "_status", "_end"))


def _until_done(op, context, seconds=20):
    deadline = time.monotonic() + seconds
    while (result := op.modal(context, _Event("TIMER"))) == {"RUNNING_MODAL"}:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    return result


def test_the_modal_operator_downloads_in_a_thread_and_shows_progress(driver, monkeypatch):
    monkeypatch.setattr(driver_ui, "online_access", lambda: True)
    op, context = _modal_operator(monkeypatch), _WindowContext()
    driver.hold.clear()  # the wheels wait: the download is in progress while the UI is drawn
    assert op.invoke(context, _Event("LEFTMOUSE", "PRESS")) == {"RUNNING_MODAL"}
    assert len(context.window_manager.timers) == 1 and context.window_manager.handlers == [op]
    assert op.modal(context, _Event("MOUSEMOVE")) == {"PASS_THROUGH"}
    assert op.modal(context, _Event("TIMER")) == {"RUNNING_MODAL"}
    labels, operators = box()
    assert operators == set() and labels[1].startswith("Get CPU Driver: ")  # no second button meanwhile
    assert driver_ui.PRB_OT_get_cpu_driver._refused(op) and op.reports.pop()[1] == "Get CPU Driver is already downloading"
    driver.hold.set()
    assert _until_done(op, context) == {"FINISHED"}
    assert context.window_manager.timers == []
    assert op.reports == [({"INFO"}, f"Installed Intel's CPU OpenCL runtime 2024.2.1 in {driver.folder / 'lib'}: "
                                     f"restart Blender to use it (the OpenCL loader reads its list of drivers once "
                                     f"per process)")]
    assert [p for p in device.bundled_drivers() if p.name == device.INTEL_CPU_LIBRARY] == [
        driver.folder / "lib" / "libintelocl.so"]


def test_esc_cancels_the_download_and_installs_nothing(driver, monkeypatch):
    monkeypatch.setattr(driver_ui, "online_access", lambda: True)
    op, context = _modal_operator(monkeypatch), _WindowContext()
    driver.hold.clear()
    assert op.invoke(context, _Event("LEFTMOUSE", "PRESS")) == {"RUNNING_MODAL"}
    threading.Timer(0.3, driver.hold.set).start()  # the thread notices the cancel at its next chunk
    assert op.modal(context, _Event("ESC", "PRESS")) == {"CANCELLED"}
    assert op.reports == [({"WARNING"}, "Get CPU Driver cancelled: nothing was installed")]
    assert not driver_ui.downloading() and context.window_manager.timers == []
    assert not driver.folder.exists() and cpu_driver.installed() is None
    assert [p.name for p in driver.folder.parent.iterdir() if p.name.startswith(".cpu-driver-")] == []


def test_a_failed_download_is_reported_and_shown(driver, monkeypatch):
    monkeypatch.setattr(driver_ui, "online_access", lambda: True)
    path = f"/files/{driver.listed['tbb/2021.13.1'][1]['filename']}"
    driver.files[path] = driver.files[path][:-1] + bytes([driver.files[path][-1] ^ 1])
    op, context = _modal_operator(monkeypatch), _WindowContext()
    assert op.invoke(context, _Event("LEFTMOUSE", "PRESS")) == {"RUNNING_MODAL"}
    assert _until_done(op, context) == {"CANCELLED"}
    ((kind, message),) = op.reports
    assert kind == {"ERROR"} and message.startswith("Get CPU Driver failed: tbb-2021.13.1") and "SHA-256" in message
    labels, operators = box()
    assert operators == {"prb.get_cpu_driver"} and any(line.startswith("Last try failed: tbb-") for line in labels)
    assert not driver.folder.exists()


def test_the_box_shows_pips_copy_and_is_absent_where_not_offered(driver, monkeypatch, tmp_path):
    (tmp_path / "prefix" / "lib").mkdir(parents=True)
    (tmp_path / "prefix" / "lib" / "libintelocl.so").write_bytes(b"pip's copy")
    labels, operators = box()
    assert operators == set()
    assert f"Intel's CPU OpenCL runtime: {tmp_path / 'prefix' / 'lib' / 'libintelocl.so'}" in labels
    monkeypatch.setattr(cpu_driver, "unsupported_reason", lambda *a: "Linux only")
    assert box() == ([], set())


def test_the_preferences_page_draws_the_box(driver):
    layout = StrictLayout()
    assert draw_panel(preferences.PRB_AP_preferences, layout)
    assert "CPU driver" in layout.drawn.labels and "prb.get_cpu_driver" in layout.drawn.operators


def _no_device(monkeypatch, how):
    if how == "no device listed":
        def no_platform():
            raise device.OpenCLUnavailable("No OpenCL platform found: install an OpenCL driver")
        monkeypatch.setattr(device, "list_devices", no_platform)
    else:  # PoCL lists the CPU but cannot compile for it: Automatic finds no device
        def no_probe(*args, **kwargs):
            raise device.OpenCLUnavailable("No OpenCL device could run the kernels on this machine")
        monkeypatch.setattr(device, "choose_device", no_probe)
    properties.refresh_devices()


@pytest.mark.parametrize("how", ["no device listed", "no device runs the kernels"])
def test_the_sidebar_points_to_get_cpu_driver_when_no_device_works(driver, monkeypatch, how):
    def sidebar():
        layout = StrictLayout()
        panels._summary["stale"] = True
        assert draw_panel(panels.PRB_PT_main, layout)
        return layout.drawn

    monkeypatch.setattr(driver_ui, "online_access", lambda: True)
    try:
        assert "preferences.addon_show" not in sidebar().operators  # a device works: no pointer
        _no_device(monkeypatch, how)
        drawn = sidebar()
        assert "preferences.addon_show" in drawn.operators
        assert "A CPU driver that knows this CPU: Get CPU Driver in the add-on's Preferences" in drawn.labels
        assert bpy.ops.prb.get_cpu_driver() == {"FINISHED"}  # installed: no more pointer
        assert "preferences.addon_show" not in sidebar().operators
    finally:
        monkeypatch.undo()
        properties.refresh_devices()


def test_with_the_driver_installed_the_operator_downloads_nothing(driver, monkeypatch):
    monkeypatch.setattr(driver_ui, "online_access", lambda: False)  # not needed for what is there
    cpu_driver.fetch()
    asked = len(driver.requests)
    op, context = _modal_operator(monkeypatch), _WindowContext()
    assert op.invoke(context, _Event("LEFTMOUSE", "PRESS")) == {"CANCELLED"}
    assert op.reports == [({"INFO"}, f"Already installed: Intel's CPU OpenCL runtime 2024.2.1 in {driver.folder / 'lib'}")]
    assert len(driver.requests) == asked and driver_ui._download["thread"] is None
