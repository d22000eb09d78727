"""Drives a real Blender window under Xvfb like a person would (runs inside the chroot).

  python3 gui_driver.py --out DIR --scene scene.blend [--select A,B] [--expect-bake A,B]

1. starts Xvfb and `blender scene.blend --python gui_startup.py` (sidebar tab opened, bodies selected);
2. screenshot 01_ready.png;
3. finds the Simulate & Bake button: hovers the sidebar top to bottom and presses Ctrl+C, which
   in Blender copies the hovered operator button's Python command to the clipboard; the startup
   script reports the clipboard, so the button is found by what it *does*, not by pixel offsets;
4. clicks it with xdotool, screenshot 02_during.png while the modal bake runs;
5. waits for the keys and for the operator to finish, screenshot 03_after.png (the report in the
   status bar), sets the last frame, screenshot 04_end.png, saves a copy of the file, quits.
Exits non-zero (with the reason on stderr and in result.json) on any failure.
"""
import argparse
import json
import os
import subprocess
import sys
import time


HERE = os.path.dirname(os.path.abspath(__file__))
A = None
T0 = time.time()
PROCS = []


def log(msg):
    print(f"[gui_driver {time.time() - T0:6.1f}s] {msg}", flush=True)


class Fail(Exception):
    pass


def sh(*args, **kw):
    env = dict(os.environ, DISPLAY=A.display)
    return subprocess.run(list(args), env=env, check=True, capture_output=True, text=True, **kw).stdout


def xdo(*args):
    return sh("xdotool", *map(str, args))


def status():
    try:
        with open(os.path.join(A.out, "status.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def wait_for(pred, timeout, what, poll=0.25):
    end = time.time() + timeout
    while time.time() < end:
        s = status()
        if s.get("errors"):
            raise Fail(f"error inside Blender while waiting for {what}: {s['errors'][-1]}")
        if PROCS and PROCS[-1].poll() is not None:
            raise Fail(f"Blender exited (rc={PROCS[-1].returncode}) while waiting for {what}")
        if pred(s):
            return s
        time.sleep(poll)
    raise Fail(f"timed out after {timeout}s waiting for {what}; last status: "
               f"{json.dumps({k: s.get(k) for k in ('phase', 'clipboard', 'modal_operators', 'bake')})}")


_cmd_id = [0]


def command(op, timeout=60, **kw):
    _cmd_id[0] += 1
    cid = f"{op}-{_cmd_id[0]}"
    path = os.path.join(A.out, "cmd.json")
    with open(path + ".tmp", "w") as f:
        json.dump([dict(kw, op=op, id=cid)], f)
    os.replace(path + ".tmp", path)
    if op == "quit":
        return None
    return wait_for(lambda s: cid in s.get("done_cmds", []), timeout, f"command {op}")


def screenshot(name):
    path = os.path.join(A.out, name)
    sh("import", "-window", "root", path)
    log(f"screenshot {name}")
    return path


def find_button(target, across=0.5):
    """Screen (x, y) of the operator button whose Python command contains `target`, probing the
    sidebar at `across` of its width (0.5: full-width buttons; 0.75: the right one of a pair)."""
    s = status()
    sb = s["sidebar"]
    x = sb["x"] + int((sb["w"] - 30) * across)
    tried = set()
    # Top to bottom through the sidebar, 10 px apart (Blender's buttons are ~20 px high at scale 1).
    for y in range(sb["y"] + 8, sb["y"] + sb["h"] - 8, 10):
        tried.add(y)
        xdo("mousemove", x, y)
        time.sleep(A.hover_s)
        xdo("key", "ctrl+c")
        t_end = time.time() + 0.6
        while time.time() < t_end:
            clip = status().get("clipboard") or ""
            if target in clip:
                log(f"found {target!r} at ({x}, {y}): clipboard {clip!r}")
                return x, y
            time.sleep(0.1)
    raise Fail(f"no button with {target!r} found in the sidebar {sb} (tried {len(tried)} rows)")


def main():
    global A
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--scene", required=True)
    p.add_argument("--select", default="")
    p.add_argument("--expect-bake", default="", help="objects that must get keys (comma-separated)")
    p.add_argument("--operator", default="prb.simulate_bake")
    p.add_argument("--display", default=":99")
    p.add_argument("--size", default="1600x900")
    p.add_argument("--hover-s", type=float, default=0.35)
    p.add_argument("--bake-timeout", type=float, default=600)
    p.add_argument("--during-s", type=float, default=0.5, help="extra seconds before 02_during.png")
    p.add_argument("--during-move", type=float, default=0.3, help="metres moved before 02_during.png")
    p.add_argument("--blender", default="blender")
    A = p.parse_args()
    os.makedirs(A.out, exist_ok=True)
    result = {"ok": False}
    try:
        run(result)
        result["ok"] = True
    except Fail as e:
        result["error"] = str(e)
        log(f"FAIL: {e}")
        try:
            screenshot("99_failure.png")
        except Exception:
            pass
    finally:
        for proc in reversed(PROCS):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
        result["seconds"] = round(time.time() - T0, 1)
        with open(os.path.join(A.out, "result.json"), "w") as f:
            json.dump(result, f, indent=1)
    return 0 if result["ok"] else 1


def run(result):
    w, h = A.size.split("x")
    xlog = open(os.path.join(A.out, "xvfb.log"), "w")
    PROCS.append(subprocess.Popen(["Xvfb", A.display, "-screen", "0", f"{A.size}x24", "-nolisten", "tcp"],
                                  stdout=xlog, stderr=subprocess.STDOUT))
    for _ in range(50):
        if subprocess.run(["xdpyinfo"], env=dict(os.environ, DISPLAY=A.display),
                          capture_output=True).returncode == 0:
            break
        time.sleep(0.2)
    else:
        raise Fail("Xvfb did not start")
    env = dict(os.environ, DISPLAY=A.display, PRB_GUI_OUT=A.out, PRB_GUI_SELECT=A.select)
    blog = open(os.path.join(A.out, "blender-gui.log"), "w")
    cmd = [A.blender, "--window-geometry", "0", "0", w, h, A.scene,
           "--python", os.path.join(HERE, "gui_startup.py")]
    log("starting " + " ".join(cmd))
    PROCS.append(subprocess.Popen(cmd, env=env, stdout=blog, stderr=subprocess.STDOUT))
    s = wait_for(lambda s: s.get("phase") == "ready", 240, "the sidebar tab to open")
    result["blender"] = s.get("blender")
    result["addons"] = s.get("addons")
    result["modal_operators_api"] = s.get("modal_operators") is not None
    if s.get("bake"):
        raise Fail(f"scene already has actions before the click: {s['bake']}")
    time.sleep(2.0)
    v = s["view3d"]
    xdo("mousemove", v["x"] + v["w"] // 3, v["y"] + v["h"] // 2)  # the user's mouse over the viewport
    time.sleep(0.5)
    screenshot("01_ready.png")
    # the particle preview: what the selected bodies will be made of, drawn in the viewport
    px, py = find_button("prb.toggle_preview", across=0.75)
    xdo("mousemove", px, py)
    time.sleep(0.3)
    xdo("click", "1")
    s = wait_for(lambda s: (s.get("preview") or {}).get("enabled") and s["preview"]["points"] > 0, 30,
                 "the particle preview to draw points")
    result["preview_points"] = s["preview"]["points"]
    xdo("mousemove", v["x"] + v["w"] // 3, v["y"] + v["h"] // 2)
    time.sleep(1.5)
    screenshot("00_preview.png")
    xdo("mousemove", px, py)
    time.sleep(0.3)
    xdo("click", "1")
    wait_for(lambda s: not (s.get("preview") or {}).get("enabled"), 30, "the preview to switch off")
    log(f"preview drew {result['preview_points']} points, switched off again")
    bx, by = find_button(A.operator)
    result["button"] = [bx, by]
    xdo("mousemove", bx, by)
    time.sleep(0.3)
    t_click = time.time()
    xdo("click", "1")
    log("clicked Simulate & Bake")
    time.sleep(0.3)
    xdo("mousemove", v["x"] + v["w"] // 3, v["y"] + v["h"] // 2)
    expect = [n for n in A.expect_bake.split(",") if n]
    mod, _, fn = A.operator.partition(".")
    op_name = f"{mod.upper()}_OT_{fn}"

    def running(s):
        return op_name in (s.get("modal_operators") or [])

    def reports():
        try:
            return (command("reports").get("reports") or "").strip()
        except Fail as e:
            return f"(could not collect the reports: {e})"

    # "during": the modal operator runs (or keys appear) -- whichever we see first.
    try:
        s = wait_for(lambda s: running(s) or s.get("bake") or time.time() > t_click + 8, 30,
                     "the bake to start")
        if not (running(s) or s.get("bake")):
            raise Fail("not running")
    except Fail:
        screenshot("02_during.png")
        raise Fail(f"the bake did not start (no modal operator, no keys) after the click; Blender's reports: {reports()!r}")
    result["saw_running"] = running(s)
    # "during": once the bodies visibly move in the viewport (live preview), or after 20 s
    try:
        wait_for(lambda s: (s.get("moved") or 0) > A.during_move or not running(s), 20, "motion")
    except Fail as e:
        if "timed out" not in str(e):
            raise
    time.sleep(A.during_s)
    screenshot("02_during.png")

    def finished(s):
        if running(s) or s.get("modal_operators") is None:
            bake = s.get("bake") or {}
            return s.get("modal_operators") is None and bake and all(n in bake for n in expect)
        return True  # the modal operator has ended: done, cancelled or failed (checked below)

    s = wait_for(finished, A.bake_timeout, "the bake to finish")
    bake = s.get("bake") or {}
    missing = [n for n in expect if n not in bake]
    if not bake or missing:
        screenshot("03_after.png")
        raise Fail(f"the bake ended without keys for {missing or 'any object'}; "
                   f"Blender's reports: {reports()!r}")
    # like a user, move the mouse back to the viewport: an event, so every region redraws
    xdo("mousemove", v["x"] + v["w"] // 3, v["y"] + v["h"] // 2)
    time.sleep(0.7)
    result["bake_seconds"] = round(time.time() - t_click, 1)
    result["bake"] = status().get("bake")
    log(f"bake finished after {result['bake_seconds']}s: {sorted(result['bake'])}")
    screenshot("03_after.png")
    result["reports"] = reports()
    log(f"reports: {result['reports']!r}")
    # Like a user: Shift+Right over the viewport jumps to the last frame (then the keys show it).
    xdo("mousemove", v["x"] + v["w"] // 3, v["y"] + v["h"] // 2)
    time.sleep(0.3)
    xdo("key", "shift+Right")
    try:
        wait_for(lambda s: s.get("frame") == s.get("frame_end"), 10, "the jump to the last frame")
    except Fail:
        command("frame", frame="end")  # the key did not arrive: set it from the startup script
        result["frame_jump"] = "set by the startup script"
    time.sleep(2.0)
    screenshot("04_end.png")
    command("save_copy", path=os.path.join(A.out, "gui_baked.blend"), timeout=120)
    # One undo step undoes the whole bake: Ctrl+Z over the viewport, as a user would. The frame
    # jump above may be an undo step of its own, so press until the keys go (at most three times)
    # and require that they never go partly: each state is the whole bake or none of it.
    full = result["bake"]
    xdo("mousemove", v["x"] + v["w"] // 3, v["y"] + v["h"] // 2)
    presses = 0
    while True:
        if presses == 3:
            raise Fail(f"three Ctrl+Z did not remove the bake: {sorted(status().get('bake') or {})}")
        time.sleep(0.5)
        xdo("key", "ctrl+z")
        presses += 1
        time.sleep(2.5)
        now = status().get("bake") or {}
        if now and now != full:
            raise Fail(f"Ctrl+Z left part of the bake: {sorted(now)} of {sorted(full)}")
        if not now:
            break
    wait_for(lambda s: (s.get("moved") or 0) < 1e-3, 10, "the bodies back at their start positions")
    result["undo"] = f"Ctrl+Z number {presses} removed the whole bake at once and restored the start positions"
    log(result["undo"])
    screenshot("05_undone.png")
    command("quit")
    try:
        PROCS[-1].wait(30)
    except subprocess.TimeoutExpired:
        raise Fail("Blender did not quit")
    result["blender_rc"] = PROCS[-1].returncode


if __name__ == "__main__":
    sys.exit(main())
