"""The tables of docs/performance.md, printed from the benchmark JSON in bench/results.

    python bench/report.py                               # print every table (Markdown)
    python bench/report.py --update docs/performance.md  # rewrite the tables between the page's markers

The page keeps its prose; each table sits between ``<!-- report:NAME -->`` and ``<!-- /report -->``
and names the JSON file it comes from, so a new benchmark run becomes a new table by re-running this.
Only the standard library: it runs in any Python.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"

# The machine of each file that does not name its CPU (cpu_model), as recorded when it was run.
MACHINE_OF = {
    "bake_keys.json": "2-core Intel Xeon @ 2.50 GHz VM",
    "bake_keys_1k_epyc.json": "2-core AMD EPYC VM",
    "bake_keys_10k.json": "2-core AMD EPYC VM",
    "bake_rebake_clear_10k.json": "2-core AMD EPYC VM",
    "convert.json": "2-core Intel Xeon @ 2.50 GHz VM",
    "pile_over_time.json": "2-core Intel Xeon @ 2.50 GHz VM",
}


def machine(name: str, report: dict) -> str:
    if "cpu_model" in report:
        return f"{report['cpu_model'].replace('Intel(R) Xeon(R) Processor', 'Intel Xeon')}, {report.get('cpu_count', '?')} cores"
    return MACHINE_OF[name]


def load(name: str) -> dict:
    return json.loads((RESULTS / name).read_text())


def source(name: str, machine: str) -> str:
    return f"Source: [`bench/results/{name}`](../bench/results/{name}); {machine}.\n"


def rows(head: list[str], body: list[list]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in body]
    return "\n".join(lines) + "\n"


def short_device(device: str) -> str:
    return device.replace("pthread-", "").replace(" (CPU, Portable Computing Language)", " (PoCL)") \
        .replace(" (GPU, NVIDIA CUDA)", " (NVIDIA OpenCL)").replace("Intel(R) Xeon(R) Processor", "Intel Xeon")


# Stages of the substep as the benchmark's device events name them, grouped as the engine's stages
# (opencl_program.STAGES): by kernel name, or in results recorded before the kernels were split by
# stage, by the older short names.
STAGE_GROUPS = (("grid", ("assign_buckets", "scan_bucket_groups", "scan_group_totals", "scatter_to_buckets",
                          "sort_buckets", "buckets", "scan", "scatter", "sort")),
                ("gather", ("gather_particles", "gather")),
                ("contacts", ("compute_contacts", "contacts")),
                ("bodies", ("integrate_bodies", "bodies")))


def engine_table(name: str) -> str:
    report = load(name)
    body = []
    for r in report["results"]:
        stages = r["stage_ms_per_step"]
        grouped = [sum(stages.get(k, 0.0) for k in keys) for _, keys in STAGE_GROUPS]
        body.append([f"{r['bodies']:,}", f"{r['particles']:,}", f"{r['ms_per_step']:.3f}", f"{r['steps_per_s']:,.0f}",
                     f"{r['rebuilds_in_window']}/{r['steps_timed']}", *(f"{g:.3f}" for g in grouped),
                     f"{r['pile_ms_per_step']:.3f}" if "pile_ms_per_step" in r else "-"])
    head = ["cubes", "particles", "ms/substep", "substeps/s", "grid rebuilds",
            *(f"{g} ms" for g, _ in STAGE_GROUPS), "pile window from 3 s: ms/substep"]
    return rows(head, body) + "\n" + source(name, short_device(report["device"]))


def bake_phases_table(name: str) -> str:
    r = load(name)
    phases = r["phases_s"]
    body = [[f"{r['cubes']:,}", r["frames"], r["substeps_per_frame"], *(f"{phases[k]:.2f}" for k in phases),
             f"{100 * r['fraction_at_rest_end']:.1f} %"]]
    head = ["cubes", "frames", "substeps/frame", *(f"{k.replace('_', ' ')} s" for k in phases), "at rest at the end"]
    return rows(head, body) + "\n" + source(name, short_device(r["device"]))


def vs_blender_table(name: str) -> str:
    report = load(name)
    body = []
    for r in report["results"]:
        for engine, runs in (("Blender (Bullet)", r["blender"]), ("ours", r["ours"])):
            run = runs[0]
            s = run["stats"]
            body.append([f"{r['cubes']:,}", engine, f"{run['sim_ms_per_frame']:.1f}",
                         f"{run['total_s']:.1f}", f"{run['keys_s']:.1f}", f"{s['pile_height_m']:.2f}",
                         f"{s['pile_height_p95_m']:.2f}", f"{s['mean_centre_height_m']:.2f}",
                         f"{s['footprint_radius_m']:.1f}", f"{100 * s['fraction_at_rest']:.0f} %"])
        body.append(["", f"**ours {r['comparison']['speedup_total']:.1f}x faster in total**", "", "", "", "", "", "", "",
                     ""])
    head = ["cubes", "engine", "simulation ms/frame", "simulate + keys s", "of which keys s", "highest corner m",
            "p95 height m", "mean centre height m", "footprint r90 m", "at rest"]
    return rows(head, body) + "\n" + source(name, f"{machine(name, report)}, Blender {report['blender_version']}, "
                                                  f"{report['frames']} frames")


def pile_over_time_table(name: str) -> str:
    report = load(name)
    body = []
    for engine, key in (("Blender (Bullet)", "bullet"), ("ours", "ours")):
        for s in report[key]:
            if s["frame"] in (100, 250, 500, 750):
                body.append([s["frame"], engine, f"{s['pile_height_m']:.2f}", f"{s['pile_height_p95_m']:.2f}",
                             f"{s['mean_centre_height_m']:.2f}", f"{s['footprint_radius_m']:.1f}",
                             f"{100 * s['fraction_at_rest']:.1f} %"])
    head = ["frame", "engine", "highest corner m", "p95 height m", "mean centre height m", "footprint r90 m", "at rest"]
    return rows(head, body) + "\n" + source(name, f"{report['cubes']} cubes, Blender {report['blender_version']}, "
                                                  f"{machine(name, report)}")


def bake_keys_table(names: list[str]) -> str:
    body, sources = [], []
    for name in names:
        r = load(name)
        runs = r.get("all_write_seconds", [r["key_write_seconds"]])
        body.append([f"{r['objects']:,}", r["frames"], f"{r['keys'] / 1e6:.1f} M", r["rotation_mode"],
                     f"{min(runs):.2f}-{max(runs):.2f} ({len(runs)} runs)", f"{r['convert_seconds']:.2f}",
                     r["blender"], machine(name, r), f"`{name}`"])
    head = ["objects", "frames", "keys", "rotation", "key writing s", "world to local s", "bpy", "machine", "file"]
    return rows(head, body) + "\nSources: the files named, in [`bench/results/`](../bench/results/).\n"


def rebake_table(name: str) -> str:
    r = load(name)
    runs = [r["seconds"]] + r.get("later_runs_same_machine", [])
    body = [[step.replace("_", " "), ", ".join(f"{run[step]:.1f}" for run in runs if step in run)]
            for step in r["seconds"]]
    return rows(["step (10,000 objects x 250 frames)", f"seconds ({len(runs)} runs)"], body) + "\n" + \
        source(name, f"{machine(name, r)}, bpy {r['blender']}")


def convert_table(name: str) -> str:
    r = load(name)
    body = [[f"{r['objects']:,}", f"{r['bodies']:,}", f"{r['particles']:,}",
             ", ".join(f"{s:.2f}" for s in r["seconds"]), f"{r['best_seconds']:.2f}", f"{r['target_seconds']:.0f}"]]
    steps = ", ".join(f"{k} {v:.2f}" for k, v in r["step_seconds"].items() if k != "total")
    return rows(["linked duplicates", "bodies", "particles", "runs s", "best s", "target s"], body) + \
        f"\nSteps of one run (s): {steps}.\n\n" + source(name, f"{machine(name, r)}, bpy {r['blender']}")


def glue_table(name: str) -> str:
    r = load(name)
    body = [[f"{run['pieces']:,}", f"{run['particles']:,}", f"{run['bonds']:,}",
             "yes" if run["bonds_correct"] else "no", ", ".join(f"{s:.2f}" for s in run["glue_s_all"]),
             f"{run['glue_s']:.2f}", f"{run['finalize_s']:.2f}"] for run in r["runs"]]
    return rows(["pieces", "particles", "bonds", "every face, none else", "glue runs s", "glue best s",
                 "finalize s"], body) + \
        f"\nLoad average as it ended: {', '.join(f'{x:.1f}' for x in r['load_average'])}; peak memory " \
        f"{r['peak_rss_mib']:,.0f} MiB; commit {r['commit']}.\n\n" + source(name, machine(name, r))


def instances_table(names: list[str]) -> str:
    """One row per run: the same benchmark under other Blender versions and machine loads."""
    body, sources = [], []
    for name in names:
        r = load(name)
        m = r["machine"]
        load_avg = m.get("load_average_1_5_15_min", ["?"])[0]
        body.append([f"{r['bodies']:,}", r["frames"], r["bpy"], f"{load_avg:.1f}", f"{r['cache_write_s']:.1f}",
                     f"{r['cache_write_cpu_s']:.1f}", f"{r['cache_bytes'] / 1e6:,.0f} MB",
                     f"{r['write_peak_traced_bytes'] / 1e6:.0f} MB", f"{r['frame_eval_cpu_ms_median']:.1f}",
                     f"{r['frame_eval_ms_median']:.1f}", f"{r['target_frame_eval_ms']:.0f}"])
        sources.append("- " + source(name, f"{m['cpu']}, {m['cores']} cores, bpy {r['bpy']}, load {load_avg:.1f}"))
    head = ["bodies", "frames", "bpy", "load (1 min)", "cache write s", "of which CPU s", "cache size",
            "writer's peak memory", "one frame's evaluation, CPU ms (median)", "wall ms (median)", "target ms"]
    return rows(head, body) + "\n" + "".join(sources)


def instances_convert_table(name: str) -> str:
    r = load(name)
    m = r["machine"]
    body = [[f"{run['size_spread']:g}", f"{run['bodies']:,}", f"{run['particles']:,}", run["distinct_meshes"],
             run["voxelizations"], f"{run['seconds']:.1f}",
             ", ".join(f"{k} {v:.2f}" for k, v in run["stage_seconds"].items() if k in ("instances", "geometry",
                                                                                       "voxelize", "bodies"))]
            for run in r["runs"]]
    head = ["size spread", "bodies", "particles", "meshes", "voxelizations", "seconds", "of which (s)"]
    load_avg = m.get("load_average_1_5_15_min", ["?"])[0]
    return rows(head, body) + "\n" + source(name, f"{m['cpu']}, {m['cores']} cores, bpy {r['bpy']}, load {load_avg:.1f}")


DRIVER_NAMES = {"pocl-bundled": "PoCL bundled with pyopencl", "intel": "Intel CPU runtime 2026.2 (PyPI)",
                "intel-2024": "Intel CPU runtime 2024.2 (PyPI; the add-on's)",
                "pocl-bookworm": "PoCL of Debian 12", "pocl-trixie": "PoCL of Debian 13"}


def driver_version(s: dict) -> str:
    """"PoCL 3.0-rc2, LLVM 14.0.6" from a PoCL platform's version; Intel's: its driver version."""
    pocl = re.search(r"PoCL (\S+).*?LLVM ([\d.]+)", s["platform_version"])
    if pocl:
        return f"PoCL {pocl[1]}, LLVM {pocl[2]}"
    return f"{s['driver_version']} ({s['platform_version']})"


def megabytes(n) -> str:
    return "?" if n is None else f"{n / 1e6:,.0f}"


def cpu_drivers_table(name: str, repeat: str | None = None, repeat_label: str = "the repeat, right after") -> str:
    """The CPU OpenCL drivers side by side (bench/cpu_drivers.py): one row per driver, medians over the
    runs summarised, the spread as their lowest and highest; ``repeat``: a later run's median beside."""
    r = load(name)
    again = load(repeat)["summary"] if repeat else {}
    body = []
    for key, s in r["summary"].items():
        if "error" in s:
            body.append([DRIVER_NAMES.get(key, key), "failed: " + s["error"][:80], *[""] * 7])
            continue
        size = r.get("sizes", {}).get(key, {})
        e = s["end"]
        body.append([
            DRIVER_NAMES.get(key, key) + f" ({s['runs']} runs)", driver_version(s), r["candidates"][key]["source"],
            f"{megabytes(size.get('download_bytes'))} / {megabytes(size.get('installed_bytes'))}",
            f"{s['kernel_build_s_median']:.1f} ({s['cached_build_s_median']:.2f})",
            f"{s['ms_per_frame_median']:.1f} ({s['ms_per_frame_min']:.1f}-{s['ms_per_frame_max']:.1f})",
            f"{s['ms_per_frame_first_24_median']:.1f} / {s['ms_per_frame_last_24_median']:.1f}",
            f"{s['over_bundled_pocl']:.2f}" if "over_bundled_pocl" in s else "-",
            *([f"{again[key]['ms_per_frame_median']:.1f} ({again[key]['ms_per_frame_min']:.1f}-"
               f"{again[key]['ms_per_frame_max']:.1f}), {again[key]['over_bundled_pocl']:.2f}"
               if "ms_per_frame_median" in again.get(key, {}) else "-"] if repeat else []),
            f"{e['pile_height_m']:.2f} / {e['pile_height_p95_m']:.2f} / {e['mean_centre_height_m']:.3f} / "
            f"{e['footprint_radius_m']:.2f}, {100 * e['fraction_at_rest']:.1f} %, {100 * e['deepest_corner_m']:.2f} cm"
            + ("" if s["end_same_every_round"] else " (differs between rounds)"),
        ])
    head = ["driver", "version", "from", "download / installed MB", "kernel build s, cold (cached)",
            f"ms per frame, median over the {r.get('summary_over', 'all runs')} (lowest-highest)", "first / last 24 frames ms",
            "over bundled PoCL", *(["earlier run: ms per frame (lowest-highest), over bundled PoCL"] if repeat else []),
            f"pile at {r['frames'] / 24:g} s: highest corner / p95 / mean centre / footprint m, "
                                  "at rest, deepest corner"]
    runs = r["runs"]
    loads = [run["load_average_before"][0] for run in runs]
    others = [run["others_cores_during_run"] for run in runs]
    busy = sum(bool(run.get("busy")) for run in runs)
    machine_text = (f"{machine(name, r)}, {r['cubes']:,} cubes, {r['frames']} frames a run, "
                    f"{r.get('rounds_run', r['rounds'])} interleaved rounds at {r['commit']}; other processes took {min(others):.2f}-{max(others):.2f} cores "
                    f"during the runs (load average {min(loads):.1f}-{max(loads):.1f}), {busy} of {len(runs)} runs "
                    f"busy (others over {r.get('busy_cores', 0.25)} cores)")
    text = rows(head, body) + "\n" + source(name, machine_text)
    if repeat:
        rr = load(repeat)
        others = [run["others_cores_during_run"] for run in rr["runs"]]
        text += "\n" + source(repeat, f"{repeat_label}: {rr.get('rounds_run', rr['rounds'])} rounds, "
                                       f"{sum(bool(run.get('busy')) for run in rr['runs'])} of {len(rr['runs'])} "
                                       f"runs busy, medians over the {rr.get('summary_over', 'all runs')}")
    return text


TABLES = {
    "engine_h100": lambda: engine_table("engine_h100.json"),
    "engine_cpu": lambda: engine_table("engine_cpu_2core.json"),
    "bake_phases_h100": lambda: bake_phases_table("bake_phases_h100.json"),
    "vs_blender": lambda: vs_blender_table("vs_blender.json"),
    "vs_blender_3000": lambda: vs_blender_table("vs_blender_3000_250.json"),
    "pile_over_time": lambda: pile_over_time_table("pile_over_time.json"),
    "bake_keys": lambda: bake_keys_table(["bake_keys.json", "bake_keys_1k_epyc.json", "bake_keys_10k.json"]),
    "bake_rebake_clear": lambda: rebake_table("bake_rebake_clear_10k.json"),
    "convert": lambda: convert_table("convert.json"),
    "glue": lambda: glue_table("glue_epyc_2core.json"),
    "instances_convert": lambda: instances_convert_table("instances_convert_100k_cpu.json"),
    "cpu_drivers": lambda: cpu_drivers_table("cpu_drivers_1000_2core_intel2024.json", "cpu_drivers_1000_2core.json",
                                             "the earlier run (the same drivers without Intel's 2024.2, at d6d1c1f)"),
    "instances": lambda: instances_table(["instances_100k_cpu.json", "instances_100k_cpu_bpy4.2.json",
                                           "instances_100k_cpu_load9.json"]),
}

MARKED = re.compile(r"(<!-- report:(\w+) -->\n)(.*?)(<!-- /report -->)", re.S)


def update(page: Path) -> int:
    text = page.read_text()
    unknown = [m.group(2) for m in MARKED.finditer(text) if m.group(2) not in TABLES]
    if unknown:
        print(f"error: {page} names tables this script does not make: {', '.join(unknown)}", file=sys.stderr)
        return 1
    page.write_text(MARKED.sub(lambda m: m.group(1) + TABLES[m.group(2)]() + m.group(4), text))
    print(f"updated {len(MARKED.findall(text))} tables in {page}")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--update", type=Path, metavar="PAGE", help="rewrite the marked tables of this Markdown page")
    args = p.parse_args(argv)
    if args.update:
        return update(args.update)
    for name, make in TABLES.items():
        print(f"<!-- report:{name} -->\n{make()}<!-- /report -->\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
