"""Static description of a particle rigid-body scene (the *model*); model_builder.py makes it.

The split follows MuJoCo's mjModel/mjData and Warp's builder -> model -> state: a ``ModelBuilder``
collects bodies, particles and colliders in Python lists; ``ModelBuilder.finalize()`` freezes them
into a ``Model`` of flat, contiguous numpy arrays (Box2D v3 style) that the engines upload as-is.
Nothing here imports bpy or pyopencl.

Conventions
- Quaternions are (w, x, y, z), like Blender's ``mathutils.Quaternion``.
- A body's frame is the frame in which its particle offsets are given; the body's *position* is
  its centre of mass in world space. ``Model.body_com_local`` keeps where the centre of mass sits in
  the caller's frame, so callers can map a simulated pose back to their own origin.
- Each particle stands for a cube of side ``2 * radius`` (a voxel): its mass is the body's mass
  divided evenly, and its own rotational inertia (m d^2 / 6 about each axis) is added to the
  point-mass sum, so a box voxelised into particles gets exactly the analytic box inertia.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .joints import JointModel
from .kinematic import KinematicPaths

STATIC_BODY = -1  # body index stored for particles that belong to no dynamic body


@dataclass(frozen=True)
class Material:
    """Surface and damping properties of a body or collider.

    friction: Coulomb coefficient mu. A contact combines its sides' by SimulationSettings.material_combine
        (sqrt(mu_a * mu_b) by default, Bullet's mu_a * mu_b for a Blender Rigid Body world).
    restitution: coefficient of restitution e in [0, 1]. A contact combines them by the same rule
        ((e_a + e_b) / 2 by default, Bullet's e_a * e_b).
    rolling_friction: rolling resistance coefficient (dimensionless, torque = coefficient * radius *
        normal force against the relative rolling). Bodies made of spheres have rounded edges and
        roll too easily; this is the usual DEM remedy. A contact uses sqrt(a * b).
    linear_damping / angular_damping: fraction of velocity lost per second (Blender's meaning).
    """

    friction: float = 0.5
    restitution: float = 0.0
    rolling_friction: float = 0.1
    linear_damping: float = 0.0
    angular_damping: float = 0.0

    def __post_init__(self):
        if not (self.friction >= 0.0 and np.isfinite(self.friction)):
            raise ValueError(f"friction must be >= 0, got {self.friction}")
        if not (self.rolling_friction >= 0.0 and np.isfinite(self.rolling_friction)):
            raise ValueError(f"rolling friction must be >= 0, got {self.rolling_friction}")
        if not (0.0 <= self.restitution <= 1.0):
            raise ValueError(f"restitution must be in [0, 1], got {self.restitution}")
        for name in ("linear_damping", "angular_damping"):
            value = getattr(self, name)
            if not (0.0 <= value < 1.0):
                raise ValueError(f"{name} must be in [0, 1), got {value}")


@dataclass
class Model:
    """Frozen scene description as flat arrays. Built by ``ModelBuilder.finalize``."""

    particle_radius: float
    # bodies (B)
    body_mass: np.ndarray  # (B,) float64
    body_inertia_local: np.ndarray  # (B, 3, 3) inertia tensor about the COM, body frame
    body_inv_inertia_local: np.ndarray  # (B, 3, 3)
    body_first_particle: np.ndarray  # (B,) int32, index into the particle arrays
    body_particle_count: np.ndarray  # (B,) int32
    body_com_local: np.ndarray  # (B, 3) COM in the caller's body frame
    body_effective_mass: np.ndarray  # (B,) mass one flat-face contact carries, for damping
    body_material: np.ndarray  # (B,) int32 index into materials
    # initial state of bodies
    body_position: np.ndarray  # (B, 3) COM, world
    body_orientation: np.ndarray  # (B, 4) (w, x, y, z)
    body_velocity: np.ndarray  # (B, 3)
    body_angular_velocity: np.ndarray  # (B, 3) world frame
    # particles (P): dynamic particles first, grouped by body, then static particles
    particle_offset: np.ndarray  # (P, 3) offset from the body's COM in the body frame; world position for static ones
    particle_body: np.ndarray  # (P,) int32, STATIC_BODY for static particles
    # How far each particle's voxel reaches into the corners of its cube (0: a sphere of the particle
    # radius; 1: the whole voxel, a cube of side one diameter, a little rounded). Used against planes
    # and triangle faces, so that a box made of voxels meets the ground with its sharp edges and
    # corners instead of the particles' round ones (voxel_corners.voxel_support). 0 for static particles.
    particle_corner_reach: np.ndarray  # (P,) float64 in [0, 1]
    # A voxel's support sphere against planes and triangle faces, in place of its reach: its centre
    # less the particle's centre, in the body frame (x, y, z), and its radius (0: none, the voxel
    # by its corner reach). The mesh's osculating sphere under a voxel near a curved surface
    # (core.support_spheres), so a converted ball touches the ground as a ball. Zero for static particles.
    particle_support_sphere: np.ndarray  # (P, 4) float64
    # Rotation from each body's frame to the axes of its particles' voxel lattice (w, x, y, z):
    # identity when the particles were given in the lattice's own frame.
    body_lattice_orientation: np.ndarray  # (B, 4)
    static_particle_material: np.ndarray  # (S,) int32 material of each static particle
    # infinite planes (G): a point on the plane and its unit normal pointing into the free side
    plane_point: np.ndarray  # (G, 3)
    plane_normal: np.ndarray  # (G, 3)
    plane_material: np.ndarray  # (G,) int32
    # static triangle meshes, all meshes' vertices and triangles in one list (V vertices, T triangles)
    mesh_vertices: np.ndarray  # (V, 3) world, at the first output frame
    mesh_triangles: np.ndarray  # (T, 3) int32 indices into mesh_vertices
    triangle_material: np.ndarray  # (T,) int32
    # (F, V, 3) vertex positions at output frames 0..F-1 when any mesh is animated, else None
    mesh_vertex_frames: np.ndarray | None
    # materials (M)
    materials: list = field(default_factory=list)
    # bodies moved by their animation for some frames (core.kinematic), None when there are none
    kinematic: KinematicPaths | None = None
    # constraints between bodies (core.joints), None when there are none
    joints: JointModel | None = None

    @property
    def has_kinematic_bodies(self) -> bool:
        return self.kinematic is not None

    @property
    def body_count(self) -> int:
        return int(self.body_mass.shape[0])

    @property
    def particle_count(self) -> int:
        return int(self.particle_body.shape[0])

    @property
    def dynamic_particle_count(self) -> int:
        return int(np.count_nonzero(self.particle_body != STATIC_BODY))

    @property
    def plane_count(self) -> int:
        return int(self.plane_point.shape[0])

    @property
    def triangle_count(self) -> int:
        return int(self.mesh_triangles.shape[0])

    def collider_vertices_at(self, frame: int) -> np.ndarray:
        """Mesh vertices at output frame ``frame`` (held at the last frame given, if beyond it)."""
        if self.mesh_vertex_frames is None:
            return self.mesh_vertices
        return self.mesh_vertex_frames[min(max(frame, 0), len(self.mesh_vertex_frames) - 1)]

    def material_table(self) -> np.ndarray:
        """(M, 5) float array: friction, restitution, linear damping, angular damping, rolling friction."""
        return np.array(
            [[m.friction, m.restitution, m.linear_damping, m.angular_damping, m.rolling_friction]
             for m in self.materials],
            dtype=np.float64,
        ).reshape(-1, 5)


def body_extents(model) -> np.ndarray:
    """(B,) distance from each body's centre of mass to its farthest particle surface."""
    if model.body_count == 0:
        return np.zeros(0)
    norms = np.linalg.norm(model.particle_offset[: int(model.body_particle_count.sum())], axis=1)
    return np.maximum.reduceat(norms, model.body_first_particle) + model.particle_radius
