"""Headless progress lines (addon/blender/progress.py): what they say and how often."""
from __future__ import annotations

import io

from addon.blender.progress import ProgressPrinter


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_log_lines_every_tenth_of_the_frames_with_rate_and_time_left():
    out, clock = io.StringIO(), Clock()
    progress = ProgressPrinter(out, terminal=False, clock=clock)
    for done in range(1, 101):
        progress.update(done, 100, 220)
        clock.now += 0.5  # 2 frames per second
    progress.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 11 and "\r" not in out.getvalue()  # the first frame, then every 10 frames
    assert lines[0] == "PRB: frame 1/100 (1%), 220 bodies"
    assert lines[1] == "PRB: frame 11/100 (11%), 220 bodies, 2 frames/s, 44 s left"
    assert lines[-1] == "PRB: frame 100/100 (100%), 220 bodies, 2 frames/s, done in 50 s"  # 99 frames after the first in 49.5 s


def test_log_lines_say_how_many_constraints_have_broken_in_a_scene_with_constraints():
    out, clock = io.StringIO(), Clock()
    progress = ProgressPrinter(out, terminal=False, clock=clock)
    for done, broken in ((1, 0), (2, 1), (3, 7)):
        progress.update(done, 3, 40, broken)
        clock.now += 1.0
    lines = out.getvalue().splitlines()
    assert lines[0] == "PRB: frame 1/3 (33%), 40 bodies, 0 constraints broken"
    assert lines[1].startswith("PRB: frame 2/3 (67%), 40 bodies, 1 constraint broken, ")
    assert lines[2].startswith("PRB: frame 3/3 (100%), 40 bodies, 7 constraints broken, ")


def test_log_lines_at_least_every_30_seconds_on_a_slow_bake():
    out, clock = io.StringIO(), Clock()
    progress = ProgressPrinter(out, terminal=False, clock=clock)
    for done in range(1, 6):
        progress.update(done, 1000, 5)
        clock.now += 40.0
    assert len(out.getvalue().splitlines()) == 5
    assert out.getvalue().splitlines()[-1].endswith("0.025 frames/s, 11 h 03 min left")


def test_terminal_line_is_rewritten_a_few_times_a_second_and_ended():
    out, clock = io.StringIO(), Clock()
    progress = ProgressPrinter(out, terminal=True, clock=clock)
    for done in range(1, 201):
        progress.update(done, 200, 3)
        clock.now += 0.01  # 100 frames per second: 2 s in all
    text = out.getvalue()
    writes = text.split("\r")[1:]
    assert 8 <= len(writes) <= 10  # every 0.25 s, plus the first and the last
    assert text.endswith("PRB: frame 200/200 (100%), 3 bodies, 100 frames/s, done in 2 s\033[K\n")
    assert text.count("\n") == 1


def test_a_stopped_terminal_line_is_ended_by_close():
    out = io.StringIO()
    progress = ProgressPrinter(out, terminal=True, clock=Clock())
    progress.update(1, 10, 1)
    progress.close()
    assert out.getvalue().endswith("\n") and out.getvalue().count("\n") == 1
