"""Joints between bodies (core.joints, reference_joints) in the reference engine: pendulums against
their analytic periods, a hanging FIXED chain, limits, a spring's period, breaking at Blender's
threshold, a motor's speed, disable_collisions."""
import math

import numpy as np
import pytest

from addon.core import ModelBuilder, SimulationSettings
from addon.core.joints import joint_hertz, joint_rows
from addon.core.opencl_engine import OpenCLEngine
from addon.core.reference import ReferenceEngine
from addon.core.shapes import box_particles, cube_particles

R = 0.05  # particles of 10 cm: a body of 2 x 2 x 2 is a 20 cm cube
G = 9.81


def small_body(builder, position, mass=2.0, counts=(2, 2, 2), **kwargs):
    return builder.add_body(box_particles(counts, 2 * R), mass=mass, position=position, **kwargs)


def engine(builder, **settings):
    return ReferenceEngine(builder.finalize(), SimulationSettings(**settings))


def crossings(times, values, level=0.0):
    """Times at which ``values`` crosses ``level`` (either way), linearly interpolated."""
    v = np.asarray(values) - level
    found = np.flatnonzero(np.sign(v[1:]) != np.sign(v[:-1]))
    return np.array([times[i] + (times[i + 1] - times[i]) * v[i] / (v[i] - v[i + 1]) for i in found])


def trace(e, seconds, read):
    steps = int(round(seconds / e.params.substep))
    times, values = [], []
    for _ in range(steps):
        e.step(1)
        times.append(e.time)
        values.append(read(e))
    return np.array(times), np.array(values)


@pytest.mark.parametrize("kind", ["POINT", "HINGE"])
def test_pendulum_period(kind):
    """A 20 cm cube 0.5 m below a pivot, swinging 0.2 rad: the compound pendulum's period (the
    finite amplitude's series) within 1 % (it comes out within 0.01 %)."""
    length, theta0, mass = 0.5, 0.2, 2.0
    b = ModelBuilder(R)
    body = small_body(b, (length * math.sin(theta0), 0.0, -length * math.cos(theta0)), mass=mass)
    b.add_joint(kind, body, -1, (0.0, 0.0, 0.0), axis=(0.0, 1.0, 0.0) if kind == "HINGE" else None)
    e = engine(b)
    inertia = e.model.body_inertia_local[0][1, 1] + mass * length**2
    period = 2 * math.pi * math.sqrt(inertia / (mass * G * length)) * (1 + theta0**2 / 16 + 11 * theta0**4 / 3072)
    times, angle = trace(e, 1.25 * period, lambda e: math.atan2(e.x[0, 0], -e.x[0, 2]))
    half_periods = np.diff(crossings(times, angle))
    assert len(half_periods) >= 1
    assert np.all(np.abs(2 * half_periods / period - 1) < 0.01), (2 * half_periods, period)
    assert abs(np.linalg.norm(e.x[0]) - length) < 1e-3  # the pivot holds
    assert abs(e.x[0, 1]) < 1e-6  # in its plane


def test_hanging_fixed_chain_holds_still():
    """Ten 20 cm links of 1 kg glued end to end by FIXED joints, the top one to the world: once settled
    the chain's tip drifts less than 1 mm, no joint is open by 1 mm, and it hangs as low as the soft
    step's springs put it: each joint's vertical row is a spring of m_eff omega^2 (omega: 0.35 of the
    substep rate, 84 Hz here; m_eff 1 kg for the top joint, 0.5 kg between two links) carrying the
    links below, g / omega^2 x (10 + 2 x 45) in all: 3.5 mm (Bullet's, tests/blender: 3.9 mm)."""
    b = ModelBuilder(R)
    links, size = 10, 4 * R
    bodies = [small_body(b, (0.0, 0.0, -size * (k + 0.5)), mass=1.0) for k in range(links)]
    b.add_joint("FIXED", bodies[0], -1, (0.0, 0.0, 0.0))
    for k in range(1, links):
        b.add_joint("FIXED", bodies[k], bodies[k - 1], (0.0, 0.0, -size * k))
    e = engine(b, sleep_time=0.0)
    start = e.x[-1].copy()
    e.step(int(0.1 / e.params.substep))
    settled = e.x[-1].copy()
    e.step(int(0.15 / e.params.substep))
    tip = e.x[-1]
    assert np.linalg.norm(tip - settled) < 1e-3
    omega = 2 * math.pi * joint_hertz(e.model.joints, e.params.substep)
    sag = G / omega**2 * (links + 2 * sum(range(links)))
    assert abs((start[2] - tip[2]) / sag - 1) < 0.02, (start[2] - tip[2], sag)
    assert np.abs(tip[:2] - start[:2]).max() < 1e-6
    errors = np.array([e.joint_coordinates(k) for k in range(links)])
    own = G / omega**2 * np.array([links] + [2 * (links - k) for k in range(1, links)])
    assert np.allclose(np.abs(errors[:, 2]), own, rtol=0.02)  # each joint's own sag: 0.04-0.63 mm
    assert np.abs(errors[:, 2]).max() < 1e-3 and start[2] - tip[2] < 4e-3
    assert np.abs(errors[:, :2]).max() < 1e-9 and np.abs(errors[:, 3:]).max() < 1e-9
    assert not e.joint_broken.any()


def test_hinge_limit_holds():
    """A rod level with its hinge falls to its limit (0.5 rad) and stays there."""
    b = ModelBuilder(R)
    body = small_body(b, (0.4, 0.0, 0.0), counts=(4, 2, 2))
    b.add_joint("HINGE", body, -1, (0.0, 0.0, 0.0), axis=(0.0, 1.0, 0.0), use_limit_ang=(False, False, True),
                limit_ang_lower=-0.5, limit_ang_upper=0.5)
    e = engine(b, sleep_time=0.0)
    times, angle = trace(e, 0.8, lambda e: e.joint_coordinates(0)[5])
    assert np.abs(angle).max() < 0.5 + 0.01
    assert abs(abs(angle[-1]) - 0.5) < 0.01
    world = math.atan2(-e.x[0, 2], e.x[0, 0])  # how far the rod's centre has fallen below level
    assert abs(world - 0.5) < 0.01


def test_slider_limit_holds():
    """A block on a vertical slider falls to its limit, 0.3 m, without turning or leaving the axis."""
    b = ModelBuilder(R)
    body = small_body(b, (0.0, 0.0, 0.0))
    b.add_joint("SLIDER", body, -1, (0.0, 0.0, 0.0), axis=(0.0, 0.0, 1.0), use_limit_lin=(True, False, False),
                limit_lin_lower=-0.3, limit_lin_upper=0.3)
    e = engine(b, sleep_time=0.0)
    times, slide = trace(e, 0.6, lambda e: e.joint_coordinates(0)[0])
    assert np.abs(slide).max() < 0.3 + 0.002
    assert abs(e.x[0, 2] + 0.3) < 0.002
    assert np.abs(e.x[0, :2]).max() < 1e-6
    assert np.abs(e.q[0, 1:]).max() < 1e-6


def test_generic_spring_period():
    """A 2 kg block on a vertical GENERIC_SPRING (200 N/m, the other rows locked): 2 pi sqrt(m / k)
    within 2 %."""
    mass, stiffness = 2.0, 200.0
    b = ModelBuilder(R)
    body = small_body(b, (0.0, 0.0, 0.0), mass=mass)
    b.add_joint("GENERIC_SPRING", body, -1, (0.0, 0.0, 0.0), use_limit_lin=(True, True, False),
                use_limit_ang=(True, True, True), use_spring=(False, False, True, False, False, False),
                spring_stiffness=stiffness)
    e = engine(b, sleep_time=0.0)
    period = 2 * math.pi * math.sqrt(mass / stiffness)
    times, z = trace(e, 1.3 * period, lambda e: e.x[0, 2])
    half_periods = np.diff(crossings(times, z, -mass * G / stiffness))
    assert len(half_periods) >= 2
    assert np.all(np.abs(2 * half_periods / period - 1) < 0.02), (2 * half_periods, period)
    assert np.abs(e.x[0, :2]).max() < 1e-6


@pytest.mark.parametrize("substeps_per_frame", [10, 20])
def test_breaking_threshold_is_blenders(substeps_per_frame):
    """A 2 kg block hanging on a FIXED joint breaks when its weight x Bullet's substep (1 / (24 fps x
    substeps per frame)) reaches the threshold: 5 % below it breaks at once, 5 % above it holds."""
    mass = 2.0
    bullet_substep = 1.0 / (24 * substeps_per_frame)
    load = mass * G * bullet_substep
    outcomes = []
    for factor in (0.95, 1.05):
        b = ModelBuilder(R)
        b.bullet_substep = bullet_substep
        body = small_body(b, (0.0, 0.0, -0.2), mass=mass)
        b.add_joint("FIXED", body, -1, (0.0, 0.0, 0.0), breaking_threshold=factor * load)
        e = engine(b, sleep_time=0.0)
        e.step(int(0.3 / e.params.substep))
        outcomes.append((bool(e.joint_broken[0]), e.broken_joint_count, float(e.x[0, 2])))
    (broke_low, count_low, z_low), (broke_high, count_high, z_high) = outcomes
    assert broke_low and count_low == 1 and z_low < -0.5  # it fell
    assert not broke_high and count_high == 0 and abs(z_high + 0.2) < 1e-3


@pytest.mark.parametrize("engine_kind", ["reference", "opencl"])
def test_a_breaking_joint_passes_on_no_more_than_its_threshold(engine_kind):
    """Bullet's rule (btSequentialImpulseConstraintSolver clamps each row's impulse to the breaking
    threshold, and a row held there breaks): a 2 kg block moving at 5 m/s on a FIXED joint to the
    world whose threshold is a tenth of what stopping it takes breaks in the first substep, having
    taken no more than the threshold off its momentum; an unbreakable joint stops it."""
    mass, speed = 2.0, 5.0
    outcomes = []
    for threshold in (0.1 * mass * speed, None):
        b = ModelBuilder(R)
        body = small_body(b, (0.0, 0.0, 0.0), mass=mass, velocity=(speed, 0.0, 0.0))
        b.add_joint("FIXED", body, -1, (0.0, 0.0, 0.0), breaking_threshold=threshold)
        settings = SimulationSettings(gravity=(0.0, 0.0, 0.0), sleep_time=0.0)
        e = (ReferenceEngine if engine_kind == "reference" else OpenCLEngine)(b.finalize(), settings)
        e.step(1)
        assert e.params.substep == pytest.approx(b.bullet_substep)  # the threshold applies as it is
        outcomes.append((int(e.broken_joint_count), float(e.body_state().velocity[0, 0])))
    (broken, kept_speed), (unbroken, stopped_speed) = outcomes
    assert broken == 1 and unbroken == 0
    # the joint took exactly the threshold (0.5 N s of the block's 10) before it broke
    assert kept_speed == pytest.approx(speed - 0.1 * speed, rel=1e-4)
    assert abs(stopped_speed) < 0.05 * speed


def test_motor_reaches_its_speed():
    """A MOTOR to the world turns a free block (no gravity) at its target about the frame's x; a
    small max impulse accelerates it as Bullet's does, as a torque (m_maxMotorForce / fps per substep)."""
    b = ModelBuilder(R)
    body = small_body(b, (0.0, 0.0, 0.0))
    b.add_joint("MOTOR", body, -1, (0.0, 0.0, 0.0), axis=(1.0, 0.0, 0.0), motor_ang_velocity=3.0,
                motor_ang_max_impulse=10.0)
    e = engine(b, gravity=(0.0, 0.0, 0.0), sleep_time=0.0)
    e.step(int(0.1 / e.params.substep))
    # the motor drives b (the world) relative to a: a turns at -3 rad/s
    assert np.allclose(e.body_state().angular_velocity[0], (-3.0, 0.0, 0.0), atol=1e-3)
    b = ModelBuilder(R)
    body = small_body(b, (0.0, 0.0, 0.0))
    cap = 0.02
    b.add_joint("MOTOR", body, -1, (0.0, 0.0, 0.0), axis=(1.0, 0.0, 0.0), motor_ang_velocity=3.0,
                motor_ang_max_impulse=cap)
    e = engine(b, gravity=(0.0, 0.0, 0.0), sleep_time=0.0)
    seconds = 0.2
    e.step(int(round(seconds / e.params.substep)))
    expected = cap * seconds / e.model.body_inertia_local[0][0, 0]
    assert abs(-e.body_state().angular_velocity[0, 0] / expected - 1) < 0.02


@pytest.mark.parametrize("disable", [True, False])
def test_disable_collisions(disable):
    """Two touching blocks glued by a FIXED joint: their contacts only without disable_collisions."""
    b = ModelBuilder(R)
    left = small_body(b, (-2 * R, 0.0, 0.0))
    right = small_body(b, (2 * R, 0.0, 0.0))
    b.add_joint("FIXED", left, right, (0.0, 0.0, 0.0), disable_collisions=disable)
    e = engine(b, gravity=(0.0, 0.0, 0.0), sleep_time=0.0)
    e.step(2)
    between = [r for records in e.records.values() for r in records if r[1] in (left, right)]
    assert (len(between) == 0) == disable


def test_rows_of_blender_types():
    """Each Blender type's rows: what it locks, frees and limits."""
    mode, lower, upper = joint_rows("HINGE", use_limit_ang=(True, True, True), limit_ang_lower=-1.0,
                                    limit_ang_upper=1.0)
    assert list(mode) == [1, 1, 1, 1, 1, 2] and lower[5] == -1.0 and upper[5] == 1.0
    mode, _, _ = joint_rows("GENERIC", use_limit_lin=(True, False, True), limit_lin_lower=(0.0, 0.0, -1.0),
                            limit_lin_upper=(0.0, 0.0, 1.0))
    assert list(mode) == [1, 0, 2, 0, 0, 0]
    assert list(joint_rows("PISTON")[0]) == [0, 1, 1, 0, 1, 1]
    assert list(joint_rows("MOTOR")[0]) == [0] * 6
    with pytest.raises(ValueError):
        joint_rows("ROPE")


def test_glued_cubes_land_together():
    """Two unit cubes glued face to face (FIXED at the shared face's centre, Blender's Connect) dropped
    on the ground: the joint, solved before the contacts in each pass, keeps them together through
    the landing and they rest level (Blender's default disable_collisions: their touching faces make
    no contacts; with them the reference's contact solve takes 12 s here)."""
    b = ModelBuilder(1.0 / 6.0)
    cubes = [b.add_body(cube_particles(1.0), density=1000.0, position=(x, 0.0, 0.6), corner_reach=1.0)
             for x in (-0.5, 0.5)]
    b.add_joint("FIXED", cubes[0], cubes[1], (0.0, 0.0, 0.6))
    b.add_ground_plane(0.0)
    e = engine(b)
    e.step(int(0.4 / e.params.substep))
    assert np.allclose(e.x[:, 2], 0.5, atol=0.01)
    assert abs(e.x[1, 0] - e.x[0, 0] - 1.0) < 1e-3
    assert np.abs(e.joint_coordinates(0)).max() < 1e-3
    assert not e.joint_broken.any()


def test_door_turns_freely_about_its_hinge():
    """A door on a vertical HINGE, its centre 0.3 m out, spun at 2 rad/s: gravity's torque on the
    hinge's locked rows holds it level through more than a full turn (past the z angle's +-pi) and
    leaves its spin about the hinge alone."""
    b = ModelBuilder(R)
    spin = 2.0
    body = small_body(b, (0.3, 0.0, 0.0), counts=(4, 1, 4), velocity=(0.0, 0.3 * spin, 0.0),
                      angular_velocity=(0.0, 0.0, spin))
    b.add_joint("HINGE", body, -1, (0.0, 0.0, 0.0), axis=(0.0, 0.0, 1.0))
    e = engine(b, sleep_time=0.0)
    times, heights = trace(e, 2.0, lambda e: e.x[0, 2])
    assert np.abs(heights).max() < 1e-3
    state = e.body_state()
    assert abs(state.angular_velocity[0, 2] / spin - 1) < 0.01
    assert np.abs(state.angular_velocity[0, :2]).max() < 0.01
    assert abs(np.hypot(e.x[0, 0], e.x[0, 1]) - 0.3) < 1e-3


def test_spring_damping_decays_as_a_damped_oscillator():
    """GENERIC_SPRING damping c: the swing's amplitude decays as exp(-c' t / 2m) within 5 %, c' = c + h k
    (the soft step's spring is implicit: it damps by h k of its own, 0.83 N s/m here)."""
    mass, stiffness, damping = 2.0, 200.0, 2.0
    b = ModelBuilder(R)
    body = small_body(b, (0.0, 0.0, 0.0), mass=mass, velocity=(0.0, 0.0, 1.0))
    b.add_joint("GENERIC_SPRING", body, -1, (0.0, 0.0, 0.0), use_limit_lin=(True, True, False),
                use_limit_ang=(True, True, True), use_spring=(False, False, True, False, False, False),
                spring_stiffness=stiffness, spring_damping=damping)
    e = engine(b, gravity=(0.0, 0.0, 0.0), sleep_time=0.0)
    times, z = trace(e, 1.5, lambda e: e.x[0, 2])
    first = np.abs(z[times < 0.3]).max()
    last = np.abs(z[times > 1.2]).max()
    t_first, t_last = times[np.argmax(np.abs(z) * (times < 0.3))], times[np.argmax(np.abs(z) * (times > 1.2))]
    effective = damping + e.params.substep * stiffness
    assert abs(last / first / math.exp(-effective / (2 * mass) * (t_last - t_first)) - 1) < 0.05


def test_joined_bodies_sleep_and_wake_together():
    """A block hanging on a POINT joint under another hanging from the world: still, both fall asleep
    where they hang; woken one (a push), the other wakes with it."""
    b = ModelBuilder(R)
    upper = small_body(b, (0.0, 0.0, -0.15))
    lower = small_body(b, (0.0, 0.0, -0.45))
    b.add_joint("POINT", upper, -1, (0.0, 0.0, 0.0))
    b.add_joint("POINT", lower, upper, (0.0, 0.0, -0.3))
    e = engine(b)
    e.step(int(0.8 / e.params.substep))
    assert e._is_asleep(e.quiet).all()
    z = e.x[:, 2].copy()
    e.step(int(0.2 / e.params.substep))
    assert np.allclose(e.x[:, 2], z)
    e.quiet[lower] = 0.0  # as a contact would wake it
    e.P[lower] = (1.0, 0.0, 0.0)  # pushed at 0.5 m/s
    e.step(2)
    assert not e._is_asleep(e.quiet).any()
    assert abs(e.body_state().velocity[upper, 0]) > 0.01


def test_a_keyed_enabled_lets_go_and_catches_per_frame():
    """Simulation's joint_enabled_frames (Blender's keyed ``enabled``): a block hanging on a FIXED joint,
    asleep by frame 24, is let go in the step to frame 25 (the sleeper wakes and falls) and caught
    again from frame 28 (its joint pulls it back towards where it hung, as Bullet keeps a
    re-enabled constraint's frames). The Model's ``enabled`` is not touched."""
    from addon.core.simulation import Simulation

    b = ModelBuilder(R)
    body = small_body(b, (0.0, 0.0, -0.2))
    b.add_joint("FIXED", body, -1, (0.0, 0.0, 0.0))
    model = b.finalize()
    frames = 40
    enabled = np.ones((frames + 1, 1), dtype=bool)
    enabled[25:28] = False
    sim = Simulation(model, SimulationSettings(), frame_rate=24.0, backend="reference", joint_enabled_frames=enabled)
    z, asleep = [], []
    for frame in sim.frames(frames):
        z.append(frame.positions[0, 2])
        asleep.append(bool(sim.engine._is_asleep(sim.engine.quiet[0])))
    z = np.array(z)
    assert asleep[24] and abs(z[24] + 0.2) < 1e-3
    fall = z[24] - z[27]
    assert abs(fall - 0.5 * G * (3 / 24) ** 2) < 0.01  # three frames of free fall: 7.7 cm
    assert abs(z[40] + 0.2) < 2e-3  # pulled back up to where it hung
    assert model.joints.enabled.tolist() == [True]
    assert sim.broken_joint_count == 0
    with pytest.raises(ValueError, match="one flag per joint"):
        sim.engine.set_joints_enabled([True, False])
    with pytest.raises(ValueError, match=r"must be \(frames \+ 1, 1\)"):
        Simulation(model, SimulationSettings(), backend="reference", joint_enabled_frames=np.ones(3, dtype=bool))


def test_a_broken_joint_stays_broken_when_enabled_again():
    b = ModelBuilder(R)
    body = small_body(b, (0.0, 0.0, -0.2))
    b.add_joint("FIXED", body, -1, (0.0, 0.0, 0.0), breaking_threshold=0.0)
    e = engine(b, sleep_time=0.0)
    e.step(1)
    assert e.broken_joint_count == 1
    e.set_joints_enabled([False])
    e.set_joints_enabled([True])
    e.step(int(0.2 / e.params.substep))
    assert e.joint_broken[0] and e.broken_joint_count == 1 and e.x[0, 2] < -0.3
