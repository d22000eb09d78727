"""Headless Simulate & Bake for render nodes.

    blender --command particle_bodies bake --scene scene.blend [options]     (installed extension)
    blender --background scene.blend --python-exit-code 1 --python addon/cli.py -- [options]
    python addon/cli.py --scene scene.blend [options]                        (with the bpy module)

    blender --command particle_bodies get-cpu-driver [--remove]             (Linux x86-64)
    python addon/cli.py --get-cpu-driver | --remove-cpu-driver

get-cpu-driver downloads Intel's CPU OpenCL runtime from PyPI into the user's data folder
(addon/core/cpu_driver.py), for CPUs the bundled PoCL cannot compile for: progress lines on stdout,
exit status 0 once it is installed (or already was).

A scene set up in Blender's Rigid Body world bakes its ACTIVE objects as bodies and its PASSIVE ones as
colliders, with no options for them (blender/rigid_body_world.py). Otherwise:
Dynamic bodies: --objects A,B or --collection NAME; by default the objects whose role is Dynamic
Body, else the selection saved in the file. Static colliders: objects whose role is Static Collider
plus --colliders A,B. Settings not given on the command line come from the scene's add-on settings
(else the defaults); the scene's gravity and frame rate always apply.

The result is saved to --output (default: <scene>.baked.blend beside the input); the input file
is never overwritten unless --overwrite is given. Everything that can be checked (arguments,
output folder, frames, scene, objects, roles, transforms, device, device memory) is checked before
anything is simulated. Exit status 0 on success; otherwise one line "error: ..." on stderr (--verbose adds
the traceback) and exit status 1, or 2 for bad arguments.

Inside the Blender binary the options must follow `--` (Blender reads everything before it), and
only `--python-exit-code 1` makes Blender itself exit non-zero when a script raises; this script
exits non-zero by itself either way.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

# The Blender binary imports bpy before running --python scripts and has a binary path; the bpy
# module (pip install bpy) has none.
INSIDE_BLENDER = "bpy" in sys.modules and bool(getattr(sys.modules["bpy"].app, "binary_path", ""))
ROOT = Path(__file__).resolve().parents[1]
COMMAND = "particle_bodies"  # blender --command particle_bodies ...
EXIT_FAILURE, EXIT_USAGE = 1, 2


class CliError(Exception):
    """A reason to stop, printed as one line."""

    exit_code = EXIT_FAILURE


class UsageError(CliError):
    exit_code = EXIT_USAGE


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message):  # argparse prints the usage and exits; one line instead
        raise UsageError(f"{message} (see --help)")


def _count(minimum: int):
    def parse(text):
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be {minimum} or more, got {text}")
        return value
    parse.__name__ = "integer"  # argparse names the type in "invalid integer value"
    return parse


def _positive(text):
    value = float(text)
    if not value > 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return value


_positive.__name__ = "number"


def _not_negative(text):
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


_not_negative.__name__ = "number"


def add_bake_arguments(p: argparse.ArgumentParser) -> None:
    """The bake options, shared by the --python script and `blender --command particle_bodies bake`."""
    from .core.contact_geometry import CONTACT_GEOMETRY, automatic_substeps
    from .core.settings import CONTACT_GEOMETRIES, ConversionSettings, SimulationSettings

    defaults, limits = SimulationSettings(), ConversionSettings()
    p.add_argument("--scene", help=".blend file to open (default inside Blender: the file Blender opened)")
    p.add_argument("--scene-name", help="scene in the file (default: the file's active scene)")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--objects", help="comma-separated names of the dynamic bodies (not Static Colliders)")
    group.add_argument("--collection",
                       help="collection whose mesh objects are the dynamic bodies (those whose role is Static "
                            "Collider stay colliders, Ignored ones stay out)")
    p.add_argument("--colliders", help="comma-separated names of static colliders (added to role Static Collider)")
    p.add_argument("--frames", nargs=2, type=int, metavar=("START", "END"), help="frame range (default: scene's)")
    p.add_argument("--step", type=_count(1), help="key every Nth frame")
    p.add_argument("--substeps", type=_count(1),
                   help=f"substeps per frame (default: the scene's setting, else automatic from --contact-geometry: "
                        f"{automatic_substeps(lambda geometry: geometry.name)})")
    p.add_argument("--radius", type=_positive, help="particle radius (default: automatic)")
    p.add_argument("--contact-geometry", choices=CONTACT_GEOMETRIES,
                   help="how bodies meet: " + "; ".join(f"{g.name} ({g.label}: {g.summary}; {g.cost})"
                                                         for g in CONTACT_GEOMETRY.values())
                        + f"; default {defaults.contact_geometry} or the scene's setting")
    p.add_argument("--sleep-speed", type=_not_negative, metavar="M_PER_S",
                   help=f"bodies slower than this for --sleep-time seconds stop until hit (0: never; default "
                        f"{defaults.sleep_speed:g} or the scene's setting)")
    p.add_argument("--sleep-time", type=_positive, metavar="SECONDS",
                   help=f"see --sleep-speed (default {defaults.sleep_time:g} or the scene's setting)")
    p.add_argument("--device", help="OpenCL device: auto, gpu, cpu, P:D, or part of its name")
    p.add_argument("--backend", choices=("opencl", "reference"), default="opencl",
                   help="simulation engine (default: opencl; reference is slow NumPy)")
    p.add_argument("--max-particles", type=_count(1),
                   help=f"refuse scenes needing more particles than this (default {limits.max_particles:,} or the "
                        f"scene's setting)")
    p.add_argument("--bake-mode", choices=("keyframes", "instances"),
                   help="keyframes: key each body's object; instances: one object shows every body from a point "
                        "cache written beside --output (plays without the add-on; for 10,000 bodies and more; "
                        "default: the scene's Bake To, keyframes in a scene without the add-on's settings)")
    p.add_argument("--cache-folder", help="instances: folder of the point cache (default: prb_cache beside --output)")
    p.add_argument("--output", help="where to save the baked file (default: <scene>.baked.blend)")
    p.add_argument("--overwrite", action="store_true", help="allow --output to be the input file or an existing file")
    p.add_argument("--verbose", action="store_true", help="print the traceback of an error")


GET_CPU_DRIVER = "get-cpu-driver"


def _cpu_driver_help() -> str:
    from .core.cpu_driver import DOWNLOAD_SIZE_TEXT, RUNTIME_NAME

    return (f"download {RUNTIME_NAME} ({DOWNLOAD_SIZE_TEXT}, under Intel's licence) from PyPI, for CPUs the "
            f"bundled PoCL cannot compile for (Linux x86-64)")


def script_parser() -> argparse.ArgumentParser:
    prog = ("blender --background scene.blend --python-exit-code 1 --python addon/cli.py --" if INSIDE_BLENDER
            else "addon/cli.py")
    p = _ArgumentParser(prog=prog, description="Simulate objects of a .blend as particle rigid bodies and bake "
                                               "them to keyframes.")
    add_bake_arguments(p)
    driver = p.add_mutually_exclusive_group()
    driver.add_argument("--get-cpu-driver", action="store_true", help=f"instead of baking: {_cpu_driver_help()}")
    driver.add_argument("--remove-cpu-driver", action="store_true",
                        help="instead of baking: delete the CPU driver --get-cpu-driver installed")
    return p


def command_parser() -> argparse.ArgumentParser:
    from .core.device import fetched_driver_folder

    p = _ArgumentParser(prog=f"blender --command {COMMAND}",
                        description="Particle Rigid Bodies from the command line (the installed extension).")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    bake = actions.add_parser("bake", help="simulate objects of a .blend and bake them to keyframes",
                              description="Simulate objects of a .blend as particle rigid bodies and bake them "
                                          "to keyframes; the result goes to --output.")
    add_bake_arguments(bake)
    text = _cpu_driver_help()
    driver = actions.add_parser(GET_CPU_DRIVER, help=text,
                                description=f"{text[0].upper()}{text[1:]}, into "
                                            f"{fetched_driver_folder()} (PRB_CPU_DRIVER_FOLDER overrides; "
                                            f"PRB_PYPI_URL names another index). Blender and the command line "
                                            f"use it from their next start.")
    driver.add_argument("--remove", action="store_true", help="delete the driver it installed instead")
    driver.add_argument("--verbose", action="store_true", help="print the traceback of an error")
    return p


def _names(text):
    return [n.strip() for n in text.split(",") if n.strip()] if text else []


def _lookup(bpy, scene, names, what):
    missing = [n for n in names if n not in bpy.data.objects]
    if missing:
        raise CliError(f"{what} not found in the file: {', '.join(missing)}")
    elsewhere = [n for n in names if n not in scene.objects]
    if elsewhere:
        raise CliError(f"{what} not in scene {scene.name!r}: {', '.join(elsewhere)}")
    return [bpy.data.objects[n] for n in names]


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
    if os.path.isdir(out):
        raise CliError(f"--output is a folder: {out}")
    folder = os.path.dirname(out)
    if not os.path.isdir(folder):
        raise CliError(f"folder of --output does not exist: {folder}")
    from .blender.save import check_writable

    check_writable(folder, CliError)  # the save writes a temporary file there first: try exactly that
    return out


def bake(args) -> int:
    """Run one bake from parsed arguments; raises CliError (or another exception) on failure."""
    import bpy

    from . import blender
    from .blender import job as job_module
    from .blender.bake_objects import pick_objects
    from .blender.bake_options import BakeOptions, read_world
    from .blender.job import BakeJob
    from .blender.properties import ROLE_LABELS
    from .core.settings import ROLE_IGNORED, ROLE_STATIC
    from .blender.bake_instances import CACHE_FOLDER_NAME
    from .blender.progress import ProgressPrinter
    from .blender.save import save_copy_atomically

    registered_here = False
    try:
        if args.scene:
            path = os.path.abspath(args.scene)
            if not os.path.isfile(path):
                raise CliError(f"scene file not found: {path}")
            out = _output_path(args, path)
            bpy.ops.wm.open_mainfile(filepath=path, load_ui=False)
        elif bpy.data.filepath:
            out = _output_path(args, bpy.data.filepath)
        else:
            raise CliError("give --scene FILE.blend")
        input_path = bpy.data.filepath or None

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

        world = read_world(scene)
        if world is not None and (args.objects or args.collection or args.colliders):
            raise CliError("the scene's Rigid Body world sets the bodies and colliders (its ACTIVE and PASSIVE "
                           "objects): --objects, --collection and --colliders are for scenes without one")
        roles_dynamic, roles_static = pick_objects(context, selected=[], world=world)
        if args.objects:
            dynamic = _lookup(bpy, scene, _names(args.objects), "objects")
            for obj in dynamic:
                if obj.prb.role in (ROLE_STATIC, ROLE_IGNORED):
                    raise CliError(f"--objects names {obj.name!r}, whose role is {ROLE_LABELS[obj.prb.role]}: set "
                                   f"its role to Dynamic Body or Follow Selection, or leave it out")
        elif args.collection:
            coll = bpy.data.collections.get(args.collection)
            if coll is None:
                raise CliError(f"collection {args.collection!r} not found")
            dynamic = [o for o in coll.all_objects if o.type == "MESH" and o.name in scene.objects
                       and o.prb.role not in (ROLE_STATIC, ROLE_IGNORED)]
            if not dynamic:
                raise CliError(f"collection {args.collection!r} has no mesh objects that can move "
                               f"(in scene {scene.name!r}, role neither Static Collider nor Ignored)")
        elif roles_dynamic:
            dynamic = roles_dynamic
        else:
            dynamic, _ = pick_objects(context, selected=[o for o in scene.objects if o.select_get()])
            if not dynamic:
                raise CliError("no dynamic bodies: give --objects or --collection, set roles, or save the file "
                               "with the objects selected")
        dynamic_names = {o.name for o in dynamic}
        static = [o for o in roles_static if o.name not in dynamic_names]
        colliders = _lookup(bpy, scene, _names(args.colliders), "colliders")
        both = [o.name for o in colliders if o.name in dynamic_names]
        if both:
            raise CliError(f"named both as dynamic bodies and as --colliders: {', '.join(both)}")
        static += [o for o in colliders if o not in static]

        frames = args.frames or (None, None)
        options = BakeOptions.from_scene(
            scene, frame_start=frames[0], frame_end=frames[1], frame_step=args.step, substeps=args.substeps,
            radius=args.radius, device=args.device, backend=args.backend, max_particles=args.max_particles,
            sleep_speed=args.sleep_speed, sleep_time=args.sleep_time, contact_geometry=args.contact_geometry,
            bake_mode=args.bake_mode.upper() if args.bake_mode else None,
            cache_folder=os.path.abspath(args.cache_folder or os.path.join(os.path.dirname(out), CACHE_FOLDER_NAME)))
        progress = ProgressPrinter(sys.stderr)
        job = BakeJob(context, dynamic, static, options, log=job_module.print_log, progress=progress, world=world)
        checked = job.check()  # settings, device and its memory: refused here, before anything is converted or simulated
        scattered = sum(checked.get("instancers", {}).values())
        bodies = (f"{checked['bodies']:,} bodies ({scattered:,} of them instances)" if scattered
                  else f"{len(dynamic)} objects")
        print(f"PRB: baking {bodies}, {len(static)} colliders from {input_path or 'the open file'}", flush=True)
        try:
            result = job.run()
        except BaseException:
            job.cancel()
            raise
        finally:
            progress.close()
        try:
            save_copy_atomically(out)
        except (OSError, RuntimeError) as exc:  # RuntimeError: Blender's own report of a failed write
            raise CliError(f"could not save {out}: {getattr(exc, 'strerror', None) or exc}") from exc
        print(f"PRB: saved {out}", flush=True)
        print(f"PRB: {result.summary()}", flush=True)
        return 0
    finally:
        if registered_here:
            blender.unregister()


class _DownloadPrinter:
    """Progress of the download as lines on stdout: one every tenth of the bytes."""

    def __init__(self):
        self.shown = -1

    def __call__(self, done: int, total: int) -> None:
        tenth = 10 * done // max(total, 1)
        if tenth > self.shown:
            self.shown = tenth
            print(f"PRB: downloaded {done / 1e6:,.0f} of {total / 1e6:,.0f} MB ({100 * done // max(total, 1)}%)",
                  flush=True)


def get_cpu_driver(args) -> int:
    """Fetch (or with --remove delete) Intel's CPU OpenCL runtime; raises CliError on failure."""
    from .core import cpu_driver

    reason = cpu_driver.unsupported_reason()
    if reason:
        raise CliError(reason)
    folder = cpu_driver.target_folder()
    try:
        if getattr(args, "remove", False) or getattr(args, "remove_cpu_driver", False):
            removed = cpu_driver.remove()
            print(f"PRB: removed {cpu_driver.RUNTIME_NAME} from {folder}" if removed
                  else f"PRB: no CPU driver was installed in {folder}", flush=True)
            return 0
        current = cpu_driver.up_to_date()
        if current is not None:
            print(f"PRB: already installed: {cpu_driver.describe(current)}", flush=True)
            return 0
        if INSIDE_BLENDER:  # the Blender binary's Allow Online Access; the bpy module has no such setting
            from .blender.cpu_driver import online_access_problem

            problem = online_access_problem(command_line=True)
            if problem:
                raise CliError(problem)
        print(f"PRB: {cpu_driver.offer_text()} Licence: {cpu_driver.LICENSE_URL}", flush=True)
        marker = cpu_driver.fetch(progress=_DownloadPrinter())
    except cpu_driver.FetchError as exc:
        raise CliError(str(exc)) from exc
    print(f"PRB: installed {cpu_driver.describe(marker)}; Blender and the command line use it from their "
          f"next start", flush=True)
    return 0


def error_line(exc: BaseException) -> str:
    """The one line a render farm's log shows for a failure."""
    if isinstance(exc, CliError):
        return str(exc)
    if isinstance(exc, ImportError) and exc.name == "numpy":
        from .blender.dependencies import numpy_hint

        return f"numpy is missing ({exc}). {numpy_hint()}"
    try:
        from .blender.operators import user_message
    except Exception:  # noqa: BLE001 - the add-on itself does not import (numpy missing, ...)
        return f"{type(exc).__name__}: {exc}"
    return user_message(exc)[0]


def _report(exc: BaseException, verbose: bool) -> int:
    if verbose:
        import traceback

        traceback.print_exception(exc)
    text = " ".join(error_line(exc).split())  # one line, whatever the message holds
    print(f"error: {text}", file=sys.stderr, flush=True)
    return getattr(exc, "exit_code", EXIT_FAILURE)


def _run_guarded(parse, argv) -> int:
    """Parse and bake (or get the CPU driver); every failure becomes one line on stderr and a non-zero
    status."""
    verbose = "--verbose" in argv
    try:
        try:
            args = parse(argv)
        except SystemExit as exc:  # --help
            return exc.code if isinstance(exc.code, int) else 0
        if getattr(args, "get_cpu_driver", False) or getattr(args, "remove_cpu_driver", False):
            return get_cpu_driver(args)
        action = getattr(args, "action", "bake")
        if action == GET_CPU_DRIVER:
            return get_cpu_driver(args)
        if action != "bake":
            raise UsageError(f"unknown action {args.action!r}")
        return bake(args)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr, flush=True)
        return 130
    except Exception as exc:  # noqa: BLE001 - one line for the render farm's log
        return _report(exc, verbose)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def command(argv) -> int:
    """`blender --command particle_bodies ...` (registered by the add-on; Blender passes the arguments)."""
    def parse(argv):
        args = command_parser().parse_args(argv)
        if args.action == "bake" and not args.scene:  # Blender has no file open when it runs a command
            raise UsageError("give --scene FILE.blend")
        return args

    return _run_guarded(parse, list(argv))


def _script_argv(argv: list[str]) -> list[str]:
    """The script's own arguments: after `--` inside Blender (Blender reads everything before it)."""
    if "--" in argv:
        return argv[argv.index("--") + 1:]
    if not INSIDE_BLENDER:
        return argv[1:]
    known = {s for a in script_parser()._actions for s in a.option_strings if s.startswith("--")}
    here = os.path.realpath(__file__)
    after_script = next((i + 1 for i, a in enumerate(argv) if os.path.realpath(a) == here), 1)
    ours = [a for a in argv[after_script:] if a.split("=", 1)[0] in known]
    if ours:
        raise UsageError(f"put `--` before the add-on's options ({' '.join(ours)}), or Blender reads them itself: "
                         f"blender -b scene.blend --python addon/cli.py -- {' '.join(ours)} ...")
    raise UsageError("end the command line with `--` and the add-on's options after it (`--` alone: the scene's "
                     "settings): blender -b scene.blend --python addon/cli.py -- [options]")


def main(argv=None) -> None:
    """The --python script and plain-Python entry point: exits non-zero on any failure."""
    argv = list(sys.argv if argv is None else argv)
    # _script_argv inside the guard: whatever fails there (a missing `--`, an import) is one line too
    code = _run_guarded(lambda a: script_parser().parse_args(_script_argv(a)), argv)
    sys.stdout.flush()
    sys.stderr.flush()
    if code or not INSIDE_BLENDER:
        sys.exit(code)


if __name__ == "__main__":
    if __package__:
        main()
    else:
        # Run as a file (--python addon/cli.py): import it again as part of its package so that its
        # relative imports work. An import failure (numpy missing...) is still one line and exit 1.
        if str(ROOT) not in sys.path:
            sys.path.insert(0, str(ROOT))
        try:
            from addon import cli as _package_cli
        except Exception as _exc:  # noqa: BLE001
            print(f"error: {type(_exc).__name__}: {_exc}", file=sys.stderr, flush=True)
            sys.exit(EXIT_FAILURE)
        _package_cli.main()
