"""Every ROS message <-> numpy conversion of the stack, in one place.

Conventions:
    * quaternions are ``[x y z w]`` arrays (Pinocchio's order) and map to the
      named fields of ``geometry_msgs/Quaternion``;
    * the floating base is Pinocchio's ``q[:7] = [x y z qx qy qz qw]`` and
      ``v[:6] = [linear, angular]`` velocity **in the base frame**, which is
      exactly ``nav_msgs/Odometry``: pose in ``header.frame_id`` (world), twist
      in ``child_frame_id`` (base);
    * joints are matched by NAME (:class:`JointMap`), never by position;
    * time is carried as integer nanoseconds (:func:`stamp_to_ns`), so that
      stamps compare exactly.

The walking reference travels as ``trajectory_msgs/MultiDOFJointTrajectory``:
samples of the reference at ``header.stamp + time_from_start`` (uniformly spaced;
one point: the reference at ``header.stamp``); see :data:`REFERENCE_JOINTS`,
:func:`reference_trajectory_from_msg` and ``docs/ros.md``.
"""

from __future__ import annotations

import math
import struct

import numpy as np
import pinocchio as pin
from builtin_interfaces.msg import Duration, Time
from geometry_msgs.msg import (
    Point,
    Pose,
    PoseStamped,
    Quaternion,
    Transform,
    Twist,
    Vector3,
    Wrench,
    WrenchStamped,
)
from nav_msgs.msg import Odometry, Path
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Float64MultiArray, MultiArrayDimension
from trajectory_msgs.msg import MultiDOFJointTrajectory, MultiDOFJointTrajectoryPoint

from whole_body_control.errors import StateError
from whole_body_control.reference_trajectory import ReferenceTrajectory, quaternions_to_rotations
from zmp_walker import FootRef, WalkerReference

WORLD_FRAME = "world"

# Entries ("joints") of the walking reference message, in this order:
#   com: CoM position / velocity / acceleration (rotation identity);
#   left_foot, right_foot: sole frame pose, twist and acceleration (world);
#   zmp: translation = ZMP command (after DCM feedback), velocities[].linear = planned ZMP;
#   dcm: translation = planned DCM;
#   contacts: translation = (left in contact, right in contact, 0) as 1.0 / 0.0.
REFERENCE_JOINTS = ("com", "left_foot", "right_foot", "zmp", "dcm", "contacts")


# -- time ------------------------------------------------------------------------------------


def stamp_to_ns(stamp: Time) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


# -- CDR (XCDR1): what rmw writes.  The control loop reads its inputs from their bytes and
# writes its outputs as bytes: rclpy's message objects cost 4 to 13 times more per message.

_CDR_HEADER = b"\x00\x01\x00\x00"  # CDR, little endian, no options


class _CdrReader:
    """Reads a serialized message field by field (alignment relative to the payload, after
    the 4-byte encapsulation header; byte order from that header)."""

    __slots__ = ("data", "pos", "what", "order")

    def __init__(self, data: bytes, what: str):
        self.data, self.pos, self.what = data, 4, what
        self.order = "<" if len(data) > 1 and data[1] & 1 else ">"  # ..._LE has the low bit set

    def align(self, n: int) -> None:
        self.pos += -(self.pos - 4) % n

    def take(self, size: int) -> int:
        start = self.pos
        self.pos += size
        if self.pos > len(self.data):
            raise StateError(f"{self.what}: serialized message truncated at byte {start} of {len(self.data)}")
        return start

    def u32(self) -> int:
        self.align(4)
        return struct.unpack_from(self.order + "I", self.data, self.take(4))[0]

    def string(self) -> str:
        size = self.u32()
        start = self.take(size)
        return bytes(self.data[start : start + size - 1]).decode()

    def skip_string(self) -> None:
        self.take(self.u32())

    def time_ns(self) -> int:
        """A ``builtin_interfaces/Time`` or ``Duration`` [ns]."""
        self.align(4)
        sec, nanosec = struct.unpack_from(self.order + "iI", self.data, self.take(8))
        return sec * 1_000_000_000 + nanosec

    def doubles(self, count: int) -> np.ndarray:
        """``count`` float64 (a view into the bytes); no alignment for none, as CDR writes it."""
        if count:
            self.align(8)
        return np.frombuffer(self.data, dtype=self.order + "f8", count=count, offset=self.take(8 * count))


class _CdrWriter:
    """A little-endian CDR stream (alignment relative to the payload, after the 4-byte
    encapsulation header)."""

    __slots__ = ("buf",)

    def __init__(self):
        self.buf = bytearray(_CDR_HEADER)

    def align(self, n: int) -> None:
        pad = -(len(self.buf) - 4) % n
        if pad:
            self.buf += bytes(pad)

    def u32(self, x: int) -> None:
        self.align(4)
        self.buf += struct.pack("<I", x)

    def string(self, text: str) -> None:
        data = text.encode()
        self.u32(len(data) + 1)
        self.buf += data + b"\x00"

    def time(self, ns: int) -> None:
        """A ``builtin_interfaces/Time`` or ``Duration`` of ``ns`` [ns]."""
        self.align(4)
        self.buf += _stamp_bytes(ns)

    def header(self, ns: int, frame: str) -> None:
        self.time(ns)
        self.string(frame)

    def doubles(self, values, sequence: bool = False) -> None:
        data = np.ascontiguousarray(values, dtype="<f8")
        if sequence:
            self.u32(data.size)
        if data.size:
            self.align(8)
            self.buf += data.tobytes()

    def bytes(self) -> bytes:
        return bytes(self.buf)


class _Template:
    """A serialized message whose layout depends on a few sizes and names only: its fixed
    bytes, written once by :class:`_CdrWriter`, cut around its variable parts (``hole``:
    the stamp, the arrays of doubles, a label).  :meth:`fill` joins them with the values: the
    bytes the writer would give, for a fifth of its time (the 1 kHz messages of the bridge and
    the controller, 3 to 15 us each with the writer)."""

    __slots__ = ("parts",)

    def __init__(self, build):
        w = _CdrWriter()
        cuts: list[int] = []

        def hole(n_bytes: int, align: int = 1) -> None:
            if n_bytes:
                w.align(align)
            cuts.append(len(w.buf))
            w.buf += bytes(n_bytes)
            cuts.append(len(w.buf))

        build(w, hole)
        data = bytes(w.buf)
        bounds = [0, *cuts, len(data)]
        self.parts = tuple(data[bounds[i] : bounds[i + 1]] for i in range(0, len(bounds), 2))

    def fill(self, *values: bytes) -> bytes:
        """The message with ``values`` in its holes, in order (each exactly the hole's size)."""
        parts = self.parts
        out = [parts[0]]
        for value, part in zip(values, parts[1:]):
            out.append(value)
            out.append(part)
        return b"".join(out)


def _stamp_bytes(ns: int) -> bytes:
    """A ``builtin_interfaces/Time`` of ``ns`` [ns] (as :meth:`_CdrWriter.time`)."""
    return struct.pack("<iI", *divmod(ns, 1_000_000_000))


def _f8(values) -> bytes:
    return np.ascontiguousarray(values, dtype="<f8").tobytes()


def cdr_stamp_ns(data: bytes) -> int:
    """``header.stamp`` [ns] of a serialized message that starts with a ``std_msgs/Header``
    (JointState, Odometry, Imu ...), read from its CDR bytes without deserializing it."""
    return _CdrReader(data, "header").time_ns()


def imu_from_cdr(data: bytes) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """Serialized ``sensor_msgs/Imu`` -> ``(stamp [ns], orientation xyzw, gyro, specific
    force)`` read at their CDR offsets (rclpy's message objects cost about 65 us each)."""
    r = _CdrReader(data, "Imu")
    ns = r.time_ns()
    r.skip_string()  # header.frame_id
    v = r.doubles(4 + 9 + 3 + 9 + 3)
    return ns, v[0:4].copy(), v[13:16].copy(), v[25:28].copy()


def odometry_from_cdr(data: bytes) -> tuple[int, np.ndarray, np.ndarray]:
    """Serialized ``nav_msgs/Odometry`` -> ``(stamp [ns], q_base (7,), v_base (6,))`` as
    :func:`base_from_odometry` (about 130 us as message objects)."""
    r = _CdrReader(data, "Odometry")
    ns = r.time_ns()
    r.skip_string()  # header.frame_id
    r.skip_string()  # child_frame_id
    v = r.doubles(7 + 36 + 6)
    return ns, v[0:7].copy(), v[43:49].copy()


def wrench_from_cdr(data: bytes) -> tuple[int, np.ndarray]:
    """Serialized ``geometry_msgs/WrenchStamped`` -> ``(stamp [ns], [f, tau])``."""
    r = _CdrReader(data, "WrenchStamped")
    ns = r.time_ns()
    r.skip_string()  # header.frame_id
    return ns, r.doubles(6).copy()


def ns_to_stamp(ns: int) -> Time:
    return Time(sec=int(ns // 1_000_000_000), nanosec=int(ns % 1_000_000_000))


def seconds_to_ns(t: float) -> int:
    """Simulated time [s] -> integer nanoseconds (rounded)."""
    return int(round(t * 1e9))


# -- geometry --------------------------------------------------------------------------------


def quat_to_xyzw(msg: Quaternion) -> np.ndarray:
    return np.array([msg.x, msg.y, msg.z, msg.w])


def xyzw_to_quat(xyzw) -> Quaternion:
    x, y, z, w = (float(c) for c in xyzw)
    return Quaternion(x=x, y=y, z=z, w=w)


def rotation_to_quat(rotation: np.ndarray) -> Quaternion:
    return xyzw_to_quat(pin.Quaternion(np.asarray(rotation)).coeffs())


def quat_to_rotation(msg: Quaternion) -> np.ndarray:
    xyzw = quat_to_xyzw(msg)
    norm = np.linalg.norm(xyzw)
    if not norm > 0.0:
        raise StateError(f"quaternion has zero norm: {xyzw}")
    x, y, z, w = xyzw / norm
    return pin.Quaternion(w, x, y, z).toRotationMatrix()


def vec3(msg) -> np.ndarray:
    """``Vector3`` or ``Point`` -> (3,) array."""
    return np.array([msg.x, msg.y, msg.z])


def to_vector3(a) -> Vector3:
    return Vector3(x=float(a[0]), y=float(a[1]), z=float(a[2]))


def to_point(a) -> Point:
    return Point(x=float(a[0]), y=float(a[1]), z=float(a[2]))


def yaw_of(rotation: np.ndarray) -> float:
    """Heading [rad] of a rotation matrix (angle of its x axis in the ground plane)."""
    return math.atan2(rotation[1, 0], rotation[0, 0])


# -- robot state -----------------------------------------------------------------------------


class JointMap:
    """Maps message joint names to ``robot.joint_names`` (Pinocchio order), by name.

    ``indices(names)`` returns, for each robot joint, its position in the message;
    missing or unknown names raise :class:`StateError` naming them.
    """

    def __init__(self, joint_names):
        self.joint_names = tuple(joint_names)
        self._known = set(self.joint_names)
        self._cache: dict[tuple[str, ...], np.ndarray] = {}

    def indices(self, names) -> np.ndarray:
        names = tuple(names)
        idx = self._cache.get(names)
        if idx is not None:
            return idx
        position = {n: i for i, n in enumerate(names)}
        unknown = sorted(n for n in names if n not in self._known)
        missing = [n for n in self.joint_names if n not in position]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        problems = []
        if missing:
            problems.append(f"missing joints {missing}")
        if unknown:
            problems.append(f"unknown joints {unknown}")
        if duplicated:
            problems.append(f"duplicated joints {duplicated}")
        if problems:
            raise StateError("joint names do not match the robot: " + "; ".join(problems))
        idx = np.array([position[n] for n in self.joint_names], dtype=int)
        self._cache[names] = idx
        return idx

    def reorder(self, names, values, what: str) -> np.ndarray:
        """``values`` given in message order ``names`` -> robot order."""
        values = np.asarray(values, dtype=float)
        if values.shape != (len(names),):
            raise StateError(f"{what} has {values.size} values for {len(names)} joint names")
        return values[self.indices(names)]


class JointStateReader:
    """Reads ``sensor_msgs/JointState`` into robot order, by name, for the control loop.

    Unlike :class:`JointMap` it never rejects a message: names the robot does not
    have are ignored (a robot publishes more joints than it controls: grippers,
    passive joints), and a robot joint absent from the message, or a message
    whose arrays are shorter than its names, reads as NaN and is listed in
    ``missing``, so that the caller can name it and damp.  The index arrays are
    cached per name list (the broadcaster's list does not change).
    """

    def __init__(self, joint_names):
        self.joint_names = tuple(joint_names)
        self._cache: dict[tuple, tuple[np.ndarray, np.ndarray, tuple[str, ...]]] = {}
        self._cdr_names: tuple[int, bytes, tuple[str, ...]] | None = None  # (offset, bytes, names)

    def _layout(self, names: tuple) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
        layout = self._cache.get(names)
        if layout is None:
            position = {}
            for i, n in enumerate(names):
                position.setdefault(n, i)  # a duplicated name: the first one counts
            present = [k for k, n in enumerate(self.joint_names) if n in position]
            src = np.array([position[self.joint_names[k]] for k in present], dtype=int)
            missing = tuple(n for n in self.joint_names if n not in position)
            layout = (np.array(present, dtype=int), src, missing)
            if len(self._cache) > 16:
                self._cache.clear()
            self._cache[names] = layout
        return layout

    def read_cdr(self, data: bytes) -> tuple[int, np.ndarray, np.ndarray, tuple[str, ...]]:
        """Serialized ``sensor_msgs/JointState`` -> ``(stamp [ns], q, v, missing)``, as
        :meth:`read`, from its CDR bytes: the name list is compared byte for byte with the
        previous message's and parsed only when it changed (rclpy's message objects cost
        about 45 us for 32 joints, this about 10 us)."""
        r = _CdrReader(data, "JointState")
        ns = r.time_ns()
        r.skip_string()  # header.frame_id
        start = r.pos
        cached = self._cdr_names
        if cached is not None and cached[0] == start and data[start : start + len(cached[1])] == cached[1]:
            names = cached[2]
            r.pos += len(cached[1])
        else:
            names = tuple(r.string() for _ in range(r.u32()))
            self._cdr_names = (start, bytes(data[start : r.pos]), names)
        arrays = [r.doubles(r.u32()) for _ in range(2)]  # position, velocity
        q, v, missing = self._reorder(names, arrays[0], arrays[1])
        return ns, q, v, missing

    def read(self, msg: JointState) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
        """``(q [rad], v [rad/s], missing names)`` in robot order; NaN where missing."""
        return self._reorder(
            tuple(msg.name), np.asarray(msg.position, dtype=float), np.asarray(msg.velocity, dtype=float)
        )

    def _reorder(self, names: tuple, pos: np.ndarray, vel: np.ndarray):
        dst, src, missing = self._layout(names)
        n = len(self.joint_names)
        q = np.full(n, np.nan)
        v = np.full(n, np.nan)
        if pos.size == len(names) and vel.size == len(names):
            q[dst] = pos[src]
            v[dst] = vel[src]
            return q, v, missing
        # arrays shorter than the names: what they lack is missing too
        ok = (src < pos.size) & (src < vel.size)
        q[dst[ok]] = pos[src[ok]]
        v[dst[ok]] = vel[src[ok]]
        lacking = tuple(self.joint_names[k] for k in dst[~ok])
        return q, v, missing + lacking


def joint_state_msg(stamp: Time, names, q_joints, v_joints, tau=None) -> JointState:
    msg = JointState()
    msg.header.stamp = stamp
    msg.name = list(names)
    msg.position = [float(x) for x in q_joints]
    msg.velocity = [float(x) for x in v_joints]
    if tau is not None:
        msg.effort = [float(x) for x in tau]
    return msg


def joints_from_msg(msg: JointState, joint_map: JointMap) -> tuple[np.ndarray, np.ndarray]:
    """Joint positions [rad] and velocities [rad/s] in robot order (no finiteness check)."""
    q = joint_map.reorder(msg.name, msg.position, "position")
    v = joint_map.reorder(msg.name, msg.velocity, "velocity")
    return q, v


def odometry_msg(stamp: Time, q_base: np.ndarray, v_base: np.ndarray, child_frame: str) -> Odometry:
    """Base ``q[:7]`` and base-frame ``v[:6]`` (Pinocchio) -> Odometry."""
    msg = Odometry()
    msg.header.stamp = stamp
    msg.header.frame_id = WORLD_FRAME
    msg.child_frame_id = child_frame
    msg.pose.pose.position = to_point(q_base[:3])
    msg.pose.pose.orientation = xyzw_to_quat(q_base[3:7])
    msg.twist.twist.linear = to_vector3(v_base[:3])
    msg.twist.twist.angular = to_vector3(v_base[3:6])
    return msg


def base_from_odometry(msg: Odometry) -> tuple[np.ndarray, np.ndarray]:
    """Odometry -> ``(q_base (7,), v_base (6,))`` in Pinocchio convention."""
    p, o = msg.pose.pose.position, msg.pose.pose.orientation
    lin, ang = msg.twist.twist.linear, msg.twist.twist.angular
    q = np.array([p.x, p.y, p.z, o.x, o.y, o.z, o.w])
    v = np.array([lin.x, lin.y, lin.z, ang.x, ang.y, ang.z])
    return q, v


def assemble_state(q_base, v_base, q_joints, v_joints) -> tuple[np.ndarray, np.ndarray]:
    """Pinocchio ``(q, v)`` from the base and joint parts."""
    return np.concatenate([q_base, q_joints]), np.concatenate([v_base, v_joints])


def imu_msg(stamp: Time, frame: str, orientation_xyzw, gyro, linear_acceleration) -> Imu:
    msg = Imu()
    msg.header.stamp = stamp
    msg.header.frame_id = frame
    msg.orientation = xyzw_to_quat(orientation_xyzw)
    msg.angular_velocity = to_vector3(gyro)
    msg.linear_acceleration = to_vector3(linear_acceleration)
    return msg


def imu_from_msg(msg: Imu) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(orientation xyzw, gyro [rad/s], specific force [m/s^2])``."""
    return quat_to_xyzw(msg.orientation), vec3(msg.angular_velocity), vec3(msg.linear_acceleration)


def wrench_msg(stamp: Time, frame: str, wrench: np.ndarray) -> WrenchStamped:
    msg = WrenchStamped()
    msg.header.stamp = stamp
    msg.header.frame_id = frame
    msg.wrench = Wrench(force=to_vector3(wrench[:3]), torque=to_vector3(wrench[3:6]))
    return msg


def wrench_from_msg(msg: WrenchStamped) -> np.ndarray:
    return np.concatenate([vec3(msg.wrench.force), vec3(msg.wrench.torque)])


# -- commands (ros2_control forward_command_controller, interface effort) ---------------------


def command_msg(values) -> Float64MultiArray:
    msg = Float64MultiArray()
    values = [float(x) for x in values]
    msg.layout.dim = [MultiArrayDimension(label="joints", size=len(values), stride=len(values))]
    msg.data = values
    return msg


# -- serialized messages for the control loop ------------------------------------------------
#
# rclpy converts a message object field by field before it serializes it (about 190 us for
# a JointState or an Odometry, about as much again on the other side); the publishers of the
# control loop hand rclpy the CDR bytes (XCDR1, little endian: what rmw_fastrtps writes),
# built here with struct and numpy.  A test compares them with rclpy's own serialization.


_ZEROS = np.zeros(36)


_TEMPLATES: dict[tuple, _Template] = {}


def _template(key: tuple, build) -> _Template:
    tpl = _TEMPLATES.get(key)
    if tpl is None:
        tpl = _TEMPLATES.setdefault(key, _Template(build))
    return tpl


def command_cdr(values, stamp_ns: int | None = None) -> bytes:
    """Serialized ``std_msgs/Float64MultiArray`` as :func:`command_msg`, with the layout
    dimension ``stamp_ns=<ns>`` when ``stamp_ns`` is given (the state it answers)."""
    data = _f8(values)
    n = len(data) // 8
    label = None if stamp_ns is None else f"stamp_ns={stamp_ns}".encode()

    def build(w, hole):
        w.u32(1 if label is None else 2)
        w.string("joints")
        w.u32(n)
        w.u32(n)
        if label is not None:
            w.u32(len(label) + 1)  # a string: its length with the NUL, the bytes, the NUL
            hole(len(label))
            w.buf += b"\x00"
            w.u32(0)
            w.u32(0)
        w.u32(0)  # data_offset
        w.u32(n)
        hole(8 * n, 8)

    if label is None:
        return _template(("command", n), build).fill(data)
    return _template(("command", n, len(label)), build).fill(label, data)


def joint_state_cdr(stamp_ns: int, names, q_joints, v_joints, tau=None) -> bytes:
    """Serialized ``sensor_msgs/JointState`` as :func:`joint_state_msg` (no frame id)."""
    arrays = (_f8(q_joints), _f8(v_joints), b"" if tau is None else _f8(tau))
    names = tuple(names)

    def build(w, hole):
        hole(8, 4)  # header.stamp
        w.string("")  # header.frame_id
        w.u32(len(names))
        for name in names:
            w.string(name)
        for a in arrays:
            w.u32(len(a) // 8)
            hole(len(a), 8)

    key = ("joint_state", names, *(len(a) for a in arrays))
    return _template(key, build).fill(_stamp_bytes(stamp_ns), *arrays)


def imu_cdr(stamp_ns: int, frame: str, orientation_xyzw, gyro, linear_acceleration) -> bytes:
    """Serialized ``sensor_msgs/Imu`` as :func:`imu_msg` (covariances zero)."""

    def build(w, hole):
        hole(8, 4)
        w.string(frame)
        hole(8 * 37, 8)  # orientation and covariance, angular velocity and ..., linear acceleration and ...

    values = np.concatenate([orientation_xyzw, _ZEROS[:9], gyro, _ZEROS[:9], linear_acceleration, _ZEROS[:9]])
    return _template(("imu", frame), build).fill(_stamp_bytes(stamp_ns), _f8(values))


def odometry_cdr(stamp_ns: int, q_base, v_base, child_frame: str) -> bytes:
    """Serialized ``nav_msgs/Odometry`` as :func:`odometry_msg` (covariances zero)."""

    def build(w, hole):
        hole(8, 4)
        w.string(WORLD_FRAME)
        w.string(child_frame)
        hole(8 * (7 + 36 + 6 + 36), 8)  # pose and covariance, twist and covariance

    values = np.concatenate([q_base[:7], _ZEROS, v_base[:6], _ZEROS])
    return _template(("odometry", child_frame), build).fill(_stamp_bytes(stamp_ns), _f8(values))


def wrench_cdr(stamp_ns: int, frame: str, wrench) -> bytes:
    """Serialized ``geometry_msgs/WrenchStamped`` as :func:`wrench_msg`."""

    def build(w, hole):
        hole(8, 4)
        w.string(frame)
        hole(8 * 6, 8)  # force, torque

    return _template(("wrench", frame), build).fill(_stamp_bytes(stamp_ns), _f8(wrench[:6]))


def clock_cdr(stamp_ns: int) -> bytes:
    """Serialized ``rosgraph_msgs/Clock``."""
    return _CDR_HEADER + _stamp_bytes(stamp_ns)


def command_from_msg(msg: Float64MultiArray) -> np.ndarray:
    return np.asarray(msg.data, dtype=float)


_STAMP_LABEL = "stamp_ns="


def command_from_cdr(data: bytes) -> tuple[np.ndarray, int | None]:
    """Serialized ``std_msgs/Float64MultiArray`` -> ``(data, stamp [ns] or None)``: the
    efforts as :func:`command_from_msg` and the stamp of the first layout dimension labelled
    ``stamp_ns=<ns>`` (None when there is none or it is not an integer), as
    ``mujoco_bridge.command_stamp`` reads it from the message (about 11 us as message objects).

    Raises:
        StateError: the bytes end before the message does.
    """
    r = _CdrReader(data, "Float64MultiArray")
    stamp, found = None, False
    for _ in range(r.u32()):  # layout.dim
        label = r.string()
        r.u32()  # size
        r.u32()  # stride
        if not found and label.startswith(_STAMP_LABEL):
            found = True
            try:
                stamp = int(label[len(_STAMP_LABEL) :])
            except ValueError:
                stamp = None
    r.u32()  # layout.data_offset
    return r.doubles(r.u32()).astype(float), stamp


# -- walking reference -------------------------------------------------------------------------


def _entry(pos, rot=None, lin_vel=None, ang_vel=None, lin_acc=None, ang_acc=None):
    zero = np.zeros(3)
    transform = Transform(
        translation=to_vector3(pos), rotation=rotation_to_quat(rot) if rot is not None else Quaternion()
    )
    vel = Twist(
        linear=to_vector3(zero if lin_vel is None else lin_vel),
        angular=to_vector3(zero if ang_vel is None else ang_vel),
    )
    acc = Twist(
        linear=to_vector3(zero if lin_acc is None else lin_acc),
        angular=to_vector3(zero if ang_acc is None else ang_acc),
    )
    return transform, vel, acc


def reference_msg(stamp: Time, ref: WalkerReference) -> MultiDOFJointTrajectory:
    """:class:`WalkerReference` -> one-point ``MultiDOFJointTrajectory`` (see :data:`REFERENCE_JOINTS`)."""
    msg = MultiDOFJointTrajectory()
    msg.header.stamp = stamp
    msg.header.frame_id = WORLD_FRAME
    msg.joint_names = list(REFERENCE_JOINTS)
    feet = ref.feet
    entries = [
        _entry(ref.com_pos, None, ref.com_vel, None, ref.com_acc),
        *(_entry(f.pos, f.rotation, f.lin_vel, f.ang_vel, f.lin_acc, f.ang_acc) for f in (feet["left"], feet["right"])),
        _entry(ref.zmp_cmd, None, ref.zmp_ref),
        _entry(ref.dcm_ref),
        _entry([float(feet["left"].in_contact), float(feet["right"].in_contact), 0.0]),
    ]
    point = MultiDOFJointTrajectoryPoint()
    point.transforms = [e[0] for e in entries]
    point.velocities = [e[1] for e in entries]
    point.accelerations = [e[2] for e in entries]
    point.time_from_start = Duration(sec=0, nanosec=0)
    msg.points = [point]
    return msg


def reference_from_msg(msg: MultiDOFJointTrajectory, omega: float = float("nan")) -> WalkerReference:
    """One-point ``MultiDOFJointTrajectory`` -> :class:`WalkerReference` (no footsteps, phase "")."""
    if len(msg.points) < 1:
        raise StateError("walking reference has no point")
    point = msg.points[0]
    index = {n: i for i, n in enumerate(msg.joint_names)}
    missing = [n for n in REFERENCE_JOINTS if n not in index]
    if missing:
        raise StateError(f"walking reference lacks entries {missing} (has {list(msg.joint_names)})")
    if not (len(point.transforms) == len(point.velocities) == len(point.accelerations) == len(msg.joint_names)):
        raise StateError("walking reference: transforms, velocities and accelerations must have one entry per name")

    def part(name):
        i = index[name]
        tr, vel, acc = point.transforms[i], point.velocities[i], point.accelerations[i]
        return tr, vel, acc

    contacts = vec3(part("contacts")[0].translation)

    def foot(name, k):
        tr, vel, acc = part(name)
        return FootRef(
            pos=vec3(tr.translation),
            rotation=quat_to_rotation(tr.rotation),
            lin_vel=vec3(vel.linear),
            ang_vel=vec3(vel.angular),
            lin_acc=vec3(acc.linear),
            ang_acc=vec3(acc.angular),
            in_contact=bool(contacts[k] > 0.5),
        )

    com_tr, com_vel, com_acc = part("com")
    zmp_tr, zmp_vel, _ = part("zmp")
    return WalkerReference(
        time=stamp_to_ns(msg.header.stamp) * 1e-9,
        phase="",
        com_pos=vec3(com_tr.translation),
        com_vel=vec3(com_vel.linear),
        com_acc=vec3(com_acc.linear),
        feet={"left": foot("left_foot", 0), "right": foot("right_foot", 1)},
        zmp_ref=vec3(zmp_vel.linear),
        zmp_cmd=vec3(zmp_tr.translation),
        dcm_ref=vec3(part("dcm")[0].translation),
        upcoming_footsteps=(),
        omega=omega,
    )


# -- walking reference trajectory (several samples; see whole_body_control/reference_trajectory.py) --
#
# Message layout: the one of reference_msg for each point (REFERENCE_JOINTS), point k at
# header.stamp + time_from_start with time_from_start = k * period.  Two equivalent paths:
# Python message objects (reference_trajectory_msg / reference_trajectory_from_msg) and the
# serialized CDR bytes of the same message (reference_trajectory_cdr /
# reference_trajectory_from_cdr) for Publisher.publish(bytes) and raw subscriptions: a
# 30-point message is about 1,600 Python message objects, which rclpy then converts.

# Columns of the per-point source array (N, 30, 3): 6 entries x (translation, linear
# velocity, angular velocity, linear acceleration, angular acceleration), entries in
# REFERENCE_JOINTS order.  _TRAJ_ROWS[i] = the source column of VECTOR_FIELDS[i].
_TRAJ_ROWS = np.array(
    [
        # com: translation, velocity, acceleration; zmp: ref (velocity), cmd (translation); dcm
        0 * 6 + 0, 1 * 6 + 0, 3 * 6 + 0, 1 * 6 + 3, 0 * 6 + 3, 0 * 6 + 4,
        # left_foot, right_foot: translation, twist, acceleration
        *(kind * 6 + e for e in (1, 2) for kind in range(5)),
    ]
)  # fmt: skip
_DEFAULT_PERIOD_NS = 1_000_000
_ZERO6 = np.zeros(6)


def _trajectory_blocks(traj: ReferenceTrajectory) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``traj`` -> per point ``transforms (N, 6, 7)`` ([x y z qx qy qz qw]), ``velocities (N, 6, 6)``
    and ``accelerations (N, 6, 6)`` ([linear angular]) in REFERENCE_JOINTS order."""
    n = len(traj)
    vec = traj.vectors
    T = np.zeros((n, 6, 7))
    V = np.zeros((n, 6, 6))
    A = np.zeros((n, 6, 6))
    T[:, :, 6] = 1.0  # identity rotation
    T[:, 0, :3], V[:, 0, :3], A[:, 0, :3] = vec[:, 0], vec[:, 1], vec[:, 2]  # com
    for e, row, j in ((1, 6, 0), (2, 11, 1)):  # feet
        T[:, e, :3], V[:, e, :3], V[:, e, 3:], A[:, e, :3], A[:, e, 3:] = (vec[:, row + i] for i in range(5))
        T[:, e, 3:] = traj.quaternions[:, j]
    T[:, 3, :3], V[:, 3, :3] = vec[:, 4], vec[:, 3]  # zmp: cmd, ref
    T[:, 4, :3] = vec[:, 5]  # dcm
    T[:, 5, :2] = traj.contacts  # 1.0 / 0.0
    return T, V, A


def _trajectory_from_blocks(start_ns: int, period_ns: int, T, V, A, what: str, omega: float) -> ReferenceTrajectory:
    """Inverse of :func:`_trajectory_blocks` (entries already in REFERENCE_JOINTS order)."""
    n = T.shape[0]
    src = np.concatenate([T[:, :, :3], V[:, :, :3], V[:, :, 3:], A[:, :, :3], A[:, :, 3:]], axis=1)
    quats = T[:, 1:3, 3:]
    norms = np.sqrt(np.einsum("kij,kij->ki", quats, quats))
    if not (norms > 0.0).all():  # also catches NaN
        k, j = np.argwhere(~(norms > 0.0))[0]
        raise StateError(f"{what}: {REFERENCE_JOINTS[1 + j]} rotation has no valid norm in point {k}")
    quats = quats / norms[:, :, None]
    try:
        return ReferenceTrajectory(
            start_ns,
            period_ns,
            src[:, _TRAJ_ROWS],
            quaternions_to_rotations(quats),
            T[:, 5, :2] > 0.5,
            quaternions=quats,
            omegas=np.full(n, omega),
        )
    except StateError as exc:
        raise StateError(f"{what}: {exc}") from None


def reference_trajectory_to_msg(traj: ReferenceTrajectory) -> MultiDOFJointTrajectory:
    """:class:`ReferenceTrajectory` -> ``MultiDOFJointTrajectory``: ``header.stamp`` = first
    sample, one point per sample at ``time_from_start = k period`` (layout of :func:`reference_msg`).

    Equal message parts (zero twists, identity rotations) are shared objects: do not edit the
    message in place."""
    T, V, A = _trajectory_blocks(traj)
    msg = MultiDOFJointTrajectory()
    msg.header.stamp = ns_to_stamp(traj.start_ns)
    msg.header.frame_id = WORLD_FRAME
    msg.joint_names = list(REFERENCE_JOINTS)
    zero_twist = Twist()
    identity = Quaternion()

    def vector3(x, y, z):
        return Vector3(x=x, y=y, z=z)

    def twist(t):
        if not any(t):
            return zero_twist
        return Twist(linear=vector3(t[0], t[1], t[2]), angular=vector3(t[3], t[4], t[5]))

    def transform(t):
        rot = identity if t[3:] == [0.0, 0.0, 0.0, 1.0] else Quaternion(x=t[3], y=t[4], z=t[5], w=t[6])
        return Transform(translation=vector3(t[0], t[1], t[2]), rotation=rot)

    points = []
    for k, (tk, vk, ak) in enumerate(zip(T.tolist(), V.tolist(), A.tolist())):
        point = MultiDOFJointTrajectoryPoint()
        point.transforms = [transform(t) for t in tk]
        point.velocities = [twist(t) for t in vk]
        point.accelerations = [twist(t) for t in ak]
        sec, nanosec = divmod(k * traj.period_ns, 1_000_000_000)
        point.time_from_start = Duration(sec=sec, nanosec=nanosec)
        points.append(point)
    msg.points = points
    return msg


def reference_trajectory_msg(start_ns: int, period_ns: int, refs) -> MultiDOFJointTrajectory:
    """Samples ``refs`` (:class:`WalkerReference`, ``refs[k]`` at ``start_ns + k period_ns`` [ns])
    -> ``MultiDOFJointTrajectory`` (see :func:`reference_trajectory_to_msg`)."""
    return reference_trajectory_to_msg(ReferenceTrajectory.from_references(start_ns, period_ns, refs))


def _reference_layout(names, what: str) -> list[int] | None:
    """Message position of each REFERENCE_JOINTS entry (None: already in order)."""
    names = list(names)
    if names == list(REFERENCE_JOINTS):
        return None
    index = {n: i for i, n in enumerate(names)}
    missing = [n for n in REFERENCE_JOINTS if n not in index]
    if missing:
        raise StateError(f"{what}: joint_names lack {missing} (has {names})")
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise StateError(f"{what}: joint_names has duplicates {duplicated}")
    return [index[n] for n in REFERENCE_JOINTS]


def _uniform_period(offsets_ns: list[int], default_period_ns: int, what: str) -> int:
    """Spacing [ns] of the points' ``time_from_start`` (checked uniform); one point: the default."""
    if len(offsets_ns) == 1:
        return int(default_period_ns)
    period = offsets_ns[1] - offsets_ns[0]
    if period <= 0:
        raise StateError(f"{what}: time_from_start must increase, points 0 and 1 are {offsets_ns[:2]} ns")
    for k, off in enumerate(offsets_ns):
        if off - offsets_ns[0] != k * period:
            raise StateError(
                f"{what}: points must be uniformly spaced: point {k} at time_from_start {off} ns, "
                f"expected {offsets_ns[0] + k * period} ns (spacing {period} ns)"
            )
    return period


def reference_trajectory_from_msg(
    msg: MultiDOFJointTrajectory,
    period_ns: int = _DEFAULT_PERIOD_NS,
    omega: float = float("nan"),
    what: str = "/walker/reference",
) -> ReferenceTrajectory:
    """``MultiDOFJointTrajectory`` -> :class:`ReferenceTrajectory` (phase "", no footsteps).

    Sample k is at ``header.stamp + time_from_start[k]``; the points must be uniformly
    spaced; a one-point message (:func:`reference_msg`) is a one-sample trajectory of period
    ``period_ns`` [ns].  ``omega`` [1/s] is not carried by the message.  ``what`` names the
    source in the errors.

    Raises:
        StateError: no point, missing or duplicated names, not one entry per name,
            non-uniform spacing, a zero or non-finite quaternion, a non-finite value.
    """
    points = msg.points
    if len(points) < 1:
        raise StateError(f"{what}: the walking reference has no point")
    order = _reference_layout(msg.joint_names, what)
    n_names = len(msg.joint_names)
    offsets = []
    for k, p in enumerate(points):
        if not (len(p.transforms) == len(p.velocities) == len(p.accelerations) == n_names):
            raise StateError(
                f"{what}: point {k} has {len(p.transforms)} transforms, {len(p.velocities)} velocities, "
                f"{len(p.accelerations)} accelerations for {n_names} joint_names (one entry per name)"
            )
        d = p.time_from_start
        offsets.append(d.sec * 1_000_000_000 + d.nanosec)
    period = _uniform_period(offsets, period_ns, what)
    T = np.array(
        [
            [
                (
                    t.translation.x,
                    t.translation.y,
                    t.translation.z,
                    t.rotation.x,
                    t.rotation.y,
                    t.rotation.z,
                    t.rotation.w,
                )
                for t in (p.transforms if order is None else [p.transforms[i] for i in order])
            ]
            for p in points
        ]
    )

    def twists(attr):
        return np.array(
            [
                [
                    (t.linear.x, t.linear.y, t.linear.z, t.angular.x, t.angular.y, t.angular.z)
                    for t in (getattr(p, attr) if order is None else [getattr(p, attr)[i] for i in order])
                ]
                for p in points
            ]
        )

    start = stamp_to_ns(msg.header.stamp) + offsets[0]
    return _trajectory_from_blocks(start, period, T, twists("velocities"), twists("accelerations"), what, omega)


def reference_trajectory_cdr(traj: ReferenceTrajectory) -> bytes:
    """Serialized ``MultiDOFJointTrajectory`` of ``traj``: the bytes of
    ``rclpy.serialization.serialize_message(reference_trajectory_to_msg(traj))``, for
    ``Publisher.publish(bytes)``: for 30 points about 0.2 ms of CPU against about 8 ms
    for building the message objects and having rclpy serialize them."""
    T, V, A = _trajectory_blocks(traj)
    w = _CdrWriter()
    w.header(traj.start_ns, WORLD_FRAME)
    w.u32(len(REFERENCE_JOINTS))
    for name in REFERENCE_JOINTS:
        w.string(name)
    w.u32(len(traj))
    for k in range(len(traj)):
        for block in (T[k], V[k], A[k]):  # transforms, velocities, accelerations: one entry per name
            w.u32(len(REFERENCE_JOINTS))
            w.doubles(block)
        w.time(k * traj.period_ns)  # time_from_start
    return w.bytes()


def _cdr_point_error(r: _CdrReader, n: int, widths: tuple[int, ...], what: str) -> None:
    """Walks the points one by one and raises the first entry count that is not one per name."""
    n_names = widths[0] // 7
    for k in range(n):
        for i, field in enumerate(("transforms", "velocities", "accelerations")):
            count = r.u32()
            if count != n_names:
                raise StateError(
                    f"{what}: point {k} has {count} {field} for {n_names} joint_names (one entry per name)"
                )
            r.align(8)
            r.take(8 * count * (widths[i] // n_names))
        r.align(4)
        r.take(8)
    raise StateError(f"{what}: serialized message of {len(r.data)} bytes does not hold {n} points")


def reference_trajectory_from_cdr(
    data: bytes,
    period_ns: int = _DEFAULT_PERIOD_NS,
    omega: float = float("nan"),
    what: str = "/walker/reference",
) -> ReferenceTrajectory:
    """Serialized ``MultiDOFJointTrajectory`` (a raw subscription's bytes) -> :class:`ReferenceTrajectory`;
    the same result and checks as :func:`reference_trajectory_from_msg`."""
    if bytes(data[:4]) != _CDR_HEADER:
        raise StateError(f"{what}: not little-endian CDR (encapsulation {bytes(data[:4]).hex()})")
    r = _CdrReader(data, what)
    stamp_ns = r.time_ns()
    r.skip_string()  # frame_id
    names = [r.string() for _ in range(r.u32())]
    order = _reference_layout(names, what)
    n = r.u32()
    if n < 1:
        raise StateError(f"{what}: the walking reference has no point")
    # offsets of every count, double block and duration (points differ only in their alignment)
    n_names = len(names)
    widths = (7 * n_names, 6 * n_names, 6 * n_names)
    layout = []  # byte offsets in a point: 3 x (count, first double), then the duration
    pos = r.pos
    for _ in range(min(n, 2)):  # the first point may start 4 bytes off; from the second on, all are alike
        start, offsets = pos, []
        for width in widths:
            pos += -(pos - 4) % 4
            offsets.append(pos)
            pos += 4
            pos += -(pos - 4) % 8
            offsets.append(pos)
            pos += 8 * width
        pos += -(pos - 4) % 4
        offsets.append(pos)
        pos += 8
        layout.append(offsets)
    if n > 2:
        size = pos - start  # bytes per point from the second on
        rest = np.array(layout[1]) + size * np.arange(1, n - 1)[:, None]
        layout = np.concatenate([np.array(layout), rest])
        pos += size * (n - 2)
    else:
        layout = np.array(layout)
    words = np.frombuffer(data, dtype="<u4", count=(min(pos, len(data)) - 4) // 4, offset=4)
    if pos > len(data) or (words[(layout[:, 0:6:2] - 4) // 4] != n_names).any():
        _cdr_point_error(r, n, widths, what)  # not the layout of n points of n_names entries: say where
    doubles = np.frombuffer(data, dtype="<f8", count=(pos - 4) // 8, offset=4)
    first = (layout[:, 1:6:2] - 4) // 8
    T = doubles[first[:, :1] + np.arange(widths[0])].reshape(n, n_names, 7)
    V = doubles[first[:, 1:2] + np.arange(widths[1])].reshape(n, n_names, 6)
    A = doubles[first[:, 2:] + np.arange(widths[2])].reshape(n, n_names, 6)
    d = (layout[:, 6] - 4) // 4
    offsets = (words[d].view(np.int32).astype(np.int64) * 1_000_000_000 + words[d + 1]).tolist()
    period = _uniform_period(offsets, period_ns, what)
    if order is not None:
        T, V, A = T[:, order], V[:, order], A[:, order]
    start = stamp_ns + offsets[0]
    return _trajectory_from_blocks(start, period, T, V, A, what, omega)


def footstep_path(stamp: Time, footsteps) -> Path:
    """Upcoming :class:`~zmp_walker.Footstep` s -> ``nav_msgs/Path`` (one pose per sole, in order)."""
    msg = Path()
    msg.header.stamp = stamp
    msg.header.frame_id = WORLD_FRAME
    for step in footsteps:
        pose = PoseStamped()
        pose.header.frame_id = WORLD_FRAME
        t = step.t_end if math.isfinite(step.t_end) else 0.0
        pose.header.stamp = ns_to_stamp(max(0, seconds_to_ns(t)))
        pose.pose = Pose(position=to_point(step.pose.position), orientation=rotation_to_quat(step.pose.rotation))
        msg.poses.append(pose)
    return msg


def goal_from_msg(msg: PoseStamped) -> tuple[float, float, float]:
    """Goal ``(x, y, yaw)`` [m, m, rad] from a world-frame PoseStamped."""
    p = msg.pose.position
    return float(p.x), float(p.y), yaw_of(quat_to_rotation(msg.pose.orientation))


def twist_from_msg(msg: Twist) -> tuple[float, float, float]:
    """``cmd_vel`` -> ``(vx, vy, yaw_rate)`` [m/s, m/s, rad/s]."""
    return float(msg.linear.x), float(msg.linear.y), float(msg.angular.z)
