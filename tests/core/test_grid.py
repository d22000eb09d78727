"""The hashed grid finds exactly the pairs a brute-force search finds, anywhere in space."""
import numpy as np
import pytest

from addon.core import ModelBuilder, SimulationSettings
from addon.core.contact_geometry import CONTACT_GEOMETRY
from addon.core.device_buffers import choose_grid_bits
from addon.core.opencl_engine import OpenCLEngine
from addon.core.reference import ReferenceEngine
from addon.core.shapes import box_particles


def brute_force_pairs(engine_ref):
    pairs = engine_ref.find_particle_pairs(engine_ref.particle_positions())
    return {(int(i), int(j)) for i, j in pairs}


@pytest.mark.parametrize("offset", [0.0, 1e3, -2.5e4])
def test_grid_pairs_equal_brute_force_far_outside_initial_bounds(offset):
    rng = np.random.default_rng(3)
    builder = ModelBuilder(particle_radius=0.1)
    # clusters of touching 2x2x1 plates; one cluster sits `offset` metres away from the others,
    # far outside the region the grid was shaped for, and aliases onto the same buckets
    centres = [(0, 0, 0), (3, 0, 0), (0, 4, 1), (offset, offset / 2, 7 + offset / 3)]
    for centre in centres:
        for k in range(4):
            builder.add_body(box_particles((2, 2, 1), 0.2), mass=1.0,
                             position=np.asarray(centre) + rng.uniform(-0.3, 0.3, size=3),
                             orientation=rng.normal(size=4))
    model = builder.finalize()
    # the particle pairs the grid finds (voxel contacts reach further: test_voxel_pairs.py)
    settings = SimulationSettings(gravity=(0, 0, 0), contact_geometry="particles")
    reference = ReferenceEngine(model, settings)
    kernels = OpenCLEngine(model, settings)
    expected = brute_force_pairs(reference)
    kernels.step(1)  # the first substep records every contact in the friction history
    assert len(expected) > 20
    # friction history keeps at most FRICTION_SLOTS contacts per particle: make sure none overflowed
    per_particle = np.bincount([i for i, _ in expected], minlength=model.particle_count)
    assert per_particle.max() <= 8
    assert kernels.contact_pairs() == expected


def test_grid_shape_follows_the_scene_and_keeps_four_cells_per_axis():
    bits = choose_grid_bits(1000, np.array([0, 0, 0]), np.array([1.0, 1.0, 500.0]), cell=0.2)
    assert min(bits) >= 2
    assert bits[2] > bits[0] and bits[2] > bits[1]
    assert sum(bits) == 10  # one to two buckets per particle


@pytest.mark.parametrize("contact_geometry", ["particles", "voxels"])
def test_two_runs_on_one_device_are_identical(contact_geometry):
    rng = np.random.default_rng(11)
    builder = ModelBuilder(particle_radius=1 / 6)
    for k in range(40):
        # whole voxels meet as voxels with voxel contacts (spheres otherwise)
        builder.add_body(box_particles((3, 3, 3), 1 / 3), density=1000,
                         position=(rng.uniform(-1, 1), rng.uniform(-1, 1), 0.6 + 0.7 * k),
                         orientation=rng.normal(size=4),
                         corner_reach=1.0 if CONTACT_GEOMETRY[contact_geometry].voxel_pairs else 0.0)
    builder.add_ground_plane()
    model = builder.finalize()
    runs = []
    for _ in range(2):
        engine = OpenCLEngine(model, SimulationSettings(contact_geometry=contact_geometry))
        engine.step(600)
        state = engine.body_state()
        runs.append(np.concatenate([state.position.ravel(), state.orientation.ravel(), state.velocity.ravel()]))
    assert np.array_equal(runs[0], runs[1])
    assert np.abs(runs[0][:120].reshape(-1, 3) - model.body_position).max() > 0.5  # bodies did collide and fall
