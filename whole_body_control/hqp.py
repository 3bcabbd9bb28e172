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
from scipy.linalg import lapack

from whole_body_control.errors import WbcError
from whole_body_control.qp_backend import proxsuite

SOLVED = proxsuite.proxqp.QPSolverOutput.PROXQP_SOLVED


def _cholesky(G: np.ndarray):
    """Cholesky factor of a symmetric positive definite matrix, or None.

    LAPACK is called directly: numpy's generic ``solve`` costs several times
    more than the factorization itself at these sizes (3 to 50).
    """
    c, info = lapack.dpotrf(G, lower=1, clean=0)
    return c if info == 0 else None


def _spd_solve(G: np.ndarray, B: np.ndarray, factor=None) -> np.ndarray:
    """Solve ``G X = B`` for SPD ``G`` (factor optional); least squares if G is singular."""
    c = factor if factor is not None else _cholesky(G)
    if c is None:
        return np.linalg.lstsq(G, B, rcond=None)[0]
    x, info = lapack.dpotrs(c, B, lower=1)
    return x


_EYES: dict[int, np.ndarray] = {}


def _eye(n: int) -> np.ndarray:
    """The n x n identity, read-only and shared (built once per size)."""
    eye = _EYES.get(n)
    if eye is None:
        eye = _EYES[n] = np.eye(n)
        eye.flags.writeable = False
    return eye


@dataclass(frozen=True)
class LevelProblem:
    """One level's QP in its reduced coordinates ``z`` (``x = x_k + Z_k z``)::

        min 1/2 z^T H z + g^T z   s.t.  lower <= C z <= upper

    as handed to proxsuite (rows of ``C`` normalized), with the warm start ``z0``:
    enough to replay a failed solve without the controller.
    """

    level: int  # task level, 1 = highest
    H: np.ndarray
    g: np.ndarray
    C: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    z0: np.ndarray


class LevelFailure(WbcError):
    """A level could not be solved: its index (0 = the hard constraints), the reason
    and, when a QP failed, that QP (:class:`LevelProblem`)."""

    def __init__(self, level: int, reason: str, problem: LevelProblem | None = None):
        super().__init__(reason)
        self.level = level
        self.reason = reason
        self.problem = problem


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


class HierarchicalQP:
    """Solves the hierarchy; keeps one proxsuite QP per level and shape for warm starts."""

    def __init__(
        self,
        eps_abs: float = 1e-7,
        max_iter: int = 200,
        regularization: float = 1e-8,
        flat_weight: float = 1e-3,
    ):
        self.eps_abs = eps_abs
        self.flat_weight = flat_weight
        # Inequalities active at a higher level are widened by this much (row-normalized
        # units) below it: exactly tight rows make proxsuite's infeasibility test misfire.
        self.feasibility_margin = 1e-7
        self.accept_tolerance = 1e-6
        self.max_iter = max_iter
        self.regularization = regularization
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
            # Bound the worst case: a 1 kHz loop cannot wait for thousands of inner steps;
            # an unfinished level is used if feasible, else the fallback ladder acts.
            qp.settings.max_iter_in = 30
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

    def _solve_qp(self, k, AZ, w, r, P, Z, C, Cx, lo, hi, x, previous, last):
        """Level ``k`` with active inequalities: proxsuite in the z coordinates.

        Returns ``(z, approximate, iterations)``; raises :class:`LevelFailure`.
        """
        n = Z.shape[1]
        WAZ = AZ * w[:, None]
        H = AZ.T @ WAZ
        scale_h = np.trace(H) / max(min(AZ.shape), 1)
        # Directions this level's tasks do not see are flat; left to a tiny Tikhonov term
        # they make the QP ill-conditioned. Weigh them like the tasks' own directions: the
        # unconstrained optimum is unchanged (they do not move the objective).
        if P is None:
            # Last level: its projector was not needed by a level below, but the QP needs
            # the flat directions (null(AZ), including the directions Z removes) weighted.
            Gp = AZ @ AZ.T
            Gp.flat[:: Gp.shape[0] + 1] += 1e-9 * (1.0 + np.trace(Gp) / Gp.shape[0])
            P = _eye(n) - AZ.T @ _spd_solve(Gp, AZ)
        H += (self.flat_weight * scale_h) * P
        H.flat[:: n + 1] += self.regularization * (1.0 + scale_h)
        g = -(WAZ.T @ r)
        CZ = C @ Z
        lz, uz = lo - Cx, hi - Cx
        # Rows the remaining freedom cannot move are dropped (their slack holds at z = 0
        # below the first level); the others are re-normalized. Near-zero rows make
        # proxsuite's infeasibility certificate misfire.
        # (The row count stays fixed so that each level keeps one proxsuite workspace.)
        row_norm = np.linalg.norm(CZ, axis=1)
        keep = row_norm > 1e-9
        if k > 0 or np.all(keep):
            # (a dropped row's bound is not scaled: an infinite bound times 0 would be NaN)
            inv = np.where(keep, 1.0 / np.maximum(row_norm, 1e-300), 1.0)
            CZ = CZ * np.where(keep, inv, 0.0)[:, None]
            lz = np.where(keep, lz * inv, -1e20)
            uz = np.where(keep, uz * inv, 1e20)
        z0 = Z.T @ (previous[k] - x) if previous is not None and previous[k].shape == x.shape else np.zeros(n)
        qp = self._qp(k, n, CZ.shape[0])
        qp.init(H, g, None, None, CZ, lz, uz, compute_preconditioner=False)
        qp.solve(z0, None, None)
        res = qp.results
        iterations = res.info.iter
        if res.info.status == SOLVED and np.all(np.isfinite(res.x)):
            return res.x, 0, iterations
        if self._acceptable(res):
            return res.x, 1, iterations
        # Retry once, from where the first attempt stopped, with equilibration and a
        # larger budget (three times the configured one).
        qp.settings.max_iter = 3 * self.max_iter
        qp.init(H, g, None, None, CZ, lz, uz, compute_preconditioner=True)
        qp.solve(res.x.copy() if np.all(np.isfinite(res.x)) else z0, None, None)
        qp.settings.max_iter = self.max_iter
        res = qp.results
        iterations += res.info.iter
        if res.info.status == SOLVED and np.all(np.isfinite(res.x)):
            return res.x, 0, iterations
        if self._acceptable(res):
            return res.x, 1, iterations
        problem = LevelProblem(k + 1, H, g, CZ, lz, uz, z0)
        raise LevelFailure(k + 1, f"level {k + 1} QP: {res.info.status.name}", problem)

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
        damping = self.regularization
        # Hard equalities: least-norm particular solution and the nullspace projector
        # Z = I - E^T (E E^T)^-1 E (a projector, not a basis: no QR/SVD per tick).
        if E.shape[0]:
            row = 1.0 / np.maximum(np.linalg.norm(E, axis=1), 1e-12)  # same solution set, better conditioned
            E = E * row[:, None]
            e = e * row
            G0 = E @ E.T
            G0.flat[:: G0.shape[0] + 1] += 1e-12
            c0 = _cholesky(G0)
            sol0 = _spd_solve(G0, np.column_stack([e, E]), c0)
            x = E.T @ sol0[:, 0]
            Z = _eye(n) - E.T @ sol0[:, 1:]
            x += E.T @ _spd_solve(G0, e - E @ x, c0)  # one step of iterative refinement
            if np.linalg.norm(E @ x - e) > 1e-8 * max(1.0, np.linalg.norm(e)):
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
        stacked: list[tuple[np.ndarray, np.ndarray]] = []
        Cx = C @ x
        for k in range(n_levels):
            objectives = levels[k]
            if not objectives:
                stacked.append((np.zeros((0, n)), np.zeros(0)))
                solved.append(x)
                x_levels.append(x)
                continue
            if len(objectives) == 1:
                A, b = objectives[0].A, objectives[0].b
                w = np.full(b.shape[0], objectives[0].weight)
            else:
                A = np.vstack([o.A for o in objectives])
                b = np.concatenate([o.b for o in objectives])
                w = np.concatenate([np.full(o.b.shape[0], o.weight) for o in objectives])
            stacked.append((A, b))
            last = k + 1 == n_levels
            AZ = A @ Z
            r = b - A @ x
            # Weighted damped least squares through the m x m system (push-through identity):
            #   z = (AZ^T W AZ + lam I)^-1 AZ^T W r = AZ^T (AZ AZ^T + lam W^-1)^-1 r,
            # and the same factor gives the projector onto null(AZ) for the levels below.
            G = AZ @ AZ.T
            trace = np.trace(G) / G.shape[0]
            if last:
                P = None
            else:
                # Projector with a negligible damping so that what this level achieved is
                # kept to round-off below it (a damped projector would leak).
                Gp = G.copy()
                Gp.flat[:: G.shape[0] + 1] += 1e-13 * (1.0 + trace)
                P = _eye(n) - AZ.T @ _spd_solve(Gp, AZ)
            G.flat[:: G.shape[0] + 1] += damping * (1.0 + trace) / w
            y = _spd_solve(G, r)
            z = AZ.T @ y
            x_try = x + Z @ z
            c_try = C @ x_try
            lo = lower if k == 0 else np.minimum(lower, Cx - self.feasibility_margin)
            hi = upper if k == 0 else np.maximum(upper, Cx + self.feasibility_margin)
            # (a NaN fails both comparisons, so a non-finite x_try takes the QP path)
            if (c_try >= lo - 1e-9).all() and (c_try <= hi + 1e-9).all():
                x, Cx = x_try, c_try
            else:
                z, used_approx, its = self._solve_qp(k, AZ, w, r, P, Z, C, Cx, lo, hi, x, previous, last)
                iterations += its
                approximate += used_approx
                x = x + Z @ z
                Cx = C @ x
            solved.append(x)
            x_levels.append(x)
            if P is not None:
                Z = Z @ P
        if E.shape[0]:
            # Round-off through the levels' products: project back onto E x = e exactly.
            x = x + E.T @ _spd_solve(G0, e - E @ x, c0)
        self._previous = solved
        residuals = []
        task_res = {}
        for (A, b), objectives in zip(stacked, levels[:n_levels]):
            res = A @ x - b
            total = 0.0
            start = 0
            for o in objectives:
                seg = res[start : start + o.b.shape[0]]
                start += o.b.shape[0]
                rr2 = float(seg @ seg)
                task_res[o.name] = rr2**0.5
                total += o.weight * rr2
            residuals.append(total**0.5)
        return HqpSolution(
            x, tuple(x_levels), tuple(residuals), task_res, iterations, approximate, time.perf_counter() - t0
        )
