"""Log-log chart and Markdown table of engine benchmark JSON files (bench/engine_bench.py output).

    python bench/plot_engine.py bench/results/engine_h100.json bench/results/engine_cpu.json --out docs/images/engine_scaling.png
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def table(report: dict) -> str:
    stages = sorted({k for r in report["results"] for k in r["stage_ms_per_step"]})
    head = "| cubes | particles | ms/substep | substeps/s | est. GB/s | " + " | ".join(stages) + " |"
    rule = "|" + " --- |" * (5 + len(stages))
    rows = [head, rule]
    for r in report["results"]:
        rows.append(f"| {r['bodies']:,} | {r['particles']:,} | {r['ms_per_step']:.3f} | {r['steps_per_s']:.0f} | "
                    f"{r['est_bandwidth_GBps']:.0f} | "
                    + " | ".join(f"{r['stage_ms_per_step'].get(s, 0):.3f}" for s in stages) + " |")
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
        results = report["results"]
        ax.loglog([r["bodies"] for r in results], [r["steps_per_s"] for r in results], "o-", label=report["device"])
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
