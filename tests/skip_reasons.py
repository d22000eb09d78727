"""The only reasons a test may be skipped or marked xfail (tests/conftest.py fails any other)."""
# Any other skip (an importorskip, a skipif that became true
# on a new machine) fails the run: a skipped test passes nothing, and a green run must mean every
# test ran. Tests skip with these constants, so this list is the complete set.
SKIP_NOT_POCL_ONLY = "needs a machine whose only OpenCL is PoCL (CI); here other drivers would remain"
# Not a skip but a warning: with PRB_ALLOW_SKIP_BPY=1 (a developer without the bpy module, on
# purpose; CI never sets it) tests/blender/conftest.py leaves the Blender-layer tests uncollected.
SKIP_NO_BPY = "PRB_ALLOW_SKIP_BPY=1: the Blender layer is not tested (import bpy failed)"
# The fallback from one device to the next needs two: the venv brings PoCL and, on x86-64 Linux,
# Intel's runtime (requirements-dev.txt); a GPU machine with one GPU and no CPU driver has one
SKIP_ONE_CPU_DRIVER = "needs two OpenCL devices (CI: PoCL and Intel's runtime, from the venv on x86-64 Linux)"
ALLOWED_SKIP_REASONS = (SKIP_NOT_POCL_ONLY, SKIP_ONE_CPU_DRIVER)

# An xfail is a known failure: strict=True, raises=KnownFailure (tests/known_failures.py), so it
# stays expected only while the test fails by the amount measured when the marker was set; a pass,
# or a value outside that band either way, fails the run.
XFAIL_COLLIDING_SCENE_PARTS = (
    "the rigid step on the colliding scene (20 bodies 2 cm into each other): kernels and reference part "
    "beyond the solve's tolerances by substep 40-70 with rigid contacts (PoCL and the H100; with soft contacts, "
    "the default, they agree over the whole 50, detected every substep and every 4). A speculative "
    "contact turns the depth's float32 error into a velocity over one substep (an edge-edge normal 3e-5 "
    "off, the depth 8e-6 m, a friction limit 0.5 %); test_rigid_step's tumbling scene agrees")
XFAIL_PILE_CENTRE = (
    "the rigid step: the 1000-cube pile's mean centre height at 10 s is 13-14 % above NVIDIA Newton XPBD's "
    "(2 iterations; 10 % asked; PoCL 1.126, the H200 1.140). Newton's pile still flows at 10 s (its "
    "mean speed 0.03-0.32 m/s over six seeds, Blender's Bullet 0.006-0.04): against Bullet on the same "
    "poses ours is within 2.2 % on every seed (test_the_1000_cube_pile_stands_at_bullets_shape)")
XFAIL_POCL_STACK_ROCKS = (
    "Rigid Voxels, 500 cubes at restitution 0 on PoCL: a stack 2 m high (cube 347 on three cubes "
    "on two) tips over slowly from 4 s, its speed growing e-fold about every 1.6 s (0.01 m/s at 5 s, "
    "0.05 at 7.5 s, an inverted pendulum), and at 8 s its top cube slides off at 0.646 m/s (0.5 m/s "
    "asked of every body; the next fastest 0.24). With the voxel pairs' generic 15-axis test the same "
    "pile had a 3-cube stack rocking at 0.507 m/s at 8 s; the H100 passed that pile. Such rocking stacks are the last stragglers of these piles: before "
    "026822d (plane records at the point a turning voxel touches next) seeds 1-6 ended at 0.015-0.49 m/s "
    "on PoCL, seed 3's a stack rocking the same way")
# An xfail that may be non-strict (none now: every xfail is a known failure with its band)
NON_STRICT_XFAIL_REASONS = ()
ALLOWED_XFAIL_REASONS = (XFAIL_COLLIDING_SCENE_PARTS, XFAIL_PILE_CENTRE, XFAIL_POCL_STACK_ROCKS,
                         *NON_STRICT_XFAIL_REASONS)
