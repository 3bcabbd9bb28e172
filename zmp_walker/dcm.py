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

__all__ = ["omega", "dcm", "DcmFeedback"]


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
