#!/usr/bin/env bash
# The rigid step's experiments (docs/experiments/rigid-step.md) on the lent NVIDIA machine: the
# 1000-cube pile (bench/contact_figures.py) for each variant of SimulationSettings named below,
# one JSON and log per variant in $OUT. Usage: bash bench/probes/rigid_step_sweep.sh VARIANT...
# (CUBES, SECS and SEED override the pile's size, length and jitter seed).
set -u
cd "$(dirname "$0")/../.."
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
for variant in "$@"; do
  case $variant in
    default) args=("${VOXELS[@]}") ;;  # the rigid step, Rigid Voxels' default (x2c2)
    # x2cN: the default with N solve passes (manifolds of 4 points in sequence, friction at their
    # centres, 1 relax pass, detected every 4 substeps of 1/240 s, soft at 0.25 of the substep rate).
    # The other variants of rigid-step.md (springs, x1*, x3*, x2, x2p*, x2s*) ran forms since retired.
    x2c[0-9]*) args=("${VOXELS[@]}" --setting solve_passes="${variant:3}") ;;
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
