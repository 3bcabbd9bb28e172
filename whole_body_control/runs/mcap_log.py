"""A run as a ROS 2 bag (rosbag2 format, version 8, MCAP storage), written with ``rosbags``.

Standard ROS 2 message types only, so that Foxglove, PlotJuggler and ``ros2 bag``
read it without this package.  The topics are listed in :data:`TOPICS` and
documented in ``docs/report.md``; timestamps are the simulated time [ns] from 0.

Messages are serialized (CDR) as they come and kept in memory until
:meth:`McapLog.write`, which writes them in time order, together with the
messages known only at the end of a run (the footstep plan, at time 0).
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

WORLD = "world"

# topic -> message type; the order is the order of the bag's connections
TOPICS: dict[str, str] = {
    "/joint_states": "sensor_msgs/msg/JointState",
    "/ground_truth/odom": "nav_msgs/msg/Odometry",
    "/imu": "sensor_msgs/msg/Imu",
    "/com": "geometry_msgs/msg/PointStamped",
    "/com_ref": "geometry_msgs/msg/PointStamped",
    "/zmp": "geometry_msgs/msg/PointStamped",
    "/zmp_ref": "geometry_msgs/msg/PointStamped",
    "/left_foot/wrench": "geometry_msgs/msg/WrenchStamped",
    "/right_foot/wrench": "geometry_msgs/msg/WrenchStamped",
    "/support_polygon": "geometry_msgs/msg/PolygonStamped",
    "/effort_commands": "std_msgs/msg/Float64MultiArray",
    "/wbc/diagnostics": "std_msgs/msg/String",
    "/footsteps": "nav_msgs/msg/Path",
    "/footsteps/markers": "visualization_msgs/msg/MarkerArray",
}


def _typestore():
    return get_typestore(Stores.ROS2_KILTED)


class McapLog:
    """Collects a run's messages (see :data:`TOPICS`); ``write(path)`` makes the bag.

    Args:
        robot: the :class:`~whole_body_control.robot.RobotModel` (joint names, feet, base frame).
    """

    def __init__(self, robot):
        self.robot = robot
        self.ts = _typestore()
        T = self.ts.types
        self._T = T
        self._messages: list[tuple[int, int, str, bytes]] = []  # (stamp ns, sequence, topic, cdr)
        self._seq = 0
        self._ground_z = 0.0

    # -- helpers ------------------------------------------------------------------------

    def _header(self, stamp_ns: int, frame_id: str):
        T = self._T
        return T["std_msgs/msg/Header"](
            stamp=T["builtin_interfaces/msg/Time"](sec=stamp_ns // 1_000_000_000, nanosec=stamp_ns % 1_000_000_000),
            frame_id=frame_id,
        )

    def _point(self, p):
        return self._T["geometry_msgs/msg/Point"](x=float(p[0]), y=float(p[1]), z=float(p[2]))

    def _vec(self, p):
        return self._T["geometry_msgs/msg/Vector3"](x=float(p[0]), y=float(p[1]), z=float(p[2]))

    def _quat(self, xyzw):
        return self._T["geometry_msgs/msg/Quaternion"](
            x=float(xyzw[0]), y=float(xyzw[1]), z=float(xyzw[2]), w=float(xyzw[3])
        )

    def _put(self, topic: str, stamp_ns: int, msg) -> None:
        self._messages.append((stamp_ns, self._seq, topic, self.ts.serialize_cdr(msg, TOPICS[topic])))
        self._seq += 1

    def _point_stamped(self, topic: str, stamp_ns: int, p) -> None:
        T = self._T
        self._put(
            topic,
            stamp_ns,
            T["geometry_msgs/msg/PointStamped"](header=self._header(stamp_ns, WORLD), point=self._point(p)),
        )

    # -- per tick ----------------------------------------------------------------------------

    def tick(self, t: float, sim, ctrl, result, polygon: np.ndarray | None = None) -> None:
        """Log the state at simulated time ``t`` [s]: simulation ground truth, the
        controller's CoM and reference, its command and diagnostics."""
        T = self._T
        ns = int(round(t * 1e9))
        robot = self.robot
        q, v = sim.q, sim.v
        self._ground_z = min(sim.sole_placement(s).translation[2] for s in ("left", "right"))
        self._put(
            "/joint_states",
            ns,
            T["sensor_msgs/msg/JointState"](
                header=self._header(ns, ""),
                name=list(robot.joint_names),
                position=np.asarray(q[7:], dtype=np.float64),
                velocity=np.asarray(v[6:], dtype=np.float64),
                effort=np.asarray(result.tau, dtype=np.float64),
            ),
        )
        zero36 = np.zeros(36)
        self._put(
            "/ground_truth/odom",
            ns,
            T["nav_msgs/msg/Odometry"](
                header=self._header(ns, WORLD),
                child_frame_id=robot.config.base_frame,
                pose=T["geometry_msgs/msg/PoseWithCovariance"](
                    pose=T["geometry_msgs/msg/Pose"](position=self._point(q[:3]), orientation=self._quat(q[3:7])),
                    covariance=zero36,
                ),
                twist=T["geometry_msgs/msg/TwistWithCovariance"](
                    twist=T["geometry_msgs/msg/Twist"](linear=self._vec(v[:3]), angular=self._vec(v[3:6])),
                    covariance=zero36,
                ),
            ),
        )
        imu = sim.imu()
        self._put(
            "/imu",
            ns,
            T["sensor_msgs/msg/Imu"](
                header=self._header(ns, robot.config.base_frame),
                orientation=self._quat(imu.orientation),
                orientation_covariance=np.zeros(9),
                angular_velocity=self._vec(imu.gyro),
                angular_velocity_covariance=np.zeros(9),
                linear_acceleration=self._vec(imu.linear_acceleration),
                linear_acceleration_covariance=np.zeros(9),
            ),
        )
        self._point_stamped("/com", ns, ctrl.state.com)
        com_ref = ctrl.com_task.pos if ctrl.com_task is not None else ctrl.state.com
        self._point_stamped("/com_ref", ns, com_ref)
        zmp = sim.measured_zmp()
        if zmp is not None:
            self._point_stamped("/zmp", ns, [zmp[0], zmp[1], self._ground_z])
        for side, wrench in sim.foot_wrenches().items():
            self._put(
                f"/{side}_foot/wrench",
                ns,
                T["geometry_msgs/msg/WrenchStamped"](
                    header=self._header(ns, robot.feet[side].frame),
                    wrench=T["geometry_msgs/msg/Wrench"](force=self._vec(wrench[:3]), torque=self._vec(wrench[3:])),
                ),
            )
        if polygon is not None:
            self._put(
                "/support_polygon",
                ns,
                T["geometry_msgs/msg/PolygonStamped"](
                    header=self._header(ns, WORLD),
                    polygon=T["geometry_msgs/msg/Polygon"](
                        points=[
                            T["geometry_msgs/msg/Point32"](x=float(x), y=float(y), z=float(self._ground_z))
                            for x, y in polygon
                        ]
                    ),
                ),
            )
        layout = T["std_msgs/msg/MultiArrayLayout"](
            dim=[T["std_msgs/msg/MultiArrayDimension"](label="joints", size=robot.na, stride=robot.na)],
            data_offset=0,
        )
        self._put(
            "/effort_commands",
            ns,
            T["std_msgs/msg/Float64MultiArray"](layout=layout, data=np.asarray(result.tau, dtype=np.float64)),
        )
        diagnostics = {
            "t": round(t, 6),
            "status": result.status,
            "reason": result.reason,
            "warnings": list(result.warnings),
            "levels": list(result.level_names),
            "residuals": [_finite(r) for r in result.residuals],
            "task_residuals": {k: _finite(r) for k, r in result.task_residuals.items()},
            "dynamics_residual": _finite(result.dynamics_residual),
            "contacts": dict(result.contacts),
            "iterations": int(result.iterations),
            "solve_time_ms": round(result.solve_time * 1e3, 4),
            "tick_time_ms": round(result.tick_time * 1e3, 4),
            "latched": ctrl.latched,
        }
        self._put("/wbc/diagnostics", ns, T["std_msgs/msg/String"](data=json.dumps(diagnostics)))

    def signals(self, t: float, **signals) -> None:
        """Extra signals of the same tick that have a topic (``zmp_ref`` (x, y) [m])."""
        if "zmp_ref" in signals:
            z = signals["zmp_ref"]
            self._point_stamped("/zmp_ref", int(round(t * 1e9)), [z[0], z[1], self._ground_z])

    # -- at the end ------------------------------------------------------------------------

    def footsteps(self, footsteps: list[dict]) -> None:
        """The footstep plan at time 0: ``/footsteps`` (a Path of sole poses, stamps =
        touchdown times) and ``/footsteps/markers`` (planned sole rectangles, and the
        landed ones in a second namespace)."""
        if not footsteps:
            return
        T = self._T
        poses, markers = [], []
        for i, step in enumerate(footsteps):
            ns = int(round(step["t_touchdown"] * 1e9))
            for kind, pos_key, yaw_key in (("planned", "planned", "planned_yaw"), ("landed", "landed", "landed_yaw")):
                if pos_key not in step:
                    continue
                pos = [*step[pos_key][:2], self._ground_z]
                quat = [0.0, 0.0, math.sin(step[yaw_key] / 2), math.cos(step[yaw_key] / 2)]
                pose = T["geometry_msgs/msg/Pose"](position=self._point(pos), orientation=self._quat(quat))
                if kind == "planned":
                    poses.append(T["geometry_msgs/msg/PoseStamped"](header=self._header(ns, WORLD), pose=pose))
                markers.append(self._sole_marker(i, kind, step["side"], pose))
        self._put("/footsteps", 0, T["nav_msgs/msg/Path"](header=self._header(0, WORLD), poses=poses))
        self._put("/footsteps/markers", 0, T["visualization_msgs/msg/MarkerArray"](markers=markers))

    def _sole_marker(self, i: int, kind: str, side: str, pose):
        T = self._T
        sole = self.robot.feet[side].sole
        cx, cy = 0.5 * (sole.x_min + sole.x_max), 0.5 * (sole.y_min + sole.y_max)
        yaw = 2 * math.atan2(pose.orientation.z, pose.orientation.w)
        c, s = math.cos(yaw), math.sin(yaw)
        center = [pose.position.x + c * cx - s * cy, pose.position.y + s * cx + c * cy, pose.position.z + 0.002]
        planned = kind == "planned"
        return T["visualization_msgs/msg/Marker"](
            header=self._header(0, WORLD),
            ns=f"footsteps/{kind}",
            id=i,
            type=1,  # CUBE
            action=0,  # ADD
            pose=T["geometry_msgs/msg/Pose"](position=self._point(center), orientation=pose.orientation),
            scale=self._vec([sole.x_max - sole.x_min, sole.y_max - sole.y_min, 0.004]),
            color=T["std_msgs/msg/ColorRGBA"](
                r=0.1 if side == "left" else 0.8,
                g=0.7 if side == "left" else 0.2,
                b=0.2 if planned else 0.8,
                a=0.35 if planned else 0.7,
            ),
            lifetime=T["builtin_interfaces/msg/Duration"](sec=0, nanosec=0),
            frame_locked=False,
            points=[],
            colors=[],
            texture_resource="",
            texture=T["sensor_msgs/msg/CompressedImage"](
                header=self._header(0, ""), format="", data=np.zeros(0, dtype=np.uint8)
            ),
            uv_coordinates=[],
            text="",
            mesh_resource="",
            mesh_file=T["visualization_msgs/msg/MeshFile"](filename="", data=np.zeros(0, dtype=np.uint8)),
            mesh_use_embedded_materials=False,
        )

    def write(self, path: Path) -> Path:
        """Write the bag directory ``path`` (replaced if it exists): ``metadata.yaml``
        and ``<name>.mcap``. Returns the path of the ``.mcap`` file."""
        path = Path(path)
        if path.exists():
            shutil.rmtree(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        used = {topic for _, _, topic, _ in self._messages}
        with Writer(path, version=8, storage_plugin=StoragePlugin.MCAP) as writer:
            connections = {
                topic: writer.add_connection(topic, msgtype, typestore=self.ts)
                for topic, msgtype in TOPICS.items()
                if topic in used
            }
            for stamp, _, topic, data in sorted(self._messages, key=lambda m: (m[0], m[1])):
                writer.write(connections[topic], stamp, data)
        files = sorted(path.glob("*.mcap"))
        return files[0] if files else path


def _finite(x: float) -> float | None:
    x = float(x)
    return float(f"{x:.4g}") if math.isfinite(x) else None


def read_topics(path: Path) -> dict[str, tuple[str, int]]:
    """``{topic: (message type, message count)}`` of the bag directory ``path`` (for tests and checks)."""
    from rosbags.rosbag2 import Reader

    with Reader(Path(path)) as reader:
        return {c.topic: (c.msgtype, c.msgcount) for c in reader.connections}
