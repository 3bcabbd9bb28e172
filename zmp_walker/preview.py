"""ZMP preview control (Kajita et al., ICRA 2003) on the cart-table model.

Per horizontal axis, with the cart-table model of :mod:`zmp_walker.cart_table`
sampled at ``T`` [s] and the ZMP error ``e_k = C x_k - p_ref,k`` [m], the jerk

    u_k = -G_i sum_{i<=k} e_i  -  G_x x_k  -  sum_{j=1}^{N} G_d(j) p_ref,k+j

minimises ``sum_k Qe e_k^2 + R du_k^2`` on the augmented (incremental) system
of Katayama et al.::

    X_{k+1} = A~ X_k + B~ du_k,   X = (e_k, dx_k),
    A~ = [[1, C A], [0, A]],  B~ = [C B; B],  Q~ = diag(Qe, 0, 0, 0)

``P`` solves the discrete algebraic Riccati equation of ``(A~, B~, Q~, R)``;
``K = (R + B~' P B~)^-1 B~' P A~ = [G_i, G_x]`` and the preview gains are
``G_d(1) = -G_i``, ``G_d(j) = (R + B~' P B~)^-1 B~' X_{j-1}`` with
``X_1 = -A_c' P I~``, ``X_j = A_c' X_{j-1}``, ``A_c = A~ - B~ K``,
``I~ = (1, 0, 0, 0)``.  ``N = round(horizon / T)``.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from zmp_walker.cart_table import discrete_matrices

__all__ = ["PreviewController"]


class PreviewController:
    """Kajita's preview controller, both axes at once.

    Args:
        T: sampling period [s].
        z_c: CoM height [m].
        g: gravity [m/s^2].
        qe: ZMP error weight.
        r: jerk weight.
        horizon: preview window [s].

    Attributes:
        Gi (float), Gx (3,), Gd (N,): gains; ``Gd[j-1]`` multiplies ``p_ref,k+j``.
        A (3, 3), B (3,), C (3,): cart-table matrices.
    """

    def __init__(self, T: float, z_c: float, g: float, qe: float, r: float, horizon: float):
        self.T = T
        self.N = max(int(round(horizon / T)), 1)
        self.A, self.B, self.C = discrete_matrices(T, z_c, g)
        A1 = np.zeros((4, 4))
        A1[0, 0] = 1.0
        A1[0, 1:] = self.C @ self.A
        A1[1:, 1:] = self.A
        B1 = np.concatenate([[self.C @ self.B], self.B]).reshape(4, 1)
        Q1 = np.diag([qe, 0.0, 0.0, 0.0])
        P = scipy.linalg.solve_discrete_are(A1, B1, Q1, np.array([[r]]))
        S = float(r + (B1.T @ P @ B1)[0, 0])
        K = (B1.T @ P @ A1).ravel() / S
        self.Gi = float(K[0])
        self.Gx = K[1:].copy()
        Ac = A1 - B1 @ K.reshape(1, 4)
        X = -Ac.T @ P @ np.array([1.0, 0.0, 0.0, 0.0])
        Gd = np.empty(self.N)
        Gd[0] = -self.Gi
        for j in range(1, self.N):
            Gd[j] = float(B1[:, 0] @ X) / S
            X = Ac.T @ X
        self.Gd = Gd

    def rest_error_sum(self, p: np.ndarray) -> np.ndarray:
        """Integral state that makes ``u = 0`` for the CoM at rest above ``p`` (2,) [m].

        With a constant reference ``p`` and ``x = (p, 0, 0)`` the law gives
        ``u = -G_i s - (G_x[0] + sum G_d) p``; this returns the ``s`` that
        zeroes it, so a standing robot's reference is exactly constant.
        """
        return -(self.Gx[0] + self.Gd.sum()) * np.asarray(p, dtype=float) / self.Gi

    def jerk(self, x: np.ndarray, error_sum: np.ndarray, p_future: np.ndarray) -> np.ndarray:
        """Jerk (2,) [m/s^3] for the state ``x`` (3, 2).

        Args:
            x: cart-table state, columns x and y.
            error_sum: ``sum_{i<=k} e_i`` (2,) [m], including the current error.
            p_future: ``p_ref`` at ``k+1 .. k+N``, shape (N, 2) [m].
        """
        return -self.Gi * error_sum - self.Gx @ x - self.Gd @ p_future


class PreviewPlanner:
    """CoM planner of the generator using :class:`PreviewController`.

    Keeps the integral of the ZMP error; :meth:`update` is called once per
    period ``T`` with the cart-table state at time ``t``.
    """

    def __init__(self, T: float, z_c: float, g: float, qe: float, r: float, horizon: float):
        self.controller = PreviewController(T, z_c, g, qe, r, horizon)
        self.period = T
        self.z_c, self.g = z_c, g
        self._offsets = T * np.arange(1, self.controller.N + 1)
        self.error_sum = np.zeros(2)
        self._last: tuple[float, np.ndarray] | None = None

    def reset(self, x: np.ndarray, p_ref: np.ndarray) -> None:
        """Start from ``x`` (3, 2) with the integral state of a robot at rest above ``p_ref``."""
        self.error_sum = self.controller.rest_error_sum(p_ref) - (self.controller.C @ x - p_ref)
        self._last = None

    def update(self, t: float, x: np.ndarray, reference) -> np.ndarray:
        """Jerk (2,) [m/s^3] to apply over ``[t, t + T)``; ``reference`` has ``sample(times)``."""
        e = self.controller.C @ x - reference.sample(t)
        if self._last is not None and self._last[0] == t:  # re-plan at the same tick: count e once
            self.error_sum = self.error_sum - self._last[1]
        self.error_sum = self.error_sum + e
        self._last = (t, e)
        return self.controller.jerk(x, self.error_sum, reference.sample(t + self._offsets))
