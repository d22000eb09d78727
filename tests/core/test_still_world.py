"""A world whose bodies all sleep is not stepped (OpenCLEngine._world_asleep): the substeps it skips
would have changed nothing, so a pile, and glued cubes, settled and stepped on give the same bits with
and without the skip, and the skip takes over once every body sleeps."""
import numpy as np

from addon.core import SimulationSettings
from addon.core.opencl_engine import OpenCLEngine
from tests.core.test_joint_kernels import glued_cubes_landing


def settled(model, frames, substeps_per_frame=10, skip=True):
    engine = OpenCLEngine(model, SimulationSettings())
    engine.skip_still_world = skip
    for _ in range(frames):
        engine.step(substeps_per_frame)
        state = engine.body_state()
    return engine, state


def test_a_settled_pile_and_glued_cubes_skip_their_still_substeps_to_the_bit():
    from bench.scenes import cube_pile
    for model, frames in ((cube_pile(27), 150), (glued_cubes_landing(True), 60)):
        skipping, skipped_state = settled(model, frames)
        stepping, stepped_state = settled(model, frames, skip=False)
        assert np.all(stepped_state.velocity == 0.0)  # asleep
        assert skipping.skipped_substeps >= 200  # the last frames were skipped
        assert stepping.skipped_substeps == 0
        assert skipping.time == stepping.time and skipping.substeps_done == stepping.substeps_done
        for field in ("position", "orientation", "velocity", "angular_velocity"):
            assert np.array_equal(getattr(skipped_state, field), getattr(stepped_state, field)), field
        # and both go on alike when stepped further
        skipping.step(37)
        stepping.step(37)
        assert np.array_equal(skipping.body_state().position, stepping.body_state().position)


def test_a_joint_turned_off_wakes_a_still_world():
    """The glued cubes asleep, one joint turned off: the world is stepped again (the bodies it joined
    wake), and the skip resumes once they sleep again."""
    engine, state = settled(glued_cubes_landing(True), 60)
    skipped = engine.skipped_substeps
    assert skipped > 0
    engine.set_joints_enabled([False, True])
    engine.step(10)
    assert engine.skipped_substeps == skipped  # stepped
