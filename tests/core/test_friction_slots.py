"""Contacts beyond the friction history's FRICTION_SLOTS: a particle can touch more particles than
it remembers tangential springs for. Their forces still count; the kernels and the NumPy reference
must agree on what happens to them (the reference-agreement tests never reach that many). Friction
springs are Particles' (Rigid Voxels' friction is held at each manifold's centre)."""
import numpy as np
import pytest

from addon.core import Material, ModelBuilder, SimulationSettings
from addon.core.opencl_engine import OpenCLEngine
from addon.core.reference import ReferenceEngine
from addon.core.settings import FRICTION_SLOTS

RADIUS = 0.1
RING_RADIUS = 0.12  # static particles around the vertical axis, overlapping each other (statics may)
MATERIAL = Material(friction=0.5, restitution=0.5)


def particle_on_a_ring(contacts, velocity=(0.0, 0.0, 0.0), material=MATERIAL):
    """A one-particle body of 1 kg seated on a ring of ``contacts`` static particles, 1 mm into
    each of them: every one of them a contact from the first substep."""
    angles = 2 * np.pi * np.arange(contacts) / contacts
    ring = np.stack([RING_RADIUS * np.cos(angles), RING_RADIUS * np.sin(angles), np.zeros(contacts)], axis=1)
    height = np.sqrt((2 * RADIUS - 1e-3) ** 2 - RING_RADIUS**2)
    builder = ModelBuilder(RADIUS)
    builder.add_body(np.zeros((1, 3)), mass=1.0, position=(0, 0, height), velocity=velocity, material=material)
    builder.add_static_particles(ring, material=material)
    return builder.finalize()


@pytest.mark.parametrize("contacts", [FRICTION_SLOTS, FRICTION_SLOTS + 2])
def test_kernels_match_the_reference_with_more_contacts_than_friction_slots(contacts):
    """With more contacts than slots both keep the springs of the deepest (00_common.h take_slot;
    the first ones found, in each engine's own search order, left them 1.2e-5 m / 1.2e-2 m/s
    apart after 60 substeps on 10 contacts)."""
    model = particle_on_a_ring(contacts, velocity=(0.05, 0.02, 0.0))  # sliding: the springs matter
    settings = SimulationSettings(sleep_speed=0.0, contact_geometry="particles")
    reference, kernels = ReferenceEngine(model, settings), OpenCLEngine(model, settings)
    assert len(reference.find_particle_pairs(reference.particle_positions())) == contacts
    position_apart = velocity_apart = 0.0
    for _ in range(6):
        reference.step(10)
        kernels.step(10)
        expected, got = reference.body_state(), kernels.body_state()
        position_apart = max(position_apart, np.abs(got.position - expected.position).max())
        velocity_apart = max(velocity_apart, np.abs(got.velocity - expected.velocity).max())
    assert np.abs(expected.velocity[0]).max() > 1e-4  # still moving: not a trivial agreement
    # float32 against float64: 3e-8 m and 2e-6 m/s measured with 8 contacts
    assert position_apart <= 3e-7 and velocity_apart <= 2e-5, (position_apart, velocity_apart)


def resting_height(contacts, stiffness, mass=1.0, g=9.81):
    """Height at which ``contacts`` normal springs of the ring carry the weight (bisection)."""
    low, high = 0.0, np.sqrt((2 * RADIUS) ** 2 - RING_RADIUS**2)
    for _ in range(60):
        h = (low + high) / 2
        distance = np.hypot(RING_RADIUS, h)
        lift = contacts * stiffness * (2 * RADIUS - distance) * h / distance
        low, high = (h, high) if lift > mass * g else (low, h)
    return h


@pytest.mark.parametrize("backend", ["kernels", "reference"])
@pytest.mark.parametrize("contacts", [FRICTION_SLOTS, FRICTION_SLOTS + 2])
def test_every_contact_carries_its_share_of_the_weight(contacts, backend):
    """At rest (frictionless, so only the normal springs carry it) the particle sits where all
    ``contacts`` springs hold it up: 4e-10 m off with 10, against 2e-5 m had 2 of them been left
    out."""
    model = particle_on_a_ring(contacts, material=Material(friction=0.0, restitution=0.5))
    settings = SimulationSettings(sleep_speed=0.0, contact_geometry="particles")
    engine = (OpenCLEngine if backend == "kernels" else ReferenceEngine)(model, settings)
    engine.step(int(round((1.0 if backend == "kernels" else 0.3) / engine.params.substep)))
    state = engine.body_state()
    assert np.linalg.norm(state.velocity[0]) < 1e-4
    assert abs(state.position[0, 2] - resting_height(contacts, engine.params.stiffness)) < 1e-6
