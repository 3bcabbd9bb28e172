"""``whole_body_controller``: the :class:`~whole_body_control.controller.WholeBodyController`
behind topics.

Subscribes:
    /joint_states (sensor_msgs/JointState, matched by joint NAME),
    /imu (sensor_msgs/Imu: finiteness and tilt checks),
    base_state (nav_msgs/Odometry: pose in world, twist in the base frame; remap it
    to the simulator's ground truth or the state estimator),
    /walker/reference (trajectory_msgs/MultiDOFJointTrajectory, see docs/ros.md),
    /e_stop (std_msgs/Bool), ~/rearm (std_msgs/Empty: leave a latched fall / e-stop).
Publishes:
    /<controller_name>/commands (std_msgs/Float64MultiArray): efforts [N m] in the
    order of the ``joints`` parameter; the layout carries ``stamp_ns=<ns>``, the
    stamp of the state the command was computed from;
    ~/diagnostics (std_msgs/String, JSON): status, reason, per-level residuals,
    solve time, active contacts, safety state; every ``diagnostics_period``.

One command per state: a command is computed when the joint states of a stamp
arrive together with the base state (and, with ``reference_sync: exact``, the
walking reference) of the same stamp; only the newest state is answered (no
backlog), a re-sent state gets the same command again.

Safety (damping ``tau = -kd_safe v``, never a non-finite value):
    * /joint_states older than ``stale_periods`` control periods (watchdog);
    * non-finite joint states, base state or IMU;
    * /e_stop true (latched until ~/rearm), IMU tilt above ``max_tilt`` (latched);
    * before the first valid and complete state the controller is not armed.
Joint states with missing or unknown names: a logged error naming them, no command.
When a (non-latched) cause clears, the controller re-arms at the measured state.

Runtime parameters ``tasks.<name>.weight|kp|kd|level`` change the hierarchy;
negative values, unknown levels or emptying a level are rejected with a reason.
"""

from __future__ import annotations

import json
import math
import time

import numpy as np
from nav_msgs.msg import Odometry
from rclpy.node import Node
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Bool, Empty, Float64MultiArray, MultiArrayDimension, String
from trajectory_msgs.msg import MultiDOFJointTrajectory

from whole_body_control.config import load_wbc_config
from whole_body_control.controller import WholeBodyController
from whole_body_control.errors import StateError, WbcError
from whole_body_control.robot import load_robot
from whole_body_control.ros import conversions as cv
from whole_body_control.ros.params import INF, Param, declare, result, spin
from whole_body_control.ros.qos import COMMAND_QOS, STATE_QOS
from whole_body_control.walking import walker_to_reference

PARAMS = [
    Param("robot", "talos", "robot name (config/robots/<name>.yaml) or YAML path", read_only=True),
    Param("wbc_config", "", "WBC hierarchy YAML (empty: config/wbc.yaml with the robot's overlay)", read_only=True),
    Param("control_period", 0.001, "control period [s]", (1e-5, 0.1), read_only=True),
    Param("controller_name", "effort_controller", "commands go to /<controller_name>/commands", read_only=True),
    Param("joints", [], "joint order of the commands (empty: the robot's joints in Pinocchio order)", read_only=True),
    Param("stale_periods", 3, "joint states older than this many control periods -> damping", (1, 100000)),
    Param("reference_sync", "exact", "walking reference: 'exact' (same stamp as the state), 'latest' or 'none'"),
    Param("base_sync", "exact", "base state: 'exact' (same stamp as the joint states) or 'latest'"),
    Param("base_timeout", 0.01, "base_sync latest: largest base-state age accepted [s]", (0.0, 10.0)),
    Param(
        "max_tilt", 0.8, "IMU tilt from upright above which the robot has fallen (latched damping) [rad]", (0.0, 3.2)
    ),
    Param("com_mode", "reference", "'reference': track the planned CoM; 'dcm': the walker's DCM feedback"),
    Param(
        "watchdog_period",
        0.0,
        "period of the stale-state check [s] (wall clock; 0: control_period / 2)",
        (0.0, 1.0),
        read_only=True,
    ),
    Param("diagnostics_period", 0.1, "period of ~/diagnostics [s] (node clock)", (1e-3, 60.0)),
]
SYNC = ("exact", "latest", "none")
BUFFER = 32  # stamps kept per input while waiting for the others


def _sanitize(tau: np.ndarray, tau_max: np.ndarray) -> np.ndarray:
    """Finite torques inside the limits (non-finite entries -> 0)."""
    tau = np.where(np.isfinite(tau), tau, 0.0)
    return np.clip(tau, -tau_max, tau_max)


class ControllerNode(Node):
    def __init__(self, **kwargs):
        super().__init__("whole_body_controller", **kwargs)
        p = declare(self, PARAMS)
        self.p = p
        for key in ("reference_sync", "base_sync"):
            if p[key] not in SYNC or (key == "base_sync" and p[key] == "none"):
                raise WbcError(f"parameter '{key}' must be one of {SYNC}, got '{p[key]}'")
        self.robot = load_robot(p["robot"])
        config = load_wbc_config(p["wbc_config"] or None, robot=self.robot.name)
        self.ctrl = WholeBodyController(self.robot, config)
        self.period = p["control_period"]
        self.joint_map = cv.JointMap(self.robot.joint_names)
        try:
            self.command_index = self.joint_map.indices(p["joints"] or list(self.robot.joint_names))
        except StateError as exc:
            raise WbcError(f"parameter 'joints': {exc}") from exc
        self.armed = False
        self.estop = False
        self.latched: str | None = None  # fall / e-stop: needs ~/rearm
        self.safety: str = "not armed: waiting for a valid and complete state"
        self.js: dict[int, JointState] = {}
        self.base: dict[int, Odometry] = {}
        self.refs: dict[int, MultiDOFJointTrajectory] = {}
        self.imu: Imu | None = None
        self.last_answered: int | None = None
        self.last_command: Float64MultiArray | None = None
        self.last_state_time: int | None = None  # node clock [ns] when the newest joint states arrived
        self.last_v = np.zeros(self.robot.nv)
        self.valid_seen = False  # a complete state was answered once: the watchdog is live
        self.last_result = None
        self.last_ctrl_ns: int | None = None
        self.commands = 0
        self.damping_commands = 0
        self.tick_ms: list[float] = []
        self._next_diag = 0
        self._bad_names: str | None = None
        self._task_names = list(self.ctrl.tasks)
        self._declare_task_params()
        self.add_on_set_parameters_callback(self.on_set_parameters)

        topic = f"/{p['controller_name']}/commands"
        self.cmd_pub = self.create_publisher(Float64MultiArray, topic, COMMAND_QOS)
        self.diag_pub = self.create_publisher(String, "~/diagnostics", 10)
        self.create_subscription(JointState, "/joint_states", self.on_joint_states, STATE_QOS)
        self.create_subscription(Imu, "/imu", self.on_imu, STATE_QOS)
        self.create_subscription(Odometry, "base_state", self.on_base, STATE_QOS)
        self.create_subscription(MultiDOFJointTrajectory, "/walker/reference", self.on_reference, 10)
        self.create_subscription(Bool, "/e_stop", self.on_estop, 10)
        self.create_subscription(Empty, "~/rearm", self.on_rearm, 10)
        from rclpy.clock import Clock, ClockType

        wd = p["watchdog_period"] or self.period / 2.0
        self.create_timer(wd, self.watchdog, clock=Clock(clock_type=ClockType.STEADY_TIME))
        self.get_logger().info(
            f"{self.robot.name}: {len(self.ctrl.level_names)} levels {list(self.ctrl.level_names)}, "
            f"commands on {topic}, base state on {self.resolve_topic_name('base_state')}"
        )

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

    def _level_of(self, name: str) -> int:
        return next(i for i, tasks in enumerate(self.ctrl.levels) if any(t.name == name for t in tasks))

    def _check_task_params(self, changes: dict) -> str:
        levels = {name: self._level_of(name) for name in self._task_names}
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
                levels[name] = value
            else:
                return f"{key}: unknown field '{field}' (weight, kp, kd, level)"
        empty = [i for i in range(len(self.ctrl.levels)) if i not in levels.values()]
        if empty:
            return f"level(s) {[self.ctrl.level_names[i] for i in empty]} would have no task"
        return ""

    def _apply_task_params(self, changes: dict) -> None:
        for key, value in changes.items():
            _, name, field = key.split(".")
            task = self.ctrl.tasks[name]
            if field == "weight":
                self.ctrl.set_weight(name, float(value))
            elif field == "kp":
                task.kp = float(value)
            elif field == "kd":
                task.kd = float(value)
            elif field == "level":
                old = self._level_of(name)
                if old != value:
                    self.ctrl.levels[old].remove(task)
                    self.ctrl.levels[value].append(task)
                    self.ctrl.hqp.reset()

    def on_set_parameters(self, params):
        changes = {}
        for prm in params:
            if prm.name.startswith("tasks."):
                changes[prm.name] = prm.value
            elif prm.name in ("reference_sync", "base_sync"):
                allowed = SYNC if prm.name == "reference_sync" else SYNC[:2]
                if prm.value not in allowed:
                    return result(f"{prm.name} must be one of {allowed}, got {prm.value!r}")
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
        return result()

    # -- inputs --------------------------------------------------------------------------------

    @staticmethod
    def _store(buffer: dict, msg) -> int:
        ns = cv.stamp_to_ns(msg.header.stamp)
        buffer[ns] = msg
        while len(buffer) > BUFFER:
            del buffer[min(buffer)]
        return ns

    def on_joint_states(self, msg: JointState) -> None:
        ns = self._store(self.js, msg)
        self.last_state_time = self.get_clock().now().nanoseconds
        if ns == self.last_answered and self.last_command is not None:
            self.cmd_pub.publish(self.last_command)  # re-sent state: same answer
            return
        self.try_tick()

    def on_base(self, msg: Odometry) -> None:
        self._store(self.base, msg)
        self.try_tick()

    def on_reference(self, msg: MultiDOFJointTrajectory) -> None:
        self._store(self.refs, msg)
        self.try_tick()

    def on_imu(self, msg: Imu) -> None:
        self.imu = msg

    def on_estop(self, msg: Bool) -> None:
        if msg.data and not self.estop:
            self.get_logger().error("e-stop: damping until released and re-armed (~/rearm)")
            self.latched = "e-stop"
        self.estop = bool(msg.data)

    def on_rearm(self, _msg: Empty) -> None:
        if self.estop:
            self.get_logger().error("re-arm refused: the e-stop is still pressed")
            return
        self.get_logger().info(f"re-armed (was: {self.latched})")
        self.latched = None
        self.armed = False  # re-seeded at the next valid state

    # -- the tick --------------------------------------------------------------------------------

    def _select(self):
        """(stamp, joint states, base, reference or None) to answer, or None to wait."""
        if not self.js:
            return None
        ns = max(self.js)
        if self.last_answered is not None and ns <= self.last_answered:
            return None
        js = self.js[ns]
        if self.p["base_sync"] == "exact":
            base = self.base.get(ns)
        else:
            base = self.base[max(self.base)] if self.base else None
            if base is not None and abs(ns - cv.stamp_to_ns(base.header.stamp)) > self.p["base_timeout"] * 1e9:
                base = None
        if base is None:
            return None
        ref = None
        sync = self.p["reference_sync"]
        if sync == "exact":
            ref = self.refs.get(ns)
            if ref is None:
                return None
        elif sync == "latest" and self.refs:
            ref = self.refs[max(self.refs)]
        return ns, js, base, ref

    def try_tick(self) -> None:
        selected = self._select()
        if selected is None:
            return
        ns, js, base, ref = selected
        try:
            qj, vj = cv.joints_from_msg(js, self.joint_map)
        except StateError as exc:
            reason = f"/joint_states rejected: {exc}"
            if reason != self._bad_names:
                self.get_logger().error(reason + "; no command")
            self._bad_names = reason
            self.safety = reason
            self.last_answered = ns
            self._publish_diagnostics(ns, force=True)
            return
        self._bad_names = None
        qb, vb = cv.base_from_odometry(base)
        q, v = cv.assemble_state(qb, vb, qj, vj)
        self.last_answered = ns
        for buf in (self.js, self.base, self.refs):
            for k in [k for k in buf if k <= ns]:
                del buf[k]
        imu_ok = self.imu is None or all(
            map(math.isfinite, [*cv.imu_from_msg(self.imu)[0], *cv.imu_from_msg(self.imu)[1]])
        )
        finite = bool(np.all(np.isfinite(q)) and np.all(np.isfinite(v)) and imu_ok)
        if finite:
            self.last_v = v
            self.valid_seen = True
        t0 = time.perf_counter()
        reason = None
        if not finite:
            reason = "non-finite state (joint states, base state or IMU)"
        elif self.estop or self.latched:
            reason = self.latched or "e-stop"
        if reason is not None:
            if self.armed:
                self.get_logger().error(f"damping: {reason}")
            self.armed = False
            self.safety = reason
            self._publish(ns, self.ctrl.damping_torques(np.where(np.isfinite(v), v, 0.0)), damping=True)
            self._publish_diagnostics(ns, force=True)
            return
        t = ns * 1e-9
        if not self.armed:
            self.ctrl.reset(q, v, t)
            self.armed = True
            self.last_ctrl_ns = ns
            self.safety = ""
            self.get_logger().info(f"armed at t = {t:.3f} s")
        dt = self.period if self.last_ctrl_ns is None or ns == self.last_ctrl_ns else (ns - self.last_ctrl_ns) * 1e-9
        if self.p["base_sync"] == "exact" and self.p["reference_sync"] != "latest":
            dt = self.period  # lockstep: the nominal period, bit for bit
        self.last_ctrl_ns = ns
        reference = None
        if ref is not None:
            try:
                wref = cv.reference_from_msg(ref)
                contacts = {s: wref.feet[s].in_contact for s in ("left", "right")}
                st = self.ctrl.state
                reference = walker_to_reference(wref, contacts, self.p["com_mode"], st.com.copy(), st.vcom.copy())
            except (StateError, WbcError) as exc:
                self.get_logger().error(f"walking reference ignored: {exc}", throttle_duration_sec=1.0)
        tilt = self._tilt()
        if tilt is not None and tilt > self.p["max_tilt"]:
            self.latched = f"fall: IMU tilt {tilt:.2f} rad > max_tilt {self.p['max_tilt']} rad"
            self.ctrl.latch_damping(self.latched)
            self.get_logger().error(self.latched)
        result = self.ctrl.cycle(q, v, dt, reference)
        self.last_result = result
        self.tick_ms.append((time.perf_counter() - t0) * 1e3)
        if len(self.tick_ms) > 10000:
            del self.tick_ms[:5000]
        self._publish(ns, result.tau, damping=result.status == "damping")
        self._publish_diagnostics(ns)

    def _tilt(self) -> float | None:
        if self.imu is None:
            return None
        R = cv.quat_to_rotation(self.imu.orientation)
        return float(math.acos(max(-1.0, min(1.0, R[2, 2]))))

    def _publish(self, ns: int, tau: np.ndarray, damping: bool) -> None:
        tau = _sanitize(np.asarray(tau, dtype=float), self.robot.tau_max)
        data = np.empty(tau.size)
        data[self.command_index] = tau  # entry i of the command is the joint named joints[i]
        msg = cv.command_msg(data)
        msg.layout.dim.append(MultiArrayDimension(label=f"stamp_ns={ns}", size=0, stride=0))
        self.cmd_pub.publish(msg)
        self.last_command = msg
        self.commands += 1
        self.damping_commands += int(damping)

    # -- watchdog and diagnostics -------------------------------------------------------------

    def watchdog(self) -> None:
        if self.last_state_time is None or not self.valid_seen:
            return
        age = (self.get_clock().now().nanoseconds - self.last_state_time) * 1e-9
        if age >= (self.p["stale_periods"] - 0.5) * self.period:
            reason = f"stale /joint_states: none for {age * 1e3:.1f} ms"
            if self.armed:
                self.get_logger().error(f"damping: {reason}")
            self.armed = False
            self.safety = reason
            self._publish(self.last_answered or 0, self.ctrl.damping_torques(self.last_v), damping=True)
            self._publish_diagnostics(self.last_answered or 0)

    def _publish_diagnostics(self, ns: int, force: bool = False) -> None:
        now = self.get_clock().now().nanoseconds
        if not force and now < self._next_diag:
            return
        self._next_diag = now + int(self.p["diagnostics_period"] * 1e9)
        r = self.last_result
        ticks = np.array(self.tick_ms[-2000:])
        diag = {
            "stamp_ns": ns,
            "armed": self.armed,
            "safety": self.safety,
            "latched": self.latched,
            "status": (r.status if r is not None else "none") if self.armed else "damping",
            "reason": (r.reason if r is not None else "") if self.armed else self.safety,
            "levels": dict(zip(r.level_names, r.residuals)) if r is not None else {},
            "solve_time_ms": r.solve_time * 1e3 if r is not None else None,
            "tick_ms_median": float(np.median(ticks)) if ticks.size else None,
            "contacts": r.contacts if r is not None else {},
            "warnings": list(r.warnings) if r is not None else [],
            "commands": self.commands,
            "damping_commands": self.damping_commands,
        }
        self.diag_pub.publish(String(data=json.dumps(diag, allow_nan=True)))


def main(args=None) -> None:
    spin(ControllerNode, args)


if __name__ == "__main__":
    main()
