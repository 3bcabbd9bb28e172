"""The control stage: one tick of what runs next to the robot, with no I/O.

``ControlStage.cycle(observation, reference) -> Command`` holds everything
between a measured state and the joint torques sent to the robot:

* the safety :class:`Supervisor` (arming, e-stop and fall latch, finiteness and
  joint-name checks, the stale-state watchdog; one latch, one check, one clip);
* base estimation (optional: :class:`~whole_body_control.estimation.LegOdometry`
  on the IMU and the leg kinematics, contacts from the foot force sensors when
  there are any, else from the walking reference's contact schedule);
* lift detection and the airborne posture hold (foot force sensors only);
* the :class:`~whole_body_control.controller.WholeBodyController`, solving every
  control period or, with ``solve_every = N > 1``, every N-th one (multi-rate, below).

Multi-rate (``StageConfig.solve_every``): the whole-body QP runs on every N-th
state and its solution is a short plan (torques ``tau_k``, joint accelerations
``a_k`` at the state ``q_k, v_k``).  Every control period answers at once from
the newest plan: ``tau = tau_k + Kp (q_k + v_k s + a_k s^2 / 2 - q) + Kd (v_k +
a_k s - v)`` (joints, ``s`` the time since the plan's state, ``Kp = m w^2``,
``Kd = 2 m w`` with ``m`` the joint's diagonal inertia and ``w =
hold_bandwidth``), then the QP of a solve state runs (:meth:`ControlStage.finish`,
or at the start of the next cycle): a plan computed on state k applies from
state k + 1 to k + N.  The supervisor's checks and the lift detector run on every
state (the detector's debounce wants the condition uninterrupted: fed the solves'
states alone, one in four, it missed a foot loaded between them); a lift detected
puts the controller in its airborne mode at the next solve.  What the
real stacks do (a WBC at a few hundred Hz under a faster joint loop): the command
of a state does not wait for a solve.  In one thread (default) the run is
deterministic (lockstep).  With a worker (``solve_worker``: a second thread, or a
second process that does not share the GIL, :mod:`whole_body_control.solve_process`)
the due solve is handed over in :meth:`ControlStage.finish`, after the command went
out, and runs beside the commands of the next states: with ``solve_wait = D > 0``
the plan of state k is taken at state k + D, waiting for it if it is not finished
(reproducible to the bit: lockstep, where the solve then overlaps D round trips to
the robot); with ``D = 0`` the states take the newest finished plan and never wait
(real time: a solve longer than a control period delays no command, and a late plan
is held while the next one is on its way rather than solved at once).

A ROS node (``ros/controller_node.py``) converts messages into an
:class:`Observation` and a :class:`Command` into a message; it holds no safety
logic of its own.  Time is integer nanoseconds (message stamps), so that a
lockstep run is reproducible to the bit.

Safe state (``Command.damping``): ``tau = -kd v`` with the joint velocities that
are finite (zero for the others), ``kd`` the robot's ``safe_damping`` for the
control period (stable on the light joints), clipped to the torque limits:
never a non-finite value, never the last torque held.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin

from whole_body_control.config import WbcConfig
from whole_body_control.controller import WholeBodyController
from whole_body_control.errors import StateError, WbcError
from whole_body_control.estimation import SIDES, LegOdometry
from whole_body_control.lift import LiftDetector
from whole_body_control.robot import RobotModel
from whole_body_control.walker_stage import walker_to_reference
from zmp_walker import WalkerReference


@dataclass
class Observation:
    """What the robot measured at ``stamp_ns`` (robot joint order, SI).

    q_joints, v_joints: joint positions [rad] and velocities [rad/s]; NaN for a
        joint in ``missing``.
    missing: names of the robot's joints absent from the joint-state message.
    imu: ``(orientation xyzw (world <- base), gyro [rad/s] (base), specific force
        [m/s^2] (base))`` or None when no IMU sample has arrived.
    base: ``(q_base (7,), v_base (6,))`` in Pinocchio's convention from an
        external source (ground truth, an estimator node), or None.
    wrenches: ``{side: [f, tau]}`` of the foot force sensors [N, N m] (sole
        frame), or None for a robot without them.
    """

    stamp_ns: int
    q_joints: np.ndarray
    v_joints: np.ndarray
    missing: tuple[str, ...] = ()
    imu: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    base: tuple[np.ndarray, np.ndarray] | None = None
    wrenches: dict[str, np.ndarray] | None = None


@dataclass(frozen=True)
class Command:
    """Joint torques [N m] (robot order) answering the state of ``stamp_ns``.

    ``damping``: the safe state (``-kd v``); ``status`` is the controller's
    status or ``"damping"``; ``reason`` says why it is not ``"ok"``."""

    stamp_ns: int
    tau: np.ndarray
    damping: bool
    status: str
    reason: str


SOLVE_WORKERS = ("none", "thread", "process")

# [ns] the oldest plan a real-time stage holds while its successor is late (then damping).
# At 35 ms (four expiries at 1 kHz) G1 walking on the loaded 2-core machine was damped and
# re-armed seven times in 2 s and fell; solves come back within a few ms otherwise
LATE_PLAN_LIMIT_NS = 100_000_000

# [ns] the longest outage (damped, e.g. for a late walking reference) after which the
# controller resumes as it was rather than re-seeded; at least 20 periods.  A re-seed stands
# the robot on both feet (a foot in the air is taken as in contact, then released over the
# transition time): at 20 periods (20 ms at 1 kHz) G1 walking was re-seeded after damping
# 21 ms for a walker starved of CPU and fell 85 ms later (it walked on after 14 ms)
RESUME_LIMIT_NS = 100_000_000

# what ControlStage.cycle takes as the walking reference: the reference, a function that
# samples it (called only when a solve uses it), or None (the controller's own, standing)
Reference = WalkerReference | Callable[[], WalkerReference] | None


def _sampled(reference: Reference) -> WalkerReference | None:
    return reference() if callable(reference) else reference


@dataclass
class StageConfig:
    """Settings of the stage (SI units).

    period: control period [s].
    stale_periods: a state older than this many periods is stale (watchdog).
    max_tilt: base tilt from upright [rad] above which the robot has fallen (latched),
        unless both soles are still flat (within :data:`FLAT_SOLE_TILT`) and the base
        tilt is below :data:`BENT_MAX_TILT`: the hip strategy bends the pelvis further
        (G1 1.01 rad, Talos 0.80 at a 0.35 m/s forward push while standing).
    fixed_dt: use ``period`` as the controller's time step (lockstep: reproducible
        to the bit) instead of the difference of the state stamps.
    estimator: run :class:`LegOdometry` in the stage (True) or take the base
        state from the observation (False).
    contact_force: normal force [N] above which a foot with a force sensor is in contact.
    estimator_noise: (position [m], velocity [m/s], acceleration [m/s^2]) std devs.
    com_mode: ``"reference"`` or ``"dcm"`` (see :func:`walker_to_reference`).
    lift_detection: detect a lifted robot from the foot force sensors and hold the posture.
    solve_every: the QP runs on every N-th state (1: every state; see the module docstring).
    hold_bandwidth: [rad/s] joint feedback between solves toward the plan's motion (0: the
        plan's torques alone).
    solve_worker: where the solves run when ``solve_every > 1``: ``"none"`` (the caller's
        thread, in :meth:`ControlStage.finish`), ``"thread"`` (a second thread) or
        ``"process"`` (a second process, see :mod:`whole_body_control.solve_process`).
    solve_wait: with a worker: a plan is taken this many states after the state it
        solved, waiting for it (reproducible); 0: the newest finished plan, no wait.
    """

    period: float = 0.001
    stale_periods: int = 3
    max_tilt: float = 0.8
    fixed_dt: bool = False
    estimator: bool = False
    contact_force: float = 50.0
    estimator_noise: tuple[float, float, float] = (1.0e-3, 2.0e-2, 0.5)
    com_mode: str = "reference"
    lift_detection: bool = True
    solve_every: int = 1
    hold_bandwidth: float = 0.0
    solve_worker: str = "none"
    solve_wait: int = 0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.period) and self.period > 0):
            raise WbcError(f"control period must be finite and > 0 [s], got {self.period}")
        if int(self.stale_periods) != self.stale_periods or self.stale_periods < 1:
            raise WbcError(f"stale_periods must be an integer >= 1, got {self.stale_periods}")
        if int(self.solve_every) != self.solve_every or self.solve_every < 1:
            raise WbcError(f"solve_every must be an integer >= 1, got {self.solve_every}")
        if int(self.solve_wait) != self.solve_wait or not 0 <= self.solve_wait <= self.solve_every:
            raise WbcError(f"solve_wait must be an integer in [0, solve_every], got {self.solve_wait}")
        if not (math.isfinite(self.hold_bandwidth) and self.hold_bandwidth >= 0):
            raise WbcError(f"hold_bandwidth must be finite and >= 0 [rad/s], got {self.hold_bandwidth}")
        if self.solve_worker not in SOLVE_WORKERS:
            raise WbcError(f"solve_worker must be one of {SOLVE_WORKERS}, got {self.solve_worker!r}")


@dataclass
class Supervisor:
    """The one safety state machine of the stack (no I/O).

    ``armed``: the controller runs; it arms at the first usable state after any
    non-latched cause has cleared.  ``latched``: a fall or an e-stop; damping
    until :meth:`rearm`.  ``reason``: why the robot is not controlled now
    ("" when armed).  ``last_state_ns``: the receive time of the newest state on
    the caller's clock, for :meth:`stale`.
    """

    period_ns: int
    stale_periods: int
    armed: bool = False
    latched: str | None = None
    estop: bool = False
    reason: str = "waiting for the first state"
    last_state_ns: int | None = None
    events: list[str] = field(default_factory=list)

    def press(self, pressed: bool) -> None:
        if pressed and not self.estop:
            self._latch("e-stop")
        self.estop = bool(pressed)

    def rearm(self) -> str:
        """Leave a latch; returns "" or why not."""
        if self.estop:
            return "re-arm refused: the e-stop is still pressed"
        if self.latched is not None:
            self.events.append(f"re-armed (was: {self.latched})")
        self.latched = None
        self.armed = False
        return ""

    def _latch(self, reason: str) -> None:
        if self.latched is None:
            self.latched = reason
            self.events.append(f"latched: {reason}")

    def fall(self, reason: str) -> None:
        self._latch(f"fall: {reason}")

    def received(self, now_ns: int) -> None:
        self.last_state_ns = now_ns

    def stale(self, now_ns: int) -> str | None:
        """Why the newest state is too old at ``now_ns`` (caller's clock), or None.

        Stale once no state came for ``stale_periods - 1/2`` periods: the next
        check (every half period or faster) then damps within ``stale_periods``."""
        if self.last_state_ns is None:
            return None
        age = now_ns - self.last_state_ns
        if age >= (self.stale_periods - 0.5) * self.period_ns:
            return f"stale state: none for {age * 1e-6:.1f} ms (limit {self.stale_periods} periods)"
        return None

    def refuse(self, reason: str) -> None:
        """The state cannot be used: damping, disarmed."""
        if self.armed:
            self.events.append(f"damping: {reason}")
        self.armed = False
        self.reason = reason


# The tilt rule's exception: a pelvis tilted beyond max_tilt over soles still flat is bent
# over, not fallen.  Standing pushed forward by 0.35 m/s, the hip strategy pitched G1's pelvis
# to 1.01 rad and Talos's to 0.80 rad (both recovered in-process); the latch at max_tilt (0.8
# in config/ros/sim.yaml, 0.6 on hardware) damped them, and G1 fell through the graph.  A
# humanoid that falls turns about a sole edge, and that sole turns with it.
FLAT_SOLE_TILT = 0.35  # [rad] sole tilt from the horizontal still taken as flat
BENT_MAX_TILT = 1.3  # [rad] base tilt taken as a fall whatever the soles


def non_finite(name: str, values: np.ndarray, labels=None) -> str | None:
    """``"non-finite <name> of <label>"`` for the first non-finite entry, or None."""
    bad = ~np.isfinite(values)
    if not bad.any():
        return None
    i = int(np.flatnonzero(bad)[0])
    where = f" of {labels[i]}" if labels is not None and i < len(labels) else f" [{i}]"
    return f"non-finite {name}{where}"


ARMING = "arming: the first solve is running"  # (real time, a solve process) the damping meanwhile


class ControlStage:
    """See the module docstring.

    Args:
        robot: the robot model.
        wbc_config: the controller's configuration (None: ``config/wbc.yaml``).
        config: :class:`StageConfig`.
        controller: the controller to run (default: one built from ``wbc_config``); not
            with a solve process, which builds its own from ``wbc_config``.
    """

    def __init__(
        self,
        robot: RobotModel,
        wbc_config: WbcConfig | None = None,
        config: StageConfig | None = None,
        controller: WholeBodyController | None = None,
    ):
        self.robot = robot
        self.config = config or StageConfig()
        if controller is not None and self.config.solve_every > 1 and self.config.solve_worker == "process":
            raise WbcError("a solve process builds its own controller from wbc_config: pass no controller")
        self.ctrl = controller if controller is not None else WholeBodyController(robot, wbc_config)
        self.period_ns = int(round(self.config.period * 1e9))
        self.supervisor = Supervisor(self.period_ns, self.config.stale_periods)
        self.estimator = self._new_estimator() if self.config.estimator else None
        self.lift = LiftDetector.for_robot(robot)
        self._fk_data = robot.model.createData()  # the soles' attitude of the tilt rule
        self._fk_q = robot.q_ref.copy()
        self.last_v = np.zeros(robot.nv)
        self.last_ctrl_ns: int | None = None
        self.last_stamp_ns: int | None = None
        self.last_result = None
        self.lifted = False
        self._contact_expected = True  # the controller has a foot in contact (after its last solve)
        self.base_estimate: tuple[np.ndarray, np.ndarray] | None = None
        self.needs_reset = True  # the controller is seeded at the next usable state
        self._reseeds = 0  # times the controller was seeded (arming after a reset or a long outage)
        self.resume_ns = max(20 * self.period_ns, RESUME_LIMIT_NS)  # a shorter outage resumes without re-seeding
        self._plan: _Plan | None = None  # multi-rate: the newest solution
        self._pending: tuple[Observation, Reference] | None = None  # a solve that is due
        # a plan solved on state k is renewed at state k + solve_every (half a period of slack)
        self._solve_after_ns = (self.config.solve_every - 0.5) * self.period_ns
        self._plan_expires_ns = (2 * self.config.solve_every + 0.5) * self.period_ns  # then solved at once
        # ... unless (real time: solve_wait 0, a worker) it is held while the next solve runs:
        # the command loop never waits for one (the robot would hold the last command
        # meanwhile, unsupervised), up to this age; then damping until the worker answers
        self._plan_limit_ns = max(4 * self._plan_expires_ns, LATE_PLAN_LIMIT_NS)
        self.late_plans = 0  # states answered from a plan past _plan_expires_ns (real time)
        self._generation = 0  # a damping or reset makes a plan in flight obsolete
        kind = self.config.solve_worker if self.config.solve_every > 1 else "none"
        self._worker = None
        self._time_reset = False  # (process) the next job tells the worker's stage
        self._arming = False  # (real time, process) a foreground solve is in the worker
        if kind == "thread":
            self._worker = _SolveThread(self._solve)
        elif kind == "process":
            from whole_body_control.solve_process import SolveProcess

            self._worker = SolveProcess(robot, wbc_config, self.config, self._sync, self._absorb)
        self._outage = False  # damped for a stale state, the plan kept (see _damping)
        self._submitted_ns: int | None = None  # the state of the solve in the thread
        self._solved: tuple[int, _Plan] | None = None  # (generation, plan) it produced

    def _new_estimator(self) -> LegOdometry:
        p, v, a = self.config.estimator_noise
        return LegOdometry(self.robot, p, v, a)

    # -- the tick -------------------------------------------------------------------------------

    def _damping(self, stamp_ns: int, reason: str, outage: bool = False) -> Command:
        """Damping, disarmed.  ``outage``: no new state came (the watchdog), or no walking
        reference (the walker is late): where plans are held (:meth:`_holds_plans`) the plan
        and a solve in flight are kept, so that states back within the plan's limit resume
        from it (:meth:`_resume`); any other cause, or mode, drops them."""
        self.supervisor.refuse(reason)
        plan = self._plan
        self._outage = outage and self._holds_plans() and plan is not None and not plan.damping
        if not self._outage:
            self._generation += 1
            self._plan = None
            if self._pending is not None:
                self._pending = None
                if self._worker is not None:
                    self._submitted_ns = None  # it was due, never sent
        tau = self.ctrl.damping_torques(self.last_v, self.config.period)
        return Command(stamp_ns, self._clip(tau), True, "damping", reason)

    def _clip(self, tau: np.ndarray) -> np.ndarray:
        """The one clip: finite (non-finite -> 0) and inside the torque limits."""
        tau = np.asarray(tau, dtype=float)
        if not np.isfinite(tau).all():  # one test for the usual case
            tau = np.nan_to_num(tau, nan=0.0, posinf=0.0, neginf=0.0)
        tau_max = self.robot.tau_max
        return np.minimum(np.maximum(tau, -tau_max), tau_max)

    def cycle(self, obs: Observation, reference: Reference = None, reference_missing: str = "") -> Command:
        """Torques for the state ``obs``.

        ``reference``: the walker's reference at ``obs.stamp_ns`` (None: the
        controller keeps its own, standing), or a function without arguments that
        returns it: called only when a solve uses this state, after the command
        (sampling a trajectory costs 30 us in the 1 kHz node, and three states in
        four are answered from the plan); ``reference_missing``: non-empty
        when a walking reference is expected but none covers this stamp (the
        stage damps with that reason).  With ``solve_every > 1`` a solve this
        state is due for runs in :meth:`finish` (or at the next cycle)."""
        if self._pending is not None:
            self.finish()  # the caller did not
        worker = self._worker
        if worker is not None and worker.error is not None:
            error, worker.error = worker.error, None
            return self._damping(obs.stamp_ns, f"solve failed: {error!r}")
        ns = obs.stamp_ns
        if self.last_stamp_ns is not None and ns < self.last_stamp_ns:
            self.reset_time()  # time went backwards (the robot or simulation was reset)
        self.last_stamp_ns = ns
        vj = obs.v_joints
        self.last_v[6:] = np.where(np.isfinite(vj), vj, 0.0)
        self.last_v[:6] = 0.0
        why = self._unusable(obs, reference_missing)
        if why:
            # a late walker is an outage like a stale state: the plan is kept, and held again
            # when the reference is back (else re-armed by a solve that waited up to 260 ms
            # for a CPU on the loaded 2-core machine, damped meanwhile, and G1 fell)
            return self._damping(ns, why, outage=why == reference_missing)
        if self.config.lift_detection and obs.wrenches is not None and not self.lifted:
            self._detect_lift(obs)
        if self._submitted_ns is not None:
            self._take_solved(ns)
        if self._outage:
            self._resume(ns)
        plan = self._plan
        if plan is not None and ns - plan.stamp_ns > self._plan_expires_ns and self._late(ns - plan.stamp_ns):
            self.late_plans += 1
        elif plan is None or not self.supervisor.armed or ns - plan.stamp_ns > self._plan_expires_ns:
            if worker is None:
                return self._solve(obs, _sampled(reference))
            real_time = self._holds_plans()  # the loop never waits for a solve in flight
            if real_time and not worker.ready():
                return self._damping(ns, "waiting for the solve process to start")
            if real_time and worker.arms_in_background:
                cmd = self._arm_in_background(obs, reference)
                if cmd is not None:
                    return cmd
                plan = self._plan  # the arming solve's, held from here on
            else:
                if real_time:
                    worker.collect()
                    if not worker.done():  # (a plan past _plan_limit_ns, its successor not back)
                        age = "" if plan is None else f": the plan is {(ns - plan.stamp_ns) * 1e-6:.1f} ms old"
                        return self._damping(ns, "the solve is late" + age)
                worker.wait()  # the controller is not shared between two solves
                self._submitted_ns = self._solved = self._pending = None
                return worker.call((obs, _sampled(reference), None))
        self.last_v[:6] = plan.v_base
        cmd = self._hold(plan, obs)
        if ns - plan.stamp_ns >= self._solve_after_ns and self._submitted_ns is None:
            self._pending = (obs, reference)  # solved (or handed to the worker) in finish()
            if worker is not None:
                self._submitted_ns = ns
        return cmd

    def _detect_lift(self, obs: Observation) -> None:
        """Feed the lift detector the soles' normal forces; once lifted, the next solve
        holds the posture (:meth:`WholeBodyController.hold_airborne`) until a re-arm."""
        t = obs.stamp_ns * 1e-9
        if self.lift.update(t, (obs.wrenches[s][2] for s in SIDES), self._contact_expected):
            self.lifted = True
            self.supervisor.events.append(f"lifted at t = {t:.3f} s: airborne posture hold")

    def _arm_in_background(self, obs: Observation, reference: Reference) -> Command | None:
        """Real time with a solve process: the solve that arms (or re-seeds, or replaces a
        plan past its limit) runs in the worker like the others, the states meanwhile are
        damped; None once its plan is in (held from this state on, as a late plan is).
        Solving it in the command loop made the arming state's command 1.4 to 4 ms late
        (the controller's reset and the process's first solve): two deadline misses at 500 Hz."""
        ns = obs.stamp_ns
        worker = self._worker
        worker.collect()  # (the arming solve's reply arms the stage: _absorb)
        if self._submitted_ns is not None:
            self._take_solved(ns)
        plan = self._plan
        if plan is not None and self.supervisor.armed and ns - plan.stamp_ns <= self._plan_limit_ns:
            return None
        if not worker.done():
            if self._arming:
                return self._damping(ns, ARMING)
            age = "" if plan is None else f": the plan is {(ns - plan.stamp_ns) * 1e-6:.1f} ms old"
            return self._damping(ns, "the solve is late" + age)  # (past _plan_limit_ns, its successor not back)
        self._submitted_ns = self._solved = self._pending = None
        worker.submit((obs, _sampled(reference), None))  # its reply arms the stage (:meth:`_absorb`)
        self._arming = True
        return self._damping(ns, ARMING)

    def _holds_plans(self) -> bool:
        """Real time with a worker: the command loop answers from a plan it holds (late, or
        kept through an outage) rather than wait for a solve."""
        return self.config.solve_wait == 0 and self._worker is not None

    def _resume(self, ns: int) -> None:
        """The first usable state after an outage (a stale state or a late walking reference;
        real time, a worker): armed again at once, holding the plan kept through the outage
        if it is within the held plans' limit; else armed by a solve as usual.  Re-arming
        through the solve process after each outage damped a few more periods (the arming
        solve, 2 to 5 ms on the loaded 2-core machine) each time the machine stalled the
        robot's states."""
        self._outage = False
        plan, sup = self._plan, self.supervisor
        if (
            plan is not None
            and sup.latched is None
            and not self.needs_reset
            and ns - plan.stamp_ns <= self._plan_limit_ns
        ):
            sup.armed, sup.reason = True, ""
            sup.events.append(
                f"resumed at t = {ns * 1e-9:.3f} s, holding the plan of {(ns - plan.stamp_ns) * 1e-6:.1f} ms ago"
            )

    def _late(self, age_ns: int) -> bool:
        """Whether a plan past its expiry is held (real time with a worker, not too old): a
        solve is on its way, or this state's goes to the worker after the command.  A plan
        that came in already expired (a solve preempted for a few periods) is held too:
        solving at once blocked the loop 4 to 6 ms (Talos, 500 Hz: 54 times in 10 s)."""
        return self._holds_plans() and age_ns <= self._plan_limit_ns and self.supervisor.armed

    def _take_solved(self, ns: int) -> None:
        """Install the second thread's plan: at ``solve_wait`` states after its state
        (waiting for it), or as soon as it is finished (``solve_wait = 0``)."""
        worker = self._worker
        if self.config.solve_wait > 0:
            if ns - self._submitted_ns < (self.config.solve_wait - 0.5) * self.period_ns:
                return
            worker.wait()
        elif not worker.done():  # (taken in after a command, by finish: unpickling one costs 60 us)
            return
        solved, self._solved, self._submitted_ns = self._solved, None, None
        if solved is not None and solved[0] == self._generation:
            self._plan = solved[1]

    def take_solve_timing(self) -> tuple[float, list[tuple[float, float]]]:
        """(A solve process) the longest solve since the last call and the slow ones, as
        the worker timed them: ``(max wall [s], [(wall, CPU) [s], ...])``."""
        worker = self._worker
        if worker is None or not hasattr(worker, "slow"):
            return 0.0, []
        timing = (worker.max_wall, worker.slow)
        worker.max_wall, worker.slow = 0.0, []
        return timing

    def worker_ready(self) -> bool:
        """Whether the solves can run (a solve process has started; never blocks)."""
        return self._worker is None or self._worker.ready()

    def finish(self) -> None:
        """After a command went out: run the solve that the last :meth:`cycle` left due, or
        hand it to the worker, and take in what the worker finished (multi-rate; no-op
        otherwise).  A node calls it after publishing, so the command waits for none of it."""
        worker = self._worker
        pending, self._pending = self._pending, None
        if pending is not None:
            pending = (pending[0], _sampled(pending[1]))
        if worker is None:
            if pending is not None:
                self._solve(*pending)
            return
        if pending is not None:
            worker.submit((*pending, self._generation))
        worker.collect()
        wait = self.config.solve_wait
        if wait > 0 and self._submitted_ns is not None and self.last_stamp_ns is not None:
            if self.last_stamp_ns + self.period_ns - self._submitted_ns >= (wait - 0.5) * self.period_ns:
                worker.wait()  # the next state takes it: wait now, not on that state's command

    def _sole_tilt(self, quat: np.ndarray, q_joints: np.ndarray) -> float:
        """The larger tilt from the horizontal [rad] of the two soles, with the base's attitude
        ``quat`` (x, y, z, w) and the joint positions (only when the base is tilted beyond
        ``max_tilt``: forward kinematics, about 30 us)."""
        model, data, q = self.robot.model, self._fk_data, self._fk_q
        q[3:7] = quat / np.linalg.norm(quat)
        q[7:] = q_joints
        pin.forwardKinematics(model, data, q)
        return max(
            _from_vertical(pin.updateFramePlacement(model, data, self.robot.foot_frame_ids[side]).rotation[2, 2])
            for side in SIDES
        )

    def _unusable(self, obs: Observation, reference_missing: str) -> str:
        """Why the state cannot be controlled ("" if it can); latches a tilt."""
        sup = self.supervisor
        names = self.robot.joint_names
        if obs.missing:
            return f"joint states lack joints {list(obs.missing)}"
        external = obs.base is not None and self.estimator is None
        if obs.imu is not None:
            # one sum over every input: finite unless one of them is not (checked one by one then)
            parts = (obs.q_joints, obs.v_joints, *obs.imu, *(obs.base if external else ()))
            all_finite = math.isfinite(np.concatenate(parts).sum())
        else:
            all_finite = False
        if not all_finite:
            why = non_finite("joint position", obs.q_joints, names) or non_finite("joint velocity", obs.v_joints, names)
            if why:
                return why
            if obs.imu is None:
                return "waiting for the IMU"
            why = non_finite("IMU", np.concatenate(obs.imu))
            if why:
                return why
        quat = obs.imu[0]
        if not float(quat.dot(quat)) > 0.25:
            return "IMU orientation is not a unit quaternion"
        tilt = _tilt(quat)
        if tilt > self.config.max_tilt and sup.latched is None:
            sole = self._sole_tilt(quat, obs.q_joints)
            if tilt > BENT_MAX_TILT or sole > FLAT_SOLE_TILT:
                sup.fall(f"IMU tilt {tilt:.2f} rad > max_tilt {self.config.max_tilt} rad (a sole at {sole:.2f} rad)")
        if sup.latched is not None:
            return sup.latched
        if reference_missing:
            return reference_missing
        if self.estimator is None and obs.base is None:
            return "waiting for the base state"
        if external and not all_finite:
            q_base, v_base = obs.base
            return non_finite("base pose", q_base) or non_finite("base velocity", v_base) or ""
        return ""

    def _solve(self, obs: Observation, reference: WalkerReference | None, generation: int | None = None) -> Command:
        """The whole-body QP on ``obs`` (a usable state); sets the plan.  ``generation``: a
        solve in the second thread (it never arms; its plan goes to ``_solved``, dropped
        by :meth:`_take_solved` when a damping or reset came in between)."""
        background = generation is not None
        sup = self.supervisor
        ns = obs.stamp_ns
        vj = obs.v_joints
        quat, gyro, accel = obs.imu
        contacts = self._contacts(obs, reference)
        if self.estimator is not None:
            dt_est = 0.0 if self.last_ctrl_ns is None else max(0.0, (ns - self.last_ctrl_ns) * 1e-9)
            p, v_world, R = self.estimator.update(dt_est, quat, gyro, accel, obs.q_joints, vj, contacts)
            q_base = np.concatenate([p, quat / np.linalg.norm(quat)])
            v_base = np.concatenate([R.T @ v_world, gyro])
            self.base_estimate = (q_base, v_base)
            why = non_finite("base pose", q_base) or non_finite("base velocity", v_base)
            if why and background:
                raise StateError(why)  # the stage damps on its own thread (worker.error)
            if why:
                return self._damping(ns, why)
        else:
            q_base, v_base = obs.base
        q = np.concatenate([q_base, obs.q_joints])
        v = np.concatenate([v_base, vj])
        if not background:
            self.last_v[:6] = v_base
        t = ns * 1e-9
        ctrl = self.ctrl
        if not sup.armed and not background:
            gap = None if self.last_ctrl_ns is None else ns - self.last_ctrl_ns
            if self.needs_reset or gap is None or gap > self.resume_ns:
                ctrl.reset(q, v, t)
                self.lift.reset()
                self.lifted = False
                self._reseeds += 1
                self.needs_reset = False
                self.last_ctrl_ns = ns
                sup.events.append(f"armed at t = {t:.3f} s")
            else:
                sup.events.append(f"resumed at t = {t:.3f} s after {gap * 1e-6:.1f} ms")
            sup.armed = True
            sup.reason = ""
        if self.last_ctrl_ns is None or ns == self.last_ctrl_ns:
            dt = self.config.period
        elif self.config.fixed_dt:
            dt = self.config.period * max(1, round((ns - self.last_ctrl_ns) / self.period_ns))
        else:
            dt = (ns - self.last_ctrl_ns) * 1e-9
        self.last_ctrl_ns = ns
        if self.lifted and not ctrl.airborne:
            ctrl.hold_airborne()
        wbc_ref = None
        if reference is not None and not self.lifted:
            st = ctrl.state
            want = {s: bool(reference.feet[s].in_contact) for s in SIDES}
            wbc_ref = walker_to_reference(reference, want, self.config.com_mode, st.com.copy(), st.vcom.copy())
        result = ctrl.cycle(q, v, dt, wbc_ref)
        self._contact_expected = any(c.active for c in ctrl.contacts.values())
        self.last_result = result
        damping = result.status == "damping"
        tau = self._clip(result.tau)
        if self.config.solve_every > 1:
            m = np.diagonal(ctrl.state.M)[6:]
            w = self.config.hold_bandwidth
            plan = _Plan(
                ns,
                obs.q_joints.copy(),
                vj.copy(),
                result.a[6:].copy(),
                tau,
                damping,
                result.status,
                result.reason,
                v_base.copy(),
                m * w * w,
                2.0 * m * w,
            )
            if background:
                self._solved = (generation, plan)
            else:
                self._plan = plan
        return Command(ns, tau, damping, result.status, result.reason)

    # -- the solve in a second process (solve_worker "process") --------------------------------

    def _sync(self) -> tuple[bool, bool, bool, bool]:
        """What the worker's stage must know before a solve: (armed, needs_reset, time
        reset, lifted)."""
        reset, self._time_reset = self._time_reset, False
        return self.supervisor.armed, self.needs_reset, reset, self.lifted

    def serve(self, obs: Observation, reference, generation: int | None, sync: tuple[bool, bool, bool, bool]):
        """(In the worker process) one solve for the caller's stage: see :meth:`_absorb`."""
        armed, needs_reset, reset, self.lifted = sync
        if reset:
            self.reset_time()
        sup = self.supervisor
        sup.armed, self.needs_reset = armed, needs_reset
        before, reseeds = self._generation, self._reseeds
        cmd = self._solve(obs, reference, generation)
        plan = self._plan if generation is None else self._solved[1]
        events = list(sup.events)
        sup.events.clear()
        return SolveReply(
            cmd,
            plan,
            generation,
            self._generation != before,
            sup.armed,
            sup.reason,
            events,
            self.needs_reset,
            self._reseeds != reseeds,
            self._contact_expected,
            self.base_estimate,
            self.last_result,
        )

    def _absorb(self, reply: SolveReply) -> Command | None:
        """(In the caller's process) the worker's solve as if it had run here: the
        foreground solve's command (arming, damping), or the background plan."""
        sup = self.supervisor
        sup.events.extend(reply.events)
        if reply.reseeded:  # the detector starts over, as in one process (a lift seen since that state too)
            self.lift.reset()
            self.lifted = False
        self._contact_expected = reply.contact_expected
        self.base_estimate = reply.base_estimate
        if reply.last_result is not None:
            self.last_result = reply.last_result
        if reply.generation is not None:
            self._solved = (reply.generation, reply.plan)
            return None
        cmd = reply.command
        self._arming = False
        if reply.refused:
            return self._damping(cmd.stamp_ns, cmd.reason)
        sup.armed, sup.reason = reply.armed, reply.reason
        self.needs_reset = reply.needs_reset
        self.last_v[:6] = reply.plan.v_base
        self._plan = reply.plan
        return cmd

    def apply(self, changes: list[tuple]) -> None:
        """Runtime changes of the controller and the settings, here and in the worker
        process: ``("weight" | "kp" | "kd", task, value)``, ``("levels", {task: level})``,
        ``("config", field, value)`` (a :class:`StageConfig` field).  A solve in flight
        finishes with the old settings (reproducible)."""
        if self._worker is not None:
            self._worker.apply(changes)
        ctrl = self.ctrl
        for change in changes:
            kind = change[0]
            if kind == "weight":
                ctrl.set_weight(change[1], float(change[2]))
            elif kind in ("kp", "kd"):
                setattr(ctrl.tasks[change[1]], kind, float(change[2]))
            elif kind == "levels":
                ctrl.move_tasks(change[1])
            elif kind == "config":
                setattr(self.config, change[1], change[2])
                if change[1] == "stale_periods":
                    self.supervisor.stale_periods = change[2]
            else:
                raise WbcError(f"unknown change {change!r}")

    def close(self) -> None:
        """End the worker process (if any); the stage is not used after this."""
        if self._worker is not None:
            self._worker.close()

    def _hold(self, plan: _Plan, obs: Observation) -> Command:
        """The command between solves: the plan's torques with joint feedback toward its motion."""
        if plan.damping:
            return Command(
                obs.stamp_ns,
                self._clip(self.ctrl.damping_torques(self.last_v, self.config.period)),
                True,
                "damping",
                plan.reason,
            )
        if not self.config.hold_bandwidth:
            return Command(obs.stamp_ns, plan.tau, False, plan.status, plan.reason)  # clipped when planned
        s = (obs.stamp_ns - plan.stamp_ns) * 1e-9
        a = plan.a
        v_pred = plan.v + a * s
        q_pred = plan.q + (plan.v + 0.5 * s * a) * s
        tau = plan.tau + plan.kp * (q_pred - obs.q_joints) + plan.kd * (v_pred - obs.v_joints)
        return Command(
            obs.stamp_ns, np.clip(tau, -self.robot.tau_max, self.robot.tau_max), False, plan.status, plan.reason
        )

    def _contacts(self, obs: Observation, reference: WalkerReference | None) -> dict[str, bool]:
        """Feet in contact for the estimator: force sensors, else the walking reference's
        schedule, else both feet (standing)."""
        if obs.wrenches is not None:
            return {s: bool(obs.wrenches[s][2] > self.config.contact_force) for s in SIDES}
        if reference is not None:
            return {s: bool(reference.feet[s].in_contact) for s in SIDES}
        return {s: True for s in SIDES}

    def fail(self, stamp_ns: int, reason: str) -> Command:
        """Damping after an internal error (the caller's tick raised)."""
        return self._damping(stamp_ns, reason)

    def watchdog(self, now_ns: int) -> Command | None:
        """Damping when the newest state is stale at ``now_ns`` (the caller's clock); None otherwise."""
        why = self.supervisor.stale(now_ns)
        if why is None or self.last_stamp_ns is None:
            return None
        return self._damping(self.last_stamp_ns, why, outage=True)

    def rearm(self) -> str:
        """Leave a latched fall or e-stop (the controller is re-seeded); "" or why not."""
        self._generation += 1
        why = self.supervisor.rearm()
        if not why:
            self.needs_reset = True
        return why

    def reset_time(self) -> None:
        """The robot's time went backwards (reset): re-arm from the next state, new estimate."""
        if self._worker is not None:
            self._worker.wait()
            self._time_reset = True  # (process) told with the next job
        self._generation += 1
        self.supervisor.armed = False
        self.supervisor.reason = "time went backwards: re-arming"
        self.needs_reset = True
        self.last_ctrl_ns = None
        if self.estimator is not None:
            self.estimator = self._new_estimator()


class _SolveThread:
    """One worker thread that runs one solve at a time (``StageConfig.solve_worker = "thread"``).

    ``submit`` hands it a job unless it is busy; ``wait`` blocks until it is idle; an
    exception of a job is kept in ``error`` for the stage (which then damps)."""

    arms_in_background = False  # the arming solve runs on the caller's thread (it writes the stage)

    def __init__(self, solve) -> None:
        self._solve = solve
        self._job = None
        self._busy = False
        self._cv = threading.Condition()
        self.error: BaseException | None = None
        threading.Thread(target=self._run, name="wbc-solve", daemon=True).start()

    def submit(self, job: tuple) -> bool:
        with self._cv:
            if self._busy:
                return False
            self._job, self._busy = job, True
            self._cv.notify_all()
            return True

    def done(self) -> bool:
        """Whether the last job has finished."""
        return not self._busy

    def ready(self) -> bool:
        return True

    def start(self) -> None:
        """Nothing to wait for: the thread runs from its creation."""

    def collect(self) -> None:
        """Nothing to take in: the thread writes its plan into the stage itself."""

    def wait(self) -> None:
        with self._cv:
            while self._busy:
                self._cv.wait()

    def call(self, job: tuple):
        """A foreground solve, on the caller's thread (the worker is idle: see ``wait``)."""
        return self._solve(*job)

    def apply(self, changes: list[tuple]) -> None:
        """The thread shares the caller's controller: the solve in flight finishes first."""
        self.wait()

    def close(self) -> None:
        """Nothing to end: the thread is a daemon waiting for a job."""

    def _run(self) -> None:
        while True:
            with self._cv:
                while self._job is None:
                    self._cv.wait()
                job = self._job
            try:
                self._solve(*job)
            except Exception as exc:  # noqa: BLE001 - reported to the stage, which damps
                self.error = exc
            finally:
                with self._cv:
                    self._job, self._busy = None, False
                    self._cv.notify_all()


@dataclass(frozen=True)
class _Plan:
    """A solve's outcome for the states until the next one (multi-rate)."""

    stamp_ns: int
    q: np.ndarray  # joint positions, velocities, accelerations at stamp_ns
    v: np.ndarray
    a: np.ndarray
    tau: np.ndarray  # clipped joint torques
    damping: bool
    status: str
    reason: str
    v_base: np.ndarray
    kp: np.ndarray  # per joint [N m / rad], [N m s / rad]
    kd: np.ndarray


@dataclass(frozen=True)
class SolveReply:
    """A worker process's solve, for :meth:`ControlStage._absorb` (``generation`` None:
    a foreground solve, whose ``command`` answers the state; else a background plan)."""

    command: Command
    plan: _Plan | None
    generation: int | None
    refused: bool  # the solve damped (a non-finite estimate)
    armed: bool
    reason: str
    events: list[str]
    needs_reset: bool
    reseeded: bool  # the solve re-seeded the controller (the lift detector starts over)
    contact_expected: bool  # the controller has a foot in contact
    base_estimate: tuple[np.ndarray, np.ndarray] | None
    last_result: object


def _tilt(quat_xyzw: np.ndarray) -> float:
    """Angle [rad] between the base z axis and the world z axis."""
    x, y, z, w = quat_xyzw.tolist()
    return _from_vertical(1.0 - 2.0 * (x * x + y * y) / (x * x + y * y + z * z + w * w))


def _from_vertical(r22: float) -> float:
    """Angle [rad] between a frame's z axis and the world z axis, from its rotation's
    entry (2, 2) (rounding kept within acos's domain)."""
    return float(math.acos(max(-1.0, min(1.0, float(r22)))))
