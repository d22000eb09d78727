#!/usr/bin/env bash
# bench/engine_bench.py at an earlier commit and in this tree, side by side on the lent NVIDIA machine
# (device tool), rounds interleaved so that drift of the machine shows up as noise in both.
#
# Here, before the run: the earlier commit's engine as plain files, and the cp312 wheels (.whl/, see
# bench/gpu_run.sh):
#     mkdir -p out/baseline && git archive 6d0605e addon bench kernels | tar -x -C out/baseline
# Then on the device, carrying [".whl", "out/baseline"]:
#     bash bench/gpu_compare_commits.sh out/baseline "10000 100000 1000000"
# First checks that the core scenes of tools/compare_with_commit.py end bit for bit the same on the GPU
# in both trees (COMPARE=0 skips it), then writes $OUT/engine_bench_{baseline,current}_ROUND.json and
# prints ms per substep per size.
set -uo pipefail
BASELINE=${1:?usage: gpu_compare_commits.sh BASELINE_DIR [SIZES] [ROUNDS]}
SIZES=${2:-"10000 100000 1000000"}
ROUNDS=${3:-3}
OUT=${OUT:-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
mkdir -p /tmp/icd && echo /usr/local/nvidia/lib64/libnvidia-opencl.so.1 > /tmp/icd/nvidia.icd
export OCL_ICD_VENDORS=/tmp/icd PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
HERE=$PWD
if [ "${COMPARE:-1}" = 1 ]; then
  PYTHONPATH=/tmp/site python3 tools/compare_with_commit.py --baseline-dir "$BASELINE" --device gpu 2>&1 | tail -4
fi
OUT_ABS=$(cd "$OUT" && pwd)
for round in $(seq 1 "$ROUNDS"); do
  for label in baseline current; do
    tree=$HERE; [ "$label" = baseline ] && tree=$(cd "$BASELINE" && pwd)
    (cd "$tree" && PYTHONPATH=/tmp/site:$tree python3 bench/engine_bench.py --device gpu --sizes $SIZES \
      --steps "${STEPS_PER_SIZE:-500}" --out "$OUT_ABS/engine_bench_${label}_${round}.json" >/dev/null) || exit 1
  done
done
python3 - "$OUT_ABS" "$ROUNDS" <<'EOF'
import json, sys
out, rounds = sys.argv[1], int(sys.argv[2])
rows = {}
for label in ("baseline", "current"):
    for r in range(1, rounds + 1):
        for result in json.load(open(f"{out}/engine_bench_{label}_{r}.json"))["results"]:
            rows.setdefault(result["bodies"], {}).setdefault(label, []).append(result["ms_per_step"])
print("bodies   baseline ms/substep (each round)        current ms/substep (each round)")
for bodies, by in sorted(rows.items()):
    fmt = lambda xs: " ".join(f"{x:7.3f}" for x in xs)
    print(f"{bodies:>8} {fmt(by.get('baseline', []))}   |   {fmt(by.get('current', []))}")
EOF
