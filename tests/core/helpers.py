"""Scene builders shared by the engine tests."""
import numpy as np

from addon.core import Material, ModelBuilder, SimulationSettings
from addon.core.opencl_engine import OpenCLEngine
from addon.core.rotations import axis_angle_quaternions as axis_angle_quaternion  # noqa: F401 (tests import it from here)
from addon.core.shapes import cube_particles

CUBE_SIDE = 1.0
RADIUS = CUBE_SIDE / 6.0  # 27-particle cubes, as in the seed


def add_cube(builder, position, material=None, **kwargs):
    """A solid cube: its voxels reach their corners (sharp against planes and triangle faces)."""
    kwargs.setdefault("corner_reach", 1.0)
    return builder.add_body(cube_particles(CUBE_SIDE), density=1000.0, position=position,
                            material=material or Material(), **kwargs)


def engine_for(builder, **settings):
    return OpenCLEngine(builder.finalize(), SimulationSettings(**settings))


def run_for(engine, seconds):
    steps = int(round(seconds / engine.params.substep))
    engine.step(steps)
    return engine.body_state()
