"""Floating-base position and velocity from the IMU and the leg kinematics of the
feet in contact (ROS-free; the ``state_estimator`` node and the controller's
in-process estimator both use it).

Orientation and angular velocity are the IMU's (the IMU frame is the base
frame).  Position and linear velocity (world) come from a linear Kalman filter
on ``x = [p, v]``:

* predict with the accelerometer: ``a = R f_imu - g``;
* for each foot in contact, the foot stays where it touched down (its *anchor*
  ``a_f``): ``p = a_f - R r_f`` and ``v = -(d/dt)(R r_f)`` with ``r_f`` the sole
  position in the base frame from the joint positions (Pinocchio forward
  kinematics) and its rate from the joint velocities and the gyro.

At start-up the base is placed so that the lowest sole is at z = 0 above the
world origin's ``initial_xy``.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from whole_body_control.robot import RobotModel

GRAVITY = np.array([0.0, 0.0, 9.81])
SIDES = ("left", "right")


class LegOdometry:
    """The ROS-free filter (see the module docstring).  ``update`` returns ``(p, v)`` in the world."""

    def __init__(self, robot: RobotModel, position_noise: float, velocity_noise: float, acceleration_noise: float):
        self.robot = robot
        self.data = robot.model.createData()
        self.x: np.ndarray | None = None
        self.P = np.eye(6) * 1e-4
        self.anchors: dict[str, np.ndarray] = {}
        self.set_noise(position_noise, velocity_noise, acceleration_noise)

    def set_noise(self, position_noise: float, velocity_noise: float, acceleration_noise: float) -> None:
        self.Rm = np.diag([position_noise**2] * 3 + [velocity_noise**2] * 3)
        self.sigma_a = acceleration_noise

    def _feet(self, quat_xyzw, gyro, qj, vj) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Per sole: position relative to the base (world axes) and its rate with the base fixed in translation."""
        model, data = self.robot.model, self.data
        q = np.concatenate([[0.0, 0.0, 0.0], quat_xyzw / np.linalg.norm(quat_xyzw), qj])
        v = np.concatenate([[0.0, 0.0, 0.0], gyro, vj])
        pin.forwardKinematics(model, data, q, v)
        out = {}
        for side in SIDES:
            fid = self.robot.foot_frame_ids[side]
            r = pin.updateFramePlacement(model, data, fid).translation.copy()
            rdot = pin.getFrameVelocity(model, data, fid, pin.LOCAL_WORLD_ALIGNED).linear.copy()
            out[side] = (r, rdot)
        return out

    def update(self, dt: float, quat_xyzw, gyro, accel, qj, vj, contacts: dict[str, bool], initial_xy=(0.0, 0.0)):
        R = pin.Quaternion(quat_xyzw[3], *quat_xyzw[:3]).normalized().toRotationMatrix()
        feet = self._feet(quat_xyzw, gyro, qj, vj)
        if self.x is None:
            z = -min(feet[s][0][2] for s in SIDES)
            self.x = np.array([initial_xy[0], initial_xy[1], z, 0.0, 0.0, 0.0])
        # predict
        if dt > 0:
            a = R @ accel - GRAVITY
            F = np.eye(6)
            F[:3, 3:] = np.eye(3) * dt
            self.x = F @ self.x + np.concatenate([0.5 * dt * dt * a, dt * a])
            G = np.vstack([np.eye(3) * 0.5 * dt * dt, np.eye(3) * dt])
            self.P = F @ self.P @ F.T + G @ G.T * self.sigma_a**2
        # anchors: a foot that lands stays where it landed
        for side in SIDES:
            if contacts[side] and side not in self.anchors:
                self.anchors[side] = self.x[:3] + feet[side][0]
            elif not contacts[side]:
                self.anchors.pop(side, None)
        # correct
        for side in self.anchors:
            r, rdot = feet[side]
            z = np.concatenate([self.anchors[side] - r, -rdot])
            S = self.P + self.Rm
            K = self.P @ np.linalg.inv(S)
            self.x = self.x + K @ (z - self.x)
            self.P = (np.eye(6) - K) @ self.P
        return self.x[:3].copy(), self.x[3:].copy(), R
