"""Divergent component of motion (DCM) feedback on the ZMP.

LIPM at constant height ``z_c`` [m]: ``cddot = omega^2 (c - p)`` with
``omega = sqrt(g / z_c)`` [1/s].  The DCM ``xi = c + cdot / omega`` [m] obeys
``xi_dot = omega (xi - p)``: it diverges away from the ZMP ``p`` while the CoM
converges to it (``cdot = omega (xi - c)``).

Feedback law (horizontal components)::

    p_cmd = clamp_S(p_ref + k (xi_meas - xi_ref))

With ``p_cmd`` unclamped and ``xi_ref_dot = omega (xi_ref - p_ref)``, the
error ``e = xi_meas - xi_ref`` obeys ``e_dot = omega (1 - k) e``: it decays
at the rate ``omega (k - 1)``, so ``k > 1`` is required (``k = 1 + k_xi /
omega`` in Englsberger's notation).  Clamping to the support polygon ``S``
keeps ``p_cmd`` physically realisable; it limits the recoverable error.

The CoM acceleration that realises ``p_cmd`` on the measured state is
``cddot_cmd = omega^2 (c_meas - p_cmd)`` (z component 0): this is what a
whole-body controller should track when the measured state is available (as
a feedforward CoM acceleration, without extra CoM position feedback, since
the DCM loop already is the feedback).
"""

from __future__ import annotations

import math

import numpy as np

from zmp_walker.geometry import Polygon

__all__ = ["omega", "dcm", "DcmFeedback", "DcmDisturbanceObserver", "slope_height", "slope_shift"]


def omega(g: float, z_c: float) -> float:
    """LIPM natural frequency ``sqrt(g / z_c)`` [1/s]."""
    return math.sqrt(g / z_c)


def dcm(c: np.ndarray, cdot: np.ndarray, w: float) -> np.ndarray:
    """DCM ``c + cdot / omega`` [m]."""
    return np.asarray(c, dtype=float) + np.asarray(cdot, dtype=float) / w


class DcmFeedback:
    """ZMP correction from the DCM error.

    Args:
        k: feedback gain (> 1) [-].
        w: ``omega`` [1/s].
        clamp: clamp the corrected ZMP to the support polygon.
    """

    def __init__(self, k: float, w: float, clamp: bool = True):
        if not k > 1.0:
            raise ValueError(f"DCM gain k must be > 1 for convergence, got {k}")
        self.k, self.w, self.clamp = float(k), float(w), bool(clamp)

    def zmp(self, zmp_ref, dcm_ref, dcm_meas, polygon: Polygon | None) -> np.ndarray:
        """Corrected ZMP (2,) [m] from reference and measured DCM (xy)."""
        p = np.asarray(zmp_ref[:2], dtype=float) + self.k * (np.asarray(dcm_meas[:2]) - np.asarray(dcm_ref[:2]))
        if self.clamp and polygon is not None:
            p = polygon.clamp(p)
        return p

    def com_acc(self, c_meas, p_cmd) -> np.ndarray:
        """CoM acceleration (3,) [m/s^2] realising ``p_cmd``: ``omega^2 (c - p)``, z = 0."""
        a = np.zeros(3)
        a[:2] = self.w * self.w * (np.asarray(c_meas[:2], dtype=float) - np.asarray(p_cmd[:2]))
        return a


def slope_shift(gravity, com_height: float) -> np.ndarray:
    """CoM lean (2,) [m] that balances gravity with a component along the ground.

    In the ground's frame (z along its normal) a slope tilts ``gravity`` to
    ``(g_x, g_y, g_z)``, ``g_z < 0``.  The contact force balances it when it
    points from the ZMP through the CoM along ``-gravity``: the CoM stands
    ``com_height * (g_x, g_y) / g_z`` [m] from the ZMP (``h tan a`` uphill on a
    slope ``a``, the robot leans into it).  Zero when ``gravity`` is not
    finite or does not point into the ground.
    """
    g = np.asarray(gravity, dtype=float).reshape(-1)
    if g.shape != (3,) or not np.all(np.isfinite(g)) or not g[2] < 0.0:
        return np.zeros(2)
    return float(com_height) * g[:2] / g[2]


def slope_height(gravity, com_height: float, reach: float) -> float:
    """CoM height [m] along the ground's normal on a slope that keeps the legs' reach of flat ground.

    At the height ``z`` the lean :func:`slope_shift` puts the CoM ``z tan a`` from the
    ZMP along the ground (slope ``a``), so a foot ``reach`` [m] (half a step) ahead of
    the ZMP downhill, or behind it uphill, is ``reach + z tan a`` from below the CoM.
    The height returned keeps that foot as far from the CoM as on flat ground,
    ``z^2 + (reach + z tan a)^2 = h^2 + reach^2`` (``h = com_height``): with the
    height held at ``h``, the lean stretches the leg that starts (downhill) or ends
    (uphill) its stance.  ``reach = 0`` gives ``h cos a``, the CoM ``h`` from the ZMP
    along gravity.  ``com_height`` when ``gravity`` is not finite or does not point
    into the ground.
    """
    g = np.asarray(gravity, dtype=float).reshape(-1)
    h = float(com_height)
    if g.shape != (3,) or not np.all(np.isfinite(g)) or not g[2] < 0.0:
        return h
    t = float(np.linalg.norm(g[:2])) / -float(g[2])  # tan a
    r = float(reach)
    return (-r * t + math.sqrt(r * r * t * t + (1.0 + t * t) * h * h)) / (1.0 + t * t)


class DcmDisturbanceObserver:
    """Estimate of a constant disturbance ``d`` [m/s] on the DCM dynamics.

    Model: ``xi_dot = omega (xi - p) + d`` with ``p`` the ZMP commanded at the
    previous update.  A horizontal force ``f`` on the CoM gives ``d = f / (m
    omega)``; gravity tilted by a slope angle ``a`` that the walker does not
    know gives ``d = -g sin(a) / omega``; a CoM model error ``delta`` acts as
    ``d = -omega delta``.  Luenberger observer on the measured DCM::

        xi_hat_dot = omega (xi - p) + d_hat + l1 (xi - xi_hat)
        d_hat_dot  = l2 (xi - xi_hat)

    The estimation error obeys ``s^2 + l1 s + l2``; ``l1 = 2 b``, ``l2 = b^2``
    put both poles at ``-b`` (``bandwidth`` [rad/s]), slow against the DCM
    feedback (``omega (k - 1)``) so that a push is mostly left to it.

    :attr:`offset` ``= -d_hat / omega`` [m] is the shift of the DCM (and CoM)
    reference under which ``p = p_ref`` holds again in steady state: with
    ``p_cmd = p_ref + k (xi - xi_ref - offset)``, the error ``e = xi - xi_ref
    - offset`` obeys ``e_dot = omega (1 - k) e + omega offset + d = omega (1 -
    k) e``.  Its norm is limited to ``max_offset`` [m].
    """

    def __init__(self, w: float, bandwidth: float, max_offset: float):
        if not bandwidth > 0.0:
            raise ValueError(f"observer bandwidth must be > 0, got {bandwidth}")
        self.w = float(w)
        self.l1, self.l2 = 2.0 * float(bandwidth), float(bandwidth) ** 2
        self.max_offset = float(max_offset)
        self.reset()

    def reset(self) -> None:
        """Forget the estimate (zero disturbance)."""
        self.d = np.zeros(2)
        self._xi_hat: np.ndarray | None = None
        self._t: float | None = None

    @property
    def offset(self) -> np.ndarray:
        """Reference shift (2,) [m], ``-d_hat / omega``."""
        return -self.d / self.w

    def update(self, t: float, xi_meas, p_applied, d_known=None) -> np.ndarray:
        """Advance to time ``t`` [s] with the measured DCM and the ZMP applied since the last update (xy) [m].

        ``d_known`` (2,) [m/s] is the part of the disturbance the caller already
        compensates (a measured slope: ``-omega`` times :func:`slope_shift`);
        the estimate is of the rest.  Returns :attr:`offset`.  The first call (or a non-finite input, or a
        time that does not advance) only (re)starts the estimate of ``xi``.
        """
        xi = np.asarray(xi_meas[:2], dtype=float)
        p = np.asarray(p_applied[:2], dtype=float)
        if not (np.all(np.isfinite(xi)) and np.all(np.isfinite(p))):
            self._xi_hat, self._t = None, None
            return self.offset
        if self._xi_hat is None or self._t is None or not t > self._t:
            self._xi_hat, self._t = xi.copy(), float(t)
            return self.offset
        h = float(t) - self._t
        self._t = float(t)
        e = xi - self._xi_hat
        known = np.zeros(2) if d_known is None else np.asarray(d_known, dtype=float)
        self._xi_hat += h * (self.w * (xi - p) + known + self.d + self.l1 * e)
        self.d += h * self.l2 * e
        limit = self.max_offset * self.w
        n = float(np.linalg.norm(self.d))
        if n > limit:
            self.d *= limit / n
        return self.offset
