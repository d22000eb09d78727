"""Frame-level driver: steps an engine through output frames and hands back body poses per frame.

The Blender layer (and the CLI, benchmarks, demos) talk to the engines only through this module:
    sim = Simulation(model, settings, frame_rate=24)
    for frame in sim.frames(250):          # a resumable generator, one item per output frame
        frame.index, frame.positions, frame.orientations   # (B, 3) COM and (B, 4) quaternions
The substep is chosen so that a whole number of substeps fits in one frame. A frame whose poses
hold NaN or infinity raises NonFiniteState instead of being handed on. Joints whose ``enabled`` is
keyed (Blender's rigid body constraints) are switched per frame from ``joint_enabled_frames``.
"""
from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass

import numpy as np

from .model import Model
from .settings import SimulationSettings, SolverParameters, automatic_substep, derive_solver_parameters

BACKENDS = ("opencl", "reference")


@dataclass
class FrameResult:
    index: int  # 0 = initial state, 1 = after the first frame's substeps, ...
    time: float  # simulated seconds
    positions: np.ndarray  # (B, 3) centre of mass, world
    orientations: np.ndarray  # (B, 4) (w, x, y, z), body frame -> world


class NonFiniteState(FloatingPointError):
    """A body's pose read back for a frame holds NaN or infinity: the simulation blew up (or was
    given such a number), and nothing of it can be baked."""

    def __init__(self, frame_index: int, body: int, count: int = 1):
        self.frame_index = frame_index  # FrameResult.index: 0 = the initial state
        self.body = body  # the first body, in body order, whose pose is not finite
        # how many are: one body's NaN can reach others within a frame (through contacts, or a
        # triangle collider's lookup), so the first of several need not be where it began
        self.count = count
        others = f" and {count - 1} more" if count > 1 else ""
        super().__init__(f"the simulation became non-finite at output frame {frame_index} (body {body}{others})")


def check_finite(index: int, positions: np.ndarray, orientations: np.ndarray) -> None:
    """Raise NonFiniteState naming the first body whose pose for frame ``index`` is not finite."""
    finite = np.isfinite(positions).all(axis=1) & np.isfinite(orientations).all(axis=1)
    if not finite.all():
        raise NonFiniteState(index, int(np.argmin(finite)), int(finite.size - np.count_nonzero(finite)))


def create_engine(model: Model, params: SolverParameters, backend: str = "opencl"):
    if backend == "opencl":
        from .opencl_engine import OpenCLEngine

        return OpenCLEngine(model, params)
    if backend == "reference":
        from .reference import ReferenceEngine

        return ReferenceEngine(model, params)
    raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")


def substeps_for_frame(model: Model, settings: SimulationSettings, frame_duration: float,
                       substeps_per_frame: int | None = None) -> tuple[int, float]:
    """(substeps per frame, substep) with the substep at or below the automatic (or given) one."""
    if substeps_per_frame is None:
        substeps_per_frame = max(1, math.ceil(frame_duration / automatic_substep(model, settings) - 1e-9))
    if substeps_per_frame < 1:
        raise ValueError("substeps per frame must be at least 1")
    return int(substeps_per_frame), frame_duration / substeps_per_frame


class Simulation:
    def __init__(self, model: Model, settings: SimulationSettings | None = None, frame_rate: float = 24.0,
                 substeps_per_frame: int | None = None, backend: str = "opencl", joint_enabled_frames=None):
        """``joint_enabled_frames``: None (the joints' ``enabled`` throughout), or (F + 1, J) bool, whether
        each joint is on in the step that ends at output frame f (row 0, the first frame's, unused: the
        model's ``enabled``), as Blender reads a keyed ``enabled`` at the frame it steps to."""
        if not frame_rate > 0:
            raise ValueError("frame rate must be positive")
        if joint_enabled_frames is not None:
            joint_enabled_frames = np.asarray(joint_enabled_frames, dtype=bool)
            joints = model.joints.count if model.joints is not None else 0
            if joint_enabled_frames.ndim != 2 or joint_enabled_frames.shape[1] != joints:
                raise ValueError(f"joint_enabled_frames must be (frames + 1, {joints}), got {joint_enabled_frames.shape}")
        self.joint_enabled_frames = joint_enabled_frames
        settings = settings or SimulationSettings()
        self.model = model
        self.frame_duration = 1.0 / frame_rate
        self.substeps_per_frame, substep = substeps_for_frame(model, settings, self.frame_duration, substeps_per_frame)
        # the solver's parameters, derived once for the engine (settings.SolverParameters)
        self.params = derive_solver_parameters(model, dataclasses.replace(settings, substep=substep))
        self.settings = self.params.settings
        self.engine = create_engine(model, self.params, backend)
        self.simulated_seconds = 0.0
        self.wall_seconds = 0.0

    @property
    def substep(self) -> float:
        return self.params.substep

    @property
    def broken_joint_count(self) -> int:
        """Joints broken so far (their breaking threshold reached; a broken joint stays broken)."""
        return int(getattr(self.engine, "broken_joint_count", 0))

    @property
    def device_name(self) -> str:
        return getattr(self.engine, "device_name", "NumPy reference (CPU)")

    def current_frame(self, index: int) -> FrameResult:
        if hasattr(self.engine, "body_poses"):
            positions, orientations = self.engine.body_poses()
        else:
            state = self.engine.body_state()
            positions, orientations = state.position, state.orientation
        # the poses are all a bake writes: a velocity gone non-finite shows in them a substep later,
        # and one that does so after the last frame's poses changes nothing baked
        check_finite(index, positions, orientations)
        return FrameResult(index, self.engine.time, positions, orientations)

    def frames(self, count: int):
        """Yield the initial state, then ``count`` frames after it (``count + 1`` results)."""
        if self.joint_enabled_frames is not None and len(self.joint_enabled_frames) < count + 1:
            raise ValueError(f"joint_enabled_frames has {len(self.joint_enabled_frames)} rows, {count + 1} frames asked")
        yield self.current_frame(0)
        for index in range(1, count + 1):
            start = time.perf_counter()
            self.engine.set_collider_frame(index - 1, self.frame_duration)
            self.engine.set_body_frame(index - 1, self.frame_duration)
            if self.joint_enabled_frames is not None:
                self.engine.set_joints_enabled(self.joint_enabled_frames[index])
            self.engine.step(self.substeps_per_frame)
            result = self.current_frame(index)  # reading back waits for the device
            self.wall_seconds += time.perf_counter() - start
            self.simulated_seconds = self.engine.time
            yield result

    @property
    def substeps_per_second(self) -> float:
        steps = self.simulated_seconds / self.substep if self.substep else 0.0
        return steps / self.wall_seconds if self.wall_seconds > 0 else 0.0
