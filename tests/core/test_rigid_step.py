"""The rigid step (docs/experiments/rigid-step.md), Rigid Voxels' default: contacts without springs,
speculative contacts (speculative_margin), detection once every few substeps
(substeps_per_detection) and each pair's records reduced to manifolds (core.manifold): the kernels
against the NumPy reference, the settings refused, and the small scenes' physics at the defaults."""
import numpy as np
import pytest

from addon.core import Material, ModelBuilder, SimulationSettings
from addon.core.opencl_engine import OpenCLEngine
from addon.core.rotations import axis_angle_quaternions, quaternion_to_matrix
from addon.core.shapes import box_particles, cube_particles
from addon.core.manifold import MANIFOLD_POINTS
from bench.contact_figures import ball, fast_drop
from tests.core.helpers import assert_kernels_follow_the_solve_reference


def tumbling_bodies(spacing=1.3, seed=15):
    """12 bodies of three materials thrown at each other over a ground and a tilted plane: cubes and
    3 x 2 x 1 boxes as spheres, whole voxels (some on a turned lattice) and half voxels. 1.3 m apart
    no particle has more contacts than its FRICTION_SLOTS within the speculative margin, so both
    engines keep the same ones (beyond, which are kept follows each engine's search order). Seed
    15 puts no contact within float rounding of a threshold in 60 substeps, with one relax pass or
    two (with 11 a plane contact's gap lay 3 um from the speculative threshold at substep 56: the
    kernels' float32 and the reference's float64 chose differently, as they may at any threshold;
    of seeds 12-17, 13, 14 and 17 meet one with either, 12 with two)."""
    rng = np.random.default_rng(seed)
    builder = ModelBuilder(particle_radius=1 / 6)
    materials = [Material(friction=0.2, restitution=0.6), Material(friction=0.8, restitution=0.1),
                 Material(friction=0.5, restitution=0.3)]
    for k in range(12):
        column_index, layer = k % 4, k // 4
        shape = cube_particles(1.0) if k % 3 else box_particles((3, 2, 1), 1 / 3)
        builder.add_body(
            shape, density=500.0 + 100 * k,
            position=(spacing * column_index + rng.uniform(-0.05, 0.05), rng.uniform(-0.05, 0.05),
                      0.6 + spacing * layer),
            orientation=rng.normal(size=4), velocity=rng.normal(size=3), angular_velocity=rng.normal(size=3) * 2,
            material=materials[k % 3], corner_reach=(0.0, 1.0, 1.0, 0.5)[k % 4],
            lattice_orientation=rng.normal(size=4) if k % 4 == 2 else (1, 0, 0, 0))
    builder.add_ground_plane(0.0, material=materials[1])
    builder.add_ground_plane(normal=(1, 0, 0.2), point=(-0.8, 0, 0), material=materials[0])
    return builder.finalize()


@pytest.mark.parametrize("hertz_fraction", [0.0, None], ids=["rigid", "soft"])
@pytest.mark.parametrize("substeps_per_detection", [1, 4])
def test_kernels_match_the_reference(substeps_per_detection, hertz_fraction):
    """Every contact (voxel pairs, spheres, planes) is a record of the solve, up to the speculative
    margin apart; detected every 4 substeps, each record's depth in between follows its bodies'
    motion. 60 substeps: the same colours and the same manifold points kept per pair at every
    detection, and the states as close as the solve's other agreement tests ask."""
    settings = SimulationSettings(substeps_per_detection=substeps_per_detection, solve_hertz_fraction=hertz_fraction)
    model = tumbling_bodies()

    def same_colours_and_points(reference, kernels):
        colours = [len(reference.pairs.of_colour(c)) for c in range(reference.pairs.colour_count)]
        assert list(kernels.colour_pair_counts) == colours
        counts = kernels._read(kernels.arguments["pair_record_count"], (kernels.body_count * kernels.max_pairs,),
                               np.int32)
        assert [int(counts[g]) for g in reference.pairs.pair_slot] == [len(r) for r in reference.pair_records]

    reference, solved = assert_kernels_follow_the_solve_reference(model, settings, 60, same_colours_and_points)
    assert solved > 0.0
    assert np.abs(reference.body_state().position - model.body_position).max() > 0.2
    # a manifold per normal direction, of at most MANIFOLD_POINTS points (two directions here at most)
    assert max(len(r) for r in reference.pair_records) <= 2 * MANIFOLD_POINTS


def test_rigid_step_settings_are_refused_where_they_cannot_work():
    with pytest.raises(ValueError, match="Particles \\(fast\\) contacts are springs: .* 4 substeps per detection"):
        SimulationSettings(contact_geometry="particles", substeps_per_detection=4)
    with pytest.raises(ValueError, match="substeps per detection must be a whole number >= 1, got 0"):
        SimulationSettings(substeps_per_detection=0)
    with pytest.raises(ValueError, match="substeps per detection must be a whole number from 0 to 64"):
        SimulationSettings(substeps_per_detection=1.5)
    with pytest.raises(ValueError, match="speculative margin"):
        SimulationSettings(speculative_margin=1.5)
    assert SimulationSettings().speculative_margin > 0.0
    assert SimulationSettings(contact_geometry="particles").speculative_margin == 0.0


def test_a_fast_cube_meets_the_ground_before_it_arrives():
    """Thrown down at 10 and 24 m/s (0.17 and 0.4 m per detection), a unit cube's lowest corner goes
    no deeper than 1 % of its side into the ground: its speculative margin grows with its closing
    speed (SPECULATIVE_REACH). With the margin alone it went 8.8 and 20.6 cm deep."""
    for key, figures in fast_drop({}, supports=("ground",)).items():
        assert figures["deepest_m"] < 0.01, (key, figures)
        assert abs(figures["end_gap_m"]) < 1e-3, (key, figures)


def deepest_corner_of_a_cube_landing(orientation, speed, spin, ground="plane"):
    """A unit cube thrown down at ``speed`` m/s turning at ``spin`` rad/s about y, landing on a face,
    an edge (turned 45 degrees about x) or a corner (its diagonal vertical) on the ground plane or a
    ground of two triangles: its lowest corner's deepest point under the ground over 1 s (m,
    positive below)."""
    if orientation == "edge":
        q = axis_angle_quaternions(np.array([[1.0, 0.0, 0.0]]), np.array([np.pi / 4]))[0]
    elif orientation == "corner":
        q = axis_angle_quaternions(np.cross([1.0, 1.0, 1.0], [0.0, 0.0, -1.0])[None],
                                   np.array([np.arccos(-1.0 / np.sqrt(3.0))]))[0]
    else:
        q = np.array([1.0, 0.0, 0.0, 0.0])
    material = Material(friction=0.5, restitution=0.2)
    builder = ModelBuilder(1 / 6)
    points = cube_particles(1.0) @ quaternion_to_matrix(q).T + np.array([0.0, 0.0, 1.0])
    builder.add_bodies(points[None], masses=np.array([1000.0]), materials=[material], corner_reach=1.0,
                       lattice_orientations=q[None])
    if ground == "plane":
        builder.add_ground_plane(0.0, material=material)
    else:
        corners = np.array([[-50.0, -50.0, 0.0], [50.0, -50.0, 0.0], [50.0, 50.0, 0.0], [-50.0, 50.0, 0.0]])
        builder.add_static_mesh(corners, np.array([[0, 1, 2], [0, 2, 3]]), material=material)
    model = builder.finalize()
    model.body_velocity[0] = (0.0, 0.0, -speed)
    model.body_angular_velocity[0] = (0.0, spin, 0.0)
    engine = OpenCLEngine(model, SimulationSettings())
    corners = np.array([(x, y, z) for x in (-0.5, 0.5) for y in (-0.5, 0.5) for z in (-0.5, 0.5)])
    deepest = 0.0
    for _ in range(240):
        engine.step(1)
        state = engine.body_state()
        rot = quaternion_to_matrix(state.orientation[0]) @ quaternion_to_matrix(model.body_lattice_orientation[0])
        deepest = max(deepest, -(state.position[0, 2] + (corners @ rot.T)[:, 2]).min())
    return deepest


@pytest.mark.parametrize("ground", ["plane", "mesh"])
@pytest.mark.parametrize("orientation", ["face", "edge", "corner"])
def test_a_cube_landing_on_an_edge_or_a_corner_meets_the_ground_before_it_arrives(orientation, ground):
    """Thrown down at 10 and 20 m/s, landing on a face, an edge or a corner, a cube goes no deeper
    than 1 % of its side (PoCL: at most 0.86 cm), and turning at 14 rad/s as well (a tumbling cube
    of a 10,000-cube avalanche) at 10 m/s no deeper than 1.5 cm (1.29) and at 20 m/s 3 cm (2.76).
    A plane's speculative contacts reach as far as the voxel closes by the next detection, and a
    manifold keeps the points deepest by then: with the reach capped at 1.5 radii and the points
    ranked by their depth at the detection, the edge went 18.8 cm deep at 20 m/s and 14.5 cm at
    10 m/s turning. A mesh ground's triangles reach COLLIDER_SPECULATIVE_REACH radii (their lookup's
    bound): at 1.5 the edge went 4.2 cm deep at 20 m/s and 13.8 cm turning; at 4, as on the plane."""
    for speed in (10.0, 20.0):
        assert deepest_corner_of_a_cube_landing(orientation, speed, 0.0, ground) < 0.01, speed
    assert deepest_corner_of_a_cube_landing(orientation, 10.0, 14.0, ground) < 0.015
    assert deepest_corner_of_a_cube_landing(orientation, 20.0, 14.0, ground) < 0.03


@pytest.mark.parametrize("start", [8, 10, 12])
def test_a_cube_tumbling_onto_the_ground_keeps_its_corners_out(start):
    """A cube falling at 6.6 m/s, sliding at 3.3 m/s and spinning at 10.8 rad/s about a random axis
    (the 100,000-cube pile's deepest corner at 5 s was such a landing) goes no deeper than 2 % of
    its side. A plane record holds the point a turning voxel touches at the next detection
    (30_colliders.cl voxel_support_turned); holding the voxel's lowest point at the detection, a
    box turning 0.15-0.18 rad a step changed corners within it and these three went 3.1, 4.3 and
    3.3 cm deep (now 1.5, 0.8 and 0.9 on PoCL)."""
    rng = np.random.default_rng(1)
    for _ in range(start + 1):
        q = rng.normal(size=4)
        w = rng.normal(size=3)
    builder = ModelBuilder(1 / 6)
    material = Material(friction=0.5, restitution=0.2)
    builder.add_body(cube_particles(1.0), density=1000.0, position=(0.0, 0.0, 1.3), velocity=(3.3, 0.0, -6.6),
                     angular_velocity=10.8 * w / np.linalg.norm(w), orientation=q / np.linalg.norm(q),
                     material=material, corner_reach=1.0)
    builder.add_ground_plane(0.0, material=material)
    model = builder.finalize()
    engine = OpenCLEngine(model, SimulationSettings())
    corners = np.array([(x, y, z) for x in (-0.5, 0.5) for y in (-0.5, 0.5) for z in (-0.5, 0.5)])
    deepest = 0.0
    for _ in range(int(0.6 / engine.params.substep)):
        engine.step(1)
        state = engine.body_state()
        rot = quaternion_to_matrix(state.orientation[0]) @ quaternion_to_matrix(model.body_lattice_orientation[0])
        deepest = max(deepest, -(state.position[0, 2] + (corners @ rot.T)[:, 2]).min())
    assert deepest < 0.02, deepest


def test_a_cube_drops_and_rests_on_the_ground_and_on_a_cube_without_springs():
    """Slow drops (2 m/s) are caught by the speculative margin between detections; the cubes come to
    rest within a millimetre."""
    builder = ModelBuilder(1 / 6)
    material = Material(friction=0.5, restitution=0.0)
    builder.add_body(cube_particles(1.0), density=1000.0, position=(0, 0, 0.6), velocity=(0, 0, -2.0),
                     material=material, corner_reach=1.0)
    builder.add_body(cube_particles(1.0), density=1000.0, position=(3, 0, 1.55), velocity=(0, 0, -2.0),
                     material=material, corner_reach=1.0)
    builder.add_body(cube_particles(1.0), density=1000.0, position=(3, 0, 0.5), material=material, corner_reach=1.0)
    builder.add_ground_plane(0.0, material=material)
    engine = OpenCLEngine(builder.finalize(), SimulationSettings())
    lowest = np.inf
    for _ in range(240):
        engine.step(1)
        state = engine.body_state()
        lowest = min(lowest, state.position[0, 2] - 0.5, state.position[1, 2] - state.position[2, 2] - 1.0)
    assert lowest > -0.01, lowest
    np.testing.assert_allclose(state.position[:, 2], [0.5, 1.5, 0.5], atol=1e-3)
    assert np.abs(state.velocity).max() < 1e-3


def test_a_steel_ball_rests_on_the_ground_and_on_a_light_brick():
    """Issue 22's ball scenes: a steel ball dropped 0.5 m on the ground and on a brick 1/16 its mass
    (a pair solved as 10:1, settings.py SUPPORT_MASS_RATIO) rests within 2 % of its radius
    (measured on the CPU: 0.024 % and 0.032 %), still on the brick (1.4 mm/s): every other substep
    each pair's points are solved last to first, or it rolls off (0.96 m/s, always first to last)."""
    steel = ball({})
    assert steel["ground"]["at_rest_in_ball_radii"] < 0.02
    assert steel["brick"]["at_rest_in_ball_radii"] < 0.02
    assert steel["brick"]["speed_at_end_mps"] < 0.1


def test_contact_keys_are_the_last_detections_between_detections():
    """Contacts found every 4 substeps: after each of a step's substeps contact_keys() gives the keys
    the step's detection found (the friction history's buffers swap only at its last substep)."""
    radius = 0.1
    builder = ModelBuilder(radius)
    builder.add_body(np.zeros((1, 3)), mass=1.0, position=(0.0, 0.0, 0.0))
    builder.add_body(np.zeros((1, 3)), mass=1.0, position=(2 * radius * 0.95, 0.0, 0.0))
    engine = OpenCLEngine(builder.finalize(), SimulationSettings(gravity=(0, 0, 0), sleep_speed=0.0))
    assert engine.settings.substeps_per_detection == 4
    for _ in range(5):
        engine.step(1)
        assert engine.contact_pairs() == {(0, 1), (1, 0)}, engine.substeps_done  # spheres: both sides
