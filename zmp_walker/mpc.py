"""Linear MPC of the CoM on the cart-table model (Wieber 2006, Herdt et al. 2010).

Per axis, with ``N`` samples of period ``T`` [s] and the jerks ``U`` held
constant over each period, the predicted ZMPs and CoM velocities are affine
in ``U`` (``cart_table`` matrices ``A, B, C``)::

    Z = P_zs x0 + P_zu U,   P_zs[k] = C A^(k+1),   P_zu[k, i] = C A^(k-i) B  (i <= k)
    V = P_vs x0 + P_vu U    (same with the row (0, 1, 0))

Decision vector ``v = (U_x, U_y, F)``, where ``F`` stacks the (x, y) positions
of the footsteps not yet lifted off when ``auto_footsteps`` is on (their yaw
is the planned one), else is empty.  Cost::

    jerk_weight/2 |U|^2 + zmp_weight/2 |Z - Z_ref(F)|^2
    + velocity_weight/2 |V - v_ref|^2 + footstep_weight/2 |F - F_nominal|^2

``Z_ref(F)`` is the piecewise-linear reference of
:class:`~zmp_walker.zmp_reference.ZmpReference` with the sole centres of the
variable footsteps expressed through ``F``.  Constraints:

* ZMP in the support polygon at every sample.  At time ``t_k`` the reference
  is a convex combination ``sum_j mu_j centre_j`` of sole centres; the ZMP is
  constrained to ``sum_j mu_j (F_j + R_j S_j)`` (a Minkowski combination of
  the soles ``S_j`` shrunk by ``zmp_margin``; linear in ``F``), which is
  inside the convex hull of the soles in contact.  When no variable footstep
  is involved the full convex hull is used.
* Capturability at the end of the horizon: the DCM ``c_N + cdot_N / omega``
  in the last sample's support polygon, so that the robot can stop there;
  this keeps the problem recursively feasible when velocity tracking
  dominates.  It is left out when that polygon involves a footstep variable
  (the Minkowski set is then too conservative a capture region).
* Variable footsteps within the step limits relative to their stance foot,
  in the stance frame: ``|dx| <= max_step_length``,
  ``min_step_width <= s dy <= max_step_width``.

The dense QP is solved by proxsuite, warm-started with the previous solution
shifted by one sample; the problem keeps fixed dimensions (constraint rows
padded) so that consecutive solves are alike.
"""

from __future__ import annotations

import math

import numpy as np

from zmp_walker.base.qp_backend import proxsuite
from zmp_walker.cart_table import discrete_matrices
from zmp_walker.config import WalkerConfig
from zmp_walker.errors import InfeasibleMpc
from zmp_walker.footsteps import Side, side_sign
from zmp_walker.geometry import Polygon, SoleRect, convex_hull

__all__ = ["MpcPlanner", "prediction_matrices"]

_INF = 1e20
_ROWS_PER_SAMPLE = 24
_EDGE = 1e-6  # [s] a sample this close to a phase boundary is constrained by both phases


def prediction_matrices(T: float, z_c: float, g: float, N: int):
    """``(P_ps, P_pu, P_vs, P_vu, P_zs, P_zu)``: CoM position, velocity and ZMP over N samples."""
    A, B, C = discrete_matrices(T, z_c, g)
    rows = {"p": np.array([1.0, 0.0, 0.0]), "v": np.array([0.0, 1.0, 0.0]), "z": C}
    powers = [np.eye(3)]
    for _ in range(N):
        powers.append(A @ powers[-1])
    out = []
    for key in ("p", "v", "z"):
        r = rows[key]
        Ps = np.array([r @ powers[k + 1] for k in range(N)])
        Pu = np.zeros((N, N))
        for k in range(N):
            for i in range(k + 1):
                Pu[k, i] = r @ powers[k - i] @ B
        out += [Ps, Pu]
    return tuple(out)


class MpcPlanner:
    """CoM planner of the generator solving the MPC every ``mpc.period``.

    Attributes:
        period: sampling period [s].
        velocity_ref: world CoM velocity (2,) [m/s] for the velocity term, or None.
        nominal_steps: planned (x, y) of each step of the schedule, anchor of
            the footstep variables.
        moved_steps: after :meth:`update` with auto footsteps, ``{step index: (x, y)}``.
        last_solution: the QP solution ``v``.
    """

    def __init__(self, config: WalkerConfig, z_c: float, soles: dict[Side, SoleRect]):
        m = config.mpc
        self.config = config
        self.period = m.period
        self.N = m.horizon_steps
        self.z_c, self.g = z_c, config.gravity
        (self.Pps, self.Ppu, self.Pvs, self.Pvu, self.Pzs, self.Pzu) = prediction_matrices(
            m.period, z_c, config.gravity, self.N
        )
        self.soles = {s: r.shrunk(config.zmp_margin) for s, r in soles.items()}
        self.auto = m.auto_footsteps
        self.M = int(math.ceil(self.N * m.period / config.step_duration)) + 1 if self.auto else 0
        self.n = 2 * self.N + 2 * self.M
        self.velocity_ref: np.ndarray | None = None
        self.nominal_steps: list[np.ndarray] = []
        self.moved_steps: dict[int, np.ndarray] | None = None
        self.last_solution: np.ndarray | None = None
        self._shape_cache: dict = {}
        # constant parts of the Hessian
        N = self.N
        H = np.zeros((self.n, self.n))
        H[:N, :N] = H[N : 2 * N, N : 2 * N] = m.jerk_weight * np.eye(N) + m.zmp_weight * self.Pzu.T @ self.Pzu
        if m.velocity_weight > 0.0:
            H[:N, :N] += m.velocity_weight * self.Pvu.T @ self.Pvu
            H[N : 2 * N, N : 2 * N] += m.velocity_weight * self.Pvu.T @ self.Pvu
        self._H0 = H

    def reset(self, x: np.ndarray, p_ref: np.ndarray) -> None:
        """Forget the warm start."""
        self.last_solution = None

    # -- geometry of the constraints -------------------------------------------

    def _shape(self, parts: tuple) -> Polygon:
        """Minkowski combination ``sum mu_j R_j S_j`` of sole rectangles (cached).

        ``parts``: tuple of ``(side, yaw, mu)``.
        """
        key = tuple((s, round(y, 9), round(mu, 9)) for s, y, mu in parts)
        poly = self._shape_cache.get(key)
        if poly is None:
            sums = np.zeros((1, 2))
            for side, yaw, mu in parts:
                c, s = math.cos(yaw), math.sin(yaw)
                corners = mu * self.soles[side].corners() @ np.array([[c, s], [-s, c]])
                sums = (sums[:, None, :] + corners[None, :, :]).reshape(-1, 2)
            poly = Polygon(convex_hull(sums))
            if len(self._shape_cache) > 4096:
                self._shape_cache.clear()
            self._shape_cache[key] = poly
        return poly

    @staticmethod
    def _combination(reference, t: float) -> dict:
        """``{source: mu}`` with ``p_ref(t) = sum mu centre(source)``."""
        times = reference.times
        i = int(np.searchsorted(times, t, side="right"))
        if i == 0:
            return {s: w for s, w in reference.sources[0]}
        if i == len(times):
            return {s: w for s, w in reference.sources[-1]}
        t0, t1 = times[i - 1], times[i]
        a = (t - t0) / (t1 - t0) if t1 > t0 else 1.0
        out: dict = {}
        for src, w in reference.sources[i - 1]:
            out[src] = out.get(src, 0.0) + (1.0 - a) * w
        for src, w in reference.sources[i]:
            out[src] = out.get(src, 0.0) + a * w
        return {s: w for s, w in out.items() if w > 1e-12}

    def _support_rows(self, reference, t: float, pose, variables: dict, nU: int):
        """Support set at ``t`` as ``(A, b, [(column, mu)], key)``: ``A (z - sum mu F_var) <= b``.

        ``key`` identifies the set (to detect phase boundaries).
        """
        combo = self._combination(reference, t)
        var_terms, fixed_offset = [], np.zeros(2)
        for src, mu in combo.items():
            if src[0] in variables:
                var_terms.append((nU + 2 * variables[src[0]], mu))
            else:
                fixed_offset += mu * pose(src).position[:2]
        if var_terms:
            parts = tuple((src[1], pose(src).yaw, mu) for src, mu in combo.items())
            poly = self._shape(parts)
            return poly.A, poly.b + poly.A @ fixed_offset, var_terms, ("shape", parts, tuple(fixed_offset))
        index = reference.schedule.phase_index(t)
        poly = reference.polygon_of_phase(index)
        return poly.A, poly.b, [], ("phase", index)

    # -- the solve ---------------------------------------------------------------

    def _solve(self, H, grad, C, lo, up, warm: bool):
        """One proxsuite dense solve; warm start: the previous solution shifted by one sample."""
        N = self.N
        qp = proxsuite.proxqp.dense.QP(self.n, 0, C.shape[0])
        qp.settings.eps_abs = 1e-8
        # the Hessian spans ~5 decades (jerk vs ZMP weights): proxsuite's default infeasibility
        # threshold (1e-4) then reports feasible problems as infeasible
        qp.settings.eps_primal_inf = 1e-12
        qp.settings.verbose = False
        qp.init(H, grad, None, None, C, lo, up)
        if warm and self.last_solution is not None:
            prev = self.last_solution
            ws = prev.copy()
            ws[: N - 1], ws[N : 2 * N - 1] = prev[1:N], prev[N + 1 : 2 * N]
            qp.settings.initial_guess = proxsuite.proxqp.InitialGuess.WARM_START
            qp.solve(ws, None, None)
        else:
            qp.solve()
        return qp

    def update(self, t: float, x: np.ndarray, reference) -> np.ndarray:
        """Solve the MPC from state ``x`` (3, 2) at ``t`` [s]; jerk (2,) for ``[t, t + T)``."""
        cfg, m, N, T = self.config, self.config.mpc, self.N, self.period
        sched = reference.schedule
        steps = sched.steps
        variables: dict[int, int] = {}  # step index -> slot
        if self.auto:
            for k, s in enumerate(steps):
                lifted = s.t_start <= t + 1e-9
                if not lifted and s.t_start < t + N * T and len(variables) < self.M:
                    variables[k] = len(variables)

        def pose(src):
            k, side = src
            return sched.feet_before[0][side] if k is None else steps[k].pose

        n, nU = self.n, 2 * N
        G = np.zeros((2 * N, n))  # ZMP residual r = G v + h
        G[:N, :N] = self.Pzu
        G[N:, N:nU] = self.Pzu
        zs = np.concatenate([self.Pzs @ x[:, 0], self.Pzs @ x[:, 1]])
        h = zs.copy()
        C = np.zeros(((N + 1) * _ROWS_PER_SAMPLE + 2 * self.M, n))
        lo = np.full(C.shape[0], -_INF)
        up = np.full(C.shape[0], _INF)
        times = t + T * np.arange(1, N + 1)
        for k, tk in enumerate(times):
            # ZMP reference at t_k, with the variable footsteps' centres through F
            for src, mu in self._combination(reference, tk).items():
                p = pose(src)
                centre = p.to_world(self.soles[src[1]].center)
                if src[0] in variables:
                    col = nU + 2 * variables[src[0]]
                    G[k, col] -= mu
                    G[N + k, col + 1] -= mu
                    h[k] -= mu * (centre[0] - p.position[0])
                    h[N + k] -= mu * (centre[1] - p.position[1])
                else:
                    h[k] -= mu * centre[0]
                    h[N + k] -= mu * centre[1]
            # support constraints: a sample on a phase boundary (up to rounding of the
            # clocks) must satisfy the sets of both phases
            rows = [self._support_rows(reference, tk - _EDGE, pose, variables, nU)]
            after = self._support_rows(reference, tk + _EDGE, pose, variables, nU)
            if after[3] != rows[0][3]:
                rows.append(after)
            a = np.vstack([r[0] for r in rows])
            b = np.concatenate([r[1] for r in rows])
            offsets = np.cumsum([0] + [len(r[1]) for r in rows])
            nr = len(b)
            if nr > _ROWS_PER_SAMPLE:
                raise InfeasibleMpc(f"{nr} support constraints at one sample (max {_ROWS_PER_SAMPLE})", t)
            r0 = k * _ROWS_PER_SAMPLE
            C[r0 : r0 + nr, :N] = a[:, :1] * self.Pzu[k]
            C[r0 : r0 + nr, N:nU] = a[:, 1:] * self.Pzu[k]
            for i, r in enumerate(rows):
                for col, mu in r[2]:
                    C[r0 + offsets[i] : r0 + offsets[i + 1], col] -= mu * r[0][:, 0]
                    C[r0 + offsets[i] : r0 + offsets[i + 1], col + 1] -= mu * r[0][:, 1]
            up[r0 : r0 + nr] = b - a[:, 0] * zs[k] - a[:, 1] * zs[N + k]
        # terminal (capturability) constraint: DCM in the support set at the horizon's end
        a, b, var_terms, _ = self._support_rows(reference, times[-1] + _EDGE, pose, variables, nU)
        if var_terms:  # the Minkowski set is too small a capture region: no terminal constraint
            a, b = np.zeros((0, 2)), np.zeros(0)
        w = math.sqrt(self.g / self.z_c)
        Xs = self.Pps[N - 1] + self.Pvs[N - 1] / w
        Xu = self.Ppu[N - 1] + self.Pvu[N - 1] / w
        r0, nr = N * _ROWS_PER_SAMPLE, len(b)
        C[r0 : r0 + nr, :N] = a[:, :1] * Xu
        C[r0 : r0 + nr, N:nU] = a[:, 1:] * Xu
        for col, mu in var_terms:
            C[r0 : r0 + nr, col] -= mu * a[:, 0]
            C[r0 : r0 + nr, col + 1] -= mu * a[:, 1]
        up[r0 : r0 + nr] = b - a[:, 0] * (Xs @ x[:, 0]) - a[:, 1] * (Xs @ x[:, 1])
        H = self._H0.copy()
        # ZMP tracking: the U-U blocks are constant (in _H0); add the footstep blocks
        Gf = G[:, nU:]
        H[nU:, nU:] += m.zmp_weight * Gf.T @ Gf
        H[:nU, nU:] += m.zmp_weight * G[:, :nU].T @ Gf
        H[nU:, :nU] = H[:nU, nU:].T
        grad = m.zmp_weight * G.T @ h
        if m.velocity_weight > 0.0 and self.velocity_ref is not None:
            for axis in range(2):
                hv = self.Pvs @ x[:, axis] - self.velocity_ref[axis]
                grad[axis * N : (axis + 1) * N] += m.velocity_weight * self.Pvu.T @ hv
        if self.auto:
            H[nU:, nU:] += (m.footstep_weight + 1e-9) * np.eye(2 * self.M)
            row = (N + 1) * _ROWS_PER_SAMPLE
            for k, slot in variables.items():
                col = nU + 2 * slot
                nominal = self.nominal_steps[k] if k < len(self.nominal_steps) else steps[k].position[:2]
                grad[col : col + 2] -= m.footstep_weight * np.asarray(nominal[:2])
                side = steps[k].side
                # stance foot of step k: the latest earlier step of the other side, or the initial foot
                stance = next((j for j in range(k - 1, -1, -1) if steps[j].side != side), None)
                other = "right" if side == "left" else "left"
                sp = sched.feet_before[0][other] if stance is None else steps[stance].pose
                c, s = math.cos(sp.yaw), math.sin(sp.yaw)
                ex, ey = np.array([c, s]), np.array([-s, c])  # stance axes in the world
                sg = side_sign(side)
                C[row, col : col + 2] = ex
                C[row + 1, col : col + 2] = sg * ey
                if stance in variables:
                    sc = nU + 2 * variables[stance]
                    C[row, sc : sc + 2] = -ex
                    C[row + 1, sc : sc + 2] = -sg * ey
                    off = np.zeros(2)
                else:
                    off = sp.position[:2]
                lo[row], up[row] = -cfg.max_step_length + ex @ off, cfg.max_step_length + ex @ off
                lo[row + 1] = cfg.min_step_width + sg * ey @ off
                up[row + 1] = cfg.max_step_width + sg * ey @ off
                row += 2
        qp = self._solve(H, grad, C, lo, up, warm=True)
        if qp.results.info.status != proxsuite.proxqp.QPSolverOutput.PROXQP_SOLVED:
            qp = self._solve(H, grad, C, lo, up, warm=False)  # a stale warm start can mislead the solver
        status = qp.results.info.status
        if status != proxsuite.proxqp.QPSolverOutput.PROXQP_SOLVED:
            self.last_solution = None
            raise InfeasibleMpc(str(status), t)
        v = qp.results.x.copy()
        self.last_solution = v
        self.moved_steps = {k: v[nU + 2 * slot : nU + 2 * slot + 2] for k, slot in variables.items()} or None
        return np.array([v[0], v[N]])
