"""6D foot contacts: rigid-contact constraint, friction cone, CoP and normal force bounds.

The contact wrench ``f = [fx fy fz tx ty tz]`` acts at the sole frame origin
and is expressed in the sole frame (z along the ground normal).  Its rows
enter the dynamics as ``J_local^T f``.

Unilateral and friction constraints (``F f <= 0`` plus normal bounds)::

    |fx|, |fy| <= mu / sqrt(2) * fz          inner pyramid of the friction cone
    y_min fz <= tx <= y_max fz                CoP inside the sole: py = tx / fz
    -x_max fz <= ty <= -x_min fz                                px = -ty / fz
    tz_min <= tz_c <= tz_max                  yaw: 8 rows, see below
    fz_min(t) <= fz <= fz_max(t)              force ramp on add / remove

The yaw torque a flat sole can resist depends on where its CoP is and on
the tangential force: on the toe line only the two toe corners grip.  The
bound is that of the contact wrench cone of a rectangle whose corners each
have the friction pyramid ``mu_z`` (Caron, Pham, Nakamura, "Stability of
surface contacts for humanoid robots: closed-form formulae of the contact
wrench cone for rectangular support areas", ICRA 2015)::

    tz_min = -mu_z (X + Y) fz + |Y fx - mu_z tx_c| + |X fy - mu_z ty_c|
    tz_max = +mu_z (X + Y) fz - |Y fx + mu_z tx_c| - |X fy + mu_z ty_c|

with the torques ``t_c`` about the centre ``c`` of the CoP rectangle (the
sole shrunk by ``cop_margin``; the sole frame origin need not be its centre),
``X``, ``Y`` its half sizes and ``mu_z = yaw_friction * mu / sqrt(2)``: the
margin that keeps the CoP off the edges also keeps the yaw torque off the
cone's boundary.  Each absolute value splits into two rows: 4 rows per bound.

Adding or removing a contact ramps ``fz_max`` over ``transition_time``: on
removal the rigid constraint is kept until the ramp reaches zero load.
"""

from __future__ import annotations

import math

import numpy as np

from whole_body_control.config import ContactConfig
from whole_body_control.robot import Sole
from whole_body_control.state import LOCAL, RobotState


class Contact6D:
    """A flat foot contact on sole frame ``frame_id`` with rectangle ``sole``."""

    N_ROWS = 17

    def __init__(self, name: str, frame_id: int, sole: Sole, mu: float, config: ContactConfig, weight_share: float):
        self.name = name
        self.frame_id = frame_id
        self.sole = sole
        self.config = config
        self.weight_share = weight_share  # [N] a typical normal load, for ramps
        self._active = True
        self.changes = 0  # times ``active`` changed: a new support phase, for caches keyed on it
        self._ramp_start = None  # time a transition started, or None
        self._ramp_kind = None  # "add" or "remove"
        self._fz_at_removal = 0.0
        self.set_mu(mu)

    def set_mu(self, mu: float) -> None:
        if not mu > 0.0:
            raise ValueError(f"contact '{self.name}': friction coefficient must be > 0, got {mu}")
        self.mu = mu
        s = self.sole
        m = self.config.cop_margin
        if not (2.0 * m < s.x_max - s.x_min and 2.0 * m < s.y_max - s.y_min):
            raise ValueError(
                f"contact '{self.name}': cop_margin {m} m leaves no CoP region in the sole "
                f"[{s.x_min}, {s.x_max}] x [{s.y_min}, {s.y_max}] m"
            )
        x_min, x_max, y_min, y_max = s.x_min + m, s.x_max - m, s.y_min + m, s.y_max - m
        mut = mu / math.sqrt(2.0)
        rows = [
            #  fx    fy    fz      tx    ty   tz
            [1.0, 0.0, -mut, 0.0, 0.0, 0.0],
            [-1.0, 0.0, -mut, 0.0, 0.0, 0.0],
            [0.0, 1.0, -mut, 0.0, 0.0, 0.0],
            [0.0, -1.0, -mut, 0.0, 0.0, 0.0],
            [0.0, 0.0, -y_max, 1.0, 0.0, 0.0],
            [0.0, 0.0, y_min, -1.0, 0.0, 0.0],
            [0.0, 0.0, -x_max, 0.0, -1.0, 0.0],
            [0.0, 0.0, x_min, 0.0, 1.0, 0.0],
        ]
        # yaw rows of the rectangle's wrench cone, about its centre c: t_c = t - c x f
        cx, cy = 0.5 * (x_min + x_max), 0.5 * (y_min + y_max)
        hx, hy = 0.5 * (x_max - x_min), 0.5 * (y_max - y_min)
        muz = self.config.yaw_friction * mut
        tcx = np.array([0.0, 0.0, -cy, 1.0, 0.0, 0.0])
        tcy = np.array([0.0, 0.0, cx, 0.0, 1.0, 0.0])
        tcz = np.array([cy, -cx, 0.0, 0.0, 0.0, 1.0])
        ex, ey, ez = np.eye(6)[:3]
        for s1 in (1.0, -1.0):
            for s2 in (1.0, -1.0):
                # tz_c >= tz_min  and  tz_c <= tz_max
                rows.append(-tcz - muz * (hx + hy) * ez + s1 * (hy * ex - muz * tcx) + s2 * (hx * ey - muz * tcy))
                rows.append(tcz - muz * (hx + hy) * ez + s1 * (hy * ex + muz * tcx) + s2 * (hx * ey + muz * tcy))
        rows.append([0.0, 0.0, 1.0, 0.0, 0.0, 0.0])
        self.F = np.array(rows, dtype=float)

    @property
    def active(self) -> bool:
        """In use (a removal's ramp included)."""
        return self._active

    @active.setter
    def active(self, on: bool) -> None:
        self.changes += on != self._active
        self._active = on

    # -- schedule ---------------------------------------------------------------

    def add(self, t: float) -> None:
        """Start using the contact at time ``t`` [s]; the force bound ramps up."""
        if self.active and self._ramp_kind != "remove":
            return
        self.active = True
        self._ramp_kind, self._ramp_start = ("add", t) if self.config.transition_time > 0 else (None, None)

    def remove(self, t: float, fz: float) -> None:
        """Start releasing the contact at ``t`` [s] from normal load ``fz`` [N]."""
        if not self.active or self._ramp_kind == "remove":
            return
        if self.config.transition_time <= 0:
            self.active = False
            self._ramp_kind = self._ramp_start = None
            return
        self._ramp_kind, self._ramp_start = "remove", t
        self._fz_at_removal = max(fz, 0.0)

    def update(self, t: float) -> None:
        """Advance the ramp; a finished removal deactivates the contact."""
        if self._ramp_kind is None:
            return
        if t - self._ramp_start >= self.config.transition_time:
            if self._ramp_kind == "remove":
                self.active = False
            self._ramp_kind = self._ramp_start = None

    @property
    def in_transition(self) -> bool:
        return self._ramp_kind is not None

    @property
    def removing(self) -> bool:
        return self._ramp_kind == "remove"

    def normal_bounds(self, t: float) -> tuple[float, float]:
        """``(fz_min, fz_max)`` [N] at time ``t``."""
        cfg = self.config
        if self._ramp_kind is None:
            return cfg.f_min, cfg.f_max
        s = min(max((t - self._ramp_start) / cfg.transition_time, 0.0), 1.0)
        if self._ramp_kind == "remove":
            fz_max = (1.0 - s) * max(self._fz_at_removal, cfg.f_min)
            return 0.0, fz_max
        fz_max = cfg.f_min + s * (2.0 * self.weight_share)
        return min(cfg.f_min, fz_max), fz_max

    # -- rows -------------------------------------------------------------------

    def motion_rows(self, state: RobotState) -> tuple[np.ndarray, np.ndarray]:
        """Rigid contact ``J a = -J_dot v - kd J v``: returns ``(J, rhs)``, J in the sole (LOCAL) frame."""
        J = state.jacobian(self.frame_id, LOCAL)
        rhs = -state.drift(self.frame_id, LOCAL)
        if self.config.kd > 0:
            rhs -= self.config.kd * J.dot(state.v)
        return J, rhs

    def force_bounds(
        self, t: float, lower: np.ndarray | None = None, upper: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(F, lower, upper)`` for ``lower <= F f <= upper``; the bounds are written
        into ``lower`` and ``upper`` (``N_ROWS`` each) when given, else into new arrays."""
        fz_min, fz_max = self.normal_bounds(t)
        if lower is None:
            lower = np.empty(self.N_ROWS)
        if upper is None:
            upper = np.empty(self.N_ROWS)
        lower.fill(-np.inf)
        upper.fill(0.0)
        lower[-1], upper[-1] = fz_min, fz_max
        return self.F, lower, upper

    def check_wrench(self, f: np.ndarray, tol: float = 1e-3) -> list[str]:
        """Violations, beyond ``tol`` [N or N m], of fz >= 0, the true (circular) friction
        cone ``|(fx, fy)| <= mu fz`` and the CoP rows ``y_min fz <= tx <= y_max fz``,
        ``-x_max fz <= ty <= -x_min fz``, as text."""
        fx, fy, fz, tx, ty, _ = f
        s = self.sole
        out = []
        if fz < -tol:
            out.append(f"{self.name}: negative normal force {fz:.3g} N")
        if math.hypot(fx, fy) > self.mu * fz + tol:
            out.append(f"{self.name}: tangential force {math.hypot(fx, fy):.4g} N > mu fz {self.mu * fz:.4g} N")
        if not (s.y_min * fz - tol <= tx <= s.y_max * fz + tol and -s.x_max * fz - tol <= ty <= -s.x_min * fz + tol):
            px, py = (-ty / fz, tx / fz) if fz > 0 else (float("nan"), float("nan"))
            out.append(f"{self.name}: CoP ({px:.4f}, {py:.4f}) outside the sole (tx {tx:.4g}, ty {ty:.4g} N m)")
        return out
