"""What Blender's Connect (``bpy.ops.rigidbody.connect``) costs a constraint in a scene of N bricks, with
only a few bricks selected: the cost follows the scene, not the selection (each constraint_add rebuilds
the whole scene's dependency graph). Behind sample_scenes/destruction.py's choice of glue.

    PYTHONPATH=. .venv/bin/python bench/probes/connect_cost.py --bricks 500 2000 --out out/connect_cost.json
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.machine import commit, cpu_model, write_report  # noqa: E402


def seconds_per_constraint(bricks: int, selected: int) -> float:
    import bpy

    from sample_scenes.generate import box_mesh

    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    bpy.ops.rigidbody.world_add()
    mesh = box_mesh("Brick", (0.5, 0.25, 0.25))
    objects = []
    for i in range(bricks):
        obj = bpy.data.objects.new(f"Brick.{i:05d}", mesh)
        obj.location = (i % 40 * 0.5, 0.0, (i // 40) * 0.25)
        scene.collection.objects.link(obj)
        obj.select_set(True)
        objects.append(obj)
    bpy.context.view_layer.objects.active = objects[0]
    bpy.ops.rigidbody.objects_add(type="ACTIVE")
    bpy.ops.object.select_all(action="DESELECT")
    for obj in objects[:selected + 1]:
        obj.select_set(True)
    bpy.context.view_layer.objects.active = objects[0]
    started = time.perf_counter()
    bpy.ops.rigidbody.connect(con_type="FIXED", connection_pattern="SELECTED_TO_ACTIVE")
    return (time.perf_counter() - started) / selected


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bricks", type=int, nargs="+", default=[500, 2000])
    p.add_argument("--selected", type=int, default=20, help="constraints made (bricks selected besides the active)")
    p.add_argument("--out")
    args = p.parse_args(argv)
    rows = [{"bricks": n, "selected": args.selected, "seconds_per_constraint": seconds_per_constraint(n, args.selected)}
            for n in args.bricks]
    write_report({"probe": "bench/probes/connect_cost.py", "commit": commit(), "cpu_model": cpu_model(),
                  "rows": rows}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
