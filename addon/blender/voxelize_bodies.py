"""Conversion stage 3: the particle radius, chosen and checked against the particle limit and the
device's memory before anything is allocated, and each shape voxelized once (``voxelize_bodies``)."""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..core import voxelize as vox
from ..core.device_buffers import estimate_device_memory
from ..core.settings import ConversionSettings
from .body_geometry import BodyGeometry, Shape
from .scene_objects import ConversionError

PARTICLES_ACROSS = 3  # automatic radius: the smallest body gets this many particles across its thinnest extent
MIN_PARTICLES = 8  # fewer particles cannot make a body that rotates and rests believably
MAX_PARTICLES = ConversionSettings.max_particles


@dataclass
class BodyParticles:
    """Stage 3: the radius used and each body's particles (``body.shape.result``)."""

    radius: float
    bodies: list  # list[ShapedBody], every shape voxelized
    particle_count: int


def _round_up_sig(x: float, digits: int = 2) -> float:
    if x <= 0 or not math.isfinite(x):
        return x
    scale = 10 ** (-int(math.floor(math.log10(x))) + digits - 1)
    return math.ceil(x * scale * (1 - 1e-12)) / scale


def _format_bytes(n: float) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def _round_down_sig(x: float, digits: int = 2) -> float:
    if x <= 0 or not math.isfinite(x):
        return x
    scale = 10 ** (-int(math.floor(math.log10(x))) + digits - 1)
    return math.floor(x * scale) / scale


def automatic_radius(shapes) -> float:
    """Radius that gives the smallest shape ``PARTICLES_ACROSS`` particles across its thinnest extent."""
    size = min(s.size() for s in shapes)
    return size / (2 * PARTICLES_ACROSS)


def _radius_for_budget(shapes_with_counts, radius: float, budget: int) -> float:
    r = radius
    for _ in range(60):
        total = sum(s.estimate(r) * n for s, n in shapes_with_counts)
        if total <= budget:
            return r
        r *= max(1.02, (total / budget) ** (1 / 3))
    return r


def choose_radius(geometry: BodyGeometry, radius: float | None, max_particles: int = MAX_PARTICLES,
                  device_memory: int | None = None, contact_geometry: str | None = None) -> float:
    """The particle radius (``radius``, or automatic when None), refused with a suggestion when the
    bodies would need more particles than ``max_particles`` or more than 90 % of ``device_memory``
    bytes. Checked on estimates, before any particle is allocated."""
    if not geometry.bodies:
        return float(radius) if radius is not None else 0.0
    counted = geometry.counted_shapes()
    radius_used = float(radius) if radius is not None else automatic_radius([s for s, _ in counted])
    estimate = sum(s.estimate(radius_used) * n for s, n in counted)
    if estimate > max_particles:
        suggestion = _round_up_sig(_radius_for_budget(counted, radius_used, int(0.9 * max_particles)))
        raise ConversionError(
            f"{len(geometry.bodies)} bodies at particle radius {radius_used:.4g} need about {estimate:,} particles, "
            f"more than the limit of {max_particles:,}; use a particle radius of at least {suggestion:g}"
            + (" (the automatic radius follows the smallest body)" if radius is None else ""))
    if device_memory:
        need = estimate_device_memory(estimate, len(geometry.bodies), contact_geometry)
        if need > 0.9 * device_memory:
            budget = int(0.9 * device_memory / max(need / max(estimate, 1), 1))
            suggestion = _round_up_sig(_radius_for_budget(counted, radius_used, budget))
            raise ConversionError(
                f"about {estimate:,} particles need {_format_bytes(need)} of device memory, "
                f"the device has {_format_bytes(device_memory)}; use a particle radius of at least "
                f"{suggestion:g}")
    return radius_used


def voxelize_shape(shape: Shape, radius: float, max_particles: int | None = None) -> vox.VoxelResult:
    """The particles of one shape in its frame (made once; duplicates share them)."""
    if shape.result is None:
        shape.result = vox.voxelize(shape.vertices, shape.triangles, 2 * radius, max_particles=max_particles,
                                    weld_vertices=False)
    return shape.result


def voxelize_bodies(geometry: BodyGeometry, radius: float | None, max_particles: int = MAX_PARTICLES,
                    device_memory: int | None = None, contact_geometry: str | None = None) -> BodyParticles:
    """Choose the radius (``choose_radius``) and voxelize each shape once; refuse bodies with fewer
    than ``MIN_PARTICLES`` particles (they cannot rotate believably), naming them."""
    radius_used = choose_radius(geometry, radius, max_particles, device_memory, contact_geometry)
    too_few = []
    total = 0
    for body in geometry.bodies:
        count = len(voxelize_shape(body.shape, radius_used).points)
        total += count
        if total > max_particles:
            raise ConversionError(
                f"the bodies need more than the limit of {max_particles:,} particles at radius "
                f"{radius_used:.4g}; use a larger particle radius")
        if count < MIN_PARTICLES:
            too_few.append((body.item.name, count, body.shape))
    if too_few:
        names = ", ".join(f"{name} ({count})" for name, count, _ in too_few[:5])
        more = f" and {len(too_few) - 5} more" if len(too_few) > 5 else ""
        need = min(s.size() for _, _, s in too_few) / (2 * PARTICLES_ACROSS)
        suggestion = _round_down_sig(min(radius_used, need))
        raise ConversionError(
            f"too few particles to rotate (at least {MIN_PARTICLES} needed) at radius {radius_used:.4g}: "
            f"{names}{more}; use a particle radius of at most {suggestion:g}")
    return BodyParticles(radius_used, list(geometry.bodies), total)
