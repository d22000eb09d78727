"""Contacts between bodies on their signed-distance fields (contact_geometry "sdf", core.body_sdf):
faces meet flat, the fields are shared by equal shapes, no contact is missed between rebuilds, and
the pairs' shares keep momentum."""
import numpy as np
import pytest

from addon.core import ModelBuilder, SimulationSettings
from addon.core.body_sdf import PAIR_REACH, build_body_fields
from addon.core.rotations import quaternion_to_matrix
from addon.core.opencl_engine import OpenCLEngine
from addon.core.shapes import box_particles, cube_particles
from bench.scenes import cube_pile
from tests.core.helpers import (RADIUS, assert_lists_miss_no_contact, engine_for, glancing_cubes,
                                half_offset_row_errors, joint_sink)
from tests.core.test_conservation import momentum_changes
from tests.known_failures import KnownFailure, known_failure
from tests.skip_reasons import XFAIL_HALF_OFFSET_ROWS_SINK


def test_equal_voxel_sets_share_one_field_and_faces_are_exact():
    """The 64 cubes of a pile, each on its own turned lattice, share one field; a box is another;
    particles on no lattice of one diameter get none. On a face the field is the distance to it."""
    model = cube_pile(64)
    fields = build_body_fields(model)
    assert fields.shape_count == 1 and np.all(fields.body_shape == 0)
    # above the face (inside, only well away from the other faces: the field has kinks there)
    for height, laterals in ((0.5 + 0.3 * RADIUS, ((0.0, 0.0), (0.21, -0.13), (0.45, 0.4))),
                             (0.5 + 0.77 * RADIUS, ((0.0, 0.0), (0.21, -0.13), (0.45, 0.4))),
                             (0.5 - 0.2 * RADIUS, ((0.0, 0.0), (0.05, -0.1)))):
        for lateral in laterals:
            phi, gradient = fields.sample(0, np.array([*lateral, height]))
            assert abs(phi - (height - 0.5)) < 1e-12
            np.testing.assert_allclose(gradient, (0, 0, 1), atol=1e-12)

    builder = ModelBuilder(RADIUS)
    builder.add_body(cube_particles(1.0), density=1000.0)
    builder.add_body(box_particles((3, 2, 1), 2 * RADIUS), density=1000.0, position=(3, 0, 0))
    builder.add_body(cube_particles(1.0), density=1000.0, position=(-3, 0, 0), orientation=(0.9, 0.1, 0.3, 0.2))
    builder.add_body(cube_particles(0.8), density=1000.0, position=(0, 3, 0))  # spacing 0.27: no lattice
    fields = build_body_fields(builder.finalize())
    cube, box, turned_cube, off_lattice = fields.body_shape.tolist()
    assert fields.shape_count == 2 and cube == turned_cube != box and off_lattice == -1


def test_a_cube_across_the_joint_of_two_sinks_less_than_a_millimetre():
    """Issue 22: a cube resting across the joint of two sinks < 1 mm below its ideal height (the
    springs under one cube's weight give 0.83 mm). With particle contacts its particles settle
    into the hollows over the joint: 45 mm."""
    assert joint_sink(contact_geometry="sdf") < 1e-3
    assert joint_sink(contact_geometry="particles") > 0.04


# The top row's error now: 11.527 / 11.522 mm between PoCL thread counts, body lanes and an H200, +- 0.1 mm.
HALF_OFFSET_TOP_ROW_SINKS = (0.01152, 0.0001)


@pytest.mark.xfail(strict=True, raises=KnownFailure, reason=XFAIL_HALF_OFFSET_ROWS_SINK)
def test_five_half_offset_rows_keep_their_heights_within_a_centimetre():
    errors = half_offset_row_errors(3.0, contact_geometry="sdf")
    with known_failure(largest_error=(max(errors), *HALF_OFFSET_TOP_ROW_SINKS)):
        assert max(errors) < 0.01, errors


@pytest.mark.parametrize("friction", [0.0, 0.6])
def test_frictional_collision_on_fields_keeps_linear_and_angular_momentum(friction):
    """A spinning cube glancing off a turned one: each pair's shares are equal and opposite at one
    point, so momentum is kept to float rounding (the tolerance is issue 22's)."""
    engine = engine_for(glancing_cubes(friction), gravity=(0, 0, 0), contact_geometry="sdf")
    linear, angular = momentum_changes(engine, 1.0)
    assert engine.body_state().velocity[0, 0] < 2.0  # they did collide
    assert linear < 1e-5
    assert angular < 1e-3


def expected_surface_contacts(engine, state, positions):
    """(particle, body) pairs whose particle's centre lies within a radius of the body's surface
    and within PAIR_REACH radii of one of its particles, by brute force in float64 from the
    kernels' poses ``state`` and particle ``positions``; and those within float rounding of either
    limit."""
    model = engine.model
    fields = engine.body_fields
    r = model.particle_radius
    body = model.particle_body
    frames = (quaternion_to_matrix(state.orientation) @ quaternion_to_matrix(fields.body_frame)).reshape(-1, 3, 3)
    expected, borderline = set(), set()
    reach = PAIR_REACH * r
    for i in range(model.particle_count):
        d = np.linalg.norm(positions - positions[i], axis=1)
        for b in np.unique(body[(d < reach + 1e-4) & (body != body[i])]):
            sample = fields.sample(fields.body_shape[b], frames[b].T @ (positions[i] - state.position[b]))
            if sample is None:
                continue
            nearest = d[body == b].min()
            key = (i, int(b))
            if abs(sample[0] - r) < 1e-4 or abs(nearest - reach) < 1e-4:
                borderline.add(key)
            elif sample[0] < r and nearest < reach:
                expected.add(key)
    return expected, borderline


def test_no_surface_contact_is_missed_between_rebuilds():
    """A pile forming, every fourth substep checked against brute force: the lists (a diameter of
    skin, rebuilt after 0.18 of it) hold every pair within PAIR_REACH radii."""
    engine = OpenCLEngine(cube_pile(27, spacing=1.1), SimulationSettings(contact_geometry="sdf"))
    # the friction history shows at most FRICTION_SLOTS contacts of a particle: none has more here
    with_contacts = assert_lists_miss_no_contact(
        engine, 240, lambda state, positions: expected_surface_contacts(engine, state, positions),
        lambda engine: engine.surface_contacts())
    assert with_contacts >= 30 and engine.rebuilds > 3
