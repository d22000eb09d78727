"""CPU OpenCL drivers side by side on the 1000-cube pile, in interleaved rounds on this machine:
kernel build time, ms per 24 fps frame, and the pile's end figures of each driver.

Candidates (each run in its own process, A B C D, A B C D, ...):

    pocl-bundled   the venv's pyopencl with the PoCL 3.0 its wheel bundles (LLVM 14);
                   OCL_ICD_VENDORS at an empty folder, so nothing else is listed
    intel          Intel's CPU runtime from PyPI (intel-opencl-rt, pip install --prefix), from the
                   venv with OCL_ICD_VENDORS at a folder whose .icd names its libintelocl.so
    pocl-bookworm  Debian 12's pocl-opencl-icd (PoCL 3.1, LLVM 15) in the chroot /opt/prb-bookworm-pocl
    pocl-trixie    Debian 13's pocl-opencl-icd (PoCL 6.x) in the chroot /opt/prb-trixie-pocl

bench/cpu_drivers_setup.sh prepares and mounts the chroots (root). A chroot candidate runs the
repository's addon/, kernels/ and bench/, copied to <chroot>/tmp/prb-bench at the start, with the
chroot's python3 and numpy and pyopencl's wheel in <chroot>/opt/prb-pyopencl, under ``env -i``.

Each run: a fresh, empty cache folder (pyopencl's and PoCL's kernel caches: every round builds the
kernels cold, as a first bake does), the engine built (OpenCLEngine: the program's build), one
warm-up step (PoCL compiles each kernel for its work-group size at its first launch), then
``--frames`` frames of cube_pile(N) a frame at a time, the poses read back each frame (as
bench/cpu_vs_bullet.py's ``ours``), then a second engine in the same process (the caches now warm:
a later bake's build). The machine is shared: before each run the bench waits (``--wait-quiet``
seconds at most) for other processes to go quiet; the load average and the CPU time other
processes took during the run (from /proc/stat, less the run's own) are recorded with every run,
and a run during which others took more than ``--busy-cores`` cores is marked busy. With
``--quiet-runs K`` it adds rounds (up to ``--max-rounds``) until every driver has K runs not marked
busy, and the summary is over those. Also measures what each driver weighs (``sizes``). Root (chroot).
Figures, never a timed test.

    bash bench/cpu_drivers_setup.sh   # once: the chroots (root)
    .venv/bin/python bench/cpu_drivers.py --rounds 3 --quiet-runs 3 --out bench/results/cpu_drivers_1000_2core.json
"""
from __future__ import annotations

import argparse
import atexit
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.machine import commit, cpu_model, write_report  # noqa: E402

MARK = "PRB_CPU_DRIVERS_RESULT "
CHROOT_COPY = "/tmp/prb-bench"  # inside a chroot
CHROOT_PYOPENCL = "/opt/prb-pyopencl"  # inside a chroot
COPIED = ("addon", "kernels", "bench")


def candidates(args) -> dict[str, dict]:
    """Each candidate: how to start it, the selector, and what its platform must say (a regex on
    "platform name / platform version": the driver listed is the one meant, not another)."""
    empty = Path(tempfile.mkdtemp(prefix="prb-no-vendors-"))  # no ICD file: the bundled PoCL alone
    atexit.register(shutil.rmtree, empty, ignore_errors=True)
    venv = {"python": [sys.executable], "chroot": None}
    # each candidate's drivers alone: the add-on would otherwise add the drivers the venv itself holds
    # (addon/core/device.py _expose_bundled_drivers) beside the folder given
    own_vendors_only = {"PRB_OPENCL_VENDORS_EXPOSED": "1"}
    return {
        "pocl-bundled": {**venv, "env": {"OCL_ICD_VENDORS": str(empty), "PRB_OPENCL_DEVICE": "cpu",
                                         **own_vendors_only},
                         "expect": r"Portable Computing Language / OpenCL \S+ PoCL 3\.0",
                         "source": "pip: pocl-binary-distribution 3.0 (pyopencl[pocl])"},
        "intel": {**venv, "env": {"OCL_ICD_VENDORS": args.intel_vendors, "PRB_OPENCL_DEVICE": "Intel(R) OpenCL",
                                  **own_vendors_only},
                  "expect": r"^Intel\(R\) OpenCL / ", "vendors": args.intel_vendors, "wheels": args.intel_wheels,
                  "source": "pip: intel-opencl-rt, tbb, intel-cmplr-lib-rt (no root)"},
        # the release the venv and Get CPU Driver install: 2025 and later need a newer TBB than the one
        # Blender loads first (requirements-dev.txt)
        "intel-2024": {**venv, "env": {"OCL_ICD_VENDORS": args.intel_2024_vendors,
                                       "PRB_OPENCL_DEVICE": "Intel(R) OpenCL", **own_vendors_only},
                       "expect": r"^Intel\(R\) OpenCL / ", "vendors": args.intel_2024_vendors,
                       "wheels": args.intel_2024_wheels,
                       "source": "pip: intel-opencl-rt 2024.2, tbb 2021.13, intel-cmplr-lib-rt 2024.2 (no root)"},
        "pocl-bookworm": {"python": ["python3"], "chroot": args.bookworm,
                          "env": {"OCL_ICD_VENDORS": "/etc/OpenCL/vendors",
                                  "PRB_OPENCL_DEVICE": "Portable Computing Language"},
                          "expect": r"Portable Computing Language / OpenCL \S+ PoCL 3\.1\+debian",
                          "source": "apt: Debian 12's pocl-opencl-icd (root)"},
        "pocl-trixie": {"python": ["python3"], "chroot": args.trixie,
                        "env": {"OCL_ICD_VENDORS": "/etc/OpenCL/vendors",
                                "PRB_OPENCL_DEVICE": "Portable Computing Language"},
                        "expect": r"Portable Computing Language / OpenCL \S+ PoCL [6-9]\.\d+\+debian",
                        "source": "apt: Debian 13's pocl-opencl-icd (root)"},
    }


# --- what each driver weighs ------------------------------------------------------------------

# In a chroot: `apt install --no-install-recommends pocl-opencl-icd` on a minimal Debian, i.e. the
# package's Depends closure less the Priority required/important packages every Debian has (one line
# per package: installed KiB, .deb bytes, name); then the files a copy of this PoCL would have to
# ship (libpocl, its device modules and kernel libraries, and the libraries it links beyond libc,
# libm, libstdc++ and libgcc_s: LLVM, clang-cpp, hwloc, z3, ...), one path a line after a "ship" line.
APT_CLOSURE = r"""
for p in $(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
           --no-replaces --no-enhances --installed pocl-opencl-icd 2>/dev/null | grep -v '^[ <]' | sort -u); do
  pr=$(dpkg-query -W -f='${Priority}' "$p" 2>/dev/null) || continue
  case "$pr" in required|important) continue;; esac
  v=$(dpkg-query -W -f='${Version}' "$p")
  echo "$(dpkg-query -W -f='${Installed-Size}' "$p") $(apt-cache show "$p=$v" 2>/dev/null | awk '/^Size:/{print $2; exit}') $p"
done
echo ship
lib=$(ls /usr/lib/x86_64-linux-gnu/libpocl.so.2.*.*)
echo "$lib"; find /usr/lib/x86_64-linux-gnu/pocl /usr/share/pocl -type f
ldd "$lib" | awk '$3 ~ /^\// {print $3}' | grep -vE '/(libc|libm|libstdc\+\+|libgcc_s)\.so' | xargs -r readlink -f
"""


def tree_bytes(*paths: Path) -> int:
    return sum(f.stat().st_size for p in paths for f in ([p] if p.is_file() else p.rglob("*"))
               if f.is_file() and not f.is_symlink())


def distinct_files(root: Path) -> list[Path]:
    """The files under root, one of each content (wheels cannot hold links, so a wheel's libfoo.so and
    libfoo.so.1.2 are two copies)."""
    import hashlib
    seen, kept = set(), []
    for f in sorted(root.rglob("*")):
        if f.is_file() and not f.is_symlink():
            digest = (f.stat().st_size, hashlib.md5(f.read_bytes()).hexdigest())
            if digest not in seen:
                seen.add(digest)
                kept.append(f)
    return kept


def deflated_bytes(files: list[Path]) -> int:
    """The files' size in a zip (deflate, zlib's default level): what they add to the extension's zip."""
    import zlib
    total = 0
    for f in files:
        packer = zlib.compressobj(6, zlib.DEFLATED, -15)
        with open(f, "rb") as handle:
            while chunk := handle.read(1 << 22):
                total += len(packer.compress(chunk))
        total += len(packer.flush())
    return total


def sizes(name: str, candidate: dict, args) -> dict:
    """Download and installed bytes of a driver; for Debian's, also the files a copy would ship."""
    if name == "pocl-bundled":
        import pocl_binary_distribution
        import pyopencl
        files = [*Path(pyopencl.__file__).parent.joinpath(".libs").glob("libpocl*"),
                 Path(pocl_binary_distribution.__file__).parent]
        wheels = sorted((ROOT / ".cache" / "wheels").glob("*/pocl_binary_distribution-*.whl"))
        return {"installed_bytes": tree_bytes(*files),
                "download_bytes": wheels[0].stat().st_size if wheels else None,
                "what": "pip pocl-binary-distribution (libpocl with LLVM 14 linked in, its kernel libraries)"}
    if name.startswith("intel"):
        library = Path(next(Path(candidate["vendors"]).glob("*.icd")).read_text().strip())
        prefix = library.parent.parent
        wheels = sorted(Path(candidate["wheels"]).glob("*.whl"))
        distinct = distinct_files(prefix)
        return {"installed_bytes": tree_bytes(prefix), "download_bytes": sum(w.stat().st_size for w in wheels),
                "wheels": [w.name for w in wheels], "what": f"pip install --prefix {prefix}",
                "installed_distinct_bytes": tree_bytes(*distinct), "distinct_deflated_bytes": deflated_bytes(distinct)}
    text = subprocess.run(["chroot", candidate["chroot"], "bash", "-c", APT_CLOSURE], check=True,
                          capture_output=True, text=True).stdout
    packages, _, ship = text.partition("ship\n")
    rows = [line.split() for line in packages.splitlines() if line.strip()]
    shipped = sorted({Path(candidate["chroot"] + line) for line in ship.split()})
    return {"installed_bytes": 1024 * sum(int(r[0]) for r in rows),
            "download_bytes": sum(int(r[1]) for r in rows if len(r) > 2),
            "packages": len(rows), "largest_packages": [{"package": r[-1], "installed_kib": int(r[0])}
                                                       for r in sorted(rows, key=lambda r: -int(r[0]))[:8]],
            "what": "apt install --no-install-recommends pocl-opencl-icd on a minimal Debian (the packages "
                    "beyond Priority required/important)",
            "ship_files": [str(f)[len(candidate["chroot"]):] for f in shipped],
            "ship_bytes": tree_bytes(*shipped), "ship_deflated_bytes": deflated_bytes(shipped)}


# --- the machine's load ----------------------------------------------------------------------

def cpu_jiffies() -> dict[str, int]:
    """The whole machine's CPU time so far (/proc/stat's first line, clock ticks)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, idle, iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    return {"busy": user + nice + system + irq + softirq, "idle": idle + iowait, "steal": steal}


def busy_processes(seconds: float = 1.0, over: float = 0.1) -> list[dict]:
    """Processes that took more than ``over`` of a core during ``seconds`` (name, pid, cores)."""
    def times():
        found = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                text = stat.read_text()
            except OSError:
                continue
            name = text[text.index("(") + 1:text.rindex(")")]
            rest = text[text.rindex(")") + 2:].split()
            found[int(stat.parent.name)] = (name, int(rest[11]) + int(rest[12]))
        return found
    before = times()
    time.sleep(seconds)
    after = times()
    tick = os.sysconf("SC_CLK_TCK")
    busy = []
    for pid, (name, t) in after.items():
        if pid in before and pid != os.getpid():
            cores = (t - before[pid][1]) / tick / seconds
            if cores > over:
                busy.append({"pid": pid, "name": name, "cores": round(cores, 2)})
    return sorted(busy, key=lambda b: -b["cores"])


# --- one run, in the candidate's process -----------------------------------------------------

def worker(cubes: int, frames: int, expect: str) -> dict:
    cache = tempfile.mkdtemp(prefix="prb-driver-cache-")  # cold kernel caches for this run
    os.environ.update({"XDG_CACHE_HOME": cache, "POCL_CACHE_DIR": os.path.join(cache, "pocl")})
    try:
        return _measure(cubes, frames, expect)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def _measure(cubes: int, frames: int, expect: str) -> dict:
    import pyopencl as cl

    from addon.core import SimulationSettings
    from addon.core.opencl_engine import OpenCLEngine
    from bench.contact_figures import pile_figures
    from bench.cpu_vs_bullet import frame_substeps, timed_frames
    from bench.scenes import cube_pile

    listed = [f"{p.name} / {p.version} / {d.name}" for p in cl.get_platforms() for d in p.get_devices()]
    model = cube_pile(cubes)
    start = time.perf_counter()
    engine = OpenCLEngine(model, SimulationSettings())
    built = time.perf_counter()
    device = engine.context.devices[0]
    platform = device.platform
    said = f"{platform.name} / {platform.version}"
    if not re.search(expect, said):
        raise SystemExit(f"the device chosen is not the driver meant: {said!r} does not match {expect!r}; "
                         f"listed: {listed}")
    substeps = frame_substeps(engine)
    engine.step(1)  # the first launch of every kernel (PoCL compiles each for its work-group size)
    engine.body_state()
    warmed = time.perf_counter()
    times, state = timed_frames(engine, substeps, frames)
    end = pile_figures(state, model.body_lattice_orientation)
    del engine
    # a later bake in the same session: pyopencl's (and PoCL's) caches now hold the kernels
    again = time.perf_counter()
    second = OpenCLEngine(model, SimulationSettings())
    second.step(1)
    second.body_state()
    again_done = time.perf_counter()
    return {
        "platform": platform.name.strip(), "platform_version": platform.version.strip(),
        "device": device.name.strip(), "device_version": device.version.strip(),
        "driver_version": device.driver_version.strip(), "opencl_c_version": device.opencl_c_version.strip(),
        "compute_units": int(device.max_compute_units), "listed": listed,
        "python": sys.version.split()[0], "numpy": __import__("numpy").__version__, "pyopencl": cl.VERSION_TEXT,
        "substeps_per_frame": substeps,
        "engine_build_s": built - start, "first_step_s": warmed - built, "kernel_build_s": warmed - start,
        "cached_build_s": again_done - again,
        "ms_per_frame_mean": 1e3 * sum(times) / frames,
        "ms_per_frame_first_24": 1e3 * sum(times[:24]) / 24, "ms_per_frame_last_24": 1e3 * sum(times[-24:]) / 24,
        "ms_per_frame_min": 1e3 * min(times), "ms_per_frame_max": 1e3 * max(times),
        "ms_per_frame": [round(1e3 * t, 2) for t in times],
        "end": end,
    }


# --- the rounds, in this process -------------------------------------------------------------

def copy_into(chroot: str) -> None:
    target = Path(chroot + CHROOT_COPY)
    shutil.rmtree(target, ignore_errors=True)
    for name in COPIED:
        shutil.copytree(ROOT / name, target / name,
                        ignore=shutil.ignore_patterns("__pycache__", "results", "*.json", "*.png"))


def check_chroot(chroot: str) -> None:
    missing = [p for p in ("/proc/self", "/sys/devices/system/cpu", CHROOT_PYOPENCL + "/pyopencl")
               if not os.path.exists(chroot + p)]
    if missing:
        raise SystemExit(f"{chroot} lacks {', '.join(missing)}: run bench/cpu_drivers_setup.sh (root) first")


def command(candidate: dict, cubes: int, frames: int) -> tuple[list[str], dict | None]:
    worker_args = ["--worker", "--cubes", str(cubes), "--frames", str(frames), "--expect", candidate["expect"]]
    if candidate["chroot"] is None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OCL_", "POCL_", "PRB_"))}
        env.update(candidate["env"])
        return [*candidate["python"], str(Path(__file__).resolve()), *worker_args], env
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8",
           "PYTHONPATH": f"{CHROOT_COPY}:{CHROOT_PYOPENCL}", **candidate["env"]}
    return (["chroot", candidate["chroot"], "env", "-i", *(f"{k}={v}" for k, v in env.items()),
             *candidate["python"], f"{CHROOT_COPY}/bench/cpu_drivers.py", *worker_args], None)


def wait_quiet(busy_cores: float, limit: float) -> tuple[float, list[dict]]:
    """Wait (up to ``limit`` seconds) until no other process takes more than ``busy_cores`` cores;
    the seconds waited and the busy processes of the last look."""
    start = time.perf_counter()
    while True:
        others = busy_processes()
        if not any(p["cores"] > busy_cores for p in others) or time.perf_counter() - start > limit:
            return time.perf_counter() - start, others


def run_one(name: str, candidate: dict, cubes: int, frames: int, busy_cores: float, wait: float) -> dict:
    argv, env = command(candidate, cubes, frames)
    waited, others_before = wait_quiet(busy_cores, wait)
    load_before = os.getloadavg()
    jiffies = cpu_jiffies()
    wall = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(argv, env=env, stdout=out, stderr=err, cwd=ROOT)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - wall
        after = cpu_jiffies()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    tick = os.sysconf("SC_CLK_TCK")
    own = usage.ru_utime + usage.ru_stime
    others = max(0.0, (after["busy"] - jiffies["busy"]) / tick - own) / wall
    machine = {"load_average_before": [round(x, 2) for x in load_before],
               "load_average_after": [round(x, 2) for x in os.getloadavg()],
               "busy_processes_before": others_before, "waited_for_quiet_s": round(waited, 1),
               "others_cores_during_run": round(others, 3), "steal_cores_during_run":
                   round((after["steal"] - jiffies["steal"]) / tick / wall, 3),
               "run_cpu_s": round(own, 2), "run_wall_s": round(wall, 2),
               "busy": others > busy_cores or any(p["cores"] > busy_cores for p in others_before)}
    lines = [line for line in stdout.splitlines() if line.startswith(MARK)]
    if process.returncode != 0 or not lines:
        return {"candidate": name, "error": f"exit {process.returncode}: {stderr.strip()[-2000:]}", **machine}
    return {"candidate": name, **json.loads(lines[-1][len(MARK):]), **machine}


def summary(runs: list[dict], baseline: str, quiet_only: bool) -> dict:
    """Per candidate: medians and spread over its runs (``quiet_only``: over those not marked busy)."""
    found = {}
    for name in dict.fromkeys(r["candidate"] for r in runs):
        ok = [r for r in runs if r["candidate"] == name and "error" not in r and not (quiet_only and r["busy"])]
        if not ok:
            found[name] = {"error": next(r["error"] for r in runs if r["candidate"] == name)}
            continue
        ms = [r["ms_per_frame_mean"] for r in ok]
        first = ok[0]
        found[name] = {
            "platform": first["platform"], "platform_version": first["platform_version"],
            "device": first["device"], "driver_version": first["driver_version"],
            "runs": len(ok), "ms_per_frame_median": statistics.median(ms),
            "ms_per_frame_min": min(ms), "ms_per_frame_max": max(ms),
            "ms_per_frame_first_24_median": statistics.median(r["ms_per_frame_first_24"] for r in ok),
            "ms_per_frame_last_24_median": statistics.median(r["ms_per_frame_last_24"] for r in ok),
            "kernel_build_s_median": statistics.median(r["kernel_build_s"] for r in ok),
            "engine_build_s_median": statistics.median(r["engine_build_s"] for r in ok),
            "first_step_s_median": statistics.median(r["first_step_s"] for r in ok),
            "cached_build_s_median": statistics.median(r["cached_build_s"] for r in ok),
            "end": first["end"], "end_same_every_round": all(r["end"] == first["end"] for r in ok),
            "busy_runs": sum(r["busy"] for r in ok), "runs_used": [r["round"] for r in ok],
        }
    base = found.get(baseline, {}).get("ms_per_frame_median")
    for name, s in found.items():
        if base and "ms_per_frame_median" in s:
            s["over_bundled_pocl"] = s["ms_per_frame_median"] / base
            s["kernel_build_over_bundled_pocl"] = s["kernel_build_s_median"] / found[baseline]["kernel_build_s_median"]
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--expect", default=".", help=argparse.SUPPRESS)
    parser.add_argument("--cubes", type=int, default=1000)
    parser.add_argument("--frames", type=int, default=120, help="24 fps frames timed (120: 5 s)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds at least")
    parser.add_argument("--quiet-runs", type=int, default=0,
                        help="more rounds (up to --max-rounds) until every candidate has this many runs not "
                             "marked busy; then the summary is over those runs alone")
    parser.add_argument("--max-rounds", type=int, default=12)
    parser.add_argument("--wait-quiet", type=float, default=60.0,
                        help="before each run, wait up to this many seconds for other processes to go quiet")
    parser.add_argument("--candidate", action="append", default=None,
                        help="run only these (pocl-bundled, intel, intel-2024, pocl-bookworm, pocl-trixie); "
                             "default all")
    parser.add_argument("--intel-vendors", default="/tmp/intel/vendors",
                        help="a folder whose .icd file names intel-opencl-rt's libintelocl.so")
    parser.add_argument("--intel-wheels", default="/tmp/intel", help="the folder of intel-opencl-rt's wheels")
    parser.add_argument("--intel-2024-vendors", default="/tmp/iold/vendors",
                        help="as --intel-vendors, for intel-opencl-rt 2024.2 (the release the add-on installs)")
    parser.add_argument("--intel-2024-wheels", default="/tmp/iold/wheels")
    parser.add_argument("--no-sizes", action="store_true", help="skip measuring what each driver weighs")
    parser.add_argument("--bookworm", default="/opt/prb-bookworm-pocl")
    parser.add_argument("--trixie", default="/opt/prb-trixie-pocl")
    parser.add_argument("--busy-cores", type=float, default=0.25,
                        help="a run during which other processes took more cores than this is marked busy")
    parser.add_argument("--note", default=None, help="a line for the JSON (what else was true of the machine)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.worker:
        result = worker(args.cubes, args.frames, args.expect)
        print(MARK + json.dumps(result), flush=True)
        return
    every = candidates(args)
    chosen = {name: every[name] for name in (args.candidate or every)}
    for candidate in chosen.values():
        if candidate["chroot"]:
            check_chroot(candidate["chroot"])
            copy_into(candidate["chroot"])
    weights = {} if args.no_sizes else {name: sizes(name, c, args) for name, c in chosen.items()}
    runs = []

    def quiet_runs(name):
        return sum(1 for r in runs if r["candidate"] == name and "error" not in r and not r["busy"])

    round_index = 0
    while round_index < args.rounds or (round_index < args.max_rounds
                                        and min(map(quiet_runs, chosen)) < args.quiet_runs):
        for name, candidate in chosen.items():
            result = run_one(name, candidate, args.cubes, args.frames, args.busy_cores, args.wait_quiet)
            result["round"] = round_index + 1
            runs.append(result)
            print(f"round {round_index + 1} {name}: " + (result["error"] if "error" in result else
                  f"{result['ms_per_frame_mean']:.1f} ms per frame, kernels {result['kernel_build_s']:.1f} s, "
                  f"others {result['others_cores_during_run']:.2f} cores, load {result['load_average_before'][0]}"
                  + (", busy" if result["busy"] else "")), file=sys.stderr, flush=True)
        round_index += 1
    quiet_only = args.quiet_runs > 0 and min(map(quiet_runs, chosen)) >= args.quiet_runs
    report = {"benchmark": "cpu_drivers", "commit": commit(), "cpu_model": cpu_model(), "cpu_count": os.cpu_count(),
              "cubes": args.cubes, "frames": args.frames, "rounds": args.rounds,
              "date": time.strftime("%Y-%m-%d"), "note": args.note,
              "candidates": {name: {"source": c["source"], "chroot": c["chroot"], "env": c["env"]}
                             for name, c in chosen.items()},
              "rounds_run": round_index, "wait_quiet_s": args.wait_quiet, "busy_cores": args.busy_cores,
              "summary_over": "quiet runs" if quiet_only else "all runs",
              "sizes": weights, "summary": summary(runs, "pocl-bundled", quiet_only), "runs": runs}
    report["busy"] = any(r.get("busy") for r in runs)
    write_report(report, args.out)


if __name__ == "__main__":
    main()
