#!/usr/bin/env bash
# The rigid step's experiments (docs/experiments/rigid-step.md) on the lent NVIDIA machine: the
# 1000-cube pile (bench/contact_figures.py) for each variant of SimulationSettings named below,
# one JSON and log per variant in $OUT. Usage: bash bench/rigid_step_sweep.sh VARIANT...
# (CUBES, SECS and SEED override the pile's size, length and jitter seed).
set -u
cd "$(dirname "$0")/.."
if ! python3 -c "import pyopencl" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONUNBUFFERED=1
NVIDIA_OPENCL=/usr/local/nvidia/lib64/libnvidia-opencl.so.1
if [ -z "${OCL_ICD_VENDORS:-}" ] && [ -e "$NVIDIA_OPENCL" ]; then
  mkdir -p /tmp/icd && echo "$NVIDIA_OPENCL" > /tmp/icd/nvidia.icd
  export OCL_ICD_VENDORS=/tmp/icd
fi
OUT=${OUT:-out/rigid_step}
mkdir -p "$OUT"
VOXELS=(--setting 'contact_geometry="voxels"')
RIGID=("${VOXELS[@]}" --setting contact_springs=false --setting substep=0.004166666666666667)
for variant in "$@"; do
  case $variant in
    springs) args=("${VOXELS[@]}") ;;                                         # today's default
    x1) args=("${RIGID[@]}") ;;                                               # springs off, 240 Hz
    x1h25) args=("${RIGID[@]}" --setting solve_hertz_fraction=0.25) ;;
    x1h50) args=("${RIGID[@]}" --setting solve_hertz_fraction=0.5) ;;
    x3) args=("${RIGID[@]}" --setting solve_hertz_fraction=0.25 --setting substeps_per_detection=4) ;;
    x3p4) args=("${RIGID[@]}" --setting solve_hertz_fraction=0.25 --setting substeps_per_detection=4
                --setting solve_passes=4 --setting relax_passes=1) ;;
    x3p2) args=("${RIGID[@]}" --setting solve_hertz_fraction=0.25 --setting substeps_per_detection=4
                --setting solve_passes=2 --setting relax_passes=1) ;;
    x3p1) args=("${RIGID[@]}" --setting solve_hertz_fraction=0.25 --setting substeps_per_detection=4
                --setting solve_passes=1 --setting relax_passes=1) ;;
    # X2: x3 with each pair's records reduced to manifolds of 4 points, solved together (x2*) or one
    # after another (x2s*), with 16 + 4 or N + 1 passes
    x2) args=("${RIGID[@]}" --setting solve_hertz_fraction=0.25 --setting substeps_per_detection=4
              --setting manifold_points=4) ;;
    x2p[0-9]*|x2s[0-9]*|x2c[0-9]*)
        order=jacobi friction=points; [ "${variant:2:1}" = s ] && order=sequential
        [ "${variant:2:1}" = c ] && order=sequential friction=centre
        args=("${RIGID[@]}" --setting solve_hertz_fraction=0.25 --setting substeps_per_detection=4
              --setting manifold_points=4 --setting manifold_order="$order" --setting manifold_friction="$friction"
              --setting solve_passes="${variant:3}" --setting relax_passes=1) ;;
    x2s) args=("${RIGID[@]}" --setting solve_hertz_fraction=0.25 --setting substeps_per_detection=4
               --setting manifold_points=4 --setting manifold_order=sequential) ;;
    *) echo "unknown variant $variant"; exit 2 ;;
  esac
  name=${variant}_${CUBES:-1000}_s${SEED:-0}
  timeout "${LIMIT:-300}" python3 bench/contact_figures.py --only pile --cubes "${CUBES:-1000}" \
      --pile-seconds "${SECS:-10}" --pile-seed "${SEED:-0}" "${args[@]}" --label "$variant" \
      --out "$OUT/$name.json" > "$OUT/$name.log" 2>&1
  echo "$name rc=$? $(python3 -c "
import json,sys
d=json.load(open('$OUT/$name.json'))['scenes']['pile']
c=d['checkpoints']; last=c[max(c, key=float)]
print('pile ms/s %.0f fall %.0f | 5s rest %.2f | end: top %.2f p95 %.2f centre %.2f foot %.1f corner %.3f' % (
 d.get('ms_per_simulated_s_pile_from_3s',0), d['ms_per_simulated_s_fall_0_1s'], c.get('5',{}).get('fraction_at_rest',-1),
 last['pile_height_m'], last['pile_height_p95_m'], last['mean_centre_height_m'], last['footprint_radius_m'], last['deepest_corner_m']))" 2>&1 | tail -1)"
done
