"""Issue 33's pile under the default settings: the 1000-cube pile of bench/scenes.py cube_pile (the
poses NVIDIA Newton's side of bench/vs_newton.py starts from) against Newton's figures from the
same scene, recorded on the H100 in one run with ours (docs/experiments/data/rigid_step)."""
import json
import os
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pytest

from addon.core import SimulationSettings
from addon.core.opencl_engine import OpenCLEngine
from bench.contact_figures import pile_figures, run_seconds
from bench.scenes import cube_pile
from tests.known_failures import KnownFailure, known_failure
from tests.skip_reasons import XFAIL_PILE_CENTRE_ON_THE_CPU, XFAIL_PILE_CORNER_ON_A_GPU

NEWTON_RUN = (Path(__file__).resolve().parents[2] / "docs" / "experiments" / "data" / "rigid_step"
              / "h100_bd5e41f_vs_newton_default.json")
ON_A_GPU = os.environ.get("PRB_OPENCL_DEVICE", "cpu") != "cpu"  # tools/gpu_tests.py sets it
# The pile is chaotic: a change in the solve's rounding moves these from one side of the gate to
# the other (rigid-step.md). The deepest corner at 10 s on the H200 (seed 0, bdcd52d's record),
# +- 1 mm (PoCL -1 cm or less); the mean centre height over Newton's at 10 s on PoCL, +- 0.03 (the
# H200 1.025)
PILE_CORNER_AT = (-0.0161, 0.001)
PILE_CENTRE_AT = (1.126, 0.03)


def newton_at_10_s() -> dict:
    """Newton XPBD's (2 iterations) 1000-cube pile at 10 s, from the recorded side-by-side run."""
    results = json.loads(NEWTON_RUN.read_text())["newton"]["xpbd_2_iterations"]["results"]
    return next(r for r in results if r["bodies"] == 1000)["pile"]["end_10.00s"]


def pile_at(engine, seconds):
    run_seconds(engine, seconds)
    return pile_figures(engine.body_state(), engine.model.body_lattice_orientation)


@pytest.fixture(scope="module")
def pile_at_10_s():
    """Our 1000-cube pile's figures at 10 s (one run for the tests below)."""
    return pile_at(OpenCLEngine(cube_pile(1000), SimulationSettings()), 10.0)


@pytest.mark.xfail(not ON_A_GPU, strict=True, raises=KnownFailure, reason=XFAIL_PILE_CENTRE_ON_THE_CPU)
def test_the_1000_cube_pile_stands_at_newtons_shape(pile_at_10_s):
    """At 10 s the highest corner, the 95th percentile of the corners, the mean centre height and
    the footprint within 10 % of Newton's (the H200: 1.004 / 1.000 / 1.025 / 1.022; PoCL 1.003 /
    1.000 / 1.126 / 0.970, its mean centre a known failure there)."""
    ours, newton = pile_at_10_s, newton_at_10_s()
    ratios = {figure: ours[figure] / newton[figure]
              for figure in ("pile_height_m", "pile_height_p95_m", "mean_centre_height_m", "footprint_radius_m")}
    with known_failure(mean_centre=(ratios["mean_centre_height_m"], *PILE_CENTRE_AT)) if not ON_A_GPU else nullcontext():
        assert all(abs(ratio - 1.0) <= 0.10 for ratio in ratios.values()), ratios


@pytest.mark.xfail(ON_A_GPU, strict=True, raises=KnownFailure, reason=XFAIL_PILE_CORNER_ON_A_GPU)
def test_no_corner_of_the_1000_cube_pile_sinks_a_centimetre(pile_at_10_s):
    """No corner deeper than 1 % of a cube's side at 10 s (the H200 -1.61 cm: a known failure there;
    PoCL 1 cm or less)."""
    corner = pile_at_10_s["deepest_corner_m"]
    with known_failure(corner=(corner, *PILE_CORNER_AT)) if ON_A_GPU else nullcontext():
        assert corner >= -0.01, corner


def test_the_1000_cube_pile_is_mostly_at_rest_at_5_s():
    """At least 85 % of the cubes at rest at 5 s (centre under 0.1 m/s, spin under 0.2 rad/s, the
    peer's measure), the mean of six starting jitters (PoCL: 84 / 87 / 90 / 86 / 89 / 91 %, mean
    87.7 %; Newton in the recorded run 87 %)."""
    at_rest = []
    for seed in range(6):
        engine = OpenCLEngine(cube_pile(1000, seed=seed), SimulationSettings())
        at_rest.append(pile_at(engine, 5.0)["fraction_at_rest"])
    assert np.mean(at_rest) >= 0.85, at_rest
