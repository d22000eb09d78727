"""The velocity solve's launches (62_pair_solve.cl, Rigid Voxels): the colouring of a detection's
body pairs, then each substep's passes, either as a launch per colour and pass kind
(``solve_pair_contacts``) or, on NVIDIA GPUs, as one launch per substep (``solve_substep_passes``,
the colours apart by a barrier across the launch, 05_grid_barrier.cl). SolveLaunches is a part of
OpenCLEngine: each kernel instance here has its arguments set once, from ``arguments``.
"""
from __future__ import annotations

import os

import numpy as np

from .device_buffers import PAIR_SLOT_BUFFERS, round_up
from .opencl_program import SOLVE_PASS_BACKWARD, ByParity, is_nvidia
from .pair_colouring import (MAX_PAIR_COLOURS, OVERFLOW_PAIRS, PAIR_COLOUR_COUNTS, SPARE_COLOUR_ROUNDS,
                             TooManyPairs, grown_max_pairs)
from .settings import MANIFOLD_RESTITUTION_PASSES

# A colour's launch holds this many times the pairs the colour had at the last detection (its
# work-items take more than one pair each past that)
COLOUR_LAUNCH_MARGIN = 1.25
# Work-items of the solve's passes per work-group: one per pair, as a pair's manifold points are
# solved one after another (32 lanes per pair, sharing out its records, left 31 idle: the 10k pile
# 647 -> 459 ms per simulated second on the H100 with one, rigid-step.md)
PAIRS_PER_GROUP = 64
# Work-items per work-group of solve_substep_passes (at most what the device allows the kernel):
# enough to hold a colour's pairs of the 100k pile in one sweep of the compute units
SUBSTEP_PASSES_GROUP_SIZE = 256
# solve_pair_contacts' launches as the profile names them, by solve_kind (62_pair_solve.cl)
SOLVE_STAGES = tuple(f"solve_pair_contacts.{kind}" for kind in ("warm", "solve", "relax", "restitution"))

ONE_LAUNCH_VARIABLE = "PRB_ONE_LAUNCH_PASSES"
# For tests: solve_substep_passes launched with this many work-groups per compute unit, more than
# can be resident at once, so that its barrier's guard must end the launch (05_grid_barrier.cl)
OVERSUBSCRIBE_VARIABLE = "PRB_ONE_LAUNCH_GROUPS_PER_UNIT"


class PassesInOneLaunchFailed(RuntimeError):
    """solve_substep_passes' barrier across the launch gave up: the device ran fewer of its
    work-groups at once than it reported it could."""

    def __init__(self):
        super().__init__(
            "The solver's one-launch passes stopped: this GPU did not run all their work-groups at once "
            "(a GPU shared with other work?), so their barrier gave up rather than hang it; nothing after "
            f"that step is valid. Bake again with the environment variable {ONE_LAUNCH_VARIABLE}=0 "
            "(a launch per colour, a little slower).")


def one_launch_passes(device_info) -> bool:
    """Whether a substep's passes run in one launch (62_pair_solve.cl solve_substep_passes) rather
    than a launch per colour and pass: on NVIDIA GPUs, whose barrier across a launch needs PTX's
    fence (05_grid_barrier.cl), unless the driver's watchdog bounds a launch's time (a GPU driving a
    display: a launch per colour stays short). PRB_ONE_LAUNCH_PASSES=1 or 0 overrides (tests run it
    on a CPU, as one work-group)."""
    override = os.environ.get(ONE_LAUNCH_VARIABLE)
    if override:
        return override == "1"
    return is_nvidia(device_info) and not device_info.kernel_timeout


class SolveLaunches:
    """OpenCLEngine's solve launches: the pairs coloured at a detection, and each substep's passes."""

    def _size_substep_passes(self):
        """solve_substep_passes' sizes: one work-group per compute unit, so that all are resident
        (the barrier across them waits for every one); a CPU asked to runs one."""
        device = self.context.devices[0]
        limit = self._kernels["solve_substep_passes"][0].get_work_group_info(
            self.cl.kernel_work_group_info.WORK_GROUP_SIZE, device)
        local = min(SUBSTEP_PASSES_GROUP_SIZE, limit)
        groups = device.max_compute_units if self.device_info.is_gpu else 1
        groups *= int(os.environ.get(OVERSUBSCRIBE_VARIABLE) or 1)
        self._substep_passes_size = ((groups * local,), (local,))

    def _colour_kernel(self, name, colour, kind, parity):
        """The instance of coloured-solve kernel ``name`` for one colour (and pass kind), its arguments
        set once, so that a substep's launches only enqueue (setting an argument per launch cost
        more host time than the launch)."""
        key = (name, colour, kind, parity)
        kernel = self._colour_kernels.get(key)
        if kernel is None:
            kernel = self.cl.Kernel(self.program, name)
            for index, parameter in enumerate(self.kernel_parameters[name]):
                value = {"solve_colour": np.int32(colour), "colour_round": np.int32(colour),
                         "solve_kind": np.int32(kind)}.get(
                    parameter, self.arguments[parameter])
                kernel.set_arg(index, value[parity] if isinstance(value, ByParity) else value)
            self._colour_kernels[key] = kernel
        return kernel

    def _colour_pairs(self, parity):
        """List and colour a detection's body pairs (61_pair_colouring.cl) without waiting for the
        device. The rounds enqueued are the most an earlier detection needed and SPARE_COLOUR_ROUNDS
        more, the colours launched the most an earlier one used; a pair they leave uncoloured, or
        coloured past them, is the overflow's, which one work-item solves after the colours, one
        pair after another (Box2D's overflow constraints). The totals are read back as the device
        gets there and taken at the next detection, which grows the pair slots if a body filled its
        own. The first detection has nothing earlier to go by: it waits for its totals."""
        cl, a = self.cl, self.arguments
        totals = self._pair_totals
        first = self._totals_read is None
        if not first:
            self._take_totals()
        while True:
            cl.enqueue_fill_buffer(self.queue, a["pair_totals"], np.int32(0), 0, totals.nbytes)
            cl.enqueue_fill_buffer(self.queue, a["body_impact"], np.int32(0), 0, 4 * self.body_count)
            self._enqueue(self._kernels["list_solve_pairs"][parity], "list_solve_pairs",
                          *self._work_sizes["list_solve_pairs"])
            slots = (round_up(self.body_count * self.max_pairs),)
            self._enqueue(self._kernels["reduce_pair_manifolds"][parity], "reduce_pair_manifolds", slots, None)
            rounds = 0
            while True:
                for colour_round in range(rounds, rounds + self.colour_rounds + SPARE_COLOUR_ROUNDS):
                    for name in ("bid_for_colour", "take_colour"):
                        self._enqueue(self._colour_kernel(name, colour_round, 0, parity), name, slots, None)
                rounds = colour_round + 1
                if not first:
                    break
                cl.enqueue_copy(self.queue, totals, a["pair_totals"])
                if totals[3] > MAX_PAIR_COLOURS:
                    raise TooManyPairs()
                if totals[1] > self.max_pairs or totals[2] == totals[0]:
                    break
            if not first or totals[1] <= self.max_pairs:
                break
            self._grow_pair_slots(int(totals[1]))
        if first:
            self._raise_colours(totals)
        self._set_argument("colour_limit", np.int32(self.colour_limit))
        one = ((1,), (1,))
        self._enqueue(self._kernels["start_colours"][parity], "start_colours", *one)
        self._enqueue(self._kernels["gather_colour_pairs"][parity], "gather_colour_pairs", slots, None)
        self._enqueue(self._kernels["sort_overflow_pairs"][parity], "sort_overflow_pairs", *one)
        self._totals_read = cl.enqueue_copy(self.queue, totals, a["pair_totals"], is_blocking=False)

    def _take_totals(self):
        """The last detection's pair totals (read back as the device got there): refuse a body
        with more colours than MAX_PAIR_COLOURS, grow the slots if a body filled its own, and raise
        the rounds and colours to what it needed."""
        self._totals_read.wait()
        totals = self._pair_totals
        if totals[3] > MAX_PAIR_COLOURS:
            raise TooManyPairs()
        if totals[1] > self.max_pairs:
            self.detections_with_dropped_pairs += 1
        if totals[1] >= self.max_pairs:
            self._grow_pair_slots(self.max_pairs + 1)
        self._raise_colours(totals)

    def _raise_colours(self, totals):
        """The rounds and colours raised to what a detection's ``totals`` needed (both start from
        1), and each colour's next launch sized from its count."""
        self.colour_rounds = max(self.colour_rounds, int(totals[4]))
        self.colour_limit = max(self.colour_limit, int(totals[3]))
        self._launch_counts = totals[PAIR_COLOUR_COUNTS:PAIR_COLOUR_COUNTS + totals[3]].astype(np.int64)

    def _grow_pair_slots(self, needed: int):
        """Every body's pair slots grown (doubled) to hold ``needed``."""
        self.max_pairs = grown_max_pairs(self.max_pairs, needed)
        self._allocate_pairs()
        self.arguments["max_pairs"] = np.int32(self.max_pairs)
        self._bind((*PAIR_SLOT_BUFFERS, "pair_count", "max_pairs"))
        self._colour_kernels.clear()
        self._substep_passes_kernels.clear()

    def _last_totals(self):
        """The last detection's pair totals once the device has them; None before any."""
        if not self.solving or self._totals_read is None:
            return None
        self._totals_read.wait()
        return self._pair_totals

    @property
    def colour_pair_counts(self) -> np.ndarray:
        """The pairs of each colour at the last detection (reads the device)."""
        totals = self._last_totals()
        if totals is None:
            return np.zeros(0, np.int64)
        return totals[PAIR_COLOUR_COUNTS:PAIR_COLOUR_COUNTS + min(int(totals[3]), MAX_PAIR_COLOURS)].astype(np.int64)

    @property
    def overflow_pair_count(self) -> int:
        """The pairs the last detection's overflow held (reads the device)."""
        totals = self._last_totals()
        return 0 if totals is None else int(totals[OVERFLOW_PAIRS])

    def _enqueue_pair_solve(self, parity, detecting=True, last_of_detection=True):
        """The solve's launches (62_pair_solve.cl): the warm start, the solve passes and the relax
        passes, at a detection's last substep the restitution passes, each a launch per colour in
        work-groups of PAIRS_PER_GROUP pairs and one of a single work-item for the overflow; the
        pairs listed and coloured when the contacts were detected. The joints (65_joints.cl) in
        each pass before the contacts, the sleepers they join to awake bodies woken before the
        passes, and those whose impulse reached their threshold broken after them."""
        if detecting:
            self._colour_pairs(parity)
        self._enqueue_joint_wakes(parity)
        backward = self.substeps_done % 2 == 1
        if self.one_launch_passes:
            kernel = self._substep_passes_kernel(last_of_detection, backward, parity)
            self._enqueue(kernel, "solve_substep_passes", *self._substep_passes_size)
        else:
            self._enqueue_colour_launches(parity, last_of_detection, backward)
        self._enqueue_break_joints(parity)
        if detecting and self.sleep[0] > 0.0:
            for name in ("spread_island_quiet", "settle_islands"):
                self._enqueue(self._kernels[name][parity], name, *self._work_sizes[name])

    def _substep_passes_kernel(self, last_of_detection, backward, parity):
        """The instance of solve_substep_passes for a substep with or without the restitution
        passes, swept forward or backward, its arguments set once but for the colours launched
        (raised by the detections)."""
        key = (last_of_detection, backward, parity)
        kernel, colour_limit = self._substep_passes_kernels.get(key, (None, None))
        if kernel is None:
            kernel = self.cl.Kernel(self.program, "solve_substep_passes")
            for index, parameter in enumerate(self.kernel_parameters["solve_substep_passes"]):
                value = {"restitution_passes": np.int32(MANIFOLD_RESTITUTION_PASSES if last_of_detection else 0),
                         "sweep_backward": np.int32(backward)}.get(parameter, self.arguments[parameter])
                kernel.set_arg(index, value[parity] if isinstance(value, ByParity) else value)
            colour_limit = int(self.arguments["colour_limit"])
        if colour_limit != self.colour_limit:
            kernel.set_arg(self.kernel_parameters["solve_substep_passes"].index("colour_limit"),
                           np.int32(self.colour_limit))
        self._substep_passes_kernels[key] = (kernel, self.colour_limit)
        return kernel

    def _enqueue_colour_launches(self, parity, last_of_detection, backward):
        """The passes as a launch per colour and pass kind, and one of a single work-item for the
        overflow."""
        kinds = [0] + [1] * self.solve_passes + [2] * self.settings.relax_passes
        if last_of_detection:
            kinds += [3] * MANIFOLD_RESTITUTION_PASSES  # once per detection (62_pair_solve.cl)
        if backward:
            # every other substep each pair's points last to first (reference.py _solve_pairs)
            kinds = [kind | SOLVE_PASS_BACKWARD if kind else kind for kind in kinds]
        counts = np.zeros(self.colour_limit, np.int64)
        known = min(len(self._launch_counts), self.colour_limit)
        counts[:known] = self._launch_counts[:known]
        sizes = [((round_up(int(COLOUR_LAUNCH_MARGIN * count) + 1, PAIRS_PER_GROUP),), (PAIRS_PER_GROUP,))
                 for count in counts]
        sizes.append(((1,), (1,)))  # the overflow, one pair after another
        for kind in kinds:
            self._enqueue_joint_colours(kind, parity)  # the joints before the contacts (Box2D's order)
            # profiled per kind: a pass's launches last as long as their slowest pair
            stage = SOLVE_STAGES[kind & 3]
            for colour, (global_size, local_size) in enumerate(sizes):
                self._enqueue(self._colour_kernel("solve_pair_contacts", colour, kind, parity),
                              stage, global_size, local_size)

    def _check_one_launch(self) -> None:
        """Raise PassesInOneLaunchFailed if a barrier of solve_substep_passes gave up since the start
        (read with the bodies, a read the caller waits for anyway)."""
        if not self.one_launch_passes:
            return
        sync = self._read(self.arguments["grid_sync"], (3,), np.int32)
        if sync[2]:
            raise PassesInOneLaunchFailed()
