"""DCM-based step adjustment: move the swing foot's landing by the capture-point rule.

LIPM: ``xi_dot = omega (xi - p)`` with the DCM ``xi`` [m] and the ZMP ``p``.
With the measured DCM ``xi_m = xi_ref + e`` and the ZMP held at ``p_ref + u``
(``u`` the largest offset towards the error the stance sole allows) for the
remaining swing time ``T_r`` [s], the DCM error at touchdown is::

    e_T = e^{omega T_r} e - (e^{omega T_r} - 1) u

Landing the swing foot (and every later step) ``e_T`` further keeps the DCM
at its planned offset from the next foothold, so the walk stays capturable;
(components of ``e_T`` opposite to ``e`` mean the ZMP alone recovers: no
move).  This is the classic capture-point step adjustment (Pratt 2006, Englsberger
2015, Khadiv 2016).

Step timing (Khadiv 2016, Griffin 2017): the error grows as ``e^{omega
T_r}``, so landing sooner asks for a smaller move.  When the move the DCM asks
for is out of reach (step limits, no crossing of the legs: a push towards the
stance foot cannot be caught by the swing foot at all), the swing is
shortened to the remaining time ``T`` whose move ``capture_offset(e, u,
omega, T)`` leaves the smallest unreachable part, plus a cost per second of
shortening, down to a minimum swing duration.  The plan is retimed with it
(every later step earlier by as much; the CoM planner follows the new ZMP
reference), so the error stays measured against the retimed plan.
Lengthening a swing never helps the LIPM: it only waits longer while the DCM
error grows, or, where the stance foot's ZMP already recovers the error,
changes nothing that needs changing.  The landing stays within the step
limits (length, width, no collision with the stance sole, yaw kept) and
``max_adjustment`` of the planned landing.

The plan then follows the moved footholds: the ZMP reference uses them and
the planned DCM moves by the part the moved footholds explain,
``e^{-omega T_r} * shift`` (a jump of the planned CoM velocity only), so
the DCM feedback is left with the error the stance foot can absorb.

The swing foot is re-planned from its current state (position, velocity and
acceleration, so C2) to the new landing with a quintic that reaches it at
rest at the touchdown time; height and yaw keep their original profile.
With a limit on the swing foot's acceleration (what the whole-body controller
tracks), the landing moves only as far as the re-planned swing can get in the
time left, and a touchdown that the foot cannot make (out there or down from
where it is) is not a candidate of the step timing (:func:`swing_reach`): a
landing the controller cannot track ends with the foot short, high, and
taken as a contact.
"""

from __future__ import annotations

import math

import numpy as np

from zmp_walker.footsteps import FootstepPlanner, Side, side_sign
from zmp_walker.geometry import FootPose
from zmp_walker.swing import SwingState, SwingTrajectory, _bump

__all__ = ["capture_offset", "clamp_landing", "quintic_to_rest", "retimed_height", "swing_reach", "ReplannedSwing"]

# swing fractions at which a re-planned swing's acceleration is checked (its peak lies between them)
_CHECKED = np.linspace(0.0, 1.0, 17)


def capture_offset(error, zmp_capacity, w: float, t_remaining: float) -> np.ndarray:
    """Landing move (2,) [m]: the DCM error at touchdown the stance foot cannot absorb.

    ``e_T = e^{w T} e - (e^{w T} - 1) u`` with ``u`` the largest ZMP offset
    towards the error; per axis, a component of ``e_T`` of the sign opposite
    to ``e`` means the ZMP alone recovers (the DCM feedback then lowers its
    offset as the error shrinks): that component is 0.

    Args:
        error: DCM error ``xi_meas - xi_ref`` (2,) [m].
        zmp_capacity: ZMP offset ``u`` (2,) [m] from the reference to the
            sole edge in the direction of the error.
        w: LIPM ``omega`` [1/s].
        t_remaining: time to touchdown [s].
    """
    e = np.asarray(error[:2], dtype=float)
    g = math.exp(w * max(t_remaining, 0.0))
    e_T = g * e - (g - 1.0) * np.asarray(zmp_capacity[:2], dtype=float)
    return np.where(e_T * e > 0.0, e_T, 0.0)


def clamp_landing(
    planner: FootstepPlanner,
    side: Side,
    stance: FootPose,
    planned: FootPose,
    target_xy,
    max_adjustment: float,
    max_length: float | None = None,
) -> FootPose | None:
    """Landing pose of ``side`` nearest ``target_xy`` (2,) [m] that respects the limits.

    Limits: at most ``max_adjustment`` [m] from ``planned``; ``|dx| <=
    max_step_length`` and ``min_step_width <= width <= max_step_width`` in the
    ``stance`` frame (``max_length`` in place of ``max_step_length``: a fast-gait
    step's limit); no collision with the stance sole (the width grows until
    there is none).  The yaw of ``planned`` is kept.  None if no collision-free
    landing exists with that yaw.
    """
    c = planner.config
    p0 = np.asarray(planned.position[:2], dtype=float)
    d = np.asarray(target_xy, dtype=float) - p0
    n = float(np.linalg.norm(d))
    if n > max_adjustment:
        d *= max_adjustment / n
    local = stance.to_local(p0 + d)
    s = side_sign(side)
    limit = c.max_step_length if max_length is None else max_length
    dx = float(np.clip(local[0], -limit, limit))
    width = float(np.clip(s * local[1], c.min_step_width, c.max_step_width))
    dyaw = planned.yaw - stance.yaw
    for w in np.append(np.arange(width, c.max_step_width, 0.005), c.max_step_width):
        xy = stance.to_world(np.array([dx, s * w]))
        pose = FootPose(np.array([xy[0], xy[1], planned.position[2]]), stance.yaw + dyaw)
        if not planner.collide(side, pose, stance):
            return pose
    return None


def quintic_to_rest(p0, v0, a0, p1, D: float) -> np.ndarray:
    """Coefficients (6, n) of ``sum c_i tau^i`` from ``(p0, v0, a0)`` at 0 to ``(p1, 0, 0)`` at ``D`` [s]."""
    p0, v0, a0, p1 = (np.asarray(x, dtype=float) for x in (p0, v0, a0, p1))
    h = p1 - p0
    return np.array(
        [
            p0,
            v0,
            0.5 * a0,
            (20.0 * h - 12.0 * v0 * D - 3.0 * a0 * D * D) / (2.0 * D**3),
            (-30.0 * h + 16.0 * v0 * D + 3.0 * a0 * D * D) / (2.0 * D**4),
            (12.0 * h - 6.0 * v0 * D - a0 * D * D) / (2.0 * D**5),
        ]
    )


class ReplannedSwing:
    """Swing whose horizontal motion is re-planned at ``t_splice`` [s] towards ``target_xy`` (2,) [m].

    Args:
        previous: the swing followed so far (:class:`SwingTrajectory` or
            :class:`ReplannedSwing`); its state at ``t_splice`` is the start.
        t_splice: re-planning time, before the touchdown [s].
        target_xy: new landing position (2,) [m], reached at rest at the
            touchdown time.
        t_end: touchdown time [s]; None keeps the previous one.  A swing
            whose touchdown moved (here or in ``previous``) is *retimed*: its
            height and yaw are re-planned too, as quintics to rest at the
            landing height and yaw, plus, while the swing is in its first half,
            the bump ``h 64 s^3 (1 - s)^3`` (``s`` the fraction of the rest of
            the swing; zero value, velocity and acceleration at both ends, so
            still C2) that brings the middle of the rest of the swing back up
            to the planned apex.
    """

    def __init__(self, previous, t_splice: float, target_xy, t_end: float | None = None):
        self.base: SwingTrajectory = previous.base if isinstance(previous, ReplannedSwing) else previous
        self.t_start = self.base.t_start
        self.t_end = float(t_end) if t_end is not None else previous.t_end
        if not self.t_start <= t_splice < self.t_end:
            raise ValueError(f"re-planning time {t_splice} outside the swing [{self.t_start}, {self.t_end})")
        self.previous = previous
        s = previous(t_splice)
        self.t_splice = float(t_splice)
        self.target = np.asarray(target_xy, dtype=float)[:2].copy()
        D = self.t_end - self.t_splice
        self._c = quintic_to_rest(s.pos[:2], s.vel[:2], s.acc[:2], self.target, D)
        self.retimed = bool(getattr(previous, "retimed", False)) or abs(self.t_end - self.base.t_end) > 1e-9
        if self.retimed:
            cz, self._h = retimed_height(s, self.base, self.t_splice, self.t_end)
            cyaw = quintic_to_rest(s.yaw, s.yaw_rate, s.yaw_acc, self.base.start.yaw + self.base.dyaw, D)
            self._cz = np.stack([cz, cyaw], axis=1)

    def __call__(self, t: float) -> SwingState:
        """Sample at time ``t`` [s]; the previous swing before the splice."""
        if t < self.t_splice:
            return self.previous(t)
        D = self.t_end - self.t_splice
        tau = min(max(t - self.t_splice, 0.0), D)
        pos, vel, acc = _poly(self._c, tau)
        if not self.retimed:
            s = self.base(t)
            return SwingState(
                np.array([pos[0], pos[1], s.pos[2]]),
                np.array([vel[0], vel[1], s.vel[2]]),
                np.array([acc[0], acc[1], s.acc[2]]),
                s.yaw,
                s.yaw_rate,
                s.yaw_acc,
            )
        (z, yaw), (vz, yaw_rate), (az, yaw_acc) = _poly(self._cz, tau)
        if self._h > 0.0:
            b, db, ddb = _bump(tau / D)
            z, vz, az = z + self._h * b, vz + self._h * db / D, az + self._h * ddb / (D * D)
        return SwingState(
            np.array([pos[0], pos[1], z]),
            np.array([vel[0], vel[1], vz]),
            np.array([acc[0], acc[1], az]),
            float(yaw),
            float(yaw_rate),
            float(yaw_acc),
        )


def retimed_height(state: SwingState, base: SwingTrajectory, t_splice: float, t_end: float) -> tuple[np.ndarray, float]:
    """Height of a swing retimed at ``t_splice`` to touch down at ``t_end`` [s]: the quintic
    coefficients (6,) from ``state`` down to rest at ``base``'s landing height, and the bump's
    height ``h`` [m] that brings the middle of the rest of the swing back up to ``base``'s apex
    while the swing is in its first half (0 after), ``z = quintic + h 64 s^3 (1 - s)^3``."""
    D = t_end - t_splice
    cz = quintic_to_rest(state.pos[2], state.vel[2], state.acc[2], float(base.end.position[2]), D)
    early = t_splice < 0.5 * (base.t_start + base.t_end)
    return cz, (max(0.0, base.top - float(_poly(cz, 0.5 * D)[0])) if early else 0.0)


def swing_reach(state: SwingState, planned_xy, target_xy, T: float, max_acc: float, height=None) -> float | None:
    """How far towards ``target_xy`` the swing foot can still land in ``T`` [s].

    The largest ``lam`` in [0, 1] such that the swing re-planned from ``state`` to rest at
    ``planned_xy + lam (target_xy - planned_xy)`` (2,) [m] (:func:`quintic_to_rest`) keeps its
    horizontal acceleration within ``max_acc`` [m/s^2]; None when even ``planned_xy`` is out of
    reach, or, with ``height`` (a retimed swing's re-planned height, :func:`retimed_height` for
    the touchdown ``T`` from now), when the height asks for more than ``max_acc``.

    The acceleration is affine in the landing, ``a(s) = a_free(s) + k(s) (p1 - p0)``, with
    ``a_free`` the quintic from the foot's velocity and acceleration to rest where it is and
    ``k(s) = 60 s (1 - s) (1 - 2 s) / T^2`` the minimum-jerk profile: at each checked instant
    ``|g + lam h| <= max_acc`` is a quadratic inequality in ``lam``.
    """
    T = float(T)
    s = _CHECKED
    tau = s * T
    free = _poly(quintic_to_rest(np.zeros(2), state.vel[:2], state.acc[:2], np.zeros(2), T), tau[:, None])[2]
    k = 60.0 * s * (1.0 - s) * (1.0 - 2.0 * s) / (T * T)
    p0 = np.asarray(state.pos[:2], dtype=float)
    g = free + k[:, None] * (np.asarray(planned_xy, dtype=float)[:2] - p0)[None, :]
    h = k[:, None] * (np.asarray(target_xy, dtype=float)[:2] - np.asarray(planned_xy, dtype=float)[:2])[None, :]
    a2 = max_acc * max_acc
    gg = np.einsum("ij,ij->i", g, g)
    if (gg > a2 * (1.0 + 1e-9)).any():
        return None
    if height is not None:
        cz, bump = height
        r = 1.0 - s
        # the quintic's and the bump's (see _bump)
        az = _poly(cz, tau)[2] + bump * 384.0 * s * r * (r * r - 3.0 * s * r + s * s) / (T * T)
        if (np.abs(az) > max_acc).any():
            return None
    hh = np.einsum("ij,ij->i", h, h)
    gh = np.einsum("ij,ij->i", g, h)
    moving = hh > 1e-18
    if not moving.any():
        return 1.0
    # |g + lam h|^2 <= a^2: lam <= (-gh + sqrt(gh^2 - hh (gg - a^2))) / hh (the discriminant is >= 0 at lam = 0)
    disc = np.maximum(gh[moving] ** 2 - hh[moving] * (gg[moving] - a2), 0.0)
    lam = (-gh[moving] + np.sqrt(disc)) / hh[moving]
    return float(min(1.0, max(0.0, lam.min())))


def _poly(c: np.ndarray, tau: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Value, first and second derivative of ``sum c_i tau^i`` (coefficients (6, n))."""
    pos = c[0] + tau * (c[1] + tau * (c[2] + tau * (c[3] + tau * (c[4] + tau * c[5]))))
    vel = c[1] + tau * (2.0 * c[2] + tau * (3.0 * c[3] + tau * (4.0 * c[4] + tau * 5.0 * c[5])))
    acc = 2.0 * c[2] + tau * (6.0 * c[3] + tau * (12.0 * c[4] + tau * 20.0 * c[5]))
    return pos, vel, acc
