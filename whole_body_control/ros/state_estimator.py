"""``state_estimator``: floating-base position and velocity for hardware, from the
IMU and the leg kinematics of the feet in contact.

Orientation and angular velocity are the IMU's (the IMU frame is the base
frame).  Position and linear velocity (world) come from a linear Kalman filter
on ``x = [p, v]``:

* predict with the accelerometer: ``a = R f_imu - g``;
* for each foot in contact (normal force above ``contact_force`` on
  ``/<side>_foot/wrench``; both feet when no wrench was ever received), the foot
  stays where it touched down (its *anchor* ``a_f``): ``p = a_f - R r_f`` and
  ``v = -(d/dt)(R r_f)`` with ``r_f`` the sole position in the base frame from
  the joint positions (Pinocchio forward kinematics) and its rate from the
  joint velocities and the gyro.

At start-up the base is placed so that the lowest sole is at z = 0 above the
world origin's ``initial_xy``.  Publishes ``/state_estimator/odom``
(nav_msgs/Odometry, stamped with the joint states' stamp, twist in the base
frame) for each /joint_states.
"""

from __future__ import annotations

import numpy as np
from geometry_msgs.msg import WrenchStamped
from nav_msgs.msg import Odometry
from rclpy.node import Node
from sensor_msgs.msg import Imu, JointState

from whole_body_control.estimation import SIDES, LegOdometry
from whole_body_control.robot import load_robot
from whole_body_control.ros import conversions as cv
from whole_body_control.ros.params import INF, LogThrottle, Param, declare, result, spin
from whole_body_control.ros.qos import STATE_QOS

PARAMS = [
    Param("robot", "talos", "robot name (config/robots/<name>.yaml) or YAML path", read_only=True),
    Param("contact_force", 50.0, "normal force above which a foot is in contact [N]", (0.0, INF)),
    Param("position_noise", 1.0e-3, "std of the kinematic base position measurement [m]", (1e-9, 10.0)),
    Param("velocity_noise", 2.0e-2, "std of the kinematic base velocity measurement [m/s]", (1e-9, 10.0)),
    Param("acceleration_noise", 0.5, "std of the accelerometer (process noise) [m/s^2]", (1e-9, 100.0)),
    Param("initial_xy", [0.0, 0.0], "base position in the ground plane at start-up [m]"),
    Param("base_frame", "base_link", "child frame of the odometry", read_only=True),
]


class StateEstimatorNode(Node):
    def __init__(self, **kwargs):
        super().__init__("state_estimator", **kwargs)
        self.throttle = LogThrottle()  # per-period log messages: at most one a second
        p = declare(self, PARAMS)
        self.p = p
        self.robot = load_robot(p["robot"])
        self.reader = cv.JointStateReader(self.robot.joint_names)  # extra joints are ignored
        self.filter = LegOdometry(self.robot, p["position_noise"], p["velocity_noise"], p["acceleration_noise"])
        self.imus: dict[int, Imu] = {}
        self.wrenches: dict[str, WrenchStamped] = {}
        self.last_ns: int | None = None
        self.add_on_set_parameters_callback(self.on_set_parameters)
        self.pub = self.create_publisher(Odometry, "/state_estimator/odom", STATE_QOS)
        self.create_subscription(Imu, "/imu", self.on_imu, STATE_QOS)
        self.create_subscription(JointState, "/joint_states", self.on_joint_states, STATE_QOS)
        for side in SIDES:
            self.create_subscription(
                WrenchStamped, f"/{side}_foot/wrench", lambda m, s=side: self.wrenches.__setitem__(s, m), STATE_QOS
            )

    def on_set_parameters(self, params):
        values = dict(self.p)
        for prm in params:
            values[prm.name] = prm.value
        if len(values["initial_xy"]) != 2:
            return result(f"initial_xy needs 2 values [m], got {list(values['initial_xy'])}")
        self.p.update(values)
        self.filter.set_noise(values["position_noise"], values["velocity_noise"], values["acceleration_noise"])
        return result()

    def on_imu(self, msg: Imu) -> None:
        ns = cv.stamp_to_ns(msg.header.stamp)
        self.imus[ns] = msg
        while len(self.imus) > 32:
            del self.imus[min(self.imus)]

    def contacts(self) -> dict[str, bool]:
        if len(self.wrenches) < 2:
            return {s: True for s in SIDES}
        return {s: self.wrenches[s].wrench.force.z > self.p["contact_force"] for s in SIDES}

    def on_joint_states(self, msg: JointState) -> None:
        ns = cv.stamp_to_ns(msg.header.stamp)
        imu = self.imus.get(ns) or (self.imus[max(self.imus)] if self.imus else None)
        if imu is None:
            return
        qj, vj, missing = self.reader.read(msg)
        if missing:
            if self.throttle("missing joints"):
                self.get_logger().error(f"/joint_states lack joints {list(missing)}: no estimate")
            return
        quat, gyro, accel = cv.imu_from_msg(imu)
        if not all(np.all(np.isfinite(a)) for a in (quat, gyro, accel, qj, vj)):
            if self.throttle("non-finite state"):
                self.get_logger().error("non-finite joint states or IMU: no estimate")
            return
        dt = 0.0 if self.last_ns is None or ns <= self.last_ns else (ns - self.last_ns) * 1e-9
        if self.last_ns is not None and ns < self.last_ns:
            self.filter = LegOdometry(
                self.robot, self.p["position_noise"], self.p["velocity_noise"], self.p["acceleration_noise"]
            )
        self.last_ns = ns
        p, v_world, R = self.filter.update(dt, quat, gyro, accel, qj, vj, self.contacts(), self.p["initial_xy"])
        q_base = np.concatenate([p, quat / np.linalg.norm(quat)])
        v_base = np.concatenate([R.T @ v_world, gyro])
        self.pub.publish(cv.odometry_msg(msg.header.stamp, q_base, v_base, self.p["base_frame"]))


def main(args=None) -> None:
    spin(StateEstimatorNode, args)


if __name__ == "__main__":
    main()
