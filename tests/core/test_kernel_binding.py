"""The kernels' stage layout and their arguments bound by name."""
import numpy as np
import pytest

from addon.core.opencl_engine import OpenCLEngine
from addon.core.opencl_program import KERNEL_DIR, LAUNCH_ORDER, STAGES, kernel_parameters, program_source
from bench.scenes import cube_pile


def test_stage_files_are_the_kernel_folder_in_increasing_order():
    numbers = [stage.number for stage in STAGES]
    assert numbers == sorted(set(numbers))
    assert {stage.file for stage in STAGES} == {p.name for p in KERNEL_DIR.iterdir() if p.suffix in (".cl", ".h")}
    for stage in STAGES:
        # each stage's kernels are defined in its own file
        assert set(kernel_parameters((KERNEL_DIR / stage.file).read_text())) == set(stage.kernels)


def test_signatures_are_parsed_with_comments_and_attributes():
    source = """
    __kernel __attribute__((reqd_work_group_size(64, 1, 1)))
    void first(__global const float4 *body_position,   // a comment, with a comma
               const int count /* another, here */, __global uchar *flag)
    { }
    __kernel void second(const float4 sleep) { }
    """
    assert kernel_parameters(source) == {"first": ("body_position", "count", "flag"), "second": ("sleep",)}


def test_every_parameter_has_a_value_and_a_missing_one_is_named():
    engine = OpenCLEngine(cube_pile(4))
    parameters = kernel_parameters(program_source())
    assert set(parameters) == set(LAUNCH_ORDER)
    for kernel, names in parameters.items():
        for name in names:
            assert name in engine.arguments, (kernel, name)
    del engine.arguments["body_quiet"]
    with pytest.raises(RuntimeError, match="'body_quiet'.*compute_contacts.*integrate_bodies"):
        engine._bind()


def test_no_argument_is_bound_by_a_literal_index():
    """Arguments are bound through their parameter name's index (kernel_parameters): a
    ``set_arg(<integer literal>`` in addon/core would break silently when a signature changes."""
    import re
    from pathlib import Path

    core = Path(__file__).resolve().parents[2] / "addon" / "core"
    by_index = [f"{path.name}:{number}: {line.strip()}" for path in sorted(core.glob("*.py"))
                for number, line in enumerate(path.read_text().splitlines(), start=1)
                if re.search(r"set_arg\(\s*-?\d", line)]
    assert not by_index, f"kernel arguments bound by a literal index: {by_index}"


def test_set_argument_reaches_the_next_launch():
    """The animated colliders' clock is the one argument set per substep, by name: a clock moved by
    hand changes where the triangles are, so it must reach the kernel."""
    from addon.core import ModelBuilder
    from addon.core.shapes import cube_particles

    def drop(shift):
        builder = ModelBuilder(1.0 / 6.0)
        builder.add_body(cube_particles(1.0), density=1000.0, position=(0.0, 0.0, 0.52))
        vertices = np.array([[-3, -3, 0], [3, -3, 0], [3, 3, 0], [-3, 3, 0]], float)
        builder.add_static_mesh(vertices, [[0, 1, 2], [0, 2, 3]], frames=[vertices, vertices + [0, 0, 0.1]])
        engine = OpenCLEngine(builder.finalize())
        engine.set_collider_frame(0, 1.0)
        engine.colliders.tau += shift
        engine.step(40)
        return engine.body_state().position[0, 2]

    assert drop(0.5) > drop(0.0) + 0.01


@pytest.mark.parametrize("geometry", ["particles", "voxels"])
def test_memory_estimate_counts_the_neighbour_lists_the_engine_allocates(geometry):
    """The estimate users see before simulating follows the contact geometry: its neighbour lists are
    the ones the engine allocates (voxel contacts' lists are twice as long; particle contacts must not be
    refused for memory they do not use)."""
    from addon.core import SimulationSettings
    from addon.core.device_buffers import (BODY, DEVICE_BUFFERS, estimate_device_memory, solve_bytes_per_body,
                                           solve_bytes_per_particle)
    from addon.core.settings import CONTACT_GEOMETRIES

    engine = OpenCLEngine(cube_pile(8), SimulationSettings(contact_geometry=geometry))
    particles, bodies = engine.particle_count, engine.body_count
    other = "voxels" if geometry == "particles" else "particles"
    other_engine = OpenCLEngine(cube_pile(8), SimulationSettings(contact_geometry=other))
    difference = estimate_device_memory(particles, bodies, geometry) - estimate_device_memory(particles, bodies, other)
    solve_difference = solve_bytes_per_particle(geometry) - solve_bytes_per_particle(other)
    pair_difference = solve_bytes_per_body(geometry) - solve_bytes_per_body(other)
    # the bodies' poses at the detection and at each substep's start (four float4s), where contacts
    # are detected once every few substeps (Rigid Voxels by default)
    pose_difference = 4 * 16 * ((engine.settings.substeps_per_detection > 1)
                                - (other_engine.settings.substeps_per_detection > 1))
    assert difference == (4 * particles * (engine.neighbour_slots - other_engine.neighbour_slots)
                          + particles * solve_difference + bodies * (pair_difference + pose_difference))
    assert engine.arguments["neighbour_list"].size == 4 * particles * engine.neighbour_slots
    # the velocity solve's records: counted for Rigid Voxels, which solve (settings.solve_passes)
    assert (engine.arguments["solve_record"].size >= 16 * 5 * 8 * particles) == (solve_bytes_per_particle(geometry) > 0)
    # and the solve's pair lists and the islands' counts as listed, per body
    # (every solve-only body row of the buffer table: the pair lists, the impact flags and times, the
    # sweeps' start poses)
    solve_body_rows = [row.name for row in DEVICE_BUFFERS if row.per == BODY and row.solve_only]
    assert {"pair_other", "colour_pairs", "body_impact_time", "impact_start_position"} <= set(solve_body_rows)
    pair_lists = sum(engine.arguments[name].size for name in solve_body_rows)
    assert (pair_lists >= bodies * solve_bytes_per_body("voxels")) == (solve_bytes_per_body(geometry) > 0)
    # each pair's record list: a slot per friction slot of every particle
    assert (engine.arguments["pair_records"].size >= 4 * 8 * particles) == (solve_bytes_per_particle(geometry) > 0)
    assert estimate_device_memory(particles, bodies) == max(estimate_device_memory(particles, bodies, g)
                                                            for g in CONTACT_GEOMETRIES)


@pytest.mark.parametrize("geometry", ["particles", "voxels"])
def test_the_estimate_adds_up_the_buffers_the_engine_allocates(geometry):
    """Every buffer that grows with the particles or bodies is a row of DEVICE_BUFFERS, allocated at
    the row's size, and the estimate users see before simulating is those rows' sum (with the
    geometry's default settings, the largest it allocates) and the grid's buckets: a buffer added
    without a row, or a row's size unlike its allocation's, fails here."""
    import pyopencl as cl

    from addon.core import SimulationSettings
    from addon.core.device_buffers import (DEVICE_BUFFERS, FIXED_SIZE_BUFFERS, GRID_BYTES_PER_PARTICLE,
                                           PLACEHOLDER_BYTES, estimate_device_memory, table_bytes)
    from addon.core.opencl_program import SCAN_GROUP_ITEMS, ByParity

    engine = OpenCLEngine(cube_pile(8), SimulationSettings(contact_geometry=geometry))
    particles, bodies, counts = engine.particle_count, engine.body_count, engine.buffer_counts
    buffers = {}  # each distinct buffer (a double buffer's two once) by the names it is bound under
    for name, value in engine.arguments.items():
        for buffer in value if isinstance(value, ByParity) else (value,):
            if isinstance(buffer, cl.Buffer):
                buffers.setdefault(buffer.int_ptr, (buffer.size, set()))[1].add(name)
    row_names = {name: row for row in DEVICE_BUFFERS
                 for name in ((row.name + "_in", row.name + "_out") if row.double else (row.name,))}
    unlisted = [names for _size, names in buffers.values() if not names <= set(row_names) | set(FIXED_SIZE_BUFFERS)]
    assert not unlisted, f"buffers neither in DEVICE_BUFFERS nor in FIXED_SIZE_BUFFERS: {unlisted}"
    bound = set().union(*(names for _size, names in buffers.values()))
    assert set(row_names) <= bound, f"rows of DEVICE_BUFFERS the engine did not allocate: {set(row_names) - bound}"

    grown = sum(size for size, names in buffers.values() if names <= set(row_names))
    placeholders = sum(PLACEHOLDER_BYTES * (2 if row.double else 1) for row in DEVICE_BUFFERS if not row.nbytes(counts))
    assert grown == table_bytes(counts) + placeholders
    assert estimate_device_memory(particles, bodies, geometry) == table_bytes(counts) + particles * GRID_BYTES_PER_PARTICLE
    # the grid's two bucket arrays: up to two buckets per particle (at least 64 particles' worth),
    # padded to whole scan groups
    grid = sum(size for size, names in buffers.values() if names & {"bucket_count", "scan_local"})
    assert grid <= GRID_BYTES_PER_PARTICLE * max(particles, 64) + 2 * 4 * SCAN_GROUP_ITEMS
