"""Issue 47's glue on a wall (core.glue): a 10,000-piece wall glued, every touching pair bonded and no
other; and a small wall glued by the glue standing under gravity and breaking under an impact like
the same wall glued by FIXED constraints where Blender's Connect puts them (a constraint at the
midpoint of each touching pair's centres, its threshold the same stress over the same area), in the
OpenCL engine."""
import numpy as np
import pytest

from addon.core import Material, ModelBuilder, SimulationSettings
from addon.core.glue import breaking_thresholds, glue_bodies
from addon.core.shapes import box_particles

R = 0.0625
BRICK = np.array([0.5, 0.25, 0.25])  # 4 x 2 x 2 voxels
STRENGTH = 100e3  # Pa, the add-on's default glue


def brick_centres(courses: int, per_course: int) -> np.ndarray:
    """A one-brick-thick running bond on the ground: odd courses shifted by half a brick."""
    return np.array([((k - per_course / 2) * BRICK[0] + (0.25 if course % 2 else 0.0), 0.0,
                      (course + 0.5) * BRICK[2]) for course in range(courses) for k in range(per_course)])


def touching_pairs(centres: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(a, b, shared face area) of every pair of bricks that share a face with an area: end to end
    in a course, or overlapping along x between neighbouring courses. Pairs are only looked for
    within a course and its neighbour (10,000 bricks at once would be a 10^8 matrix)."""
    courses = np.round(centres[:, 2] / BRICK[2] - 0.5).astype(int)
    found = []
    for course in range(courses.max() + 1):
        here = np.flatnonzero(courses == course)
        for other, dz in ((here, 0.0), (np.flatnonzero(courses == course + 1), BRICK[2])):
            dx = np.abs(centres[here, None, 0] - centres[None, other, 0])
            touch = np.isclose(dx, BRICK[0]) if dz == 0.0 else dx < BRICK[0] - 1e-6
            i, j = np.nonzero(touch)
            keep = here[i] < other[j]
            area = BRICK[1] * BRICK[2] if dz == 0.0 else (BRICK[0] - dx[i, j]) * BRICK[1]
            found.append((here[i][keep], other[j][keep], np.broadcast_to(area, i.shape)[keep]))
    a, b, area = (np.concatenate(parts) for parts in zip(*found))
    return a, b, area


def wall(courses: int, per_course: int, glue: str | None, strength: float = STRENGTH, ball_speed: float = 0.0):
    """The wall, glued by ``glue`` ("glue": core.glue; "constraints": FIXED joints at the pairs'
    midpoints; None: not glued), and a 2,000 kg ball of 0.5 m radius 1.2 m in front of its middle
    flying at it at ``ball_speed`` (none at 0)."""
    b = ModelBuilder(R)
    centres = brick_centres(courses, per_course)
    brick = Material(friction=0.5, restitution=0.0)
    b.add_bodies(box_particles((4, 2, 2), 2 * R)[None] + centres[:, None, :], masses=np.full(len(centres), 31.25),
                 materials=[brick] * len(centres), corner_reach=1.0)
    if glue == "glue":
        glue_bodies(b, np.zeros(len(centres), dtype=np.int64), strength)
    elif glue == "constraints":
        a, c, area = touching_pairs(centres)
        thresholds = breaking_thresholds(strength, area, b.bullet_substep)
        for first, second, threshold in zip(a, c, thresholds):
            b.add_joint("FIXED", int(first), int(second), tuple((centres[first] + centres[second]) / 2),
                        breaking_threshold=float(threshold))
    if ball_speed:
        grid = np.arange(-0.5 + R, 0.5, 2 * R)
        cube = np.stack(np.meshgrid(grid, grid, grid, indexing="ij"), -1).reshape(-1, 3)
        b.add_body(cube[np.linalg.norm(cube, axis=1) <= 0.5], mass=2000.0,
                   position=(0.0, -1.2, courses * BRICK[2] / 2), velocity=(0.0, ball_speed, 0.0), material=brick)
    b.add_ground_plane(0.0, material=brick)
    return b.finalize(), centres


def test_a_10k_piece_wall_glues_every_touching_pair_and_no_other():
    courses, per_course = 80, 125
    b = ModelBuilder(R)
    centres = brick_centres(courses, per_course)
    b.add_bodies(box_particles((4, 2, 2), 2 * R)[None] + centres[:, None, :], masses=np.full(len(centres), 31.25))
    bonds = glue_bodies(b, np.zeros(len(centres), dtype=np.int64), STRENGTH)
    a, c, area = touching_pairs(centres)
    assert len(centres) == 10_000
    assert bonds.count == len(a) == courses * (per_course - 1) + (courses - 1) * (2 * per_course - 1)
    found = {(min(x, y), max(x, y)): s for x, y, s in zip(bonds.body_a, bonds.body_b, bonds.area)}
    expected = dict(zip(zip(a.tolist(), c.tolist()), area))
    assert set(found) == set(expected)
    assert np.allclose([found[k] for k in expected], list(expected.values()), rtol=1e-6)
    joints = b.finalize().joints
    assert joints.count == bonds.count and np.isfinite(joints.breaking_threshold).all()


def run(model, seconds: float):
    from addon.core.opencl_engine import OpenCLEngine

    engine = OpenCLEngine(model, SimulationSettings())
    start = engine.body_state().position
    engine.step(int(round(seconds / engine.params.substep)))
    end = engine.body_state().position
    return engine, np.linalg.norm(end - start, axis=1)


@pytest.mark.parametrize("glue", ["glue", "constraints"])
def test_a_glued_wall_stands_under_gravity(glue):
    model, _ = wall(6, 10, glue)
    engine, moved = run(model, 1.0)
    # no bond breaks; the courses settle on the soft joints (0.35 of the substep rate) by millimetres
    assert engine.broken_joint_count == 0
    assert moved.max() < 0.01, moved.max()


def test_the_glue_breaks_under_an_impact_as_the_constraints_do():
    """The ball at 5 m/s into the middle of a 96-brick wall: the glue breaks part of its bonds, about
    as many as the constraints do (each breaks where its impulse per Bullet substep reaches the same
    threshold), and about as many bricks are pushed more than 5 cm."""
    outcome = {}
    for glue in ("glue", "constraints"):
        model, centres = wall(6, 16, glue, ball_speed=5.0)
        engine, moved = run(model, 0.5)
        outcome[glue] = (engine.broken_joint_count, int((moved[:len(centres)] > 0.05).sum()), model.joints.count)
    print(outcome)
    (broken_glue, moved_glue, bonds), (broken_constraints, moved_constraints, joints) = (outcome["glue"],
                                                                                          outcome["constraints"])
    assert bonds == joints == 6 * 15 + 5 * 31
    assert 0 < broken_glue < bonds / 2 and 0 < broken_constraints < joints / 2
    assert abs(broken_glue - broken_constraints) <= max(2, 0.2 * broken_constraints)
    assert abs(moved_glue - moved_constraints) <= max(3, 0.2 * moved_constraints)
