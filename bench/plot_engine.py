"""Log-log chart and Markdown table of engine benchmark JSON files (bench/engine_bench.py output).

    python bench/plot_engine.py bench/results/engine_h100.json bench/results/engine_cpu_2core.json --out docs/images/engine_scaling.png
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from addon.core.contact_geometry import PARTICLES  # noqa: E402


def default_skin_results(report: dict) -> list[dict]:
    """The rows run with the engine's default neighbour skin (tuning runs hold several skins)."""
    skin = PARTICLES.neighbour_skin
    return [r for r in report["results"] if r.get("neighbour_skin", skin) == skin]


def table(report: dict) -> str:
    results = default_skin_results(report)
    stages = sorted({k for r in results for k in r["stage_ms_per_step"]})
    head = ("| cubes | particles | ms/substep | substeps/s | rebuilds | est. GB/s | " + " | ".join(stages)
            + " | pile window: ms/substep |")
    rule = "|" + " --- |" * (7 + len(stages))
    rows = [head, rule]
    for r in results:
        pile = f"{r['pile_ms_per_step']:.3f} (at {r['pile_window_at_s']:.0f} s)" if "pile_ms_per_step" in r else "-"
        rows.append(f"| {r['bodies']:,} | {r['particles']:,} | {r['ms_per_step']:.3f} | {r['steps_per_s']:.0f} | "
                    f"{r.get('rebuilds_in_window', r['steps_timed'])}/{r['steps_timed']} | "
                    f"{r['est_bandwidth_GBps']:.0f} | "
                    + " | ".join(f"{r['stage_ms_per_step'].get(s, 0):.3f}" for s in stages) + f" | {pile} |")
    return "\n".join(rows)


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("reports", nargs="+")
    parser.add_argument("--out", default="docs/images/engine_scaling.png")
    args = parser.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=110)
    for path in args.reports:
        report = json.loads(Path(path).read_text())
        results = default_skin_results(report)
        ax.loglog([r["bodies"] for r in results], [r["steps_per_s"] for r in results], "o-",
                  label=report["device"] + " (fall)")
        pile = [r for r in results if "pile_steps_per_s" in r]
        if pile:
            ax.loglog([r["bodies"] for r in pile], [r["pile_steps_per_s"] for r in pile], "s--", alpha=0.7,
                      label=report["device"] + f" (pile, from {pile[0]['pile_window_at_s']:.0f} s)")
        print(f"\n{report['device']} ({path})\n")
        print(table(report))
    ax.set_xlabel("27-particle cubes")
    ax.set_ylabel("substeps per second")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title("Engine speed, cubes falling into a pile")
    fig.tight_layout()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out)
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
