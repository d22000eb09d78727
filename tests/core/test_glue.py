"""Glue (core.glue): bonds between touching pieces found from their voxels, their areas and
thresholds, ModelBuilder.add_bonds against add_joint, and a glued beam in the reference engine
holding and breaking at the strength its analytic load needs."""
import numpy as np
import pytest

from addon.core import ModelBuilder, SimulationSettings
from addon.core.glue import GAP_TOLERANCE, GlueSettings, breaking_thresholds, find_bonds, glue_bodies
from addon.core.joints import DEFAULT_BULLET_SUBSTEP
from addon.core.reference import ReferenceEngine
from addon.core.rotations import axis_angle_quaternions
from addon.core.shapes import box_particles
from addon.core.voxelize import voxelize

R = 0.05
D = 2 * R  # a voxel
G = 9.81


def cube_block(builder, shape=(3, 3, 3), voxels=3, gap=0.0):
    """Cube pieces of voxels^3 particles on a grid ``shape``, ``gap`` voxels apart; their grid cells."""
    cells = np.stack(np.meshgrid(*[np.arange(n) for n in shape], indexing="ij"), axis=-1).reshape(-1, 3)
    pitch = D * (voxels + gap)
    particles = box_particles((voxels,) * 3, D)[None] + (cells * pitch)[:, None, :]
    builder.add_bodies(particles, masses=np.ones(len(cells)))
    return cells, pitch


def bonds_of(builder, groups=None):
    positions, body = builder.particle_positions()
    groups = np.zeros(builder.body_count, dtype=np.int64) if groups is None else np.asarray(groups)
    return find_bonds(positions, body, groups, builder.particle_radius, body_lattice=builder.lattice_orientations())


def test_block_of_27_cubes_bonds_its_54_faces():
    """3 x 3 x 3 cubes of 3^3 voxels: one bond per shared face (54), none across an edge or a corner,
    each of the face's area (9 voxel faces), its pivot the face's centre."""
    b = ModelBuilder(R)
    cells, pitch = cube_block(b)
    bonds = bonds_of(b)
    assert bonds.count == 54
    step = np.abs(cells[bonds.body_b] - cells[bonds.body_a])
    assert np.all(step.sum(axis=1) == 1)  # face neighbours only
    assert len({(a, c) for a, c in zip(bonds.body_a, bonds.body_b)}) == 54 and np.all(bonds.body_a < bonds.body_b)
    assert np.all(bonds.pair_count == 9)
    assert np.allclose(bonds.area, 9 * D**2)
    centre = (cells[bonds.body_a] + cells[bonds.body_b]) * pitch / 2  # the cubes' centres' midpoint
    assert np.allclose(bonds.pivot, centre, atol=1e-12)


def test_groups_and_unglued_pieces_do_not_bond():
    """A row of four cubes: groups 0, 0, 1, -1 (not glued): only the first two bond."""
    b = ModelBuilder(R)
    cube_block(b, shape=(4, 1, 1))
    bonds = bonds_of(b, groups=[0, 0, 1, -1])
    assert (bonds.count, int(bonds.body_a[0]), int(bonds.body_b[0])) == (1, 0, 1)
    assert bonds_of(b, groups=[-1, -1, -1, -1]).count == 0
    assert bonds_of(b, groups=[2, 2, 2, 2]).count == 3


@pytest.mark.parametrize("gap, bonded", [(0.0, True), (0.25, True), (GAP_TOLERANCE * 0.99, True),
                                         (GAP_TOLERANCE * 1.01, False), (0.5, False)])
def test_gap_tolerance(gap, bonded):
    """Two cubes ``gap`` voxels apart bond up to GAP_TOLERANCE, not beyond."""
    b = ModelBuilder(R)
    cube_block(b, shape=(2, 1, 1), gap=gap)
    assert bonds_of(b).count == int(bonded)


def test_overlapping_lattices_count_the_nearest_layer():
    """Two cubes 0.8 voxel into each other: the second layer of each side comes within reach (1.2
    voxels), yet the area stays the face's 9 voxel faces."""
    b = ModelBuilder(R)
    cube_block(b, shape=(2, 1, 1), gap=-0.8)
    bonds = bonds_of(b)
    assert bonds.count == 1 and bonds.pair_count[0] > 9
    assert np.isclose(bonds.area[0], 9 * D**2)


def box_mesh(lo, hi):
    corners = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
    triangles = [[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1], [2, 3, 7], [2, 7, 6],
                 [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]]
    return corners, np.array(triangles)


def test_boxes_voxelized_on_their_own_grids_bond_over_their_shared_face():
    """Pairs of boxes 2.5-6 voxels across, of random sizes, face to face at x = 0 and shifted sideways,
    each voxelized on its own grid (core.voxelize, as the conversion does: every offset of the two
    lattices): each pair bonds, over 0.75 to 1.1 times what its faces share with a voxel added to
    each side (the voxels stand out of a box by up to half a voxel)."""
    rng = np.random.default_rng(0)
    for _ in range(20):
        size_a, size_b = rng.uniform(0.25, 0.6, 3), rng.uniform(0.25, 0.6, 3)
        shift = np.concatenate([[0.0], rng.uniform(-0.1, 0.1, 2)])
        boxes = [(np.array([-size_a[0], -size_a[1] / 2, -size_a[2] / 2]), np.array([0.0, size_a[1] / 2, size_a[2] / 2])),
                 (shift + [0.0, -size_b[1] / 2, -size_b[2] / 2], shift + [size_b[0], size_b[1] / 2, size_b[2] / 2])]
        b = ModelBuilder(R)
        for lo, hi in boxes:
            b.add_body(voxelize(*box_mesh(lo, hi), D).points, mass=1.0)
        bonds = bonds_of(b)
        shared = np.clip(np.minimum(boxes[0][1], boxes[1][1]) - np.maximum(boxes[0][0], boxes[1][0]), 0, None)[1:]
        assert bonds.count == 1
        assert 0.75 * shared.prod() <= bonds.area[0] <= 1.1 * (shared + D).prod()


def test_edge_and_corner_neighbours_do_not_bond():
    b = ModelBuilder(R)
    cube_block(b, shape=(2, 2, 2))
    bonds = bonds_of(b)
    assert bonds.count == 12  # the 2 x 2 x 2 block's faces, not its 12 edge or 4 corner pairs


def test_offset_lattices_bond_with_the_area_their_voxel_faces_share():
    """Two cubes whose voxels are offset half a voxel along both face axes (each piece voxelized on its
    own grid): a voxel faces one, two or four across, and the area is what their faces share, 2.5 x
    2.5 voxel faces (counting pairs would make it 25, each side's touching voxels 9)."""
    b = ModelBuilder(R)
    left = box_particles((3, 3, 3), D)
    b.add_bodies(np.stack([left, left + (3 * D, 0.5 * D, 0.5 * D)]), masses=[1.0, 1.0])
    bonds = bonds_of(b)
    assert bonds.count == 1
    assert bonds.pair_count[0] == 25  # 5 x 5 pairs 2.45 r apart: a voxel meets 1, 2 or 4 across
    assert np.isclose(bonds.area[0], (2.5 * D) ** 2)
    assert np.allclose(bonds.pivot[0], (1.5 * D, 0.25 * D, 0.25 * D))


def test_rotated_pieces_bond():
    """Two cubes turned 30 degrees about z together, face to face: they bond as unturned ones do (the
    shared area measured along their voxel lattice's axes)."""
    q = axis_angle_quaternions(np.array([0.0, 0.0, 1.0]), np.radians(30.0))
    b = ModelBuilder(R)
    for x in (0.0, 3 * D):
        b.add_body(box_particles((3, 3, 3), D) + (x, 0.0, 0.0), mass=1.0, orientation=q)
    bonds = bonds_of(b)
    assert bonds.count == 1 and np.isclose(bonds.area[0], 9 * D**2)


def test_thresholds_scale_with_area_and_bullet_substep():
    """breaking_threshold = strength x area x Bullet's substep: a 4 x 4 face holds 16/9 of a 3 x 3 one,
    and halving the Bullet substep halves the threshold (the same force breaks it); a bond takes the
    weaker of its pieces' strengths."""
    thresholds = {}
    for voxels in (3, 4):
        for substeps in (10, 20):
            b = ModelBuilder(R)
            b.bullet_substep = 1.0 / (24 * substeps)
            cube_block(b, shape=(2, 1, 1), voxels=voxels)
            bonds = glue_bodies(b, [0, 0], [50_000.0, 80_000.0])
            thresholds[voxels, substeps] = float(b.finalize().joints.breaking_threshold[0])
            assert np.isclose(thresholds[voxels, substeps], 50_000.0 * voxels**2 * D**2 / (24 * substeps))
            assert np.isclose(bonds.area[0], voxels**2 * D**2)
    assert np.isclose(thresholds[4, 10] / thresholds[3, 10], 16 / 9)
    assert np.isclose(thresholds[3, 20] / thresholds[3, 10], 0.5)
    assert np.allclose(breaking_thresholds([1e5, 2e5], [0.01, 0.01], DEFAULT_BULLET_SUBSTEP), [1e3 / 240, 2e3 / 240])


def test_bulk_bonds_are_add_joints_fixed_joints():
    """add_bonds makes the JointModel add_joint("FIXED", ...) does for the same bonds (turned bodies:
    the frames are the world's at their initial poses), after add_joint's own joints."""
    rng = np.random.default_rng(1)
    turns = axis_angle_quaternions(rng.normal(size=(4, 3)), rng.uniform(0, 3, 4))
    pairs = np.array([(0, 1), (1, 2), (2, 3)])
    pivots = rng.normal(size=(3, 3))
    thresholds = np.array([1.0, 2.5, 4.0])
    models = []
    for bulk in (False, True):
        b = ModelBuilder(R)
        for k in range(4):
            b.add_body(box_particles((2, 2, 2), D), mass=1.0 + k, position=(k, 0.0, 0.0), orientation=turns[k])
        b.add_joint("HINGE", 0, -1, (0.0, 0.0, 1.0), axis=(0.0, 1.0, 0.0))
        if bulk:
            assert b.add_bonds(pairs[:, 0], pairs[:, 1], pivots, thresholds) == 3
        else:
            for (a, c), pivot, threshold in zip(pairs, pivots, thresholds):
                b.add_joint("FIXED", int(a), int(c), pivot, breaking_threshold=threshold)
        models.append(b.finalize().joints)
    spec, bulk = models
    assert bulk.count == 4
    for name, value in vars(spec).items():
        other = getattr(bulk, name)
        if isinstance(value, np.ndarray):
            assert value.dtype == other.dtype, name
            assert np.allclose(value, other, rtol=0, atol=1e-12), name
        else:
            assert value == other, name


def test_add_bonds_refuses_bad_input():
    b = ModelBuilder(R)
    cube_block(b, shape=(2, 1, 1))
    with pytest.raises(ValueError, match="two different bodies"):
        b.add_bonds([0], [0], [(0.0, 0.0, 0.0)], 1.0)
    with pytest.raises(ValueError, match="dynamic bodies"):
        b.add_bonds([0], [2], [(0.0, 0.0, 0.0)], 1.0)
    with pytest.raises(ValueError, match=">= 0"):
        b.add_bonds([0], [1], [(0.0, 0.0, 0.0)], -1.0)
    with pytest.raises(ValueError, match="glue strength"):
        GlueSettings(enabled=True, strength=float("nan"))
    assert b.finalize().joints is None  # nothing was added


def glued_beam(strength):
    """A beam of two 0.4 x 0.2 x 0.2 m pieces along x: the first held by an unbreakable FIXED joint to
    the world at its centre, the second glued to it (found by glue_bodies) and carried by the glue
    alone."""
    b = ModelBuilder(R)
    piece = box_particles((4, 2, 2), D)
    held = b.add_body(piece, mass=2.0, position=(0.0, 0.0, 1.0))
    free = b.add_body(piece, mass=2.0, position=(4 * D, 0.0, 1.0))
    b.add_joint("FIXED", held, -1, (0.0, 0.0, 1.0))
    bonds = glue_bodies(b, [0, 0], strength)
    return b, bonds, free


@pytest.mark.parametrize("factor, holds", [(1.05, True), (0.95, False)])
def test_glued_beam_holds_and_breaks_at_its_load(factor, holds):
    """The free piece's weight hangs on the glued face: a shear of m g (its moment m g L about the
    face's centre over the lever L = 0.2 m) and that moment, m g L, on the angular rows, which Bullet's
    rule compares with the same threshold; here m g > m g L, so the glue breaks when strength x area
    < m g. The beam settles glued strongly (gravity's sudden onset loads the glue 22 % beyond its
    weight for a moment), then its strength is lowered: 5 % above the load it holds still, 5 % below it
    breaks and the piece falls."""
    mass, lever, area = 2.0, 4 * D / 2, 4 * D**2
    load = max(mass * G * lever / lever, mass * G * lever)  # shear (moment / lever) and the moment's row
    b, bonds, free = glued_beam(10 * load / area)
    assert bonds.count == 1 and np.isclose(bonds.area[0], area)
    assert np.allclose(bonds.pivot[0], (2 * D, 0.0, 1.0))
    e = ReferenceEngine(b.finalize(), SimulationSettings(sleep_time=0.0))
    e.step(int(0.1 / e.params.substep))
    glue = 1  # after the holding joint
    assert not e.joint_broken.any()
    settled = e.x[free].copy()
    e.model.joints.breaking_threshold[glue] = breaking_thresholds(factor * load / area, area, b.bullet_substep)
    e.step(int(0.15 / e.params.substep))
    assert bool(e.joint_broken[glue]) != holds
    assert not e.joint_broken[0]
    if holds:
        assert np.abs(e.x[free] - settled).max() < 1e-4
        assert abs(e.x[free, 2] - 1.0) < 2e-3 and abs(e.x[free, 0] - 4 * D) < 2e-3
    else:
        assert e.x[free, 2] < settled[2] - 0.05
