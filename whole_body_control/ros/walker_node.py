"""``zmp_walker``: the :class:`~zmp_walker.PatternGenerator` behind topics.

Subscribes:
    /cmd_vel (geometry_msgs/Twist: linear.x, linear.y [m/s], angular.z [rad/s]
    in the feet-midpoint frame; all zero stops; geometry_msgs/TwistStamped with
    ``cmd_vel_stamped``, as Nav2 sends it: it applies from its stamp on), /goal_pose
    (geometry_msgs/PoseStamped in the world frame: walk there),
    /joint_states + base_state (nav_msgs/Odometry): the robot state; the first
    one seeds the walker (sole poses, CoM); a state is a tick.
Publishes:
    /walker/reference (trajectory_msgs/MultiDOFJointTrajectory): the samples of
    the reference every ``sample_period`` [s] from ``header.stamp`` on (see
    :func:`~whole_body_control.ros.conversions.reference_trajectory_from_msg`,
    :class:`~whole_body_control.reference_trajectory.ReferenceBuffer` and docs/ros.md);
    every ``viz_period`` (state stamps): /walker/footsteps (nav_msgs/Path, upcoming
    footsteps), /walker/markers (visualization_msgs/MarkerArray: footsteps, ZMP, CoM,
    support polygon), /walker/status (std_msgs/String, JSON: command, walking, steps,
    ``batch_ms_max``: the longest reference batch since the last status, wall time).

The walker runs at ``rate`` [Hz], driven by the state stamps (so that lockstep
stays deterministic): when the state at ``ns`` arrives and the published samples
do not reach past ``ns + horizon - 1/rate``, it computes the samples from the last
published one + ``sample_period`` up to ``ns + horizon`` (one ``cycle(t)`` each, in
increasing ``t``) and publishes them as one trajectory; every other state costs a
dictionary look-up.  In real time (``state_poll_period`` > 0, as the graphs set it) the
walker reads the newest state every poll instead of handling each one: a batch
starts up to a poll later, on the state of that moment.  The first state seeds the
walker and is answered at once; a state older than the last one (reset) re-seeds it.
/cmd_vel and goal changes apply from the first sample of the next batch.  With ``com_mode: dcm`` the CoM
measured in the triggering state feeds every sample of its batch.  The contact
flags are those the controller should use: a foot is released ``contact_lead``
[s] before its lift-off (the force ramp of the controller).  A velocity command
equal to the current one is ignored (no replanning); one beyond the walker's limits
(:func:`~whole_body_control.walker_stage.velocity_command_problems`, what ``wbc walk``
refuses; forward: the fast gait's, ``fast_gait`` in config/walker.yaml) is warned about
and walked at the limit (the footstep planner clamps each step).  Above the nominal
speed the walker takes the fast gait (shorter, longer steps) as in-process: the same
:class:`~zmp_walker.PatternGenerator`.  With ``cmd_vel_timeout`` > 0 the walk stops
when no /cmd_vel came for that long.
"""

from __future__ import annotations

import json
import time
import types

import numpy as np
import pinocchio as pin
from geometry_msgs.msg import PoseStamped, Twist, TwistStamped
from nav_msgs.msg import Odometry, Path
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import String
from trajectory_msgs.msg import MultiDOFJointTrajectory
from visualization_msgs.msg import Marker, MarkerArray

from whole_body_control.config import wbc_config_for
from whole_body_control.errors import WbcError
from whole_body_control.estimation import SIDES, LegOdometry
from whole_body_control.reference_trajectory import ReferenceTrajectory
from whole_body_control.robot import load_robot
from whole_body_control.ros import conversions as cv
from whole_body_control.ros.params import (
    INF,
    REALTIME_PRIORITY,
    STATE_BEST_EFFORT,
    LogThrottle,
    Param,
    declare,
    result,
    spin,
)
from whole_body_control.ros.qos import REFERENCE_QOS, state_qos
from whole_body_control.state import KinematicState
from whole_body_control.walker_stage import (
    make_walker,
    velocity_command_problems,
    walker_config_for,
    walker_reference,
)
from zmp_walker import MeasuredState, WalkerError

SLOW_BATCH_S = 0.01  # [s] a reference batch longer than this is logged (wall and CPU time)

PARAMS = [
    REALTIME_PRIORITY,
    Param("robot", "talos", "robot name (config/robots/<name>.yaml) or YAML path", read_only=True),
    Param("walker_config", "", "walker YAML (empty: config/walker.yaml with the robot's section)", read_only=True),
    Param(
        "control_period",
        0.001,
        "control period [s]: the period of the states (default sample_period)",
        (1e-5, 0.1),
        read_only=True,
    ),
    Param(
        "com_mode",
        "reference",
        "'reference' (planned CoM) or 'dcm' (DCM feedback on the CoM measured at the start of each batch)",
        read_only=True,
    ),
    Param(
        "rate", 100.0, "walker rate [Hz]: a new trajectory every 1/rate [s] of state stamps", (0.1, 1e4), read_only=True
    ),
    Param(
        "horizon",
        0.03,
        "how far ahead of the state stamp the published trajectory reaches [s] (>= 1/rate)",
        (1e-4, 10.0),
        read_only=True,
    ),
    Param(
        "sample_period",
        0.0,
        "spacing of the trajectory samples [s] (0: control_period; coarser: the controller interpolates)",
        (0.0, 1.0),
        read_only=True,
    ),
    Param(
        "contact_lead",
        -1.0,
        "release a contact this long before lift-off [s] (< 0: the WBC's force ramp time)",
        (-1.0, 1.0),
        read_only=True,
    ),
    Param("cmd_vel_timeout", 0.0, "stop walking when no /cmd_vel came for this long [s] (0: never)", (0.0, INF)),
    Param(
        "cmd_vel_stamped",
        False,
        "/cmd_vel is geometry_msgs/TwistStamped (Nav2's enable_stamped_cmd_vel); a command applies from the "
        "first batch whose state is at or past its stamp (a driver can start a lockstep walk at an exact time)",
        read_only=True,
    ),
    Param("viz_period", 0.1, "period of the footstep path, markers and status [s] (state stamps)", (1e-3, 60.0)),
    Param(
        "base_source",
        "topic",
        "'topic': the base_state topic (nav_msgs/Odometry); 'seed': no base topic, the first state is placed "
        "from the IMU and the leg kinematics as the controller's in-process estimator does (com_mode reference)",
        read_only=True,
    ),
    Param(
        "imu_topic",
        "/imu_sensor_broadcaster/imu",
        "the base IMU: base_source seed places the first state from it; com_mode dcm reads gravity's direction "
        "against the floor from it (slopes)",
        read_only=True,
    ),
    Param(
        "state_poll_period",
        0.0,
        "real time: read the newest state every this long [s] (steady clock) instead of on every state; "
        "0: every state in order (lockstep).  The walker then wakes once per poll, not twice per control "
        "period (a 1 kHz topic costs a subscribing rclpy process about 8 % of a CPU)",
        (0.0, 1.0),
        read_only=True,
    ),
    STATE_BEST_EFFORT,
    Param(
        "state_history",
        1,
        "depth of the state subscriptions: 1 takes the newest state (real time); lockstep with com_mode dcm "
        "needs every state in order (the graph sets 64)",
        (1, 1000),
        read_only=True,
    ),
]


def _take_newest(sub) -> bytes | None:
    """The newest serialized message waiting in ``sub`` (None: nothing new), taken as
    rclpy's executors take one (``handle.take_message``)."""
    if sub is None:
        return None
    newest = None
    with sub.handle:
        while (taken := sub.handle.take_message(sub.msg_type, True)) is not None:
            newest = taken[0]
    return newest


def _marker(ns: str, mid: int, mtype: int, rgba, scale) -> Marker:
    m = Marker()
    m.header.frame_id = cv.WORLD_FRAME
    m.ns, m.id, m.type, m.action = ns, mid, mtype, Marker.ADD
    m.pose.orientation.w = 1.0
    m.scale.x, m.scale.y, m.scale.z = scale
    m.color.r, m.color.g, m.color.b, m.color.a = rgba
    return m


class WalkerNode(Node):
    def __init__(self, **kwargs):
        super().__init__("zmp_walker", **kwargs)
        self.throttle = LogThrottle()  # per-period log messages: at most one a second
        p = declare(self, PARAMS)
        self.p = p
        if p["com_mode"] not in ("reference", "dcm"):
            raise WbcError(f"parameter 'com_mode' must be 'reference' or 'dcm', got '{p['com_mode']}'")
        self.robot = load_robot(p["robot"], walker_config=p["walker_config"] or None)
        self.config, self.config_source = walker_config_for(self.robot)
        self.lead = p["contact_lead"] if p["contact_lead"] >= 0 else wbc_config_for(self.robot).contacts.transition_time
        self.state = KinematicState(self.robot)  # the CoM and the soles (no dynamics)
        self.reader = cv.JointStateReader(self.robot.joint_names)  # extra joints are ignored
        self.walker = None
        self.sample_ns = cv.seconds_to_ns(p["sample_period"] or p["control_period"])
        self.walker_period_ns = cv.seconds_to_ns(1.0 / p["rate"])
        self.horizon_ns = cv.seconds_to_ns(p["horizon"])
        if self.sample_ns < 1:
            raise WbcError(f"parameter 'sample_period' must be 0 (control_period) or >= 1 ns, got {p['sample_period']}")
        if self.horizon_ns < max(self.walker_period_ns, self.sample_ns):
            raise WbcError(
                f"parameter 'horizon' ({p['horizon']} s) must be at least 1/rate ({1.0 / p['rate']} s) "
                f"and sample_period ({self.sample_ns * 1e-9} s)"
            )
        self.js: dict[int, JointState] = {}
        self.base: dict[int, Odometry] = {}
        self.end_ns: int | None = None  # last published sample
        self.last_ref = None  # and its reference
        self.trajectories = 0
        self.catch_ups = 0  # batches that skipped planning at missed grid points (PatternGenerator.catch_up)
        self.batch_ms_max = 0.0  # the longest batch since the last status [ms]
        self.last_ns: int | None = None
        self.cmd: tuple[float, float, float] = (0.0, 0.0, 0.0)
        self.pending: tuple | None = None
        self.pending_ns = 0  # [ns] state stamp from which the pending command applies
        self.last_cmd_ns: int | None = None
        self._next_viz = 0
        self.add_on_set_parameters_callback(lambda params: result())
        self.ref_pub = self.create_publisher(MultiDOFJointTrajectory, "/walker/reference", REFERENCE_QOS)
        self.path_pub = self.create_publisher(Path, "/walker/footsteps", 1)
        self.marker_pub = self.create_publisher(MarkerArray, "/walker/markers", 1)
        self.status_pub = self.create_publisher(String, "/walker/status", 10)
        if p["cmd_vel_stamped"]:
            self.create_subscription(TwistStamped, "/cmd_vel", self.on_cmd_vel_stamped, 10)
        else:
            self.create_subscription(Twist, "/cmd_vel", self.on_cmd_vel, 10)
        self.create_subscription(PoseStamped, "/goal_pose", self.on_goal, 10)
        qos = state_qos(p["state_history"], best_effort=p["state_best_effort"])
        self._polled: dict[str, object] = {}  # (state_poll_period) the sampler's subscriptions
        self._sampler: Node | None = None
        if p["state_poll_period"] > 0:
            if p["state_history"] != 1:
                raise WbcError("parameter 'state_poll_period' needs state_history 1 (it reads the newest state)")
            # the state subscriptions on a node no executor spins: their samples wait in DDS
            # (depth 1, the newest) and cost this process nothing until a poll takes them;
            # global arguments off: the process's `__node` remap would give it this node's name
            self._sampler = Node(
                f"{self.get_name()}_state_sampler",
                context=self.context,
                use_global_arguments=False,
                enable_rosout=False,
                start_parameter_services=False,
            )
            self.create_timer(p["state_poll_period"], self.poll_states, clock=Clock(clock_type=ClockType.STEADY_TIME))
        self._subscribe_state("js", JointState, "/joint_states", self.on_joint_states, qos)
        if p["base_source"] not in ("topic", "seed"):
            raise WbcError(f"parameter 'base_source' must be 'topic' or 'seed', got '{p['base_source']}'")
        self.seed_only = p["base_source"] == "seed"
        if self.seed_only and p["com_mode"] == "dcm":
            raise WbcError("parameter 'base_source' seed needs com_mode 'reference' (dcm feeds back the base state)")
        self.imu = None
        self.base_quat: np.ndarray | None = None  # (x, y, z, w) of the state the walker last read
        if self.seed_only or p["com_mode"] == "dcm":
            self._subscribe_state("imu", Imu, p["imu_topic"], self.on_imu, qos)
        if not self.seed_only:
            self._subscribe_state("base", Odometry, "base_state", self.on_base, qos)

    def _subscribe_state(self, key: str, msg_type, topic: str, callback, qos) -> None:
        """A state topic (serialized): its callback on every message, or (state_poll_period)
        a subscription of the sampler that :meth:`poll_states` reads."""
        if self._sampler is None:
            self.create_subscription(msg_type, topic, callback, qos, raw=True)
        else:  # the name as this node resolves it (its remaps: base_state)
            name = self.resolve_topic_name(topic)
            self._polled[key] = self._sampler.create_subscription(msg_type, name, lambda _: None, qos, raw=True)

    def poll_states(self) -> None:
        """(state_poll_period) The newest IMU, base state and joint states, handled as if they
        had just come: a batch runs when the joint states and the base state of one stamp are
        in (the robot publishes them within a fraction of a period: a poll between them waits
        for the next)."""
        imu = _take_newest(self._polled.get("imu"))
        if imu is not None:
            self.on_imu(imu)
        base = _take_newest(self._polled.get("base"))
        if base is not None:
            self.base.clear()
            self.on_base(base)
        js = _take_newest(self._polled["js"])
        if js is not None:
            self.js.clear()
            self.on_joint_states(js)

    def destroy_node(self) -> None:
        if self._sampler is not None:
            self._sampler.destroy_node()
        super().destroy_node()

    # -- commands ----------------------------------------------------------------------------

    def on_cmd_vel(self, msg: Twist) -> None:
        self._velocity(cv.twist_from_msg(msg), 0)

    def on_cmd_vel_stamped(self, msg: TwistStamped) -> None:
        self._velocity(cv.twist_from_msg(msg.twist), cv.stamp_to_ns(msg.header.stamp))

    def _velocity(self, cmd: tuple[float, float, float], at_ns: int) -> None:
        self.last_cmd_ns = self.last_ns
        if cmd != self.cmd:
            self.cmd = cmd
            self.pending, self.pending_ns = ("velocity", cmd), at_ns
            self.get_logger().info(f"cmd_vel {cmd}")
            # the limits `wbc walk` checks (the fast gait's forward limit): beyond, the planner clamps
            for problem in velocity_command_problems(self.robot, self.config, self.config_source, *cmd):
                self.get_logger().warning(f"/cmd_vel: {problem}")
        self.publish_status()

    def on_goal(self, msg: PoseStamped) -> None:
        goal = cv.goal_from_msg(msg)
        self.pending, self.pending_ns = ("goal", goal), 0
        self.get_logger().info(f"goal {goal}")
        self.publish_status()

    # -- ticks -------------------------------------------------------------------------------

    # The state topics come at the control rate but are read only to seed the walker (and
    # for DCM feedback): they arrive serialized, and only the stamp is read from each one.

    def on_imu(self, data: bytes) -> None:
        self.imu = data

    def on_joint_states(self, data: bytes) -> None:
        ns = cv.cdr_stamp_ns(data)
        self.js[ns] = data
        if self.seed_only:
            if self.imu is None:
                if self.throttle("waiting for imu"):
                    self.get_logger().warning(f"waiting for {self.p['imu_topic']}")
                self.js.pop(ns)
                return
            self.base[ns] = None  # placed from the IMU and the legs when it seeds (see _seed_base)
        if ns in self.base:
            self.tick(ns)

    def on_base(self, data: bytes) -> None:
        ns = cv.cdr_stamp_ns(data)
        self.base[ns] = data
        if ns in self.js:
            self.tick(ns)

    def due(self, ns: int) -> bool:
        """Whether the state at ``ns`` [ns] needs a new batch of samples."""
        if self.walker is None or self.end_ns is None or (self.last_ns is not None and ns < self.last_ns):
            return True
        return self.end_ns <= ns + self.horizon_ns - self.walker_period_ns

    def tick(self, ns: int) -> None:
        js, base = self.js.pop(ns), self.base.pop(ns)
        for buf in (self.js, self.base):
            if buf:
                for k in [k for k in buf if k <= ns]:
                    del buf[k]
        if not self.due(ns):
            self.last_ns = ns
            return
        if self.last_ns is not None and ns < self.last_ns:
            self.get_logger().info("time went backwards (reset): re-seeding the walker")
            self.walker = None
        needs_state = self.walker is None or self.p["com_mode"] == "dcm"
        if needs_state:
            # seeding and DCM feedback read the state; the planned reference does not
            _, qj, vj, missing = self.reader.read_cdr(js)  # (message objects: 3 times the time)
            if missing or (base is None and self.imu is None):
                if self.throttle("missing joints"):
                    self.get_logger().error(f"/joint_states lack joints {list(missing)}: no walking reference")
                return
            if base is not None:
                _, qb, vb = cv.odometry_from_cdr(base)
            else:
                qb, vb = self._seed_base(qj, vj)
            self.base_quat = qb[3:7]
            q, v = cv.assemble_state(qb, vb, qj, vj)
            if not (np.all(np.isfinite(q)) and np.all(np.isfinite(v))):
                if self.throttle("non-finite state"):
                    self.get_logger().error("non-finite robot state: no walking reference")
                return
            self.state.update(q, v)
        self.last_ns = ns
        if self.walker is None:
            self.walker = make_walker(self.robot, types.SimpleNamespace(state=self.state), self.config)
            self.end_ns = None
            self.last_ref = None
            self._next_viz = 0
            self.get_logger().info(f"seeded at t = {ns * 1e-9:.3f} s")
        timeout = self.p["cmd_vel_timeout"]
        if timeout > 0 and self.cmd != (0.0, 0.0, 0.0) and self.last_cmd_ns is not None:
            if ns - self.last_cmd_ns > timeout * 1e9:
                self.get_logger().warning("no /cmd_vel for cmd_vel_timeout: stopping")
                self.cmd, self.pending, self.pending_ns = (0.0, 0.0, 0.0), ("velocity", (0.0, 0.0, 0.0)), 0
        wall, cpu = time.perf_counter(), time.thread_time()
        self.publish_trajectory(ns)
        wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
        self.batch_ms_max = max(self.batch_ms_max, wall * 1e3)
        if wall > SLOW_BATCH_S and self.throttle("slow batch"):
            why = "the walker" if cpu > 0.5 * wall else "it waited for a CPU"
            self.get_logger().warning(f"a reference batch took {wall * 1e3:.1f} ms (CPU {cpu * 1e3:.1f} ms: {why})")

    def gravity(self) -> np.ndarray | None:
        """Gravity in the walker's frame (the floor's, as the base state is): the newest
        IMU orientation (against gravity's vertical) against the base's (against the
        floor), as in-process runs read the simulated gravity; None before an IMU sample.
        On a slope the walker leans the CoM into it (:func:`zmp_walker.dcm.slope_shift`)."""
        if self.imu is None or self.base_quat is None:
            return None
        quat = cv.imu_from_cdr(self.imu)[1]
        if not (np.all(np.isfinite(quat)) and quat.dot(quat) > 0.25):
            return None
        r_gravity_base = pin.Quaternion(quat[3], *quat[:3]).normalized().toRotationMatrix()
        x, y, z, w = self.base_quat
        r_floor_base = pin.Quaternion(w, x, y, z).normalized().toRotationMatrix()
        g = float(np.linalg.norm(self.robot.model.gravity.linear))
        return r_floor_base @ r_gravity_base[2] * -g  # (the gravity frame's -z axis, seen from the floor's)

    def _seed_base(self, qj: np.ndarray, vj: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Base pose and velocity without a base topic: the IMU's orientation, the lowest sole
        on z = 0 above the world origin (what :class:`LegOdometry` starts from)."""
        _, quat, gyro, accel = cv.imu_from_cdr(self.imu)
        both = {"left": True, "right": True}
        p, v_world, R = LegOdometry(self.robot, 1e-3, 2e-2, 0.5).update(0.0, quat, gyro, accel, qj, vj, both)
        return np.concatenate([p, quat / np.linalg.norm(quat)]), np.concatenate([R.T @ v_world, gyro])

    def first_sample_ns(self, ns: int) -> int:
        """Time [ns] of the next sample to compute for the state at ``ns``: the one after the
        last published, or (first batch, or the states jumped past the published samples)
        the last grid point at or before ``ns``."""
        if self.end_ns is None:
            return ns
        nxt = self.end_ns + self.sample_ns
        if nxt <= ns:
            return nxt + (ns - nxt) // self.sample_ns * self.sample_ns
        return nxt

    def publish_trajectory(self, ns: int) -> None:
        """Samples from :meth:`first_sample_ns` to ``ns + horizon`` -> one /walker/reference."""
        walker = self.walker
        if self.pending is not None and ns >= self.pending_ns:
            kind, arg = self.pending
            self.pending = None
            try:
                if kind == "velocity":
                    walker.set_velocity(*arg)
                else:
                    walker.set_goal(*arg)
            except WalkerError as exc:
                self.get_logger().error(f"command rejected: {exc}")
        measured = None
        if self.p["com_mode"] == "dcm":
            # the soles where the kinematics put them, as the in-process walk measures them: the
            # walker re-anchors its plan on a landing that missed its footstep
            soles = {s: self.state.placement(self.robot.foot_frame_ids[s]).translation.copy() for s in SIDES}
            measured = MeasuredState(self.state.com.copy(), self.state.vcom.copy(), gravity=self.gravity(), feet=soles)
        start = self.first_sample_ns(ns)
        if self.end_ns is not None and start > self.end_ns + self.sample_ns:
            # behind (the states ran past the published samples): the plan at each grid point
            # missed would cost a planner update for samples no one will read
            skipped = walker.catch_up(start * 1e-9)
            if skipped:
                self.catch_ups += 1
                if self.throttle("caught up"):
                    self.get_logger().warning(
                        f"behind by {(start - self.end_ns) * 1e-6:.0f} ms at t = {ns * 1e-9:.3f} s: caught up "
                        f"without planning at {skipped} grid points"
                    )
        refs = []
        for k in range(start, ns + self.horizon_ns + 1, self.sample_ns):
            t = k * 1e-9
            try:
                refs.append(walker_reference(walker, t, self.lead, measured))
            except WalkerError as exc:
                if self.throttle("walker failed"):
                    self.get_logger().error(f"walker failed at t = {t:.3f} s: {exc}")
                break
        if not refs:
            return
        first = start
        if self.end_ns is not None and start == self.end_ns + self.sample_ns and self.last_ref is not None:
            # repeat the last published sample: consecutive trajectories overlap by one sample, so
            # that a controller between two grid points (real time) can always interpolate
            first, refs = self.end_ns, [self.last_ref, *refs]
        self.ref_pub.publish(
            cv.reference_trajectory_cdr(ReferenceTrajectory.from_references(first, self.sample_ns, refs))
        )
        self.last_ref = refs[-1]
        self.end_ns = first + (len(refs) - 1) * self.sample_ns
        self.trajectories += 1
        if ns >= self._next_viz:
            self._next_viz = ns + cv.seconds_to_ns(self.p["viz_period"])
            self.publish_viz(ns, refs[0])
            self.publish_status()

    def publish_viz(self, ns: int, ref) -> None:
        stamp = cv.ns_to_stamp(ns)
        steps = ref.upcoming_footsteps
        # the path's stamp is the time its steps are upcoming at (every step landing later is
        # in it, so a listener can drop an earlier plan of a step that was retimed)
        self.path_pub.publish(cv.footstep_path(cv.ns_to_stamp(cv.seconds_to_ns(ref.time)), steps))
        if not self.marker_pub.get_subscription_count():
            return  # the markers cost a walker batch's time (message objects): only for a viewer
        markers = MarkerArray()
        for i, step in enumerate(steps[:20]):
            sole = self.walker.soles[step.side]
            m = _marker(
                "footsteps",
                i,
                Marker.CUBE,
                (0.2, 0.4, 1.0, 0.6) if step.side == "left" else (1.0, 0.4, 0.2, 0.6),
                (sole.x_max - sole.x_min, sole.y_max - sole.y_min, 0.005),
            )
            center = step.pose.to_world(sole.center)
            m.pose.position = cv.to_point([center[0], center[1], step.position[2]])
            m.pose.orientation = cv.rotation_to_quat(step.pose.rotation)
            markers.markers.append(m)
        clear = Marker(action=Marker.DELETEALL, ns="footsteps")
        markers.markers.insert(0, clear)
        for name, point, rgba in (
            ("zmp", ref.zmp_cmd, (1.0, 0.0, 0.0, 1.0)),
            ("com", ref.com_pos, (0.0, 1.0, 0.0, 1.0)),
        ):
            m = _marker(name, 0, Marker.SPHERE, rgba, (0.04, 0.04, 0.04))
            m.pose.position = cv.to_point(point)
            markers.markers.append(m)
        pts = self.walker.zmp_reference.polygon(ns * 1e-9).vertices
        m = _marker("support_polygon", 0, Marker.LINE_STRIP, (1.0, 1.0, 0.0, 1.0), (0.01, 0.0, 0.0))
        z = float(ref.zmp_ref[2])
        m.points = [cv.to_point([x, y, z]) for x, y in [*pts, pts[0]]]
        markers.markers.append(m)
        for m in markers.markers:
            m.header.stamp = stamp
            m.header.frame_id = cv.WORLD_FRAME
        self.marker_pub.publish(markers)

    def publish_status(self) -> None:
        w = self.walker
        status = {
            "stamp_ns": self.last_ns,
            "cmd_vel": list(self.cmd),
            "pending": self.pending is not None,
            "seeded": w is not None,
            "walking": bool(w.is_walking) if w is not None else False,
            "steps_completed": int(w.steps_completed) if w is not None else 0,
            "reference_end_ns": self.end_ns,
            "trajectories": self.trajectories,
            "catch_ups": self.catch_ups,
            "batch_ms_max": self.batch_ms_max,
        }
        self.batch_ms_max = 0.0
        self.status_pub.publish(String(data=json.dumps(status)))


def main(args=None) -> None:
    spin(WalkerNode, args)


if __name__ == "__main__":
    main()
