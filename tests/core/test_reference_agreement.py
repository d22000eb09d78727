"""The OpenCL kernels against the plain NumPy step (addon/core/reference.py) on a small scene."""
import numpy as np
import pytest

from addon.core import Material, ModelBuilder, SimulationSettings
from addon.core.opencl_engine import OpenCLEngine
from addon.core.reference import ReferenceEngine
from addon.core.shapes import box_particles, cube_particles


def colliding_scene(spacing=0.85):
    """20 bodies in contact with each other, a ground plane and a tilted one, static particles, several
    materials, and particles as spheres and as (part) voxels against the planes. ``spacing`` between
    the columns and layers of 1 m bodies."""
    rng = np.random.default_rng(7)
    builder = ModelBuilder(particle_radius=1 / 6)
    materials = [Material(friction=0.2, restitution=0.6), Material(friction=0.8, restitution=0.1),
                 Material(friction=0.5, restitution=0.3, linear_damping=0.1, angular_damping=0.2)]
    for k in range(20):
        column, layer = k % 5, k // 5
        shape = cube_particles(1.0) if k % 3 else box_particles((3, 2, 1), 1 / 3)
        builder.add_body(
            shape, density=500.0 + 100 * k,
            # columns and layers under 1 m apart: neighbours start overlapping
            position=(spacing * column + rng.uniform(-0.05, 0.05), rng.uniform(-0.05, 0.05), 0.55 + spacing * layer),
            orientation=rng.normal(size=4), velocity=rng.normal(size=3), angular_velocity=rng.normal(size=3) * 2,
            material=materials[k % 3],
            # voxels against the planes: spheres, whole voxels (some on a turned lattice), half voxels
            corner_reach=(0.0, 1.0, 1.0, 0.5)[k % 4],
            lattice_orientation=rng.normal(size=4) if k % 4 == 2 else (1, 0, 0, 0))
    builder.add_ground_plane(0.0, material=materials[1])
    builder.add_ground_plane(normal=(1, 0, 0.2), point=(-0.8, 0, 0), material=materials[0])  # a tilted wall
    builder.add_static_particles(box_particles((6, 1, 3), 1 / 3) + [1.5, 1.0, 0.5], material=materials[2])
    return builder.finalize()


# 1 lane per body is the CPU path of the body kernel, 8 the GPU path (forces summed in a tree).
# Particles' springs; Rigid Voxels' solve is held to the reference in test_rigid_step.py and
# test_coloured_solve.py
@pytest.mark.parametrize("body_lanes", ["1", "8"])
def test_kernels_match_numpy_reference_over_100_substeps(body_lanes, monkeypatch):
    monkeypatch.setenv("PRB_BODY_LANES", body_lanes)
    model = colliding_scene(0.85)
    settings = SimulationSettings(contact_geometry="particles")
    reference = ReferenceEngine(model, settings)
    kernels = OpenCLEngine(model, settings)
    assert kernels.body_lanes == int(body_lanes)
    assert len(reference.find_particle_pairs(reference.particle_positions())) > 100  # contacts from the start
    contacts_seen = 0
    for _ in range(10):
        reference.step(10)
        kernels.step(10)
        contacts_seen += len(kernels.contact_pairs())
        expected, got = reference.body_state(), kernels.body_state()
        # float32 kernels against the float64 step, about 5x the largest differences measured on
        # PoCL over the 100 substeps (3.3e-6 m, 1.2e-4 m/s, 4.5e-4 rad/s, 1.3e-7)
        np.testing.assert_allclose(got.position, expected.position, rtol=0, atol=2e-5)
        np.testing.assert_allclose(got.velocity, expected.velocity, rtol=0, atol=6e-4)
        np.testing.assert_allclose(got.angular_velocity, expected.angular_velocity, rtol=0, atol=2e-3)
        # q and -q are the same rotation
        dots = np.abs(np.einsum("bi,bi->b", got.orientation, expected.orientation))
        np.testing.assert_allclose(dots, 1.0, atol=1e-6)
    assert contacts_seen > 500
    # the motion was not trivial: bodies moved by centimetres at least
    assert np.abs(reference.body_state().position - model.body_position).max() > 0.05
