#!/usr/bin/env bash
# Prepare (once) the two Debian chroots bench/cpu_drivers.py runs Debian's PoCL in, and mount them.
# Idempotent: a second run only re-mounts. Root only (debootstrap, chroot, mount); the host's own
# system is left alone (no OpenCL driver, no /etc/OpenCL on it): the drivers live in the chroots.
#
#   /opt/prb-bookworm-pocl  Debian 12: pocl-opencl-icd (PoCL 3.1, LLVM 15), python3 3.11, numpy,
#                           binutils, libc6-dev, gcc (PoCL links every kernel with them)
#   /opt/prb-trixie-pocl    Debian 13: tests/gui/setup_blender.sh's chroot (Blender, Python 3.13) with
#                           pocl-opencl-icd (PoCL 6.x); the same chroot `make test-real-blender` uses
#
# In each, pyopencl 2026.1.4's manylinux wheel (its Python's) and its pure-Python dependencies go
# into /opt/prb-pyopencl (pip --target; not on the chroot's sys.path unless PYTHONPATH names it).
# The bundled PoCL 3.0 is the pip package pocl-binary-distribution (it installs libpocl and pocl.icd
# into pyopencl/.libs, next to the wheel's own OpenCL loader, which reads that folder besides
# OCL_ICD_VENDORS): it is not installed here, so the only PoCL a chroot lists is Debian's (checked).
#
# Wheels: cp311 from $PRB_WHEELS_CP311 (default: the main checkout's .cache/wheels/linux-x64-cp311,
# filled by make venv); cp313 downloaded from PyPI into /opt/prb-trixie-pocl/opt/prb-wheels.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
MIRROR="${PRB_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
BOOKWORM="${PRB_BOOKWORM_CHROOT:-/opt/prb-bookworm-pocl}"
TRIXIE="${PRB_TRIXIE_CHROOT:-/opt/prb-trixie-pocl}"
PYTHON="${PRB_PYTHON:-$ROOT/.venv/bin/python}"   # any Python with pip, to unpack wheels (--target)
WHEELS_CP311="${PRB_WHEELS_CP311:-$ROOT/.cache/wheels/linux-x64-cp311}"
PYOPENCL=2026.1.4
PURE="pytools platformdirs typing_extensions mako markupsafe siphash24"

log() { echo "[cpu_drivers_setup] $*" >&2; }
[ "$(id -u)" = 0 ] || { log "must run as root (debootstrap, chroot, mount)"; exit 1; }

mount_chroot() { # proc, /dev, /dev/shm, /sys: PoCL and hwloc read the CPU's topology there
    local c="$1"
    mountpoint -q "$c/proc" || mount -t proc proc "$c/proc"
    for m in dev dev/shm sys; do
        mkdir -p "$c/$m"
        mountpoint -q "$c/$m" || mount --bind "/$m" "$c/$m"
    done
}

no_bundled_pocl() { # a --target copy of pyopencl must not hold the bundled PoCL
    if ls "$1"/pyopencl/.libs/ | grep -q pocl; then log "$1 holds a bundled PoCL"; exit 1; fi
}

# --- bookworm: debootstrap, Debian's PoCL and what it links kernels with ---
if [ ! -f "$BOOKWORM/.prb-pocl-ready-v1" ]; then
    command -v debootstrap >/dev/null || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap; }
    [ -x "$BOOKWORM/usr/bin/apt-get" ] || debootstrap --variant=minbase bookworm "$BOOKWORM" "$MIRROR"
    cp /etc/resolv.conf "$BOOKWORM/etc/resolv.conf"
    chroot "$BOOKWORM" sh -c "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
        --no-install-recommends python3 python3-numpy pocl-opencl-icd binutils libc6-dev gcc clinfo"
    log "pyopencl (cp311) into $BOOKWORM/opt/prb-pyopencl"
    rm -rf "$BOOKWORM/opt/prb-pyopencl"
    "$PYTHON" -m pip install -q --no-index --no-deps --target "$BOOKWORM/opt/prb-pyopencl" \
        "$WHEELS_CP311"/pyopencl-$PYOPENCL-cp311-*.whl \
        $(for p in $PURE; do ls "$WHEELS_CP311"/$p-*.whl; done)
    no_bundled_pocl "$BOOKWORM/opt/prb-pyopencl"
    touch "$BOOKWORM/.prb-pocl-ready-v1"
fi
mount_chroot "$BOOKWORM"

# --- trixie: the real-Blender test's chroot, with Debian's PoCL ---
PRB_CHROOT="$TRIXIE" PRB_CHROOT_EXTRA_PKGS="pocl-opencl-icd clinfo" bash "$ROOT/tests/gui/setup_blender.sh"
if [ ! -f "$TRIXIE/opt/prb-pyopencl/.prb-ready-v1" ]; then
    log "pyopencl (cp313) into $TRIXIE/opt/prb-pyopencl"
    mkdir -p "$TRIXIE/opt/prb-wheels"
    "$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.13 \
        --platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
        --platform manylinux_2_17_x86_64 -d "$TRIXIE/opt/prb-wheels" pyopencl==$PYOPENCL $PURE
    rm -rf "$TRIXIE/opt/prb-pyopencl"
    "$PYTHON" -m pip install -q --no-index --no-deps --only-binary=:all: --python-version 3.13 \
        --platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
        --platform manylinux_2_17_x86_64 --target "$TRIXIE/opt/prb-pyopencl" "$TRIXIE"/opt/prb-wheels/*.whl
    no_bundled_pocl "$TRIXIE/opt/prb-pyopencl"
    touch "$TRIXIE/opt/prb-pyopencl/.prb-ready-v1"
fi
mount_chroot "$TRIXIE"

for c in "$BOOKWORM" "$TRIXIE"; do
    log "$c: $(chroot "$c" env -i PATH=/usr/bin:/bin OCL_ICD_VENDORS=/etc/OpenCL/vendors clinfo -l 2>&1 | tr '\n' ' ')"
done
