"""The machine a benchmark ran on, for its JSON: figures are only comparable on one machine."""
from __future__ import annotations

import json
import os
import platform
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cpu_model() -> str:
    """The CPU's model name (Linux /proc/cpuinfo; elsewhere what platform knows)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def commit() -> str:
    """The repository's commit (short hash) the figures were measured at."""
    return os.popen(f"git -C {ROOT} rev-parse --short HEAD").read().strip()


def setting_overrides(items) -> dict:
    """``--setting key=value`` arguments as SimulationSettings overrides: the value as JSON (numbers,
    booleans) or else as the string given."""
    overrides = {}
    for item in items:
        key, _, value = item.partition("=")
        try:
            overrides[key] = json.loads(value)
        except json.JSONDecodeError:
            overrides[key] = value
    return overrides


def write_report(report: dict, out: str | None) -> None:
    """A benchmark's report as indented JSON: to ``out`` (folders made) when given, and to stdout."""
    text = json.dumps(report, indent=2)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text + "\n")
    print(text)
