"""The PC2 point cache of bake to instances (addon.core.point_cache), without Blender."""
from __future__ import annotations

import os
import struct

import numpy as np
import pytest

from addon.core import point_cache
from addon.core.rotations import quaternion_to_matrix


def random_bodies(count: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    q0 = rng.normal(size=(count, 4))
    q0 /= np.linalg.norm(q0, axis=1, keepdims=True)
    start = np.zeros((count, 4, 4))
    start[:, :3, :3] = quaternion_to_matrix(q0) * rng.uniform(0.2, 3.0, size=(count, 1, 3))  # rotation x scale
    start[0, :3, 2] *= -1  # a mirrored object
    start[:, :3, 3] = rng.normal(size=(count, 3)) * 10
    start[:, 3, 3] = 1
    com = start[:, :3, 3] + rng.normal(size=(count, 3)) * 0.1
    return start, com


def rebuilt_matrices(points: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """What the node group does: origin, unit axes from the tips, z = x cross y, then the scale."""
    p = points.reshape(-1, 3, 3).astype(np.float64)
    x = p[:, 1] - p[:, 0]
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y = p[:, 2] - p[:, 0]
    y -= x * np.einsum("bi,bi->b", x, y)[:, None]
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    m = np.zeros((len(p), 4, 4))
    m[:, :3, :3] = np.stack([x, y, np.cross(x, y)], axis=2) * scales[:, None, :]
    m[:, :3, 3] = p[:, 0]
    m[:, 3, 3] = 1
    return m


@pytest.mark.parametrize("block", [64, 16])
def test_points_rebuild_the_world_matrix_of_every_pose(monkeypatch, block):
    monkeypatch.setattr(point_cache, "BLOCK_BODIES", block)  # one block, and several
    start, com = random_bodies(50)
    frames = point_cache.BodyFrames(com, start)
    rng = np.random.default_rng(1)
    positions = rng.normal(size=(50, 3)) * 20
    q = rng.normal(size=(50, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    rot = quaternion_to_matrix(q)
    expected = np.zeros((50, 4, 4))  # T(x) R(q) T(-com) M0, as the keyframe bake computes it
    expected[:, :3, :3] = rot
    expected[:, :3, 3] = positions - np.einsum("bij,bj->bi", rot, com)
    expected[:, 3, 3] = 1
    expected = expected @ start
    got = rebuilt_matrices(frames.points(positions, q), frames.scales)
    np.testing.assert_allclose(got, expected, atol=2e-5)
    assert frames.scales[0, 2] < 0 and (frames.scales[1:] > 0).all()


def test_writer_streams_a_pc2_file_and_commits_it_in_place(tmp_path):
    path = tmp_path / "sub" / "cache.pc2"
    frames = [np.random.default_rng(i).normal(size=(6, 3)).astype(np.float32) for i in range(4)]
    writer = point_cache.PointCacheWriter(str(path), 6, 4, start_frame=3, sample_rate=2)
    for f in frames:
        writer.write(f)
    assert not path.exists()  # only the .partial file until every frame is in
    writer.commit()
    assert path.stat().st_size == point_cache.cache_size(2, 4) == 32 + 6 * 4 * 12
    raw = path.read_bytes()
    assert raw[:12] == b"POINTCACHE2\0"
    assert struct.unpack("<iiffi", raw[12:32]) == (1, 6, 3.0, 2.0, 4)
    assert point_cache.read_header(str(path))["samples"] == 4
    for i, f in enumerate(frames):
        np.testing.assert_array_equal(point_cache.read_frame(str(path), i), f)
    assert os.listdir(path.parent) == ["cache.pc2"]


def test_an_unfinished_or_discarded_cache_leaves_the_earlier_one(tmp_path):
    path = tmp_path / "cache.pc2"
    path.write_bytes(b"earlier")
    writer = point_cache.PointCacheWriter(str(path), 3, 2)
    writer.write(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="1 of 2 samples"):
        writer.commit()
    with pytest.raises(ValueError, match=r"expected \(3, 3\)"):
        writer.write(np.zeros((4, 3)))
    writer.discard()
    assert path.read_bytes() == b"earlier" and os.listdir(tmp_path) == ["cache.pc2"]


def test_a_discarded_cache_removes_the_folders_made_for_it(tmp_path):
    writer = point_cache.PointCacheWriter(str(tmp_path / "prb_cache" / "deeper" / "cache.pc2"), 3, 2)
    writer.write(np.zeros((3, 3)))
    writer.discard()
    assert os.listdir(tmp_path) == []
    (tmp_path / "prb_cache").mkdir()
    (tmp_path / "prb_cache" / "other.pc2").write_bytes(b"not ours")
    writer = point_cache.PointCacheWriter(str(tmp_path / "prb_cache" / "deeper" / "cache.pc2"), 3, 2)
    writer.discard()
    assert os.listdir(tmp_path / "prb_cache") == ["other.pc2"]


def test_background_writer_writes_the_same_file(tmp_path, monkeypatch):
    monkeypatch.setattr(point_cache, "BLOCK_BODIES", 7)  # three blocks of bodies, on two threads
    start, com = random_bodies(20)
    frames = point_cache.BodyFrames(com, start)
    rng = np.random.default_rng(2)
    poses = [(rng.normal(size=(20, 3)), rng.normal(size=(20, 4))) for _ in range(5)]
    inline = point_cache.PointCacheWriter(str(tmp_path / "a.pc2"), 60, 5)
    for p, q in poses:
        inline.write(frames.points(p, q))
    inline.commit()
    worker = point_cache.BackgroundCacheWriter(frames, point_cache.PointCacheWriter(str(tmp_path / "b.pc2"), 60, 5),
                                               threads=2)
    for p, q in poses:
        worker.submit(p, q)
    worker.commit()
    assert (tmp_path / "a.pc2").read_bytes() == (tmp_path / "b.pc2").read_bytes()
    failing = point_cache.BackgroundCacheWriter(frames, point_cache.PointCacheWriter(str(tmp_path / "c.pc2"), 60, 1))
    failing.submit(*poses[0])
    failing.submit(*poses[1])  # one sample too many: the worker's error comes back to the loop
    with pytest.raises(ValueError, match="all 1 samples"):
        failing.commit()
    failing.discard()
    assert not (tmp_path / "c.pc2").exists() and not (tmp_path / "c.pc2.partial").exists()


def test_check_writable_folder_tries_for_real_and_leaves_nothing(tmp_path):
    assert point_cache.check_writable_folder(str(tmp_path / "new" / "deeper")) is None
    assert os.listdir(tmp_path) == []  # the folders it made to try are gone again
    (tmp_path / "file").write_text("x")
    problem = point_cache.check_writable_folder(str(tmp_path / "file" / "cache"))
    assert problem and "is a file" in problem
    assert os.listdir(tmp_path) == ["file"]
