#!/usr/bin/env bash
# What runs on a lent NVIDIA machine (device tool): install carried cp312 wheels, point the
# OpenCL ICD loader at the driver's library (no ICD file is installed there), run the engine tests on
# the GPU, then the benchmark. Usage: bash bench/gpu_run.sh "SIZES" [pytest args...]
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p /tmp/icd && echo /usr/local/nvidia/lib64/libnvidia-opencl.so.1 > /tmp/icd/nvidia.icd
export OCL_ICD_VENDORS=/tmp/icd
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
python3 -c "from addon.core.device import list_devices; [print(d.selector, d.label) for d in list_devices()]"
SIZES=${1:-"1000 10000 100000 1000000"}
shift || true
if [ "${RUN_TESTS:-1}" = 1 ]; then
  PRB_OPENCL_DEVICE=gpu python3 -m pytest tests/core -q -x -p no:cacheprovider "$@" 2>&1 | tail -5
fi
python3 bench/engine_bench.py --device gpu --sizes $SIZES --steps ${STEPS_PER_SIZE:-500} ${BENCH_ARGS:-} --out "${OUT:-out}/engine_bench_gpu.json"
[ "${RUN_PHASES:-1}" = 1 ] && python3 bench/bake_phases.py --device gpu --cubes ${PHASE_CUBES:-10000} --frames ${PHASE_FRAMES:-250} --out "${OUT:-out}/bake_phases_gpu.json" | tail -12
