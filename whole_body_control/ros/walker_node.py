"""``zmp_walker``: the :class:`~zmp_walker.PatternGenerator` behind topics.

Subscribes:
    /cmd_vel (geometry_msgs/Twist: linear.x, linear.y [m/s], angular.z [rad/s]
    in the feet-midpoint frame; all zero stops), /goal_pose
    (geometry_msgs/PoseStamped in the world frame: walk there),
    /joint_states + base_state (nav_msgs/Odometry): the robot state; the first
    one seeds the walker (sole poses, CoM), every one is a tick.
Publishes (stamped with the state's stamp):
    /walker/reference (trajectory_msgs/MultiDOFJointTrajectory, one point; see
    :data:`~whole_body_control.ros.conversions.REFERENCE_JOINTS` and docs/ros.md);
    every ``viz_period``: /walker/footsteps (nav_msgs/Path, upcoming footsteps),
    /walker/markers (visualization_msgs/MarkerArray: footsteps, ZMP, CoM, support
    polygon), /walker/status (std_msgs/String, JSON: command, walking, steps).

With ``com_mode: reference`` the reference does not depend on the measured
state, so the reference for the *next* control period is published as soon as
a state arrives (``lookahead: true``): the controller finds it waiting.  The
contact flags are those the controller should use: a foot is released
``contact_lead`` [s] before its lift-off (the force ramp of the controller).
A velocity command equal to the current one is ignored (no replanning); with
``cmd_vel_timeout`` > 0 the walk stops when no /cmd_vel came for that long.
"""

from __future__ import annotations

import dataclasses
import json
import types

import numpy as np
from geometry_msgs.msg import PoseStamped, Twist
from nav_msgs.msg import Odometry, Path
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from trajectory_msgs.msg import MultiDOFJointTrajectory
from visualization_msgs.msg import Marker, MarkerArray

from whole_body_control.config import load_wbc_config
from whole_body_control.errors import StateError, WbcError
from whole_body_control.robot import load_robot
from whole_body_control.ros import conversions as cv
from whole_body_control.ros.params import INF, Param, declare, result, spin
from whole_body_control.ros.qos import STATE_QOS
from whole_body_control.state import RobotState
from whole_body_control.walking import contacts_ahead, make_walker
from zmp_walker import MeasuredState, WalkerError, load_walker_config

PARAMS = [
    Param("robot", "talos", "robot name (config/robots/<name>.yaml) or YAML path", read_only=True),
    Param("walker_config", "", "walker YAML (empty: config/walker.yaml with the robot's section)", read_only=True),
    Param(
        "control_period",
        0.001,
        "control period [s]: the reference is published for each state",
        (1e-5, 0.1),
        read_only=True,
    ),
    Param(
        "com_mode",
        "reference",
        "'reference' (planned CoM, allows lookahead) or 'dcm' (DCM feedback on the measured CoM)",
        read_only=True,
    ),
    Param("lookahead", True, "com_mode reference: also publish the reference of the next control period"),
    Param(
        "contact_lead",
        -1.0,
        "release a contact this long before lift-off [s] (< 0: the WBC's force ramp time)",
        (-1.0, 1.0),
        read_only=True,
    ),
    Param("cmd_vel_timeout", 0.0, "stop walking when no /cmd_vel came for this long [s] (0: never)", (0.0, INF)),
    Param("viz_period", 0.1, "period of the footstep path, markers and status [s] (state stamps)", (1e-3, 60.0)),
]


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
        p = declare(self, PARAMS)
        self.p = p
        if p["com_mode"] not in ("reference", "dcm"):
            raise WbcError(f"parameter 'com_mode' must be 'reference' or 'dcm', got '{p['com_mode']}'")
        self.robot = load_robot(p["robot"])
        self.config = load_walker_config(p["walker_config"] or None, robot=self.robot.name)
        self.lead = (
            p["contact_lead"]
            if p["contact_lead"] >= 0
            else load_wbc_config(robot=self.robot.name).contacts.transition_time
        )
        self.state = RobotState(self.robot)
        self.joint_map = cv.JointMap(self.robot.joint_names)
        self.walker = None
        self.period_ns = cv.seconds_to_ns(p["control_period"])
        self.js: dict[int, JointState] = {}
        self.base: dict[int, Odometry] = {}
        self.published: set[int] = set()
        self.last_ns: int | None = None
        self.cmd: tuple[float, float, float] = (0.0, 0.0, 0.0)
        self.pending: tuple | None = None
        self.last_cmd_ns: int | None = None
        self._next_viz = 0
        self.add_on_set_parameters_callback(lambda params: result())
        self.ref_pub = self.create_publisher(MultiDOFJointTrajectory, "/walker/reference", 10)
        self.path_pub = self.create_publisher(Path, "/walker/footsteps", 1)
        self.marker_pub = self.create_publisher(MarkerArray, "/walker/markers", 1)
        self.status_pub = self.create_publisher(String, "/walker/status", 10)
        self.create_subscription(Twist, "/cmd_vel", self.on_cmd_vel, 10)
        self.create_subscription(PoseStamped, "/goal_pose", self.on_goal, 10)
        self.create_subscription(JointState, "/joint_states", self.on_joint_states, STATE_QOS)
        self.create_subscription(Odometry, "base_state", self.on_base, STATE_QOS)

    # -- commands ----------------------------------------------------------------------------

    def on_cmd_vel(self, msg: Twist) -> None:
        cmd = cv.twist_from_msg(msg)
        self.last_cmd_ns = self.last_ns
        if cmd != self.cmd:
            self.cmd = cmd
            self.pending = ("velocity", cmd)
            self.get_logger().info(f"cmd_vel {cmd}")
        self.publish_status()

    def on_goal(self, msg: PoseStamped) -> None:
        goal = cv.goal_from_msg(msg)
        self.pending = ("goal", goal)
        self.get_logger().info(f"goal {goal}")
        self.publish_status()

    # -- ticks -------------------------------------------------------------------------------

    def on_joint_states(self, msg: JointState) -> None:
        self.js[cv.stamp_to_ns(msg.header.stamp)] = msg
        self.try_tick()

    def on_base(self, msg: Odometry) -> None:
        self.base[cv.stamp_to_ns(msg.header.stamp)] = msg
        self.try_tick()

    def try_tick(self) -> None:
        common = set(self.js) & set(self.base)
        if not common:
            return
        ns = max(common)
        js, base = self.js[ns], self.base[ns]
        for buf in (self.js, self.base):
            for k in [k for k in buf if k <= ns]:
                del buf[k]
        if self.last_ns is not None and ns < self.last_ns:
            self.get_logger().info("time went backwards (reset): re-seeding the walker")
            self.walker = None
            self.published.clear()
        try:
            qj, vj = cv.joints_from_msg(js, self.joint_map)
        except StateError as exc:
            self.get_logger().error(f"/joint_states rejected: {exc}", throttle_duration_sec=1.0)
            return
        qb, vb = cv.base_from_odometry(base)
        q, v = cv.assemble_state(qb, vb, qj, vj)
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(v))):
            return
        self.last_ns = ns
        if self.walker is None or self.p["com_mode"] == "dcm":
            self.state.update(q, v)
        if self.walker is None:
            self.walker = make_walker(self.robot, types.SimpleNamespace(state=self.state), self.config)
            self.get_logger().info(f"seeded at t = {ns * 1e-9:.3f} s")
        timeout = self.p["cmd_vel_timeout"]
        if timeout > 0 and self.cmd != (0.0, 0.0, 0.0) and self.last_cmd_ns is not None:
            if ns - self.last_cmd_ns > timeout * 1e9:
                self.get_logger().warning("no /cmd_vel for cmd_vel_timeout: stopping")
                self.cmd, self.pending = (0.0, 0.0, 0.0), ("velocity", (0.0, 0.0, 0.0))
        stamps = [ns]
        if self.p["com_mode"] == "reference" and self.p["lookahead"]:
            stamps.append(ns + self.period_ns)
        for k in stamps:
            if k not in self.published:
                self.publish_reference(k)
        self.published = {k for k in self.published if k >= ns}

    def publish_reference(self, ns: int) -> None:
        walker = self.walker
        if self.pending is not None:
            kind, arg = self.pending
            self.pending = None
            try:
                if kind == "velocity":
                    walker.set_velocity(*arg)
                else:
                    walker.set_goal(*arg)
            except WalkerError as exc:
                self.get_logger().error(f"command rejected: {exc}")
        t = ns * 1e-9
        measured = MeasuredState(self.state.com.copy(), self.state.vcom.copy()) if self.p["com_mode"] == "dcm" else None
        try:
            ref = walker.cycle(t, measured)
        except WalkerError as exc:
            self.get_logger().error(f"walker failed at t = {t:.3f} s: {exc}", throttle_duration_sec=1.0)
            return
        contacts = contacts_ahead(walker, t, self.lead)
        feet = {s: _with_contact(ref.feet[s], contacts[s]) for s in ("left", "right")}
        msg = cv.reference_msg(cv.ns_to_stamp(ns), _replace(ref, feet=feet))
        self.ref_pub.publish(msg)
        self.published.add(ns)
        if ns >= self._next_viz:
            self._next_viz = ns + cv.seconds_to_ns(self.p["viz_period"])
            self.publish_viz(ns, ref)
            self.publish_status()

    def publish_viz(self, ns: int, ref) -> None:
        stamp = cv.ns_to_stamp(ns)
        steps = ref.upcoming_footsteps
        self.path_pub.publish(cv.footstep_path(stamp, steps))
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
        }
        self.status_pub.publish(String(data=json.dumps(status)))


def _with_contact(foot, in_contact: bool):
    return dataclasses.replace(foot, in_contact=bool(in_contact))


def _replace(ref, **changes):
    return dataclasses.replace(ref, **changes)


def main(args=None) -> None:
    spin(WalkerNode, args)


if __name__ == "__main__":
    main()
