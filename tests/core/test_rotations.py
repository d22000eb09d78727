"""addon.core.rotations: the one home of quaternions and poses, checked against independent forms."""
import numpy as np

from addon.core import rotations


def random_quaternions(rng, count):
    q = rng.normal(size=(count, 4))
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def axis_angle_matrix(axis, angle):
    """Rodrigues' formula, independent of the quaternion code."""
    k = np.asarray(axis, dtype=float) / np.linalg.norm(axis)
    cross = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + np.sin(angle) * cross + (1 - np.cos(angle)) * cross @ cross


def test_axis_angle_quaternion_turns_as_rodrigues_says():
    rng = np.random.default_rng(0)
    for _ in range(20):
        axis, angle = rng.normal(size=3), rng.uniform(-np.pi, np.pi)
        m = rotations.quaternion_to_matrix(rotations.axis_angle_quaternions(axis, angle))
        assert np.allclose(m, axis_angle_matrix(axis, angle), atol=1e-12)


def test_matrix_and_quaternion_round_trip_on_every_branch():
    rng = np.random.default_rng(1)
    q = random_quaternions(rng, 200)
    # near-half turns about each axis take the branches other than the trace one
    q[:3] = rotations.axis_angle_quaternions(np.eye(3), np.full(3, np.pi - 1e-3))
    back = rotations.matrix_quaternions(rotations.quaternion_to_matrix(q))
    assert np.allclose(np.abs(np.einsum("ni,ni->n", back, q)), 1.0, atol=1e-12)
    assert rotations.matrix_quaternions(np.eye(3)).shape == (4,)


def test_product_is_the_matrix_product():
    rng = np.random.default_rng(2)
    a, b = random_quaternions(rng, 50), random_quaternions(rng, 50)
    product = rotations.quaternion_multiply(a, b)
    assert np.allclose(rotations.quaternion_to_matrix(product),
                       rotations.quaternion_to_matrix(a) @ rotations.quaternion_to_matrix(b), atol=1e-12)
    assert np.allclose(rotations.quaternion_multiply(a[0], b[0]), product[0])


def test_pose_matrices_put_the_centre_of_mass_at_the_position_and_turn_the_object():
    rng = np.random.default_rng(3)
    bodies, frames = 4, 3
    start = np.tile(np.eye(4), (bodies, 1, 1))
    start[:, :3, :3] = rng.normal(size=(bodies, 3, 3))
    start[:, :3, 3] = rng.normal(size=(bodies, 3))
    com = rng.normal(size=(bodies, 3))
    x = rng.normal(size=(frames, bodies, 3))
    q = random_quaternions(rng, frames * bodies).reshape(frames, bodies, 4)
    world = rotations.pose_matrices(x, 2.5 * q, com, start)  # quaternions are normalised first
    assert world.shape == (frames, bodies, 4, 4)
    for f in range(frames):
        one_frame = rotations.pose_matrices(x[f], q[f], com, start)
        assert np.allclose(one_frame, world[f])
        for b in range(bodies):
            # the point that was the centre of mass at the start goes to x
            com_in_object = np.linalg.solve(start[b], np.append(com[b], 1.0))
            assert np.allclose((world[f, b] @ com_in_object)[:3], x[f, b])
            # and the object turned by R(q) relative to its start
            turned = world[f, b, :3, :3] @ np.linalg.inv(start[b, :3, :3])
            assert np.allclose(turned, rotations.quaternion_to_matrix(q[f, b]))
