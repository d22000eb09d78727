"""Progress of a headless bake on stderr: frame n/N, bodies, constraints broken so far (a scene with
rigid body constraints), frames per second, time left.

On a terminal one line is rewritten in place (carriage return) a few times a second; otherwise
(a render farm's log file) a plain line is written every tenth of the frames or every
LOG_INTERVAL seconds, whichever comes first, so that a long bake still shows it is alive.
"""
from __future__ import annotations

import sys
import time

TERMINAL_INTERVAL = 0.25  # seconds between rewrites of the terminal line
LOG_INTERVAL = 30.0  # seconds between log lines at most


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds // 60 % 60:02d} min"


class ProgressPrinter:
    """Call with the bake job after each simulated frame; close() ends the terminal line."""

    def __init__(self, stream=None, *, terminal: bool | None = None, clock=time.monotonic):
        self.stream = sys.stderr if stream is None else stream
        if terminal is None:
            isatty = getattr(self.stream, "isatty", None)
            terminal = bool(isatty and isatty())
        self.terminal = terminal
        self.clock = clock
        self.started = None
        self.last_time = None
        self.last_done = 0
        self.first_done = 0
        self.line_open = False

    def line(self, done: int, total: int, bodies: int, rate: float | None, elapsed: float,
             broken: int | None = None) -> str:
        text = f"PRB: frame {done}/{total} ({100 * done / total if total else 100:.0f}%), {bodies:,} bodies"
        if broken is not None:
            text += f", {broken:,} constraint{'s' if broken != 1 else ''} broken"
        if rate:
            text += f", {rate:.3g} frames/s"
            text += f", done in {_duration(elapsed)}" if done >= total else f", {_duration((total - done) / rate)} left"
        return text

    def __call__(self, job) -> None:
        self.update(job.frames_done, job.frames_total, len(job.objects),
                    job.constraints_broken if job.constraint_count else None)

    def update(self, done: int, total: int, bodies: int, broken: int | None = None) -> None:
        """``broken``: the constraints broken so far, None in a scene without constraints."""
        now = self.clock()
        if self.started is None:
            # rates count from the first frame reported, not from the conversion before it
            self.started, self.first_done = now, done
            self.last_time = now
        finished = done >= total
        if self.terminal:
            due = now - self.last_time >= TERMINAL_INTERVAL
        else:
            due = done - self.last_done >= max(1, total / 10) or now - self.last_time >= LOG_INTERVAL
        if not (due or finished or self.last_done == 0):
            return
        self.last_time, self.last_done = now, done
        elapsed = now - self.started
        rate = (done - self.first_done) / elapsed if elapsed > 0 and done > self.first_done else None
        text = self.line(done, total, bodies, rate, elapsed, broken)
        if self.terminal:
            self.stream.write("\r" + text + "\033[K" + ("\n" if finished else ""))
            self.line_open = not finished
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.line_open:
            self.stream.write("\n")
            self.stream.flush()
            self.line_open = False
