"""Our engine and NVIDIA Newton's XPBD solver on the same cube piles, side by side in one run (issue 22).

Newton's side is the shared peer script (``gpu-peer/peer_pile.py``: Newton 1.8, SolverXPBD, 1 ms
substeps, the same poses as ``bench/scenes.py cube_pile``), run once per iteration count; ours is
``bench/contact_figures.py``'s pile for each contact geometry. Both report ms per simulated second
in the fall (0-1 s) and in the pile phase (from 3 s) and the pile figures at 3 s, 5 s and the end
(highest corner, 95th-percentile height, mean centre height, footprint radius, fraction at rest,
mean speed, deepest corner), measured the same way. The JSON gives each side's figures and, per
size and geometry, Newton's cost over ours and our pile figures over Newton's.

On the GPU machine (the peer's README says how its wheels travel):

    python bench/vs_newton.py --peer .peer/peer_pile.py --sizes 1000 10000 100000 --seconds 10 10 5 \\
        --geometries particles voxels --iterations 2 8 --out $OUT/vs_newton.json
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from addon.core.settings import CONTACT_GEOMETRIES  # noqa: E402
from bench.contact_figures import pile  # noqa: E402
from bench.machine import commit, cpu_model, setting_overrides, write_report  # noqa: E402

FIGURES = ("pile_height_m", "pile_height_p95_m", "mean_centre_height_m", "footprint_radius_m")


def run_peer(script: str, sizes, seconds, iterations: int) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "peer.json"
        command = [sys.executable, script, "--sizes", *map(str, sizes), "--seconds", *map(str, seconds),
                   "--iterations", str(iterations), "--out", str(out)]
        subprocess.run(command, check=True)
        return json.loads(out.read_text())


def compare(ours: dict, peer: dict) -> dict:
    """Newton's ms per simulated second over ours (fall, pile phase), and our pile figures over
    Newton's at each checkpoint both have."""
    out = {}
    peer_fall, peer_pile = peer.get("fall_window") or {}, peer.get("pile_window") or {}
    if peer_fall and ours.get("ms_per_simulated_s_fall_0_1s"):
        out["newton_over_ours_fall"] = peer_fall["ms_per_simulated_s"] / ours["ms_per_simulated_s_fall_0_1s"]
    if peer_pile and ours.get("ms_per_simulated_s_pile_from_3s"):
        out["newton_over_ours_pile"] = peer_pile["ms_per_simulated_s"] / ours["ms_per_simulated_s_pile_from_3s"]
    # the peer names its checkpoints t3s, t5s and end_10.00s; ours 3, 5 and 10
    peer_at = {}
    for key, figures in (peer.get("pile") or {}).items():
        peer_at[float(key.removeprefix("end_").removeprefix("t").removesuffix("s"))] = figures
    for when, figures in ours["checkpoints"].items():
        theirs = peer_at.get(float(when))
        if not theirs:
            continue
        out[f"ours_over_newton_at_{when}s"] = {k: figures[k] / theirs[k] for k in FIGURES if theirs.get(k)}
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peer", required=True, help="path of the gpu-peer folder's peer_pile.py")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--seconds", type=float, nargs="+", default=[10.0, 10.0, 5.0], help="per size")
    parser.add_argument("--geometries", nargs="+", choices=CONTACT_GEOMETRIES, default=["particles", "voxels"])
    parser.add_argument("--iterations", type=int, nargs="+", default=[2, 8], help="Newton's XPBD iterations")
    parser.add_argument("--device", default="gpu", help="OpenCL device selector for ours")
    parser.add_argument("--setting", action="append", default=[],
                        help="a SimulationSettings field for our piles, e.g. --setting solve_passes=2")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    overrides = setting_overrides(args.setting)
    seconds = [args.seconds[min(i, len(args.seconds) - 1)] for i in range(len(args.sizes))]
    report = {"benchmark": "bench/vs_newton.py", "commit": commit(), "cpu_model": cpu_model(),
              "sizes": args.sizes, "seconds": seconds, "settings": overrides, "ours": {}, "newton": {},
              "comparison": {}}
    started = time.perf_counter()
    for geometry in args.geometries:
        report["ours"][geometry] = {}
        for count, s in zip(args.sizes, seconds):
            report["ours"][geometry][str(count)] = pile(count, s, {"device": args.device, **overrides,
                                                                   "contact_geometry": geometry})
    from addon.core.device import choose_device
    report["device_ours"] = choose_device(args.device).label
    for iterations in args.iterations:
        peer = run_peer(args.peer, args.sizes, seconds, iterations)
        key = f"xpbd_{iterations}_iterations"
        report["newton"][key] = peer
        report["device_newton"] = peer.get("device")
        by_size = {r["bodies"]: r for r in peer["results"] if "error" not in r and "skipped" not in r}
        for geometry in args.geometries:
            for count in args.sizes:
                if count in by_size:
                    report["comparison"].setdefault(geometry, {}).setdefault(str(count), {})[key] = compare(
                        report["ours"][geometry][str(count)], by_size[count])
    report["wall_s"] = time.perf_counter() - started
    write_report(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
