#!/usr/bin/env python3
"""Build the installable Blender extension zip (with the Python wheels it needs).

    python tools/build_extension.py --split-platforms        # one zip per platform (make extension)
    python tools/build_extension.py                          # all platforms -> dist/particle_rigid_bodies-<v>.zip
    python tools/build_extension.py --platform linux-x64 --python 3.11     # just what this machine needs
    python tools/build_extension.py --update-manifest        # re-resolve the pinned wheel list in the manifest
    python tools/build_extension.py --validate               # run Blender's manifest validator only
    python tools/build_extension.py --fetch-only --platform linux-x64 --python 3.11   # fill the wheel cache only

The wheel list lives in blender_manifest.toml (pinned file names, every platform and Python). The
build downloads exactly those files into .cache/wheels/ (once; later builds work offline), copies
__init__.py, blender_manifest.toml, LICENSE, addon/ and kernels/ (*.cl, *.h) plus the selected wheels into
build/extension/, and runs Blender's own builder (``blender_ext.py build``, shipped inside the bpy
module or Blender; pass --blender-ext PATH to use another copy). Every zip built is checked with
Blender's validator (``blender_ext.py validate ZIP``). --split-platforms stages and builds each
platform on its own (its wheels only, ``platforms`` naming it alone in the manifest), so each zip
carries only what its platform installs.

Wheels: pyopencl and its run-time dependencies (pytools, platformdirs, typing_extensions,
siphash24; from Requires-Dist) and mako (pyopencl's kernel templating) with markupsafe, for Python
3.11 (Blender 4.2-5.0) and 3.13 (Blender 5.1+) on linux-x64, windows-x64, macos-arm64, macos-x64.
numpy is not bundled: Blender ships it.

PoCL decision: the linux-x64 build also ships ``pocl-binary-distribution`` (a CPU OpenCL driver,
~58 MB) so the add-on works out of the box on Linux machines without an OpenCL driver (render
nodes, NVIDIA drivers installed without their OpenCL ICD). The device chooser still prefers any
GPU. Windows and macOS need no such fallback: macOS has OpenCL built in, and Windows GPU drivers
(NVIDIA, AMD, Intel) include OpenCL. ``--no-pocl`` builds without it (and --update-manifest
--no-pocl drops it from the list).
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "blender_manifest.toml"
CACHE = ROOT / ".cache" / "wheels"
BUILD = ROOT / "build" / "extension"
DIST = ROOT / "dist"

# Blender platform -> pip --platform tags (pip expands macOS versions downwards itself, not manylinux)
PLATFORMS = {
    "linux-x64": [f"manylinux_2_{minor}_x86_64" for minor in range(28, 16, -1)] + ["manylinux2014_x86_64"],
    "windows-x64": ["win_amd64"],
    "macos-arm64": ["macosx_14_0_arm64"],  # Blender 4.2 needs macOS 11.2+
    "macos-x64": ["macosx_14_0_x86_64"],
}
PYTHONS = ("3.11", "3.13")
REQUIREMENTS = ("pyopencl", "mako")
LINUX_CPU_DRIVER = "pocl-binary-distribution"
NOT_BUNDLED = ("numpy",)  # Blender ships numpy


def wheel_platforms(filename: str) -> set[str]:
    """Blender platforms a wheel file serves (all of them for pure-Python wheels)."""
    tag = filename[:-4].split("-")[-1]
    out = set()
    for part in tag.split("."):
        if part == "any":
            return set(PLATFORMS)
        if part.startswith(("manylinux", "musllinux", "linux")) and part.endswith("x86_64"):
            out.add("linux-x64")
        elif part == "win_amd64":
            out.add("windows-x64")
        elif part.startswith("macosx") and part.endswith(("arm64", "universal2")):
            out.add("macos-arm64")
        if part.startswith("macosx") and part.endswith(("x86_64", "universal2", "intel")):
            out.add("macos-x64")
    return out


def wheel_pythons(filename: str) -> set[str]:
    py_tag = filename[:-4].split("-")[-3]
    out = set()
    for tag in py_tag.split("."):
        if tag in ("py3", "py2.py3") or tag.startswith("py3"):
            return set(PYTHONS)
        m = re.fullmatch(r"cp3(\d+)", tag)
        if m:
            abi = filename[:-4].split("-")[-2]
            version = f"3.{m.group(1)}"
            if abi == "abi3":
                out.update(p for p in PYTHONS if int(p.split(".")[1]) >= int(m.group(1)))
            else:
                out.add(version)
    return out


def manifest_wheels(text: str) -> list[str]:
    m = re.search(r"^wheels = \[(.*?)^\]", text, flags=re.S | re.M)
    if not m:
        return []
    return re.findall(r'"([^"]+)"', m.group(1))


def set_manifest_list(text: str, key: str, values: list[str]) -> str:
    body = f"{key} = [\n" + "".join(f'  "{v}",\n' for v in values) + "]"
    pattern = re.compile(rf"^{key} = \[.*?^\]", flags=re.S | re.M)
    if pattern.search(text):
        return pattern.sub(lambda _m: body, text, count=1)
    return text.rstrip() + "\n" + body + "\n"


def pip_download(python: str, platform: str, dest: Path, packages, no_deps=False) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    abi = "cp" + python.replace(".", "")
    cmd = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--quiet",
           "--only-binary=:all:", "--python-version", python, "--implementation", "cp",
           "--abi", abi, "--abi", "abi3", "--abi", "none", "-d", str(dest)]
    for tag in PLATFORMS[platform]:
        cmd += ["--platform", tag]
    if no_deps:
        cmd.append("--no-deps")
    cmd += list(packages)
    print(f"+ pip download ({platform}, Python {python}):", " ".join(packages), flush=True)
    subprocess.run(cmd, check=True)


def resolve(platforms, pythons, with_pocl: bool) -> list[str]:
    """Download the newest compatible wheels (with dependencies) and return their file names."""
    names = set()
    for platform in platforms:
        for python in pythons:
            dest = CACHE / f"{platform}-cp{python.replace('.', '')}"
            packages = list(REQUIREMENTS)
            if with_pocl and platform == "linux-x64":
                packages.append(LINUX_CPU_DRIVER)
            pip_download(python, platform, dest, packages)
            for whl in dest.glob("*.whl"):
                if whl.name.split("-")[0].lower().replace("_", "-") in NOT_BUNDLED:
                    continue
                if platform in wheel_platforms(whl.name) and python in wheel_pythons(whl.name):
                    names.add(whl.name)
    return sorted(names, key=str.lower)


def fetch(names: list[str], platforms, pythons) -> dict[str, Path]:
    """Path of each wheel in the cache, downloading (pinned, without dependencies) what is missing."""
    found = {p.name: p for p in CACHE.rglob("*.whl")} if CACHE.exists() else {}
    missing = [n for n in names if n not in found]
    for name in missing:
        dist, version = name.split("-")[:2]
        platform = next(p for p in platforms if p in wheel_platforms(name))
        python = next(p for p in pythons if p in wheel_pythons(name))
        dest = CACHE / f"{platform}-cp{python.replace('.', '')}"
        pip_download(python, platform, dest, [f"{dist}=={version}"], no_deps=True)
        if not (dest / name).exists():
            raise SystemExit(f"error: pip did not download {name} (got {sorted(p.name for p in dest.glob('*.whl'))})")
        found[name] = dest / name
    return {n: found[n] for n in names}


def find_blender_ext(explicit: str | None) -> Path:
    if explicit:
        return Path(explicit)
    spec = importlib.util.find_spec("bpy")
    if spec and spec.submodule_search_locations:
        for base in spec.submodule_search_locations:
            hits = sorted(Path(base).glob("*/scripts/addons_core/bl_pkg/cli/blender_ext.py"))
            if hits:
                return hits[-1]
    raise SystemExit("error: blender_ext.py not found: install the bpy module (pip install bpy) or pass --blender-ext "
                     "<blender>/<version>/scripts/addons_core/bl_pkg/cli/blender_ext.py")


def stage(wheels: dict[str, Path], platforms, manifest_text: str) -> Path:
    if BUILD.exists():
        shutil.rmtree(BUILD)
    BUILD.mkdir(parents=True)
    shutil.copy2(ROOT / "__init__.py", BUILD / "__init__.py")
    shutil.copy2(ROOT / "LICENSE", BUILD / "LICENSE")
    shutil.copytree(ROOT / "addon", BUILD / "addon", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (BUILD / "kernels").mkdir()
    for kernel_file in sorted((ROOT / "kernels").iterdir()):
        if kernel_file.suffix in (".cl", ".h"):
            shutil.copy2(kernel_file, BUILD / "kernels" / kernel_file.name)
    (BUILD / "wheels").mkdir()
    for name, path in wheels.items():
        shutil.copy2(path, BUILD / "wheels" / name)
    text = set_manifest_list(manifest_text, "wheels", [f"./wheels/{n}" for n in wheels])
    text = set_manifest_list(text, "platforms", list(platforms))
    (BUILD / "blender_manifest.toml").write_text(text)
    return BUILD


def run_blender_ext(blender_ext: Path, *args) -> None:
    cmd = [sys.executable, str(blender_ext), *args]
    print("+ blender_ext.py", " ".join(args), flush=True)
    if subprocess.run(cmd).returncode != 0:
        raise SystemExit(f"error: blender_ext.py {args[0]} failed (see above)")


def remove_staging() -> None:
    shutil.rmtree(BUILD, ignore_errors=True)
    try:
        BUILD.parent.rmdir()  # build/ when nothing else is in it
    except OSError:
        pass


def build_and_validate(blender_ext: Path, staged: Path, out: Path) -> None:
    run_blender_ext(blender_ext, "validate", str(staged))
    if out.exists():
        out.unlink()
    run_blender_ext(blender_ext, "build", "--source-dir", str(staged), "--output-filepath", str(out))
    run_blender_ext(blender_ext, "validate", str(out))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--platform", action="append", choices=sorted(PLATFORMS),
                   help="build for this platform only (repeatable; default: all)")
    p.add_argument("--python", action="append", choices=PYTHONS, help="wheels for this Python only (default: both)")
    p.add_argument("--split-platforms", action="store_true", help="one zip per platform")
    p.add_argument("--no-pocl", action="store_true", help="leave the Linux CPU OpenCL driver out")
    p.add_argument("--output", help="zip path (default: dist/<id>-<version>.zip); with --split-platforms a folder "
                                    "(default: dist/)")
    p.add_argument("--update-manifest", action="store_true",
                   help="re-resolve the newest wheels and write the pinned list into blender_manifest.toml")
    p.add_argument("--validate", action="store_true", help="only validate blender_manifest.toml")
    p.add_argument("--blender-ext", help="path of Blender's blender_ext.py")
    p.add_argument("--fetch-only", action="store_true",
                   help="only download the selected wheels into .cache/wheels (make venv does this, so that "
                        "the tests build the zip offline)")
    args = p.parse_args(argv)

    blender_ext = find_blender_ext(args.blender_ext)
    text = MANIFEST.read_text()
    if args.validate:
        run_blender_ext(blender_ext, "validate", str(ROOT))
        return 0
    if args.update_manifest:
        names = resolve(list(PLATFORMS), list(PYTHONS), with_pocl=not args.no_pocl)
        text = set_manifest_list(text, "wheels", [f"./wheels/{n}" for n in names])
        MANIFEST.write_text(text)
        print(f"wrote {len(names)} wheels into {MANIFEST}")
        run_blender_ext(blender_ext, "validate", str(ROOT))
        return 0

    platforms = args.platform or list(PLATFORMS)
    pythons = args.python or list(PYTHONS)
    names = [n.split("/")[-1] for n in manifest_wheels(text)]
    if not names:
        raise SystemExit("error: blender_manifest.toml lists no wheels; run with --update-manifest")
    selected = [n for n in names if wheel_platforms(n) & set(platforms) and wheel_pythons(n) & set(pythons)
                and not (args.no_pocl and n.startswith("pocl_binary_distribution"))]
    wheels = fetch(selected, platforms, pythons)
    if args.fetch_only:
        print(f"{len(wheels)} wheels in {CACHE}")
        return 0
    version = re.search(r'^version = "([^"]+)"', text, flags=re.M).group(1)
    ext_id = re.search(r'^id = "([^"]+)"', text, flags=re.M).group(1)
    DIST.mkdir(exist_ok=True)
    if args.split_platforms:
        out_dir = Path(args.output) if args.output else DIST
        out_dir.mkdir(parents=True, exist_ok=True)
        built = []
        for platform in platforms:
            own = {n: p for n, p in wheels.items() if platform in wheel_platforms(n)}
            staged = stage(own, [platform], text)
            out = out_dir / f"{ext_id}-{version}-{platform.replace('-', '_')}.zip"
            build_and_validate(blender_ext, staged, out)
            built.append((out, len(own)))
        remove_staging()
        print(f"{'zip':<50} {'MiB':>6} wheels  (Python {', '.join(pythons)})")
        for out, count in built:
            print(f"{out.name:<50} {out.stat().st_size / 2**20:6.1f} {count:6d}")
        return 0
    staged = stage(wheels, platforms, text)
    out = Path(args.output) if args.output else DIST / f"{ext_id}-{version}.zip"
    out.parent.mkdir(parents=True, exist_ok=True)
    build_and_validate(blender_ext, staged, out)
    remove_staging()
    print(f"built {out} ({out.stat().st_size / 2**20:.1f} MiB, {len(wheels)} wheels, platforms "
          f"{', '.join(platforms)}, Python {', '.join(pythons)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
