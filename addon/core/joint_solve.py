"""The joints' part of OpenCLEngine (kernels/65_joints.cl; the model is core/joints.py, the NumPy
specification reference_joints.py): their tables uploaded, their colours' launches in each pass of
the velocity solve (or their loop in solve_substep_passes), the sleepers they wake before the
passes, their breaking after them, and what the bake reads back (how many broke, which).

The joints are coloured once, on the host (joints.joint_colouring): they are fixed for a
simulation but for breaking, which only drops joints. Blender's ``enabled`` can be keyed: the
host sets it per frame (``set_joints_enabled``), a bit of ``joint_state`` beside the device's
``broken`` bit.
"""
from __future__ import annotations

import numpy as np

from .device_buffers import DEVICE_BUFFERS, quat_to_device, round_up, vec4
from .joints import (JOINT_BROKEN, JOINT_ENABLED, JOINT_IMPULSES, JOINT_MODE_LIMITS, JOINT_MODE_MOTORS,
                     JOINT_MODE_SPRINGS, JOINT_NO_COLLISIONS, JOINT_ROW_FIELDS, LIMITED, ROWS, STATIC_SIDE,
                     joint_colouring, joint_hertz)
from .reference_joints import soft

# Work-items per work-group of a joint colour's launch
JOINTS_PER_GROUP = 64


def joint_tables(model, substep: float) -> dict[str, np.ndarray]:
    """The joints' device tables of ``model`` (its JointModel), by kernel parameter name; the
    colours as joint_colour_start / joint_colour_order."""
    joints = model.joints
    count = joints.count
    a, b = joints.body_a.astype(np.int32), joints.body_b.astype(np.int32)
    colour_start, order = joint_colouring(a, b)
    modes = sum(joints.mode[:, row].astype(np.int32) << (2 * row) for row in range(ROWS))
    sprung = ((joints.spring_stiffness > 0) | (joints.spring_damping > 0)).any(axis=1)
    modes = (modes | np.where(sprung, JOINT_MODE_SPRINGS, 0) | np.where((joints.motor_max_impulse > 0).any(axis=1),
             JOINT_MODE_MOTORS, 0) | np.where((joints.mode == LIMITED).any(axis=1), JOINT_MODE_LIMITS, 0))
    rows = np.concatenate([getattr(joints, field) for field in JOINT_ROW_FIELDS], axis=1)
    state = np.where(joints.enabled, JOINT_ENABLED, 0) | np.where(joints.disable_collisions, JOINT_NO_COLLISIONS, 0)
    # Blender's threshold is an impulse per Bullet substep: this substep's share (inf: unbreakable)
    with np.errstate(invalid="ignore"):
        break_impulse = joints.breaking_threshold * (substep / joints.bullet_substep)
    # each joint listed under each of its dynamic bodies, by body
    owner = np.concatenate([a, b])
    listed = np.concatenate([np.arange(count), np.arange(count)]).astype(np.int32)
    keep = owner != STATIC_SIDE
    by_body = np.argsort(owner[keep], kind="stable")
    body_list = np.full(2 * count, -1, dtype=np.int32)
    body_list[:keep.sum()] = listed[keep][by_body]
    per_body = np.bincount(owner[keep], minlength=model.body_count).astype(np.int32)
    first = np.concatenate([[0], np.cumsum(per_body)[:-1]]).astype(np.int32)
    return {
        "joint_colour_start": colour_start.astype(np.int32),
        "joint_colour_order": order.astype(np.int32),
        "joint_body": np.stack([a, b], axis=1),
        "joint_anchor_a": vec4(joints.anchor_a),
        "joint_anchor_b": vec4(joints.anchor_b),
        "joint_frame_a": quat_to_device(joints.frame_a),
        "joint_frame_b": quat_to_device(joints.frame_b),
        "joint_row_mode": np.asarray(modes, dtype=np.int32),
        "joint_rows": rows.astype(np.float32),
        "joint_break_impulse": break_impulse.astype(np.float32),
        "joint_state": state.astype(np.int32),
        "joint_impulse": np.zeros((count, JOINT_IMPULSES), np.float32),
        "body_joint_list": body_list,
        "body_joint_range": np.stack([first, per_body], axis=1),
    }


class JointLaunches:
    """OpenCLEngine's joints: their upload, launches and read-back."""

    @property
    def joint_count(self) -> int:
        return self.model.joints.count if self.model.joints is not None else 0

    def _upload_joints(self):
        """The joints' tables (placeholders without joints) and their arguments."""
        a, table = self.arguments, self._table_buffer
        count = self.joint_count
        tables = joint_tables(self.model, self.params.substep) if count else {}
        # the table's joints-only rows: the joints' tables; the wake marks (and placeholders) at 0
        for row in DEVICE_BUFFERS:
            if row.joints_only:
                a[row.name] = table(row.name, tables.get(row.name, np.int32(0)))
        colour_start = tables.get("joint_colour_start", np.zeros(1, np.int32))
        a["joint_colour_start"] = self._buffer(colour_start)
        a["broken_joint_total"] = self._buffer(np.zeros(1, np.int32))
        self.joint_colour_count = len(colour_start) - 1
        # each colour's launch (work-items taking one joint each)
        self._joint_colour_sizes = [((round_up(int(n), JOINTS_PER_GROUP),), (JOINTS_PER_GROUP,))
                                    for n in np.diff(colour_start)]
        hertz = joint_hertz(self.model.joints, self.params.substep) if count else 0.0
        damping_ratio = self.model.joints.damping_ratio if count else 0.0
        a.update(joint_count=np.int32(count), joint_colour_count=np.int32(self.joint_colour_count),
                 joint_soft=np.array([*soft(hertz, damping_ratio, self.params.substep), 0.0], dtype=np.float32))
        self._joint_enabled = self.model.joints.enabled.copy() if count else np.zeros(0, bool)

    def _joint_work_sizes(self) -> dict:
        joints, bodies = (round_up(max(self.joint_count, 1)),), (round_up(self.body_count),)
        return {"wake_joined_sleepers": (joints, None), "apply_joint_wakes": (bodies, None),
                "break_joints": (joints, None)}

    def _enqueue_joint_wakes(self, parity):
        """Before the passes: the sleepers joined to awake bodies woken (65_joints.cl)."""
        if self.joint_count and self.sleep[0] > 0.0:
            for name in ("wake_joined_sleepers", "apply_joint_wakes"):
                self._enqueue(self._kernels[name][parity], name, *self._work_sizes[name])

    def _enqueue_joint_colours(self, kind, parity):
        """One pass kind's launches of the joint colours (where the passes are a launch per colour)."""
        if kind & 3 == 3:
            return  # restitution passes solve no joints
        for colour, (global_size, local_size) in enumerate(self._joint_colour_sizes):
            self._enqueue(self._colour_kernel("solve_joint_colour_pass", colour, kind, parity),
                          "solve_joint_colour_pass", global_size, local_size)

    def _enqueue_break_joints(self, parity):
        if self.joint_count:
            self._enqueue(self._kernels["break_joints"][parity], "break_joints", *self._work_sizes["break_joints"])

    @property
    def broken_joint_count(self) -> int:
        """Joints broken so far (reads the device)."""
        if not self.joint_count:
            return 0
        return int(self._read(self.arguments["broken_joint_total"], (1,), np.int32)[0])

    @property
    def joint_broken(self) -> np.ndarray:
        """Which joints have broken (reads the device)."""
        if not self.joint_count:
            return np.zeros(0, bool)
        return (self._read(self.arguments["joint_state"], (self.joint_count,), np.int32) & JOINT_BROKEN) != 0

    def set_joints_enabled(self, mask) -> None:
        """Turn joints on or off from the next step on (Blender's ``enabled``, keyed), as
        ReferenceJoints.set_joints_enabled: a joint turned off forgets its impulses, the bodies of a
        joint that changed wake, a broken joint stays broken. A change also rebuilds the neighbour
        lists at the next detection, as a joint's breaking does, since they leave out the bodies an
        enabled joint keeps apart."""
        mask = np.asarray(mask, dtype=bool).reshape(-1)
        if mask.shape != self._joint_enabled.shape:
            raise ValueError(f"set_joints_enabled needs one flag per joint ({self.joint_count}), got {mask.shape[0]}")
        changed = mask != self._joint_enabled
        if not changed.any():
            return
        self._joint_enabled = mask.copy()
        cl, queue, a = self.cl, self.queue, self.arguments
        state = self._read(a["joint_state"], (self.joint_count,), np.int32)
        state = np.where(mask, state | JOINT_ENABLED, state & ~JOINT_ENABLED).astype(np.int32)
        cl.enqueue_copy(queue, a["joint_state"], state)
        impulses = self._read(a["joint_impulse"], (self.joint_count, JOINT_IMPULSES), np.float32)
        impulses[changed & ~mask] = 0.0
        cl.enqueue_copy(queue, a["joint_impulse"], impulses)
        joints = self.model.joints
        woken = np.concatenate([joints.body_a[changed], joints.body_b[changed]])
        for body in np.unique(woken[woken != STATIC_SIDE]):
            cl.enqueue_copy(queue, a["body_quiet"], np.zeros(1, np.float32), dst_offset=4 * int(body))
        self._woken_by_host = True  # the world is stepped again, whatever the last detection saw
        # the flag the next detection reads: its own if the next substep detects, else the next one's
        detecting_next = self.substeps_done % self.settings.substeps_per_detection == 0
        flag = a["rebuild" if detecting_next else "next_rebuild"][self.substep_parity]
        cl.enqueue_copy(queue, flag, np.ones(1, np.int32))
