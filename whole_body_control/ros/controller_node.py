"""``whole_body_controller``: the :class:`~whole_body_control.control_stage.ControlStage`
behind topics, next to ros2_control.

Subscribes (every topic is a parameter, with ros2_control's defaults):
    ``joint_states_topic`` (sensor_msgs/JointState, matched by joint NAME; joints the
    robot does not have are ignored), ``imu_topic`` (sensor_msgs/Imu, default
    ``/imu_sensor_broadcaster/imu``), ``left_wrench_topic`` / ``right_wrench_topic``
    (geometry_msgs/WrenchStamped of the foot force/torque sensors; empty: the robot
    has none), ``base_state`` (nav_msgs/Odometry, only with ``estimator: external``:
    remap it to the simulator's ground truth or an estimator node),
    /walker/reference (trajectory_msgs/MultiDOFJointTrajectory, a short trajectory
    the controller samples at its own rate; see docs/ros.md), /e_stop
    (std_msgs/Bool), ~/rearm (std_msgs/Empty: leave a latched fall or e-stop).
Publishes:
    /<controller_name>/commands (std_msgs/Float64MultiArray) to a
    forward_command_controller (interface_name effort): efforts [N m] in the order of
    that controller's ``joints`` parameter, read from ``/<controller_name>`` at
    start (``read_joint_order``) and checked against this node's ``joints``; the
    layout carries ``stamp_ns=<ns>``, the stamp of the state the command answers;
    /diagnostics (diagnostic_msgs/DiagnosticArray) and ~/diagnostics (std_msgs/String,
    JSON) every ``diagnostics_period`` (wall clock), also before the controller arms.

One command per joint state, computed on arrival (the hot path: one conversion,
:meth:`ControlStage.cycle`, one publication); diagnostics and the stale-state
watchdog run on timers.  Lockstep (``reference_sync``/``base_sync`` ``exact``): a
state waits for the base state and the walking reference of its stamp; the same
state re-sent gets the same command, or damping if what it waited for never came.

Safety lives in the stage's supervisor: any state that cannot be used (missing
joint, non-finite value, no IMU, no base state, no walking reference, stale
joint states, an IMU tilt beyond ``max_tilt``, /e_stop) is answered with joint
damping, never with silence.  A wrong command joint order stops the node before
its first command, naming the joints.  A node whose clock disagrees with the
stamps of the joint states by more than ``max_clock_offset`` (a simulated robot
without ``use_sim_time``) refuses to control and says why.
"""

from __future__ import annotations

import json
import math
import sys
import time
from functools import partial

import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import WrenchStamped
from nav_msgs.msg import Odometry
from rcl_interfaces.srv import GetParameters
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Bool, Empty, Float64MultiArray, String
from trajectory_msgs.msg import MultiDOFJointTrajectory

from whole_body_control.config import wbc_config_for
from whole_body_control.control_stage import ARMING, ControlStage, Observation, StageConfig
from whole_body_control.errors import StateError, WbcError
from whole_body_control.robot import load_robot
from whole_body_control.ros import conversions as cv
from whole_body_control.ros.params import (
    INF,
    REALTIME_PRIORITY,
    STATE_BEST_EFFORT,
    LogThrottle,
    Param,
    Ring,
    declare,
    per_period,
    process_age,
    quantiles,
    result,
    spin,
)
from whole_body_control.ros.qos import COMMAND_QOS, REFERENCE_QOS, state_qos

PARAMS = [
    REALTIME_PRIORITY,
    Param("robot", "talos", "robot name (config/robots/<name>.yaml) or YAML path", read_only=True),
    Param("wbc_config", "", "WBC hierarchy YAML (empty: config/wbc.yaml with the robot's overlay)", read_only=True),
    Param("control_period", 0.001, "control period [s]", (1e-5, 0.1), read_only=True),
    Param("controller_name", "effort_controller", "commands go to /<controller_name>/commands", read_only=True),
    Param(
        "joints",
        [],
        "command joint order (empty: the forward controller's `joints`, else the robot's joints in Pinocchio order)",
        read_only=True,
    ),
    Param(
        "read_joint_order",
        True,
        "read `joints` from the forward controller's parameter service /<controller_name>/get_parameters at start",
        read_only=True,
    ),
    Param(
        "joint_order_timeout",
        1.0,
        "wait this long after the first joint state for that service [s], then use `joints`",
        (0.0, 60.0),
    ),
    Param("joint_states_topic", "/joint_states", "joint states (joint_state_broadcaster)", read_only=True),
    Param("imu_topic", "/imu_sensor_broadcaster/imu", "base IMU (imu_sensor_broadcaster)", read_only=True),
    Param("left_wrench_topic", "", "left foot force/torque sensor (empty: none)", read_only=True),
    Param("right_wrench_topic", "", "right foot force/torque sensor (empty: none)", read_only=True),
    Param(
        "estimator",
        "internal",
        "'internal': base state from the IMU and leg kinematics in this process; 'external': the base_state topic",
        read_only=True,
    ),
    Param("contact_force", 50.0, "internal estimator: normal force above which a foot is in contact [N]", (0.0, INF)),
    Param("stale_periods", 3, "joint states older than this many control periods -> damping", (1, 100000)),
    Param("reference_sync", "exact", "walking reference: 'exact' (lockstep: wait for it), 'latest' or 'none'"),
    Param("base_sync", "exact", "external base state: 'exact' (same stamp as the joint states) or 'latest'"),
    STATE_BEST_EFFORT,
    Param("base_timeout", 0.01, "base_sync latest: largest base-state age accepted [s]", (0.0, 10.0)),
    Param(
        "reference_timeout",
        0.05,
        "a late walker's last sample holds this long past the end of its trajectory, then damping [s] "
        "(at least stale_periods control periods)",
        (0.0, 1.0),
    ),
    Param(
        "solve_period",
        0.0,
        "the whole-body QP runs every solve_period [s] of state stamps (rounded to whole control periods; "
        "0: on every state); the states between are answered at once with the newest solution's torques",
        (0.0, 1.0),
        read_only=True,
    ),
    Param(
        "hold_bandwidth",
        0.0,
        "between solves: joint feedback toward the solution's motion [rad/s] (0: its torques alone)",
        (0.0, 1000.0),
        read_only=True,
    ),
    Param(
        "solve_worker",
        "none",
        "where the due QP solves run, beside the commands of the next states: 'process' (a second "
        "process, below the command loop's priority), 'thread' (it shares the GIL with the command "
        "loop), 'none' (after each command, in the command loop)",
        read_only=True,
    ),
    Param(
        "solve_wait",
        0,
        "solve_worker: take a solution this many states after the state it solved, waiting for it "
        "(lockstep: reproducible to the bit); 0: the newest finished one, never wait (real time)",
        (0, 1000),
        read_only=True,
    ),
    Param("fixed_dt", False, "use control_period as the time step (lockstep) instead of the stamp differences"),
    Param(
        "max_tilt",
        0.8,
        "IMU tilt from upright above which the robot has fallen (latched damping) [rad], unless both soles "
        "are flat (the hip strategy bends the pelvis over) and the tilt is below 1.3 rad",
        (0.0, 3.2),
    ),
    Param("com_mode", "reference", "'reference': track the planned CoM; 'dcm': the walker's DCM feedback"),
    Param(
        "watchdog_period",
        0.0,
        "period of the stale-state check on the node clock [s] (0: the control period)",
        (0.0, 1.0),
        read_only=True,
    ),
    Param(
        "max_clock_offset",
        1.0,
        "largest |node clock - joint state stamp| [s] accepted (0: no check; a simulated robot needs use_sim_time)",
        (0.0, INF),
    ),
    Param("diagnostics_period", 0.1, "period of /diagnostics and ~/diagnostics [s] (wall clock)", (1e-3, 60.0)),
]
SYNC = ("exact", "latest", "none")
TICKS = 4096  # tick durations kept for the diagnostics' percentiles
ORDER_RETRY_S = 1.0  # [s] a request for the forward controller's `joints` unanswered this long is sent again


class ControllerNode(Node):
    def __init__(self, **kwargs):
        super().__init__("whole_body_controller", **kwargs)
        self.throttle = LogThrottle()  # per-period log messages: at most one a second
        p = declare(self, PARAMS)
        self.p = p
        for key in ("reference_sync", "base_sync"):
            if p[key] not in SYNC or (key == "base_sync" and p[key] == "none"):
                raise WbcError(f"parameter '{key}' must be one of {SYNC}, got '{p[key]}'")
        if p["estimator"] not in ("internal", "external"):
            raise WbcError(f"parameter 'estimator' must be 'internal' or 'external', got '{p['estimator']}'")
        self.robot = load_robot(p["robot"], wbc_config=p["wbc_config"] or None)
        config = wbc_config_for(self.robot)
        self.period = p["control_period"]
        self.period_ns = cv.seconds_to_ns(self.period)
        solve_every = max(1, round(p["solve_period"] / self.period))
        self.stage = ControlStage(
            self.robot,
            config,
            StageConfig(
                period=self.period,
                stale_periods=p["stale_periods"],
                max_tilt=p["max_tilt"],
                fixed_dt=p["fixed_dt"],
                estimator=p["estimator"] == "internal",
                contact_force=p["contact_force"],
                com_mode=p["com_mode"],
                solve_every=solve_every,
                hold_bandwidth=p["hold_bandwidth"],
                solve_worker=p["solve_worker"],
                solve_wait=min(p["solve_wait"], solve_every),
            ),
        )
        if p["solve_worker"] == "thread":
            # The solve thread holds the GIL while it runs Python code: with the default
            # 5 ms switch interval a joint state arriving meanwhile would wait up to 5 ms.
            sys.setswitchinterval(1e-4)
        self.ctrl = self.stage.ctrl
        # lockstep (a simulated robot that steps once per command): the first command waits for
        # every input, so that a run does not depend on which node of the graph started first
        self.lockstep_sync = p["reference_sync"] == "exact" or (
            p["estimator"] == "external" and p["base_sync"] == "exact"
        )
        self.reader = cv.JointStateReader(self.robot.joint_names)
        self.joint_map = cv.JointMap(self.robot.joint_names)
        self.command_index: np.ndarray | None = None  # set once the joint order is known
        self.command_joints: list[str] = []
        self.refs = None
        if p["reference_sync"] != "none":
            from whole_body_control.reference_trajectory import ReferenceBuffer

            self.refs = ReferenceBuffer(max_kept=64)  # the walker sends short batches (horizon x rate of them ahead)
        self.refs_received = 0
        self.solve_ms_max = 0.0  # the solve process's longest solve since the last diagnostics [ms]
        self.pending: tuple[int, bytes] | None = None  # the newest state, not answered yet
        self.pending_since = 0  # node clock [ns] since when states wait unanswered
        self.reference_holds = 0  # ticks that held the walker's last sample (it was late)
        self.starved = False  # the base state or walking reference stayed away for stale_periods
        self.resent = False
        self.base: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.imu: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self.wrench_topics = {s: p[f"{s}_wrench_topic"] for s in ("left", "right") if p[f"{s}_wrench_topic"]}
        self.wrenches: dict[str, tuple[int, np.ndarray]] = {}
        # lockstep: the IMU and foot wrenches by stamp, so that a state is answered with the ones
        # of its instant whatever order they came in (the robot's broadcasters set none); an
        # input that did not come with a state's stamp when it was re-sent is taken as slower
        # than the joint states and from then on its newest sample is used
        self.by_stamp: dict[str, dict[int, object]] = {"imu": {}, **{f"{s}_wrench": {} for s in self.wrench_topics}}
        self.seen: dict[str, int] = {}  # topic -> messages received
        self.last_answered: int | None = None
        self.last_command: bytes | None = None  # serialized, re-sent as it is
        self.last_cmd = None
        self.commands = 0
        self.damping_commands = 0
        self.tick_s = Ring(TICKS)
        self.ticks = 0
        self.started = time.monotonic() - process_age()  # the process's start (imports included)
        self.first_command_s: float | None = None
        self.first_state_s: float | None = None  # monotonic time of the first joint state
        self.fatal: str | None = None
        self._clock_error: str | None = None
        self._task_names = list(self.ctrl.tasks)
        self._declare_task_params()
        self.add_on_set_parameters_callback(self.on_set_parameters)

        n = self.robot.na
        self._data = np.zeros(n)

        self.commands_topic = f"/{p['controller_name']}/commands"
        self.cmd_pub = self.create_publisher(Float64MultiArray, self.commands_topic, COMMAND_QOS)
        self.diag_pub = self.create_publisher(String, "~/diagnostics", 10)
        self.diag_array_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        # the state topics arrive serialized: their fields are read at their CDR offsets
        # (conversions.*_from_cdr), a few us each instead of 45 to 130 us as message objects
        if p["state_best_effort"] and self.lockstep_sync:
            raise WbcError("parameter 'state_best_effort' needs reference_sync and base_sync other than 'exact'")
        qos = state_qos(1, best_effort=p["state_best_effort"])
        self.create_subscription(JointState, p["joint_states_topic"], self.on_joint_states, qos, raw=True)
        self.create_subscription(Imu, p["imu_topic"], self.on_imu, qos, raw=True)
        for side, topic in self.wrench_topics.items():
            self.create_subscription(WrenchStamped, topic, lambda m, s=side: self.on_wrench(s, m), qos, raw=True)
        self.base_topic = None
        if p["estimator"] == "external":
            self.base_topic = self.resolve_topic_name("base_state")
            self.create_subscription(Odometry, "base_state", self.on_base, qos, raw=True)
        if self.refs is not None:
            # raw CDR: rclpy takes 17 to 31 ms to build a 30-point trajectory message in Python
            self.create_subscription(
                MultiDOFJointTrajectory, "/walker/reference", self.on_reference, REFERENCE_QOS, raw=True
            )
        self.create_subscription(Bool, "/e_stop", self.on_estop, 10)
        self.create_subscription(Empty, "~/rearm", self.on_rearm, 10)
        # node clock (sim time in lockstep)
        self.create_timer(p["watchdog_period"] or self.period, per_period(self.watchdog))
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        # the diagnostics go out from a tick, after its command (0.3 to 0.7 ms of Python: a
        # timer fired in the middle of a period and delayed the next state's command, one miss
        # in four at 1 kHz); the timer publishes them when no state comes to be answered
        self._diag_next = 0.0  # [s] time.monotonic()
        self._diag_period = p["diagnostics_period"]
        self.create_timer(self._diag_period, self._diagnostics_timer, clock=steady)
        self.create_timer(1.0, self.report_waiting, clock=steady)
        self._resolve_joint_order(steady)
        self.get_logger().info(
            f"{self.robot.name}: {len(self.ctrl.level_names)} levels {list(self.ctrl.level_names)}, "
            f"{1.0 / self.period:.0f} Hz, commands on {self.commands_topic}, joint states on "
            f"{p['joint_states_topic']}, IMU on {p['imu_topic']}, base state: "
            + (f"{self.base_topic}" if self.base_topic else "estimated in this process")
            + (f", walking reference on /walker/reference ({p['reference_sync']})" if self.refs else "")
        )

    # -- the command joint order --------------------------------------------------------------

    def _resolve_joint_order(self, steady: Clock) -> None:
        """The forward controller's ``joints`` decide the command order; this node's
        ``joints`` (if set) must agree with them.  No command is sent before."""
        p = self.p
        if not p["read_joint_order"] or p["joint_order_timeout"] <= 0:
            self._set_joint_order(p["joints"] or list(self.robot.joint_names), "parameter 'joints'")
            return
        service = f"/{p['controller_name']}/get_parameters"
        self._order_client = self.create_client(GetParameters, service)
        self._order_future = None
        self._order_sent = 0.0  # time.monotonic() of the pending request
        self._order_retries = 0

        def poll():
            if self.command_index is not None or self.fatal:
                self._order_timer.cancel()
                return
            future = self._order_future
            if future is not None and not future.done() and time.monotonic() - self._order_sent > ORDER_RETRY_S:
                # A request sent while the service's endpoints are still matching can lose
                # its response (the server answers before its writer has found this client's
                # reader): the arming waited for it forever.  Ask again.
                self._order_client.remove_pending_request(future)
                self._order_future = None
                self._order_retries += 1
                self.get_logger().warning(
                    f"{service} has not answered in {ORDER_RETRY_S} s: asking again (retry {self._order_retries})"
                )
            if self._order_future is None and self._order_client.service_is_ready():
                self._order_sent = time.monotonic()
                self._order_future = self._order_client.call_async(GetParameters.Request(names=["joints"]))
                self._order_future.add_done_callback(self._on_joint_order)
            elif self._order_future is None and self._joint_states_since() > p["joint_order_timeout"]:
                own = p["joints"] or list(self.robot.joint_names)
                what = "parameter 'joints'" if p["joints"] else "the robot's joint order (Pinocchio)"
                self.get_logger().warning(
                    f"{service} did not answer within {p['joint_order_timeout']} s: commands in {what}; "
                    f"make sure the forward controller's `joints` list the same order"
                )
                self._set_joint_order(own, what)

        self._order_timer = self.create_timer(0.02, poll, clock=steady)

    def _joint_states_since(self) -> float:
        """Wall time [s] since the first joint state (the robot is up), 0 before."""
        return 0.0 if self.first_state_s is None else time.monotonic() - self.first_state_s

    def _on_joint_order(self, future) -> None:
        service = f"/{self.p['controller_name']}/get_parameters"
        try:
            values = future.result().values
            remote = list(values[0].string_array_value) if values else []
        except Exception as exc:  # noqa: BLE001 - any failure of the call is reported the same way
            remote = []
            self.get_logger().warning(f"{service} failed: {exc}")
        own = list(self.p["joints"] or [])
        if not remote:
            self.get_logger().warning(f"{service} has no 'joints': commands in this node's order")
            self._set_joint_order(own or list(self.robot.joint_names), "parameter 'joints'")
            return
        if own and own != remote:
            diff = [(i, a, b) for i, (a, b) in enumerate(zip(own, remote)) if a != b][:4]
            detail = ", ".join(f"[{i}] '{a}' here, '{b}' there" for i, a, b in diff)
            if len(own) != len(remote):
                detail = f"{len(own)} joints here, {len(remote)} there; " + detail
            self._stop(
                f"command joint order mismatch: parameter 'joints' of this node and `joints` of "
                f"/{self.p['controller_name']} differ ({detail}); no command is sent"
            )
            return
        self._set_joint_order(remote, f"`joints` of /{self.p['controller_name']}")

    def _set_joint_order(self, joints: list[str], source: str) -> None:
        try:
            self.command_index = self.joint_map.indices(joints)
        except StateError as exc:
            self._stop(f"command joints from {source} do not match the robot '{self.robot.name}': {exc}")
            return
        self.command_joints = list(joints)
        self.get_logger().info(f"command joint order: {source} ({len(joints)} joints, first '{joints[0]}')")
        self.try_tick()

    def _stop(self, reason: str) -> None:
        """A configuration error found at run time: no command, the node exits (code 2).

        Not an exception: one raised in a callback brings the EventsExecutor down with a
        segmentation fault; the context is shut down instead and ``spin`` exits."""
        self.fatal = reason
        self.get_logger().fatal(reason)
        self.publish_diagnostics()
        rclpy.try_shutdown(context=self.context)

    def destroy_node(self) -> None:
        self.stage.close()  # the solve process, if any
        super().destroy_node()

    # -- parameters --------------------------------------------------------------------------

    def _declare_task_params(self) -> None:
        params = []
        nlev = len(self.ctrl.levels)
        for level, tasks in enumerate(self.ctrl.levels):
            for task in tasks:
                pre = f"tasks.{task.name}"
                params += [
                    Param(
                        f"{pre}.weight",
                        float(task.weight),
                        f"weight of task '{task.name}' in its level [-]",
                        (0.0, INF),
                    ),
                    Param(f"{pre}.kp", float(task.kp), f"stiffness of task '{task.name}' [1/s^2]", (0.0, INF)),
                    Param(f"{pre}.kd", float(task.kd), f"damping of task '{task.name}' [1/s]", (0.0, INF)),
                    Param(f"{pre}.level", level, f"priority level of '{task.name}' (0: highest)", (0, nlev - 1)),
                ]
        values = declare(self, params)
        self._apply_task_params(values)

    def _check_task_params(self, changes: dict) -> str:
        """Why ``changes`` (``tasks.<name>.<field>`` -> value) cannot be applied, or ""."""
        moves = {}
        for key, value in changes.items():
            _, name, field = key.split(".")
            if name not in self.ctrl.tasks:
                return f"{key}: no task '{name}'"
            if field in ("weight", "kp", "kd"):
                if (
                    isinstance(value, bool)
                    or not isinstance(value, (int, float))
                    or not math.isfinite(value)
                    or value < 0
                ):
                    return f"{key} must be a finite number >= 0, got {value!r}"
            elif field == "level":
                if not isinstance(value, int) or not 0 <= value < len(self.ctrl.levels):
                    return f"{key} must be a level in 0..{len(self.ctrl.levels) - 1}, got {value!r}"
                moves[name] = value
            else:
                return f"{key}: unknown field '{field}' (weight, kp, kd, level)"
        # the hierarchy's own check (all or none: no level left empty), on a trial basis
        levels = {name: self.ctrl.level_of(name) for name in self._task_names}
        levels.update(moves)
        empty = [i for i in range(len(self.ctrl.levels)) if i not in levels.values()]
        if empty:
            return f"level(s) {[self.ctrl.level_names[i] for i in empty]} would have no task"
        return ""

    def _apply_task_params(self, changes: dict) -> None:
        ops, moves = [], {}
        for key, value in changes.items():
            _, name, field = key.split(".")
            if field in ("weight", "kp", "kd"):
                ops.append((field, name, float(value)))
            elif field == "level" and self.ctrl.level_of(name) != value:
                moves[name] = int(value)
        if moves:
            ops.append(("levels", moves))
        if ops:
            self.stage.apply(ops)  # (and in the solve process)

    def on_set_parameters(self, params):
        changes = {}
        for prm in params:
            if prm.name.startswith("tasks."):
                changes[prm.name] = prm.value
            elif prm.name in ("reference_sync", "base_sync"):
                allowed = SYNC if prm.name == "reference_sync" else SYNC[:2]
                if prm.value not in allowed:
                    return result(f"{prm.name} must be one of {allowed}, got {prm.value!r}")
                if prm.name == "reference_sync" and (prm.value == "none") != (self.refs is None):
                    return result(
                        "reference_sync can switch between 'exact' and 'latest' at run time, not to/from 'none'"
                    )
            elif prm.name == "com_mode" and prm.value not in ("reference", "dcm"):
                return result(f"com_mode must be 'reference' or 'dcm', got {prm.value!r}")
        reason = self._check_task_params(changes)
        if reason:
            self.get_logger().warning(f"parameter change rejected: {reason}")
            return result(reason)
        self._apply_task_params(changes)
        for prm in params:
            if prm.name in self.p:
                self.p[prm.name] = prm.value
            if prm.name in ("stale_periods", "max_tilt", "com_mode", "fixed_dt", "contact_force"):
                self.stage.apply([("config", prm.name, prm.value)])
        return result()

    # -- inputs --------------------------------------------------------------------------------

    def _count(self, topic: str) -> None:
        self.seen[topic] = self.seen.get(topic, 0) + 1

    def on_joint_states(self, data: bytes) -> None:
        now = self.get_clock().now().nanoseconds
        ns = cv.cdr_stamp_ns(data)
        if now < ns <= now + self.period_ns:
            # a simulated robot's /clock comes right after its joint states (their deadline
            # starts first): a state up to one period ahead of this node's clock is received
            # at its stamp, or the stale rule would count it a period late
            now = ns
        self.stage.supervisor.received(now)
        self._count("joint_states")
        if self.first_state_s is None:
            self.first_state_s = time.monotonic()
        if ns == self.last_answered:
            if self.last_command is not None:
                self.cmd_pub.publish(self.last_command)  # a re-sent state gets the same answer
                return
        # a state re-sent by the robot, or one coming while an input is known to be silent,
        # is answered at once with what there is (damping naming what is missing)
        self.resent = self.starved or (self.pending is not None and self.pending[0] == ns)
        if self.pending is None:
            self.pending_since = now  # unanswered since
        self.pending = (ns, data)
        self.try_tick()

    def on_imu(self, data: bytes) -> None:
        self._count("imu")
        ns, *imu = cv.imu_from_cdr(data)
        self.imu = tuple(imu)
        self._stamped("imu", ns, self.imu)

    def on_wrench(self, side: str, data: bytes) -> None:
        self._count(f"{side}_wrench")
        ns, wrench = cv.wrench_from_cdr(data)
        self.wrenches[side] = (self.get_clock().now().nanoseconds, wrench)
        self._stamped(f"{side}_wrench", ns, wrench)

    def _stamped(self, key: str, ns: int, value) -> None:
        """Lockstep: keep ``value`` by stamp; a state waiting for it is answered now."""
        kept = self.by_stamp.get(key) if self.lockstep_sync else None
        if kept is None:
            return
        kept[ns] = value
        while len(kept) > 32:
            del kept[next(iter(kept))]
        if self.pending is not None and self.pending[0] == ns:
            self.try_tick()

    def on_base(self, data: bytes) -> None:
        self._count("base_state")
        ns, q_base, v_base = cv.odometry_from_cdr(data)
        self.base[ns] = (q_base, v_base)
        self.starved = False
        while len(self.base) > 32:
            del self.base[min(self.base)]
        self.try_tick()

    def on_reference(self, data: bytes) -> None:
        self._count("reference")
        try:
            self.refs.add(cv.reference_trajectory_from_cdr(data, self.period_ns))
        except StateError as exc:
            if self.throttle("reference rejected"):
                self.get_logger().error(f"/walker/reference rejected: {exc}")
            return
        self.refs_received += 1
        self.starved = False
        self.try_tick()

    def on_estop(self, msg: Bool) -> None:
        was = self.stage.supervisor.latched
        self.stage.supervisor.press(bool(msg.data))
        if msg.data and was is None:
            self.get_logger().error("e-stop: damping until released and re-armed (~/rearm)")

    def on_rearm(self, _msg: Empty) -> None:
        why = self.stage.rearm()
        self.get_logger().error(why) if why else self.get_logger().info("re-armed")

    # -- the tick --------------------------------------------------------------------------------

    def _base_for(self, ns: int):
        """(base, wait): the external base state for the stamp, or whether to wait for it."""
        if self.p["base_sync"] == "exact":
            # lockstep: wait for the base state of the stamp; a re-sent state is answered with
            # what there is, unless no base state came yet (the robot waits for the first
            # command, time stands still: an answer now would start it at a graph-start race)
            base = self.base.get(ns)
            return base, base is None and (not self.resent or not self.seen.get("base_state"))
        if not self.base:
            return None, False
        newest = max(self.base)
        if abs(ns - newest) > self.p["base_timeout"] * 1e9:
            return None, False
        return self.base[newest], False

    def _reference_for(self, ns: int):
        """(reference, why missing, wait)."""
        refs = self.refs
        if refs.covers(ns):
            return partial(refs.at, ns), "", False  # sampled only if a solve uses it
        if self.p["reference_sync"] == "exact" and (not self.resent or self.refs_received == 0):
            return None, "", True  # (as for the base state: the first trajectory is waited for)
        if self.refs_received == 0:
            if self.p["reference_sync"] == "latest":
                return None, "", False  # stand on the controller's own reference until the walker starts
            return None, "waiting for /walker/reference", False
        end = refs.end_ns
        hold_ns = max(self.p["stale_periods"] * self.period_ns, self.p["reference_timeout"] * 1e9)
        if end is not None and 0 < ns - end < hold_ns:
            # The walker is late, not dead (a slow batch; its trajectories reach `horizon`
            # ahead, so it is that late already): its last sample holds for less than
            # reference_timeout, then the robot is damped.
            self.reference_holds += 1
            return refs.at(end), "", False
        return (
            None,
            f"no walking reference at t = {ns * 1e-9:.3f} s (the walker's last ends at {end * 1e-9:.3f} s)",
            False,
        )

    def _wrenches(self, now_ns: int) -> dict | None:
        if not self.wrench_topics:
            return None
        if len(self.wrenches) < len(self.wrench_topics):
            silent = [t for s, t in self.wrench_topics.items() if s not in self.wrenches]
            if self.throttle("wrench silent"):
                self.get_logger().error(
                    f"no message on {silent} (configured foot force/torque sensors): "
                    "contacts from the walking schedule instead"
                )
            return None
        old = [self.wrench_topics[s] for s, (t, _) in self.wrenches.items() if now_ns - t > 0.1e9]
        if old:
            if self.throttle("wrench old"):
                self.get_logger().error(f"{old} silent for more than 0.1 s: contacts from the walking schedule instead")
            return None
        return {s: w for s, (_, w) in self.wrenches.items()}

    def try_tick(self) -> None:
        """Answer the pending state; a bug in the tick is logged and answered with damping
        (an exception escaping a callback would end the process and leave the forward
        controller holding the last torque)."""
        try:
            self._tick()
        except Exception as exc:  # noqa: BLE001 - any failure of the tick ends in the safe state
            if not self.context.ok():
                return  # shutting down: nothing to command
            if self.throttle("tick failed"):
                self.get_logger().error(f"tick failed: {exc!r}: damping")
            if self.command_index is not None and self.stage.last_stamp_ns is not None:
                self._publish(self.stage.fail(self.stage.last_stamp_ns, f"tick failed: {exc!r}"))

    def _tick(self) -> None:
        if self.pending is None or self.command_index is None or self.fatal:
            return
        if self.first_command_s is None:
            if self.lockstep_sync and self.waiting_for():
                return  # lockstep: the robot's time stands still until every input has come once
            if not self.stage.worker_ready():
                # nothing commanded yet: the first command waits for the solve process (under
                # a second) rather than damping a robot whose clock it may start (G1 without
                # foot sensors then fell at arming, the estimator seeded on a sagging robot)
                return
        t0 = time.perf_counter()
        ns, data = self.pending
        now = self.get_clock().now().nanoseconds
        base = None
        base_missing = ""
        if self.base_topic is not None:
            base, wait = self._base_for(ns)
            if wait:
                return
            if base is None:
                base_missing = f"no base state on {self.base_topic} for t = {ns * 1e-9:.3f} s"
        ref, missing = None, ""
        if self.refs is not None:
            ref, missing, wait = self._reference_for(ns)
            if wait:
                return
        imu, wrenches = self.imu, self._wrenches(now)
        if self.lockstep_sync:
            late = [k for k, kept in self.by_stamp.items() if ns not in kept]
            if late and not self.resent:
                return  # the IMU or a wrench of this instant is on its way
            for key in late:  # re-sent without them: slower inputs, the newest sample from now on
                del self.by_stamp[key]
                self.get_logger().warning(f"lockstep: no {key} with the joint states' stamp; the newest is used")
            if "imu" in self.by_stamp:
                imu = self.by_stamp["imu"][ns]
            if wrenches is not None:
                wrenches = {s: self.by_stamp.get(f"{s}_wrench", {}).get(ns, w) for s, w in wrenches.items()}
        self.pending = None
        _, q, v, missing_joints = self.reader.read_cdr(data)
        obs = Observation(ns, q, v, missing_joints, imu, base, wrenches)
        offset = self.p["max_clock_offset"]
        if offset > 0 and abs(now - ns) > offset * 1e9:
            self._clock_error = (
                f"clock mismatch: {self.p['joint_states_topic']} stamped {ns * 1e-9:.3f} s but this node's clock "
                f"reads {now * 1e-9:.3f} s; a simulated robot needs use_sim_time:=true (or raise max_clock_offset)"
            )
            if self.throttle("clock mismatch"):
                self.get_logger().error(self._clock_error)
            missing = self._clock_error
        else:
            self._clock_error = None
        for base_ns in [k for k in self.base if k < ns]:
            del self.base[base_ns]
        cmd = self.stage.cycle(obs, ref, missing or base_missing)
        if self.first_command_s is None and cmd.reason == ARMING:
            # nothing commanded yet: the first command waits for the arming solve (a few ms), as
            # for the solve process's start, rather than damping a robot whose clock it may
            # start (Talos on the ros2_control stand-in at 500 Hz sagged, saw a lift and fell)
            self.stage.finish()
            return
        self._publish(cmd)
        self.last_answered = ns
        self.tick_s.append(time.perf_counter() - t0)
        self.stage.finish()  # a due solve (solve_period), after the command went out
        self.ticks += 1
        self._log_events()
        if time.monotonic() >= self._diag_next:
            self.publish_diagnostics()

    def _publish(self, cmd) -> None:
        data = self._data
        data[self.command_index] = cmd.tau  # entry i of the command is the joint named joints[i]
        msg = cv.command_cdr(data, cmd.stamp_ns)  # CDR bytes: a message object costs 4x more
        self.cmd_pub.publish(msg)
        self.last_command = msg
        self.last_cmd = cmd
        self.commands += 1
        self.damping_commands += int(cmd.damping)
        if self.first_command_s is None:
            self.first_command_s = time.monotonic() - self.started
            self.get_logger().info(
                f"first command {self.first_command_s:.2f} s after the process started"
                + (f" (damping: {cmd.reason})" if cmd.damping else "")
            )

    def _log_events(self) -> None:
        events = self.stage.supervisor.events
        for e in events:
            if e.startswith(("damping", "latched")):
                self.get_logger().error(e)
            else:
                self.get_logger().info(e)
        events.clear()

    # -- watchdog and diagnostics -------------------------------------------------------------

    def watchdog(self) -> None:
        """Damping when no usable state came for ``stale_periods``: the joint states stopped,
        or a state waits too long for its base state or walking reference (a silent
        estimator or walker: joint states alone keep arriving).  Node clock: in lockstep
        with use_sim_time it stands still while the robot waits, so it never fires there."""
        if self.command_index is None or self.fatal:
            return
        now = self.get_clock().now().nanoseconds
        if self.pending is not None and now - self.pending_since >= (self.p["stale_periods"] - 0.5) * self.period_ns:
            self.starved = True  # until the base state or reference comes again
            self.resent = True
            self.try_tick()
            return
        cmd = self.stage.watchdog(now)
        if cmd is not None:
            self._publish(cmd)
            self._log_events()

    def waiting_for(self) -> list[str]:
        """The inputs the controller has not received yet (what it waits for)."""
        p = self.p
        out = []
        if self.command_index is None and not self.fatal:
            out.append(f"the joint order of /{p['controller_name']} (parameter service)")
        if not self.seen.get("joint_states"):
            out.append(p["joint_states_topic"])
        if not self.seen.get("imu"):
            out.append(p["imu_topic"])
        if self.base_topic and not self.seen.get("base_state"):
            out.append(self.base_topic)
        if self.refs is not None and not self.refs_received:
            out.append("/walker/reference")
        out += [t for s, t in self.wrench_topics.items() if not self.seen.get(f"{s}_wrench")]
        if not self.stage.worker_ready():
            out.append("the solve process to start")
        return out

    def report_waiting(self) -> None:
        sup = self.stage.supervisor
        if sup.armed or self.fatal:
            return
        waiting = self.waiting_for()
        if waiting:
            self.get_logger().warning(f"not armed: waiting for {', '.join(waiting)}")
        elif self._clock_error:
            self.get_logger().error(f"not armed: {self._clock_error}")
        else:
            self.get_logger().warning(f"not armed: {sup.reason}")

    def diagnostics(self) -> dict:
        sup = self.stage.supervisor
        r = self.stage.last_result
        ticks = self.tick_s.values() * 1e3
        waiting = self.waiting_for()
        if self.fatal:
            status = "error"
        elif sup.armed:
            status = r.status if r is not None else "ok"
        elif waiting:
            status = "waiting for " + ", ".join(waiting)
        elif self.commands == 0:
            status = "waiting for a joint state to answer"
        else:
            status = "damping"
        cmd = self.last_cmd
        return {
            "stamp_ns": self.last_answered,
            "armed": sup.armed,
            "safety": self.fatal or ("" if sup.armed else sup.reason),
            "latched": sup.latched,
            "status": status,
            "reason": (cmd.reason if cmd is not None else "") if sup.armed else (self.fatal or sup.reason),
            "waiting": waiting,
            "levels": dict(zip(r.level_names, r.residuals)) if r is not None else {},
            "solve_time_ms": r.solve_time * 1e3 if r is not None else None,
            **dict(zip(("tick_ms_median", "tick_ms_p99"), quantiles(ticks, (0.5, 0.99)))),
            "contacts": r.contacts if r is not None else {},
            "warnings": list(r.warnings) if r is not None else [],
            "lifted": self.stage.lifted,
            "commands": self.commands,
            "damping_commands": self.damping_commands,
            "reference_holds": self.reference_holds,
            "late_plans": self.stage.late_plans,
            "solve_ms_max": self.solve_ms_max,  # (a solve process) the longest since the last diagnostics
            "command_joints": self.command_joints[:1] + (["..."] if len(self.command_joints) > 1 else []),
            "first_command_s": self.first_command_s,
        }

    def _diagnostics_timer(self) -> None:
        if time.monotonic() >= self._diag_next + 0.5 * self._diag_period:  # no tick published them
            self.publish_diagnostics()

    def publish_diagnostics(self) -> None:
        self._diag_next = time.monotonic() + self._diag_period
        if self.pending is not None and self.first_command_s is None:
            self.try_tick()  # a state held back for an input that came since (the solve process)
        longest, slow = self.stage.take_solve_timing()
        self.solve_ms_max = longest * 1e3
        for wall, cpu in slow:
            if self.throttle("slow solve"):
                why = "the QP" if cpu > 0.5 * wall else "the solve process waited for a CPU"
                self.get_logger().warning(f"a solve took {wall * 1e3:.1f} ms (CPU {cpu * 1e3:.1f} ms: {why})")
        diag = self.diagnostics()
        self.diag_pub.publish(String(data=json.dumps(diag, allow_nan=True)))
        level = DiagnosticStatus.OK
        if self.fatal:
            level = DiagnosticStatus.ERROR
        elif not diag["armed"] or diag["status"] not in ("ok", "airborne"):
            level = DiagnosticStatus.WARN if diag["waiting"] else DiagnosticStatus.ERROR
        values = [
            KeyValue(key=k, value=str(diag[k]))
            for k in ("armed", "latched", "reason", "tick_ms_median", "tick_ms_p99", "commands", "damping_commands")
        ]
        values += [KeyValue(key=f"level {name}", value=f"{res:.3g}") for name, res in diag["levels"].items()]
        array_msg = DiagnosticArray()
        array_msg.header.stamp = self.get_clock().now().to_msg()
        array_msg.status = [
            DiagnosticStatus(
                level=level,
                name="whole_body_controller",
                message=diag["status"] if diag["armed"] or diag["waiting"] else f"damping: {diag['reason']}",
                hardware_id=self.robot.name,
                values=values,
            )
        ]
        self.diag_array_pub.publish(array_msg)


def main(args=None) -> None:
    spin(ControllerNode, args)


if __name__ == "__main__":
    main()
