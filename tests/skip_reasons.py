"""The only reasons a test may be skipped (tests/conftest.py fails any other skip)."""
# Any other skip (an importorskip, a skipif that became true
# on a new machine) fails the run: a skipped test passes nothing, and a green run must mean every
# test ran. Tests skip with these constants, so this list is the complete set.
SKIP_NOT_POCL_ONLY = "needs a machine whose only OpenCL is PoCL (CI); here other drivers would remain"
# Not a skip but a warning: with PRB_ALLOW_SKIP_BPY=1 (a developer without the bpy module, on
# purpose; CI never sets it) tests/blender/conftest.py leaves the Blender-layer tests uncollected.
SKIP_NO_BPY = "PRB_ALLOW_SKIP_BPY=1: the Blender layer is not tested (import bpy failed)"
ALLOWED_SKIP_REASONS = (SKIP_NOT_POCL_ONLY,)
