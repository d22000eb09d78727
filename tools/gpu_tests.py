#!/usr/bin/env python3
"""The engine tests on a GPU, recorded: what CI (2 CPU cores, no GPU) cannot run.

    python tools/gpu_tests.py --device gpu --out out/gpu_tests.json     # on the NVIDIA machine
    make test-gpu                                                       # the same through make
    make test-gpu GPU_DEVICE=cpu                                        # dry run on the CPU (PoCL)
    python tools/gpu_tests.py --tests tests/core/test_[a-m]*.py ...     # a part of tests/core (the whole
    python tools/gpu_tests.py --skip-checks --tests tests/core/test_[n-z]*.py   # takes over 600 s on an H100)

Three checks, written to one JSON (with the machine and the device; rewritten after each check,
so a run cut short keeps what it did) and a log beside it:
1. tests/core with PRB_OPENCL_DEVICE set to the device (per-test outcomes from pytest's JUnit XML;
   run last, it takes longest).
2. Trajectories on the device against the NumPy reference step (float64, on the CPU) for each
   variant (``VARIANTS``): Particles' contacts over 100 substeps of the colliding scene of
   tests/core/test_reference_agreement.py with 1 and 8 lanes per body (PRB_BODY_LANES: 8 is the GPU
   path, a tree sum of each body's forces), within that test's tolerances (position 2e-5 m,
   velocity 6e-4 m/s, angular velocity 2e-3 rad/s, orientation |q.q'| within 1e-6 of 1); Rigid
   Voxels' rigid step (the default settings, and detecting every substep) over 60 substeps of
   tests/core/test_rigid_step.py's tumbling scene, within the solve's tests' tolerances. Also
   against a CPU OpenCL device when the machine has one.
3. Two runs of a tumbling 48-cube pile (400 substeps) on the device, for each variant (and lane
   count): bit-identical (the README's "two runs on one device give identical results").
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


def run_core_tests(selector: str, paths: list[str], log) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        env = dict(os.environ, PRB_OPENCL_DEVICE=selector, PYTHONPATH=os.pathsep.join(
            [str(ROOT), os.environ.get("PYTHONPATH", "")]))
        proc = subprocess.run([sys.executable, "-m", "pytest", *paths, "-q", "-ra", "-p", "no:cacheprovider",
                               f"--junitxml={junit}"], cwd=ROOT, env=env, capture_output=True, text=True)
        log.write(proc.stdout + proc.stderr)
        if not junit.exists():
            return dict(ok=False, exit_status=proc.returncode, error=(proc.stdout + proc.stderr)[-2000:])
        outcomes = {}
        for case in ET.parse(junit).getroot().iter("testcase"):
            name = f"{case.get('classname')}::{case.get('name')}"
            kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
            if kinds and kinds[0] == "skipped":
                message = case.find("skipped").get("message", "")
                outcome = "xfailed" if case.find("skipped").get("type") == "pytest.xfail" else f"skipped: {message}"
            else:
                outcome = kinds[0] if kinds else "passed"
            outcomes[name] = dict(outcome=outcome, seconds=float(case.get("time", 0)))
    counts = {}
    for value in outcomes.values():
        key = value["outcome"].split(":")[0]
        counts[key] = counts.get(key, 0) + 1
    return dict(ok=proc.returncode == 0, exit_status=proc.returncode, counts=counts,
                summary=proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else "", tests=outcomes)


# What the device is compared on: (settings, scene, substeps, tolerances, lanes per body).
# "particles": Particles' contacts (springs), lanes per body (PRB_BODY_LANES: 8 the GPU's tree sum,
# 1 the CPU's loop). "rigid_step": Rigid Voxels at the default settings (the rigid step: no springs,
# speculative contacts, detection every 4 substeps, manifolds in sequence; kernels 61-62);
# "rigid_step_every_substep": the same detecting every substep (tests/core/test_rigid_step.py).
# The solve's lanes are the engine's own (one work-item per pair).
SOLVE_TOLERANCES = dict(position=3e-5, velocity=5e-3, angular_velocity_rtol=0.0, angular_velocity_atol=6e-3,
                        orientation=1e-6)


class Variant(NamedTuple):
    settings: object  # SimulationSettings
    model: object  # Model
    substeps: int
    tolerances: dict
    body_lanes: tuple  # PRB_BODY_LANES values run; None: the engine's choice


def variant(name: str) -> Variant:
    """What a compared variant runs and how closely it must agree."""
    from addon.core import SimulationSettings
    from tests.core.test_reference_agreement import colliding_scene
    from tests.core.test_rigid_step import tumbling_bodies

    if name == "particles":
        return Variant(SimulationSettings(contact_geometry="particles"), colliding_scene(), 100, TOLERANCES, (1, 8))
    if name == "rigid_step":
        return Variant(SimulationSettings(), tumbling_bodies(), 60, SOLVE_TOLERANCES, (None,))
    if name == "rigid_step_every_substep":
        return Variant(SimulationSettings(substeps_per_detection=1), tumbling_bodies(), 60, SOLVE_TOLERANCES, (None,))
    raise ValueError(name)


VARIANTS = ("particles", "rigid_step", "rigid_step_every_substep")


def _engine(model, settings, selector, lanes):
    """An engine on the device; ``lanes``: PRB_BODY_LANES for it (None: the engine's choice)."""
    from dataclasses import replace

    from addon.core.opencl_engine import OpenCLEngine

    if lanes is None:
        return OpenCLEngine(model, replace(settings, device=selector))
    os.environ["PRB_BODY_LANES"] = str(lanes)
    try:
        engine = OpenCLEngine(model, replace(settings, device=selector))
    finally:
        del os.environ["PRB_BODY_LANES"]
    assert engine.body_lanes == lanes
    return engine


def compare_trajectories(selector: str, against: str, name: str, lanes: int | None) -> dict:
    """The device against the reference step ('reference') or another OpenCL device (its CPU path),
    every 10 substeps: largest differences and whether they are within the variant's tolerances."""
    from addon.core.reference import ReferenceEngine

    settings, model, substeps, tolerances, _ = variant(name)
    engine = _engine(model, settings, selector, lanes)
    other = (ReferenceEngine(model, settings) if against == "reference"
             else _engine(model, settings, against, None if lanes is None else 1))
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
    return dict(variant=name, against=against, lanes={"PRB_BODY_LANES": lanes}, substeps=substeps,
                tolerances=tolerances, largest_differences=worst, largest_displacement=moved, ok=bool(ok))


def runs_are_identical(selector: str, name: str, lanes: int | None) -> dict:
    """Two runs of a tumbling 48-cube pile (400 substeps) on the device: bit-identical."""
    from tests.core.test_neighbour_lists import tumbling_pile

    settings = variant(name).settings
    model = tumbling_pile()
    states = []
    for _ in range(2):
        engine = _engine(model, settings, selector, lanes)
        engine.step(400)
        s = engine.body_state()
        states.append(np.concatenate([s.position.ravel(), s.orientation.ravel(), s.velocity.ravel(),
                                      s.angular_velocity.ravel()]))
    moved = float(np.abs(states[0][:3 * model.body_count] - model.body_position.ravel()).max())
    identical = bool(np.array_equal(states[0], states[1]))
    return dict(variant=name, lanes={"PRB_BODY_LANES": lanes}, substeps=400, bodies=model.body_count,
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
    with open(log_path, "w") as log:
        def record(key, entry):
            result.setdefault(key, []).append(entry)
            log.write(json.dumps(entry) + "\n")
            log.flush()
            print(" ", json.dumps(entry), flush=True)
            save()

        cpu = [d for d in list_devices() if not d.is_gpu and d.selector != device.selector]
        for name in (() if args.skip_checks else VARIANTS):
            for lanes in variant(name).body_lanes:
                record("trajectories", compare_trajectories(device.selector, "reference", name, lanes))
                if cpu:
                    record("trajectories", compare_trajectories(device.selector, cpu[0].selector, name, lanes))
        for name in (() if args.skip_checks else VARIANTS):
            for lanes in variant(name).body_lanes:
                record("determinism", runs_are_identical(device.selector, name, lanes))
        if not args.skip_pytest:
            print(f"{' '.join(args.tests)} on {device.label} ...", flush=True)
            result["core_tests"] = run_core_tests(device.selector, args.tests, log)
            print(" ", result["core_tests"].get("summary") or result["core_tests"].get("error"), flush=True)
    checks = result.get("trajectories", []) + result.get("determinism", [])
    result["ok"] = bool(all(c["ok"] for c in checks) and result.get("core_tests", {}).get("ok", True))
    result["finished"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    save()
    print(f"{'PASS' if result['ok'] else 'FAIL'}: {out} and {log_path}")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
