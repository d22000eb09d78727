import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
# Tests run on the CPU OpenCL device (PoCL) unless told otherwise, so results are the same on every machine.
os.environ.setdefault("PRB_OPENCL_DEVICE", "cpu")
