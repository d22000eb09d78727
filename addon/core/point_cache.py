"""Body poses as a PC2 point cache: three points per body, written frame by frame.

Why this format: a baked simulation must play and render in Blender 4.2-5.x without the add-on, from
data Blender reads by itself, for 100k-1M bodies. Blender's Mesh Cache modifier reads PC2 (a
documented format: header ``POINTCACHE2\\0``, version 1, point count, start frame, sample rate,
sample count, then float32 x, y, z of every point for every sample), seeks to the frame it needs
(it never loads the whole file) and interpolates between samples at subframes, so motion blur sees
the motion. Keyframes need one object per body (10k objects: 7-9 s to key, and Blender slows down
past that); Alembic/USD written by Blender itself would need the animated bodies to exist in the
scene first. Each body's pose is three points (``pose_points``): its object origin and the tips of
its rotated x and y axes; geometry nodes on the Blender side turn them back into a rotation (Axes to
Rotation). Measured figures (cache size, write time, evaluation time per frame) are in
bench/results/instances_*.json.

The writer streams: a frame's points go to disk as soon as they are computed, so 1M bodies x 250
frames never sit in memory; it writes to ``<path>.partial`` and moves the file into place only when
every frame is in (``PointCacheWriter.commit``), so a cancelled or failed bake leaves an earlier
cache exactly as it was.
"""
from __future__ import annotations

import os
import struct

import numpy as np


SIGNATURE = b"POINTCACHE2\0"
VERSION = 1
HEADER_SIZE = 32
POINTS_PER_BODY = 3
# Distance of the axis tips from the origin point. One metre keeps the axis directions read back from
# float32 points accurate to ~1e-7 x |position| radians, far below what shows.
AXIS_LENGTH = 1.0
# Bodies per block of ``BodyFrames.points``: small enough that a block's float32 temporaries stay in
# cache, large enough that numpy's per-call cost does not show.
BLOCK_BODIES = 16384


def _header(points: int, start_frame: float, sample_rate: float, samples: int) -> bytes:
    # PC2 stores the sample count as an int after two floats
    return struct.pack("<12siiffi", SIGNATURE, VERSION, points, float(start_frame), float(sample_rate), samples)


def read_header(path: str) -> dict:
    with open(path, "rb") as f:
        data = f.read(HEADER_SIZE)
    if len(data) < HEADER_SIZE:
        raise ValueError(f"{path}: not a PC2 file (shorter than its header)")
    signature, version, points, start, rate, samples = struct.unpack("<12siiffi", data)
    if signature != SIGNATURE:
        raise ValueError(f"{path}: not a PC2 file")
    return dict(version=version, points=points, start_frame=start, sample_rate=rate, samples=samples)


def read_frame(path: str, index: int) -> np.ndarray:
    """(P, 3) float32 points of sample ``index`` (for tests and tools)."""
    head = read_header(path)
    points = head["points"]
    with open(path, "rb") as f:
        f.seek(HEADER_SIZE + index * points * 12)
        data = np.fromfile(f, dtype="<f4", count=points * 3)
    return data.reshape(points, 3)


def cache_size(bodies: int, samples: int) -> int:
    """Bytes of the PC2 file for ``bodies`` over ``samples`` frames."""
    return HEADER_SIZE + bodies * POINTS_PER_BODY * samples * 12


class BodyFrames:
    """What stays fixed per body between its simulated pose and its three cache points.

    An object's world matrix at a simulated pose (x, q) is ``T(x) R(q) T(-com_local) M0`` with ``M0`` its
    world matrix at the start. Writing ``M0 = T(t0) A0``, the object's origin is ``x + R(q)(t0 - com)``
    and its axes are ``R(q) A0``; the cache stores the origin and the origin plus ``AXIS_LENGTH`` times
    the unit x and y axes (the axes' lengths, the object's scale, are constant and stored once:
    ``scales``). A mirrored object (det A0 < 0) gets a negative z scale, so that x, y and x cross y
    rebuild it.
    """

    def __init__(self, com_local, matrix_world_start):
        start = np.asarray(matrix_world_start, dtype=np.float64)  # (B, 4, 4)
        com = np.asarray(com_local, dtype=np.float64)  # (B, 3)
        linear = start[:, :3, :3]
        lengths = np.linalg.norm(linear, axis=1)  # (B, 3): column norms
        safe = np.maximum(lengths, 1e-300)
        axes = linear / safe[:, None, :]
        sign = np.sign(np.linalg.det(linear))
        sign[sign == 0] = 1.0
        self.scales = lengths * np.stack([np.ones_like(sign), np.ones_like(sign), sign], axis=1)
        # body-frame offsets of the three points from the centre of mass, (B, 3 points, 3)
        origin = start[:, :3, 3] - com
        self.offsets = np.stack([origin, origin + AXIS_LENGTH * axes[:, :, 0], origin + AXIS_LENGTH * axes[:, :, 1]],
                                axis=1)
        self._offsets32 = self.offsets.astype(np.float32)

    @property
    def body_count(self) -> int:
        return self.offsets.shape[0]

    def points(self, positions, orientations, out: np.ndarray | None = None, pool=None) -> np.ndarray:
        """(B * 3, 3) float32 cache points of one frame: body b's points are rows 3b, 3b+1, 3b+2.

        ``pool`` (a concurrent.futures executor): compute blocks of bodies on its threads (numpy
        releases the GIL), for the 100k-1M bodies of a GPU simulation.
        """
        count = self.body_count
        if out is None:
            out = np.empty((count * POINTS_PER_BODY, 3), dtype=np.float32)
        blocks = range(0, count, BLOCK_BODIES)
        if pool is None or len(blocks) == 1:
            for start in blocks:
                self._block(positions, orientations, out, start)
        else:
            for done in [pool.submit(self._block, positions, orientations, out, start) for start in blocks]:
                done.result()
        return out

    def _block(self, positions, orientations, out, start: int) -> None:
        """Points of bodies start .. start + BLOCK_BODIES: each offset turned by its quaternion
        (v + 2w (u x v) + 2 u x (u x v)), plus the position.

        In float32, like the cache: against float64 rotation matrices and einsum this is 2.3x faster
        (100k bodies: 31 against 73 ms on the 2-core VM) and differs by less than 1e-6 m at 10 m.
        """
        stop = min(start + BLOCK_BODIES, self.body_count)
        q = np.asarray(orientations[start:stop], dtype=np.float32)
        q = q / np.sqrt(np.einsum("bi,bi->b", q, q))[:, None]
        w, ux, uy, uz = q[:, 0:1], q[:, 1:2], q[:, 2:3], q[:, 3:4]  # (n, 1): broadcast over the 3 points
        v = self._offsets32[start:stop]
        vx, vy, vz = v[..., 0], v[..., 1], v[..., 2]
        tx = 2 * (uy * vz - uz * vy)
        ty = 2 * (uz * vx - ux * vz)
        tz = 2 * (ux * vy - uy * vx)
        p = np.asarray(positions[start:stop], dtype=np.float32)
        o = out.reshape(self.body_count, POINTS_PER_BODY, 3)[start:stop]
        o[..., 0] = vx + w * tx + (uy * tz - uz * ty) + p[:, 0:1]
        o[..., 1] = vy + w * ty + (uz * tx - ux * tz) + p[:, 1:2]
        o[..., 2] = vz + w * tz + (ux * ty - uy * tx) + p[:, 2:3]


class PointCacheWriter:
    """Streams one PC2 file, frame by frame: ``write(points)`` per sample, then ``commit()`` (or ``discard()``)."""

    def __init__(self, path: str, points: int, samples: int, start_frame: float = 1.0, sample_rate: float = 1.0):
        if points < 1 or samples < 1:
            raise ValueError("a point cache needs at least one point and one sample")
        self.path = path
        self.partial_path = path + ".partial"
        self.points = points
        self.samples = samples
        self.written = 0
        folder = os.path.dirname(os.path.abspath(path))
        self._created = []  # the folders made for it, deepest first: discard() leaves none behind
        while not os.path.exists(folder):
            self._created.append(folder)
            folder = os.path.dirname(folder)
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self._file = open(self.partial_path, "wb")
        try:
            self._file.write(_header(points, start_frame, sample_rate, samples))
        except BaseException:
            self.discard()
            raise

    def write(self, points: np.ndarray) -> None:
        data = np.ascontiguousarray(points, dtype="<f4")
        if data.shape != (self.points, 3):
            raise ValueError(f"expected ({self.points}, 3) points, got {data.shape}")
        if self.written >= self.samples:
            raise ValueError(f"all {self.samples} samples are written already")
        data.tofile(self._file)
        self.written += 1

    def commit(self) -> str:
        """Close the file and move it over ``path`` (replacing an earlier cache only now)."""
        if self.written != self.samples:
            raise ValueError(f"{self.written} of {self.samples} samples written")
        self._file.close()
        os.replace(self.partial_path, self.path)
        return self.path

    def discard(self) -> None:
        if not self._file.closed:
            self._file.close()
        if os.path.exists(self.partial_path):
            os.remove(self.partial_path)
        for folder in self._created:
            try:
                os.rmdir(folder)
            except OSError:  # something else was put there meanwhile
                break
        self._created = []


def check_writable_folder(folder: str) -> str | None:
    """Why a cache cannot be written into ``folder``, or None when it can.

    Tried for real (folders created, a file written and removed, the created folders removed again):
    permission bits do not tell, e.g. for root, read-only mounts or a path through a file.
    """
    folder = os.path.abspath(folder)
    created = []
    try:
        missing = folder
        while not os.path.exists(missing):
            created.append(missing)
            missing = os.path.dirname(missing)
        if not os.path.isdir(missing):
            return f"the cache folder {folder} cannot be created: {missing} is a file"
        for path in reversed(created):
            os.mkdir(path)
        probe = os.path.join(folder, f".prb_write_test_{os.getpid()}")
        with open(probe, "wb") as f:
            f.write(b"0")
        os.remove(probe)
    except OSError as exc:
        return f"the cache folder {folder} is not writable ({exc.strerror or exc})"
    finally:
        for path in created:
            try:
                os.rmdir(path)
            except OSError:
                pass
    return None


class BackgroundCacheWriter:
    """``BodyFrames.points`` + ``PointCacheWriter.write`` on a worker thread, one frame in flight.

    The simulation loop hands a frame over and goes on stepping the next one while this thread turns the
    previous one into points and writes them (numpy and file writes release the GIL; so does the OpenCL
    read-back the loop then waits in). ``seconds`` is the worker's time, ``stall_seconds`` the time the
    loop waited for it.
    """

    def __init__(self, body_frames: BodyFrames, writer: PointCacheWriter, threads: int | None = None):
        from concurrent.futures import ThreadPoolExecutor

        self.body_frames = body_frames
        self.writer = writer
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prb-cache")
        # blocks of bodies in parallel (threads: all cores by default; 1: none)
        threads = (os.cpu_count() or 1) if threads is None else threads
        self._blocks = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="prb-points") if threads > 1 else None
        self._pending = None
        self._buffers = [np.empty((writer.points, 3), dtype=np.float32) for _ in range(2)]
        self._next = 0
        self.seconds = 0.0
        self.stall_seconds = 0.0

    def _work(self, positions, orientations, out):
        import time

        t0 = time.perf_counter()
        self.writer.write(self.body_frames.points(positions, orientations, out=out, pool=self._blocks))
        self.seconds += time.perf_counter() - t0

    def _wait(self) -> None:
        import time

        if self._pending is not None:
            t0 = time.perf_counter()
            pending, self._pending = self._pending, None
            pending.result()  # re-raises the worker's error here
            self.stall_seconds += time.perf_counter() - t0

    def submit(self, positions, orientations) -> None:
        """Queue one frame (the arrays must not change afterwards); waits for the frame before it."""
        self._wait()
        out = self._buffers[self._next]
        self._next ^= 1
        self._pending = self._pool.submit(self._work, positions, orientations, out)

    def _shutdown(self) -> None:
        self._pool.shutdown()
        if self._blocks is not None:
            self._blocks.shutdown()

    def commit(self) -> str:
        try:
            self._wait()
        finally:
            self._shutdown()
        return self.writer.commit()

    def discard(self) -> None:
        try:
            self._wait()
        except Exception:
            pass
        finally:
            self._shutdown()
            self.writer.discard()
