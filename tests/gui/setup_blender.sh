#!/usr/bin/env bash
# Prepare (once) and mount a Debian trixie chroot with Blender 4.3.2 (Python 3.13), Xvfb,
# xdotool and ImageMagick, for the real-window GUI test. Idempotent: the chroot is cached at
# $PRB_CHROOT (default /opt/prb-trixie, never inside the repo); a second run only re-mounts.
# Needs root and network access to Debian's mirrors on the first run (~4 minutes, ~1.8 GB).
set -euo pipefail
CHROOT="${PRB_CHROOT:-/opt/prb-trixie}"
MIRROR="${PRB_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
STAMP="$CHROOT/.prb-ready-v1"
PKGS="blender xvfb xauth xdotool x11-utils imagemagick python3-numpy libgl1-mesa-dri ca-certificates"

log() { echo "[setup_blender] $*" >&2; }
[ "$(id -u)" = 0 ] || { log "must run as root (debootstrap, chroot, mount)"; exit 1; }

BASE="${PRB_CHROOT_BASE:-}"   # an already prepared chroot to copy instead of debootstrapping
if [ ! -f "$STAMP" ] && [ -n "$BASE" ] && [ -f "$BASE/.prb-ready-v1" ] && [ ! -e "$CHROOT" ]; then
    for m in sys dev/shm dev proc; do mountpoint -q "$BASE/$m" && umount "$BASE/$m"; done
    log "copying $BASE to $CHROOT"
    cp -a "$BASE" "$CHROOT"
fi
if [ ! -f "$STAMP" ]; then
    if ! command -v debootstrap >/dev/null; then
        log "installing debootstrap on the host"
        apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap
    fi
    if [ ! -x "$CHROOT/usr/bin/apt-get" ]; then
        log "debootstrap trixie into $CHROOT"
        rm -rf "$CHROOT"
        debootstrap --variant=minbase trixie "$CHROOT" "$MIRROR"
    fi
    cp /etc/resolv.conf "$CHROOT/etc/resolv.conf"
    log "installing $PKGS in the chroot"
    chroot "$CHROOT" sh -c "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $PKGS"
    chroot "$CHROOT" blender --version | head -1 > "$STAMP"
fi

# Extra packages on request (e.g. PRB_CHROOT_EXTRA_PKGS=binutils: PoCL's kernel compiler runs the
# system linker `ld`). Not part of the default chroot: a Blender user's machine may not have them.
for pkg in ${PRB_CHROOT_EXTRA_PKGS:-}; do
    if ! chroot "$CHROOT" dpkg -s "$pkg" >/dev/null 2>&1; then
        log "installing extra package $pkg in the chroot (PRB_CHROOT_EXTRA_PKGS)"
        cp /etc/resolv.conf "$CHROOT/etc/resolv.conf"
        chroot "$CHROOT" sh -c "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $pkg" >/dev/null
    fi
done

mnt() { # mnt TYPE-OR-BIND SRC DST
    mountpoint -q "$3" && return 0
    mkdir -p "$3"
    if [ "$1" = bind ]; then mount --bind "$2" "$3"; else mount -t "$1" "$2" "$3"; fi
}
mnt proc proc "$CHROOT/proc"
mnt bind /dev "$CHROOT/dev"
mnt bind /dev/shm "$CHROOT/dev/shm"
mnt bind /sys "$CHROOT/sys"
cp /etc/resolv.conf "$CHROOT/etc/resolv.conf" 2>/dev/null || true
[ -e "$CHROOT/etc/mtab" ] || ln -s /proc/self/mounts "$CHROOT/etc/mtab"
log "ready: $(cat "$STAMP") in $CHROOT; linker ld in the chroot: $(chroot "$CHROOT" sh -c 'command -v ld || echo none')"
