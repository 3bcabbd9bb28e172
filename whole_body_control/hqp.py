"""Hierarchical least squares with inequality constraints, one proxsuite QP per level.

Decision variable ``x`` (size n).  Hard constraints ``E x = e`` and
``l <= C x <= u`` hold at every level.  Levels ``k = 1..K`` each hold weighted
objectives ``sum_i w_i ||A_i x - b_i||^2``.

Strict priority by nullspace projection: with ``x_k`` the solution after level
``k`` and ``Z_k`` an orthonormal basis of the directions that keep every
equality of the levels above (and ``E``), level ``k+1`` solves in ``z``::

    min  sum_i w_i ||A_i Z_k z - (b_i - A_i x_k)||^2 + eps ||z||^2
    s.t. l - C x_k <= C Z_k z <= u - C x_k

then ``x_{k+1} = x_k + Z_k z`` and ``Z_{k+1} = Z_k null(A_{k+1} Z_k)``.  What a
level achieved (``A_{k+1} x_{k+1}``) is thereby kept exactly by every lower
level, and the inequalities, present at every level, are never traded away.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import proxsuite

SOLVED = proxsuite.proxqp.QPSolverOutput.PROXQP_SOLVED


class LevelFailure(Exception):
    """A level's QP did not solve; carries the level index and the reason."""

    def __init__(self, level: int, reason: str):
        super().__init__(reason)
        self.level = level
        self.reason = reason


@dataclass
class Objective:
    """Weighted rows ``w ||A x - b||^2`` of one task (A over the full x)."""

    name: str
    A: np.ndarray
    b: np.ndarray
    weight: float


@dataclass(frozen=True)
class HqpSolution:
    x: np.ndarray
    x_levels: tuple[np.ndarray, ...]  # solution after each level (hard level first)
    residuals: tuple[float, ...]  # per task level: sqrt(sum w ||A x - b||^2) at the final x
    task_residuals: dict[str, float]  # per task: ||A x - b||
    iterations: int
    approximate_levels: int  # levels whose QP stopped at max_iter with a feasible iterate
    solve_time: float  # [s]


def _nullspace(A: np.ndarray, tol: float) -> np.ndarray:
    """Orthonormal basis of null(A) (columns); ``tol`` relative to the largest singular value.

    A complete QR of ``A^T`` is several times cheaper than an SVD; it is used
    when ``A`` has full row rank (checked on R's diagonal), the SVD otherwise.
    """
    m, n = A.shape
    if m == 0:
        return np.eye(n)
    if m < n:
        Q, R = np.linalg.qr(A.T, mode="complete")
        d = np.abs(np.diag(R))
        if d.min() > 1e3 * tol * max(d.max(), 1.0):
            return Q[:, m:]
    _, s, vt = np.linalg.svd(A, full_matrices=True)
    rank = int(np.sum(s > tol * max(s[0], 1.0))) if s.size else 0
    return vt[rank:].T


def _particular_and_nullspace(E: np.ndarray, e: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """Least-norm ``x`` with ``E x = e`` and an orthonormal basis of null(E)."""
    m, n = E.shape
    if m < n:
        Q, R = np.linalg.qr(E.T, mode="complete")
        d = np.abs(np.diag(R))
        if d.min() > 1e3 * tol * max(d.max(), 1.0):
            y = np.linalg.solve(R[:m].T, e)
            return Q[:, :m] @ y, Q[:, m:]
    u_, s, vt = np.linalg.svd(E, full_matrices=True)
    rank = int(np.sum(s > tol * max(s[0], 1.0)))
    return vt[:rank].T @ ((u_[:, :rank].T @ e) / s[:rank]), vt[rank:].T


class HierarchicalQP:
    """Solves the hierarchy; keeps one proxsuite QP per level and shape for warm starts."""

    def __init__(
        self,
        eps_abs: float = 1e-7,
        max_iter: int = 200,
        regularization: float = 1e-8,
        rank_tol: float = 1e-7,
        flat_weight: float = 1e-3,
    ):
        self.eps_abs = eps_abs
        self.flat_weight = flat_weight
        # Inequalities active at a higher level are widened by this much (row-normalized
        # units) below it: exactly tight rows make proxsuite's infeasibility test misfire.
        self.feasibility_margin = 1e-7
        self.accept_tolerance = 1e-3
        self.max_iter = max_iter
        self.regularization = regularization
        self.rank_tol = rank_tol
        self._qps: dict[tuple[int, int, int], proxsuite.proxqp.dense.QP] = {}
        self._previous: list[np.ndarray] | None = None

    def reset(self) -> None:
        self._previous = None

    def _qp(self, level: int, n: int, n_in: int):
        key = (level, n, n_in)
        qp = self._qps.get(key)
        if qp is None:
            qp = proxsuite.proxqp.dense.QP(n, 0, n_in)
            qp.settings.eps_abs = self.eps_abs
            qp.settings.eps_rel = 0.0
            qp.settings.max_iter = self.max_iter
            qp.settings.initial_guess = proxsuite.proxqp.InitialGuess.WARM_START
            qp.settings.verbose = False
            # The default certificate threshold (1e-4) declares feasible problems with
            # nearly parallel rows infeasible; true infeasibility ends at max_iter instead.
            qp.settings.eps_primal_inf = 1e-12
            self._qps[key] = qp
        return qp

    def _acceptable(self, res) -> bool:
        """An unfinished solve is used when its iterate is finite and feasible to
        ``accept_tolerance`` (row-normalized units): equalities hold exactly by
        construction and torques are clipped to their limits afterwards."""
        return (
            res.info.status == proxsuite.proxqp.QPSolverOutput.PROXQP_MAX_ITER_REACHED
            and res.info.pri_res <= self.accept_tolerance
            and bool(np.all(np.isfinite(res.x)))
        )

    @staticmethod
    def _unconstrained(H, g, CZ, lz, uz, tol=1e-9):
        """The unconstrained minimizer if it satisfies every inequality, else None."""
        try:
            z = np.linalg.solve(H, -g)
        except np.linalg.LinAlgError:
            return None
        c = CZ @ z
        if np.all(c >= lz - tol) and np.all(c <= uz + tol) and np.all(np.isfinite(z)):
            return z
        return None

    def solve(
        self,
        E: np.ndarray,
        e: np.ndarray,
        C: np.ndarray,
        lower: np.ndarray,
        upper: np.ndarray,
        levels: list[list[Objective]],
        skip_levels_from: int | None = None,
    ) -> HqpSolution:
        """Solve; ``skip_levels_from`` drops that task level and all below (fallback).

        Raises:
            LevelFailure: when the hard constraints or a level cannot be solved.
        """
        t0 = time.perf_counter()
        n = E.shape[1]
        # Hard equalities: least-norm particular solution and nullspace.
        if E.shape[0]:
            x, Z = _particular_and_nullspace(E, e, self.rank_tol)
            if np.linalg.norm(E @ x - e) > 1e-6 * max(1.0, np.linalg.norm(e)):
                raise LevelFailure(0, "hard equality constraints are inconsistent")
        else:
            x = np.zeros(n)
            Z = np.eye(n)
        # Row equilibration of the inequalities replaces proxsuite's (costly) preconditioner.
        scale = 1.0 / np.maximum(np.linalg.norm(C, axis=1), 1e-12)
        C = C * scale[:, None]
        lower = lower * scale
        upper = upper * scale
        n_levels = len(levels) if skip_levels_from is None else min(skip_levels_from, len(levels))
        previous = self._previous if self._previous is not None and len(self._previous) >= n_levels else None
        x_levels = [x]
        iterations = 0
        approximate = 0
        solved: list[np.ndarray] = []
        for k in range(n_levels):
            objectives = levels[k]
            if Z.shape[1] == 0 or not objectives:
                solved.append(x)
                x_levels.append(x)
                continue
            A = np.vstack([o.A for o in objectives])
            b = np.concatenate([o.b for o in objectives])
            w = np.concatenate([np.full(o.b.shape[0], o.weight) for o in objectives])
            AZ = A @ Z
            r = b - A @ x
            WAZ = AZ * w[:, None]
            H = AZ.T @ WAZ
            # Directions this level's tasks do not see are flat; left to a tiny Tikhonov term
            # they make the QP ill-conditioned. Weigh them like the tasks' own directions:
            # the unconstrained optimum is unchanged (those directions do not move the
            # objective) and lower levels are free to use them.
            N = _nullspace(AZ, self.rank_tol)
            scale_h = np.trace(H) / max(AZ.shape[1] - N.shape[1], 1)
            if N.shape[1]:
                H += (self.flat_weight * scale_h) * (N @ N.T)
            H[np.diag_indices_from(H)] += self.regularization * (1.0 + scale_h)
            g = -(WAZ.T @ r)
            CZ = C @ Z
            Cx = C @ x
            lz, uz = lower - Cx, upper - Cx
            if k > 0:
                # Below the first level the current point is feasible up to the solver's
                # tolerance: widen by that violation so z = 0 stays feasible (what a higher
                # level achieved on an inequality is kept, not re-litigated).
                np.minimum(lz, -self.feasibility_margin, out=lz)
                np.maximum(uz, self.feasibility_margin, out=uz)
            # Rows the remaining freedom cannot move are dropped (0 <= their slack holds at
            # z = 0 below the first level); the others are re-normalized. Near-zero rows make
            # proxsuite's infeasibility certificate misfire.
            row_norm = np.linalg.norm(CZ, axis=1)
            keep = row_norm > 1e-9
            if k > 0 or np.all(keep):
                inv = 1.0 / row_norm[keep]
                CZ = CZ[keep] * inv[:, None]
                lz = lz[keep] * inv
                uz = uz[keep] * inv
            z = self._unconstrained(H, g, CZ, lz, uz)
            if z is not None:
                x = x + Z @ z
                solved.append(x)
                x_levels.append(x)
                if k + 1 < n_levels:
                    Z = Z @ N
                continue
            z0 = Z.T @ (previous[k] - x) if previous is not None and previous[k].shape == x.shape else np.zeros(Z.shape[1])
            qp = self._qp(k, Z.shape[1], CZ.shape[0])
            qp.init(H, g, None, None, CZ, lz, uz, compute_preconditioner=False)
            qp.solve(z0, None, None)
            res = qp.results
            iterations += res.info.iter
            if res.info.status != SOLVED and self._acceptable(res):
                approximate += 1
            elif res.info.status != SOLVED or not np.all(np.isfinite(res.x)):
                # Flat directions (nullspace of the level's tasks) can stall the fast,
                # unpreconditioned solve: retry once with equilibration and a larger
                # proximal step before declaring the level failed.
                qp.init(H, g, None, None, CZ, lz, uz, compute_preconditioner=True, rho=1e-2)
                qp.solve(z0, None, None)
                res = qp.results
                iterations += res.info.iter
            z = res.x
            if res.info.status != SOLVED and not self._acceptable(res):
                raise LevelFailure(k + 1, f"level {k + 1} QP: {res.info.status.name}")
            x = x + Z @ z
            solved.append(x)
            x_levels.append(x)
            if k + 1 < n_levels:
                Z = Z @ N
        self._previous = solved
        residuals = []
        task_res = {}
        for objectives in levels[:n_levels]:
            total = 0.0
            for o in objectives:
                rr = float(np.linalg.norm(o.A @ x - o.b))
                task_res[o.name] = rr
                total += o.weight * rr * rr
            residuals.append(total**0.5)
        return HqpSolution(
            x, tuple(x_levels), tuple(residuals), task_res, iterations, approximate, time.perf_counter() - t0
        )
