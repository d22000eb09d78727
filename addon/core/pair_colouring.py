"""The body pairs of the coloured velocity solve and their colouring (kernels/61_pair_colouring.cl),
in NumPy for the reference step and the tests.

A pair is a body and another it has contact records with: a body of higher index, or all static
sides at once (STATIC_BODY). Body b lists its pairs in ``max_pairs`` slots, pair g = b * max_pairs + p,
in order of the other side (static first): the order of a particle's records follows the neighbour
lists, which differ between devices and the reference.
Colours come from Jones-Plassmann rounds: each round the pairs not yet coloured whose priority beats
every other uncoloured pair at both their bodies (no two of them share a body) take the smallest
colour neither body has a pair of yet, so no two pairs of a colour share a body, and there are about
as many colours as the busiest bodies have pairs. Priorities are a bijection of g (a multiplication
by an odd number modulo 2^32), so the colouring is the same on every device.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .model import STATIC_BODY

# Pair slots per body to start with; a body that needs more doubles them for every body (the
# kernels count the need, the engine grows the lists and lists again): a cube in a pile is the
# lower body of about 3-6 pairs.
INITIAL_MAX_PAIRS = 8
PRIORITY_MULTIPLIER = 0x9E3779B1
# A body needs at least as many colours as it has pairs: a cube in a pile 6-12, a dynamic board
# under a heap of gravel one per stone (each colour is a launch per pass: slow, but solved). Beyond
# this the scene is refused with a clear message. A multiple of 32 (the kernels' colour masks are
# 32-bit words; the unused words cost a clear per body and substep).
MAX_PAIR_COLOURS = 1024
# Colouring rounds a detection enqueues beyond the most an earlier one needed (a round after the
# last colour costs two idle launches; a pair the rounds leave uncoloured is the overflow's)
SPARE_COLOUR_ROUNDS = 2
# where the kernels' pair_totals holds the overflow's pair count and the colours' pair counts
# (61_pair_colouring.cl)
OVERFLOW_PAIRS = 5
PAIR_COLOUR_COUNTS = 6


class TooManyPairs(ValueError):
    """A body touches more others than the coloured solve has colours for: the scene is the user's
    to change (a ValueError: one message, no traceback, in the panel and headless)."""

    def __init__(self):
        super().__init__(f"a body touches more than {MAX_PAIR_COLOURS} others, more than Rigid Voxels' solve "
                         "takes: use Contacts: Particles, or fewer, larger bodies")


def grown_max_pairs(current: int, needed: int) -> int:
    """Pair slots per body after a body needed ``needed``: doubled until they hold it."""
    size = current
    while size < needed:
        size *= 2
    return size


def pair_priority(g: np.ndarray | int) -> np.ndarray:
    """The colouring's priority of pair slot g (as uint32: pair_priority in the kernels)."""
    return (np.asarray(g, dtype=np.uint64) * PRIORITY_MULTIPLIER) % (1 << 32)


@dataclass
class SolvePairs:
    """Pairs of one detection: slot -> (lower body, other side), colours, and how many colours are
    solved as colours (the rest, and the pairs left uncoloured, colour -1, are the overflow)."""
    max_pairs: int
    pair_slot: np.ndarray       # (G,) g = b * max_pairs + p
    pair_body: np.ndarray       # (G,)
    pair_other: np.ndarray      # (G,) a body of higher index or STATIC_BODY
    pair_colour: np.ndarray     # (G,)
    rounds: int = 0             # the colouring rounds that coloured a pair
    colour_limit: int | None = None

    @property
    def colour_count(self) -> int:
        return int(self.pair_colour.max()) + 1 if len(self.pair_colour) else 0

    @property
    def solved_colours(self) -> int:
        """The colours solved as colours (launched one after another)."""
        limit = self.colour_count if self.colour_limit is None else self.colour_limit
        return min(limit, self.colour_count)

    def of_colour(self, colour: int) -> np.ndarray:
        """Indices (into the arrays) of colour ``colour``'s pairs, in slot order."""
        return np.flatnonzero(self.pair_colour == colour)

    def overflow(self) -> np.ndarray:
        """Indices of the overflow's pairs, in slot order: solved one after another after the
        colours (61_pair_colouring.cl sort_overflow_pairs)."""
        return np.flatnonzero((self.pair_colour < 0) | (self.pair_colour >= self.solved_colours))


def list_pairs(body_records: list[list[int]], max_pairs: int) -> tuple[dict, int]:
    """Each body's pairs from its records' other sides (sleeping bodies and the mirrors already left
    out), in order of the other side: ({(b, p): other}, the most pairs a body needed)."""
    pairs = {}
    needed = 0
    for b, records in enumerate(body_records):
        others = sorted({other if other >= 0 else STATIC_BODY for other in records})
        needed = max(needed, len(others))
        for p, key in enumerate(others[:max_pairs]):
            pairs[(b, p)] = key
    return pairs, needed


def colour_pairs(pairs: dict, max_pairs: int, body_count: int, rounds: int | None = None,
                 colour_limit: int | None = None) -> SolvePairs:
    """Jones-Plassmann colouring of ``pairs`` (list_pairs) as the kernels do it: at most ``rounds``
    rounds (None: until every pair has a colour), ``colour_limit`` colours solved as colours."""
    keys = sorted(pairs)
    slot = np.array([b * max_pairs + p for b, p in keys], dtype=np.int64)
    body = np.array([b for b, _ in keys], dtype=np.int64)
    other = np.array([pairs[k] for k in keys], dtype=np.int64)
    colour = np.full(len(keys), -1, dtype=np.int64)
    priority = pair_priority(slot).astype(np.int64)
    used: list[set[int]] = [set() for _ in range(body_count)]
    round_ = rounds_used = 0
    while (colour < 0).any() and (rounds is None or round_ < rounds):
        open_ = colour < 0
        best = np.full(body_count, -1, dtype=np.int64)
        np.maximum.at(best, body[open_], priority[open_])
        dynamic = open_ & (other >= 0)
        np.maximum.at(best, other[dynamic], priority[dynamic])
        wins = open_ & (best[body] == priority) & ((other < 0) | (best[np.maximum(other, 0)] == priority))
        for index in np.flatnonzero(wins):
            taken = used[body[index]] | (used[other[index]] if other[index] >= 0 else set())
            chosen = next(c for c in range(MAX_PAIR_COLOURS + 1) if c not in taken)
            if chosen == MAX_PAIR_COLOURS:
                raise TooManyPairs()
            colour[index] = chosen
            rounds_used = round_ + 1
            used[body[index]].add(chosen)
            if other[index] >= 0:
                used[other[index]].add(chosen)
        round_ += 1
    return SolvePairs(max_pairs, slot, body, other, colour, rounds_used, colour_limit)
