"""Hierarchical least squares with inequality constraints, one proxsuite QP per level.

Decision variable ``x`` (size n).  Hard constraints ``E x = e`` and
``l <= C x <= u`` hold at every level.  Levels ``k = 1..K`` each hold weighted
objectives ``sum_i w_i ||A_i x - b_i||^2``.

Strict priority in reduced coordinates: with ``x_k`` the solution after level
``k`` and ``Z_k`` (n x d_k) an orthonormal basis of the directions that keep
every equality of the levels above (and ``E``), level ``k+1`` solves in ``z``
(d_k unknowns, fewer at every level)::

    min  sum_i w_i ||A_i Z_k z - (b_i - A_i x_k)||^2 + eps ||z||^2
    s.t. l - C x_k <= C Z_k z <= u - C x_k

then ``x_{k+1} = x_k + Z_k z`` and ``Z_{k+1} = Z_k N`` with ``N`` an orthonormal
basis of ``null(A_{k+1} Z_k)`` (one SVD gives the step and ``N``).  ``Z_0``
comes from one QR of ``E^T``.  What a level achieved (``A_{k+1} x_{k+1}``) is
thereby kept exactly by every lower level, and the inequalities, present at
every level, are never traded away.  When the unconstrained step keeps every
inequality (the common case) no QP is solved at all.
"""

from __future__ import annotations

import heapq
import pickle
import time
from dataclasses import dataclass
from pathlib import Path

import daqp
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


def _well_conditioned(H: np.ndarray) -> bool:
    """Whether ``H = A^T A`` is surely of full rank in :func:`_rank`'s sense (every singular
    value of ``A`` above 1e-9 of the largest): a Cholesky factorization and LAPACK's
    estimate of its reciprocal condition number (1-norm) above 1e-12, so that ``cond_2(A)``
    is below about 1e7 even with the estimate off by a factor of 1000.  About 10 us for
    d = 32, against 50 to 150 us for the SVD that finds the same empty null space; when
    this says no, the SVD decides."""
    c = _cholesky(H)
    if c is None:
        return False
    anorm = float(np.abs(H).sum(axis=0).max())
    rcond, info = lapack.dpocon(c, anorm, uplo="L")
    return info == 0 and rcond > 1e-12


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
class HqpProblem:
    """One hierarchical problem, frozen (arrays copied): hard equalities ``E x = e``,
    inequalities ``lower <= C x <= upper`` and the task levels, highest first.

    ``equality_blocks`` and ``inequality_blocks`` name row ranges (``(name, start,
    stop)``) so that a printed or saved problem says where each row comes from;
    ``variables`` names the column ranges of ``x`` the same way.  Solve it with
    :meth:`HierarchicalQP.solve_problem`; :meth:`save` / :func:`load_problem`
    write and read it.
    """

    E: np.ndarray
    e: np.ndarray
    C: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    levels: tuple[tuple[Objective, ...], ...]
    level_names: tuple[str, ...] = ()
    equality_blocks: tuple[tuple[str, int, int], ...] = ()
    inequality_blocks: tuple[tuple[str, int, int], ...] = ()
    variables: tuple[tuple[str, int, int], ...] = ()

    @classmethod
    def copy_of(cls, E, e, C, lower, upper, levels, **names) -> HqpProblem:
        frozen = []
        for objectives in levels:
            frozen.append(tuple(Objective(o.name, o.A.copy(), o.b.copy(), o.weight) for o in objectives))
        arrays = [np.array(a, dtype=float) for a in (E, e, C, lower, upper)]
        for a in arrays:
            a.flags.writeable = False
        return cls(*arrays, tuple(frozen), **names)

    def describe(self) -> str:
        """A readable summary: sizes, the named blocks, each level's tasks and rows."""
        lines = [f"x: {self.E.shape[1]} variables " + " ".join(f"{n}[{a}:{b}]" for n, a, b in self.variables)]
        lines.append(f"hard equalities: {self.E.shape[0]} rows")
        lines += [f"  {n}: rows {a}..{b - 1}" for n, a, b in self.equality_blocks]
        lines.append(f"inequalities: {self.C.shape[0]} rows")
        lines += [f"  {n}: rows {a}..{b - 1}" for n, a, b in self.inequality_blocks]
        for k, objectives in enumerate(self.levels):
            name = self.level_names[k] if k < len(self.level_names) else str(k + 1)
            tasks = ", ".join(f"{o.name} ({o.b.shape[0]} rows, weight {o.weight:g})" for o in objectives)
            lines.append(f"level {k + 1} '{name}': {tasks or 'no task'}")
        return "\n".join(lines)

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            pickle.dump({"format": "whole_body_control.hqp_problem/1", "problem": self}, f)
        return path


def load_problem(path: str | Path) -> HqpProblem:
    """A problem written by :meth:`HqpProblem.save`."""
    with open(path, "rb") as f:
        data = pickle.load(f)
    if not isinstance(data, dict) or data.get("format") != "whole_body_control.hqp_problem/1":
        raise WbcError(f"{path}: not a saved problem of whole_body_control.hqp")
    return data["problem"]


@dataclass(frozen=True)
class HqpSolution:
    x: np.ndarray
    x_levels: tuple[np.ndarray, ...]  # solution after each level (hard level first)
    residuals: tuple[float, ...]  # per task level: sqrt(sum w ||A x - b||^2) at the final x
    task_residuals: dict[str, float]  # per task: ||A x - b||
    iterations: int
    approximate_levels: int  # levels whose QP stopped at max_iter with a feasible iterate
    solve_time: float  # [s]


DAQP_INFEASIBLE = -1  # daqp's exit flag for a primal infeasible problem (1: optimal)
CLEARLY_INFEASIBLE = 1e-3  # a level QP still infeasible with its bounds widened this much fails at once
# below the first level, a level QP daqp calls infeasible is solved again with its bounds widened
# this much (row-normalized units)
DEGENERATE_MARGIN = 1e-5


class HierarchicalQP:
    """Solves the hierarchy; keeps one proxsuite QP per level and shape for warm starts."""

    def __init__(
        self,
        eps_abs: float = 1e-7,
        max_iter: int = 200,
        regularization: float = 1e-8,
        flat_weight: float = 1e-3,
        backend: str = "daqp",
    ):
        if backend not in ("daqp", "proxsuite"):
            raise ValueError(f"backend must be 'daqp' or 'proxsuite', got {backend!r}")
        self.backend = backend
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
        self._weights: dict[tuple, np.ndarray | None] = {}
        self._active: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # level -> last active rows, upper side
        self.record = 0  # keep this many of the slowest problems solved (see record_hardest)
        self._hardest: list[tuple[float, int, HqpProblem]] = []  # min-heap on solve time

    def reset(self) -> None:
        self._previous = None
        self._active.clear()

    def record_hardest(self, count: int) -> None:
        """From now on, keep the ``count`` problems that took longest to solve
        (copies of every input), for :meth:`save_recorded` and ``bench/hqp_replay.py``."""
        self.record = int(count)
        self._hardest = []

    def recorded(self) -> list[tuple[float, HqpProblem]]:
        """The kept problems, slowest first: ``(solve_time [s], problem)``."""
        return [(t, p) for t, _, p in sorted(self._hardest, reverse=True)]

    def save_recorded(self, path: str | Path) -> Path:
        """Write :meth:`recorded` to ``path`` (pickle of numpy arrays); returns the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            pickle.dump({"format": "whole_body_control.hqp/1", "problems": self.recorded()}, f)
        return path

    def _keep(self, elapsed: float, E, e, C, lower, upper, levels) -> None:
        heap = self._hardest
        if len(heap) >= self.record and elapsed <= heap[0][0]:
            return
        problem = HqpProblem.copy_of(E, e, C, lower, upper, levels)
        item = (elapsed, id(problem), problem)
        if len(heap) < self.record:
            heapq.heappush(heap, item)
        else:
            heapq.heapreplace(heap, item)

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

    def _solve_qp(self, k, AZ, r, N, Z, C, Cx, lo, hi, x, previous):
        """Level ``k`` with active inequalities, in the basis coordinates ``z``: last
        tick's active set first (one KKT solve), then daqp, then proxsuite.

        ``AZ`` and ``r`` are the level's rows and residual, already weighted by the
        square roots of the task weights; ``N`` is an orthonormal basis of ``null(AZ)``
        (None: computed here).  Returns ``(z, approximate, iterations)``; raises
        :class:`LevelFailure`.
        """
        d = Z.shape[1]
        H = AZ.T.dot(AZ)
        scale_h = np.trace(H) / max(min(AZ.shape), 1)
        # Directions this level's tasks do not see are flat; left to a tiny Tikhonov term
        # they make the QP ill-conditioned. Weigh them like the tasks' own directions: the
        # unconstrained optimum is unchanged (they do not move the objective).
        if N is None and not (AZ.shape[0] >= d and _well_conditioned(H)):
            # (a tall AZ: vt is d x d already, u need not be square)
            _, s, vt = _svd(AZ, full=AZ.shape[0] < d)
            rank = _rank(s)
            N = vt[rank:].T if rank < d else None
        if N is not None and N.shape[1]:
            H += (self.flat_weight * scale_h) * N.dot(N.T)
        H.flat[:: d + 1] += self.regularization * (1.0 + scale_h)
        g = -AZ.T.dot(r)
        guess = self._active.get(k)
        if guess is not None:
            z = self._try_active_set(guess, H, g, Z, C, Cx, lo, hi, x)
            if z is not None:
                return z, 0, 0
        CZ = C.dot(Z)
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
        if self.backend == "daqp":
            z, iterations = self._daqp(H, g, CZ, lz, uz)
            if z is not None:
                self._remember_active(k, CZ.dot(z), lz, uz)
                return z, 0, iterations
            if k > 0:
                # Below the first level z = 0 keeps every bound (they are widened around x by
                # feasibility_margin): an infeasible verdict is daqp's, on rows left tight at
                # z = 0 and linearly dependent in the remaining freedom.  With the bounds
                # widened by DEGENERATE_MARGIN daqp solves most of them in microseconds where
                # proxsuite ran to its iteration cap (12 ms, and the level and those below
                # were dropped); what it gives keeps the bounds to that margin (approximate).
                w = DEGENERATE_MARGIN
                z, its = self._daqp(H, g, CZ, lz - w, uz + w)
                iterations += its
                if z is not None:
                    return z, 1, iterations
            if self._clearly_infeasible(H, g, CZ, lz, uz):
                # proxsuite would take 5 to 20 ms to say so (G1 walking, level 1).  (A first
                # level infeasible by a hair, 1e-6 to 1e-4, still goes to proxsuite: z = 0 may
                # not be feasible there; solving it with widened bounds instead changed which
                # ticks relax the levels below, and Talos's 0.35 m/s standing push then damped
                # or fell.)
                z0 = np.zeros(d)
                problem = LevelProblem(k + 1, H, g, CZ, lz, uz, z0)
                raise LevelFailure(k + 1, f"level {k + 1} QP: infeasible (daqp)", problem)
        z0 = Z.T @ (previous[k] - x) if previous is not None and previous[k].shape == x.shape else np.zeros(d)
        qp = self._qp(k, d, CZ.shape[0])
        qp.init(H, g, None, None, CZ, lz, uz, compute_preconditioner=False)
        qp.solve(z0, None, None)
        res = qp.results
        iterations = res.info.iter
        if res.info.status == SOLVED and np.all(np.isfinite(res.x)):
            self._remember_active(k, CZ.dot(res.x), lz, uz)
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

    def _remember_active(self, k: int, cz: np.ndarray, lz: np.ndarray, uz: np.ndarray) -> None:
        """The rows a level's QP solution holds at a bound: next tick's first guess."""
        upper = cz >= uz - 1e-7
        rows = np.flatnonzero(upper | (cz <= lz + 1e-7))
        self._active[k] = (rows, upper[rows])

    def _try_active_set(self, guess, H, g, Z, C, Cx, lo, hi, x) -> np.ndarray | None:
        """The level QP ``min 1/2 z'Hz + g'z, lo <= C(x + Z z) <= hi`` solved with the
        rows of ``guess`` (last tick's active set at this level) held at their bounds,
        as one KKT system; the result if it satisfies every KKT condition (then it is
        the QP's unique optimum, H being positive definite), else None.

        Standing and walking, the same few rows stay active tick after tick (G1: each
        sole's CoP at its edge), so this replaces most QP solves.
        """
        rows, upper_side = guess
        d = H.shape[0]
        p = rows.size
        if p == 0 or p >= d or rows[-1] >= C.shape[0]:
            return None
        Ca = C[rows].dot(Z)
        K = np.zeros((d + p, d + p))
        K[:d, :d] = H
        K[:d, d:] = Ca.T
        K[d:, :d] = Ca
        rhs = np.empty(d + p)
        rhs[:d] = -g
        rhs[d:] = np.where(upper_side, hi[rows], lo[rows]) - Cx[rows]
        _, _, sol, info = lapack.dgesv(K, rhs)
        if info != 0 or not np.isfinite(sol).all():
            return None
        z, mu = sol[:d], sol[d:]
        # H z + g + Ca^T mu = 0: an upper bound holds with mu >= 0, a lower one with mu <= 0
        tol = 1e-10 * (1.0 + float(np.abs(g).max()))
        if (np.where(upper_side, mu, -mu) < -tol).any():
            return None
        c = C.dot(x + Z.dot(z))
        if (c < lo - 1e-9).any() or (c > hi + 1e-9).any():
            return None
        return z

    def solve_problem(self, problem: HqpProblem, skip_levels_from: int | None = None) -> HqpSolution:
        """:meth:`solve` on a frozen :class:`HqpProblem`."""
        p = problem
        return self.solve(p.E, p.e, p.C, p.lower, p.upper, [list(o) for o in p.levels], skip_levels_from)

    def _row_weights(self, objectives: list[Objective]) -> np.ndarray | None:
        """Square roots of the task weights, one per row, or None when every weight
        is 1 (scaling by 1 changes nothing and is skipped).  Cached: rows and weights
        change only when tasks are switched, reweighted or moved."""
        key = tuple([(o.b.shape[0], o.weight) for o in objectives])
        if key in self._weights:
            return self._weights[key]
        if len(self._weights) > 64:
            self._weights.clear()
        sw = None
        if any(o.weight != 1.0 for o in objectives):
            sw = np.concatenate([np.full(o.b.shape[0], o.weight**0.5) for o in objectives])
            sw.flags.writeable = False
        self._weights[key] = sw
        return sw

    def _clearly_infeasible(self, H, g, CZ, lz, uz) -> bool:
        """Whether daqp finds the level infeasible even with every bound widened by
        ``CLEARLY_INFEASIBLE`` (row-normalized units): no fallback can use it then."""
        w = CLEARLY_INFEASIBLE
        _, _, flag, _ = daqp.solve(H, g, CZ, np.minimum(uz + w, 1e30), np.maximum(lz - w, -1e30))
        return flag == DAQP_INFEASIBLE

    def _daqp(self, H, g, CZ, lz, uz) -> tuple[np.ndarray | None, int]:
        """The level QP by daqp's dual active-set method: ``(z, iterations)``, or
        ``(None, iterations)`` when it does not end optimal with a finite, feasible
        ``z`` (proxsuite then takes over)."""
        z, _, flag, info = daqp.solve(H, g, CZ, np.minimum(uz, 1e30), np.maximum(lz, -1e30))
        its = int(info["iterations"])
        if flag != 1 or not np.isfinite(z).all():
            return None, its
        cz = CZ.dot(z)
        if (cz < lz - self.accept_tolerance).any() or (cz > uz + self.accept_tolerance).any():
            return None, its
        return z, its

    def _hard(self, E: np.ndarray, e: np.ndarray, n: int):
        """Least-norm solution of ``E x = e`` and an orthonormal basis of ``null(E)``
        (one QR of ``E^T``).  Raises :class:`LevelFailure` if ``E`` is rank deficient
        and the equalities disagree."""
        m = E.shape[0]
        if not m:
            return np.zeros(n), _eye(n)
        if m < n:
            qr, tau, _, _ = lapack.dgeqrf(E.T)
            R = qr[:m]
            diag = np.abs(R.diagonal()).tolist()  # (Python min/max: cheaper at this size)
            if min(diag) > 1e-9 * max(diag):
                # Full row rank: consistent whatever e is.
                full = np.zeros((n, n), order="F")
                full[:, :m] = qr
                Q, _, _ = lapack.dorgqr(full, tau, lwork=max(1, 2 * n * n), overwrite_a=1)
                y, _ = lapack.dtrtrs(R, e, trans=1)  # R^T y = e (R upper triangular)
                return Q[:, :m].dot(y), Q[:, m:]
        # Rank deficient (or as many rows as unknowns): the SVD decides what is free.
        u, s, vt = _svd(E, full=True)
        rank = _rank(s)
        x = vt[:rank].T.dot(u[:, :rank].T.dot(e) / s[:rank])
        if np.linalg.norm(E.dot(x) - e) > 1e-8 * max(1.0, np.linalg.norm(e)):
            raise LevelFailure(0, "hard equality constraints are inconsistent")
        return x, vt[rank:].T.copy()

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
        C0, lower0, upper0 = C, lower, upper
        n = E.shape[1]
        x, Z = self._hard(E, e, n)
        # Row equilibration of the inequalities replaces proxsuite's (costly) preconditioner.
        # (np.linalg.norm(C, axis=1) spelled out: the same sums, without its Python overhead)
        scale = 1.0 / np.maximum(np.sqrt(np.add.reduce(C * C, axis=1)), 1e-12)
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
        Cx = C.dot(x)
        for k in range(n_levels):
            objectives = levels[k]
            if not objectives:
                stacked.append((np.zeros((0, n)), np.zeros(0)))
                solved.append(x)
                x_levels.append(x)
                continue
            if len(objectives) == 1:
                A, b = objectives[0].A, objectives[0].b
            else:
                A = np.concatenate([o.A for o in objectives])
                b = np.concatenate([o.b for o in objectives])
            sw = self._row_weights(objectives)
            stacked.append((A, b))
            d = Z.shape[1]
            if d == 0:  # every direction is fixed above: nothing left to choose
                solved.append(x)
                x_levels.append(x)
                continue
            last = k + 1 == n_levels
            AZ = A.dot(Z)
            r = b - A.dot(x)
            if sw is not None:
                AZ *= sw[:, None]
                r *= sw
            N = None
            if last:
                # Damped least squares through the d x d normal equations.
                G = AZ.T.dot(AZ)
                G.ravel()[:: d + 1] += self.regularization * (1.0 + G.trace() / d)  # (ravel: a view)
                z = _spd_solve(G, AZ.T.dot(r))
            else:
                # One SVD gives the damped least-squares step and null(AZ), the freedom
                # left to the levels below (what this level achieved is kept exactly).
                u, s, vt = _svd(AZ, full=True)
                rank = _rank(s)
                lam = self.regularization * (1.0 + float(s.dot(s)) / AZ.shape[0])
                sr = s[:rank]
                z = vt[:rank].T.dot(u[:, :rank].T.dot(r) * (sr / (sr * sr + lam)))
                N = vt[rank:].T
            x_try = x + Z.dot(z)
            c_try = C.dot(x_try)
            lo = lower if k == 0 else np.minimum(lower, Cx - self.feasibility_margin)
            hi = upper if k == 0 else np.maximum(upper, Cx + self.feasibility_margin)
            # (a NaN fails both comparisons, so a non-finite x_try takes the QP path)
            if (c_try >= lo - 1e-9).all() and (c_try <= hi + 1e-9).all():
                x, Cx = x_try, c_try
                self._active.pop(k, None)
            else:
                z, used_approx, its = self._solve_qp(k, AZ, r, N, Z, C, Cx, lo, hi, x, previous)
                iterations += its
                approximate += used_approx
                x = x + Z.dot(z)
                Cx = C.dot(x)
            solved.append(x)
            x_levels.append(x)
            if N is not None:
                Z = Z.dot(N)
        self._previous = solved
        residuals = []
        task_res = {}
        for (A, b), objectives in zip(stacked, levels[:n_levels]):
            res = A.dot(x) - b
            if len(objectives) <= 1:
                sums = [float(res.dot(res))]
            else:  # per task: one pass over the level's rows
                sizes = [o.b.shape[0] for o in objectives]
                if min(sizes) > 0:
                    starts = [0]
                    for size in sizes[:-1]:  # (np.cumsum of a list costs more than the loop)
                        starts.append(starts[-1] + size)
                    sums = np.add.reduceat(res * res, starts).tolist()
                else:  # (reduceat reads an empty segment as one element)
                    ends = np.cumsum(sizes)
                    sums = [float(res[e - k : e].dot(res[e - k : e])) for e, k in zip(ends, sizes)]
            total = 0.0
            for o, rr2 in zip(objectives, sums):
                task_res[o.name] = rr2**0.5
                total += o.weight * rr2
            residuals.append(total**0.5)
        elapsed = time.perf_counter() - t0
        if self.record:
            self._keep(elapsed, E, e, C0, lower0, upper0, levels)
        return HqpSolution(x, tuple(x_levels), tuple(residuals), task_res, iterations, approximate, elapsed)


def load_recorded(path: str | Path) -> list[tuple[float, HqpProblem]]:
    """Problems saved by :meth:`HierarchicalQP.save_recorded`."""
    with open(path, "rb") as f:
        data = pickle.load(f)
    if not isinstance(data, dict) or data.get("format") != "whole_body_control.hqp/1":
        raise WbcError(f"{path}: not a recorded-problems file of whole_body_control.hqp")
    return data["problems"]


def _svd(M: np.ndarray, full: bool = True):
    """``u, s, vt`` of ``M`` (LAPACK gesdd; numpy's wrapper costs more than the work here)."""
    u, s, vt, info = lapack.dgesdd(M, compute_uv=1, full_matrices=1 if full else 0)
    if info != 0:
        raise np.linalg.LinAlgError(f"SVD did not converge (info {info})")
    return u, s, vt


def _rank(s: np.ndarray) -> int:
    """Numerical rank from singular values (descending)."""
    values = s.tolist()  # (plain Python: cheaper than numpy for a few values)
    if not values or values[0] <= 1e-300:
        return 0
    threshold = 1e-9 * values[0]
    return sum(v > threshold for v in values)
