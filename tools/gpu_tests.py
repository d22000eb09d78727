#!/usr/bin/env python3
"""The engine tests on a GPU, recorded: what CI (2 CPU cores, no GPU) cannot run.

    python tools/gpu_tests.py --device gpu --out out/gpu_tests.json     # on the NVIDIA machine
    make test-gpu                                                       # the same through make
    make test-gpu GPU_DEVICE=cpu                                        # dry run on the CPU (PoCL)
    python tools/gpu_tests.py --jobs 4 ...                              # pytest in 4 runs side by side (the
                                                                        # whole takes over 600 s on an H100)

Three checks, written to one JSON (with the machine and the device; rewritten after each check,
so a run cut short keeps what it did) and a log beside it:
1. tests/core with PRB_OPENCL_DEVICE set to the device (per-test outcomes from pytest's JUnit XML;
   started first and run alongside the checks, it takes longest; --jobs splits it).
2. Trajectories on the device against the NumPy reference step (float64, on the CPU) for each
   variant (``VARIANTS``), each with 1 and 8 lanes per body (PRB_BODY_LANES: 8 is the GPU path, a
   tree sum of each body's forces): Particles over 100 substeps of the colliding scene of
   tests/core/test_reference_agreement.py within that test's tolerances (position 2e-5 m,
   velocity 6e-4 m/s, angular velocity 2e-3 rad/s, orientation |q.q'| within 1e-6 of 1); Rigid
   Voxels' rigid step (kernels 60-62), its contacts detected every 4 substeps (the default) and
   every substep, within the solve's tests' tolerances. Also against a CPU OpenCL device when the
   machine has one.
3. Two runs of a tumbling 48-cube pile (400 substeps) on the device, for each variant and lane
   count: bit-identical (the README's "two runs on one device give identical results").
Exit status 0 only when all three pass.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

# tests/core/test_reference_agreement.py's (about 5x what PoCL gives)
TOLERANCES = dict(position=2e-5, velocity=6e-4, angular_velocity_rtol=0.0, angular_velocity_atol=2e-3,
                  orientation=1e-6)


def _git_commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=30).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def machine(device) -> dict:
    from bench.machine import cpu_model

    info = dict(hostname=platform.node(), cpu=cpu_model(), cores=os.cpu_count(), python=platform.python_version(),
                platform=platform.platform(), device=device.label, device_selector=device.selector,
                device_is_gpu=device.is_gpu, device_memory_gib=round(device.global_memory / 2**30, 1))
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        if smi.returncode == 0:
            info["nvidia_smi"] = smi.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    import pyopencl

    info["pyopencl"] = pyopencl.VERSION_TEXT
    info["numpy"] = np.__version__
    return info


# per-test seconds of an earlier run on the H100: what --jobs balances the test files by (a file
# it does not list weighs its size in bytes / 100, about what the others weigh per byte)
BALANCE_RECORD = ROOT / "bench" / "results" / "gpu" / "gpu_tests_h100_0a6437a.json"


def test_files(paths: list[str]) -> list[str]:
    """The test files under ``paths`` (a folder gives its test_*.py), relative to ROOT."""
    files = []
    for path in paths:
        full = ROOT / path
        files += sorted(str(f.relative_to(ROOT)) for f in full.glob("test_*.py")) if full.is_dir() else [path]
    return files


def balanced_groups(files: list[str], jobs: int) -> list[list[str]]:
    """``files`` in ``jobs`` groups of about equal time (the longest first, each to the lightest group)."""
    seconds = {}
    if BALANCE_RECORD.exists():
        for name, entry in json.loads(BALANCE_RECORD.read_text()).get("core_tests", {}).get("tests", {}).items():
            module = name.split("::")[0].replace(".", "/") + ".py"
            seconds[module] = seconds.get(module, 0.0) + entry.get("seconds", 0.0)
    weight = {f: seconds.get(f, (ROOT / f).stat().st_size / 100.0) for f in files}
    groups = [[] for _ in range(max(1, jobs))]
    loads = [0.0] * len(groups)
    for f in sorted(files, key=lambda f: -weight[f]):
        k = loads.index(min(loads))
        groups[k].append(f)
        loads[k] += weight[f]
    return [g for g in groups if g]


def start_core_tests(selector: str, paths: list[str], junit: Path) -> subprocess.Popen:
    """pytest on ``paths`` in the background, its output to ``junit`` with .txt for .xml."""
    env = dict(os.environ, PRB_OPENCL_DEVICE=selector, PYTHONPATH=os.pathsep.join(
        [str(ROOT), os.environ.get("PYTHONPATH", "")]))
    with open(junit.with_suffix(".txt"), "w") as output:
        return subprocess.Popen([sys.executable, "-m", "pytest", *paths, "-q", "-ra", "-p", "no:cacheprovider",
                                 f"--junitxml={junit}"], cwd=ROOT, env=env, stdout=output,
                                stderr=subprocess.STDOUT, text=True)


def finish_core_tests(procs: list[tuple[subprocess.Popen, Path]], log) -> dict:
    """Wait for the pytest runs and merge their outcomes (per test, from each JUnit XML)."""
    outcomes, summaries, status, errors = {}, [], 0, []
    for proc, junit in procs:
        proc.wait()
        output = junit.with_suffix(".txt").read_text()
        log.write(output)
        status = max(status, proc.returncode)
        lines = output.strip().splitlines()
        summaries.append(lines[-1] if lines else "")
        if not junit.exists():
            errors.append(output[-2000:])
            continue
        for case in ET.parse(junit).getroot().iter("testcase"):
            name = f"{case.get('classname')}::{case.get('name')}"
            kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
            if kinds and kinds[0] == "skipped":
                message = case.find("skipped").get("message", "")
                outcome = "xfailed" if case.find("skipped").get("type") == "pytest.xfail" else f"skipped: {message}"
            else:
                outcome = kinds[0] if kinds else "passed"
            outcomes[name] = dict(outcome=outcome, seconds=float(case.get("time", 0)))
    if errors:
        return dict(ok=False, exit_status=status, error="\n".join(errors))
    counts = {}
    for value in outcomes.values():
        key = value["outcome"].split(":")[0]
        counts[key] = counts.get(key, 0) + 1
    return dict(ok=status == 0, exit_status=status, counts=counts, summary=" | ".join(summaries),
                groups=len(procs), tests=outcomes)


# What the device is compared on: (name, settings, scene, substeps, tolerances, lanes per body).
# "particles": Particles' spring contacts. "rigid_step": Rigid Voxels' default step (no springs,
# speculative contacts, manifolds, detection every 4 substeps; tests/core/test_rigid_step.py), its
# contacts rigid (soft ones switch at the slop, where float32 and float64 part after ~55 substeps);
# "rigid_step_detect_every_substep": the same detected every substep. Lanes per body
# (PRB_BODY_LANES): 8 the GPU's tree sum, 1 the CPU's loop.
SOLVE_TOLERANCES = dict(position=3e-5, velocity=5e-3, angular_velocity_rtol=0.0, angular_velocity_atol=6e-3,
                        orientation=1e-6)


class Variant(NamedTuple):
    settings: object  # SimulationSettings
    model: object  # Model
    substeps: int
    tolerances: dict
    lane_variable: str  # PRB_BODY_LANES
    lane_counts: tuple


def variant(name: str) -> Variant:
    """What a compared variant runs and how closely it must agree."""
    from addon.core import SimulationSettings
    from tests.core.test_reference_agreement import colliding_scene

    if name == "particles":
        return Variant(SimulationSettings(contact_geometry="particles"), colliding_scene(), 100, TOLERANCES,
                       "PRB_BODY_LANES", (1, 8))
    from tests.core.test_rigid_step import tumbling_bodies
    if name == "rigid_step":
        return Variant(SimulationSettings(solve_hertz_fraction=0.0), tumbling_bodies(), 60, SOLVE_TOLERANCES,
                       "PRB_BODY_LANES", (1, 8))
    if name == "rigid_step_detect_every_substep":
        return Variant(SimulationSettings(solve_hertz_fraction=0.0, substeps_per_detection=1), tumbling_bodies(), 60,
                       SOLVE_TOLERANCES, "PRB_BODY_LANES", (1, 8))
    raise ValueError(name)


VARIANTS = ("particles", "rigid_step", "rigid_step_detect_every_substep")


def _engine(model, settings, selector, lane_variable, lanes):
    from dataclasses import replace

    from addon.core.opencl_engine import OpenCLEngine

    os.environ[lane_variable] = str(lanes)
    try:
        engine = OpenCLEngine(model, replace(settings, device=selector))
    finally:
        del os.environ[lane_variable]
    assert engine.body_lanes == lanes
    return engine


def compare_trajectories(selector: str, against: str, name: str, lanes: int) -> dict:
    """The device against the reference step ('reference') or another OpenCL device (its CPU path),
    every 10 substeps: largest differences and whether they are within the variant's tolerances."""
    from addon.core.reference import ReferenceEngine

    settings, model, substeps, tolerances, lane_variable, _ = variant(name)
    engine = _engine(model, settings, selector, lane_variable, lanes)
    other = (ReferenceEngine(model, settings) if against == "reference"
             else _engine(model, settings, against, lane_variable, 1))
    worst = dict(position=0.0, velocity=0.0, angular_velocity=0.0, angular_velocity_excess=-np.inf, orientation=0.0)
    for _ in range(substeps // 10):
        engine.step(10)
        other.step(10)
        got, expected = engine.body_state(), other.body_state()
        worst["position"] = max(worst["position"], float(np.abs(got.position - expected.position).max()))
        worst["velocity"] = max(worst["velocity"], float(np.abs(got.velocity - expected.velocity).max()))
        worst["angular_velocity"] = max(worst["angular_velocity"],
                                        float(np.abs(got.angular_velocity - expected.angular_velocity).max()))
        allowed = tolerances["angular_velocity_atol"] + tolerances["angular_velocity_rtol"] * np.abs(
            expected.angular_velocity)
        excess = np.abs(got.angular_velocity - expected.angular_velocity) - allowed
        worst["angular_velocity_excess"] = max(worst["angular_velocity_excess"], float(excess.max()))
        dots = np.abs(np.einsum("bi,bi->b", got.orientation, expected.orientation))
        worst["orientation"] = max(worst["orientation"], float(np.abs(dots - 1.0).max()))
    moved = float(np.abs(engine.body_state().position - model.body_position).max())
    ok = (worst["position"] <= tolerances["position"] and worst["velocity"] <= tolerances["velocity"]
          and worst["angular_velocity_excess"] <= 0.0 and worst["orientation"] <= tolerances["orientation"]
          and moved > 0.05)
    return dict(variant=name, against=against, lanes={lane_variable: lanes}, substeps=substeps,
                tolerances=tolerances, largest_differences=worst, largest_displacement=moved, ok=bool(ok))


def runs_are_identical(selector: str, name: str, lanes: int) -> dict:
    """Two runs of a tumbling 48-cube pile (400 substeps) on the device: bit-identical. Rigid Voxels
    run their default (soft) solve here."""
    from dataclasses import replace

    from addon.core import SimulationSettings
    from tests.core.test_neighbour_lists import tumbling_pile

    compared = variant(name)
    settings, lane_variable = compared.settings, compared.lane_variable
    if name != "particles":
        settings = replace(settings, solve_hertz_fraction=SimulationSettings().solve_hertz_fraction)
    model = tumbling_pile()
    states = []
    for _ in range(2):
        engine = _engine(model, settings, selector, lane_variable, lanes)
        engine.step(400)
        s = engine.body_state()
        states.append(np.concatenate([s.position.ravel(), s.orientation.ravel(), s.velocity.ravel(),
                                      s.angular_velocity.ravel()]))
    moved = float(np.abs(states[0][:3 * model.body_count] - model.body_position.ravel()).max())
    identical = bool(np.array_equal(states[0], states[1]))
    return dict(variant=name, lanes={lane_variable: lanes}, substeps=400, bodies=model.body_count,
                identical=identical, largest_difference=float(np.abs(states[0] - states[1]).max()),
                largest_displacement=moved, ok=identical and moved > 0.05)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="gpu", help="OpenCL device selector (gpu, cpu, P:D, part of a name)")
    parser.add_argument("--out", default="out/gpu_tests.json", help="JSON path; the log goes beside it (.log)")
    parser.add_argument("--skip-pytest", action="store_true", help="only the trajectory and determinism checks")
    # the whole of tests/core takes longer on the GPU than the lent machine's 600 s per command (small
    # scenes are bound by launching kernels): split it over several runs, the checks in the first
    parser.add_argument("--tests", nargs="+", default=["tests/core"], metavar="PATH",
                        help="what pytest runs on the device (default: tests/core)")
    parser.add_argument("--skip-checks", action="store_true", help="only the tests (a later part of a split run)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="pytest runs side by side, the test files balanced by an earlier run's times, the "
                             "checks alongside (4 on the lent machine's 16 cores: the whole of it within 600 s)")
    parser.add_argument("--commit", default=None,
                        help="the commit the tree is (the lent machine's copy of the tree has no reliable git)")
    args = parser.parse_args(argv)

    from addon.core.device import choose_device, list_devices

    device = choose_device(args.device)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    log_path = out.with_suffix(".log")
    result = dict(commit=args.commit or _git_commit(), started=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), machine=machine(device),
                  devices=[d.label for d in list_devices()], tolerances=TOLERANCES)
    if not device.is_gpu:
        result["dry_run"] = "the device is not a GPU: this checks the script, not a GPU"
    save = lambda: out.write_text(json.dumps(result, indent=1) + "\n")  # after each stage: a run cut short keeps what it did
    save()
    scratch = tempfile.TemporaryDirectory()
    procs = []
    if not args.skip_pytest:
        # started first: the checks below run while they do
        groups = balanced_groups(test_files(args.tests), args.jobs) if args.jobs > 1 else [args.tests]
        print(f"{len(groups)} pytest run(s) of {' '.join(args.tests)} on {device.label} ...", flush=True)
        procs = [(start_core_tests(device.selector, group, Path(scratch.name) / f"junit{k}.xml"),
                  Path(scratch.name) / f"junit{k}.xml") for k, group in enumerate(groups)]
    with open(log_path, "w") as log:
        def record(key, entry):
            result.setdefault(key, []).append(entry)
            log.write(json.dumps(entry) + "\n")
            log.flush()
            print(" ", json.dumps(entry), flush=True)
            save()

        cpu = [d for d in list_devices() if not d.is_gpu and d.selector != device.selector]
        for name in (() if args.skip_checks else VARIANTS):
            for lanes in variant(name).lane_counts:
                record("trajectories", compare_trajectories(device.selector, "reference", name, lanes))
                if cpu:
                    record("trajectories", compare_trajectories(device.selector, cpu[0].selector, name, lanes))
        for name in (() if args.skip_checks else VARIANTS):
            for lanes in variant(name).lane_counts:
                record("determinism", runs_are_identical(device.selector, name, lanes))
        if procs:
            result["core_tests"] = finish_core_tests(procs, log)
            print(" ", result["core_tests"].get("summary") or result["core_tests"].get("error"), flush=True)
    scratch.cleanup()
    checks = result.get("trajectories", []) + result.get("determinism", [])
    result["ok"] = bool(all(c["ok"] for c in checks) and result.get("core_tests", {}).get("ok", True))
    result["finished"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    save()
    print(f"{'PASS' if result['ok'] else 'FAIL'}: {out} and {log_path}")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
