"""Walking pattern generator: commands in, one whole-body reference per tick out.

Data flow of :meth:`PatternGenerator.cycle`::

    command -> FootstepPlanner -> Schedule -> ZmpReference
            -> CoM planner (preview control or MPC, every planner period)
            -> exact constant-jerk interpolation at time t
            -> swing feet, DCM feedback -> WalkerReference

The CoM planner runs on a coarse grid (``planner_period`` for preview control,
``mpc.period`` for the MPC) and holds its jerk constant in between, so the
reference at any ``t`` is the exact cart-table state: C2 in position and cheap
(a few vector operations per tick).

Measured state and pushes: the planned CoM trajectory is kept nominal
(open-loop, smooth, never jumps); a measured state closes the loop on the
DCM: ``zmp_cmd = clamp(zmp_ref + k_dcm (xi_meas - xi_ref))`` and
``com_acc = omega^2 (c_meas - zmp_cmd)`` (see :mod:`zmp_walker.dcm`).  The
DCM error then decays at the rate ``omega (k_dcm - 1)`` and the CoM, which
follows its DCM, converges back to the nominal trajectory; a whole-body
controller should track ``com_acc`` as given when it passes a measurement.
Without a measurement ``zmp_cmd = zmp_ref`` and ``com_acc`` is the planned
acceleration.

Step adjustment (``config.step_adjustment``, needs a measurement): when the
DCM error is more than the stance foot's ZMP can absorb before touchdown, the
landing of the swinging foot and every later step move by the capture-point
rule (:mod:`zmp_walker.step_adjust`); the swing is re-planned C2 from its
current state, the ZMP reference uses the moved footholds and the planned
DCM moves by the part they explain (a jump of the planned CoM velocity only).
On terrain the move is cut back (to 3/4, 1/2, 1/4 or none) until the moved
step and the two after it keep ``edge_margin`` from a height change, and the
touchdown anchoring moves no later step across one: a landing moved 2 cm back
on a step down put G1's heel on the stair edge.

Standing: the reference CoM is above the midpoint of the sole centres at
``com_height`` and the planner is idle, so the reference is exactly constant.
Commands (``set_velocity``, ``set_goal``, ``walk_steps``, ``stop``) take
effect at the next :meth:`cycle`; while walking, the step in swing and the
next one are kept and the rest is replanned.  :meth:`~PatternGenerator.freeze`
instead aborts at once (robot lifted): the reference is held where it is.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from zmp_walker.cart_table import integrate
from zmp_walker.config import WalkerConfig
from zmp_walker.dcm import DcmDisturbanceObserver, DcmFeedback, omega, slope_height, slope_shift
from zmp_walker.errors import PlanningError
from zmp_walker.footsteps import Footstep, FootstepPlanner, Side, other_side, side_sign
from zmp_walker.geometry import FootPose, SoleRect, support_polygon
from zmp_walker.preview import PreviewPlanner
from zmp_walker.schedule import Schedule
from zmp_walker.step_adjust import ReplannedSwing, capture_offset, clamp_landing, retimed_height, swing_reach
from zmp_walker.swing import SwingTrajectory
from zmp_walker.zmp_reference import ZmpReference, sole_center

__all__ = ["FootRef", "MeasuredState", "WalkerReference", "PatternGenerator"]

_ZERO3 = np.zeros(3)
_ZERO3.setflags(write=False)


def _frozen(a) -> np.ndarray:
    a = np.asarray(a, dtype=float)
    a.setflags(write=False)
    return a


@dataclass(frozen=True)
class FootRef:
    """Reference of one sole frame (world frame, SI).

    Attributes:
        pos (3,) [m], rotation (3, 3), lin_vel (3,) [m/s], ang_vel (3,) [rad/s],
        lin_acc (3,) [m/s^2], ang_acc (3,) [rad/s^2], in_contact: whether the
        schedule puts this foot on the ground.
    """

    pos: np.ndarray
    rotation: np.ndarray
    lin_vel: np.ndarray
    ang_vel: np.ndarray
    lin_acc: np.ndarray
    ang_acc: np.ndarray
    in_contact: bool


@dataclass(frozen=True)
class MeasuredState:
    """Estimated CoM ``com`` (3,) [m] and ``com_vel`` (3,) [m/s]; optional measured ``zmp`` (3,) [m]
    and ``gravity`` (3,) [m/s^2], the gravity vector in the walker's frame as the IMU's attitude
    gives it (on a slope the walker's frame is the ground's: z along its normal); optional
    ``feet``, ``{"left": (3,), "right": (3,)}``, the sole frames' measured positions [m]
    (kinematics), for the touchdown anchoring (``step_adjustment.anchor_tolerance``)."""

    com: np.ndarray
    com_vel: np.ndarray
    zmp: np.ndarray | None = None
    gravity: np.ndarray | None = None
    feet: dict | None = None


@dataclass(frozen=True)
class WalkerReference:
    """What a whole-body controller consumes at one tick (world frame, z up, SI).

    Attributes:
        time: generator time [s].
        phase: contact phase name (see :class:`~zmp_walker.schedule.Phase`).
        com_pos, com_vel (3,): planned CoM [m, m/s], z = com_height; the
            position is shifted by :attr:`PatternGenerator.disturbance_offset`.
        com_acc (3,): CoM acceleration to track [m/s^2]; with a measurement it
            includes the DCM feedback, ``omega^2 (c_meas - zmp_cmd)``.
        feet: ``{"left": FootRef, "right": FootRef}``.
        zmp_ref (3,): planned ZMP [m] (z = ground height of the support).
        zmp_cmd (3,): ZMP after DCM feedback and clamping (= zmp_ref without
            a measurement) [m].
        dcm_ref (3,): planned DCM ``c + cdot / omega`` [m] (shifted as ``com_pos``).
        upcoming_footsteps: steps not yet landed, in order.
        omega: LIPM frequency [1/s].
    """

    time: float
    phase: str
    com_pos: np.ndarray
    com_vel: np.ndarray
    com_acc: np.ndarray
    feet: dict
    zmp_ref: np.ndarray
    zmp_cmd: np.ndarray
    dcm_ref: np.ndarray
    upcoming_footsteps: tuple
    omega: float


class PatternGenerator:
    """ZMP-based walking pattern generator.

    Args:
        config: walker parameters.
        left_foot, right_foot: initial sole poses (feet flat) [m, rad].
        com: initial CoM (3,) [m]; its height is the CoM height when
            ``config.com_height`` is None.
        left_sole, right_sole: sole rectangles in the sole frames [m].
        ground_height: terrain height ``(x, y) -> z`` [m] for the footsteps
            (:class:`~zmp_walker.footsteps.FootstepPlanner`), None for flat
            ground; the CoM height follows the support height of the schedule
            (:meth:`~zmp_walker.schedule.Schedule.support_height`).
    """

    def __init__(
        self,
        config: WalkerConfig,
        left_foot: FootPose,
        right_foot: FootPose,
        com: np.ndarray,
        left_sole: SoleRect,
        right_sole: SoleRect,
        ground_height: Callable[[float, float], float] | None = None,
    ):
        config.validate()
        self.config = config
        com = np.asarray(com, dtype=float).reshape(-1)
        if com.shape != (3,) or not np.all(np.isfinite(com)):
            raise PlanningError(f"com must be a finite 3-vector, got {com!r}")
        self.soles: dict[Side, SoleRect] = {"left": left_sole, "right": right_sole}
        feet = {"left": left_foot, "right": right_foot}
        ground = 0.5 * (left_foot.position[2] + right_foot.position[2])
        z_c = config.com_height if config.com_height is not None else com[2] - ground
        if not z_c > 0.0:
            raise PlanningError(f"CoM height above the feet must be > 0, got {z_c}")
        self.com_height = float(z_c)
        self.omega = omega(config.gravity, z_c)
        separation = float(np.linalg.norm(right_foot.to_local(left_foot.position)[1:2]))
        self.footsteps = FootstepPlanner(config, left_sole, right_sole, separation, ground_height)
        self.feedback = DcmFeedback(config.k_dcm, self.omega, config.clamp_zmp)
        obs = config.disturbance_observer
        self.observer = DcmDisturbanceObserver(self.omega, obs.bandwidth, obs.max_offset) if obs.enabled else None
        self._zmp_applied: np.ndarray | None = None  # last commanded ZMP (xy), the observer's input
        self._slope_shift = np.zeros(2)  # CoM lean against the measured gravity's ground component [m]
        self._normal_height = self.com_height  # CoM height along the ground's normal (config.slope_reach) [m]
        if config.method == "preview":
            p = config.preview
            self.planner = PreviewPlanner(config.planner_period, z_c, config.gravity, p.qe, p.r, p.horizon)
            self._lookahead = p.horizon
        else:
            from zmp_walker.mpc import MpcPlanner

            self.planner = MpcPlanner(config, z_c, self.soles)
            self._lookahead = config.mpc.horizon_steps * config.mpc.period
        self._T = self.planner.period
        self._schedule = Schedule(config, math.inf, feet, [], final=True)
        self._reference = ZmpReference(self._schedule, self.soles, config.zmp_margin)
        self._ground = ground
        mid = self._reference.sample(0.0)
        self._x = np.zeros((3, 2))
        self._x[0] = mid
        self.planner.reset(self._x, mid)
        self._jerk = np.zeros(2)
        self._t_plan: float | None = None
        self._idle = True
        self._pending: tuple | None = None
        self._velocity: tuple[float, float, float] | None = None
        self._steps_before = 0  # steps completed in previous walks
        self._t = -math.inf
        self._swing: dict[int, SwingTrajectory | ReplannedSwing] = {}
        self._stance_refs: dict[tuple, FootRef] = {}
        self._touchdowns: list[float] = []
        self._nominal: list[np.ndarray] = []
        self._upcoming_cache: tuple = (-1, ())
        self._measured: MeasuredState | None = None
        self._planned_landing: dict[int, FootPose] = {}  # step index -> landing before adjustment
        # step index -> its footstep (xy) [m] when the plan was anchored on its landing
        self._aimed: dict[int, np.ndarray] = {}
        # steps of a recovery from a push towards the stance foot (min_swing_duration_stance_side)
        self._stance_side_steps: set[int] = set()
        # step index -> whether its first adjustment in swing already moved it towards the stance side
        self._stance_side_at_lift_off: dict[int, bool] = {}
        self._last: WalkerReference | None = None  # the last reference returned by cycle
        self._frozen: WalkerReference | None = None  # set by freeze(): returned from then on
        self._frozen_steps = 0
        self.recoveries = 0  # recovery walks started from standing (config.recovery_step)
        self._recovering = False  # the walk is a recovery (its steps reach further)

    # -- commands -------------------------------------------------------------

    def set_velocity(self, vx: float, vy: float = 0.0, yaw_rate: float = 0.0) -> None:
        """Walk continuously at ``(vx, vy)`` [m/s] and ``yaw_rate`` [rad/s] (sole-midpoint frame).

        A zero command stops the walk (or does nothing while standing).
        """
        cmd = tuple(float(v) for v in (vx, vy, yaw_rate))
        if not all(map(math.isfinite, cmd)):
            raise PlanningError(f"velocity command must be finite, got {cmd}")
        self._check_not_frozen()
        if cmd == (0.0, 0.0, 0.0):
            self.stop()
            return
        self._pending = ("velocity", cmd)

    def set_goal(self, x: float, y: float, yaw: float) -> None:
        """Walk until the feet midpoint is at ``(x, y)`` [m] with heading ``yaw`` [rad] (world)."""
        self._check_not_frozen()
        goal = (float(x), float(y), float(yaw))
        if not all(map(math.isfinite, goal)):
            raise PlanningError(f"goal must be finite, got {goal}")
        self._pending = ("goal", goal)

    def walk_steps(self, n: int, vx: float, vy: float = 0.0, yaw_rate: float = 0.0) -> None:
        """Take exactly ``n`` steps at the velocity command; the last one brings the feet side by side."""
        if int(n) != n or n < 1:
            raise PlanningError(f"number of steps must be a positive integer, got {n}")
        self._check_not_frozen()
        self._pending = ("steps", (int(n), float(vx), float(vy), float(yaw_rate)))

    def stop(self) -> None:
        """Finish the walk: one closing step after the kept steps, then final double support."""
        if self._frozen is not None:
            return  # nothing walks any more
        self._pending = ("stop", None)

    def freeze(self, t: float | None = None) -> None:
        """Abort the walk at once (the robot was lifted, an emergency): unlike :meth:`stop`,
        no closing step is taken and nothing is planned any more.

        From the reference at ``t`` [s] (default: the last :meth:`cycle`'s time) on,
        :meth:`cycle` returns that reference held: the feet where they are (a
        swinging foot stays in the air) with zero velocity and acceleration, the
        same ``in_contact`` flags, the CoM reference at rest, no upcoming
        footsteps, phase ``"frozen"``.  :attr:`is_walking` is False and
        :attr:`steps_completed` stays at the steps landed before the freeze;
        :attr:`schedule` stays the aborted walk's (a record: its later steps will
        not happen).  Walk commands then raise :class:`PlanningError` (the robot
        is no longer where the plan assumes: make a new generator once it stands).
        Freezing twice keeps the first freeze.
        """
        if self._frozen is not None:
            return
        if t is None and self._last is not None:
            ref = self._last
        else:
            ref = self.cycle(float(t) if t is not None else max(self._t, 0.0), self._measured)
        self._frozen_steps = self.steps_completed
        self._pending = None
        self._velocity = None
        feet = {
            side: FootRef(
                _frozen(f.pos.copy()), _frozen(f.rotation.copy()), _ZERO3, _ZERO3, _ZERO3, _ZERO3, f.in_contact
            )
            for side, f in ref.feet.items()
        }
        com = _frozen(ref.com_pos.copy())
        self._frozen = WalkerReference(
            time=ref.time,
            phase="frozen",
            com_pos=com,
            com_vel=_ZERO3,
            com_acc=_ZERO3,
            feet=feet,
            zmp_ref=_frozen(ref.zmp_ref.copy()),
            zmp_cmd=_frozen(ref.zmp_ref.copy()),
            dcm_ref=com,
            upcoming_footsteps=(),
            omega=ref.omega,
        )

    @property
    def frozen(self) -> bool:
        """Whether :meth:`freeze` aborted the walk."""
        return self._frozen is not None

    def _check_not_frozen(self) -> None:
        if self._frozen is not None:
            raise PlanningError("the walk was aborted (freeze): make a new generator once the robot stands")

    @property
    def is_walking(self) -> bool:
        """Whether a walk (including its start and stop double supports) is under way."""
        if self._frozen is not None:
            return False
        s = self._schedule
        if self._pending is not None and self._pending[0] != "stop":
            return True
        return math.isfinite(s.t0) and s.t0 <= self._t < s.end_time

    @property
    def steps_completed(self) -> int:
        """Steps landed since construction."""
        if self._frozen is not None:
            return self._frozen_steps
        return self._steps_before + self._schedule.steps_completed(self._t)

    @property
    def schedule(self) -> Schedule:
        """Current contact schedule."""
        return self._schedule

    @property
    def zmp_reference(self) -> ZmpReference:
        """Current ZMP reference and support polygons."""
        return self._reference

    # -- planning -------------------------------------------------------------

    def _apply(self, t: float) -> None:
        kind, arg = self._pending
        self._pending = None
        old = self._schedule
        walking = math.isfinite(old.t0) and t < old.end_time
        if walking:
            kept = [s for s in old.steps if s.t_start < t + self.config.step_duration]
            t0 = old.t0
        else:
            self._steps_before += old.steps_completed(t) if math.isfinite(old.t0) else 0
            kept, t0 = [], t
        feet = dict(old.feet_before[len(kept)] if walking else old.final_feet)
        next_side = other_side(kept[-1].side) if kept else None
        swings, start = (), None  # a new walk's first swing duration and initial double support
        self._aimed = {k: p for k, p in self._aimed.items() if k < len(kept)}  # a new walk numbers from 0
        self._stance_side_steps = {k for k in self._stance_side_steps if k < len(kept)}
        self._stance_side_at_lift_off = {k: v for k, v in self._stance_side_at_lift_off.items() if k < len(kept)}
        self._velocity = None
        if kind == "stop":
            if not walking:
                return
            final = True
            side = next_side or "right"
            # at the walk's gait: a fast-gait walk closes at its cadence
            duration = kept[-1].duration if kept else None
            new = [Footstep(side, self.footsteps.closing_step(side, feet[other_side(side)]), duration=duration)]
        elif kind == "goal":
            final = True
            new = self.footsteps.to_goal(feet, *arg)
            if new and next_side is not None and new[0].side != next_side:
                # the feet alternate: let the other foot make the first move
                new = [Footstep(next_side, self.footsteps.closing_step(next_side, feet[other_side(next_side)]))]
                feet[next_side] = new[0].pose
                new += self.footsteps.to_goal(feet, *arg)
        elif kind == "steps":
            n, vx, vy, wz = arg
            final = True
            new = self.footsteps.from_velocity(feet, n, vx, vy, wz, first=next_side)
        elif kind == "recover":
            if walking:
                return
            final = True
            rec = self.config.recovery_step
            # two steps in place; the step adjustment moves them under the DCM (_adjust_step)
            new = self.footsteps.from_velocity(feet, 2, 0.0, 0.0, 0.0, first=arg)
            swings, start = (rec.swing_duration,), rec.start_duration
            self.recoveries += 1
        else:
            final = False
            self._velocity = arg
            new = self.footsteps.from_velocity(feet, 2, *arg, first=next_side, close=False)
        if not walking and not new:
            return
        self._recovering = kind == "recover"
        nominal = self._nominal[: len(kept)] if walking else []
        self._set_schedule(
            Schedule(
                self.config,
                t0,
                old.feet_before[0] if walking else feet,
                kept + new,
                final,
                old.swing_durations[: len(kept)] if walking else swings,
                old.lift_off_delays[: len(kept)] if walking else (),
                old.start_duration if walking else start,
            ),
            nominal + [s.position[:2] for s in new],
        )
        self._idle = False

    def _set_schedule(self, schedule: Schedule, nominal: list | None = None) -> None:
        """Install ``schedule``; ``nominal`` are the planned step positions (xy) when it comes from planning.

        A swing trajectory is kept while its step keeps its timing and landing
        (a re-planned swing must not jump back to the original one).
        """
        if nominal is not None:
            self._nominal = nominal
            if hasattr(self.planner, "nominal_steps"):
                self.planner.nominal_steps = nominal
        self._schedule = schedule
        self._reference = ZmpReference(schedule, self.soles, self.config.zmp_margin)
        steps = schedule.steps
        self._swing = {
            k: sw
            for k, sw in self._swing.items()
            if k < len(steps)
            and steps[k].t_end == sw.t_end
            and np.allclose(steps[k].position[:2], sw(sw.t_end).pos[:2], atol=1e-9)
        }
        self._planned_landing = {k: p for k, p in self._planned_landing.items() if k in self._swing}
        self._stance_refs.clear()
        self._touchdowns = [st.t_end for st in schedule.steps]
        self._upcoming_cache = (-1, ())

    def _extend(self, t: float) -> None:
        """Append velocity steps so that the plan covers the planner's look-ahead."""
        s = self._schedule
        if self._velocity is None or s.final or s.planned_until > t + self._lookahead + self.config.step_duration:
            return
        feet = s.final_feet
        side = other_side(s.steps[-1].side) if s.steps else None
        new = self.footsteps.from_velocity(feet, 2, *self._velocity, first=side, close=False)
        self._set_schedule(
            s.replaced(steps=list(s.steps) + new, final=False),
            self._nominal + [st.position[:2] for st in new],
        )

    def catch_up(self, t: float) -> int:
        """Advance the CoM planner towards ``t`` [s] without planning at the grid points in
        between: the last planned jerk carries the CoM over them, and the next
        :meth:`cycle` plans at the last grid point at or before ``t`` (with its measured
        state) as usual.  For a caller that fell behind and asks for no reference before
        ``t`` (a real-time node starved of CPU): each grid point it missed costs a planner
        update (the preview, footstep extension, step adjustment), so that a node 0.2 s
        late spent 33 ms of CPU on its next batch (G1), and fell further behind.
        Returns the number of grid points passed without planning (0 when ``t`` is less
        than two grid periods ahead, before the first cycle, or frozen)."""
        if self._t_plan is None or self._frozen is not None or self._idle or t < self._t - 1e-9:
            return 0
        T = self._T
        skipped = 0
        while t >= self._t_plan + 2.0 * T - 1e-12:  # (the last one is left to cycle: it plans there)
            self._x = integrate(self._x, self._jerk, T)
            self._t_plan += T
            self._extend(self._t_plan)  # (the footsteps still cover the look-ahead: cheap when they do)
            skipped += 1
        return skipped

    def _advance(self, t: float) -> None:
        """Run the CoM planner up to the last grid point <= t."""
        T = self._T
        while t >= self._t_plan + T - 1e-12:
            self._x = integrate(self._x, self._jerk, T)
            self._t_plan += T
            self._plan_jerk()

    def _plan_jerk(self) -> None:
        if self._idle:  # standing still since construction: exactly constant reference
            self._jerk = np.zeros(2)
            return
        self._extend(self._t_plan)
        if self._measured is not None and self.config.step_adjustment.enabled:
            self._anchor_touchdown(self._t_plan, self._measured)
            self._adjust_step(self._t_plan, self._measured)
        if hasattr(self.planner, "velocity_ref"):
            self.planner.velocity_ref = self._world_velocity()
        self._jerk = self.planner.update(self._t_plan, self._x, self._reference)
        moved = getattr(self.planner, "moved_steps", None)
        if moved:
            self._move_steps(moved)

    def _world_velocity(self) -> np.ndarray | None:
        """Commanded CoM velocity in the world (2,) [m/s], heading of the current feet; None if no command."""
        if self._velocity is None:
            return None
        feet = self._schedule.phase_at(self._t_plan).feet
        yaw = 0.5 * (feet["left"].yaw + feet["right"].yaw)
        vx, vy, _ = self._velocity
        return np.array([math.cos(yaw) * vx - math.sin(yaw) * vy, math.sin(yaw) * vx + math.cos(yaw) * vy])

    def _move_steps(self, moved: dict[int, np.ndarray]) -> None:
        """Apply footstep positions chosen by the MPC (steps not yet lifted off)."""
        s = self._schedule
        steps = list(s.steps)
        for k, xy in moved.items():
            if k < len(steps) and steps[k].t_start > self._t_plan:
                p = steps[k].pose
                steps[k] = steps[k].moved(FootPose(np.array([xy[0], xy[1], p.position[2]]), p.yaw))
        self._set_schedule(s.replaced(steps=steps))

    def _adjust_step(self, t: float, measured: MeasuredState) -> None:
        """Capture-point step adjustment at the planner grid time ``t`` [s] (see :mod:`zmp_walker.step_adjust`).

        Moves the landing of the step in swing, and every later step with it,
        by the DCM error the stance foot cannot absorb; when that move is out
        of reach, shortens the swing (step timing) to where the least of it is
        left; re-plans the swing from its current state and moves the planned
        DCM by the part the new footholds explain (CoM velocity jump, CoM
        position and ZMP unchanged).  With ``max_swing_acc`` the move and the
        touchdown are what the swing foot can make within that acceleration.
        """
        cfg = self.config.step_adjustment
        sched = self._schedule
        index = sched.phase_index(t)
        phase = sched.phases[index]
        if not phase.is_single_support:
            if phase.name == "double_support" and cfg.max_lift_off_delay > 0.0:
                self._delay_lift_off(t, index, phase, measured)
            return
        k = phase.step
        step = sched.steps[k]
        t_rem = step.t_end - t
        if t_rem < cfg.min_time_to_touchdown or t < step.t_start:
            return
        w = self.omega
        xi_ref = self._x[0] + self._x[1] / w + self.disturbance_offset
        xi_m = np.asarray(measured.com[:2], dtype=float) + np.asarray(measured.com_vel[:2], dtype=float) / w
        error = xi_m - xi_ref
        p_ref = np.array(self._reference.at(t))
        polygon = self._reference.polygon_of_phase(index)
        n = float(np.linalg.norm(error))
        if n < 1e-9:
            return
        capacity = polygon.clamp(p_ref + error / n) - p_ref  # ZMP offset to the sole edge, towards the error
        move = capture_offset(error, capacity, w, t_rem)
        stance_side = phase.support[0]
        stance = phase.feet[stance_side]
        towards_stance = False
        if cfg.min_swing_duration_stance_side is not None:
            lateral = np.array([-math.sin(stance.yaw), math.cos(stance.yaw)])  # the stance sole's y axis
            # a move towards the stance foot beyond the room the landing has before the legs'
            # minimum width: the DCM goes where this swing cannot step (more than the deadband
            # only, G1's DCM error took unpushed swings and a swing-side push's rebound for these)
            room = side_sign(step.side) * float(stance.to_local(step.position[:2])[1]) - self.config.min_step_width
            towards_stance = -side_sign(step.side) * float(lateral @ move) > max(cfg.deadband, room)
            # a swing that starts with the DCM already beyond its stance foot (the step after a
            # push towards the swing foot) keeps min_swing_duration: through the ROS graph the
            # short swings then lost walk_push_lateral_0.5
            self._stance_side_at_lift_off.setdefault(k, towards_stance)
        if float(np.linalg.norm(move)) < cfg.deadband:
            return
        planned = self._planned_landing.setdefault(k, step.pose)
        length_limit = self.config.step_reach
        max_adjustment = cfg.max_adjustment
        if self._recovering:  # steps planned in place: the move itself may be a whole step
            max_adjustment = max(max_adjustment, length_limit)

        swing = self._swing.get(k)
        if swing is None:
            swing = SwingTrajectory(phase.feet[step.side], step.pose, step.t_start, step.t_end, self.config.step_height)
        foot = swing(t) if cfg.max_swing_acc is not None else None
        base = swing.base if isinstance(swing, ReplannedSwing) else swing

        def landing(m, T_c):
            target = step.position[:2] + m
            aim = target
            if foot is not None:  # no farther than the foot can get to by T_c
                # a retimed swing's height is re-planned too
                retimed = T_c < t_rem or getattr(swing, "retimed", False)
                height = retimed_height(foot, base, t, t + T_c) if retimed else None
                lam = swing_reach(foot, step.position[:2], target, T_c, cfg.max_swing_acc, height)
                if lam is None and retimed:
                    return None, math.inf
                aim = step.position[:2] + (lam or 0.0) * m  # None: the swing as it is, no farther
            pose = clamp_landing(self.footsteps, step.side, stance, planned, aim, max_adjustment, length_limit)
            if pose is not None:
                pose = self._on_levels(sched.steps, k, pose)
            return pose, (math.inf if pose is None else float(np.linalg.norm(target - pose.position[:2])))

        pose, left_out = landing(move, t_rem)
        T = t_rem
        min_swing = cfg.min_swing_duration
        if cfg.min_swing_duration_stance_side is not None:
            if towards_stance and not self._stance_side_at_lift_off[k]:  # pushed towards it in this swing
                self._stance_side_steps.update((k, k + 1))  # this swing and the stance leg's step out after it
            if k in self._stance_side_steps:
                min_swing = cfg.min_swing_duration_stance_side
        t_min = max(cfg.min_time_to_touchdown, step.t_start + min_swing - t)
        if cfg.timing and left_out > cfg.deadband and t_min < t_rem - 0.01:
            # step timing: the remaining swing time that leaves the least of the move out of reach
            cost = left_out
            for T_c in np.linspace(t_min, t_rem, 8)[:-1]:
                pose_c, out_c = landing(capture_offset(error, capacity, w, T_c), T_c)
                cost_c = out_c + cfg.timing_cost * (t_rem - T_c)
                if cost_c < cost - 1e-3:
                    pose, T, cost = pose_c, float(T_c), cost_c
        if pose is None:
            return
        shift = pose.position[:2] - step.position[:2]
        if float(np.linalg.norm(shift)) < 1e-4 and T == t_rem:
            return
        # the swing foot: re-planned from its current state (C2) to the new landing
        # this and every later step move together; the plan follows the new footholds
        steps = list(sched.steps)
        for j in range(k, len(steps)):
            p = steps[j].pose
            steps[j] = steps[j].moved(FootPose(np.array([*(p.position[:2] + shift), p.position[2]]), p.yaw))
        nominal = [n + shift if j >= k else n for j, n in enumerate(self._nominal)]
        durations = list(sched.swing_durations)
        if T != t_rem:
            durations[k] = t + T - step.t_start
        new = sched.replaced(steps=steps, swing_durations=tuple(durations))
        replanned = ReplannedSwing(swing, t, pose.position[:2], new.steps[k].t_end)
        self._set_schedule(new, nominal)
        self._swing = {k: replanned}
        self._planned_landing = {k: planned}
        self._x[1] += w * math.exp(-w * T) * shift

    @property
    def landing_targets(self) -> dict[int, np.ndarray]:
        """Footsteps (xy) [m] of the steps whose landing re-anchored the plan, by step index:
        where they were aimed (the schedule now has where they landed)."""
        return dict(self._aimed)

    def _anchor_touchdown(self, t: float, measured: MeasuredState) -> None:
        """Re-anchor the plan on a measured foothold, at the planner grid time ``t`` [s].

        ``anchor_delay`` after a touchdown, in the double support that follows it:
        when the landed sole (``measured.feet``) is more than ``anchor_tolerance``
        from its footstep, that footstep and every later one move by the
        difference (xy), so that the ZMP reference and the support polygon the DCM
        feedback clamps to are those of the sole on the ground.  A swing foot
        that lands off its footstep (a swing the whole-body controller could not
        track after a push) otherwise leaves the walker commanding a ZMP at the
        planned sole's edge that the real sole cannot make: the DCM drifts by
        the difference.  Once per step; the footstep it was aimed at stays in
        :attr:`landing_targets`.
        """
        cfg = self.config.step_adjustment
        if cfg.anchor_tolerance is None or measured.feet is None:
            return
        sched = self._schedule
        phase = sched.phases[sched.phase_index(t)]
        if phase.is_single_support or phase.step is None:
            return
        k = phase.step
        if k in self._aimed or not 0 <= k < len(sched.steps):
            return
        step = sched.steps[k]
        if not step.t_end + cfg.anchor_delay <= t:
            return
        foot = measured.feet.get(step.side) if hasattr(measured.feet, "get") else None
        if foot is None or not np.all(np.isfinite(np.asarray(foot, dtype=float)[:2])):
            return
        delta = np.asarray(foot, dtype=float)[:2] - step.position[:2]
        if float(np.linalg.norm(delta)) <= cfg.anchor_tolerance:
            return
        self._aimed[k] = step.position[:2].copy()
        steps = list(sched.steps)
        end = len(steps)
        for j in range(k, len(steps)):
            if j > k and not self._levels_kept(steps, j, delta, 1):
                end = j  # on terrain: this step and the later ones stay off the height change
                break
            p = steps[j].pose
            steps[j] = steps[j].moved(FootPose(np.array([*(p.position[:2] + delta), p.position[2]]), p.yaw))
        nominal = [n + delta if k <= j < end else n for j, n in enumerate(self._nominal)]
        self._set_schedule(
            sched.replaced(steps=steps),
            nominal,
        )

    def _levels_kept(self, steps, k: int, shift, count: int = 3) -> bool:
        """Whether ``steps[k:k + count]`` moved by ``shift`` (2,) [m] keep ``edge_margin`` from a
        height change of the terrain where they did (always on flat ground)."""
        planner = self.footsteps
        if planner.ground_height is None:
            return True
        margin = self.config.edge_margin
        for step in steps[k : k + count]:
            p = step.pose
            z = float(p.position[2])
            if planner.level(step.side, p, margin) is None:
                continue  # not off an edge before the move either
            moved = FootPose(np.array([*(p.position[:2] + shift), z]), p.yaw)
            level = planner.level(step.side, moved, margin)
            if level is None or abs(level - z) > 1e-3:
                return False
        return True

    def _on_levels(self, steps, k: int, pose: FootPose) -> FootPose:
        """``pose``, the adjusted landing of ``steps[k]``, moved back towards the step's footstep
        until the step and the two after it, moved with it, keep off the terrain's height changes."""
        if self._levels_kept(steps, k, pose.position[:2] - steps[k].position[:2]):
            return pose  # (always on flat ground)
        base = steps[k].position[:2]
        full = pose.position[:2] - base
        for f in (0.75, 0.5, 0.25):
            if self._levels_kept(steps, k, f * full):
                return FootPose(np.array([*(base + f * full), pose.position[2]]), pose.yaw)
        return FootPose(np.array([*base, pose.position[2]]), pose.yaw)

    def _delay_lift_off(self, t: float, index: int, phase, measured: MeasuredState) -> None:
        """Lengthen the double support ``phase`` (index ``index``) while the next step,
        lifting off now, could not catch the DCM.

        Within ``lift_off_notice`` of the next lift-off, at the planner grid time ``t`` [s]: the
        landing move the capture-point rule would ask of that step with the
        shortest swing (``min_swing_duration``) and its stance sole's ZMP
        (:func:`~zmp_walker.step_adjust.capture_offset`); when part of it is
        out of reach (step length and width limits, ``max_adjustment``, no
        crossing of the legs) and the double support's ZMP polygon reaches
        beyond the measured DCM in the direction of the unreachable part (its
        ZMP can still bring the DCM back), the lift-off moves to
        ``lift_off_notice`` [s] after ``t`` (every later step with it), up to
        ``max_lift_off_delay`` [s] in all: a controller that releases a contact
        before the lift-off never sees a lift-off that does not come.

        The case: a lateral push towards the foot about to lift off (G1 pushed
        at the end of a swing towards its stance foot).  Lifting it leaves the
        DCM outside the other sole, diverging faster than any step within the
        limits can catch; waiting, the double support's ZMP brings it back.
        """
        cfg = self.config.step_adjustment
        sched = self._schedule
        k = phase.step + 1
        notice = cfg.lift_off_notice
        if k >= len(sched.steps) or sched.steps[k].t_start > t + notice + 1e-9:
            return
        wait = min(t + notice - sched.steps[k].t_start, cfg.max_lift_off_delay - sched.lift_off_delays[k])
        if wait < 1e-6:
            return
        step = sched.steps[k]
        w = self.omega
        xi_m = np.asarray(measured.com[:2], dtype=float) + np.asarray(measured.com_vel[:2], dtype=float) / w
        error = xi_m - (self._x[0] + self._x[1] / w + self.disturbance_offset)
        n = float(np.linalg.norm(error))
        if n < 1e-9:
            return
        p_ref = np.array(self._reference.at(step.t_start))
        capacity = self._reference.polygon_of_phase(index + 1).clamp(p_ref + error / n) - p_ref
        move = capture_offset(error, capacity, w, cfg.min_swing_duration)
        if float(np.linalg.norm(move)) < cfg.deadband:
            return
        stance = sched.feet_before[k][other_side(step.side)]
        target = step.position[:2] + move
        limit = self.config.step_reach
        pose = clamp_landing(self.footsteps, step.side, stance, step.pose, target, cfg.max_adjustment, limit)
        if pose is None:
            out = move  # no landing at all (collision): the whole move is out of reach
        else:
            out = target - pose.position[:2]
        n_out = float(np.linalg.norm(out))
        if n_out <= cfg.deadband:
            return
        # the double support's ZMP can bring the DCM back along the unreachable part only
        # where its polygon reaches beyond the DCM that way (not a DCM ahead of the front toes)
        reach = float(np.max(self._reference.polygon_of_phase(index).vertices.dot(out / n_out) - xi_m.dot(out / n_out)))
        if reach < cfg.deadband:
            return
        delays = list(sched.lift_off_delays)
        delays[k] += wait
        self._set_schedule(sched.replaced(lift_off_delays=delays))

    # -- the tick -------------------------------------------------------------

    def cycle(self, t: float, measured: MeasuredState | None = None) -> WalkerReference:
        """Reference at time ``t`` [s] (non-decreasing between calls).

        Args:
            t: generator clock [s].
            measured: estimated CoM state for the DCM feedback, or None.
        """
        if self._t_plan is None:
            self._t_plan = float(t)
        elif t < self._t - 1e-9:
            raise PlanningError(f"time went backwards: {t} < {self._t}")
        self._t = float(t)
        self._measured = measured
        if self._frozen is not None:
            return dataclasses.replace(self._frozen, time=float(t))
        if measured is not None and self._pending is None and self.config.recovery_step.enabled:
            side = self._recovery_side(t, measured)
            if side is not None:
                self._pending = ("recover", side)
        if self._pending is not None:
            self._advance(t)
            self._apply(self._t_plan)
            self._plan_jerk()
        self._advance(t)
        # exact constant-jerk interpolation from the last planner grid point (plain floats: fast)
        tau = t - self._t_plan
        x, u = self._x, self._jerk
        h2, h3 = tau * tau / 2.0, tau * tau * tau / 6.0
        cx = x[0, 0] + x[1, 0] * tau + x[2, 0] * h2 + u[0] * h3
        cy = x[0, 1] + x[1, 1] * tau + x[2, 1] * h2 + u[1] * h3
        vx = x[1, 0] + x[2, 0] * tau + u[0] * h2
        vy = x[1, 1] + x[2, 1] * tau + u[1] * h2
        ax = x[2, 0] + u[0] * tau
        ay = x[2, 1] + u[1] * tau
        sched = self._schedule
        index = sched.phase_index(t)
        phase = sched.phases[index]
        w = self.omega
        ground, vz, az = sched.support_height(t)  # the CoM height follows the support (terrain)
        if measured is not None and measured.gravity is not None:
            if self.config.slope_reach is not None:
                self._normal_height = slope_height(measured.gravity, self.com_height, self.config.slope_reach)
            self._slope_shift = slope_shift(measured.gravity, self._normal_height)
        if measured is not None and self.observer is not None:
            c_m = np.asarray(measured.com, dtype=float)
            xi_m = c_m[:2] + np.asarray(measured.com_vel[:2], dtype=float) / w
            applied = self._zmp_applied if self._zmp_applied is not None else xi_m
            self.observer.update(t, xi_m, applied, -w * self._slope_shift)
        off = self.disturbance_offset
        cx, cy = cx + off[0], cy + off[1]
        com_pos = np.array([cx, cy, ground + self._normal_height])
        com_vel = np.array([vx, vy, vz])
        com_acc = np.array([ax, ay, az])
        px, py = self._reference.at(t)
        zmp_ref = np.array([px, py, ground])
        dcm_ref = np.array([cx + vx / w, cy + vy / w, ground + self._normal_height + vz / w])
        if measured is not None:
            c_m = np.asarray(measured.com, dtype=float)
            xi_m = c_m + np.asarray(measured.com_vel, dtype=float) / w
            p_cmd = self.feedback.zmp(zmp_ref, dcm_ref, xi_m, self._reference.polygon_of_phase(index))
            zmp_cmd = np.array([p_cmd[0], p_cmd[1], ground])
            com_acc = self.feedback.com_acc(c_m, p_cmd)
            com_acc[2] = az
            self._zmp_applied = p_cmd
        else:
            zmp_cmd = zmp_ref
            self._zmp_applied = None
        feet = {"left": self._foot_ref("left", phase, index, t), "right": self._foot_ref("right", phase, index, t)}
        self._last = WalkerReference(
            time=float(t),
            phase=phase.name,
            com_pos=com_pos,
            com_vel=com_vel,
            com_acc=com_acc,
            feet=feet,
            zmp_ref=zmp_ref,
            zmp_cmd=zmp_cmd,
            dcm_ref=dcm_ref,
            upcoming_footsteps=self._upcoming(t),
            omega=w,
        )
        return self._last

    def _recovery_side(self, t: float, measured: MeasuredState) -> Side | None:
        """Standing with the measured DCM (less the slope lean) beyond the soles' hull by more
        than ``recovery_step.threshold``: the foot nearer to it (it steps); else None."""
        phase = self._schedule.phase_at(t)
        if phase.name != "standing" or not self.config.step_adjustment.enabled:
            return None
        c, v = np.asarray(measured.com, dtype=float), np.asarray(measured.com_vel, dtype=float)
        xi = c[:2] + v[:2] / self.omega - self._slope_shift
        if not np.all(np.isfinite(xi)):
            return None
        feet = phase.feet
        hull = support_polygon([feet["left"], feet["right"]], [self.soles["left"], self.soles["right"]])
        if not hull.signed_distance(xi) > self.config.recovery_step.threshold:
            return None
        gap = {s: float(np.linalg.norm(sole_center(feet[s], self.soles[s]) - xi)) for s in ("left", "right")}
        return min(gap, key=gap.get)

    def _upcoming(self, t: float) -> tuple:
        """Steps not landed at ``t`` (cached per schedule and landed count)."""
        steps = self._schedule.steps
        n = bisect.bisect_right(self._touchdowns, t)
        if self._upcoming_cache[0] != n:
            self._upcoming_cache = (n, steps[n:])
        return self._upcoming_cache[1]

    def _foot_ref(self, side: Side, phase, index: int, t: float) -> FootRef:
        if phase.is_single_support and side not in phase.support:
            k = phase.step
            swing = self._swing.get(k)
            if swing is None:
                step = self._schedule.steps[k]
                swing = SwingTrajectory(phase.feet[side], step.pose, step.t_start, step.t_end, self.config.step_height)
                self._swing = {k: swing}
            s = swing(t)
            R = np.array(
                [[math.cos(s.yaw), -math.sin(s.yaw), 0.0], [math.sin(s.yaw), math.cos(s.yaw), 0.0], [0.0, 0.0, 1.0]]
            )
            return FootRef(
                s.pos, R, s.vel, np.array([0.0, 0.0, s.yaw_rate]), s.acc, np.array([0.0, 0.0, s.yaw_acc]), False
            )
        key = (index, side)
        ref = self._stance_refs.get(key)
        if ref is None:
            pose = phase.feet[side]
            ref = FootRef(pose.position, _frozen(pose.rotation), _ZERO3, _ZERO3, _ZERO3, _ZERO3, True)
            self._stance_refs[key] = ref
        return ref

    @property
    def disturbance_offset(self) -> np.ndarray:
        """Shift (2,) [m] of the DCM and CoM references: the lean against a measured gravity
        tilt (:func:`slope_shift`) plus the disturbance observer's estimate of the rest."""
        if self.observer is None:
            return self._slope_shift.copy()
        return self.observer.offset + self._slope_shift

    def support_center(self) -> np.ndarray:
        """Midpoint of the current sole centres (xy) [m]."""
        feet = self._schedule.phase_at(self._t).feet
        return 0.5 * (sole_center(feet["left"], self.soles["left"]) + sole_center(feet["right"], self.soles["right"]))
