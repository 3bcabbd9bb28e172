"""A one-line progress bar on stderr for long closed-loop runs, only on a terminal.

Use it as the runners' ``on_tick`` callback: ``Progress(total_s)(t, *_)``.
It redraws at most ``rate`` times per wall second and stays silent when stderr
is not a TTY (CI logs, pipes, ``--json`` consumers).
"""

from __future__ import annotations

import sys
import time


class Progress:
    """Simulated time ``t`` [s] out of ``total`` [s] (``None``: unknown), with the real-time factor."""

    def __init__(self, total: float | None, label: str = "", rate: float = 5.0, stream=None, force: bool = False):
        self.total = total
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = force or (hasattr(self.stream, "isatty") and self.stream.isatty())
        self._period = 1.0 / rate
        self._wall0 = time.perf_counter()
        self._last = -1.0
        self._shown = False

    def __call__(self, t: float, *_ignored) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self._last < self._period:
            return
        self._last = now
        self._draw(t, now - self._wall0)

    def _draw(self, t: float, wall: float) -> None:
        rtf = t / wall if wall > 0 else 0.0
        if self.total:
            frac = min(1.0, max(0.0, t / self.total))
            width = 30
            bar = "#" * int(frac * width) + "-" * (width - int(frac * width))
            eta = (self.total - t) / rtf if rtf > 0 else float("inf")
            text = f"\r{self.label}[{bar}] {t:6.2f}/{self.total:.2f} s sim  RTF {rtf:4.2f}  ETA {eta:5.0f} s "
        else:
            text = f"\r{self.label}{t:7.2f} s sim  RTF {rtf:4.2f} "
        self.stream.write(text)
        self.stream.flush()
        self._shown = True

    def close(self) -> None:
        """End the line (if anything was drawn)."""
        if self._shown:
            self.stream.write("\n")
            self.stream.flush()
            self._shown = False
