"""Voxel against voxel between bodies (contact_geometry "voxels", core.voxel_pairs): exposed faces,
the box-against-box pair, faces that carry a cube to their edge, bodies started inside each other,
the lists, and what stays particle contacts. The solve's scenes (a joint, half-offset rows, a
column, momentum) are test_coloured_solve.py's and test_manifold.py's."""
from collections import Counter

import math

import numpy as np
import pytest

from addon.core import Material, ModelBuilder, SimulationSettings
from addon.core.opencl_engine import OpenCLEngine
from addon.core.rotations import quaternion_to_matrix
from addon.core.settings import FRICTION_SLOTS, SPECULATIVE_REACH
from addon.core.shapes import box_particles, cube_particles
from addon.core.voxel_pairs import exposed_faces, voxel_pair, voxel_pair_reach
from bench.scenes import cube_pile
from tests.core.helpers import (CUBE_SIDE, RADIUS, add_cube, assert_lists_miss_no_contact, axis_angle_quaternion,
                                engine_for, run_for)

ALL_FACES = 0x3F


def test_exposed_faces_of_a_cube_a_turned_lattice_and_particles_off_any_lattice():
    builder = ModelBuilder(RADIUS)
    add_cube(builder, (0, 0, 0))
    # the same cube's particles given in a frame turned 30 degrees from its lattice
    turn = axis_angle_quaternion((0, 0, 1), np.pi / 6)
    turned = cube_particles(CUBE_SIDE) @ quaternion_to_matrix(turn).T
    builder.add_body(turned, density=1000.0, position=(3, 0, 0), corner_reach=1.0, lattice_orientation=turn)
    builder.add_body(cube_particles(0.8), density=1000.0, position=(-3, 0, 0))  # spacing 0.27: no lattice
    builder.add_static_particles(box_particles((2, 2, 1), 2 * RADIUS))
    model = builder.finalize()
    faces = exposed_faces(model)
    counts = [bin(int(f)).count("1") for f in faces]
    # corners 3 faces, edges 2, face centres 1, the middle none
    expected = sorted([3] * 8 + [2] * 12 + [1] * 6 + [0])
    assert sorted(counts[:27]) == expected and sorted(counts[27:54]) == expected
    np.testing.assert_array_equal(faces[27:54], faces[:27])
    assert np.all(faces[54:81] == ALL_FACES) and np.all(faces[81:] == 0)
    # the particle at the cube's top middle exposes +z only (bit 4)
    top = np.flatnonzero(np.all(np.isclose(model.particle_offset[:27], (0, 0, 2 * RADIUS)), axis=1))
    assert faces[top].tolist() == [1 << 4]


def test_box_against_box_faces_edges_and_order():
    r = RADIUS
    eye = np.eye(3)
    p_i = np.zeros(3)
    # a voxel resting on another, half a voxel off in x: a face contact on half of the face
    p_j = np.array([r, 0.0, 2 * r - 0.01])
    n, depth, point, share = voxel_pair(p_i, eye, ALL_FACES, p_j, eye, ALL_FACES, r)
    np.testing.assert_allclose(n, (0, 0, 1))
    assert depth == pytest.approx(0.01) and share == pytest.approx(0.5)
    np.testing.assert_allclose(point, (0.5 * r, 0.0, r - 0.005))  # between the faces' middles: the overlap's
    # the same pair the other way round: the opposite normal, the same depth, point and share
    n2, depth2, point2, share2 = voxel_pair(p_j, eye, ALL_FACES, p_i, eye, ALL_FACES, r)
    np.testing.assert_allclose(n2, -n)
    assert (depth2, share2) == pytest.approx((depth, share))
    np.testing.assert_allclose(point2, point)
    # apart along one axis only, however close the centres: no contact
    assert voxel_pair(p_i, eye, ALL_FACES, np.array([2.01 * r, 0.0, 0.0]), eye, ALL_FACES, r) is None
    # corner to corner: the spheres would be far apart, the voxels touch
    corner = np.full(3, 2 * r - 0.01) + 0.0
    assert np.linalg.norm(corner) > 2 * r and voxel_pair(p_i, eye, ALL_FACES, corner, eye, ALL_FACES, r) is not None
    # a voxel turned 45 degrees about x and y touching with an edge: along the edge's cross axis
    # or a face axis, depth below the overlap of their centres' spheres
    turned = quaternion_to_matrix(axis_angle_quaternion((1, 1, 0), np.pi / 4))
    contact = voxel_pair(p_i, eye, ALL_FACES, np.array([0.0, 0.0, 2.3 * r]), turned, ALL_FACES, r)
    assert contact is not None and contact[0][2] > 0.7


def test_a_voxel_is_never_pushed_out_through_a_face_it_shares_with_its_own_body():
    """A voxel sunk into the top layer of a body next to the joint between two of its voxels: by
    least overlap the pair would push it sideways (the staircase that nests particle contacts);
    the lower voxel's side face there is inside its body, so the contact is the top face's."""
    r = RADIUS
    eye = np.eye(3)
    lower = np.zeros(3)
    upper = np.array([1.8 * r, 0.0, 1.5 * r])  # overlaps 0.2 r sideways, 0.5 r vertically
    sideways = voxel_pair(lower, eye, ALL_FACES, upper, eye, ALL_FACES, r)
    np.testing.assert_allclose(sideways[0], (1, 0, 0))
    top_only = 1 << 4  # the lower voxel has neighbours in x and y and below
    n, depth, _, share = voxel_pair(lower, eye, top_only, upper, eye, ALL_FACES, r)
    np.testing.assert_allclose(n, (0, 0, 1))
    assert depth == pytest.approx(0.5 * r) and share == pytest.approx(0.1)
    # a voxel exposing no face in the way meets nothing (the body's other voxels carry the contact)
    assert voxel_pair(lower, eye, 0, upper, eye, ALL_FACES, r) is None


def test_a_cube_on_a_cube_holds_out_to_where_its_centre_passes_the_edge():
    """Voxel faces carry a cube over an edge: 0.4 of its side out it stays, 0.6 out it tips off
    (with particle contacts it slides off the lower cube's rounded edge far sooner)."""
    def top_after(offset):
        builder = ModelBuilder(RADIUS)
        add_cube(builder, (0.0, 0.0, 0.5))
        add_cube(builder, (offset, 0.0, 1.5))
        builder.add_ground_plane(0.0)
        return run_for(engine_for(builder), 2.0).position[1]
    held = top_after(0.4)
    assert abs(held[2] - 1.5) < 2e-3 and abs(held[0] - 0.4) < 2e-3
    assert top_after(0.6)[2] < 1.0


@pytest.mark.parametrize("overlap", [0.06, 0.11])
def test_bodies_started_inside_each_other_part_without_being_thrown(overlap):
    """A cube started 6 or 11 cm inside another (a third or two thirds of a particle radius): stiff
    springs alone threw it 2 or 9.5 m up at 6-13 m/s. The solve pushes it out at most at
    solve_push_speed, and it settles on the face."""
    builder = ModelBuilder(RADIUS)
    material = Material(friction=0.5, restitution=0.0)
    add_cube(builder, (0.0, 0.0, 0.51), material=material)
    add_cube(builder, (RADIUS, RADIUS, 1.51 - overlap), material=material)
    builder.add_ground_plane(0.0, material=material)
    engine = engine_for(builder, sleep_speed=0.0)
    highest = fastest = 0.0
    for _ in range(400):
        state = run_for(engine, 0.005)
        highest = max(highest, state.position[1, 2])
        fastest = max(fastest, np.linalg.norm(state.velocity[1]))
    assert fastest < 2.0 and highest < 1.5 + 0.15, (fastest, highest)
    assert abs(state.position[1, 2] - 1.5) < 2e-3 and np.linalg.norm(state.velocity[1]) < 1e-2


# The brute force below tries each pair as found and in four variants a hair off (j's centre nudged
# by 2e-5 of the distance, i's voxel turned 2e-5 rad about x and y: at most 4e-5 rad). A pair that
# one of the two voxels' face axes parts by this much beyond the margin, after the speculative
# growth, stays parted in every variant: they move that axis's overlap by under 1e-4 m here
# (voxels under 0.75 m apart, r = 1/6 m) and its closing speed by 4e-5 of the relative speed, which
# the growth takes over the speculative time (the per-pair allowance).
CLEARLY_APART = 1e-3  # m


def face_axis_gaps(r, margin, horizon, p_i, frame_i, p_j, frame_j, dv):
    """(P,): for P pairs of voxels (centres p, lattice axes the columns of frame, i's centre moving at
    dv relative to j's), how far beyond the margin the face axis of either voxel that parts them most
    does so after the speculative growth, reckoned as voxel_pair's separating axis test does
    (negative: no face axis parts them)."""
    d = p_j - p_i
    frames_dot = np.abs(np.einsum("pki,pkj->pij", frame_i, frame_j))
    along = np.concatenate([np.einsum("pki,pk->pi", frame_i, d), np.einsum("pkj,pk->pj", frame_j, d)], axis=1)
    moving = np.concatenate([np.einsum("pki,pk->pi", frame_i, dv), np.einsum("pkj,pk->pj", frame_j, dv)], axis=1)
    reach = np.concatenate([r + r * frames_dot.sum(axis=2), r * frames_dot.sum(axis=1) + r], axis=1)
    closing = np.where(along >= 0.0, moving, -moving)
    swept = reach - np.abs(along) + np.minimum(np.maximum(closing, 0.0) * horizon, SPECULATIVE_REACH * r)
    return (-margin - swept).max(axis=1)


def expected_voxel_contacts(engine, state, positions, faces):
    """(i, j) pairs of two bodies' whole voxels that are contacts of the solve (centres up to
    voxel_pair_reach of the speculative margin apart, the boxes up to the margin apart and what they
    close until the next detection), i on the lower body (which records the pair), by brute force in
    float64 from the kernels' poses, velocities and particle positions at a detection; and those
    within float rounding of either threshold."""
    model, settings = engine.model, engine.settings
    r = model.particle_radius
    body = model.particle_body
    lattice = quaternion_to_matrix(model.body_lattice_orientation)
    frames = (quaternion_to_matrix(state.orientation) @ lattice).reshape(-1, 3, 3)
    dynamic = model.dynamic_particle_count
    centre_velocity = state.velocity[body[:dynamic]] + np.cross(state.angular_velocity[body[:dynamic]],
                                                                positions[:dynamic] - state.position[body[:dynamic]])
    horizon = engine.params.speculative_time

    def growth(closing):
        return min(max(closing, 0.0) * horizon, SPECULATIVE_REACH * r)

    margin = settings.speculative_margin * r
    reach = voxel_pair_reach(settings.speculative_margin) * r
    candidates, distance = [], {}
    for i in range(dynamic):
        d = np.linalg.norm(positions[:dynamic] - positions[i], axis=1)
        for j in np.flatnonzero((d < reach + 1e-4) & (body[:dynamic] > body[i])).tolist():
            candidates.append((i, j))
            distance[i, j] = d[j]
    if not candidates:
        return set(), set()
    first, second = np.array(candidates).T
    dv = centre_velocity[first] - centre_velocity[second]
    gaps = face_axis_gaps(r, margin, horizon, positions[first], frames[body[first]], positions[second],
                          frames[body[second]], dv)
    apart = gaps > CLEARLY_APART + 4e-5 * np.linalg.norm(dv, axis=1) * horizon

    def spin_of(angle):
        c, s_ = math.cos(angle), math.sin(angle)
        return np.array([[1.0, 0.0, 0.0], [0.0, c, -s_], [0.0, s_, c]]) @ np.array(
            [[c, 0.0, s_], [0.0, 1.0, 0.0], [-s_, 0.0, c]])
    spins = {angle: spin_of(angle) for angle in (2e-5, -2e-5)}

    expected, borderline = set(), set()
    for (i, j), parted in zip(candidates, apart.tolist()):
        if parted:
            continue  # no variant touches (CLEARLY_APART): neither expected nor borderline

        def contact(shift=0.0):
            return voxel_pair(positions[i], frames[body[i]], faces[i], positions[j] + shift, frames[body[j]],
                              faces[j], r, margin, centre_velocity[i] - centre_velocity[j], growth)

        # two face axes as deep as each other within rounding (voxels meeting near their
        # corners): the shallower wins, and a hair decides which, whose shares differ (one
        # face 0, the other 0.0014 in a pile at substep 180): i's voxel turned a hair either way
        def turned(angle):
            return voxel_pair(positions[i], spins[angle] @ frames[body[i]], faces[i], positions[j], frames[body[j]],
                              faces[j], r, margin, centre_velocity[i] - centre_velocity[j], growth) is not None
        found = contact()
        # a hair's shift either way decides it: float32 against float64
        shift = 2e-5 * (positions[j] - positions[i])
        variants = (lambda: contact(-1 * shift) is not None, lambda: contact(1 * shift) is not None,
                    lambda: turned(2e-5), lambda: turned(-2e-5))
        # each variant is tried only until the pair's verdict is known
        if found is not None and found[3] > 1e-4 and distance[i, j] < reach - 1e-4:
            (expected if all(variant() for variant in variants) else borderline).add((i, j))
        elif found is not None or any(variant() for variant in variants):
            borderline.add((i, j))
    return expected, borderline


def test_no_voxel_contact_is_missed_between_rebuilds():
    """A pile forming, at every detection (every 4 substeps) against brute force: the lists (a
    diameter of skin, rebuilt after 0.12 of it) hold every pair up to two voxels' corner to corner
    reach and the speculative margin. Sleeping off, so that each pair is the lower body's."""
    engine = OpenCLEngine(cube_pile(27, spacing=1.1), SimulationSettings(sleep_speed=0.0))
    assert engine.settings.substeps_per_detection == 4  # a check at every detection
    faces = exposed_faces(engine.model)

    def at_detection(state, positions):
        expected, borderline = expected_voxel_contacts(engine, state, positions, faces)
        # A particle keeps at most FRICTION_SLOTS contacts (which ones follows the kernels' search
        # order; test_friction_slots.py): with every slot taken, the others are left out by the
        # slots, not by the lists (here 15 pairs of 8 particles within the speculative margin)
        slots_taken = Counter(i for i, _ in engine.contact_keys())
        full = {(i, j) for i, j in expected if slots_taken[i] >= FRICTION_SLOTS}
        return expected - full, borderline | full

    with_contacts = assert_lists_miss_no_contact(engine, 320, at_detection, lambda engine: engine.contact_pairs())
    assert with_contacts >= 30 and engine.rebuilds > 3


def test_sphere_like_voxels_keep_particle_contacts():
    """Voxels whose corners are not solid (a converted sphere's surface, corner reach 0) meet as
    the particles' spheres: two one-voxel bodies corner to corner, 0.95 of a diameter apart along
    each axis, touch as whole voxels and not as spheres (3.3 radii apart)."""
    def touching(corner_reach):
        builder = ModelBuilder(RADIUS)
        for position in ((0, 0, 0), (0.95 * 2 * RADIUS,) * 3):
            builder.add_body(box_particles((1, 1, 1), 2 * RADIUS), density=1000.0, position=position,
                             corner_reach=corner_reach)
        engine = OpenCLEngine(builder.finalize(), SimulationSettings(gravity=(0, 0, 0)))
        engine.step(engine.settings.substeps_per_detection)  # the detection's keys are read back after it
        return len(engine.contact_pairs()) > 0
    assert touching(1.0)
    assert not touching(0.0)
