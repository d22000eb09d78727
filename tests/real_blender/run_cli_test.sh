#!/usr/bin/env bash
# The headless routes with a real Blender binary (Debian trixie's Blender 4.3.2, Python 3.13, in a
# cached chroot with Debian's PoCL): install the Linux extension zip the way a user does, then run
#   blender --command particle_bodies --help / bake ...              (the installed extension)
#   blender -b scene --python addon/cli.py -- ...                      (the repository's script)
#   blender -b scene --python <installed extension>/addon/cli.py -- ... (the installed script)
# and enabling the extension in a Python without numpy,
# on a small scene and check exit status, the one-line error, the output file and its keys, and that
# no run leaves anything in /tmp.
# Root only (chroot, mounts). Exit 0 only if every case passed. Run: make test-real-blender
# Environment: PRB_CHROOT (default /opt/prb-trixie-pocl; tests/gui/setup_blender.sh builds it the first
# time, ~5 min, downloads Debian packages), PRB_EXT_ZIP (install this zip instead of building one).
# Artifacts: out/real-blender/ (logs per case, results.json).
set -uo pipefail
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
export PRB_CHROOT="${PRB_CHROOT:-/opt/prb-trixie-pocl}" PRB_CHROOT_EXTRA_PKGS="${PRB_CHROOT_EXTRA_PKGS:-pocl-opencl-icd}"
CHROOT="$PRB_CHROOT"
ART="$REPO/out/real-blender"
RUN=/tmp/prb-real-blender            # inside the chroot
W="$CHROOT$RUN"                      # the same on the host
[ "$(id -u)" = 0 ] || { echo "test-real-blender needs root (chroot, mount)" >&2; exit 1; }

unmount() {
    for m in sys dev/shm dev proc; do mountpoint -q "$CHROOT/$m" && umount "$CHROOT/$m" 2>/dev/null; done
    rm -rf "$W"
}
trap unmount EXIT
bash "$REPO/tests/gui/setup_blender.sh" || { echo "REAL-BLENDER TEST FAILED: chroot setup" >&2; exit 1; }

rm -rf "$ART" "$W"; mkdir -p "$ART" "$W/repo" "$W/user" "$W/out"
if [ -n "${PRB_EXT_ZIP:-}" ]; then
    cp "$PRB_EXT_ZIP" "$W/extension.zip"
else
    PY="$REPO/.venv/bin/python"; [ -x "$PY" ] || PY=python3
    "$PY" "$REPO/tools/build_extension.py" --platform linux-x64 --python 3.13 --output "$ART/extension.zip" \
        > "$ART/build.log" 2>&1 || { tail -20 "$ART/build.log"; echo "REAL-BLENDER TEST FAILED: build" >&2; exit 1; }
    cp "$ART/extension.zip" "$W/extension.zip"
fi
tar -C "$REPO" --exclude=./.venv* --exclude=./.git --exclude=./out --exclude=./dist --exclude=./.cache -cf - . \
    | tar -C "$W/repo" -xf -

CASE_ENV=()  # VAR=value pairs a case adds to the clean environment
in_chroot() { # clean environment, isolated Blender user folder
    chroot "$CHROOT" /usr/bin/env -i HOME=/root LANG=C.UTF-8 PATH=/usr/local/bin:/usr/bin:/bin \
        BLENDER_USER_RESOURCES="$RUN/user" "${CASE_ENV[@]}" "$@"
}
FAILED=0
RESULTS=()
# case NAME EXPECT(0|nonzero) CHECK-COMMAND -- BLENDER-ARGS...: runs blender, keeps stdout/stderr apart
case_() {
    local name="$1" expect="$2" check="$3"; shift 4
    local tmp_before; tmp_before="$(ls "$CHROOT/tmp")"
    in_chroot blender "$@" > "$ART/$name.out" 2> "$ART/$name.err"
    local rc=$?
    local left; left="$(comm -13 <(echo "$tmp_before") <(ls "$CHROOT/tmp") | tr '\n' ' ')"
    [ -z "$left" ] || { echo "FAIL $name left in /tmp: $left" | tee -a "$ART/left_in_tmp.txt"; FAILED=1; \
        (cd "$CHROOT/tmp" && rm -rf $left); }
    local ok=1
    if [ "$expect" = 0 ]; then [ $rc = 0 ] || ok=0; else [ $rc != 0 ] || ok=0; fi
    if [ $ok = 1 ] && [ -n "$check" ]; then (cd "$ART" && eval "$check") >> "$ART/$name.check" 2>&1 || ok=0; fi
    local last; last="$(grep -v '^\s*$' "$ART/$name.err" | tail -1)"
    if [ $ok = 1 ]; then echo "PASS $name (exit $rc)"; else FAILED=1; echo "FAIL $name (exit $rc): $last"; \
        tail -5 "$ART/$name.out"; cat "$ART/$name.check" 2>/dev/null; fi
    RESULTS+=("{\"case\": \"$name\", \"exit\": $rc, \"passed\": $([ $ok = 1 ] && echo true || echo false)}")
}
one_error_line() { # FILE WORDS...: the last stderr line is "error: ..." holding the words, no traceback
    local f="$1"; shift
    ! grep -q Traceback "$f" || return 1
    local last; last="$(grep -v '^\s*$' "$f" | tail -1)"
    [[ "$last" == "error: "* ]] || return 1
    for w in "$@"; do [[ "$last" == *"$w"* ]] || { echo "missing '$w' in: $last"; return 1; }; done
}

in_chroot blender --version | head -1 | tee "$ART/version.txt"
case_ install 0 "" -- --command extension install-file -r user_default -e "$RUN/extension.zip"
case_ make-scene 0 "grep -q MAKE_SCENE_OK make-scene.out" -- \
    --background --python-exit-code 1 --python "$RUN/repo/tests/gui/make_scene.py" -- "$RUN/out/scene.blend" 4
BOXES="$(grep -o 'MAKE_SCENE_OK .*' "$ART/make-scene.out" | awk '{print $3}')"
SCENE="$RUN/out/scene.blend"
INSTALLED_CLI="$RUN/user/extensions/user_default/particle_rigid_bodies/addon/cli.py"
CHECK="$RUN/repo/tests/gui/check_bake.py"

case_ command-help 0 "grep -q 'bake' command-help.out" -- --command particle_bodies --help
case_ command-bake-help 0 "grep -q -- '--objects' command-bake-help.out" -- --command particle_bodies bake --help
case_ command-bake 0 "test -f '$W/out/command.blend' && grep -q 'PRB: frame 12/12' command-bake.err" -- \
    --command particle_bodies bake --scene "$SCENE" --objects "$BOXES" --frames 1 13 --output "$RUN/out/command.blend"
case_ command-keys 0 "grep -q '^CHECK_BAKE' command-keys.out" -- --background --python-exit-code 1 --python "$CHECK" -- \
    --original "$SCENE" --baked "$RUN/out/command.blend" --dynamic "$BOXES" --static Ground --ground-z 0 --frames 1 13
case_ python-bake 0 "test -f '$W/out/python.blend'" -- \
    --background "$SCENE" --python-exit-code 1 --python "$RUN/repo/addon/cli.py" -- --objects "$BOXES" --frames 1 13 \
    --output "$RUN/out/python.blend"
case_ python-keys 0 "grep -q '^CHECK_BAKE' python-keys.out" -- --background --python-exit-code 1 --python "$CHECK" -- \
    --original "$SCENE" --baked "$RUN/out/python.blend" --dynamic "$BOXES" --static Ground --ground-z 0 --frames 1 13
case_ installed-script-bake 0 "test -f '$W/out/installed.blend'" -- \
    --background "$SCENE" --python "$INSTALLED_CLI" -- --objects "$BOXES" --frames 1 7 --output "$RUN/out/installed.blend"
# failures: non-zero without --python-exit-code too (the script exits by itself), one line, nothing written
case_ python-missing-object nonzero "one_error_line python-missing-object.err 'objects not found' Nope && test ! -e '$W/out/bad.blend'" -- \
    --background "$SCENE" --python "$RUN/repo/addon/cli.py" -- --objects Nope --output "$RUN/out/bad.blend"
case_ python-forgot-dashes nonzero "one_error_line python-forgot-dashes.err '\`--\`' && test ! -e '$W/out/scene.baked.blend'" -- \
    --background "$SCENE" --python "$RUN/repo/addon/cli.py" --objects "$BOXES"
case_ python-no-options nonzero "one_error_line python-no-options.err '\`--\`' && test ! -e '$W/out/scene.baked.blend'" -- \
    --background "$SCENE" --python "$RUN/repo/addon/cli.py"
case_ command-collider-as-dynamic nonzero "one_error_line command-collider-as-dynamic.err Ground 'Static Collider' && test ! -e '$W/out/bad.blend'" -- \
    --command particle_bodies bake --scene "$SCENE" --objects Ground --output "$RUN/out/bad.blend"
case_ command-no-such-device nonzero "one_error_line command-no-such-device.err \"matches 'nvidia'\" && ! grep -q 'using the CPU' command-no-such-device.err && test ! -e '$W/out/bad.blend'" -- \
    --command particle_bodies bake --scene "$SCENE" --objects "$BOXES" --device nvidia --output "$RUN/out/bad.blend"
case_ command-step-0 nonzero "one_error_line command-step-0.err --step" -- \
    --command particle_bodies bake --scene "$SCENE" --step 0 --output "$RUN/out/bad.blend"
case_ command-unwritable nonzero "one_error_line command-unwritable.err 'cannot write'" -- \
    --command particle_bodies bake --scene "$SCENE" --objects "$BOXES" --output /sys/bad.blend

# A CPU no PoCL can compile for (AMD Zen 5 with the zip's PoCL 3.0): every PoCL's build fails on
# purpose (PRB_OPENCL_FAIL_BUILD, through its own compiler). Without another driver the bake stops
# before anything is written with one line naming the CPU, the drivers tried and Get CPU Driver;
# get-cpu-driver fetches Intel's runtime from PyPI (about 250 MB); the same bake then runs on it
# (tried before any PoCL wherever it is installed: docs/performance.md, CPU OpenCL drivers).
DRIVER_FOLDER=/root/.local/share/particle-rigid-bodies/cpu-driver
in_chroot python3 -c "import shutil; shutil.rmtree('$DRIVER_FOLDER', ignore_errors=True)"
CASE_ENV=(PRB_OPENCL_FAIL_BUILD="portable computing language")
case_ command-no-cpu-driver nonzero "one_error_line command-no-cpu-driver.err 'No OpenCL device could run the kernels' 'family' 'Get CPU Driver' 'opencl-build.log' && ! grep -q 'fails on purpose' command-no-cpu-driver.out && test ! -e '$W/out/bad.blend'" -- \
    --command particle_bodies bake --scene "$SCENE" --objects "$BOXES" --frames 1 7 --output "$RUN/out/bad.blend"
# the host's certificates: where the host reaches PyPI through a proxy, its CA is only there
cp /etc/ssl/certs/ca-certificates.crt "$W/host-ca.crt"
CASE_ENV=(SSL_CERT_FILE="$RUN/host-ca.crt")
case_ command-get-cpu-driver 0 "test -e '$CHROOT$DRIVER_FOLDER/lib/libintelocl.so' && grep -q 'PRB: installed' command-get-cpu-driver.out" -- \
    --online-mode --command particle_bodies get-cpu-driver
CASE_ENV=(PRB_OPENCL_FAIL_BUILD="portable computing language")
case_ command-bake-on-intel 0 "test -f '$W/out/intel.blend' && grep -q 'using the CPU device .*Intel(R) OpenCL' command-bake-on-intel.err" -- \
    --command particle_bodies bake --scene "$SCENE" --objects "$BOXES" --frames 1 13 --output "$RUN/out/intel.blend"
CASE_ENV=()
case_ intel-keys 0 "grep -q '^CHECK_BAKE' intel-keys.out" -- --background --python-exit-code 1 --python "$CHECK" -- \
    --original "$SCENE" --baked "$RUN/out/intel.blend" --dynamic "$BOXES" --static Ground --ground-z 0 --frames 1 13
case_ command-remove-cpu-driver 0 "test ! -e '$CHROOT$DRIVER_FOLDER/lib'" -- --command particle_bodies get-cpu-driver --remove

# a distribution's Blender without python3-numpy: enabling says what is missing, no traceback
case_ enable-without-numpy 0 "grep -q ENABLE_WITHOUT_NUMPY_OK enable-without-numpy.out && ! grep -q Traceback enable-without-numpy.err enable-without-numpy.out" -- \
    --background --python-exit-code 1 --python "$RUN/repo/tests/real_blender/enable_without_numpy.py"

(IFS=,; echo "[${RESULTS[*]}]") > "$ART/results.json"
if [ $FAILED = 0 ]; then echo "REAL-BLENDER TEST PASSED ($(cat "$ART/version.txt"); logs in out/real-blender/)"
else echo "REAL-BLENDER TEST FAILED (logs in out/real-blender/)"; exit 1; fi
