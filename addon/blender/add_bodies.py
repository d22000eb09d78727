"""Conversion stage 4: every body into the ModelBuilder in world space, duplicates in one batch
(``add_bodies``), and the BodyLink that maps each body of the model back to its object."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..core import voxelize as vox
from ..core.model_builder import ModelBuilder
from ..core.rotations import matrix_quaternions, pose_matrices
from ..core.settings import ObjectSettings
from .body_geometry import Shape
from .scene_objects import ConversionError
from .voxelize_bodies import BodyParticles


@dataclass
class BodyLink:
    """Stage 4: how a body of the model maps back to its object."""

    object_name: str
    body_index: int
    matrix_world: np.ndarray  # (4, 4) at the first frame
    com_local: np.ndarray  # (3,) == model.body_com_local[body_index] (world centre of mass at the first frame)
    particle_count: int = 0
    mode: str = ""  # 'filled', 'shell' or 'filled+shell'
    instancer: str = ""  # a body of an instance of this instancer (object_name is the instancer's too) ...
    instance_mesh: int = -1  # ... showing its mesh number instance_mesh (InstancerBodies.meshes)
    body_name: str = ""  # for messages: the object's name, an instance's <instancer>[n]

    @property
    def name(self) -> str:
        return self.body_name or self.object_name


def object_matrix_at(link: BodyLink, position, orientation) -> np.ndarray:
    """World matrix of the object of ``link`` when its body has COM ``position`` and quaternion
    ``orientation`` (w, x, y, z): T(x) R(q) T(-com_local) matrix_world_at_start."""
    return pose_matrices(np.asarray(position)[None], np.asarray(orientation)[None],
                         np.asarray(link.com_local)[None], np.asarray(link.matrix_world)[None])[0]


def _body_mass(settings: ObjectSettings, shape: Shape, result: vox.VoxelResult, diameter: float) -> float:
    if settings.mass_mode == "MASS":
        return float(settings.mass)
    volume = shape.volume if (result.filled_count and shape.volume > 0) else len(result.points) * diameter**3
    return float(settings.density) * volume


def add_bodies(builder: ModelBuilder, particles: BodyParticles) -> list:
    """Add every body to ``builder`` in world space (position 0, identity orientation), duplicates in
    one batch; returns a ``BodyLink`` per body, in body order (``com_local`` set after finalize)."""
    d = 2 * particles.radius
    links = []
    groups: dict = {}
    for body in particles.bodies:
        groups.setdefault(id(body.shape), []).append(body)
    materials: dict = {}
    for group in groups.values():
        shape = group[0].shape
        res = shape.result
        # R = M S^-1 with the shape's S (equal within float32 noise for every member of the group;
        # instances sharing a shape differ by up to INSTANCE_SIZE_STEP: then M S^-1 also stretches)
        m4s = np.array([body.item.matrix_world for body in group])
        rot = m4s[:, :3, :3] @ shape.inv_stretch
        trans = m4s[:, :3, 3]
        points = np.einsum("kij,nj->kni", rot, res.points) + trans[:, None, :]
        # the support spheres turn with the particles; an instance's stretch (INSTANCE_SIZE_STEP at
        # most) shrinks them by its smallest factor, so that they stay inside the surface
        spheres = np.zeros(points.shape[:2] + (4,))
        spheres[..., :3] = np.einsum("kij,nj->kni", rot, res.support_spheres[:, :3])
        spheres[..., 3] = np.linalg.svd(rot, compute_uv=False).min(axis=1)[:, None] * res.support_spheres[:, 3]
        instances = group[0].item.instance_mesh is not None
        masses = np.empty(len(group))
        for k, body in enumerate(group):
            masses[k] = _body_mass(body.item.settings, shape, res, d)
            if instances and body.item.settings.mass_mode != "MASS":  # its own volume
                masses[k] *= abs(np.linalg.det(rot[k]))
            if not (masses[k] > 0 and math.isfinite(masses[k])):
                raise ConversionError(f"{body.item.name}: mass must be positive (got {masses[k]:g} kg)")
        mats = []
        for body in group:
            settings = body.item.settings
            mkey = (settings.friction, settings.bounciness, settings.linear_damping, settings.angular_damping)
            if mkey not in materials:
                try:
                    materials[mkey] = settings.material()
                except ValueError as error:
                    raise ConversionError(f"{group[0].item.name}: {error}") from error
            mats.append(materials[mkey])
        velocities = np.array([b.item.settings.initial_velocity for b in group], dtype=np.float64).reshape(-1, 3)
        spins = np.array([b.item.settings.initial_angular_velocity for b in group], dtype=np.float64).reshape(-1, 3)
        try:
            # the lattice's axes are R's (each object voxelized along its own axes): its voxels meet
            # the ground with their corners (core.voxel_corners). A mirrored object's R is a
            # reflection; flipping one axis gives a rotation with the same (unsigned) axes.
            lattice = rot.copy()
            if instances:  # the rotation of R D (D: the stretch of a shared shape), columns made unit
                lattice /= np.linalg.norm(lattice, axis=1, keepdims=True)
            lattice[np.linalg.det(lattice) < 0, :, 0] *= -1.0
            indices = list(builder.add_bodies(points, masses=masses, velocities=velocities,
                                              angular_velocities=spins, materials=mats,
                                              corner_reach=res.corner_reach, support_spheres=spheres,
                                              lattice_orientations=matrix_quaternions(lattice)))
        except ValueError as error:
            raise ConversionError(f"{group[0].item.name}: {error}") from error
        for k, body in enumerate(group):
            item = body.item
            links.append(BodyLink(item.instancer or item.name, int(indices[k]), item.matrix_world.copy(), np.zeros(3),
                                  len(res.points), res.mode, item.instancer,
                                  item.instance_mesh.ordinal if item.instance_mesh is not None else -1, item.name))
    links.sort(key=lambda link: link.body_index)
    return links
