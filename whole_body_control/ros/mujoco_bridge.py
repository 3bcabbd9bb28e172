"""``mujoco_bridge``: the MuJoCo :class:`~whole_body_control.sim.Simulation` behind
the interfaces a ros2_control robot offers.

Publishes (stamped with the simulated time):
    /clock (rosgraph_msgs/Clock), /joint_states (sensor_msgs/JointState, with
    names, efforts = applied torques), /imu (sensor_msgs/Imu),
    /ground_truth/odom (nav_msgs/Odometry: pose in world, twist in the base
    frame), /<side>_foot/wrench (geometry_msgs/WrenchStamped, ground reaction in
    the sole frame), /sim/status (std_msgs/String, JSON, every ``status_period``).
Subscribes:
    /<controller_name>/commands (std_msgs/Float64MultiArray): efforts [N m] in the
    order of the ``joints`` parameter (matched to the robot by name), as
    ros2_control's forward_command_controller with interface_name effort; a
    command of the wrong size is rejected with a logged error;
    /sim/pause (std_msgs/Bool), /sim/reset (std_msgs/Empty),
    /sim/push and ~/push (geometry_msgs/WrenchStamped: force [N] in the world frame on
    ``header.frame_id`` (a body; empty: the torso) for ``push_duration`` [s], at
    the simulated time ``header.stamp`` or at once if that is not in the future).
Services (named as mujoco_ros2_control's, with std_srvs types: its own
mujoco_ros2_control_msgs are not available here):
    ~/set_pause (std_srvs/SetBool: data = pause), ~/reset_world (std_srvs/Trigger:
    the reference posture, the clock goes on), ~/step_simulation (std_srvs/Trigger:
    ``step_periods`` control periods with the held command; only while paused).
Diagnostics:
    /diagnostics (diagnostic_msgs/DiagnosticArray): one DiagnosticStatus named
    ``mujoco_bridge`` with the status fields as key/values, every ``diagnostics_period``
    wall seconds (WARN while the command timeout damps, ERROR after a fall).

Modes:
    lockstep: one control period (``control_period / timestep`` simulation steps)
    per received command, then the new state is published; the first state is
    published once a command publisher is matched (and re-sent every
    ``resend_period`` wall seconds while unanswered).  A command whose layout
    carries ``stamp_ns=<ns>`` (see :func:`command_stamp`) must answer the pending
    state, otherwise it is ignored: late duplicates cannot advance the clock.
    realtime: a wall-clock timer publishes the state every control period (scaled by
    ``real_time_factor``).  The physics of a period runs when the command answering
    the state before comes (its stamp, see :func:`command_stamp`), so the state is
    ready at the tick: a robot's sensors read it at once, where stepping MuJoCo
    first took 0.1 to 0.2 ms of the controller's period.  Without that command by
    the tick, the period steps at the tick with the latest command held, and
    counts as a deadline miss.  Command timeout (``command_timeout_periods``
    N > 0): from the N-th consecutive period without a fresh command on, the held
    command is replaced by joint damping ``tau = -kd v`` (the robot's safe-mode gains
    for one simulation step, ``safe_damping``, applied at every step) until a fresh command comes: a killed
    controller does not leave its last torque applied (a forward_command_controller
    would).  Each entry into damping is logged and counted (``command_timeouts``).

The simulated world (read-only parameters; the controller keeps its nominal model): floor
``friction``, MuJoCo ``integrator`` and ``cone``, link masses (``mass_scale``,
``torso_added_mass``), a slope (gravity tilted by ``slope_deg`` over ``slope_ramp``),
``command_delay_periods`` of latency, Gaussian noise on the published joint states and
odometry (``noise_*``, seeded, drawn once per stamp), and ``pause_at``: the bridge pauses
itself at that simulated time (lockstep: a driver changes a command at an exact instant).
These are what ``wbc scenarios --through ros`` varies.
"""

from __future__ import annotations

import json
import time

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import WrenchStamped
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Bool, Empty, Float64MultiArray, String
from std_srvs.srv import SetBool, Trigger

from whole_body_control.errors import SimulationUnstable, WbcError
from whole_body_control.robot import load_robot
from whole_body_control.ros import conversions as cv
from whole_body_control.ros.params import (
    INF,
    REALTIME_PRIORITY,
    LogThrottle,
    Param,
    Ring,
    declare,
    per_period,
    quantiles,
    result,
    spin,
)
from whole_body_control.ros.qos import COMMAND_QOS, STATE_QOS
from whole_body_control.sim import SimConfig, Simulation
from whole_body_control.sim.fall import FallDetector

PARAMS = [
    REALTIME_PRIORITY,
    Param("robot", "talos", "robot name (config/robots/<name>.yaml) or YAML path", read_only=True),
    Param(
        "mode", "lockstep", "'lockstep': one control period per command; 'realtime': wall-clock timer", read_only=True
    ),
    Param("timestep", 0.001, "simulation timestep [s]", (1e-5, 0.01), read_only=True),
    Param("control_period", 0.001, "control period [s]; a multiple of the timestep", (1e-5, 0.1), read_only=True),
    Param("controller_name", "effort_controller", "commands come on /<controller_name>/commands", read_only=True),
    Param("joints", [], "joint order of the commands (empty: the robot's joints in Pinocchio order)", read_only=True),
    Param("real_time_factor", 1.0, "realtime mode: simulated seconds per wall second [-]", (0.01, 100.0)),
    Param("end_time", 0.0, "stop stepping at this simulated time [s] (0: never)", (0.0, INF)),
    Param("start_paused", False, "start paused (/sim/pause false starts)"),
    Param("push_duration", 0.1, "duration of a /sim/push force [s]", (1e-4, 10.0)),
    Param("resend_period", 1.0, "lockstep: re-send an unanswered state after this many wall seconds", (0.01, 60.0)),
    Param("status_period", 0.1, "period of /sim/status in simulated time [s]", (1e-3, 10.0)),
    Param("base_frame", "base_link", "child frame of the odometry and frame of the IMU", read_only=True),
    Param(
        "command_timeout_periods",
        3,
        "realtime: damping (-kd v) from this many control periods without a fresh command on (0: hold forever)",
        (0, 1000000),
    ),
    Param("step_periods", 1, "control periods per ~/step_simulation call", (1, 1000000)),
    Param("diagnostics_period", 0.5, "period of /diagnostics [s] (wall clock)", (0.01, 60.0), read_only=True),
    # the simulated world (what a scenario changes; the controller keeps its nominal model)
    Param("friction", 1.0, "floor and foot sliding friction of the simulation [-]", (1e-3, 10.0), read_only=True),
    Param("integrator", "implicitfast", "MuJoCo integrator: euler | implicitfast | implicit | rk4", read_only=True),
    Param("cone", "pyramidal", "MuJoCo friction cone: pyramidal | elliptic", read_only=True),
    Param("mass_scale", 1.0, "every simulated link mass and inertia times this [-]", (0.1, 10.0), read_only=True),
    Param(
        "torso_added_mass",
        0.0,
        "mass added to the torso link, inertia scaled with it [kg]",
        (-1e3, 1e3),
        read_only=True,
    ),
    Param(
        "slope_deg",
        0.0,
        "gravity tilts about y by this angle [deg] over slope_ramp (a slope along +x; > 0: uphill walking forward)",
        (-45.0, 45.0),
        read_only=True,
    ),
    Param(
        "slope_ramp",
        2.0,
        "time over which gravity tilts from vertical to slope_deg [s] (simulated)",
        (0.0, INF),
        read_only=True,
    ),
    Param(
        "command_delay_periods",
        0,
        "the simulation applies the command received this many control periods earlier (latency) [-]",
        (0, 1000),
        read_only=True,
    ),
    Param(
        "pause_at",
        0.0,
        "pause once the simulated time reaches this [s] (0: never; /sim/pause false resumes)",
        (0.0, INF),
    ),
    # Gaussian noise on the published state (standard deviations; the IMU message is not noised)
    Param("noise_joint_position", 0.0, "/joint_states position noise [rad]", (0.0, 1.0), read_only=True),
    Param("noise_joint_velocity", 0.0, "/joint_states velocity noise [rad/s]", (0.0, 10.0), read_only=True),
    Param("noise_orientation", 0.0, "odometry orientation noise (rotation vector) [rad]", (0.0, 1.0), read_only=True),
    Param("noise_angular_velocity", 0.0, "odometry angular velocity noise [rad/s]", (0.0, 10.0), read_only=True),
    Param("noise_linear_velocity", 0.0, "odometry linear velocity noise [m/s]", (0.0, 10.0), read_only=True),
    Param("noise_seed", 0, "seed of the noise generator", (0, 2**31 - 1), read_only=True),
]


MISS_TIMES = 200  # deadline misses whose simulated time the status lists


class CommandTimeout:
    """Hardware-side command timeout: which effort to apply in each control period.

    ``period(fresh)`` is called once per control period with whether a fresh command
    came since the previous one; it returns True when the period must be damped: from
    the ``limit``-th consecutive period without a fresh command on (``limit`` 0: never).
    """

    def __init__(self, limit: int):
        self.limit = int(limit)
        self.missed = 0  # consecutive periods without a fresh command
        self.timeouts = 0  # entries into damping
        self.damped_periods = 0

    def period(self, fresh: bool) -> bool:
        self.missed = 0 if fresh else self.missed + 1
        damped = self.limit > 0 and self.missed >= self.limit
        if damped:
            self.timeouts += self.missed == self.limit
            self.damped_periods += 1
        return damped


def command_stamp(msg: Float64MultiArray) -> int | None:
    """Stamp [ns] of the state a command answers (layout label ``stamp_ns=<ns>``), or None
    (the bridge reads it from the command's bytes: :func:`conversions.command_from_cdr`)."""
    for dim in msg.layout.dim:
        if dim.label.startswith("stamp_ns="):
            try:
                return int(dim.label[len("stamp_ns=") :])
            except ValueError:
                return None
    return None


class MujocoBridge(Node):
    def __init__(self, **kwargs):
        super().__init__("mujoco_bridge", **kwargs)
        self.throttle = LogThrottle()  # per-period log messages: at most one a second
        p = declare(self, PARAMS)
        self.p = p
        self.robot = load_robot(p["robot"])
        try:
            config = SimConfig(
                timestep=p["timestep"],
                visual_meshes=False,
                friction=p["friction"],
                integrator=p["integrator"],
                cone=p["cone"],
            )
            config.validate()
        except (TypeError, ValueError) as exc:
            raise WbcError(f"simulation parameters: {exc}") from exc
        if p["integrator"] not in ("euler", "implicitfast", "implicit", "rk4") or p["cone"] not in (
            "pyramidal",
            "elliptic",
        ):
            raise WbcError(f"parameters 'integrator' / 'cone': unknown value '{p['integrator']}' / '{p['cone']}'")
        self.sim = Simulation(self.robot, config)
        self._edit_model(p["mass_scale"], p["torso_added_mass"])
        self.gravity = float(np.linalg.norm(self.sim.model.opt.gravity))  # [m/s^2]
        self.kd_timeout = self.robot.safe_damping(self.sim.timestep)  # the command timeout's damping, per step
        self._set_gravity(0.0)
        self.delayed: list[np.ndarray] = []  # commands waiting for command_delay_periods
        self.noise_rng = np.random.default_rng(p["noise_seed"])
        self._noisy: tuple[int, np.ndarray, np.ndarray] | None = None  # (stamp, q, v) last published
        self.substeps = max(1, round(p["control_period"] / p["timestep"]))
        if abs(self.substeps * p["timestep"] - p["control_period"]) > 1e-9:
            raise WbcError(f"control_period {p['control_period']} s is not a multiple of timestep {p['timestep']} s")
        joints = p["joints"] or list(self.robot.joint_names)
        self.command_map = cv.JointMap(self.robot.joint_names)
        try:
            self.command_index = self.command_map.indices(joints)
        except WbcError as exc:
            raise WbcError(f"parameter 'joints': {exc}") from exc
        self.lockstep = p["mode"] == "lockstep"
        if p["mode"] not in ("lockstep", "realtime"):
            raise WbcError(f"parameter 'mode' must be 'lockstep' or 'realtime', got '{p['mode']}'")
        self.paused = bool(p["start_paused"])
        self.tau = np.zeros(self.robot.na)
        self.fresh_command = False
        self.pending_ns: int | None = None  # stamp of the state waiting for its command
        self.stepped = False  # real time: the next state is computed, published at the tick
        self.stepped_on_command = 0  # real time: periods that ran when their command came
        self.last_publish_wall = 0.0
        self.steps = 0  # control periods
        self.deadline_misses = 0
        self.miss_times: list[float] = []  # [s] simulated time of the first MISS_TIMES misses (where they are)
        self.rejected = 0
        self.round_trips = Ring(5000)  # [s] lockstep: state -> next command; real time: state -> its answer
        self.published_wall: dict[int, float] = {}  # real time: stamp -> wall time published (recent states)
        self.wall_start: float | None = None
        self.fall = FallDetector(self.robot)
        self.finished = False
        self._pushes: list[tuple[int, str, np.ndarray]] = []
        self._next_status_ns = 0
        self.timeout = CommandTimeout(p["command_timeout_periods"] if not self.lockstep else 0)
        self.damping = False  # the last period was damped (command timeout)
        self.applied = np.zeros(self.robot.na)  # effort applied in the last simulation step [N m]

        self.clock_pub = self.create_publisher(Clock, "/clock", STATE_QOS)
        self.js_pub = self.create_publisher(JointState, "/joint_states", STATE_QOS)
        self.imu_pub = self.create_publisher(Imu, "/imu", STATE_QOS)
        self.odom_pub = self.create_publisher(Odometry, "/ground_truth/odom", STATE_QOS)
        self.wrench_pubs = {
            s: self.create_publisher(WrenchStamped, f"/{s}_foot/wrench", STATE_QOS) for s in ("left", "right")
        }
        self.status_pub = self.create_publisher(String, "/sim/status", 10)
        topic = f"/{p['controller_name']}/commands"
        # raw: the command is read from its CDR bytes (cv.command_from_cdr), every control period
        self.cmd_sub = self.create_subscription(Float64MultiArray, topic, self.on_command, COMMAND_QOS, raw=True)
        self.create_subscription(Bool, "/sim/pause", self.on_pause, 10)
        self.create_subscription(Empty, "/sim/reset", self.on_reset, 10)
        self.create_subscription(WrenchStamped, "/sim/push", self.on_push, 10)
        self.create_subscription(WrenchStamped, "~/push", self.on_push, 10)
        self.create_service(SetBool, "~/set_pause", self.srv_set_pause)
        self.create_service(Trigger, "~/reset_world", self.srv_reset_world)
        self.create_service(Trigger, "~/step_simulation", self.srv_step_simulation)
        self.diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self.create_timer(p["diagnostics_period"], self.publish_diagnostics)
        self.add_on_set_parameters_callback(self.on_set_parameters)
        if self.lockstep:
            self.create_timer(0.01, self.lockstep_watch)
        else:
            self.timer = self.create_timer(p["control_period"] / p["real_time_factor"], per_period(self.realtime_tick))
        self.get_logger().info(
            f"{self.robot.name}: {p['mode']} at {1.0 / p['control_period']:.0f} Hz "
            f"({self.substeps} x {p['timestep']} s), commands on {topic}"
        )

    def _edit_model(self, mass_scale: float, torso_added_mass: float) -> None:
        """The simulated robot's masses (the controller keeps its nominal model); then the reset."""
        model = self.sim.model
        if mass_scale != 1.0:
            model.body_mass[1:] *= mass_scale
            model.body_inertia[1:] *= mass_scale
        if torso_added_mass != 0.0:
            body = model.body(self.robot.config.torso_frame)
            mass = float(body.mass[0])
            if mass + torso_added_mass <= 0:
                raise WbcError(
                    f"parameter 'torso_added_mass': torso mass {mass} kg + {torso_added_mass} kg is not positive"
                )
            model.body_inertia[body.id] *= (mass + torso_added_mass) / mass
            model.body_mass[body.id] = mass + torso_added_mass
        self.sim.reset(self.robot.q_ref)

    def _set_gravity(self, t: float) -> None:
        """Gravity tilted about y by ``slope_deg`` scaled by ``t / slope_ramp`` (a slope along +x)."""
        deg, ramp = self.p["slope_deg"], self.p["slope_ramp"]
        if deg == 0.0:
            return
        a = np.radians(deg) * (min(1.0, max(0.0, t / ramp)) if ramp > 0 else 1.0)
        self.sim.model.opt.gravity[:] = [-self.gravity * np.sin(a), 0.0, -self.gravity * np.cos(a)]

    def _noised(self, ns: int, q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The published state: ``q, v`` with the noise parameters' Gaussian noise, drawn once
        per stamp (a re-sent state is the same)."""
        p = self.p
        sd = [p[k] for k in ("noise_joint_position", "noise_joint_velocity", "noise_orientation")]
        sd += [p["noise_angular_velocity"], p["noise_linear_velocity"]]
        if not any(sd):
            return q, v
        if self._noisy is not None and self._noisy[0] == ns:
            return self._noisy[1], self._noisy[2]
        import pinocchio as pin

        rng = self.noise_rng
        q, v = q.copy(), v.copy()
        x, y, z, w = q[3:7]
        R = pin.Quaternion(w, x, y, z).toRotationMatrix() @ pin.exp3(rng.normal(0.0, sd[2], 3))
        q[3:7] = pin.Quaternion(R).coeffs()
        q[7:] += rng.normal(0.0, sd[0], q.size - 7)
        v[:3] += rng.normal(0.0, sd[4], 3)
        v[3:6] += rng.normal(0.0, sd[3], 3)
        v[6:] += rng.normal(0.0, sd[1], v.size - 6)
        self._noisy = (ns, q, v)
        return q, v

    # -- parameters --------------------------------------------------------------------------

    def on_set_parameters(self, params):
        for prm in params:
            if prm.name == "real_time_factor" and not self.lockstep:
                self.destroy_timer(self.timer)
                self.timer = self.create_timer(self.p["control_period"] / prm.value, per_period(self.realtime_tick))
            if prm.name == "command_timeout_periods" and not self.lockstep:
                self.timeout.limit = prm.value
            self.p[prm.name] = prm.value
        return result()

    # -- inputs --------------------------------------------------------------------------------

    def on_command(self, msg: bytes) -> None:
        """A serialized Float64MultiArray (see :func:`command_stamp` for its stamp)."""
        try:
            data, stamp = cv.command_from_cdr(msg)
        except ValueError as exc:
            self.rejected += 1
            if self.throttle("command unreadable"):
                self.get_logger().error(f"command rejected: {exc}")
            return
        if data.size != self.command_index.size:
            self.rejected += 1
            if self.throttle("command size"):
                self.get_logger().error(
                    f"command rejected: expected {self.command_index.size} efforts (joints parameter), got {data.size}"
                )
            return
        if not np.all(np.isfinite(data)):
            self.rejected += 1
            if self.throttle("command non-finite"):
                self.get_logger().error("command rejected: non-finite efforts")
            return
        if self.lockstep and stamp is not None and stamp != self.pending_ns:
            return  # answers another state (late duplicate)
        self.tau = data[self.command_index]  # robot joint k is entry command_index[k] of the command
        self.fresh_command = True
        if self.lockstep and self.pending_ns is not None and not self.paused and not self.finished:
            self.round_trips.append(time.perf_counter() - self.last_publish_wall)
            self.advance()
        elif not self.lockstep and stamp is not None and stamp in self.published_wall:
            # real time: the command latency, from publishing a state to the command answering it
            self.round_trips.append(time.perf_counter() - self.published_wall.pop(stamp))
            if stamp == self.pending_ns and not (self.stepped or self.paused or self.finished):
                self.step_period()  # the state it answers is the newest: its period can run now
                self.stepped = True
                self.stepped_on_command += 1

    def on_pause(self, msg: Bool) -> None:
        was = self.paused
        self.paused = bool(msg.data)
        if was and not self.paused and self.lockstep:
            self.publish_state()  # resume: ask for the next command

    def on_reset(self, _msg: Empty | None = None) -> None:
        self.sim.reset(self.robot.q_ref)
        self.tau[:] = 0.0
        self.applied[:] = 0.0
        self.fall = FallDetector(self.robot)
        self.finished = False
        self._pushes.clear()
        self.get_logger().info("simulation reset")
        if self.lockstep or self.paused:
            self.publish_state()  # the reset state (lockstep: it asks for the next command)

    # -- services (mujoco_ros2_control's names) ---------------------------------------------------

    def srv_set_pause(self, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        self.on_pause(Bool(data=bool(request.data)))
        response.success, response.message = True, "paused" if self.paused else "running"
        return response

    def srv_reset_world(self, _request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        self.on_reset()
        response.success, response.message = True, f"reset to the reference posture at t = {self.now_ns() * 1e-9} s"
        return response

    def srv_step_simulation(self, _request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        if not self.paused:
            response.success, response.message = False, "the simulation must be paused (~/set_pause)"
            return response
        if self.finished:
            response.success, response.message = False, "end_time reached"
            return response
        n = int(self.p["step_periods"])
        for _ in range(n):
            self.advance()
            if self.finished:
                break
        response.success, response.message = True, f"t = {self.now_ns() * 1e-9:.6f} s"
        return response

    def on_push(self, msg: WrenchStamped) -> None:
        body = msg.header.frame_id or self.robot.config.torso_frame
        at_ns = cv.stamp_to_ns(msg.header.stamp)
        self._pushes.append((at_ns, body, cv.vec3(msg.wrench.force)))

    # -- stepping ------------------------------------------------------------------------------

    def now_ns(self) -> int:
        return cv.seconds_to_ns(self.steps * self.p["control_period"])

    def advance(self) -> None:
        """One control period with the held command (unless it ran already), then publish the state."""
        if not self.stepped:
            self.step_period()
        self.stepped = False
        self.publish_state()
        sim = self.sim  # the fall check after the state went out (it costs 35 us)
        polygon = np.zeros((0, 2))  # height and body-contact criteria only (no capture point here)
        if self.fall.reason is None and self.fall.update(sim.time, sim, sim.com(), np.zeros(3), polygon):
            self.get_logger().error(f"fall at t = {sim.time:.3f} s: {self.fall.reason}")

    def step_period(self) -> None:
        """One control period of physics with the held command (a miss without a fresh one)."""
        if self.wall_start is None:
            self.wall_start = time.perf_counter()
        now = self.now_ns()
        for push in [x for x in self._pushes if x[0] <= now]:
            self._pushes.remove(push)
            try:
                self.sim.push(push[1], push[2], self.p["push_duration"])
                self.get_logger().info(f"push {push[2].tolist()} N on '{push[1]}' at t = {now * 1e-9:.3f} s")
            except ValueError as exc:
                self.get_logger().error(str(exc))
        if not self.fresh_command:
            self.deadline_misses += 1
            if len(self.miss_times) < MISS_TIMES:
                self.miss_times.append(round(now * 1e-9, 4))
        damping = self.timeout.period(self.fresh_command)
        self.fresh_command = False
        if damping and not self.damping:
            if self.throttle("command timeout"):
                self.get_logger().warning(
                    f"command timeout: no fresh command for {self.timeout.limit} control periods, "
                    f"damping until the next one (t = {now * 1e-9:.3f} s)"
                )
        elif self.damping and not damping:
            if self.throttle("fresh command"):
                self.get_logger().info(f"fresh command: damping ends (t = {now * 1e-9:.3f} s)")
        self.damping = damping
        tau = self.tau
        delay = self.p["command_delay_periods"]
        if delay > 0:  # the command received `delay` periods ago (the first one until then)
            self.delayed.append(self.tau.copy())
            if len(self.delayed) > delay + 1:
                self.delayed.pop(0)
            tau = self.delayed[0]
        try:
            for _ in range(self.substeps):
                self._set_gravity(self.sim.time)
                self.applied = -self.kd_timeout * self.sim.v[6:] if damping else tau
                self.sim.step(self.applied)
        except SimulationUnstable as exc:  # MuJoCo blew up: nothing left to simulate
            self.get_logger().error(f"{exc}: the simulation stops")
            self.fall.unstable(now * 1e-9, exc)
            self.finished = True
        self.steps += 1
        end = self.p["end_time"]
        if end > 0 and self.now_ns() >= cv.seconds_to_ns(end):
            self.finished = True
        pause_at = self.p["pause_at"]
        if pause_at > 0 and not self.paused and now < cv.seconds_to_ns(pause_at) <= self.now_ns():
            self.paused = True  # the state below is published; /sim/pause false asks for its command
            self._next_status_ns = self.now_ns()  # and /sim/status with it: the pause is seen
            self.get_logger().info(f"paused at t = {self.now_ns() * 1e-9:.3f} s (pause_at)")

    def publish_state(self) -> None:
        sim, robot = self.sim, self.robot
        ns = self.now_ns()
        q, v = self._noised(ns, sim.q, sim.v)
        # CDR bytes: rclpy's message objects cost 4 to 13 times more per message
        js = cv.joint_state_cdr(ns, robot.joint_names, q[7:], v[6:], self.applied)
        if not self.lockstep:
            # real time: the joint states first, the command's deadline starts with them (the
            # clock took 0.05 ms before them, the IMU and base state 0.1 ms); a subscriber ticks
            # on them with the others of the period before, as ros2_control's broadcasters
            # publish in no set order (the controller takes a state up to a period ahead of its
            # clock as received at its stamp)
            self.js_pub.publish(js)
            js_wall = time.perf_counter()
        self.clock_pub.publish(cv.clock_cdr(ns))  # (lockstep: first, a node's clock reads ns when the state comes)
        imu = sim.imu()
        self.imu_pub.publish(cv.imu_cdr(ns, self.p["base_frame"], imu.orientation, imu.gyro, imu.linear_acceleration))
        self.odom_pub.publish(cv.odometry_cdr(ns, q[:7], v[:6], self.p["base_frame"]))
        if any(pub.get_subscription_count() for pub in self.wrench_pubs.values()):  # the sole forces cost
            for side, w in sim.foot_wrenches().items():
                self.wrench_pubs[side].publish(cv.wrench_cdr(ns, robot.feet[side].frame, w))
        status_due = ns >= self._next_status_ns or self.finished
        if status_due:
            self._next_status_ns = ns + cv.seconds_to_ns(self.p["status_period"])
            self.publish_status()
        if self.lockstep:
            # joint states last: a subscriber that has them has the rest of this instant (same stamp)
            self.js_pub.publish(js)
        self.pending_ns = None if self.finished else ns
        self.last_publish_wall = time.perf_counter()
        if not self.lockstep:
            self.published_wall[ns] = js_wall  # the command latency counts from the joint states
            while len(self.published_wall) > 64:
                del self.published_wall[next(iter(self.published_wall))]

    def status(self) -> dict:
        q = self.sim.q
        wall = time.perf_counter() - self.wall_start if self.wall_start else 0.0
        rt_median, rt_p99 = quantiles(self.round_trips.values() * 1e3, (0.5, 0.99))
        return {
            "time": self.sim.time,
            "steps": self.steps,
            "mode": self.p["mode"],
            "paused": self.paused,
            "finished": self.finished,
            "fell": self.fall.reason is not None,
            "fall_reason": self.fall.reason,
            "control_rate_hz": self.steps / wall if wall > 0 else 0.0,
            "real_time_factor": self.sim.time / wall if wall > 0 else 0.0,
            "deadline_misses": self.deadline_misses,
            "deadline_miss_times_s": self.miss_times,
            "stepped_on_command": self.stepped_on_command,
            "command_timeout_periods": self.timeout.limit,
            "command_timeouts": self.timeout.timeouts,
            "damped_periods": self.timeout.damped_periods,
            "damping": self.damping,
            "rejected_commands": self.rejected,
            "round_trip_ms_median": rt_median,
            "round_trip_ms_p99": rt_p99,
            "base_pose": [float(x) for x in q[:7]],
        }

    def publish_status(self) -> None:
        self.status_pub.publish(String(data=json.dumps(self.status())))

    def publish_diagnostics(self) -> None:
        status = self.status()
        if status["fell"]:
            level, message = DiagnosticStatus.ERROR, f"fell: {status['fall_reason']}"
        elif status["damping"]:
            level, message = DiagnosticStatus.WARN, "command timeout: damping"
        else:
            level, message = DiagnosticStatus.OK, "paused" if status["paused"] else "running"
        values = [KeyValue(key=k, value=v if isinstance(v, str) else json.dumps(v)) for k, v in status.items()]
        diag = DiagnosticStatus(
            level=level, name="mujoco_bridge", message=message, hardware_id=self.robot.name, values=values
        )
        msg = DiagnosticArray(status=[diag])
        msg.header.stamp = cv.ns_to_stamp(self.now_ns())
        self.diag_pub.publish(msg)

    def lockstep_watch(self) -> None:
        """Lockstep start-up and re-sends: publish the state until a command answers it."""
        if self.paused or self.finished:
            return
        if self.pending_ns is None:
            if self.steps == 0 and self.cmd_sub.get_publisher_count() > 0:
                self.publish_state()
            return
        if time.perf_counter() - self.last_publish_wall > self.p["resend_period"]:
            self.publish_state()

    def realtime_tick(self) -> None:
        if self.stepped:
            self.advance()  # a period that ran when its command came: its state goes out now
            return
        if self.paused or self.finished:
            return
        if self.steps == 0 and not self.fresh_command:
            self.publish_state()  # wait for the controller's first command before time runs
            return
        self.advance()


def main(args=None) -> None:
    spin(MujocoBridge, args)


if __name__ == "__main__":
    main()
