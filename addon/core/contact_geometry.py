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
    label: str  # the panel's Contacts menu
    description: str  # what a user sees of it (the menu item's tooltip, before the cost)
    summary: str  # the same in a few words (the Contacts tooltip, --help)
    cost: str  # its time against the others
    # Default stiffness target (fraction of the particle radius a contact sinks under the design load)
    target_penetration: float
    # Default passes of the velocity solve over the contacts after each substep (kernels 60-62);
    # 0: this geometry has no solve and takes none
    solve_passes: int
    # Neighbour lists (opencl_engine): how far they reach beyond contact distance (a fraction of the
    # particle diameter), how many other-body particles one holds, and after which fraction of the
    # skin a moving body has them rebuilt (None: the engine derives it from voxel_pairs.VOXEL_PAIR_REACH
    # and the skin, which it may be given)
    neighbour_skin: float
    neighbour_slots: int
    rebuild_fraction: float | None
    # The stiffness target without the solve (solve_passes 0), for a geometry that has one
    springs_only_target_penetration: float | None = None

    def default_target_penetration(self, solve_passes: int) -> float:
        if solve_passes or self.springs_only_target_penetration is None:
            return self.target_penetration
        return self.springs_only_target_penetration

    def tooltip(self) -> str:
        return f"{self.description}. {self.cost[0].upper()}{self.cost[1:]}"


PARTICLES = ContactGeometry(
    name="particles", label="Particles (fast)",
    description="Bodies meet particle against particle. A face rests on the tops of the other body's particles, so "
                "a 1 m cube across the joint of two sinks about 4.5 cm and rows of offset cubes nest",
    summary="sphere against sphere, faces settling into the hollows between particles",
    cost="the faster of the two",
    # piles flow at any stiffness (E4, E10): stiffer springs only cost substeps
    target_penetration=0.05, solve_passes=0,
    # a skin of 0.5 measured fastest (docs/experiments/engine-layouts.md); rebuilt after 0.45 of it
    # (a little under half, for float rounding)
    neighbour_skin=0.5, neighbour_slots=16, rebuild_fraction=0.45)
VOXELS = ContactGeometry(
    name="voxels", label="Rigid Voxels",
    description="Solid bodies meet voxel against voxel, box against box, and a velocity solve keeps them from "
                "sinking into each other: flat faces, sharp edges, still stacks, bounces at the bounciness set, and "
                "piles that stand like rigid boxes (a 1000-cube pile keeps Newton's shape) instead of flowing",
    summary="solid bodies pile and stack like rigid boxes, their contacts solved",
    cost="about 10x the time of Particles on a CPU, 12-30x on a GPU",
    # whole voxels box against box (voxel_pairs), their contacts solved at the velocity level: the
    # solve's stiffness on top of the particles' target (E15, E16); springs alone stand a pile like
    # Newton's and Bullet's boxes only 16x stiffer, at 4x the substeps (E12)
    target_penetration=0.05, solve_passes=16, springs_only_target_penetration=0.05 / 16,
    # voxel_pairs meets up to VOXEL_PAIR_REACH (2 sqrt(3)) radii apart: the engine sets the rebuild
    # fraction so that every pair within it stays listed (0.12 of a diameter's skin: 3.52 r)
    neighbour_skin=1.0, neighbour_slots=32, rebuild_fraction=None)

CONTACT_GEOMETRY = {geometry.name: geometry for geometry in (PARTICLES, VOXELS)}
CONTACT_GEOMETRIES = tuple(CONTACT_GEOMETRY)
