"""A short walking-reference trajectory and the controller's buffer of them (no ROS).

The walker runs at its own rate (e.g. 100 Hz) and sends, each time, the
:class:`~zmp_walker.WalkerReference` samples of the next few walker periods on a
uniform grid of integer nanoseconds; the controller evaluates them at its own
rate (e.g. 1 kHz) with :meth:`ReferenceBuffer.at`.

Evaluation at ``ns`` (:meth:`ReferenceTrajectory.at`), with
``k = (ns - start_ns) // period_ns`` and ``a = ((ns - start_ns) % period_ns) / period_ns``:

* on the grid (``a = 0``): the stored sample, bit for bit (lockstep runs stay
  deterministic);
* between samples ``k`` and ``k + 1``: positions, velocities and accelerations
  ``x_k + a (x_{k+1} - x_k)``; sole rotations by normalized linear interpolation
  of their quaternions (nlerp: within ``theta^3 / 32`` [rad] of slerp for a
  rotation ``theta`` [rad] between samples, 3e-8 rad for 0.01 rad); contact
  flags, phase, upcoming footsteps and ``omega``: sample ``k``'s;
* outside ``[start_ns, end_ns]``: :class:`ReferenceOutOfRange`.

Storage is one array per kind (see :data:`VECTOR_FIELDS`), so that a
trajectory is built from a message with a few numpy calls and one evaluation
builds one ``WalkerReference``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pinocchio as pin

from whole_body_control.errors import StateError, WbcError
from zmp_walker import FootRef, WalkerReference

SIDES = ("left", "right")

# Rows of ReferenceTrajectory.vectors (N, 16, 3), world frame, SI.
FOOT_FIELDS = ("pos", "lin_vel", "ang_vel", "lin_acc", "ang_acc")
VECTOR_FIELDS = (
    "com_pos",
    "com_vel",
    "com_acc",
    "zmp_ref",
    "zmp_cmd",
    "dcm_ref",
    *(f"left_{f}" for f in FOOT_FIELDS),
    *(f"right_{f}" for f in FOOT_FIELDS),
)
_LEFT, _RIGHT = VECTOR_FIELDS.index("left_pos"), VECTOR_FIELDS.index("right_pos")


class ReferenceOutOfRange(WbcError, LookupError):
    """A reference was asked for a time that no received trajectory covers."""


def quaternions_to_rotations(xyzw: np.ndarray) -> np.ndarray:
    """Unit quaternions ``(..., 4)`` ``[x y z w]`` -> rotation matrices ``(..., 3, 3)``."""
    x, y, z, w = xyzw[..., 0], xyzw[..., 1], xyzw[..., 2], xyzw[..., 3]
    R = np.empty((*xyzw.shape[:-1], 3, 3))
    xx, yy, zz = x * x, y * y, z * z
    xy, xz, yz, wx, wy, wz = x * y, x * z, y * z, w * x, w * y, w * z
    R[..., 0, 0] = 1.0 - 2.0 * (yy + zz)
    R[..., 0, 1] = 2.0 * (xy - wz)
    R[..., 0, 2] = 2.0 * (xz + wy)
    R[..., 1, 0] = 2.0 * (xy + wz)
    R[..., 1, 1] = 1.0 - 2.0 * (xx + zz)
    R[..., 1, 2] = 2.0 * (yz - wx)
    R[..., 2, 0] = 2.0 * (xz - wy)
    R[..., 2, 1] = 2.0 * (yz + wx)
    R[..., 2, 2] = 1.0 - 2.0 * (xx + yy)
    return R


def _nlerp_rotation(q0, q1, a: float) -> list:
    """Rotation matrix (9 floats, row-major) of the normalized ``q0 + a (q1 - q0)`` (``[x y z w]``)."""
    x0, y0, z0, w0 = q0
    x1, y1, z1, w1 = q1
    x, y, z, w = x0 + a * (x1 - x0), y0 + a * (y1 - y0), z0 + a * (z1 - z0), w0 + a * (w1 - w0)
    s = 2.0 / (x * x + y * y + z * z + w * w)
    xs, ys, zs = s * x, s * y, s * z
    xx, yy, zz, xy, xz, yz, wx, wy, wz = x * xs, y * ys, z * zs, x * ys, x * zs, y * zs, w * xs, w * ys, w * zs
    return [1.0 - yy - zz, xy - wz, xz + wy, xy + wz, 1.0 - xx - zz, yz - wx, xz - wy, yz + wx, 1.0 - xx - yy]


def rotations_to_quaternions(R: np.ndarray) -> np.ndarray:
    """Rotation matrices ``(..., 3, 3)`` -> unit quaternions ``(..., 4)`` ``[x y z w]`` (w >= 0)."""
    R = np.asarray(R, dtype=float)
    flat = R.reshape(-1, 3, 3)
    q = np.empty((flat.shape[0], 4))
    trace = flat[:, 0, 0] + flat[:, 1, 1] + flat[:, 2, 2]
    good = trace > -0.5  # w^2 = (1 + trace) / 4 > 1/8: the trace formula is well conditioned
    if good.any():
        F = flat[good]
        w = 0.5 * np.sqrt(1.0 + trace[good])
        f = 0.25 / w
        q[good] = np.stack(
            [(F[:, 2, 1] - F[:, 1, 2]) * f, (F[:, 0, 2] - F[:, 2, 0]) * f, (F[:, 1, 0] - F[:, 0, 1]) * f, w], axis=1
        )
    for i in np.flatnonzero(~good):
        c = pin.Quaternion(flat[i]).coeffs()
        q[i] = c if c[3] >= 0.0 else -c
    return q.reshape(*R.shape[:-2], 4)


class ReferenceTrajectory:
    """Samples of :class:`~zmp_walker.WalkerReference` at ``start_ns + k period_ns``, k = 0..N-1.

    Args:
        start_ns: time of the first sample [ns] (integer).
        period_ns: spacing of the samples [ns] (integer > 0).
        vectors: ``(N, 16, 3)`` positions, velocities, accelerations, rows named by
            :data:`VECTOR_FIELDS` (world frame, SI).
        rotations: ``(N, 2, 3, 3)`` left and right sole rotations.
        contacts: ``(N, 2)`` left and right contact flags (the controller's: a
            foot is released before lift-off).
        quaternions: ``(N, 2, 4)`` ``[x y z w]`` of ``rotations`` (computed when None).
        phases, footsteps, times, omegas: per sample: phase name (default ""),
            upcoming footsteps (default ()), ``WalkerReference.time`` [s] (default
            ``ns * 1e-9``), LIPM frequency [1/s] (default NaN: not sent).

    Raises:
        StateError: inconsistent sizes, a non-integer or non-positive period, or a
            non-finite value (naming the field and the sample).
    """

    __slots__ = (
        "start_ns",
        "period_ns",
        "end_ns",
        "vectors",
        "rotations",
        "quaternions",
        "contacts",
        "phases",
        "footsteps",
        "times",
        "omegas",
        "_n",
        "_dvectors",
        "_qlist",
    )

    def __init__(
        self,
        start_ns: int,
        period_ns: int,
        vectors: np.ndarray,
        rotations: np.ndarray,
        contacts: np.ndarray,
        *,
        quaternions: np.ndarray | None = None,
        phases: Sequence[str] | None = None,
        footsteps: Sequence[tuple] | None = None,
        times: Sequence[float] | None = None,
        omegas: Sequence[float] | None = None,
    ):
        if not isinstance(start_ns, (int, np.integer)) or not isinstance(period_ns, (int, np.integer)):
            raise StateError(
                f"reference trajectory: start_ns and period_ns must be integers [ns], got {start_ns!r}, {period_ns!r}"
            )
        if period_ns <= 0:
            raise StateError(f"reference trajectory: period_ns must be > 0, got {period_ns}")
        vectors = np.asarray(vectors, dtype=float)
        n = vectors.shape[0] if vectors.ndim == 3 else 0
        if n < 1 or vectors.shape != (n, len(VECTOR_FIELDS), 3):
            raise StateError(
                f"reference trajectory: vectors must be (N >= 1, {len(VECTOR_FIELDS)}, 3), got {vectors.shape}"
            )
        rotations = np.asarray(rotations, dtype=float)
        contacts = np.asarray(contacts, dtype=bool)
        if rotations.shape != (n, 2, 3, 3) or contacts.shape != (n, 2):
            raise StateError(
                f"reference trajectory of {n} samples: rotations {rotations.shape} (want {(n, 2, 3, 3)}), "
                f"contacts {contacts.shape} (want {(n, 2)})"
            )
        if not np.isfinite(vectors).all():
            k, row = np.argwhere(~np.isfinite(vectors).all(axis=2))[0]
            raise StateError(f"reference trajectory: non-finite {VECTOR_FIELDS[row]} in sample {k}")
        if not np.isfinite(rotations).all():
            k = int(np.argwhere(~np.isfinite(rotations).reshape(n, -1).all(axis=1))[0, 0])
            raise StateError(f"reference trajectory: non-finite sole rotation in sample {k}")
        if quaternions is None:
            quaternions = rotations_to_quaternions(rotations)
        else:
            quaternions = np.asarray(quaternions, dtype=float)
        if n > 1:  # same hemisphere as the previous sample: nlerp takes the short way
            dots = np.einsum("kij,kij->ki", quaternions[1:], quaternions[:-1])
            if (dots < 0.0).any():
                signs = np.cumprod(np.where(dots < 0.0, -1.0, 1.0), axis=0)
                quaternions = quaternions.copy()
                quaternions[1:] *= signs[:, :, None]
        self.start_ns = int(start_ns)
        self.period_ns = int(period_ns)
        self.end_ns = self.start_ns + (n - 1) * self.period_ns
        self.vectors, self.rotations, self.quaternions, self.contacts = vectors, rotations, quaternions, contacts
        self.phases = tuple(phases) if phases is not None else ("",) * n
        self.footsteps = tuple(footsteps) if footsteps is not None else ((),) * n
        self.times = (
            tuple(np.asarray(times, dtype=float).tolist())
            if times is not None
            else tuple(((self.start_ns + self.period_ns * np.arange(n)) * 1e-9).tolist())
        )
        self.omegas = tuple(np.asarray(omegas, dtype=float).tolist()) if omegas is not None else (math.nan,) * n
        for name, seq in (
            ("phases", self.phases),
            ("footsteps", self.footsteps),
            ("times", self.times),
            ("omegas", self.omegas),
        ):
            if len(seq) != n:
                raise StateError(f"reference trajectory of {n} samples: {len(seq)} {name}")
        self._n = n
        self._dvectors = np.diff(vectors, axis=0)  # (N-1, 16, 3): x_{k+1} - x_k
        self._qlist = quaternions.tolist()  # plain floats: nlerp of two quaternions is faster without numpy

    @classmethod
    def from_references(cls, start_ns: int, period_ns: int, refs: Sequence[WalkerReference]) -> ReferenceTrajectory:
        """The samples ``refs`` (``refs[k]`` at ``start_ns + k period_ns``), kept whole:
        phase, footsteps, time and omega included."""
        if len(refs) < 1:
            raise StateError("reference trajectory: no sample")
        rows, rots, contacts = [], [], []
        for r in refs:
            left, right = r.feet["left"], r.feet["right"]
            rows += (r.com_pos, r.com_vel, r.com_acc, r.zmp_ref, r.zmp_cmd, r.dcm_ref)
            rows += (left.pos, left.lin_vel, left.ang_vel, left.lin_acc, left.ang_acc)
            rows += (right.pos, right.lin_vel, right.ang_vel, right.lin_acc, right.ang_acc)
            rots += (left.rotation, right.rotation)
            contacts.append((bool(left.in_contact), bool(right.in_contact)))
        vectors = np.array(rows, dtype=float).reshape(len(refs), len(VECTOR_FIELDS), 3)
        rotations = np.array(rots, dtype=float).reshape(len(refs), 2, 3, 3)
        return cls(
            start_ns,
            period_ns,
            vectors,
            rotations,
            contacts,
            phases=[r.phase for r in refs],
            footsteps=[r.upcoming_footsteps for r in refs],
            times=[r.time for r in refs],
            omegas=[r.omega for r in refs],
        )

    def __len__(self) -> int:
        return self._n

    def __repr__(self) -> str:
        return (
            f"ReferenceTrajectory({self._n} samples, {self.start_ns} ns .. {self.end_ns} ns every {self.period_ns} ns)"
        )

    def covers(self, ns: int) -> bool:
        """Whether ``start_ns <= ns <= end_ns``."""
        return self.start_ns <= ns <= self.end_ns

    def at(self, ns: int) -> WalkerReference:
        """The reference at ``ns`` [ns] (see the module docstring).

        Raises:
            ReferenceOutOfRange: ``ns`` outside ``[start_ns, end_ns]``.
        """
        k, r = divmod(ns - self.start_ns, self.period_ns)
        if k < 0 or k >= self._n or (r and k == self._n - 1):
            raise ReferenceOutOfRange(
                f"walking reference: no sample for t = {ns} ns (trajectory covers {self.start_ns} .. {self.end_ns} ns)"
            )
        contacts = self.contacts[k]
        if r == 0:
            v = self.vectors[k].copy()
            rot = self.rotations[k].copy()
            time = self.times[k]
        else:
            a = r / self.period_ns
            v = self.vectors[k] + a * self._dvectors[k]
            (ql0, qr0), (ql1, qr1) = self._qlist[k], self._qlist[k + 1]
            rot = np.array(_nlerp_rotation(ql0, ql1, a) + _nlerp_rotation(qr0, qr1, a)).reshape(2, 3, 3)
            time = ns * 1e-9
        L, R = _LEFT, _RIGHT
        left = FootRef(v[L], rot[0], v[L + 1], v[L + 2], v[L + 3], v[L + 4], bool(contacts[0]))
        right = FootRef(v[R], rot[1], v[R + 1], v[R + 2], v[R + 3], v[R + 4], bool(contacts[1]))
        return WalkerReference(
            time,
            self.phases[k],
            v[0],
            v[1],
            v[2],
            {"left": left, "right": right},
            v[3],
            v[4],
            v[5],
            self.footsteps[k],
            self.omegas[k],
        )


class ReferenceBuffer:
    """What the controller has received: trajectories in arrival order, each one
    replacing the previous ones from its start on.

    ``at(ns)`` uses the newest trajectory whose start is at or before ``ns``; a
    trajectory older than that is dropped by :meth:`add` once the controller has
    asked (:meth:`at`) for a time past its part.  A trajectory whose start is
    before the newest one's (the walker was re-seeded after a reset) replaces
    everything from its start on.  ``max_kept`` [-] bounds the number kept.
    """

    __slots__ = ("_trajs", "_asked_ns", "max_kept")

    def __init__(self, max_kept: int = 8):
        self._trajs: list[ReferenceTrajectory] = []
        self._asked_ns: int | None = None
        self.max_kept = int(max_kept)

    def __len__(self) -> int:
        return len(self._trajs)

    def clear(self) -> None:
        self._trajs.clear()
        self._asked_ns = None

    def add(self, trajectory: ReferenceTrajectory) -> None:
        trajs = self._trajs
        if trajs and trajectory.start_ns < trajs[-1].start_ns:
            self._asked_ns = None  # time went back (reset): forget what was asked
        while trajs and trajs[-1].start_ns >= trajectory.start_ns:
            trajs.pop()
        trajs.append(trajectory)
        asked = self._asked_ns
        if asked is not None:  # trajs[0] serves [start_0, start_1): not needed when start_1 <= asked
            while len(trajs) > 1 and trajs[1].start_ns <= asked:
                trajs.pop(0)
        if len(trajs) > self.max_kept:
            del trajs[: len(trajs) - self.max_kept]

    @property
    def end_ns(self) -> int | None:
        """Last time covered [ns] (the newest trajectory's last sample), None when empty."""
        return self._trajs[-1].end_ns if self._trajs else None

    @property
    def last_received_ns(self) -> int | None:
        """Start [ns] of the newest trajectory, None when empty."""
        return self._trajs[-1].start_ns if self._trajs else None

    def _find(self, ns: int) -> ReferenceTrajectory | None:
        trajs = self._trajs
        for i in range(len(trajs) - 1, -1, -1):
            traj = trajs[i]
            if traj.start_ns <= ns:
                return traj if ns <= traj.end_ns else None
        return None

    def covers(self, ns: int) -> bool:
        return self._find(ns) is not None

    def at(self, ns: int) -> WalkerReference:
        """The reference at ``ns`` [ns].

        Raises:
            ReferenceOutOfRange: nothing received covers ``ns``.
        """
        traj = self._find(ns)
        if traj is None:
            spans = ", ".join(f"{t.start_ns} .. {t.end_ns}" for t in self._trajs) or "nothing"
            raise ReferenceOutOfRange(f"walking reference: no sample for t = {ns} ns (received {spans} ns)")
        self._asked_ns = ns
        return traj.at(ns)
