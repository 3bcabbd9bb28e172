"""Swing-foot trajectory from lift-off to touchdown.

With ``s = (t - t_start) / D`` in [0, 1] and ``D = t_end - t_start`` [s]:

* horizontal position and yaw follow the minimum-jerk quintic
  ``q(s) = 10 s^3 - 15 s^4 + 6 s^5`` between the lift-off and touchdown
  poses (zero velocity and acceleration at both ends);
* height ``z(s) = z0 + (z1 - z0) q(s) + 64 h' s^3 (1 - s)^3`` with
  ``h' = max(z0, z1) + height - (z0 + z1) / 2`` so that ``z(1/2)`` is
  ``height`` [m] above the higher end; the bump has zero value, velocity and
  acceleration at both ends.

Between two levels (``|z1 - z0| > 1 mm``: a step up or down) the foot must
clear the edge between them.  The planner keeps the soles ``edge_margin`` from
it: on a step up the edge is just in front of the lifted toe, on a step down
just behind the landing heel.  So the foot first rises, then moves, then lands,
and the windows depend on the direction.  Height: a quintic from ``z0`` up to
``max(z0, z1) + height`` over ``s`` in ``[0, rise]``, held, then a quintic down
to ``z1`` over ``[land, 1]``; horizontal position and yaw: the quintic over
``[move_start, move_end]``.  Up (:data:`STEP_UP_WINDOWS`): the toe is above
the upper level before it moves (the whole rise before most of the move), the
landing drops only ``height``.  Down (:data:`STEP_DOWN_WINDOWS`): the rise is
only ``height``, the move is all but over before the foot goes below the upper
level (the heel has passed the edge).

Position, velocity and acceleration are therefore continuous (C2) over the
swing and match the stationary foot before lift-off and after touchdown.
Outside ``[t_start, t_end]`` the foot is at rest at the corresponding end.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from zmp_walker.geometry import FootPose

__all__ = ["SwingState", "SwingTrajectory", "min_jerk"]

# swing fractions (rise, move_start, move_end, land) [-]: the apex is reached at ``rise``, the
# horizontal motion lasts from ``move_start`` to ``move_end``, the descent starts at ``land``
STEP_UP_WINDOWS = (0.45, 0.3, 1.0, 0.75)
STEP_DOWN_WINDOWS = (0.25, 0.1, 0.75, 0.65)


def min_jerk(s: float) -> tuple[float, float, float]:
    """``q, dq/ds, d2q/ds2`` of the quintic ``10 s^3 - 15 s^4 + 6 s^5``, ``s`` clipped to [0, 1]."""
    s = min(max(s, 0.0), 1.0)
    s2 = s * s
    return s2 * s * (10.0 - 15.0 * s + 6.0 * s2), 30.0 * s2 * (1.0 - s) ** 2, 60.0 * s * (1.0 - s) * (1.0 - 2.0 * s)


def _bump(s: float) -> tuple[float, float, float]:
    """``b, db/ds, d2b/ds2`` of ``64 s^3 (1 - s)^3`` (1 at s = 1/2), ``s`` clipped to [0, 1]."""
    s = min(max(s, 0.0), 1.0)
    r = 1.0 - s
    return 64.0 * s**3 * r**3, 192.0 * s * s * r * r * (r - s), 384.0 * s * r * (r * r - 3.0 * s * r + s * s)


@dataclass(frozen=True)
class SwingState:
    """Swing foot sample: ``pos, vel, acc`` (3,) [m, m/s, m/s^2] of the sole
    frame, ``yaw, yaw_rate, yaw_acc`` [rad, rad/s, rad/s^2]."""

    pos: np.ndarray
    vel: np.ndarray
    acc: np.ndarray
    yaw: float
    yaw_rate: float
    yaw_acc: float


class SwingTrajectory:
    """Swing from ``start`` (lift-off pose) to ``end`` (touchdown pose).

    Args:
        start, end: sole poses [m, rad].
        t_start, t_end: lift-off and touchdown times [s].
        height: apex above the higher end [m].
    """

    def __init__(self, start: FootPose, end: FootPose, t_start: float, t_end: float, height: float):
        if not t_end > t_start:
            raise ValueError(f"swing needs t_end > t_start, got [{t_start}, {t_end}]")
        self.start, self.end = start, end
        self.t_start, self.t_end = float(t_start), float(t_end)
        self.duration = self.t_end - self.t_start
        self.delta = tuple(float(v) for v in end.position - start.position)
        z0, z1 = start.position[2], end.position[2]
        self.apex = max(z0, z1) + height - 0.5 * (z0 + z1)
        self.top = max(z0, z1) + height
        self.between_levels = abs(z1 - z0) > 1e-3
        self.dyaw = (end.yaw - start.yaw + math.pi) % (2.0 * math.pi) - math.pi

    def __call__(self, t: float) -> SwingState:
        """Sample at time ``t`` [s]."""
        D = self.duration
        s = (t - self.t_start) / D
        if self.between_levels:
            return self._between_levels(s)
        q, dq, ddq = min_jerk(s)
        b, db, ddb = _bump(s)
        d, p0, h = self.delta, self.start.position, self.apex
        dq, ddq = dq / D, ddq / (D * D)
        db, ddb = db / D, ddb / (D * D)
        pos = np.array([p0[0] + d[0] * q, p0[1] + d[1] * q, p0[2] + d[2] * q + h * b])
        vel = np.array([d[0] * dq, d[1] * dq, d[2] * dq + h * db])
        acc = np.array([d[0] * ddq, d[1] * ddq, d[2] * ddq + h * ddb])
        return SwingState(pos, vel, acc, self.start.yaw + self.dyaw * q, self.dyaw * dq, self.dyaw * ddq)

    def _between_levels(self, s: float) -> SwingState:
        """Rise, move, land (see the module docstring), at the swing fraction ``s``."""
        D = self.duration
        d, p0 = self.delta, self.start.position
        z0, z1, top = float(p0[2]), float(self.end.position[2]), self.top
        rise, move_start, move_end, land = STEP_UP_WINDOWS if z1 > z0 else STEP_DOWN_WINDOWS
        if s < land:
            w = rise * D
            q, dq, ddq = min_jerk(s / rise)
            z, vz, az = z0 + (top - z0) * q, (top - z0) * dq / w, (top - z0) * ddq / (w * w)
        else:
            w = (1.0 - land) * D
            q, dq, ddq = min_jerk((s - land) / (1.0 - land))
            z, vz, az = top + (z1 - top) * q, (z1 - top) * dq / w, (z1 - top) * ddq / (w * w)
        w = (move_end - move_start) * D
        q, dq, ddq = min_jerk((s - move_start) / (move_end - move_start))
        dq, ddq = dq / w, ddq / (w * w)
        pos = np.array([p0[0] + d[0] * q, p0[1] + d[1] * q, z])
        vel = np.array([d[0] * dq, d[1] * dq, vz])
        acc = np.array([d[0] * ddq, d[1] * ddq, az])
        return SwingState(pos, vel, acc, self.start.yaw + self.dyaw * q, self.dyaw * dq, self.dyaw * ddq)
