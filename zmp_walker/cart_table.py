"""Cart-table model (linear inverted pendulum with jerk input), one horizontal axis.

State ``x = (c, cdot, cddot)`` [m, m/s, m/s^2], input the CoM jerk ``u``
[m/s^3] held constant over a period ``T`` [s]::

    x_{k+1} = A x_k + B u_k,   A = [[1, T, T^2/2], [0, 1, T], [0, 0, 1]],
                               B = [T^3/6, T^2/2, T]
    p_k     = C x_k,           C = [1, 0, -z_c/g]

``p`` is the ZMP of a point mass at constant height ``z_c`` [m] under gravity
``g`` [m/s^2]: ``p = c - z_c/g * cddot``.  Arrays of shape (3, 2) hold the x
and y axes side by side.
"""

from __future__ import annotations

import numpy as np

__all__ = ["discrete_matrices", "integrate", "zmp"]


def discrete_matrices(T: float, z_c: float, g: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(A (3,3), B (3,), C (3,))`` of the cart-table model sampled at ``T`` [s]."""
    A = np.array([[1.0, T, T * T / 2.0], [0.0, 1.0, T], [0.0, 0.0, 1.0]])
    B = np.array([T**3 / 6.0, T * T / 2.0, T])
    C = np.array([1.0, 0.0, -z_c / g])
    return A, B, C


def integrate(x: np.ndarray, u, tau: float) -> np.ndarray:
    """Exact state after ``tau`` [s] of constant jerk ``u`` from ``x`` ((3,) or (3, n))."""
    c, v, a = x[0], x[1], x[2]
    tau2 = tau * tau
    return np.array([c + v * tau + a * tau2 / 2.0 + u * tau2 * tau / 6.0, v + a * tau + u * tau2 / 2.0, a + u * tau])


def zmp(x: np.ndarray, z_c: float, g: float) -> np.ndarray:
    """Cart-table ZMP ``c - z_c/g cddot`` [m] of a state ``x`` ((3,) or (3, n))."""
    return x[0] - z_c / g * x[2]
