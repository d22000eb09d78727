"""Conservation checked against mechanics: a frictional collision keeps linear and angular momentum,
a torque-free tumbling box keeps its kinetic energy and |L| and follows Euler's equations."""
import numpy as np
import pytest

from addon.core import Material, ModelBuilder, SimulationSettings
from addon.core.rotations import quaternion_to_matrix
from addon.core.reference import ReferenceEngine
from addon.core.shapes import cube_particles
from tests.core.helpers import RADIUS, add_cube, axis_angle_quaternion, engine_for, run_for


def colliding_pair(friction):
    """A spinning cube glancing off a turned, heavier-per-volume box: an off-centre, frictional,
    sliding impact that turns both bodies."""
    builder = ModelBuilder(RADIUS)
    material = Material(restitution=0.5, friction=friction)
    add_cube(builder, (-1.2, 0.0, 0.0), velocity=(3.0, 0.2, 0.0), angular_velocity=(0, 0, 1.0), material=material)
    builder.add_body(cube_particles(0.8, 3) * [1, 1.5, 1], mass=300.0, position=(1.2, 0.25, 0.1),
                     velocity=(-2.0, 0.0, 0.0), orientation=axis_angle_quaternion((1, 1, 0), 0.7), material=material)
    return builder


def momenta(engine):
    """Total linear momentum, and angular momentum about the system's centre of mass."""
    mass = engine.model.body_mass
    centre = (mass[:, None] * engine.body_state().position).sum(0) / mass.sum()
    return engine.linear_momentum(), engine.angular_momentum(centre)


def momentum_changes(engine, seconds):
    """Run ``seconds``; the change of linear momentum relative to the start's summed |m v|, and of
    angular momentum relative to its start."""
    p_before, l_before = momenta(engine)
    run_for(engine, seconds)
    p_after, l_after = momenta(engine)
    p_scale = np.abs(engine.model.body_mass[:, None] * engine.model.body_velocity).sum()
    return (np.linalg.norm(p_after - p_before) / p_scale,
            np.linalg.norm(l_after - l_before) / np.linalg.norm(l_before))


@pytest.mark.parametrize("friction", [0.0, 0.6])
def test_frictional_collision_conserves_linear_and_angular_momentum(friction):
    engine = engine_for(colliding_pair(friction), gravity=(0, 0, 0))
    p_before, l_before = momenta(engine)
    engine.step(int(round(1.0 / engine.params.substep)))  # 1 s: they meet, collide and separate
    p_after, l_after = momenta(engine)
    state = engine.body_state()
    assert state.velocity[0, 0] < 2.0  # they did collide
    if friction > 0:  # and friction turned them: the cube's spin about z changed by a lot
        assert abs(state.angular_velocity[0, 2] - 1.0) > 0.3
    p_scale = np.abs(engine.model.body_mass[:, None] * engine.model.body_velocity).sum()
    assert np.linalg.norm(p_after - p_before) / p_scale < 1e-3
    assert np.linalg.norm(l_after - l_before) / np.linalg.norm(l_before) < 1e-3


def test_reference_contact_forces_are_equal_opposite_and_collinear():
    """One substep of the reference in the middle of the frictional collision: the contact forces
    and torques sum to zero (the kernels are checked against the reference elsewhere)."""
    reference = ReferenceEngine(colliding_pair(0.6).finalize(), SimulationSettings(gravity=(0, 0, 0)))
    while not len(reference.find_particle_pairs(reference.particle_positions())):
        reference.step(10)
    reference.step(8)  # into the impact: friction springs loaded, contact points off the centre line
    assert len(reference.find_particle_pairs(reference.particle_positions())) > 4
    p_before, l_before = momenta(reference)
    reference.step(1)
    p_after, l_after = momenta(reference)
    # about one substep's impulse: the forces are large, their sums vanish to round-off
    np.testing.assert_allclose(p_after, p_before, atol=1e-9 * np.abs(p_before).sum())
    np.testing.assert_allclose(l_after, l_before, atol=1e-9 * np.linalg.norm(l_before))


def euler_solution(inertia, omega_body, times, dt=1e-3):
    """Body-frame angular velocity of a torque-free body at each of ``times``: Euler's equations
    I dw/dt = (I w) x w, classical Runge-Kutta (its error, about (|w| dt)^4 per second, is far below
    the engine's)."""
    inv = 1.0 / inertia
    pi = inertia * omega_body

    def rate(p):
        return np.cross(p, inv * p)

    out, t = [], 0.0
    for target in times:
        steps = int(round((target - t) / dt))
        h = (target - t) / steps
        for _ in range(steps):
            k1 = rate(pi)
            k2 = rate(pi + 0.5 * h * k1)
            k3 = rate(pi + 0.5 * h * k2)
            k4 = rate(pi + h * k3)
            pi = pi + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        t = target
        out.append(inv * pi)
    return out


def tumbling_box(spin):
    """A 2 x 1 x 0.5 box spinning at ``spin`` rad/s close to its intermediate axis (y), the unstable
    one: it flips over and over, the case where a first-order rotation step drifts most."""
    builder = ModelBuilder(RADIUS)
    axis = np.array([0.05, 1.0, 0.05])
    builder.add_body(cube_particles(1.0) * [2.0, 1.0, 0.5], mass=50.0, position=(0, 0, 0),
                     angular_velocity=spin * axis / np.linalg.norm(axis))
    return builder


@pytest.mark.parametrize("spin", [2.0, 10.0])
def test_tumbling_box_keeps_energy_and_angular_momentum_and_follows_euler_equations(spin):
    engine = engine_for(tumbling_box(spin), gravity=(0, 0, 0))
    model = engine.model
    inertia = np.diag(model.body_inertia_local[0])
    assert np.allclose(model.body_inertia_local[0], np.diag(inertia), atol=1e-9 * inertia.max())
    energy, momentum = engine.kinetic_energy(), np.linalg.norm(engine.angular_momentum())
    omega_start = model.body_angular_velocity[0].copy()  # body frame = world at the start
    checkpoints = 12
    per_checkpoint = int(round(1.0 / engine.params.substep))
    body_omega = []
    for _ in range(checkpoints):  # 12 s
        engine.step(per_checkpoint)
        assert abs(engine.kinetic_energy() / energy - 1) < 1e-3
        assert abs(np.linalg.norm(engine.angular_momentum()) / momentum - 1) < 1e-3
        state = engine.body_state()
        body_omega.append(quaternion_to_matrix(state.orientation[0]).T @ state.angular_velocity[0])
    # it flipped: the spin about y changed sign
    assert min(w[1] for w in body_omega) < -0.5 * spin
    # and it follows Euler's equations: the body-frame angular velocity at 3 s and 12 s
    seconds = per_checkpoint * engine.params.substep
    expected = euler_solution(inertia, omega_start, (3 * seconds, checkpoints * seconds))
    np.testing.assert_allclose(body_omega[2], expected[0], atol=0.01 * spin)
    np.testing.assert_allclose(body_omega[-1], expected[1], atol=0.01 * spin)


def test_reference_rotation_step_keeps_energy_and_angular_momentum():
    """The reference's rotation step alone (the free body's whole substep) over 12 s at 10 rad/s, at
    Particles' substep (1.5 ms; at Rigid Voxels' 1/240 s energy and |L| keep 6e-9)."""
    reference = ReferenceEngine(tumbling_box(10.0).finalize(),
                                SimulationSettings(gravity=(0, 0, 0), contact_geometry="particles"))
    inertia = reference.model.body_inertia_local[0]
    dt = reference.params.substep

    def energy_and_body_momentum():
        body_momentum = quaternion_to_matrix(reference.q[0]).T @ reference.L[0]
        return 0.5 * body_momentum @ np.linalg.solve(inertia, body_momentum), body_momentum

    energy, body_momentum = energy_and_body_momentum()
    start = body_momentum
    flipped = False
    for _ in range(int(round(12.0 / dt))):
        reference.q[0] = reference._rotation_step(0, dt)
        flipped |= energy_and_body_momentum()[1][1] < -0.5 * start[1]
    new_energy, new_momentum = energy_and_body_momentum()
    assert flipped
    assert abs(new_energy / energy - 1) < 1e-9
    assert abs(np.linalg.norm(new_momentum) / np.linalg.norm(start) - 1) < 1e-9
