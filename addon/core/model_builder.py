"""``ModelBuilder``: collects bodies, particles and colliders in Python lists, checks what it is given
(a ValueError with a message for users), and freezes them into a ``Model`` (model.py has the
conventions: quaternions (w, x, y, z), a body's frame, the voxel particles' inertia)."""
from __future__ import annotations

import numpy as np

from .joints import DEFAULT_BULLET_SUBSTEP, concatenate_joints, fixed_joint_model, joint_model, joint_spec
from .kinematic import KinematicPaths
from .model import STATIC_BODY, Material, Model
from .rotations import quaternion_multiply, quaternion_to_matrix


def _corner_reach(value, shape) -> np.ndarray:
    reach = np.asarray(value, dtype=np.float64)
    try:
        reach = np.broadcast_to(reach, shape).copy()
    except ValueError:
        raise ValueError(f"corner reach must be a number or one per particle, got shape {reach.shape}") from None
    if not np.all((reach >= 0) & (reach <= 1)):
        raise ValueError("corner reach must be between 0 and 1")
    return reach


def _support_spheres(value, shape) -> np.ndarray:
    """``value``: None (no sphere), or (centre offset, radius) per particle, broadcast to ``shape`` + (4,)."""
    if value is None:
        return np.zeros(shape + (4,))
    spheres = np.asarray(value, dtype=np.float64)
    try:
        spheres = np.broadcast_to(spheres, shape + (4,)).copy()
    except ValueError:
        raise ValueError(f"support spheres must be (x, y, z, radius) per particle, got shape {spheres.shape}") from None
    if not np.all(np.isfinite(spheres)) or np.any(spheres[..., 3] < 0):
        raise ValueError("support spheres must be finite, their radii >= 0")
    return spheres


def _unit_quaternions(value, count) -> np.ndarray:
    q = np.asarray(value, dtype=np.float64)
    try:
        q = np.broadcast_to(q, (count, 4)).copy()
    except ValueError:
        raise ValueError(f"lattice orientations must be (w, x, y, z) per body, got shape {q.shape}") from None
    norm = np.linalg.norm(q, axis=1, keepdims=True)
    if not np.all(np.isfinite(norm) & (norm > 0)):
        raise ValueError("lattice orientation quaternions must be finite and non-zero")
    return q / norm


def particle_inertia(offsets: np.ndarray, particle_mass: float, particle_diameter: float) -> np.ndarray:
    """Inertia tensor about the origin of equal-mass voxel particles at ``offsets`` (N, 3)."""
    offsets = np.asarray(offsets, dtype=np.float64)
    r2 = np.einsum("ij,ij->i", offsets, offsets)
    point_sum = np.eye(3) * r2.sum() - offsets.T @ offsets
    own = np.eye(3) * (len(offsets) * particle_diameter**2 / 6.0)
    return particle_mass * (point_sum + own)


class ModelBuilder:
    """Collects bodies and colliders; ``finalize()`` returns a ``Model``.

    All particles of a simulation share one radius (``particle_radius``).
    """

    def __init__(self, particle_radius: float):
        if not (particle_radius > 0 and np.isfinite(particle_radius)):
            raise ValueError(f"particle radius must be a positive number, got {particle_radius}")
        self.particle_radius = float(particle_radius)
        self._materials: list[Material] = []
        self._material_index: dict[Material, int] = {}
        # bodies are kept in chunks of arrays (one chunk per add_body/add_bodies call), so that a
        # million linked duplicates are added and finalized without a Python loop per body
        self._chunks: list[dict] = []
        self._body_total = 0
        self._static_particles: list[tuple[np.ndarray, int]] = []
        self._planes: list[tuple[np.ndarray, np.ndarray, int]] = []
        self._meshes: list[tuple[np.ndarray, np.ndarray, int, np.ndarray | None]] = []
        self._paths: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._joints: list[dict] = []
        self._bonds: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []  # add_bonds' arrays
        # what Blender's joint impulses are per (breaking_threshold, motor max impulse): 1 / (scene fps x
        # the world's substeps_per_frame) seconds
        self.bullet_substep = DEFAULT_BULLET_SUBSTEP

    @property
    def particle_diameter(self) -> float:
        return 2.0 * self.particle_radius

    @property
    def body_count(self) -> int:
        return self._body_total

    @property
    def particle_count(self) -> int:
        return (sum(c["offsets"].shape[0] * c["offsets"].shape[1] for c in self._chunks)
                + sum(len(p) for p, _ in self._static_particles))

    def particle_positions(self) -> tuple[np.ndarray, np.ndarray]:
        """(world positions (P, 3), body index (P,)) of the dynamic bodies' particles at their initial
        poses, in body order (what core.glue finds touching bodies from)."""
        positions, bodies = [np.zeros((0, 3))], [np.zeros(0, dtype=np.int32)]
        first = 0
        for chunk in self._chunks:
            count, n = chunk["offsets"].shape[:2]
            turned = np.einsum("kij,knj->kni", quaternion_to_matrix(chunk["orientation"]), chunk["offsets"])
            positions.append((turned + chunk["position"][:, None, :]).reshape(-1, 3))
            bodies.append(np.repeat(np.arange(first, first + count, dtype=np.int32), n))
            first += count
        return np.concatenate(positions), np.concatenate(bodies)

    def lattice_orientations(self) -> np.ndarray:
        """(bodies, 4) each dynamic body's voxel lattice axes in the world at its initial pose (w, x, y, z)."""
        parts = [quaternion_multiply(chunk["orientation"], chunk["lattice"]) for chunk in self._chunks]
        return np.concatenate(parts) if parts else np.zeros((0, 4))

    def _append_chunk(self, **arrays) -> list[int]:
        count = len(arrays["mass"])
        first = self._body_total
        self._chunks.append(arrays)
        self._body_total += count
        return list(range(first, first + count))

    def _material(self, material: Material | None) -> int:
        material = material or Material()
        if material not in self._material_index:
            self._material_index[material] = len(self._materials)
            self._materials.append(material)
        return self._material_index[material]

    def add_body(
        self,
        particles,
        *,
        mass: float | None = None,
        density: float | None = None,
        position=(0.0, 0.0, 0.0),
        orientation=(1.0, 0.0, 0.0, 0.0),
        velocity=(0.0, 0.0, 0.0),
        angular_velocity=(0.0, 0.0, 0.0),
        material: Material | None = None,
        corner_reach=0.0,
        lattice_orientation=(1.0, 0.0, 0.0, 0.0),
        support_spheres=None,
    ) -> int:
        """Add a rigid body made of ``particles`` (N, 3), given in the body's own frame.

        ``position``/``orientation`` place that frame in the world (the frame's origin, not the COM).
        Give ``mass`` (kg) or ``density`` (kg/m^3, applied to the particles' voxel volume).
        ``velocity`` is the COM's, ``angular_velocity`` is in world space (rad/s).
        ``corner_reach`` (scalar or (N,)): how far each particle's voxel cube is solid to its
        corners, 0 (a sphere, the default) to 1 (a box made of voxels: sharp against the ground);
        ``voxelize`` computes it from a mesh. ``lattice_orientation``: the voxel lattice's axes in
        the body's frame (the particles' frame is the lattice's by default). ``support_spheres``
        (N, 4) or None: each voxel's support sphere against colliders, its centre less the
        particle's in the particles' frame and its radius (0: none; ``voxelize`` computes them, see
        Model.particle_support_sphere).
        Returns the body index.
        """
        pts = np.asarray(particles, dtype=np.float64).reshape(-1, 3)
        if len(pts) == 0:
            raise ValueError("a body needs at least one particle")
        if not np.all(np.isfinite(pts)):
            raise ValueError("particle positions must be finite")
        voxel_volume = self.particle_diameter**3
        if mass is None:
            if density is None:
                raise ValueError("give a mass or a density")
            mass = float(density) * voxel_volume * len(pts)
        mass = float(mass)
        if not (mass > 0 and np.isfinite(mass)):
            raise ValueError(f"body mass must be positive, got {mass}")
        q = np.asarray(orientation, dtype=np.float64)
        norm = np.linalg.norm(q)
        if not norm > 0:
            raise ValueError("orientation quaternion must be non-zero")
        q = q / norm
        com_local = pts.mean(axis=0)
        offsets = pts - com_local
        inertia = particle_inertia(offsets, mass / len(pts), self.particle_diameter)
        rotation = quaternion_to_matrix(q)
        return self._append_chunk(
            offsets=offsets[None],
            corner_reach=_corner_reach(corner_reach, (1, len(pts))),
            support=_support_spheres(support_spheres, (1, len(pts))),
            lattice=_unit_quaternions(lattice_orientation, 1),
            mass=np.array([mass]),
            inertia=inertia[None],
            com_local=com_local[None],
            position=(np.asarray(position, dtype=np.float64) + rotation @ com_local)[None],
            orientation=q[None],
            velocity=np.asarray(velocity, dtype=np.float64).reshape(1, 3),
            angular_velocity=np.asarray(angular_velocity, dtype=np.float64).reshape(1, 3),
            material=np.array([self._material(material)], dtype=np.int32),
        )[0]

    def add_bodies(self, particles, *, masses, velocities=None, angular_velocities=None, materials=None,
                   corner_reach=0.0, lattice_orientations=(1.0, 0.0, 0.0, 0.0), support_spheres=None) -> list[int]:
        """Add K bodies of N particles each at once (linked duplicates): ``particles`` (K, N, 3) in world
        space (position 0, identity orientation), ``masses`` (K,). ``corner_reach``: scalar, (N,) or
        (K, N), see ``add_body``; ``lattice_orientations`` (K, 4) or (4,): each body's voxel lattice
        axes in world space (w, x, y, z); ``support_spheres``: None, (N, 4) or (K, N, 4) in world
        space, see ``add_body``. Returns the body indices."""
        pts = np.asarray(particles, dtype=np.float64)
        if pts.ndim != 3 or pts.shape[2] != 3 or pts.shape[1] == 0:
            raise ValueError("particles must be shaped (bodies, particles, 3)")
        count, n = pts.shape[:2]
        masses = np.broadcast_to(np.asarray(masses, dtype=np.float64), (count,))
        if not np.all(np.isfinite(pts)):
            raise ValueError("particle positions must be finite")
        if not np.all((masses > 0) & np.isfinite(masses)):
            raise ValueError("body masses must be positive")
        velocities = np.zeros((count, 3)) if velocities is None else np.asarray(velocities, np.float64).reshape(count, 3)
        spins = np.zeros((count, 3)) if angular_velocities is None else np.asarray(angular_velocities, np.float64).reshape(count, 3)
        materials = [None] * count if materials is None else list(materials)
        com = pts.mean(axis=1)
        offsets = pts - com[:, None, :]
        r2 = (offsets * offsets).sum(axis=(1, 2))
        outer = np.matmul(offsets.transpose(0, 2, 1), offsets)
        own = n * self.particle_diameter**2 / 6.0
        inertia = (masses / n)[:, None, None] * (np.eye(3) * (r2 + own)[:, None, None] - outer)
        return self._append_chunk(
            offsets=offsets, corner_reach=_corner_reach(corner_reach, (count, n)),
            support=_support_spheres(support_spheres, (count, n)),
            lattice=_unit_quaternions(lattice_orientations, count), mass=masses.copy(), inertia=inertia,
            com_local=com, position=com.copy(),
            orientation=np.tile([1.0, 0.0, 0.0, 0.0], (count, 1)), velocity=velocities.copy(),
            angular_velocity=spins.copy(),
            material=self._material_indices(materials))

    def _material_indices(self, materials) -> np.ndarray:
        by_id: dict[int, int] = {}  # most batches repeat one Material object: hash it once
        out = np.empty(len(materials), dtype=np.int32)
        for k, material in enumerate(materials):
            key = id(material)
            if key not in by_id:
                by_id[key] = self._material(material)
            out[k] = by_id[key]
        return out

    def set_kinematic_path(self, body: int, moved, positions, orientations) -> None:
        """Make ``body`` follow a path for some frames (core.kinematic): ``moved`` (F + 1,) bool, whether
        it is moved by the path in the step that ends at output frame f (row 0 unused); ``positions``
        (F + 1, 3) its centre of mass and ``orientations`` (F + 1, 4) (w, x, y, z) at each output
        frame, in the frame its particles were given in (as ``add_body``'s pose; ``add_bodies``: the
        world's, identity at the start). Every path of a model has the same F."""
        if not 0 <= body < self._body_total:
            raise ValueError(f"no body {body} to give a path")
        moved = np.asarray(moved, dtype=bool).reshape(-1)
        positions = np.asarray(positions, dtype=np.float64)
        orientations = np.asarray(orientations, dtype=np.float64)
        frames = len(moved)
        if frames < 2 or positions.shape != (frames, 3) or orientations.shape != (frames, 4):
            raise ValueError(f"a path needs (F + 1,) flags, (F + 1, 3) positions and (F + 1, 4) orientations, F >= 1; "
                             f"got {moved.shape}, {positions.shape}, {orientations.shape}")
        if not (np.isfinite(positions).all() and np.isfinite(orientations).all()):
            raise ValueError("a body's path must be finite")
        norms = np.linalg.norm(orientations, axis=1, keepdims=True)
        if not np.all(norms > 0):
            raise ValueError("a body's path orientations must be non-zero quaternions")
        if self._paths and len(next(iter(self._paths.values()))[0]) != frames:
            raise ValueError("all kinematic paths must give the same number of frames")
        self._paths[int(body)] = (moved, positions, orientations / norms)

    def _kinematic_paths(self) -> KinematicPaths | None:
        if not self._paths:
            return None
        bodies = sorted(self._paths)
        moved, positions, orientations = (np.stack([self._paths[b][k] for b in bodies], axis=1) for k in range(3))
        return KinematicPaths(np.array(bodies, dtype=np.int32), moved, positions, orientations)

    def add_joint(self, kind: str, body_a: int, body_b: int, pivot, **fields) -> int:
        """Join body_a to body_b (a body, or -1: the world) by a constraint of Blender type ``kind``
        (core.joints.JOINT_KINDS) at world point ``pivot``, its frame at the bodies' initial poses given
        by ``orientation`` (w, x, y, z, world) or ``axis`` (world: HINGE's z, the others' x). Fields
        as Blender's rigid_body_constraint (core.joints.joint_spec): use_limit_lin/ang (3 bools),
        limit_lin/ang_lower/upper (3 or 1 values), use_spring (6), spring_stiffness/damping (6 or 1),
        motor_lin/ang_velocity and motor_lin/ang_max_impulse (MOTOR), breaking_threshold (None:
        unbreakable), disable_collisions, enabled. Returns the joint index."""
        for body in (body_a, body_b):
            if not -1 <= body < self._body_total:
                raise ValueError(f"no body {body} to join")
        if body_a < 0 or body_a == body_b:
            raise ValueError("a joint's body a must be a dynamic body, and body b another one or -1")
        self._joints.append(joint_spec(kind, body_a, body_b, pivot, **fields))
        return len(self._joints) - 1

    def add_bonds(self, body_a, body_b, pivots, breaking_threshold) -> int:
        """Glue: join pairs of bodies by FIXED joints given as arrays, without a dict per joint (core.glue
        finds them): ``body_a``, ``body_b`` (J,) dynamic bodies, ``pivots`` (J, 3) world points,
        ``breaking_threshold`` (J,) or one value (Blender's: an impulse per ``bullet_substep`` and row).
        Each is add_joint("FIXED", a, b, pivot, breaking_threshold=...) with disable_collisions on; in
        the finalized model they follow every add_joint joint, in the order given. Returns J."""
        a = np.asarray(body_a, dtype=np.int64).reshape(-1)
        b = np.asarray(body_b, dtype=np.int64).reshape(-1)
        pivots = np.asarray(pivots, dtype=np.float64).reshape(-1, 3)
        try:
            threshold = np.broadcast_to(np.asarray(breaking_threshold, dtype=np.float64), a.shape).copy()
        except ValueError:
            raise ValueError(f"breaking thresholds must be one value or one per bond, got "
                             f"{np.shape(breaking_threshold)} for {len(a)} bonds") from None
        if len(b) != len(a) or len(pivots) != len(a):
            raise ValueError(f"bonds need as many body b and pivots as body a: {len(a)}, {len(b)}, {len(pivots)}")
        if len(a) and not (a.min() >= 0 and b.min() >= 0 and max(a.max(), b.max()) < self._body_total):
            raise ValueError("a bond joins two dynamic bodies of the model")
        if np.any(a == b):
            raise ValueError("a bond joins two different bodies")
        if not np.all(np.isfinite(pivots)):
            raise ValueError("bond pivots must be finite")
        if not np.all(threshold >= 0):
            raise ValueError("breaking thresholds must be >= 0")
        if len(a):
            self._bonds.append((a.astype(np.int32), b.astype(np.int32), pivots, threshold))
        return len(a)

    def add_static_mesh(self, vertices, triangles, material: Material | None = None, frames=None) -> int:
        """Add a static triangle mesh collider: ``vertices`` (V, 3) in world space, ``triangles`` (T, 3).

        ``frames``: optional (F, V, 3) vertex positions at output frames 0..F-1 for an animated
        (keyframed, parented, constrained) collider; its vertex velocities follow from them.
        Returns the mesh index.
        """
        verts = np.asarray(vertices, dtype=np.float64).reshape(-1, 3)
        tris = np.asarray(triangles, dtype=np.int64).reshape(-1, 3)
        if not np.all(np.isfinite(verts)):
            raise ValueError("mesh vertices must be finite")
        if len(tris) and (tris.min() < 0 or tris.max() >= len(verts)):
            raise ValueError("triangle indices out of range")
        if frames is not None:
            frames = np.asarray(frames, dtype=np.float64)
            if frames.ndim != 3 or frames.shape[1:] != verts.shape or len(frames) == 0:
                raise ValueError(f"frames must be shaped (F, {len(verts)}, 3), got {frames.shape}")
            if not np.all(np.isfinite(frames)):
                raise ValueError("mesh frames must be finite")
            verts = frames[0]
        self._meshes.append((verts, tris, self._material(material), frames))
        return len(self._meshes) - 1

    def add_static_particles(self, positions, material: Material | None = None) -> None:
        """Add immovable particles (infinite mass) at world ``positions`` (N, 3)."""
        pts = np.asarray(positions, dtype=np.float64).reshape(-1, 3)
        if not np.all(np.isfinite(pts)):
            raise ValueError("static particle positions must be finite")
        if len(pts):
            self._static_particles.append((pts, self._material(material)))

    def add_ground_plane(self, height: float = 0.0, normal=(0.0, 0.0, 1.0), material: Material | None = None,
                         point=None) -> None:
        """Add an infinite static plane. Bodies stay on the side ``normal`` points to.

        The plane passes through ``point`` if given, else through (0, 0, height).
        """
        n = np.asarray(normal, dtype=np.float64)
        length = np.linalg.norm(n)
        if not length > 0:
            raise ValueError("plane normal must be non-zero")
        p = np.asarray(point if point is not None else (0.0, 0.0, height), dtype=np.float64)
        self._planes.append((p, n / length, self._material(material)))

    def finalize(self) -> Model:
        def stack(key, shape):
            parts = [c[key] for c in self._chunks]
            tail = () if shape is None else ((shape,) if isinstance(shape, int) else shape)
            return np.concatenate(parts).astype(np.float64) if parts else np.zeros((0,) + tail)

        chunks = self._chunks
        body_total = self._body_total
        counts = (np.concatenate([np.full(c["offsets"].shape[0], c["offsets"].shape[1]) for c in chunks])
                  if chunks else np.zeros(0)).astype(np.int32)
        first = np.zeros(body_total, dtype=np.int32)
        if body_total > 1:
            first[1:] = np.cumsum(counts)[:-1]
        static_pts = [p for p, _ in self._static_particles]
        static_mat = [np.full(len(p), m, dtype=np.int32) for p, m in self._static_particles]
        dyn_offsets = [c["offsets"].reshape(-1, 3) for c in chunks]
        particle_offset = np.concatenate(dyn_offsets + static_pts) if (dyn_offsets or static_pts) else np.zeros((0, 3))
        corner_reach = np.concatenate([c["corner_reach"].reshape(-1) for c in chunks]
                                      + [np.zeros(len(p)) for p in static_pts] + [np.zeros(0)])
        support_sphere = np.concatenate([c["support"].reshape(-1, 4) for c in chunks]
                                        + [np.zeros((len(p), 4)) for p in static_pts] + [np.zeros((0, 4))])
        particle_body = np.concatenate(
            [np.repeat(np.arange(body_total, dtype=np.int32), counts)]
            + [np.full(len(p), STATIC_BODY, dtype=np.int32) for p in static_pts]
        ) if (body_total or static_pts) else np.zeros(0, dtype=np.int32)
        mass = stack("mass", None)
        body_position, body_orientation = stack("position", 3), stack("orientation", 4)
        joints = concatenate_joints(
            [joint_model(self._joints, body_position, body_orientation, self.bullet_substep)]
            + [fixed_joint_model(a, b, pivots, threshold, body_position, body_orientation,
                                 bullet_substep=self.bullet_substep) for a, b, pivots, threshold in self._bonds])
        inertia = stack("inertia", (3, 3))
        # A body of one particle (or a line of them) has a singular inertia tensor: it cannot be
        # set spinning about that axis by contacts at particle centres, so a zero there is fine.
        inv_inertia = inertia.copy()
        if len(inertia):
            regular = np.abs(np.linalg.det(inertia)) > 1e-12 * np.maximum(np.trace(inertia, axis1=1, axis2=2), 1e-300) ** 3
            inv_inertia[regular] = np.linalg.inv(inertia[regular])
            inv_inertia[~regular] = np.linalg.pinv(inertia[~regular]) if (~regular).any() else inv_inertia[~regular]
        # Damping is tuned for the mass that one contact of a flat face carries: a cube of n
        # particles lands on about n^(2/3) of them at once.
        effective_mass = mass / np.maximum(counts, 1) ** (2.0 / 3.0)


        vertex_base = np.cumsum([0] + [len(v) for v, _, _, _ in self._meshes])
        mesh_vertices = np.concatenate([v for v, _, _, _ in self._meshes]) if self._meshes else np.zeros((0, 3))
        mesh_triangles = (np.concatenate([t + vertex_base[i] for i, (_, t, _, _) in enumerate(self._meshes)])
                          if self._meshes else np.zeros((0, 3), dtype=np.int64))
        triangle_material = (np.concatenate([np.full(len(t), m, dtype=np.int32) for _, t, m, _ in self._meshes])
                             if self._meshes else np.zeros(0, dtype=np.int32))
        animated = [f for _, _, _, f in self._meshes if f is not None]
        vertex_frames = None
        if animated:
            frame_count = len(animated[0])
            if any(len(f) != frame_count for f in animated):
                raise ValueError("all animated colliders must give the same number of frames")
            vertex_frames = np.concatenate(
                [f if f is not None else np.broadcast_to(v, (frame_count,) + v.shape) for v, _, _, f in self._meshes],
                axis=1)
        return Model(
            particle_radius=self.particle_radius,
            body_mass=mass,
            body_inertia_local=inertia,
            body_inv_inertia_local=inv_inertia,
            body_first_particle=first,
            body_particle_count=counts,
            body_com_local=stack("com_local", 3),
            body_effective_mass=effective_mass,
            body_material=stack("material", None).astype(np.int32),
            body_position=body_position,
            body_orientation=body_orientation,
            body_velocity=stack("velocity", 3),
            body_angular_velocity=stack("angular_velocity", 3),
            particle_offset=np.asarray(particle_offset, dtype=np.float64).reshape(-1, 3),
            particle_body=particle_body.astype(np.int32),
            particle_corner_reach=corner_reach.astype(np.float64),
            particle_support_sphere=support_sphere.astype(np.float64),
            body_lattice_orientation=stack("lattice", 4),
            static_particle_material=np.concatenate(static_mat) if static_mat else np.zeros(0, dtype=np.int32),
            plane_point=np.array([p for p, _, _ in self._planes], dtype=np.float64).reshape(-1, 3),
            plane_normal=np.array([n for _, n, _ in self._planes], dtype=np.float64).reshape(-1, 3),
            plane_material=np.array([m for _, _, m in self._planes], dtype=np.int32),
            mesh_vertices=np.asarray(mesh_vertices, dtype=np.float64).reshape(-1, 3),
            mesh_triangles=np.asarray(mesh_triangles, dtype=np.int32).reshape(-1, 3),
            triangle_material=triangle_material,
            mesh_vertex_frames=vertex_frames,
            materials=list(self._materials) or [Material()],
            kinematic=self._kinematic_paths(),
            joints=joints,
        )
