"""Piecewise-linear ZMP reference and support polygons of a schedule.

The reference ``p_ref(t)`` [m] (world xy) is

* the midpoint of the two sole centres while standing, held for the first
  half (``START_HOLD``) of the initial double support, then moved linearly to
  the centre of the first stance sole (the hold lets a preview controller,
  which learns of the walk only when it is commanded, start the CoM moving
  without a large ZMP excursion);
* the centre of the stance sole during single support;
* moved linearly from the old to the new stance sole centre during each
  double support;
* moved linearly to the midpoint of the final soles over the first half of
  the final double support, then held.

Each segment lies in the convex hull of the soles in contact at that time, so
``p_ref`` is always inside the support polygon.  A sole centre is the centre
of its rectangle (not necessarily the sole-frame origin).
"""

from __future__ import annotations

import bisect

import numpy as np

from zmp_walker.footsteps import Side, other_side
from zmp_walker.geometry import FootPose, Polygon, SoleRect, support_polygon
from zmp_walker.schedule import Schedule

__all__ = ["ZmpReference", "sole_center", "START_HOLD"]

START_HOLD = 0.5  # fraction of the initial double support with the ZMP held at the middle [-]


def sole_center(pose: FootPose, sole: SoleRect) -> np.ndarray:
    """World xy [m] of the centre of ``sole`` placed at ``pose``."""
    return pose.to_world(sole.center)


class ZmpReference:
    """ZMP reference and support polygons of ``schedule``.

    Args:
        schedule: timed contact schedule.
        soles: sole rectangle per side [m].
        margin: the support polygons are the soles shrunk by ``margin`` [m].
    """

    def __init__(self, schedule: Schedule, soles: dict[Side, SoleRect], margin: float = 0.0):
        self.schedule = schedule
        self.soles = soles
        self.margin = margin
        cfg = schedule.config
        feet0 = schedule.feet_before[0]

        def mid(feet):
            return 0.5 * (sole_center(feet["left"], soles["left"]) + sole_center(feet["right"], soles["right"]))

        # a breakpoint is a weighted sum of sole centres; a source is (step index or None, side),
        # None meaning the foot's pose before the walk (kept for the MPC with footstep variables)
        last: dict[Side, int | None] = {"left": None, "right": None}
        both = (((None, "left"), 0.5), ((None, "right"), 0.5))
        times = [schedule.t0, schedule.t0 + START_HOLD * schedule.start_duration]
        points = [mid(feet0), mid(feet0)]
        sources = [both, both]
        for k, s in enumerate(schedule.steps):
            stance = other_side(s.side)
            c = sole_center(schedule.feet_before[k][stance], soles[stance])
            times += [s.t_start, s.t_end]
            points += [c, c]
            sources += [(((last[stance], stance), 1.0),)] * 2
            last[s.side] = k
        if schedule.final and schedule.steps:
            times.append(schedule.steps[-1].t_end + 0.5 * cfg.stop_duration)
            points.append(mid(schedule.final_feet))
            sources.append((((last["left"], "left"), 0.5), ((last["right"], "right"), 0.5)))
        elif schedule.steps:  # open schedule: move onto the last landed foot and hold
            last_step = schedule.steps[-1]
            times.append(last_step.t_end + cfg.double_support_duration)
            points.append(sole_center(last_step.pose, soles[last_step.side]))
            sources.append((((len(schedule.steps) - 1, last_step.side), 1.0),))
        self.sources: list[tuple] = sources
        self.times = np.array(times)
        self.points = np.array(points)
        self._times = [float(v) for v in times]
        self._points = [(float(a), float(b)) for a, b in points]
        self._polygons: dict[int, Polygon] = {}

    def at(self, t: float) -> tuple[float, float]:
        """``p_ref(t)`` [m] for a scalar ``t`` [s] as a tuple (the per-tick fast path)."""
        times = self._times
        i = bisect.bisect_right(times, t)
        if i == 0:
            return self._points[0]
        if i == len(times):
            return self._points[-1]
        t0, t1 = times[i - 1], times[i]
        (x0, y0), (x1, y1) = self._points[i - 1], self._points[i]
        a = (t - t0) / (t1 - t0) if t1 > t0 else 1.0
        return x0 + a * (x1 - x0), y0 + a * (y1 - y0)

    def sample(self, t) -> np.ndarray:
        """``p_ref`` at time(s) ``t`` [s]: shape (2,) for a scalar, (n, 2) for an array."""
        t = np.asarray(t, dtype=float)
        x = np.interp(t, self.times, self.points[:, 0])
        y = np.interp(t, self.times, self.points[:, 1])
        return np.stack([x, y], axis=-1)

    def polygon(self, t: float) -> Polygon:
        """Support polygon (soles in contact, shrunk by ``margin``) at ``t`` [s]."""
        return self.polygon_of_phase(self.schedule.phase_index(t))

    def polygon_of_phase(self, index: int) -> Polygon:
        """Support polygon of phase ``index`` of the schedule (cached)."""
        poly = self._polygons.get(index)
        if poly is None:
            phase = self.schedule.phases[index]
            sides = phase.support
            poly = support_polygon([phase.feet[s] for s in sides], [self.soles[s] for s in sides], self.margin)
            self._polygons[index] = poly
        return poly
