"""The prioritized whole-body controller: state + references -> joint torques.

Inverse dynamics over ``x = [a, f_left, f_right]`` (accelerations ``nv``, one
6D wrench per foot in its sole frame).  Torques are eliminated: the
floating-base rows of ``M a + h = S^T tau + J^T f`` and the rigid contact
constraints are hard equalities; torques are recovered from the actuated rows
``tau = M_j a + h_j - J_j^T f`` and bounded through them.  Task levels are
solved in strict priority (:mod:`whole_body_control.hqp`).

Fallback ladder on a failed solve: drop the failing level and those below it
("relaxed"); if the first task level fails (the hard rows are infeasible), solve
again without the joint position look-ahead ("relaxed"); if that or the hard
constraints fail, reuse the last good torques for at most ``safety.max_reuse_ticks`` ticks ("reused");
then joint damping with zero feed-forward ("damping").  Output torques are
always finite and inside the limits.

Inputs are validated at this boundary, before any solve: a non-finite or
ill-shaped reference field is rejected whole (the last valid reference is kept,
status "held", the reason names the field); a ``dt`` that is not finite and
positive is replaced by the control period (status "held"); a non-finite state
gives damping.  Whenever damping follows other torques it is approached at
``safety.max_torque_rate`` [N m/s], so a rejected state never makes the
torque step.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field

import numpy as np

from whole_body_control import geometry
from whole_body_control.config import FRAME_ALIASES, WbcConfig, load_wbc_config
from whole_body_control.contacts import Contact6D
from whole_body_control.errors import ConfigError, StateError, WbcError
from whole_body_control.hqp import HierarchicalQP, HqpProblem, LevelFailure, Objective
from whole_body_control.robot import RobotModel
from whole_body_control.state import LOCAL as _LOCAL
from whole_body_control.state import RobotState, check_state
from whole_body_control.tasks import (
    AngularMomentumTask,
    ComTask,
    ForceRegularizationTask,
    FrameReference,
    FrameTask,
    PostureTask,
    Task,
)

GRAVITY = 9.81
SIDES = ("left", "right")
# Airborne posture hold (hold_airborne): critically damped at 10 rad/s.  The posture
# task's gains (30, 11) let the light wrist joints swing away as the hanging robot sways.
AIRBORNE_KP = 100.0  # [1/s^2]
AIRBORNE_KD = 20.0  # [1/s]
HIP_GAIN = 2.0  # [-] the hip strategy's DCM feedback: CMP = DCM + HIP_GAIN (DCM - reference DCM)
STANDING_SPEED = 1e-3  # [m/s] a CoM reference slower than this (both feet down) is standing


class ReferenceRejected(WbcError, ValueError):
    """A reference field is not usable (non-finite, wrong shape, unknown contact); the
    message names the field, e.g. ``non-finite left_foot position``."""


# FrameReference fields and how a rejection names them.
_COM_FIELDS = (("com_pos", "com position"), ("com_vel", "com velocity"), ("com_acc", "com acceleration"))
_FRAME_FIELDS = (
    ("pos", "position", (3,)),
    ("rot", "rotation", (3, 3)),
    ("lin_vel", "linear velocity", (3,)),
    ("ang_vel", "angular velocity", (3,)),
    ("lin_acc", "linear acceleration", (3,)),
    ("ang_acc", "angular acceleration", (3,)),
)


def _checked_fields(values: list, shapes: list[tuple[int, ...]], label) -> list[np.ndarray]:
    """``values`` as float arrays of ``shapes`` (copies, views of one new buffer), or
    :class:`ReferenceRejected` naming the first bad one (``label(i)``: the name of
    ``values[i]``, built only then).  One concatenation and one finiteness test for
    all: this runs every tick."""
    parts = []
    for i, (value, shape) in enumerate(zip(values, shapes)):
        if type(value) is not np.ndarray or value.dtype != np.float64:
            try:
                value = np.asarray(value, dtype=float)
            except (TypeError, ValueError) as exc:
                raise ReferenceRejected(f"{label(i)} is not numeric ({exc})") from None
        if value.shape != shape:
            raise ReferenceRejected(f"{label(i)} has shape {value.shape}, expected {shape}")
        parts.append(value.ravel())
    flat = np.concatenate(parts)
    if not np.isfinite(flat).all():
        bad = next(i for i, part in enumerate(parts) if not np.isfinite(part).all())
        raise ReferenceRejected(f"non-finite {label(bad)}")
    out, start = [], 0
    for part, shape in zip(parts, shapes):
        stop = start + part.size
        out.append(flat[start:stop].reshape(shape))
        start = stop
    return out


def _is_rotation(rot: np.ndarray) -> bool:
    """Orthonormal to 1e-4 (lenient: rounding in a message pipeline passes, garbage
    such as a zero or scaled matrix does not) with a positive determinant.  In plain
    Python: a 3 x 3 check costs less than the numpy calls it would take."""
    (a, b, c), (d, e, f), (g, h, i) = rot.tolist()
    det = a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g)
    gram = (
        a * a + d * d + g * g - 1.0,
        b * b + e * e + h * h - 1.0,
        c * c + f * f + i * i - 1.0,
        a * b + d * e + g * h,
        a * c + d * f + g * i,
        b * c + e * f + h * i,
    )
    return det > 0.0 and max(abs(x) for x in gram) <= 1e-4


_FRAME_SHAPES = [shape for _, _, shape in _FRAME_FIELDS]


@dataclass
class Reference:
    """What the controller tracks this tick (world frame, SI units).

    Fields left ``None`` keep their previous value.  ``frames`` maps a frame
    task's name (``left_foot``, ``torso`` ...) to its reference; ``contacts``
    maps ``left``/``right`` to whether that foot should be in contact.
    """

    com_pos: np.ndarray | None = None
    com_vel: np.ndarray | None = None
    com_acc: np.ndarray | None = None
    frames: dict[str, FrameReference] = field(default_factory=dict)
    posture: np.ndarray | None = None  # actuated joint positions [rad]
    contacts: dict[str, bool] | None = None

    def validated(self, na: int) -> Reference:
        """A copy with every field checked: finite, of the right shape (``na`` actuated
        joints), rotations orthonormal (to 1e-4), contact flags booleans for ``left``/``right``.

        Raises:
            ReferenceRejected: naming the first bad field.
        """
        # every array field of the reference checked in one pass
        values: list = []
        shapes: list[tuple[int, ...]] = []
        com_keys = [(k, lbl) for k, lbl in _COM_FIELDS if getattr(self, k) is not None]
        for k, _ in com_keys:
            values.append(getattr(self, k))
            shapes.append((3,))
        names = list(self.frames)
        for name, fref in self.frames.items():
            if not isinstance(fref, FrameReference):
                raise ReferenceRejected(f"{name} is a {type(fref).__name__}, not a FrameReference")
            values += [fref.pos, fref.rot, fref.lin_vel, fref.ang_vel, fref.lin_acc, fref.ang_acc]
            shapes += _FRAME_SHAPES
        if self.posture is not None:
            values.append(self.posture)
            shapes.append((na,))

        def label(i: int) -> str:  # the name of values[i], for a rejection only
            if i < len(com_keys):
                return com_keys[i][1]
            frame, field_index = divmod(i - len(com_keys), len(_FRAME_FIELDS))
            return f"{names[frame]} {_FRAME_FIELDS[field_index][1]}" if frame < len(names) else "posture"

        arrays = _checked_fields(values, shapes, label) if values else []
        com = {k: arrays[i] for i, (k, _) in enumerate(com_keys)}
        frames = {}
        i = len(com_keys)
        for name in self.frames:
            fields = arrays[i : i + 6]
            i += 6
            if not _is_rotation(fields[1]):
                raise ReferenceRejected(f"{name} rotation is not a rotation matrix")
            frames[name] = FrameReference(*fields)
        posture = arrays[i] if self.posture is not None else None
        contacts = None
        if self.contacts is not None:
            contacts = {}
            for side, on in self.contacts.items():
                if side not in SIDES:
                    raise ReferenceRejected(f"unknown contact '{side}' (use {', '.join(SIDES)})")
                if not isinstance(on, (bool, np.bool_)) and not (isinstance(on, (int, np.integer)) and on in (0, 1)):
                    raise ReferenceRejected(f"contacts flag '{side}' is {on!r}, not a bool")
                contacts[side] = bool(on)
        return Reference(**com, frames=frames, posture=posture, contacts=contacts)


@dataclass(frozen=True)
class WbcResult:
    """One tick's output.

    tau: joint torques [N m] in ``robot.joint_names`` order.
    a: generalized accelerations (nv,) of the solution (zeros in damping).
    wrenches: contact wrench per foot [N, N m] in the sole frame.
    status: "ok", "held" (an input was rejected, the tick solved on the last valid
        reference and the nominal period), "relaxed", "reused", "damping" or
        "airborne" (see :meth:`WholeBodyController.hold_airborne`).
    reason: why the status is not "ok" ("" otherwise): what happened, inputs first.
    warnings: reference guards that acted this tick.
    level_names / residuals: per task level, sqrt(sum w ||A x - b||^2).
    task_residuals: per task, ||A x - b||.
    dynamics_residual: ||M a + h - S^T tau - J^T f||.
    solve_time: wall time of the hierarchical solve [s]; tick_time: whole cycle [s].
    """

    tau: np.ndarray
    a: np.ndarray
    wrenches: dict[str, np.ndarray]
    status: str
    reason: str
    warnings: tuple[str, ...]
    level_names: tuple[str, ...]
    residuals: tuple[float, ...]
    task_residuals: dict[str, float]
    dynamics_residual: float
    contacts: dict[str, bool]
    iterations: int
    solve_time: float
    tick_time: float
    approximate_levels: int = 0

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class WholeBodyController:
    """Prioritized QP whole-body controller for ``robot``.

    Args:
        robot: the robot model.
        config: the hierarchy; default ``config/wbc.yaml`` with the robot's overlay.
        mu: friction coefficient override [-] (default: config, then robot).
    """

    def __init__(self, robot: RobotModel, config: WbcConfig | None = None, mu: float | None = None):
        self.robot = robot
        self.config = config if config is not None else load_wbc_config(robot=robot.name)
        self.state = RobotState(robot)
        self.nv, self.na = robot.nv, robot.na
        self.n = self.nv + 12
        # Wrenches enter the QP in units of the robot's weight: x = [a, f / (m g)], for conditioning.
        self._fscale = robot.mass * GRAVITY
        self._E = np.zeros((18, self.n))
        self._e = np.zeros(18)
        self._eye6 = np.eye(6)
        self._eye_na = np.eye(self.na)
        self._buffers: dict[str, np.ndarray] = {}
        self._C: dict[tuple[bool, bool], np.ndarray] = {}  # inequality matrix per contact set
        self._C_forces: dict[tuple[bool, bool], dict[int, np.ndarray]] = {}  # see _build
        self._force_rows: dict[tuple[bool, ...], tuple[np.ndarray, np.ndarray]] = {}
        self._built: tuple | None = None  # the last tick's problem (buffers reused: see last_problem)
        T = self.config.solver.joint_limit_horizon
        self._limit_horizon = T
        self._limit_gain = 2.0 / (T * T)
        big = 1e6 / self._limit_gain  # infinite limits become bounds that never act
        self._q_lower = np.where(np.isfinite(robot.q_lower), robot.q_lower, -big)
        self._q_upper = np.where(np.isfinite(robot.q_upper), robot.q_upper, big)
        mu = mu if mu is not None else (self.config.contacts.mu or robot.config.friction)
        share = robot.mass * GRAVITY / 2.0
        self.contacts = {
            side: Contact6D(side, robot.foot_frame_ids[side], robot.feet[side].sole, mu, self.config.contacts, share)
            for side in SIDES
        }
        solver = self.config.solver
        self.hqp = HierarchicalQP(solver.eps_abs, solver.max_iter, solver.regularization, backend=solver.backend)
        self._build_tasks()
        self._tau_bound = robot.tau_max - 1e-4  # strictly inside, so clamping never alters a solution
        self._last_tau: np.ndarray | None = None
        self._reuse_count = 0
        self._latched: str | None = None
        self.time = 0.0
        self._last_wrenches: dict[str, np.ndarray] | None = None
        self._polygon_cache: tuple | None = None
        self._guard_cache: tuple | None = None
        self._held_soles = {side: robot.load_bearing_sole(side)[0] for side in SIDES}  # see _guard_polygon
        self._hip: np.ndarray | None = None  # this tick's hip strategy CoM acceleration [m/s^2] (see _guard_com)
        self._standing_tick = False  # standing this tick: the hip strategy and the attitude bound act (see _build)
        self._last_out: np.ndarray | None = None  # torques of the last tick, whatever its status
        self._kd_safe: dict[float, np.ndarray] = {}  # safe-mode gains per hold period (_damping_target)
        self.reset(robot.q_ref)
        self._com_z0 = float(self.state.com[2] - self._ground_height())  # reference CoM height [m]
        self._base_frame = robot.model.getFrameId(robot.config.base_frame)
        self.foot_reach = {side: self._reach(robot.foot_frame_ids[side]) for side in SIDES}

    def _reach(self, frame_id: int) -> float:
        """Upper bound [m] on the distance from the base frame to frame ``frame_id``.

        The sum of the distances between consecutive joint origins along the chain
        from the base to the frame (each is fixed in a body, whatever the joint
        angles), so by the triangle inequality no configuration puts the frame
        farther.  Evaluated at the current state; the value does not depend on it.
        """
        model, data = self.robot.model, self.state.data
        parent = model.frames[frame_id].parentJoint
        points = [self.state.placement(self._base_frame).translation]
        points += [data.oMi[j].translation for j in model.supports[parent] if j >= 2]  # skip universe, free flyer
        points.append(self.state.placement(frame_id).translation)
        return float(sum(np.linalg.norm(b - a) for a, b in zip(points, points[1:])))

    # -- set-up ----------------------------------------------------------------

    def _frame_id(self, name: str, task: str) -> int:
        robot = self.robot
        if name in ("left_foot", "right_foot"):
            return robot.foot_frame_ids[name.split("_")[0]]
        alias = {"torso": robot.config.torso_frame, "base": robot.config.base_frame}.get(name, name)
        if not robot.model.existFrame(alias):
            raise ConfigError(
                f"task '{task}': unknown frame '{name}' (use {', '.join(FRAME_ALIASES)} or a frame of "
                f"{robot.urdf_path.name})"
            )
        return robot.model.getFrameId(alias)

    def _build_tasks(self) -> None:
        self.levels: list[list[Task]] = []
        self.level_names: list[str] = []
        self.tasks: dict[str, Task] = {}
        for level_name, level in self.config.levels.items():
            tasks: list[Task] = []
            for name, cfg in level.tasks.items():
                if cfg.type == "com":
                    task = ComTask(name, cfg, self.state.com)
                elif cfg.type == "frame":
                    fid = self._frame_id(cfg.frame, name)
                    task = FrameTask(name, cfg, fid, FrameReference.from_se3(self.state.placement(fid)))
                    task.side = next((s for s in SIDES if fid == self.robot.foot_frame_ids[s]), None)
                elif cfg.type == "posture":
                    task = PostureTask(name, cfg, self.robot.q_ref[7:], self.nv)
                elif cfg.type == "angular_momentum":
                    task = AngularMomentumTask(name, cfg)
                else:
                    task = ForceRegularizationTask(name, cfg)
                tasks.append(task)
                self.tasks[name] = task
            self.levels.append(tasks)
            self.level_names.append(level_name)

    def reset(self, q: np.ndarray, v: np.ndarray | None = None, t: float = 0.0) -> None:
        """Re-seed every reference at configuration ``q`` (standing, both feet in contact)."""
        v = np.zeros(self.nv) if v is None else v
        self.state.update(q, v)
        self.time = t
        for c in self.contacts.values():
            c.active, c._ramp_kind, c._ramp_start = True, None, None
        self._polygon_cache = None
        self._standing_tick = False
        self._guard_cache = None
        self._airborne: np.ndarray | None = None
        for task in self.tasks.values():
            if isinstance(task, FrameTask):
                task.set_reference(FrameReference.from_se3(self.state.placement(task.frame_id)))
            elif isinstance(task, PostureTask):
                task.set_reference(q[7:])
        # Hold the CoM where it is, kept inside the support polygon.
        com = self.state.com.copy()
        polygon = geometry.shrink(self.support_polygon(), self.config.safety.support_margin)
        com[:2] = geometry.closest_point(polygon, com[:2])
        for task in self.tasks.values():
            if isinstance(task, ComTask):
                task.set_reference(com)
        self.hqp.reset()
        self._last_tau = None
        self._last_out = None
        self._reuse_count = 0
        self._latched = None

    def set_mu(self, mu: float) -> None:
        for c in self.contacts.values():
            c.set_mu(mu)

    def set_weight(self, task: str, weight: float) -> None:
        if not (weight >= 0 and math.isfinite(weight)):
            raise ConfigError(f"task '{task}': weight must be >= 0, got {weight}")
        self._task(task).weight = weight

    def set_gains(self, task: str, kp: float, kd: float | None = None) -> None:
        if not (kp >= 0 and math.isfinite(kp)) or (kd is not None and not (kd >= 0 and math.isfinite(kd))):
            raise ConfigError(f"task '{task}': gains must be finite and >= 0, got kp={kp} kd={kd}")
        t = self._task(task)
        t.kp = kp
        t.kd = 2.0 * kp**0.5 if kd is None else kd

    def level_of(self, task: str) -> int:
        """Index (0: highest priority) of the level holding ``task``."""
        t = self._task(task)
        return next(i for i, tasks in enumerate(self.levels) if t in tasks)

    def move_task(self, task: str, level: int | str) -> None:
        """Move ``task`` to ``level`` (an index, 0 the highest priority, or a level name);
        it joins the end of that level.  See :meth:`move_tasks`."""
        self.move_tasks({task: level})

    def move_tasks(self, moves: dict[str, int | str]) -> None:
        """Move several tasks at once (``{task: level}``), all or none.

        Checked as a whole, so that two tasks can swap levels: every task must exist,
        every level must exist, and no level may end up empty.  The solver's warm
        starts, which belong to the old hierarchy, are dropped.

        Raises:
            ConfigError: naming the task or level at fault.
        """
        from whole_body_control.yaml_config import closest_key

        target: dict[str, int] = {}
        for name, level in moves.items():
            self._task(name)
            if isinstance(level, str):
                if level not in self.level_names:
                    raise ConfigError(f"task '{name}': no level '{level}'{closest_key(level, self.level_names)}")
                level = self.level_names.index(level)
            elif isinstance(level, bool) or not isinstance(level, (int, np.integer)):
                raise ConfigError(f"task '{name}': level must be an index or a level name, got {level!r}")
            if not 0 <= level < len(self.levels):
                raise ConfigError(f"task '{name}': level {level} out of range 0..{len(self.levels) - 1}")
            target[name] = int(level)
        after = [[t for t in tasks if t.name not in target] for tasks in self.levels]
        for name, level in target.items():
            after[level].append(self.tasks[name])
        empty = [self.level_names[i] for i, tasks in enumerate(after) if not tasks]
        if empty:
            raise ConfigError(f"moving {sorted(target)} would leave level(s) {empty} with no task")
        if after != self.levels:
            for tasks, new in zip(self.levels, after):
                tasks[:] = new  # in place: callers holding ``levels`` see the change
            self.hqp.reset()

    def _task(self, name: str) -> Task:
        if name not in self.tasks:
            from whole_body_control.yaml_config import closest_key

            raise ConfigError(f"no task '{name}'{closest_key(name, self.tasks)}")
        return self.tasks[name]

    @property
    def com_task(self) -> ComTask | None:
        return next((t for t in self.tasks.values() if isinstance(t, ComTask)), None)

    def latch_damping(self, reason: str) -> None:
        """Enter damping until :meth:`reset` (fall, e-stop, stale state)."""
        if self._latched is None:
            self._latched = reason

    @property
    def latched(self) -> str | None:
        return self._latched

    def hold_airborne(self) -> None:
        """Airborne mode until :meth:`reset`: the robot is lifted (no foot can push on
        the ground), so every contact is dropped and the joints hold the posture
        they have now, clipped to the joint limits (a swinging foot stays where it is).

        The QP is not used then: with no contact its model is a robot in free fall
        (no external wrench), whose joint torques compensate no gravity and whose
        base/CoM tasks would swing the limbs to steer a base that nothing can
        steer, while the real robot hangs from whatever lifts it.  Instead each
        tick a decoupled joint PD with constant gains plus gravity compensation:
        ``tau_i = I_i (kp (q_hold_i - q_i) - kd v_i) + g_i`` with ``AIRBORNE_KP``,
        ``AIRBORNE_KD``, ``I_i`` the diagonal of the joint mass matrix at the hold
        (each joint critically damped at 10 rad/s with the others locked; a
        constant-gain PD is passive whatever the base does, where the full
        fixed-base mass matrix couples the joints wrongly for a swinging body) and
        ``g_i`` the joint gravity torques with the base held (the robot hanging
        from its base; for a hoist on the torso the PD takes the difference),
        clipped to the torque limits.  Status ``"airborne"``.
        """
        if self._airborne is None:
            # inside the joint limits: a joint pushed past its limit is held at the limit
            self._airborne = np.clip(self.state.q[7:], self.robot.q_lower, self.robot.q_upper)
            self._airborne_inertia = np.diag(self.state.M)[6:].copy()
            for c in self.contacts.values():
                c.active, c._ramp_kind, c._ramp_start = False, None, None
            self._polygon_cache = None
            self._guard_cache = None

    @property
    def airborne(self) -> bool:
        return self._airborne is not None

    def _airborne_tick(self, q: np.ndarray, v: np.ndarray, t0: float) -> WbcResult:
        st = self.state
        st.update(q, v, check=False)
        acc = AIRBORNE_KP * (self._airborne - q[7:]) - AIRBORNE_KD * v[6:]
        tau = self._airborne_inertia * acc + st.data.g[6:]
        tau = np.clip(tau, -self._tau_bound, self._tau_bound)
        self._last_tau = None
        return self._result(tau, "airborne", "lifted: joint posture hold, gravity compensated", t0, [])

    # -- references -------------------------------------------------------------

    def set_reference(self, ref: Reference) -> None:
        """Track ``ref`` from now on; all of it or, if a field is bad, none of it.

        Raises:
            ReferenceRejected: a field is non-finite or ill-shaped (the message names it);
                the previous references stay in force.
        """
        ref = ref.validated(self.na)
        com_task = self.com_task
        if com_task is not None and ref.com_pos is not None:
            com_task.set_reference(ref.com_pos, ref.com_vel, ref.com_acc)
        for name, fref in ref.frames.items():
            task = self.tasks.get(name)
            if isinstance(task, FrameTask):
                task.set_reference(fref)
        if ref.posture is not None:
            for task in self.tasks.values():
                if isinstance(task, PostureTask):
                    task.set_reference(ref.posture)
        if ref.contacts is not None:
            self.set_contacts(ref.contacts)

    def set_contacts(self, wanted: dict[str, bool]) -> None:
        """Add or remove foot contacts (with the force ramp) at the current time."""
        for side, on in wanted.items():
            c = self.contacts[side]
            if on and (not c.active or c.removing):
                c.add(self.time)
            elif not on and c.active and not c.removing:
                fz = self._last_wrenches[side][2] if self._last_wrenches else 0.0
                c.remove(self.time, fz)

    def support_polygon(self) -> np.ndarray:
        """Convex hull (k x 2, world) of the soles in contact (cached while contacts hold)."""
        key = self._support_key()
        if self._polygon_cache is not None and self._polygon_cache[0] == key:
            return self._polygon_cache[1]
        polygon = self._hull({side: c.sole for side, c in self.contacts.items() if c.active})
        self._polygon_cache = (key, polygon)
        return polygon

    def _support_key(self) -> tuple:
        """Changes with every support phase: the polygon caches' key (activity alone matched the
        previous double support's at touchdown)."""
        return tuple((c.active, c.changes) for c in self.contacts.values())

    def _hull(self, soles: dict) -> np.ndarray:
        """Convex hull (k x 2, world) of these sole rectangles, per side, at their contacts' frames."""
        pts = []
        for side, sole in soles.items():
            oMf = self.state.placement(self.contacts[side].frame_id)
            pts.append((oMf.rotation @ sole.corners().T).T + oMf.translation)
        return geometry.convex_hull(np.vstack(pts)[:, :2]) if pts else np.zeros((0, 2))

    def _guard_com(self, task: ComTask, warnings: list[str], ground: float, height: float) -> np.ndarray:
        """Desired CoM acceleration, limited to what the contacts can produce.

        ``ground`` is the height of the lowest sole in contact [m] (0 without a contact),
        ``height`` the CoM's height above it [m] (at least 1 mm).
        """
        st = self.state
        safety = self.config.safety
        z_max = safety.max_com_height or ground + 1.2 * self._com_z0
        if task.pos[2] > z_max:
            warnings.append(f"CoM reference height {task.pos[2]:.3g} m clamped to {z_max:.3g} m")
            task.pos = task.pos.copy()
            task.pos[2] = z_max
        self._hip = None  # the hip strategy's CoM acceleration [m/s^2], set below when the ZMP saturates
        acc = task.desired_acceleration(st)
        active = [c for c in self.contacts.values() if c.active]
        if not active:
            return acc
        if acc[2] < -0.8 * GRAVITY:
            warnings.append(f"CoM vertical acceleration {acc[2]:.3g} m/s^2 limited to -0.8 g")
            acc[2] = -0.8 * GRAVITY
        lift = GRAVITY + acc[2]
        if acc[2] > GRAVITY:
            warnings.append(f"CoM vertical acceleration {acc[2]:.3g} m/s^2 limited to 1 g")
            acc[2] = GRAVITY
            lift = 2 * GRAVITY
        mu = min(c.mu for c in active) / math.sqrt(2.0)
        horiz = float(np.hypot(acc[0], acc[1]))
        if horiz > mu * lift:
            warnings.append(f"CoM horizontal acceleration {horiz:.3g} m/s^2 limited by friction to {mu * lift:.3g}")
            acc[:2] *= mu * lift / horiz
        zmp = st.com[:2] - height / lift * acc[:2]
        normals, offsets, poly = self._guard_polygon()
        if normals is not None and (normals.dot(zmp) > offsets).any():
            target = geometry.closest_point(poly, zmp)
            warnings.append("CoM acceleration limited: its ZMP would leave the support polygon")
            acc[:2] = (st.com[:2] - target) * lift / height
            if task.config.hip_acc > 0.0 and self._standing_tick:
                self._hip = self._hip_strategy(task, lift / height, normals, offsets, poly)
        return acc

    def _standing(self, task: ComTask, n_active: int) -> bool:
        """Both feet in contact and the CoM reference at rest: where the hip strategy and the
        attitude tasks' bounded return act.  In every double support instead, G1's walk with
        a 0.25 m/s lateral push fell (7/20 steps: the walk's double supports after it)."""
        return n_active == len(self.contacts) and float(np.hypot(task.vel[0], task.vel[1])) < STANDING_SPEED

    def _hip_strategy(self, task: ComTask, omega2: float, normals, offsets, poly) -> np.ndarray | None:
        """The horizontal CoM acceleration [m/s^2] asked of the centroidal angular
        momentum while the guard holds the ZMP on the support polygon, or None.

        A DCM feedback ``cmp = xi + HIP_GAIN (xi - xi_ref)`` (``xi = c + v / omega``,
        ``xi_ref`` the CoM reference's) gives the centroidal moment pivot that would
        bring the DCM back; the part of it beyond the polygon, ``omega^2`` times the
        distance, is what the ZMP cannot give (norm at most ``hip_acc``).  The PD's
        whole deficit instead (its gains ask for a ZMP 9 cm ahead per cm of CoM error)
        kept the upper body turning long after the DCM was back inside.
        """
        st = self.state
        omega = math.sqrt(omega2)
        dcm = st.com[:2] + st.vcom[:2] / omega
        ref = task.pos[:2] + task.vel[:2] / omega
        cmp = dcm + HIP_GAIN * (dcm - ref)
        if not (normals.dot(cmp) > offsets).any():
            return None
        hip = (geometry.closest_point(poly, cmp) - cmp) * omega2
        norm = float(np.hypot(hip[0], hip[1]))
        hip_max = task.config.hip_acc
        return hip * (hip_max / norm) if norm > hip_max else hip

    def _guard_foot(self, task: FrameTask, warnings: list[str]) -> FrameReference:
        """The swing foot's reference, its position clamped to the leg's reach from the base.

        A reference beyond :attr:`foot_reach` [m] cannot be reached whatever the joints
        do; tracking it would only saturate the torques.  It is moved onto the reach
        sphere, with zero linear velocity and acceleration, and reported.
        """
        ref = task.reference
        base = self.state.placement(self._base_frame).translation
        offset = ref.pos - base
        distance = float(np.linalg.norm(offset))
        reach = self.foot_reach[task.side]
        if distance <= reach:
            return ref
        warnings.append(
            f"{task.name} reference {distance:.3g} m from the base clamped to the leg's reach {reach:.3g} m"
        )
        zero = np.zeros(3)
        return dataclasses.replace(ref, pos=base + offset * (reach / distance), lin_vel=zero, lin_acc=zero)

    def _guard_polygon(self):
        """Support polygon shrunk by the margin, with its half-planes ``N p <= d`` (cached).

        On one foot the polygon is the part of its sole where the leg holds the whole weight
        (:meth:`RobotModel.load_bearing_sole`): G1's 35 N m ankle pitch holds 327 N only to
        0.107 m of its 0.12 m toe, and a ZMP asked beyond it was made by pressing the swing
        foot into the ground (walked on 30 cm after a forward push, then a fall).  On two
        feet each carries part of the weight: the whole soles.
        """
        key = self._support_key()
        cache = self._guard_cache
        if cache is not None and cache[0] == key:
            return cache[1]
        active = [side for side, c in self.contacts.items() if c.active]
        polygon = self._hull({active[0]: self._held_soles[active[0]]}) if len(active) == 1 else self.support_polygon()
        poly = geometry.shrink(polygon, self.config.safety.support_margin)
        if len(poly) >= 3:
            edges = np.roll(poly, -1, axis=0) - poly
            normals = np.column_stack([edges[:, 1], -edges[:, 0]])
            normals /= np.linalg.norm(normals, axis=1, keepdims=True)
            value = (normals, np.einsum("ij,ij->i", normals, poly), poly)
        else:
            value = (None, None, poly)
        self._guard_cache = (key, value)
        return value

    def _ground_height(self) -> float:
        zs = [self.state.placement(c.frame_id).translation[2] for c in self.contacts.values() if c.active]
        return min(zs) if zs else 0.0

    # -- the tick ---------------------------------------------------------------

    def cycle(
        self, q: np.ndarray, v: np.ndarray, dt: float | None = None, reference: Reference | None = None
    ) -> WbcResult:
        """One control tick at state ``(q, v)`` (Pinocchio convention).

        Args:
            dt: time since the last tick [s] (default: the configured control period).
            reference: new references, or None to keep the current ones.
        """
        result = self._cycle(q, v, dt, reference)
        self._last_out = result.tau
        return result

    def _cycle(self, q, v, dt, reference) -> WbcResult:
        t0 = time.perf_counter()
        self._built = None
        rejected: list[str] = []  # inputs rejected this tick, for the reason
        period = self.config.control_period
        if dt is None:
            dt = period
        else:
            try:
                dt_ok = math.isfinite(dt) and dt > 0.0
            except TypeError:
                dt_ok = False
            if not dt_ok:
                rejected.append(f"dt rejected: {dt!r} (must be finite and > 0); stepped the control period {period} s")
                dt = period
        self.time += dt
        try:
            check_state(self.robot, q, v)
        except StateError as exc:
            return self._damping(v, f"state rejected: {exc}", t0, dt=dt)
        if self._latched is not None:
            return self._damping(v, self._latched, t0, dt=dt)
        if self._airborne is not None:
            return self._airborne_tick(q, v, t0)
        if reference is not None:
            try:
                self.set_reference(reference)
            except ReferenceRejected as exc:
                rejected.append(f"reference rejected: {exc}; holding the last valid reference")
        result = self._solve(q, v, dt, t0)
        if not rejected:
            return result
        reason = "; ".join(rejected + ([result.reason] if result.reason else []))
        return dataclasses.replace(result, status="held" if result.ok else result.status, reason=reason)

    def _solve(self, q, v, dt, t0) -> WbcResult:
        for c in self.contacts.values():
            c.update(self.time)
        self.state.update(q, v, check=False)
        warnings: list[str] = []
        try:
            E, e, C, lower, upper, levels = built = self._build(warnings)
        except Exception as exc:  # a reference that breaks the maths must not break the loop
            self._built = None
            return self._fallback(v, f"building the QP failed: {exc}", t0, warnings, dt)
        self._built = built
        skip = None
        status, reason = "ok", ""
        dropped = ""  # why the joint position look-ahead was dropped this tick
        while True:
            try:
                sol = self.hqp.solve(E, e, C, lower, upper, levels, skip_levels_from=skip)
                result = self._finish(sol, status, reason, warnings, t0)
                if result is not None:
                    return result
                failure = LevelFailure(len(levels) if skip is None else skip, "solution failed its checks")
            except LevelFailure as exc:
                failure = exc
            except (ValueError, np.linalg.LinAlgError) as exc:
                failure = LevelFailure(0, f"solver error: {exc}")
            if failure.level >= 2:
                skip = failure.level - 1
                status = "relaxed"
                reason = f"{failure.reason}; relaxed level '{self.level_names[skip]}' and below"
                if dropped:
                    reason = f"{dropped}; {reason}"
                continue
            if failure.level == 1 and not dropped:
                # The first level cannot make the hard rows infeasible: they are. The joint
                # position look-ahead is the one that may give way (a joint thrown at its stop
                # in a hard recovery): drop it for this tick rather than replay old torques.
                lower[-self.na :] = -np.inf
                upper[-self.na :] = np.inf
                skip = None
                status = "relaxed"
                reason = dropped = f"{failure.reason}; joint position limits dropped"
                continue
            return self._fallback(v, failure.reason, t0, warnings, dt)

    def _build(self, warnings: list[str]):
        st = self.state
        nv, na, n = self.nv, self.na, self.n
        fs = self._fscale
        contacts = [self.contacts[s] for s in SIDES]
        Js = self._Js = [st.jacobian(c.frame_id, _LOCAL) for c in contacts]  # also read by _finish
        # Hard equalities: floating-base dynamics, contact constraints, zero wrench of a free foot.
        E, e = self._E, self._e
        E.fill(0.0)
        E[:6, :nv] = st.M[:6]
        np.negative(st.h[:6], out=e[:6])
        # -J^T (m g) of each foot: its base rows go to E, its joint rows to the torque rows
        # of C (one contiguous product: cheaper than two strided ones)
        JTs = [J.T * -fs for J in Js]
        for k, (c, J) in enumerate(zip(contacts, Js)):
            cols = slice(nv + 6 * k, nv + 6 * k + 6)
            E[:6, cols] = JTs[k][:6]
            rows = slice(6 + 6 * k, 12 + 6 * k)
            if c.active:
                E[rows, :nv] = J
                rhs = np.negative(st.drift(c.frame_id, _LOCAL), out=e[rows])
                if c.config.kd > 0:
                    rhs -= c.config.kd * J.dot(st.v)
            else:
                E[rows, cols] = self._eye6 * fs
                e[rows] = 0.0
        # Inequalities: torque limits, friction and CoP, joint position limits.
        n_active = sum(c.active for c in contacts)
        m = 2 * na + Contact6D.N_ROWS * n_active
        # One inequality matrix per contact set, reused: its zero blocks and the joint
        # limit identity never change; every other block is overwritten below.
        key = (contacts[0].active, contacts[1].active)
        C = self._C.get(key)
        if C is None:
            C = self._C[key] = np.zeros((m, n))
            C[m - na :, 6:nv] = self._eye_na
        lower = np.empty(m)
        upper = np.empty(m)
        C[:na, :nv] = st.M[6:]
        for k, JT in enumerate(JTs):
            C[:na, nv + 6 * k : nv + 6 * k + 6] = JT[6:]
        np.negative(np.add(self._tau_bound, st.h[6:], out=lower[:na]), out=lower[:na])  # -bound - h, exactly
        np.subtract(self._tau_bound, st.h[6:], out=upper[:na])
        r = na
        written = self._C_forces.setdefault(key, {})  # contact -> the F its rows of C hold
        for k, c in enumerate(contacts):
            if not c.active:
                continue
            rows = slice(r, r + Contact6D.N_ROWS)
            F = c.force_bounds(self.time, lower[rows], upper[rows])[0]
            if written.get(k) is not F:  # F changes only with mu (set_mu makes a new one)
                np.multiply(F, fs, out=C[rows, nv + 6 * k : nv + 6 * k + 6])
                written[k] = F
            r += Contact6D.N_ROWS
        self._acceleration_bounds(lower[r:], upper[r:])
        # Task levels.
        # Standing, the hip strategy may act (_guard_com) and the attitude tasks' angular
        # acceleration is bounded (the hip strategy's return; already during a push: Talos's
        # 0.35 m/s forward push fell with the bound only after the hip strategy), never while
        # walking.
        com = self.com_task
        self._standing_tick = com is not None and self._standing(com, n_active)
        ground = self._ground_height()
        com_height = max(st.com[2] - ground, 1e-3)  # above the lowest sole in contact [m]
        levels = []
        for tasks in self.levels:
            objectives = []
            for task in tasks:
                if not task.enabled or task.weight <= 0:
                    continue
                if isinstance(task, ForceRegularizationTask):
                    if n_active:
                        objectives.append(self._force_objective(task, contacts, n_active))
                    continue
                if isinstance(task, FrameTask) and task.side is not None and self.contacts[task.side].active:
                    continue  # the contact constraint holds this foot
                if self._hip is not None and isinstance(task, FrameTask) and task.side is None:
                    continue  # the hip strategy turns the upper body: its attitude tasks wait
                if isinstance(task, ComTask):
                    acc = self._guard_com(task, warnings, ground, com_height)
                    A_a, b = task.rows(st, acc, com_height if n_active else None, self._hip)
                elif isinstance(task, FrameTask) and task.side is not None:
                    A_a, b = task.rows(st, self._guard_foot(task, warnings))
                elif isinstance(task, FrameTask) and self._standing_tick:  # torso, base: bounded
                    A_a, b = task.rows(st, bounded=True)
                else:
                    A_a, b = task.rows(st)
                A = self._task_buffer(task.name, A_a.shape[0])
                A[:, :nv] = A_a
                objectives.append(Objective(task.name, A, b, task.weight))
            levels.append(objectives)
        return E, e, C, lower, upper, levels

    def last_problem(self) -> HqpProblem | None:
        """The hierarchical problem of the last tick that built one, frozen (copied), with
        its blocks named; None if the last tick built none (damping, airborne, rejected
        state).  ``self.hqp.solve_problem(ctrl.last_problem())`` solves it again."""
        if self._built is None:
            return None
        E, e, C, lower, upper, levels = self._built
        nv, na = self.nv, self.na
        inequalities = [("torque_limits", 0, na)]
        r = na
        for side in SIDES:
            if self.contacts[side].active:
                inequalities.append((f"contact_{side}", r, r + Contact6D.N_ROWS))
                r += Contact6D.N_ROWS
        inequalities.append(("joint_position_limits", r, r + na))
        return HqpProblem.copy_of(
            E,
            e,
            C,
            lower,
            upper,
            levels,
            level_names=tuple(self.level_names),
            equality_blocks=(("floating_base_dynamics", 0, 6), ("contact_left", 6, 12), ("contact_right", 12, 18)),
            inequality_blocks=tuple(inequalities),
            variables=(("a", 0, nv), ("f_left / (m g)", nv, nv + 6), ("f_right / (m g)", nv + 6, nv + 12)),
        )

    def _task_buffer(self, name: str, rows: int) -> np.ndarray:
        """A zero-padded (rows x n) matrix reused across ticks (only its first nv columns change)."""
        buf = self._buffers.get(name)
        if buf is None or buf.shape[0] != rows:
            buf = self._buffers[name] = np.zeros((rows, self.n))
        return buf

    def _force_objective(self, task: Task, contacts: list[Contact6D], n_active: int) -> Objective:
        """Rows ``f_k = (0, 0, m g / n_active, 0, 0, 0)`` per active contact; they depend
        only on which contacts are active, so they are built once per contact set (read-only)."""
        key = tuple(c.active for c in contacts)
        cached = self._force_rows.get(key)
        if cached is None:
            A = np.zeros((6 * n_active, self.n))
            b = np.zeros(6 * n_active)
            r = 0
            for k, c in enumerate(contacts):
                if c.active:
                    A[r : r + 6, self.nv + 6 * k : self.nv + 6 * k + 6] = self._eye6 * self._fscale
                    b[r + 2] = self.robot.mass * GRAVITY / n_active
                    r += 6
            A.flags.writeable = b.flags.writeable = False
            cached = self._force_rows[key] = (A, b)
        return Objective(task.name, cached[0], cached[1], task.weight)

    def _acceleration_bounds(
        self, lo: np.ndarray | None = None, hi: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Joint accelerations that stop at the position limits within the horizon,
        written into ``lo`` and ``hi`` (na each) when given, else into new arrays.

        Outside a limit already, the box still contains 0 (motion back inside allowed),
        so it is never infeasible.
        """
        q, v = self.state.q[7:], self.state.v[6:]
        drift = v * self._limit_horizon
        drift += q
        lo = np.subtract(self._q_lower, drift, out=lo)
        hi = np.subtract(self._q_upper, drift, out=hi)
        lo *= self._limit_gain
        hi *= self._limit_gain
        np.minimum(lo, 0.0, out=lo)
        np.maximum(hi, 0.0, out=hi)
        return lo, hi

    def _finish(self, sol, status: str, reason: str, warnings: list[str], t0: float) -> WbcResult | None:
        st = self.state
        nv = self.nv
        x = sol.x
        a = x[:nv]
        fs = [x[nv : nv + 6] * self._fscale, x[nv + 6 : nv + 12] * self._fscale]
        Js = self._Js  # this tick's contact Jacobians (built in _build, same state)
        # M a + h - J^T f: its actuated rows are the torques, its base rows the residual.
        full = st.M.dot(a) + st.h - Js[0].T.dot(fs[0]) - Js[1].T.dot(fs[1])
        tau = full[6:].copy()
        if not np.isfinite(tau).all():  # NaN anywhere in x reaches tau through M or J^T
            return None
        full[6:] = 0.0
        dyn = math.sqrt(full.dot(full))  # (np.linalg.norm's own formula, without its overhead)
        if dyn > self.config.safety.dynamics_tolerance * max(1.0, self.robot.mass):
            return None  # numerically broken solution
        # An approximate level may overshoot a limit by its tolerance: the clip is reported
        # through the dynamics residual (zero whenever no clipping happened).
        tau_max = self.robot.tau_max
        overshoot = 0.0
        if (np.abs(tau) > tau_max).any():
            clipped = np.clip(tau, -tau_max, tau_max)
            overshoot = float(np.max(np.abs(tau - clipped)))
        if overshoot > 1e-2:  # [N m] more than a solver tolerance: the limits were not met
            return None
        if overshoot > 0.0:
            # An approximate level overshot a torque limit by its tolerance: keep the
            # physics exact for the clipped torques (the contact acceleration then moves
            # by the same tiny amount).
            tau = clipped
            rhs = Js[0].T @ fs[0] + Js[1].T @ fs[1] - st.h
            rhs[6:] += tau
            a = np.linalg.solve(st.M, rhs)
            full = st.M @ a + st.h - Js[0].T @ fs[0] - Js[1].T @ fs[1]
            full[6:] -= tau
            dyn = math.sqrt(full.dot(full))
        wrenches = {s: f.copy() for s, f in zip(SIDES, fs)}
        self._last_wrenches = wrenches
        self._last_tau = tau
        self._reuse_count = 0
        return WbcResult(
            tau=tau,
            a=a.copy(),
            wrenches=wrenches,
            status=status,
            reason=reason,
            warnings=tuple(warnings),
            level_names=tuple(self.level_names),
            residuals=sol.residuals,
            task_residuals=sol.task_residuals,
            dynamics_residual=dyn,
            contacts={s: self.contacts[s].active for s in SIDES},
            iterations=sol.iterations,
            approximate_levels=sol.approximate_levels,
            solve_time=sol.solve_time,
            tick_time=time.perf_counter() - t0,
        )

    def _fallback(self, v: np.ndarray, reason: str, t0: float, warnings: list[str], dt: float) -> WbcResult:
        if self._last_tau is not None and self._reuse_count < self.config.safety.max_reuse_ticks:
            self._reuse_count += 1
            return self._result(
                self._last_tau.copy(),
                "reused",
                f"{reason}; reusing the last torques ({self._reuse_count})",
                t0,
                warnings,
            )
        return self._damping(v, f"{reason}; joint damping", t0, warnings, dt)

    def _damping_target(self, v: np.ndarray, period: float | None = None) -> np.ndarray:
        """``-kd v`` for the joints (non-finite entries of ``v`` read as 0), clipped to the
        limits; ``kd``: ``robot.safe_damping`` for a command held ``period`` [s] (default the
        control period)."""
        period = self.config.control_period if period is None else period
        kd = self._kd_safe.get(period)
        if kd is None:
            kd = self._kd_safe[period] = self.robot.safe_damping(period)
        vj = np.asarray(v, dtype=float)[6:] if np.shape(v) == (self.nv,) else np.zeros(self.na)
        vj = np.nan_to_num(vj, nan=0.0, posinf=0.0, neginf=0.0)
        return np.clip(-kd * vj, -self.robot.tau_max, self.robot.tau_max)

    def _damping(
        self, v: np.ndarray, reason: str, t0: float, warnings: list[str] | None = None, dt: float | None = None
    ) -> WbcResult:
        """Damping, approached from the last tick's torques by at most
        ``safety.max_torque_rate * dt`` [N m] per joint (``dt`` [s], default the control period)."""
        tau = self._damping_target(v)
        last = self._last_out
        if last is not None and last.shape == tau.shape:
            step = self.config.safety.max_torque_rate * (self.config.control_period if dt is None else dt)
            gap = tau - last
            if np.abs(gap).max() > step:
                tau = last + np.clip(gap, -step, step)
                reason = f"{reason} (blending toward damping, max {step:.3g} N m per tick)"
        self._last_tau = None
        return self._result(tau, "damping", reason, t0, warnings or [])

    def _result(self, tau, status, reason, t0, warnings) -> WbcResult:
        return WbcResult(
            tau=tau,
            a=np.zeros(self.nv),
            wrenches={s: np.zeros(6) for s in SIDES},
            status=status,
            reason=reason,
            warnings=tuple(warnings),
            level_names=tuple(self.level_names),
            residuals=tuple(float("nan") for _ in self.level_names),
            task_residuals={},
            dynamics_residual=float("nan"),
            contacts={s: self.contacts[s].active for s in SIDES},
            iterations=0,
            solve_time=0.0,
            tick_time=time.perf_counter() - t0,
        )

    def damping_result(self, tau: np.ndarray, reason: str) -> WbcResult:
        """The result of a tick whose damping torques ``tau`` the caller commanded without
        a solve (the control stage's supervisor: a latched fall, an unusable state)."""
        return self._result(np.asarray(tau, dtype=float), "damping", reason, time.perf_counter(), [])

    def damping_torques(self, v: np.ndarray, period: float | None = None) -> np.ndarray:
        """Safe-mode torques ``-kd v`` (finite, inside limits) for velocity ``v``, held
        ``period`` [s] (default the control period; see ``RobotModel.safe_damping``)."""
        return self._damping_target(v, period)
