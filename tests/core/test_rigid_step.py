"""The rigid step's parts built so far (docs/experiments/rigid-step.md): contacts without springs
(SimulationSettings.contact_springs), speculative contacts (speculative_margin) and detection once
every few substeps (substeps_per_detection). Opt-in settings while the step is measured: the
kernels against the NumPy reference, and the small scenes' physics at RIGID_STEP."""
import numpy as np
import pytest

from addon.core import Material, ModelBuilder, SimulationSettings
from addon.core.opencl_engine import OpenCLEngine
from addon.core.settings import COLOURED_VOXELS
from addon.core.shapes import box_particles, cube_particles
from bench.contact_figures import ball, column, fast_drop, joint, rebound_ratio, rows
from tests.core.helpers import assert_kernels_follow_the_solve_reference

# 240 substeps per second (60 Hz steps of 4), soft at 0.25 of the substep rate, detected each step
RIGID_STEP = dict(contact_geometry="voxels", contact_springs=False, substep=1 / 240, solve_hertz_fraction=0.25,
                  substeps_per_detection=4)


def tumbling_bodies(spacing=1.3, seed=12):
    """12 bodies of three materials thrown at each other over a ground and a tilted plane: cubes and
    3 x 2 x 1 boxes as spheres, whole voxels (some on a turned lattice) and half voxels. 1.3 m apart
    no particle has more contacts than its FRICTION_SLOTS within the speculative margin, so both
    engines keep the same ones (beyond, which are kept follows each engine's search order). Seed
    12 puts no contact within float rounding of the speculative threshold in 60 substeps (with 11 a
    plane contact's gap lay 3 um from it at substep 56: the kernels' float32 and the reference's
    float64 chose differently, as they may at any threshold)."""
    rng = np.random.default_rng(seed)
    builder = ModelBuilder(particle_radius=1 / 6)
    materials = [Material(friction=0.2, restitution=0.6), Material(friction=0.8, restitution=0.1),
                 Material(friction=0.5, restitution=0.3)]
    for k in range(12):
        column_index, layer = k % 4, k // 4
        shape = cube_particles(1.0) if k % 3 else box_particles((3, 2, 1), 1 / 3)
        builder.add_body(
            shape, density=500.0 + 100 * k,
            position=(spacing * column_index + rng.uniform(-0.05, 0.05), rng.uniform(-0.05, 0.05),
                      0.6 + spacing * layer),
            orientation=rng.normal(size=4), velocity=rng.normal(size=3), angular_velocity=rng.normal(size=3) * 2,
            material=materials[k % 3], corner_reach=(0.0, 1.0, 1.0, 0.5)[k % 4],
            lattice_orientation=rng.normal(size=4) if k % 4 == 2 else (1, 0, 0, 0))
    builder.add_ground_plane(0.0, material=materials[1])
    builder.add_ground_plane(normal=(1, 0, 0.2), point=(-0.8, 0, 0), material=materials[0])
    return builder.finalize()


@pytest.mark.parametrize("pair_lanes, substeps_per_detection, hertz_fraction", [
    ("1", 1, 0.0), ("8", 4, 0.0), ("1", 4, None)])
def test_kernels_match_the_reference_without_springs(pair_lanes, substeps_per_detection, hertz_fraction,
                                                      monkeypatch):
    """Without springs every contact (voxel pairs, spheres, planes) is a record of the solve, up to
    the speculative margin apart; detected every 4 substeps, each record's depth in between follows
    its bodies' motion. 60 substeps, the states as close as the solve's other agreement tests ask."""
    monkeypatch.setenv("PRB_PAIR_LANES", pair_lanes)
    settings = SimulationSettings(**{**COLOURED_VOXELS, **RIGID_STEP, "substeps_per_detection": substeps_per_detection,
                                     "solve_hertz_fraction": hertz_fraction})
    model = tumbling_bodies()
    reference, solved = assert_kernels_follow_the_solve_reference(model, settings, 60)
    assert solved > 0.0
    assert np.abs(reference.body_state().position - model.body_position).max() > 0.2


def test_rigid_step_settings_are_refused_where_they_cannot_work():
    with pytest.raises(ValueError, match="without springs need the velocity solve"):
        SimulationSettings(contact_geometry="particles", contact_springs=False)
    with pytest.raises(ValueError, match="coloured solve without springs"):
        SimulationSettings(contact_geometry="voxels", substeps_per_detection=4)
    with pytest.raises(ValueError, match="substeps per detection"):
        SimulationSettings(**{**RIGID_STEP, "substeps_per_detection": 0})
    assert SimulationSettings(**RIGID_STEP).speculative_margin > 0.0
    assert SimulationSettings(contact_geometry="voxels").speculative_margin == 0.0


def test_a_fast_cube_meets_the_ground_before_it_arrives():
    """Thrown down at 10 and 24 m/s (0.17 and 0.4 m per detection), a unit cube's lowest corner goes
    no deeper than 1 % of its side into the ground: its speculative margin grows with its closing
    speed (SPECULATIVE_REACH). With the margin alone it went 8.8 and 20.6 cm deep."""
    for key, figures in fast_drop(RIGID_STEP, supports=("ground",)).items():
        assert figures["deepest_m"] < 0.01, (key, figures)
        assert abs(figures["end_gap_m"]) < 1e-3, (key, figures)


def test_a_cube_drops_and_rests_on_the_ground_and_on_a_cube_without_springs():
    """Slow drops (2 m/s) are caught by the speculative margin between detections; the cubes come to
    rest within a millimetre."""
    builder = ModelBuilder(1 / 6)
    material = Material(friction=0.5, restitution=0.0)
    builder.add_body(cube_particles(1.0), density=1000.0, position=(0, 0, 0.6), velocity=(0, 0, -2.0),
                     material=material, corner_reach=1.0)
    builder.add_body(cube_particles(1.0), density=1000.0, position=(3, 0, 1.55), velocity=(0, 0, -2.0),
                     material=material, corner_reach=1.0)
    builder.add_body(cube_particles(1.0), density=1000.0, position=(3, 0, 0.5), material=material, corner_reach=1.0)
    builder.add_ground_plane(0.0, material=material)
    engine = OpenCLEngine(builder.finalize(), SimulationSettings(**RIGID_STEP))
    lowest = np.inf
    for _ in range(240):
        engine.step(1)
        state = engine.body_state()
        lowest = min(lowest, state.position[0, 2] - 0.5, state.position[1, 2] - state.position[2, 2] - 1.0)
    assert lowest > -0.01, lowest
    np.testing.assert_allclose(state.position[:, 2], [0.5, 1.5, 0.5], atol=1e-3)
    assert np.abs(state.velocity).max() < 1e-3


def test_small_scenes_hold_at_the_rigid_step():
    """Issue 22's small scenes at RIGID_STEP (measured on PoCL: joint 0.3 mm, top row 2.5 mm, column
    0.50 %, ball on a light brick 0.30 % of its radius)."""
    assert joint(RIGID_STEP)["sink_below_ideal_m"] < 1e-3
    assert rows(RIGID_STEP)["top_row_sink_m"] < 0.01
    assert column(RIGID_STEP)["height_lost_fraction"] < 0.01
    steel = ball(RIGID_STEP)
    assert steel["ground"]["at_rest_in_ball_radii"] < 0.02
    assert steel["brick"]["at_rest_in_ball_radii"] < 0.02


@pytest.mark.parametrize("on_cube", [False, True])
def test_rebound_at_the_rigid_step_is_within_5_percent_of_the_restitution(on_cube):
    for restitution in (0.3, 0.6, 0.9):
        assert rebound_ratio(on_cube, restitution, RIGID_STEP) == pytest.approx(restitution, rel=0.05)
