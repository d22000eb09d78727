"""How two bodies meet (``SimulationSettings.contact_geometry``): one row per contact geometry.

Everything that differs between the geometries is a field here: what the panel and the CLI call
it and say about its cost, the stiffness target and velocity-solve passes it defaults to, and the
engine's neighbour lists for it. The figures are measurements (docs/experiments/contact-solve.md,
E12 and E16 for Rigid Voxels).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ContactGeometry:
    name: str  # SimulationSettings.contact_geometry, the CLI's --contact-geometry
    # the number a .blend stores for it (the Contacts menu item's): fixed, so that a saved choice
    # reads back as itself when geometries come and go; a retired geometry's number is never reused
    # (blender/properties.py RETIRED_CONTACT_GEOMETRIES)
    number: int
    label: str  # the panel's Contacts menu
    description: str  # what a user sees of it (the menu item's tooltip, before the cost)
    summary: str  # the same in a few words (the Contacts tooltip, --help)
    cost: str  # its time against the others
    # True: contacts are springs (a force from depth and speed, stepped explicitly, the substep set by
    # their stiffness); False: contacts solved at the velocity level (the solve's settings below)
    springs: bool
    # True: two bodies' whole voxels meet box against box (voxel_pairs); False: particles meet as spheres
    voxel_pairs: bool
    # Springs' stiffness target (fraction of the particle radius a contact sinks under the design load)
    target_penetration: float
    # The solve's defaults (SimulationSettings): passes and relax passes per substep, substeps per
    # detection of the contacts, the soft step's frequency (a fraction of the substep rate) and the
    # substep (seconds; None: from the springs' stiffness)
    solve_passes: int
    relax_passes: int
    substeps_per_detection: int
    solve_hertz_fraction: float
    substep: float | None
    # Neighbour lists (opencl_engine): how far they reach beyond contact distance (a fraction of the
    # particle diameter), how many other-body particles one holds, and after which fraction of the
    # skin a moving body has them rebuilt (None: the engine derives it from voxel_pairs.VOXEL_PAIR_REACH
    # and the skin, which it may be given)
    neighbour_skin: float
    neighbour_slots: int
    rebuild_fraction: float | None

    def tooltip(self) -> str:
        return f"{self.description}. {self.cost[0].upper()}{self.cost[1:]}"


PARTICLES = ContactGeometry(
    name="particles", number=0, label="Particles (fast)",
    description="Bodies meet particle against particle. A face rests on the tops of the other body's particles, so "
                "a 1 m cube across the joint of two sinks about 4.5 cm and rows of offset cubes nest",
    summary="sphere against sphere, faces settling into the hollows between particles",
    cost="the faster of the two on a GPU",
    # piles flow at any stiffness (E4, E10): stiffer springs only cost substeps
    springs=True, voxel_pairs=False, target_penetration=0.05, solve_passes=0, relax_passes=0, substeps_per_detection=1,
    solve_hertz_fraction=0.0, substep=None,
    # a skin of 0.5 measured fastest (docs/experiments/engine-layouts.md); rebuilt after 0.45 of it
    # (a little under half, for float rounding)
    neighbour_skin=0.5, neighbour_slots=16, rebuild_fraction=0.45)
VOXELS = ContactGeometry(
    name="voxels", number=2, label="Rigid Voxels",
    description="Solid bodies meet voxel against voxel, box against box, and a velocity solve keeps them from "
                "sinking into each other: flat faces, sharp edges, still stacks, bounces at the bounciness set, and "
                "piles that stand like rigid boxes (a 1000-cube pile within 2.2 % of Blender's Bullet) instead of "
                "flowing",
    summary="solid bodies pile and stack like rigid boxes, their contacts solved",
    cost="on a CPU about the time of Particles, on a GPU 1.6-4.6x it",  # H100, bd5e41f, docs/usage.md
    # whole voxels box against box (voxel_pairs), their contacts solved at the velocity level, Box2D
    # v3's step (docs/experiments/rigid-step.md): 4 substeps per 60 Hz step, each 2 solve passes and
    # 2 relax passes (with 1 the relax pass's sweep order left a two-substep limit cycle in small
    # stacks, rigid-step.md "Sweep orders"), contacts detected once per step, soft at a quarter of
    # the substep rate
    springs=False, voxel_pairs=True, target_penetration=0.05, solve_passes=2, relax_passes=2, substeps_per_detection=4,
    solve_hertz_fraction=0.25, substep=1.0 / 240.0,
    # voxel_pairs meets up to VOXEL_PAIR_REACH (2 sqrt(3)) radii apart: the engine sets the rebuild
    # fraction so that every pair within it stays listed (0.12 of a diameter's skin: 3.52 r)
    neighbour_skin=1.0, neighbour_slots=32, rebuild_fraction=None)

CONTACT_GEOMETRY = {geometry.name: geometry for geometry in (PARTICLES, VOXELS)}
CONTACT_GEOMETRIES = tuple(CONTACT_GEOMETRY)


def listed(words) -> str:
    """'a', 'a and b', 'a, b and c'."""
    words = list(words)
    return ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else "".join(words)


def automatic_substeps(name=lambda geometry: geometry.label) -> str:
    """What automatic substeps give for each geometry (the panel's Substeps tooltip, the CLI's
    --substeps help), each geometry called ``name(geometry)``."""
    fixed = [f"{1.0 / g.substep:g} per second for {name(g)}" for g in CONTACT_GEOMETRY.values() if g.substep is not None]
    derived = [name(g) for g in CONTACT_GEOMETRY.values() if g.substep is None]
    return "; ".join(fixed + ([f"for {listed(derived)}, from the contact stiffness and the lightest body"]
                              if derived else []))
