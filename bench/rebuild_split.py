"""Contact-kernel time in substeps that rebuild the neighbour lists against those that walk them.

Steps one substep at a time with device events (slow; a diagnostic, not a benchmark window):
    PYTHONPATH=. python bench/rebuild_split.py 100000 3.0 gpu    # cubes, start (simulated s), device
"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from addon.core import SimulationSettings  # noqa: E402
from addon.core.opencl_engine import OpenCLEngine  # noqa: E402
from bench.scenes import cube_pile  # noqa: E402


def main(argv):
    count, start = int(argv[0]), float(argv[1])
    device = argv[2] if len(argv) > 2 else None
    engine = OpenCLEngine(cube_pile(count), SimulationSettings(device=device), profile=True)
    engine.step(round(start / engine.params.substep))
    engine.queue.finish()
    engine.collect_profile()
    rows = []
    for _ in range(300):
        engine.stage_seconds.clear()
        before = engine.rebuilds
        engine.step(1)
        engine.queue.finish()
        rows.append((engine.rebuilds - before, 1e3 * engine.collect_profile().get("contacts", 0.0)))
    rows = np.array(rows)
    for flag, name in ((1, "rebuild"), (0, "list")):
        chosen = rows[:, 0] == flag
        if chosen.any():
            print(f"{count} cubes from {start} s: {name} substeps {int(chosen.sum())}, "
                  f"contacts {rows[chosen, 1].mean():.3f} ms")


if __name__ == "__main__":
    main(sys.argv[1:])
