"""Headless Simulate & Bake for render nodes.

    blender --background scene.blend --python addon/cli.py -- [options]
    python addon/cli.py --scene scene.blend [options]          (with the bpy module)

Dynamic bodies: --objects A,B or --collection NAME; by default the objects whose role is Dynamic
Body, else the selection saved in the file. Static colliders: objects whose role is Static Collider
plus --colliders A,B. Settings not given on the command line come from the scene's add-on settings
(else the defaults); the scene's gravity and frame rate always apply.

The result is saved to --output (default: <scene>.baked.blend beside the input); the input file
is never overwritten unless --overwrite is given. Exit status 0 on success, 1 with a one-line
"error: ..." on stderr otherwise (2 for bad arguments).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

INSIDE_BLENDER = "bpy" in sys.modules  # the Blender binary imports bpy before running --python scripts
ROOT = Path(__file__).resolve().parents[1]


class CliError(Exception):
    pass


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="blender --background scene.blend --python addon/cli.py --" if INSIDE_BLENDER else "addon/cli.py",
        description="Simulate objects of a .blend as particle rigid bodies and bake them to keyframes.")
    p.add_argument("--scene", help=".blend file to open (default inside Blender: the file Blender opened)")
    p.add_argument("--scene-name", help="scene in the file (default: the file's active scene)")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--objects", help="comma-separated names of the dynamic bodies")
    group.add_argument("--collection", help="collection whose mesh objects are the dynamic bodies")
    p.add_argument("--colliders", help="comma-separated names of static colliders (added to role Static Collider)")
    p.add_argument("--frames", nargs=2, type=int, metavar=("START", "END"), help="frame range (default: scene's)")
    p.add_argument("--step", type=int, help="key every Nth frame")
    p.add_argument("--substeps", type=int, help="substeps per frame (default: automatic)")
    p.add_argument("--radius", type=float, help="particle radius (default: automatic)")
    p.add_argument("--sleep-speed", type=float, metavar="M_PER_S",
                   help="bodies slower than this for --sleep-time seconds stop until hit (0: never; default 0.02 "
                        "or the scene's setting)")
    p.add_argument("--sleep-time", type=float, metavar="SECONDS", help="see --sleep-speed (default 0.5)")
    p.add_argument("--device", help="OpenCL device: auto, gpu, cpu, P:D, or part of its name")
    p.add_argument("--backend", choices=("opencl", "reference"), default="opencl",
                   help="simulation engine (default: opencl; reference is slow NumPy)")
    p.add_argument("--max-particles", type=int, help="refuse scenes needing more particles than this")
    p.add_argument("--bake-mode", choices=("keyframes", "instances"), default="keyframes",
                   help="keyframes: key each body's object; instances: one object shows every body from a point "
                        "cache written beside --output (plays without the add-on; for 10,000 bodies and more)")
    p.add_argument("--cache-folder", help="instances: folder of the point cache (default: prb_cache beside --output)")
    p.add_argument("--output", help="where to save the baked file (default: <scene>.baked.blend)")
    p.add_argument("--overwrite", action="store_true", help="allow --output to be the input file or an existing file")
    return p.parse_args(argv)


def _names(text):
    return [n.strip() for n in text.split(",") if n.strip()] if text else []


def _lookup(bpy, names, what):
    found, missing = [], []
    for name in names:
        obj = bpy.data.objects.get(name)
        (found if obj is not None else missing).append(obj if obj is not None else name)
    if missing:
        raise CliError(f"{what} not found in the file: {', '.join(missing)}")
    return found


def _output_path(args, input_path: str | None) -> str:
    if args.output:
        out = os.path.abspath(args.output)
    elif input_path:
        stem, _ = os.path.splitext(input_path)
        out = stem + ".baked.blend"
    else:
        raise CliError("give --output (the open file has never been saved)")
    if not out.endswith(".blend"):
        raise CliError(f"--output must end in .blend: {out}")
    if input_path and os.path.abspath(input_path) == out and not args.overwrite:
        raise CliError(f"--output is the input file {out}; pass --overwrite to replace it")
    if os.path.exists(out) and not args.overwrite and os.path.abspath(input_path or "") != out:
        raise CliError(f"{out} exists; pass --overwrite to replace it")
    if not os.path.isdir(os.path.dirname(out)):
        raise CliError(f"folder of --output does not exist: {os.path.dirname(out)}")
    return out


def run(argv) -> int:
    args = parse_args(argv)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import bpy

    registered_here = False
    blender = None
    try:
        if args.scene:
            path = os.path.abspath(args.scene)
            if not os.path.isfile(path):
                raise CliError(f"scene file not found: {path}")
            bpy.ops.wm.open_mainfile(filepath=path, load_ui=False)
        elif not INSIDE_BLENDER:
            raise CliError("give --scene FILE.blend")
        input_path = bpy.data.filepath or None
        out = _output_path(args, input_path)

        import addon.blender as blender  # noqa: E402  (after sys.path is set)
        from addon.blender.job import BakeError, BakeJob, BakeOptions, pick_objects, print_log

        if not hasattr(bpy.types.Scene, "prb_settings"):  # not already enabled as an extension
            blender.register()
            registered_here = True

        scene = bpy.data.scenes.get(args.scene_name) if args.scene_name else bpy.context.scene
        if scene is None:
            raise CliError(f"scene {args.scene_name!r} not found; scenes: {', '.join(s.name for s in bpy.data.scenes)}")
        if bpy.context.window is not None and bpy.context.window.scene != scene:
            bpy.context.window.scene = scene
        context = bpy.context
        if context.scene != scene:
            raise CliError(f"cannot make {scene.name!r} the active scene")

        roles_dynamic, roles_static = pick_objects(context, selected=[])
        if args.objects:
            dynamic = _lookup(bpy, _names(args.objects), "objects")
        elif args.collection:
            coll = bpy.data.collections.get(args.collection)
            if coll is None:
                raise CliError(f"collection {args.collection!r} not found")
            dynamic = [o for o in coll.all_objects if o.type == "MESH" and o.prb.role != "IGNORED"]
            if not dynamic:
                raise CliError(f"collection {args.collection!r} has no mesh objects")
        elif roles_dynamic:
            dynamic = roles_dynamic
        else:
            dynamic, _ = pick_objects(context, selected=[o for o in scene.objects if o.select_get()])
            if not dynamic:
                raise CliError("no dynamic bodies: give --objects or --collection, set roles, or save the file "
                               "with the objects selected")
        dynamic_names = {o.name for o in dynamic}
        static = [o for o in roles_static if o.name not in dynamic_names]
        for obj in _lookup(bpy, _names(args.colliders), "colliders"):
            if obj.name not in dynamic_names and obj not in static:
                static.append(obj)

        frames = args.frames or (None, None)
        options = BakeOptions.from_scene(
            scene, frame_start=frames[0], frame_end=frames[1], frame_step=args.step, substeps=args.substeps,
            radius=args.radius, device=args.device, backend=args.backend, max_particles=args.max_particles,
            sleep_speed=args.sleep_speed, sleep_time=args.sleep_time, bake_mode=args.bake_mode.upper(),
            cache_folder=os.path.abspath(args.cache_folder or os.path.join(os.path.dirname(out), "prb_cache")))
        print(f"PRB: baking {len(dynamic)} objects, {len(static)} colliders from {input_path or 'the open file'}",
              flush=True)
        job = BakeJob(context, dynamic, static, options, log=print_log)
        try:
            result = job.run()
        except BaseException:
            job.cancel()
            raise
        bpy.ops.wm.save_as_mainfile(filepath=out, copy=True)
        print(f"PRB: saved {out}", flush=True)
        print(f"PRB: {result.summary()}", flush=True)
        return 0
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 1
    except Exception as exc:  # noqa: BLE001 - one line for the render farm's log
        from addon.blender.operators import user_message

        message, expected = user_message(exc)
        if not expected:
            import traceback

            traceback.print_exc()
        print(f"error: {message}", file=sys.stderr, flush=True)
        return 1
    finally:
        if registered_here:
            blender.unregister()


def main() -> None:
    if "--" in sys.argv:
        argv = sys.argv[sys.argv.index("--") + 1:]
    elif INSIDE_BLENDER:
        argv = []
    else:
        argv = sys.argv[1:]
    code = run(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    if code or not INSIDE_BLENDER:
        sys.exit(code)


if __name__ == "__main__":
    main()
