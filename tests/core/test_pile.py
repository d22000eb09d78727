"""Issue 33's pile under the default settings: the 1000-cube pile of bench/scenes.py cube_pile (the
poses NVIDIA Newton's side of bench/vs_newton.py starts from) against Newton's figures from the
same scene, recorded on the H100 in one run with ours, and against Blender's Bullet on the same poses
(tests/core/data; docs/experiments/rigid-step.md quotes the same runs)."""
import json
from pathlib import Path

import numpy as np
import pytest

from addon.core import SimulationSettings
from addon.core.opencl_engine import OpenCLEngine
from bench.contact_figures import pile_figures, run_seconds
from bench.scenes import cube_pile
from tests.known_failures import KnownFailure, known_failure
from tests.skip_reasons import XFAIL_PILE_CENTRE

RUNS = Path(__file__).resolve().parent / "data"
NEWTON_RUN = RUNS / "h100_bd5e41f_vs_newton_default.json"
# Blender's Bullet (10 substeps per frame, 10 iterations) on the same poses, seeds 0-5, beside ours
# and Newton's on the H200 (how each was run: the file's "benchmark")
SIX_SEEDS_RUN = RUNS / "h200_aff17e4_pile_six_seeds.json"
SHAPE = ("pile_height_m", "pile_height_p95_m", "mean_centre_height_m", "footprint_radius_m")
# The pile is chaotic: a change in the solve's rounding moves the mean centre by a few per cent
# (rigid-step.md). Its ratio to Newton's at 10 s, +- 0.03: PoCL 1.126, the H200 1.140.
PILE_CENTRE_AT = (1.13, 0.03)


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


def bullet_at_10_s(seed: int = 0) -> dict:
    """Blender's Bullet's 1000-cube pile at 10 s, from the recorded run."""
    return json.loads(SIX_SEEDS_RUN.read_text())["seeds"][str(seed)]["bullet"]["10"]


@pytest.mark.xfail(strict=True, raises=KnownFailure, reason=XFAIL_PILE_CENTRE)
def test_the_1000_cube_pile_stands_at_newtons_shape(pile_at_10_s):
    """At 10 s the highest corner, the 95th percentile of the corners, the mean centre height and
    the footprint within 10 % of Newton's (the H200: 1.015 / 1.000 / 1.140 / 0.961; PoCL 1.003 /
    1.000 / 1.126 / 0.970): the mean centre a known failure, Newton's pile still flowing."""
    ours, newton = pile_at_10_s, newton_at_10_s()
    ratios = {figure: ours[figure] / newton[figure] for figure in SHAPE}
    with known_failure(mean_centre=(ratios["mean_centre_height_m"], *PILE_CENTRE_AT)):
        assert all(abs(ratio - 1.0) <= 0.10 for ratio in ratios.values()), ratios


def test_the_1000_cube_pile_stands_at_bullets_shape(pile_at_10_s):
    """At 10 s the same four figures within 5 % of Blender's Bullet's on the same poses (the H200
    over six seeds: 0.98-1.02; Newton XPBD with 2 iterations 0.68-1.27, its pile still flowing)."""
    ours, bullet = pile_at_10_s, bullet_at_10_s()
    ratios = {figure: ours[figure] / bullet[figure] for figure in SHAPE}
    assert all(abs(ratio - 1.0) <= 0.05 for ratio in ratios.values()), ratios


def test_no_corner_of_the_1000_cube_pile_sinks_a_centimetre(pile_at_10_s):
    """No corner deeper than 1 % of a cube's side at 10 s (the H200 over six seeds -0.55 to
    -0.85 cm)."""
    corner = pile_at_10_s["deepest_corner_m"]
    assert corner >= -0.01, corner


def test_the_1000_cube_pile_is_mostly_at_rest_at_5_s():
    """At least 85 % of the cubes at rest at 5 s (centre under 0.1 m/s, spin under 0.2 rad/s, the
    peer's measure), the mean of six starting jitters (the H200: 94.3 / 93.9 / 92.6 / 93.8 / 93.0 /
    93.2 %, mean 93.5 %; Newton XPBD-2 83.1 %, Bullet 99.0 %)."""
    at_rest = []
    for seed in range(6):
        engine = OpenCLEngine(cube_pile(1000, seed=seed), SimulationSettings())
        at_rest.append(pile_at(engine, 5.0)["fraction_at_rest"])
    assert np.mean(at_rest) >= 0.85, at_rest
