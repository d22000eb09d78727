"""Neighbour lists (Verlet lists with a skin): between rebuilds no contact is missed, also for
particles whose list overflowed, and rebuilds happen only as often as bodies move."""
from types import SimpleNamespace

import numpy as np
import pytest

from addon.core import ModelBuilder, SimulationSettings
from addon.core.opencl_engine import OpenCLEngine
from addon.core.settings import FRICTION_SLOTS
from addon.core.shapes import box_particles


def tumbling_pile(count=48, seed=5, origin=(0.0, 0.0, 0.0)):
    """Cubes in a low block (4 x 4 per layer), tilted and spinning, dropped onto the ground:
    contacts form, break and re-form all the time, at speeds of a few m/s."""
    rng = np.random.default_rng(seed)
    builder = ModelBuilder(particle_radius=1 / 6)
    origin = np.asarray(origin, dtype=float)
    for k in range(count):
        layer, cell = divmod(k, 16)
        row, column = divmod(cell, 4)
        # 1.8 apart: a tilted unit cube (diagonal 1.73) never starts overlapping a neighbour
        centre = (1.8 * (column - 1.5), 1.8 * (row - 1.5), 0.9 + 1.8 * layer)
        builder.add_body(box_particles((3, 3, 3), 1 / 3), density=1000,
                         position=origin + centre + rng.uniform(-0.03, 0.03, size=3),
                         orientation=rng.normal(size=4), velocity=rng.uniform(-1, 1, size=3),
                         angular_velocity=rng.uniform(-3, 3, size=3))
    builder.add_ground_plane(float(origin[2]))
    return builder.finalize()


def pairs_within_diameter(model, positions, band=1e-5):
    """(i, j) of other bodies' particles closer than a diameter, and the pairs too close to the
    diameter to call in float32 (left out of the comparison).

    An exact oracle independent of the engine's grid: particles binned into cubic cells a little
    wider than the diameter (so each pair lies in the same or adjacent cells), candidates from the
    27 cells around each particle, then the distance test. The all-pairs distance matrix it
    replaces cost 0.85 s per check at 1,296 particles, 56 s of the core suite."""
    d = 2 * model.particle_radius
    cell = d * (1 + 2 * band)
    coords = np.floor(positions / cell).astype(np.int64)
    coords -= coords.min(axis=0) - 1  # a free cell on each side: neighbour keys never wrap
    extent = coords.max(axis=0) + 2
    key_of = lambda c: (c[..., 0] * extent[1] + c[..., 1]) * extent[2] + c[..., 2]
    keys = key_of(coords)
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    first, second = [], []
    for offset in np.array(np.meshgrid([-1, 0, 1], [-1, 0, 1], [-1, 0, 1], indexing="ij")).reshape(3, -1).T:
        wanted = key_of(coords + offset)
        begin = np.searchsorted(sorted_keys, wanted, side="left")
        counts = np.searchsorted(sorted_keys, wanted, side="right") - begin
        first.append(np.repeat(np.arange(len(positions)), counts))
        run_start = np.repeat(np.cumsum(counts) - counts, counts)
        second.append(order[np.arange(counts.sum()) - run_start + np.repeat(begin, counts)])
    i, j = np.concatenate(first), np.concatenate(second)
    other = model.particle_body[i] != model.particle_body[j]
    i, j = i[other], j[other]
    dist = np.linalg.norm(positions[i] - positions[j], axis=1)
    to_set = lambda mask: set(zip(i[mask].tolist(), j[mask].tolist()))
    return to_set(dist < d), to_set(np.abs(dist - d) < band * d)


def all_pairs_within_diameter(model, positions, band=1e-5):
    """The same by the all-pairs distance matrix (checks the oracle above)."""
    d = 2 * model.particle_radius
    dist = np.linalg.norm(positions[:, None, :] - positions[None, :, :], axis=2)
    other = model.particle_body[:, None] != model.particle_body[None, :]
    to_set = lambda mask: {(int(i), int(j)) for i, j in np.argwhere(mask & other)}
    return to_set(dist < d), to_set(np.abs(dist - d) < band * d)


def test_cell_oracle_finds_the_pairs_all_pairs_finds():
    """Dense random particles (a few hundred pairs, many across cell faces), and pairs placed at
    exactly a diameter, near the origin and far from it."""
    rng = np.random.default_rng(4)
    model = SimpleNamespace(particle_radius=1 / 6, particle_body=rng.integers(0, 40, size=1200))
    positions = rng.uniform(-2.0, 2.0, size=(1200, 3))
    positions[1::2] = positions[0::2] + 2 / 6 * np.array([1.0, 0.0, 0.0])  # at the diameter
    for shift in (0.0, 3e3):
        close, borderline = pairs_within_diameter(model, positions + shift)
        assert len(close) > 300 and len(borderline) > 300
        assert (close, borderline) == all_pairs_within_diameter(model, positions + shift)


@pytest.mark.parametrize("skin, neighbour_slots, origin",
                         [(0.2, 16, (0, 0, 0)), (0.5, 16, (0, 0, 0)), (0.2, 2, (0, 0, 0)), (0.2, 16, (3e3, -1e3, 0))])
def test_no_contact_is_missed_between_rebuilds(skin, neighbour_slots, origin):
    """Every other substep checked against brute force while a pile forms. A small skin leaves no
    slack for a late rebuild; with 2 slots most lists overflow and those particles search the
    (stale) grid instead; far from the origin, cells alias."""
    model = tumbling_pile(origin=origin)
    # particle pairs checked (the voxel contacts' pairs: test_voxel_pairs.py)
    engine = OpenCLEngine(model, SimulationSettings(contact_geometry="particles"), neighbour_skin=skin,
                          neighbour_slots=neighbour_slots)
    checked = with_contacts = 0
    for step in range(400):
        engine.step(1)
        if step % 2:
            continue
        positions = engine.particle_positions()
        expected, borderline = pairs_within_diameter(model, positions)
        got = engine.contact_pairs()
        # the friction history (what contact_pairs reads) shows at most FRICTION_SLOTS contacts of a
        # particle, the planes' included: a particle with more is checked for the ones it shows
        shown = {i for i, key in engine.contact_keys() if key < 0}
        per_particle = np.bincount([i for i, _ in expected] + list(shown), minlength=model.particle_count)
        full = {i for i in np.flatnonzero(per_particle > FRICTION_SLOTS).tolist()}
        complete = {pair for pair in expected if pair[0] not in full}
        missed = (complete - got) - borderline
        extra = (got - expected) - borderline
        assert not missed and not extra, f"substep {step}: missed {sorted(missed)[:5]}, extra {sorted(extra)[:5]}"
        checked += 1
        with_contacts += len(expected) > 0
    rebuilds = engine.rebuilds
    assert checked >= 180 and with_contacts >= 100
    # the lists are reused: rebuilt in a minority of substeps, but more than once (bodies move)
    assert 5 < rebuilds < 400 * (0.5 if skin < 0.5 else 0.25), rebuilds


def test_no_rebuild_while_nothing_moves():
    """Bodies floating still in zero gravity: the first substep builds the lists, none after."""
    builder = ModelBuilder(particle_radius=0.1)
    for k in range(5):
        builder.add_body(box_particles((2, 2, 2), 0.2), mass=1.0, position=(0.45 * k, 0, 0))
    engine = OpenCLEngine(builder.finalize(), SimulationSettings(gravity=(0, 0, 0)))
    engine.step(50)
    assert engine.rebuilds == 1


def test_rebuild_follows_the_skin():
    """A body drifting at constant speed: rebuilt in the substep after it has moved by more than
    0.45 skin (a little under half, for float rounding) since the last rebuild."""
    builder = ModelBuilder(particle_radius=0.1)
    builder.add_body(box_particles((2, 2, 2), 0.2), mass=1.0, velocity=(3.0, 0.0, 0.0))
    builder.add_body(box_particles((2, 2, 2), 0.2), mass=1.0, position=(0, 5, 0))
    model = builder.finalize()
    skin = 0.5
    engine = OpenCLEngine(model, SimulationSettings(gravity=(0, 0, 0), contact_geometry="particles"),
                          neighbour_skin=skin)
    steps = 400
    engine.step(steps)
    per_substep = 3.0 * engine.params.substep
    threshold = 0.45 * skin * 2 * model.particle_radius
    interval = int(threshold // per_substep) + 1  # substeps from one rebuild to the next
    assert engine.rebuilds == 1 + (steps - 1) // interval


def test_results_do_not_depend_on_the_skin():
    """The lists only prune the search: a small and a large skin give the same motion up to
    float rounding (the contacts are summed in a different order, which a tumbling pile amplifies
    over time: 100 substeps, the tolerances of the reference-agreement test)."""
    model = tumbling_pile(count=12, seed=9)
    states, rebuilds = [], []
    for skin in (0.1, 1.0):
        engine = OpenCLEngine(model, SimulationSettings(contact_geometry="particles"), neighbour_skin=skin)
        engine.step(100)
        states.append(engine.body_state())
        rebuilds.append(engine.rebuilds)
    assert rebuilds[0] > rebuilds[1] >= 1  # really two different rebuild schedules
    np.testing.assert_allclose(states[0].position, states[1].position, atol=2e-4)
    np.testing.assert_allclose(states[0].velocity, states[1].velocity, atol=2e-3)
