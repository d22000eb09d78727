"""Static triangle-mesh colliders: agreement with the reference, flat ground, shared edges, a moving paddle."""
import numpy as np

from addon.core import Material, ModelBuilder, SimulationSettings
from addon.core.colliders import ColliderMotion
from addon.core.opencl_engine import OpenCLEngine
from addon.core.reference import ReferenceEngine
from addon.core.shapes import cube_particles
from addon.core.simulation import Simulation
from addon.core.voxel_corners import collider_reach
from tests.core.helpers import CUBE_SIDE, RADIUS, add_cube, axis_angle_quaternion, engine_for, run_for


def grid_mesh(size, cells, z=0.0, jitter=0.0, seed=0):
    """A square of size x size metres at height z, cells x cells quads split into triangles."""
    rng = np.random.default_rng(seed)
    xs = np.linspace(-size / 2, size / 2, cells + 1)
    gx, gy = np.meshgrid(xs, xs, indexing="ij")
    vertices = np.stack([gx.ravel(), gy.ravel(), np.full(gx.size, z) + rng.uniform(-jitter, jitter, gx.size)], 1)
    tris = []
    for i in range(cells):
        for j in range(cells):
            a, b, c, d = i * (cells + 1) + j, (i + 1) * (cells + 1) + j, (i + 1) * (cells + 1) + j + 1, i * (cells + 1) + j + 1
            tris += [(a, b, c), (a, c, d)]
    return vertices, np.array(tris)


def test_kernels_match_reference_with_static_and_moving_triangles():
    rng = np.random.default_rng(2)
    builder = ModelBuilder(1 / 6)
    for k in range(8):
        builder.add_body(cube_particles(1.0), density=800, position=(rng.uniform(-1.5, 1.5), rng.uniform(-1.5, 1.5), 0.45 + 0.9 * k),
                         orientation=rng.normal(size=4), velocity=rng.normal(size=3), material=Material(friction=0.6, restitution=0.3),
                         corner_reach=0.0 if k % 3 == 1 else 1.0)  # spheres and voxels against the faces
    vertices, triangles = grid_mesh(6.0, 12, jitter=0.05)  # bumpy ground of small triangles: binned
    builder.add_static_mesh(vertices, triangles)
    big_v, big_t = grid_mesh(400.0, 1, z=-0.3)  # two huge triangles: the "large" list
    builder.add_static_mesh(big_v, big_t)
    paddle_v = np.array([[-2.0, -1.0, 0.0], [-2.0, 1.0, 0.0], [-2.0, 1.0, 1.5], [-2.0, -1.0, 1.5]])
    frames = np.array([paddle_v + [0.05 * f, 0, 0] for f in range(5)])  # moves +x at 1.2 m/s (24 fps)
    builder.add_static_mesh(paddle_v, [[0, 1, 2], [0, 2, 3]], frames=frames)
    model = builder.finalize()
    motion = ColliderMotion(model, collider_reach(model))
    assert motion.is_large.sum() == 2 and len(motion.grid.items) > model.triangle_count - 4
    settings = SimulationSettings(substep=1 / 24 / 25)
    reference, kernels = ReferenceEngine(model, settings), OpenCLEngine(model, settings)
    triangle_contacts = 0
    for frame in range(4):
        for engine in (reference, kernels):
            engine.set_collider_frame(frame, 1 / 24)
        for _ in range(5):
            for engine in (reference, kernels):
                engine.step(5)
            triangle_contacts += sum(1 for _, key in kernels.contact_keys() if key <= -2 - model.plane_count)
        expected, got = reference.body_state(), kernels.body_state()
        # about 5x the largest differences measured on PoCL (1.1e-5 m, 1.5e-4 m/s)
        np.testing.assert_allclose(got.position, expected.position, atol=5e-5)
        np.testing.assert_allclose(got.velocity, expected.velocity, atol=8e-4)
    assert triangle_contacts > 10


def test_cube_rests_on_a_triangulated_floor_like_on_a_plane():
    """Particles over shared edges and vertices are pushed once, not twice: no bumps, no drift."""
    results = []
    for floor in ("plane", "mesh"):
        builder = ModelBuilder(RADIUS)
        # placed so bottom particles sit right over the mesh's shared diagonals and vertices
        add_cube(builder, (0.0, 0.0, CUBE_SIDE / 2 + 0.01), orientation=axis_angle_quaternion((0, 0, 1), 0.3))
        if floor == "plane":
            builder.add_ground_plane(0.0)
        else:
            builder.add_static_mesh(*grid_mesh(4.0, 12))
        engine = engine_for(builder, sleep_speed=0.0)  # no sleeping: a bump or a drift would show
        run_for(engine, 1.5)
        results.append(engine.body_state())
    plane, mesh = results
    np.testing.assert_allclose(mesh.position, plane.position, atol=2e-4)
    assert np.linalg.norm(mesh.velocity) < 1e-3
    assert abs(mesh.orientation[0] @ plane.orientation[0]) > 1 - 1e-6


def test_moving_paddle_pushes_a_body():
    builder = ModelBuilder(RADIUS)
    material = Material(friction=0.3)
    add_cube(builder, (0.0, 0.0, CUBE_SIDE / 2), material=material)
    builder.add_ground_plane(0.0, material=material)
    frames_count, fps, speed = 49, 24.0, 1.5
    paddle = np.array([[-1.0, -1.0, 0.05], [-1.0, 1.0, 0.05], [-1.0, 1.0, 1.2], [-1.0, -1.0, 1.2]])
    frames = np.array([paddle + [min(speed * f / fps, 1.5), 0, 0] for f in range(frames_count)])  # stops at x = 0.5
    builder.add_static_mesh(paddle, [[0, 1, 2], [0, 2, 3]], frames=frames, material=material)
    simulation = Simulation(builder.finalize(), SimulationSettings(), frame_rate=fps)
    path = np.array([frame.positions[0] for frame in simulation.frames(frames_count - 1)])
    # the paddle's face reaches x = 0.5 - ... : the cube (half side 0.5) ends just ahead of it
    assert path[-1, 0] > 0.9, path[-1]
    assert abs(path[-1, 1]) < 0.05 and abs(path[-1, 2] - 0.5) < 0.02
    # pushed, not launched: never faster than the paddle by much
    speeds = np.linalg.norm(np.diff(path, axis=0), axis=1) * fps
    assert speeds.max() < 2.0 * speed
