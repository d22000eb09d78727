"""Bit-identity check of the working tree against an earlier commit (default 6d0605e, before the
kernels were split by stage): a refactoring must not change a single bit of the results.

    .venv/bin/python tools/compare_with_commit.py                      # core engine scenes
    .venv/bin/python tools/compare_with_commit.py --blender            # and every sample scene's bake
    .venv/bin/python tools/compare_with_commit.py --commit main --blender --frames 0   # full ranges

The commit is checked out with ``git worktree add`` into a temporary folder (removed afterwards),
and both trees run the same scenes with this Python (its numpy, pyopencl and bpy) on the same
OpenCL device:
- core: scenes built with the core alone (bench/scenes.py's cube pile on a ground plane with voxel
  corners, cubes on an animated triangle floor, a small pile run until it sleeps with the GPU's
  summing lanes forced on), stepped through Simulation; body state, particle positions, contact
  keys and the rebuild count compared bit for bit;
- --blender: every sample_scenes/*.blend baked headless with addon/cli.py; every F-curve key
  (frame and value) compared bit for bit. A scene whose bodies come from an instancer bakes to
  instances only: its point cache (every byte of the PC2 file) is compared instead.
Exit status 0 when everything is identical, 1 with every difference listed otherwise.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_COMMIT = "6d0605e"
DEFAULT_FRAMES = 48  # per sample scene; 0: the scene's own frame range


# -- what each tree runs (in a child process whose sys.path starts with that tree) --------------

def _core_scenes():
    """name -> (builder, output frames, settings, environment overrides). Built in the tree under
    test, so a scene's model also goes through that tree's builder."""
    import numpy as np

    from addon.core import Material, ModelBuilder, SimulationSettings
    from addon.core.shapes import cube_particles
    from bench.scenes import cube_pile

    def pile():
        return cube_pile(300)

    def triangle_floor():
        # cubes, round and voxel-cornered, dropped on a jittered floor of small triangles that
        # slides and rises: triangle faces, edges and vertices, and the collider clock
        rng = np.random.default_rng(1)
        builder = ModelBuilder(1.0 / 6.0)
        for k in range(40):
            builder.add_body(cube_particles(1.0), density=1000.0,
                             position=(1.3 * (k % 7) - 4.0, 1.3 * (k // 7) - 4.0, 0.8 + 0.2 * (k % 3)),
                             orientation=rng.normal(size=4) * [4, 1, 1, 1], corner_reach=(k % 2) * 1.0,
                             material=Material(friction=0.6, restitution=0.3))
        cells = 24
        xs = np.linspace(-6.0, 6.0, cells + 1)
        gx, gy = np.meshgrid(xs, xs, indexing="ij")
        vertices = np.stack([gx.ravel(), gy.ravel(), rng.uniform(-0.03, 0.03, gx.size)], 1)
        i, j = np.meshgrid(np.arange(cells), np.arange(cells), indexing="ij")
        a = (i * (cells + 1) + j).ravel()
        triangles = np.concatenate([np.stack([a, a + cells + 1, a + cells + 2], 1),
                                    np.stack([a, a + cells + 2, a + 1], 1)])
        frames = [vertices + [0.02 * f, 0.0, 0.01 * f] for f in range(12)]
        builder.add_static_mesh(vertices, triangles, frames=frames)
        return builder.finalize()

    def sleeping_pile():
        return cube_pile(27, seed=3)

    return {
        "cube_pile_300": (pile, 16, SimulationSettings(), {}),
        "triangle_floor_40": (triangle_floor, 10, SimulationSettings(), {}),
        "sleeping_pile_27_lanes8": (sleeping_pile, 60, SimulationSettings(), {"PRB_BODY_LANES": "8"}),
    }


def run_core(out_dir: str, device: str | None, only: str | None) -> None:
    import dataclasses

    import numpy as np

    from addon.core.simulation import Simulation

    for name, (build, frames, settings, environment) in _core_scenes().items():
        if only and name != only:
            continue
        saved = {key: os.environ.get(key) for key in environment}
        os.environ.update(environment)
        try:
            sim = Simulation(build(), dataclasses.replace(settings, device=device), frame_rate=24.0)
            for _ in sim.frames(frames):
                pass
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        engine = sim.engine
        state = engine.body_state()
        keys = np.array(sorted(engine.contact_keys()), dtype=np.int64).reshape(-1, 2)
        np.savez(Path(out_dir) / f"{name}.npz", position=state.position, orientation=state.orientation,
                 velocity=state.velocity, angular_velocity=state.angular_velocity,
                 particle_position=engine.particle_positions(), contact_keys=keys,
                 rebuilds=np.array([engine.rebuilds]), substeps=np.array([engine.substeps_done]))
        still = int(np.sum(~np.any(state.velocity, axis=1)))
        planes = engine.model.plane_count
        print(f"  {name}: {engine.model.body_count} bodies ({still} asleep), {engine.substeps_done} substeps, "
              f"{engine.rebuilds} rebuilds; contacts: {int(np.sum(keys[:, 1] >= 0))} particle, "
              f"{int(np.sum((keys[:, 1] <= -2) & (keys[:, 1] > -2 - planes)))} plane, "
              f"{int(np.sum(keys[:, 1] <= -2 - planes))} triangle", flush=True)


def read_keys(blend: str, out: str) -> None:
    """Every F-curve key of a baked file: (object, data path, index) -> co (frame, value) pairs."""
    import bpy
    import numpy as np

    bpy.ops.wm.open_mainfile(filepath=blend, load_ui=False)
    arrays = {}
    for obj in bpy.data.objects:
        action = obj.animation_data.action if obj.animation_data else None
        if action is None:
            continue
        if "slots" in bpy.types.Action.bl_rna.properties:
            curves = [fc for layer in action.layers for strip in layer.strips
                      for bag in getattr(strip, "channelbags", ()) for fc in bag.fcurves]
        else:
            curves = list(action.fcurves)
        for fc in curves:
            co = np.empty(2 * len(fc.keyframe_points), dtype=np.float32)
            fc.keyframe_points.foreach_get("co", co)
            arrays[f"{obj.name}|{fc.data_path}|{fc.array_index}"] = co
    np.savez(out, **arrays)
    frames = sorted({float(f) for co in arrays.values() for f in co[0::2]})
    print(f"  {len({key.split('|')[0] for key in arrays})} animated objects, {len(arrays)} F-curves, "
          f"{sum(len(co) // 2 for co in arrays.values())} keys, frames {frames[0] if frames else '-'}-"
          f"{frames[-1] if frames else '-'}", flush=True)


# -- the comparison (in this process) ------------------------------------------------------------

def _run(cmd, cwd: Path, log: Path, extra_env=None, refusal: str | None = None) -> bool:
    """Run ``cmd`` in ``cwd``; False when it failed with ``refusal`` in its output, else it must succeed."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(cwd), *filter(None, [env.get("PYTHONPATH")])])
    env.update(extra_env or {})
    with open(log, "w") as handle:
        code = subprocess.run(cmd, cwd=cwd, env=env, stdout=handle, stderr=subprocess.STDOUT).returncode
    text = log.read_text()
    print("".join("    " + line + "\n" for line in text.splitlines() if line.startswith("  ")), end="", flush=True)
    if code != 0 and refusal is not None and refusal in text:
        return False
    if code != 0:
        raise SystemExit(f"error: {' '.join(map(str, cmd))} failed in {cwd} (exit {code}):\n{text[-3000:]}")
    return True


INSTANCES_ONLY = "bake to Instances only"  # the keyframe bake's refusal of instancers (addon/blender/bake_objects.py)


def _bake_scene(tree: Path, scene: Path, out: Path, frame_args, device_args, log: Path) -> None:
    """Bake ``scene`` with ``tree``'s CLI and store what it made in ``out/<scene>.npz``: every F-curve
    key, or for a scene that bakes to instances only, the bytes of its point cache."""
    this = Path(__file__).resolve()
    baked = out / f"{scene.stem}.blend"
    cli = [sys.executable, str(tree / "addon" / "cli.py"), "--scene", str(scene), *frame_args, *device_args,
           "--output", str(baked)]
    # keyframes asked for: a scene saved with Bake To Instances would otherwise bake its cache beside
    # --output and leave no keys to compare; one whose bodies come from an instancer is refused
    if _run(cli + ["--bake-mode", "keyframes"], tree, log, refusal=INSTANCES_ONLY):
        _run([sys.executable, str(this), "--read-keys", str(baked), str(out / f"{scene.stem}.npz")], ROOT,
             log.with_suffix(".keys.log"))
        return
    import numpy as np

    cache = out / f"{scene.stem}_cache"
    _run(cli + ["--bake-mode", "instances", "--cache-folder", str(cache)], tree, log)
    files = sorted(cache.glob("*.pc2"))
    if len(files) != 1:
        raise SystemExit(f"error: {scene.name}: expected one point cache in {cache}, found {len(files)}")
    np.savez(out / f"{scene.stem}.npz", pc2=np.fromfile(files[0], dtype=np.uint8))
    print(f"      instances: {files[0].stat().st_size:,} bytes of point cache", flush=True)


def _differences(label: str, before: Path, after: Path) -> list[str]:
    import numpy as np

    a, b = np.load(before), np.load(after)
    found = []
    for key in sorted(set(a.files) - set(b.files)):
        found.append(f"{label}: {key} only at the commit")
    for key in sorted(set(b.files) - set(a.files)):
        found.append(f"{label}: {key} only in the working tree")
    for key in sorted(set(a.files) & set(b.files)):
        x, y = a[key], b[key]
        if x.shape != y.shape or x.dtype != y.dtype:
            found.append(f"{label}: {key} shape/dtype {x.shape} {x.dtype} -> {y.shape} {y.dtype}")
            continue
        # bit for bit: compare the raw bytes, so -0.0 != 0.0 and NaN payloads count
        differs = x.view(np.uint8).reshape(x.shape + (-1,)) != y.view(np.uint8).reshape(y.shape + (-1,)) \
            if x.ndim else np.array(x.tobytes() != y.tobytes())
        if differs.any():
            flat = differs.reshape(len(x), -1).any(axis=1) if x.ndim else differs
            where = np.flatnonzero(flat)
            first = int(where[0]) if len(where) else 0
            found.append(f"{label}: {key}: {len(where)} of {len(x) if x.ndim else 1} rows differ, first row "
                         f"{first}: {x[first] if x.ndim else x} -> {y[first] if y.ndim else y}")
    return found


def compare(commit: str, blender: bool, frames: int, device: str | None, keep: bool, only: str | None,
            baseline_dir: str | None = None) -> int:
    work = Path(tempfile.mkdtemp(prefix="prb-compare-"))
    if baseline_dir:
        # a tree exported beforehand (git archive), where git is not at hand (the GPU machine)
        baseline, sha, commit = Path(baseline_dir).resolve(), "folder", str(baseline_dir)
        if not (baseline / "addon" / "core").is_dir():
            raise SystemExit(f"error: {baseline} holds no addon/core")
    else:
        resolved = subprocess.run(["git", "rev-parse", "--verify", f"{commit}^{{commit}}"], cwd=ROOT,
                                  capture_output=True, text=True)
        if resolved.returncode != 0:
            raise SystemExit(f"error: {commit!r} is not a commit of {ROOT}")
        sha = resolved.stdout.strip()
        baseline = work / "baseline"
        subprocess.run(["git", "worktree", "add", "--detach", "--quiet", str(baseline), sha], cwd=ROOT, check=True)
    trees = {"commit": baseline, "working tree": ROOT}
    differences: list[str] = []
    try:
        this = Path(__file__).resolve()
        device_args = ["--device", device] if device else []
        for label, tree in trees.items():
            out = work / label.replace(" ", "_") / "core"
            out.mkdir(parents=True)
            print(f"core scenes at the {label} ({sha[:10] if tree == baseline else 'uncommitted changes included'})",
                  flush=True)
            start = time.perf_counter()
            _run([sys.executable, str(this), "--run-core", str(out), *device_args,
                  *(["--only", only] if only else [])], tree, work / f"core_{label[0]}.log")
            print(f"    {time.perf_counter() - start:.0f} s", flush=True)
        for npz in sorted((work / "commit" / "core").glob("*.npz")):
            differences += _differences(npz.stem, npz, work / "working_tree" / "core" / npz.name)
        if blender:
            scenes = sorted((ROOT / "sample_scenes").glob("*.blend"))
            for scene in scenes:
                for label, tree in trees.items():
                    out = work / label.replace(" ", "_") / "blender"
                    out.mkdir(parents=True, exist_ok=True)
                    frame_args = ["--frames", "1", str(frames)] if frames > 0 else []
                    print(f"bake {scene.name} at the {label}", flush=True)
                    start = time.perf_counter()
                    # the scene file of the working tree for both: the engines are compared, not the files
                    _bake_scene(tree, scene, out, frame_args, device_args, work / f"bake_{scene.stem}_{label[0]}.log")
                    print(f"    {time.perf_counter() - start:.0f} s", flush=True)
                before = work / "commit" / "blender" / f"{scene.stem}.npz"
                after = work / "working_tree" / "blender" / f"{scene.stem}.npz"
                import numpy as np
                if not np.load(before).files:
                    differences.append(f"{scene.name}: no keys baked at the commit")
                differences += _differences(scene.name, before, after)
    finally:
        if not baseline_dir:
            subprocess.run(["git", "worktree", "remove", "--force", str(baseline)], cwd=ROOT)
        if keep:
            print(f"outputs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    if differences:
        print(f"DIFFERENT from {commit} ({sha[:10]}): {len(differences)} difference(s)")
        for line in differences:
            print("  " + line)
        return 1
    parts = "core scenes" + (f" and sample scenes' keys or point caches ({'scene ranges' if frames <= 0 else f'frames 1-{frames}'})"
                             if blender else "")
    print(f"IDENTICAL to {commit} ({sha[:10]}), bit for bit: {parts}")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--commit", default=DEFAULT_COMMIT, help=f"commit to compare against (default {DEFAULT_COMMIT})")
    p.add_argument("--blender", action="store_true", help="also bake sample_scenes/*.blend and compare every key")
    p.add_argument("--frames", type=int, default=DEFAULT_FRAMES,
                   help=f"bake frames 1..N of each sample scene (default {DEFAULT_FRAMES}; 0: the scene's range)")
    p.add_argument("--device", help="OpenCL device selector (default: automatic; the same for both)")
    p.add_argument("--only", help="run only this core scene")
    p.add_argument("--baseline-dir", help="compare against this exported tree instead of a commit "
                   "(git archive COMMIT addon bench kernels sample_scenes | tar -x -C DIR)")
    p.add_argument("--keep", action="store_true", help="keep the outputs (the worktree is removed anyway)")
    p.add_argument("--run-core", metavar="DIR", help=argparse.SUPPRESS)
    p.add_argument("--read-keys", nargs=2, metavar=("BLEND", "NPZ"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.run_core:
        run_core(args.run_core, args.device, args.only)
        return 0
    if args.read_keys:
        read_keys(*args.read_keys)
        return 0
    return compare(args.commit, args.blender, args.frames, args.device, args.keep, args.only, args.baseline_dir)


if __name__ == "__main__":
    sys.exit(main())
