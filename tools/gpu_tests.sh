#!/usr/bin/env bash
# tools/gpu_tests.py on the lent NVIDIA machine (Python 3.12, no pyopencl, no OpenCL ICD file):
# installs the carried cp312 wheels in .whl/ (pyopencl and its dependencies, mako, and pytest with
# pluggy, iniconfig, packaging, pygments), points the ICD loader at the driver's OpenCL library,
# and writes $OUT/gpu_tests.json and $OUT/gpu_tests.log. Usage: bash tools/gpu_tests.sh [--device SEL]
set -uo pipefail
cd "$(dirname "$0")/.."
if ! python3 -c "import pyopencl, pytest" 2>/dev/null; then
  SITE=${PRB_WHEEL_SITE:-/tmp/site}
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" .whl/*.whl || exit 1
  export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1
NVIDIA_OPENCL=/usr/local/nvidia/lib64/libnvidia-opencl.so.1
if [ -z "${OCL_ICD_VENDORS:-}" ] && [ -e "$NVIDIA_OPENCL" ]; then
  mkdir -p /tmp/icd && echo "$NVIDIA_OPENCL" > /tmp/icd/nvidia.icd
  export OCL_ICD_VENDORS=/tmp/icd
fi
# pytest in four runs side by side with the checks (16 cores): one run of the whole takes over the
# 600 s a device command may
python3 tools/gpu_tests.py --jobs 4 --out "${OUT:-out}/gpu_tests.json" "$@"
