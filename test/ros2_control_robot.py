"""A robot process that plays ros2_control: MuJoCo behind the interfaces that
ros2_control's controller_manager, its broadcasters and a forward_command_controller
offer, written from their documentation (control.ros.org, ros2_controllers), not
from this package's ROS layer (nothing here imports ``whole_body_control.ros``).

Run it as a process (``python test/ros2_control_robot.py --robot talos``) or load it
by path (``importlib``) from a test or a ``bench/`` script.

What it offers (as ros2_control would, one node per controller in one process):

* ``joint_state_broadcaster``: ``/joint_states`` (sensor_msgs/JointState: name,
  position [rad], velocity [rad/s], effort [N m] = the applied effort) in the robot's
  own joint order (``--joint-order``, default ``reversed``: not Pinocchio's order).
* ``imu_sensor_broadcaster``: ``--imu-topic`` (default
  ``/imu_sensor_broadcaster/imu``, i.e. its ``~/imu``), frame_id = the base link,
  orientation world -> base, angular velocity and specific force in the base frame.
* ``force_torque_sensor_broadcaster`` per foot, only when ``--wrench-topics
  left:/left_ft/wrench,right:/right_ft/wrench`` is given: the ground reaction on the
  sole, in the sole frame (frame_id) [N, N m].
* ``forward_command_controller/ForwardCommandController`` named ``--controller-name``
  (default ``effort_controller``) with the read-only parameters ``joints`` (its own
  order, ``--command-order``, default ``urdf``) and ``interface_name: effort``;
  subscribes ``~/commands`` (std_msgs/Float64MultiArray).  A command whose size is
  not ``len(joints)`` is logged as an error and ignored.  The last command is held
  forever (forward_command_controller has no timeout); before the first one the
  effort is zero.
* ``controller_manager``: parameters ``update_rate`` and ``<controller>.type``.

Clock (``--clock``):
    ``wall`` (default): a loop thread steps one control period (``--rate`` [Hz]) per
    wall-clock period (sleeping until the next period's absolute deadline; a period
    that ends after the next one should have started is counted as an overrun, the next
    one starts at once, and whole periods lost are skipped, not caught up: the simulated
    time then falls behind, see ``real_time_factor``), stamps = the node clock (wall
    time).  With ``--wait-first-command``
    (default) the physics holds still until the first command arrives (a robot in a
    gantry), while the broadcasters publish.
    ``lockstep``: publishes /clock (rosgraph_msgs/Clock) and the state (stamps =
    simulated time), then waits for the command that answers it before stepping one
    period: a command whose layout carries the label ``stamp_ns=<ns>`` answers the
    state of that stamp; a command without it answers the state published before it.
    An unanswered state is re-published every ``--resend-period`` wall seconds.

Evaluation side channel (what a test or a benchmark reads; the graph must not):
    ``/robot_sim/status`` (std_msgs/String, JSON) at ``--status-rate`` Hz of wall time
    and once at the end (``finished: true``; also printed on stdout as the last line):
    see :meth:`RobotSim.status`.
    ``/robot_sim/fault`` (std_msgs/String): ``nan_joint_state[:<joint>]`` (NaN
    position of one joint from now on), ``drop_joint:<joint>`` (omitted from
    /joint_states), ``extra_joint:<name>`` (a joint the controller does not know),
    ``freeze`` (no more /joint_states; physics goes on with the held command),
    ``clear``.  The same strings are accepted by ``--fault`` at start-up.

``--duration`` [s of simulated time]: then a final status and exit 0.
``--push t,fx,fy,duration``: a horizontal force [N] (world) on the torso at the
simulated time ``t`` [s] for ``duration`` [s].  SIGINT / SIGTERM: clean shutdown.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import struct
import sys
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

if __name__ == "__main__":  # run as a script: the checkout is the package root
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# -- options ------------------------------------------------------------------------------------


@dataclass
class Options:
    robot: str = "talos"
    joint_order: str = "reversed"  # urdf | reversed | shuffle:<seed>
    command_order: str = "urdf"
    controller_name: str = "effort_controller"
    imu_topic: str = "/imu_sensor_broadcaster/imu"
    wrench_topics: dict[str, str] = field(default_factory=dict)  # side -> topic
    clock: str = "wall"  # wall | lockstep
    rate: float = 1000.0  # [Hz] control loop
    timestep: float = 0.001  # [s] physics step (at most the control period)
    duration: float = 0.0  # [s] simulated; 0: run until a signal
    push: tuple[float, float, float, float] | None = None  # t [s], fx, fy [N], duration [s]
    faults: tuple[str, ...] = ()
    wait_first_command: bool = True
    resend_period: float = 1.0  # [s] wall, lockstep
    status_rate: float = 10.0  # [Hz] wall
    realtime_priority: int = 0  # SCHED_FIFO of every thread (0: normal scheduling)
    unanswered_parameter_requests: int = 0  # the forward controller's get_parameters ignores the first N


def parse_args(argv: list[str] | None = None) -> Options:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--robot", default="talos", help="robot name (config/robots/<name>.yaml)")
    p.add_argument("--joint-order", default="reversed", help="/joint_states order: urdf | reversed | shuffle:<seed>")
    p.add_argument("--command-order", default="urdf", help="the controller's joints: urdf | reversed | shuffle:<seed>")
    p.add_argument("--controller-name", default="effort_controller", help="forward_command_controller node name")
    p.add_argument("--imu-topic", default="/imu_sensor_broadcaster/imu", help="sensor_msgs/Imu topic")
    p.add_argument("--wrench-topics", default="", help="per foot: left:/left_ft/wrench,right:/right_ft/wrench")
    p.add_argument("--clock", choices=("wall", "lockstep"), default="wall", help="wall clock or lockstep")
    p.add_argument("--rate", type=float, default=1000.0, help="control loop rate [Hz]")
    p.add_argument("--timestep", type=float, default=0.001, help="physics timestep [s] (<= control period)")
    p.add_argument("--duration", type=float, default=0.0, help="simulated seconds, then exit 0 (0: forever)")
    p.add_argument("--push", default=None, help="t,fx,fy,duration: force [N] on the torso at t [s]")
    p.add_argument("--fault", action="append", default=[], help="fault active from the start (repeatable)")
    p.add_argument(
        "--wait-first-command",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="wall clock: no physics before the first command",
    )
    p.add_argument("--resend-period", type=float, default=1.0, help="lockstep: re-publish after [s] wall")
    p.add_argument("--status-rate", type=float, default=10.0, help="/robot_sim/status rate [Hz] (wall)")
    p.add_argument(
        "--realtime-priority",
        type=int,
        default=0,
        help="SCHED_FIFO priority of every thread (ros2_control_node asks for 50); 0: normal scheduling",
    )
    p.add_argument(
        "--unanswered-parameter-requests",
        type=int,
        default=0,
        metavar="N",
        help="the forward controller's get_parameters leaves its first N requests unanswered\n"
        "(a response lost, as one sent before the server's writer has matched the client's reader)",
    )
    a = p.parse_args(argv)
    wrenches = {}
    for item in filter(None, a.wrench_topics.split(",")):
        side, _, topic = item.partition(":")
        if side not in ("left", "right") or not topic:
            p.error(f"--wrench-topics: expected left:<topic>,right:<topic>, got '{item}'")
        wrenches[side] = topic
    push = None
    if a.push:
        values = [float(x) for x in a.push.split(",")]
        if len(values) != 4 or values[3] <= 0:
            p.error(f"--push: expected t,fx,fy,duration with duration > 0, got '{a.push}'")
        push = tuple(values)
    if a.rate <= 0 or a.timestep <= 0:
        p.error("--rate and --timestep must be > 0")
    return Options(
        robot=a.robot,
        joint_order=a.joint_order,
        command_order=a.command_order,
        controller_name=a.controller_name,
        imu_topic=a.imu_topic,
        wrench_topics=wrenches,
        clock=a.clock,
        rate=a.rate,
        timestep=a.timestep,
        duration=a.duration,
        push=push,
        faults=tuple(a.fault),
        wait_first_command=a.wait_first_command,
        resend_period=a.resend_period,
        status_rate=a.status_rate,
        realtime_priority=a.realtime_priority,
        unanswered_parameter_requests=a.unanswered_parameter_requests,
    )


# -- the robot's own joint order ----------------------------------------------------------------


def urdf_joint_names(urdf_path: Path, actuated: list[str]) -> list[str]:
    """The actuated joints in the order the URDF file lists them (what a
    ``<ros2_control>`` tag generated from the URDF would list)."""
    root = ET.parse(urdf_path).getroot()
    wanted = set(actuated)
    names = [j.get("name") for j in root.findall("joint") if j.get("name") in wanted]
    if sorted(names) != sorted(actuated):
        raise ValueError(f"{urdf_path}: joints {sorted(wanted - set(names))} not found")
    return names


def joint_order(spec: str, urdf_names: list[str]) -> list[str]:
    """``urdf``, ``reversed`` or ``shuffle:<seed>`` of ``urdf_names``."""
    if spec == "urdf":
        return list(urdf_names)
    if spec == "reversed":
        return list(reversed(urdf_names))
    if spec.startswith("shuffle:"):
        rng = np.random.default_rng(int(spec.split(":", 1)[1]))
        return [urdf_names[i] for i in rng.permutation(len(urdf_names))]
    raise ValueError(f"joint order must be urdf, reversed or shuffle:<seed>, got '{spec}'")


def command_stamp_ns(labels: list[str]) -> int | None:
    """The ``stamp_ns=<ns>`` label of a command's layout, or None."""
    for label in labels:
        if label.startswith("stamp_ns="):
            try:
                return int(label[len("stamp_ns=") :])
            except ValueError:
                return None
    return None


# -- serialized messages ------------------------------------------------------------------------
#
# ros2_control's broadcasters are C++ and cost nothing per period; building rclpy message
# objects field by field costs hundreds of microseconds a period here.  The broadcasters
# write CDR (XCDR1, little endian: what rmw_fastrtps publishes) into a buffer laid out once
# (the names, frame ids and zero covariances never change), fill its numbers each period
# through numpy views and hand rclpy the bytes; the command subscription takes the bytes
# and decodes them with numpy.  A test compares them with rclpy's own serialization.

_CDR_LE = b"\x00\x01\x00\x00"  # encapsulation: CDR, little endian


class CdrMessage:
    """A CDR message written once; ``doubles`` returns writable views of its numbers."""

    def __init__(self, frame_id: str | None = None):
        self.buf = bytearray(_CDR_LE)
        if frame_id is not None:  # std_msgs/Header: stamp (sec, nanosec), frame_id
            self.buf += bytes(8)
            self.string(frame_id)

    def align(self, n: int) -> None:
        self.buf += bytes(-(len(self.buf) - 4) % n)

    def u32(self, x: int) -> None:
        self.align(4)
        self.buf += struct.pack("<I", x)

    def string(self, text: str) -> None:
        data = text.encode()
        self.u32(len(data) + 1)
        self.buf += data + b"\x00"

    def doubles(self, count: int, sequence: bool = False) -> int:
        """Room for ``count`` doubles (a ``sequence<double>`` with its length); their offset."""
        if sequence:
            self.u32(count)
        if count:
            self.align(8)
        offset = len(self.buf)
        self.buf += bytes(8 * count)
        return offset

    def view(self, offset: int, count: int) -> np.ndarray:
        """The doubles at ``offset`` (call once the message is complete)."""
        return np.frombuffer(self.buf, dtype="<f8", count=count, offset=offset)

    def stamp(self, ns: int) -> bytes:
        """The message with ``header.stamp`` = ``ns``."""
        struct.pack_into("<iI", self.buf, 4, ns // 1_000_000_000, ns % 1_000_000_000)
        return bytes(self.buf)


def clock_cdr(ns: int) -> bytes:
    """Serialized rosgraph_msgs/Clock."""
    return _CDR_LE + struct.pack("<iI", ns // 1_000_000_000, ns % 1_000_000_000)


def parse_command(data: bytes) -> tuple[np.ndarray, list[str]]:
    """Serialized std_msgs/Float64MultiArray -> (data, the layout's labels).

    Raises ValueError (or struct.error) on bytes that do not hold one."""
    if data[:4] != _CDR_LE:
        raise ValueError(f"not little-endian CDR (encapsulation {data[:4].hex()})")
    off = 4
    (ndim,) = struct.unpack_from("<I", data, off)
    off += 4
    labels = []
    for _ in range(ndim):
        (n,) = struct.unpack_from("<I", data, off)
        labels.append(data[off + 4 : off + 3 + n].decode())
        off += 4 + n
        off += -(off - 4) % 4 + 8  # size, stride
    (count,) = struct.unpack_from("<I", data, off + 4)  # after data_offset
    off += 8
    if count:
        off += -(off - 4) % 8
    return np.frombuffer(data, dtype="<f8", count=count, offset=off), labels


# -- the robot ----------------------------------------------------------------------------------


class LossyParameterService:
    """``/<node>/get_parameters`` of ``node`` (started without its parameter services) that
    leaves its first ``unanswered`` requests without a response, served by a node of its own
    in a thread of its own (a request that is never answered waits there as a coroutine)."""

    def __init__(self, node, unanswered: int, kw: dict):
        import rclpy
        from rcl_interfaces.srv import GetParameters
        from rclpy.callback_groups import ReentrantCallbackGroup
        from rclpy.node import Node

        self.source, self.unanswered, self.requests = node, unanswered, 0
        self.node = Node(f"{node.get_name()}_parameter_service", **kw)
        # reentrant: an unanswered request (a pending coroutine) must not hold the later ones back
        self.node.create_service(
            GetParameters,
            f"/{node.get_name()}/get_parameters",
            self.get_parameters,
            callback_group=ReentrantCallbackGroup(),
        )
        self.executor = rclpy.executors.SingleThreadedExecutor(**kw)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self.executor.spin, name="parameter_service", daemon=True)
        self.thread.start()

    async def get_parameters(self, request, response):
        from rclpy.parameter import Parameter
        from rclpy.task import Future

        self.requests += 1
        if self.requests <= self.unanswered:
            await Future()  # never done: no response goes out for this request
        unset = Parameter.Type.NOT_SET
        response.values = [
            self.source.get_parameter_or(name, Parameter(name, unset)).get_parameter_value() for name in request.names
        ]
        return response

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()


class RobotSim:
    """The MuJoCo robot, its ros2_control-like nodes and its update loop."""

    def __init__(self, opts: Options, context=None):
        import rclpy
        from geometry_msgs.msg import WrenchStamped
        from rcl_interfaces.msg import ParameterDescriptor
        from rclpy.node import Node
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from rosgraph_msgs.msg import Clock
        from sensor_msgs.msg import Imu, JointState
        from std_msgs.msg import Float64MultiArray, String

        from whole_body_control.robot import load_robot
        from whole_body_control.sim import SimConfig, Simulation

        self.opts = opts
        self._msg = {"Clock": Clock, "Imu": Imu, "JointState": JointState, "WrenchStamped": WrenchStamped}
        self._String = String
        self.robot = load_robot(opts.robot)
        self.period = 1.0 / opts.rate  # [s]
        timestep = min(opts.timestep, self.period)
        self.substeps = max(1, round(self.period / timestep))
        self.sim = Simulation(self.robot, SimConfig(timestep=self.period / self.substeps, visual_meshes=False))
        urdf = urdf_joint_names(self.robot.urdf_path, self.robot.joint_names)
        self.state_names = joint_order(opts.joint_order, urdf)
        self.command_names = joint_order(opts.command_order, urdf)
        pin_index = {n: i for i, n in enumerate(self.robot.joint_names)}
        self.state_index = np.array([pin_index[n] for n in self.state_names])  # robot index of each state entry
        self.command_index = np.array([pin_index[n] for n in self.command_names])
        self.lockstep = opts.clock == "lockstep"
        # where each /joint_states entry lives in MuJoCo, and the sensors' sensordata entries
        index = self.sim.index
        self._qpos_index = index.qpos[self.state_index]
        self._dof_index = index.dof[self.state_index]
        self._force_index = index.actuator[self.state_index]
        self._root = index.root_qpos
        model = self.sim.model
        adr = {n: int(model.sensor_adr[model.sensor(n).id]) for n in ("imu_quat", "imu_gyro", "imu_accelerometer")}
        q, g, a = adr["imu_quat"], adr["imu_gyro"], adr["imu_accelerometer"]
        # sensor_msgs/Imu: orientation x y z w, 9 covariances, angular velocity, 9, linear acceleration, 9
        self._imu_src = np.array([q + 1, q + 2, q + 3, q, g, g + 1, g + 2, a, a + 1, a + 2])
        self._imu_dst = np.array([0, 1, 2, 3, 13, 14, 15, 25, 26, 27])
        self._imu_msg = CdrMessage(self.robot.config.base_frame)
        self._imu_view = self._imu_msg.view(self._imu_msg.doubles(37), 37)
        self._wrench_msgs: dict[str, tuple[CdrMessage, np.ndarray, np.ndarray]] = {}
        for side in opts.wrench_topics:
            m = CdrMessage(self.robot.feet[side].frame)
            # the sole's force/torque sensors measure the foot on the sole: the ground reaction is minus that
            self._wrench_msgs[side] = (m, m.view(m.doubles(6), 6), self.sim._ft_index[side])
        self._js_layout = None  # (message, positions, velocities, efforts, NaN entries, count) for the faults
        self._tau_max = np.asarray(self.robot.tau_max, dtype=float)

        # shared between the loop thread and the callbacks (under self.lock)
        self.lock = threading.Condition()
        self.tau = np.zeros(self.robot.na)  # held effort [N m], robot (Pinocchio) order
        self.commands = 0
        self.rejected = 0
        self.first_command_wall: float | None = None
        self.fault_version = 0  # bumped by every fault change: the /joint_states layout is rebuilt
        self.fresh = False  # a command came since the last period
        self.pending: tuple[int, float] | None = None  # (stamp ns, wall time) of the state waiting for an answer
        self.answer: np.ndarray | None = None  # lockstep: the command that answered the pending state
        self.published: dict[int, float] = {}  # stamp ns -> wall time published (recent states)
        self.latencies = np.zeros(20000)  # [s], a ring of the newest
        self.n_latencies = 0
        self.faults: dict[str, set[str] | bool] = {"nan": set(), "drop": set(), "extra": set(), "freeze": False}
        for f in opts.faults:
            self.apply_fault(f)
        self.periods = 0
        self.deadline_misses = 0
        self.overruns = 0
        self.fall_reason: str | None = None
        self.fall_time: float | None = None
        self.start_xy: np.ndarray | None = None
        self.wall_start: float | None = None
        self.finished = False
        self.stop = threading.Event()
        self.pushed = False
        self.error: Exception | None = None
        self._clipped: tuple[np.ndarray | None, np.ndarray] = (None, self.tau)
        self.snapshot = self._snapshot()

        self.context = context
        kw = {"context": context} if context is not None else {}
        sys_qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)  # rclcpp::SystemDefaultsQoS
        ro = ParameterDescriptor(read_only=True)
        name = opts.controller_name
        self.cm = Node("controller_manager", **kw)
        self.cm.declare_parameter("update_rate", int(round(opts.rate)), ro)
        for ctrl, kind in (
            ("joint_state_broadcaster", "joint_state_broadcaster/JointStateBroadcaster"),
            ("imu_sensor_broadcaster", "imu_sensor_broadcaster/IMUSensorBroadcaster"),
            (name, "forward_command_controller/ForwardCommandController"),
        ):
            self.cm.declare_parameter(f"{ctrl}.type", kind, ro)
        self.jsb = Node("joint_state_broadcaster", **kw)
        self.js_pub = self.jsb.create_publisher(JointState, "/joint_states", sys_qos)
        self.js_pub_publish = self.js_pub.publish
        self.imu_node = Node("imu_sensor_broadcaster", **kw)
        self.imu_node.declare_parameter("sensor_name", "base_imu", ro)
        self.imu_node.declare_parameter("frame_id", self.robot.config.base_frame, ro)
        self.imu_pub = self.imu_node.create_publisher(Imu, opts.imu_topic, sys_qos)
        self.ft_nodes, self.ft_pubs = [], {}
        for side, topic in opts.wrench_topics.items():
            n = Node(f"{side}_foot_ft_broadcaster", **kw)
            n.declare_parameter("frame_id", self.robot.feet[side].frame, ro)
            self.ft_nodes.append(n)
            self.ft_pubs[side] = n.create_publisher(WrenchStamped, topic, sys_qos)
        lossy = opts.unanswered_parameter_requests > 0
        self.ctrl = Node(name, start_parameter_services=not lossy, **kw)
        self.ctrl.declare_parameter("joints", list(self.command_names), ro)
        self.ctrl.declare_parameter("interface_name", "effort", ro)
        self.params = LossyParameterService(self.ctrl, opts.unanswered_parameter_requests, kw) if lossy else None
        self.ctrl.create_subscription(Float64MultiArray, "~/commands", self.on_command, sys_qos, raw=True)
        self.ev = Node("robot_sim", **kw)
        self.status_pub = self.ev.create_publisher(String, "/robot_sim/status", 10)
        self.ev.create_subscription(String, "/robot_sim/fault", lambda m: self.on_fault(m.data), 10)
        self.clock_pub = self.ev.create_publisher(Clock, "/clock", sys_qos) if self.lockstep else None
        self.ev.create_timer(1.0 / opts.status_rate, self.publish_status)
        self.nodes = [self.cm, self.jsb, self.imu_node, *self.ft_nodes, self.ctrl, self.ev]
        try:
            from rclpy.experimental import EventsExecutor

            self.executor = EventsExecutor(context=context)
        except ImportError:  # older rclpy
            self.executor = rclpy.executors.SingleThreadedExecutor(context=context)
        for n in self.nodes:
            self.executor.add_node(n)
        self.thread = threading.Thread(target=self.loop, name="ros2_control_update", daemon=True)
        self.log = self.ev.get_logger()

    # -- callbacks (executor thread) ------------------------------------------------------------

    def on_command(self, raw: bytes) -> None:
        # nothing may escape a callback of the EventsExecutor (it would end the process)
        try:
            data, labels = parse_command(raw)
        except Exception as exc:
            with self.lock:
                self.rejected += 1
            self.ctrl.get_logger().error(f"undecodable std_msgs/Float64MultiArray ({len(raw)} bytes): {exc}")
            return
        if data.size != len(self.command_names):
            with self.lock:
                self.rejected += 1
            self.ctrl.get_logger().error(
                f"Size of input data ({data.size}) is not equal to number of joints ({len(self.command_names)})"
            )
            return
        now = time.perf_counter()
        stamp = command_stamp_ns(labels)
        tau = np.zeros(self.robot.na)
        tau[self.command_index] = data
        with self.lock:
            self.tau = tau  # held until the next one (forward_command_controller has no timeout)
            self.commands += 1
            self.fresh = True
            if self.first_command_wall is None:
                self.first_command_wall = now
            # latency: from the state this command answers (its stamp, else the newest state)
            key = self.pending[0] if stamp is None and self.pending is not None else stamp
            published = self.published.pop(key, None) if key is not None else None
            if published is not None:
                self.latencies[self.n_latencies % self.latencies.size] = now - published
                self.n_latencies += 1
            if self.pending is not None and self.answer is None and (stamp is None or stamp == self.pending[0]):
                self.answer = tau
            self.lock.notify_all()

    def apply_fault(self, text: str) -> None:
        kind, _, arg = text.strip().partition(":")
        if kind == "clear":
            self.faults = {"nan": set(), "drop": set(), "extra": set(), "freeze": False}
        elif kind == "nan_joint_state":
            self.faults["nan"].add(arg or self.state_names[0])
        elif kind == "drop_joint" and arg:
            self.faults["drop"].add(arg)
        elif kind == "extra_joint" and arg:
            self.faults["extra"].add(arg)
        elif kind == "freeze":
            self.faults["freeze"] = True
        else:
            raise ValueError(f"unknown fault '{text}'")
        self.fault_version += 1

    def on_fault(self, text: str) -> None:
        with self.lock:
            try:
                self.apply_fault(text)
            except ValueError as exc:
                self.log.error(str(exc))
                return
        self.log.warning(f"fault: {text}")

    # -- state publishing (loop thread) ---------------------------------------------------------

    def stamp_ns(self) -> int:
        if self.lockstep:
            return round(self.sim.time * 1e9)
        return time.time_ns()  # the node clock (ROS time without use_sim_time: the system clock)

    def _joint_state_layout(self, faults: dict):
        """The /joint_states message for these faults: names (without the dropped ones,
        then the extra ones), views of its position, velocity and effort arrays, the
        entries with a NaN position, the number of real entries; None when frozen."""
        if faults["freeze"]:
            return None
        keep = [k for k, name in enumerate(self.state_names) if name not in faults["drop"]]
        names = [self.state_names[k] for k in keep] + sorted(faults["extra"])
        msg = CdrMessage("")
        msg.u32(len(names))
        for name in names:
            msg.string(name)
        offsets = [msg.doubles(len(names), sequence=True) for _ in range(3)]
        views = [msg.view(off, len(names)) for off in offsets]
        nan = np.array([i for i, k in enumerate(keep) if self.state_names[k] in faults["nan"]], dtype=int)
        keep = np.array(keep, dtype=int)
        return msg, *views, nan, (self._qpos_index[keep], self._dof_index[keep], self._force_index[keep])

    def publish_state(self) -> int:
        """Broadcast the current state (all interfaces of one instant share the stamp)."""
        ns = self.stamp_ns()
        data = self.sim.data
        with self.lock:  # before the first message: an answer may come before the last one is out
            now = time.perf_counter()
            self.published[ns] = now
            if len(self.published) > 2000:
                for key in sorted(self.published)[:1000]:
                    del self.published[key]
            self.pending = (ns, now)
            self.answer = None
            if self._js_layout is None or self._js_layout[0] != self.fault_version:
                self._js_layout = (self.fault_version, self._joint_state_layout(self.faults))
            layout = self._js_layout[1]
        if self.clock_pub is not None:
            self.clock_pub.publish(clock_cdr(ns))
        sensors = data.sensordata
        self._imu_view[self._imu_dst] = sensors[self._imu_src]
        self.imu_pub.publish(self._imu_msg.stamp(ns))
        for side, (msg, view, index) in self._wrench_msgs.items():
            np.negative(sensors[index], out=view)
            self.ft_pubs[side].publish(msg.stamp(ns))
        if layout is not None:
            msg, pos, vel, eff, nan, (qi, di, fi) = layout
            n = qi.size
            pos[:n] = data.qpos[qi]
            if nan.size:
                pos[nan] = math.nan
            vel[:n] = data.qvel[di]
            eff[:n] = data.actuator_force[fi]
            self.js_pub_publish(msg.stamp(ns))
        return ns

    # -- the update loop (its own thread) -------------------------------------------------------

    def step(self, tau: np.ndarray) -> None:
        """One control period with efforts ``tau`` (robot order), then the fall check."""
        sim = self.sim
        if self.opts.push is not None and not self.pushed and sim.time >= self.opts.push[0] - 1e-9:
            t, fx, fy, duration = self.opts.push
            sim.push(self.robot.config.torso_frame, np.array([fx, fy, 0.0]), duration)
            self.pushed = True
            self.log.info(f"push ({fx}, {fy}) N for {duration} s at t = {sim.time:.3f} s")
        if tau is not self._clipped[0]:  # a new command: clipped once, not every period
            self._clipped = (tau, np.clip(tau, -self._tau_max, self._tau_max))
        sim.step(self._clipped[1], self.substeps)  # the substeps in one MuJoCo call
        if self.fall_reason is None:
            height = sim.base_height()
            body = sim.non_foot_ground_contact()
            if height < self.robot.config.fall_height:
                self.fall_reason = f"base height {height:.3f} m below {self.robot.config.fall_height} m"
            elif body is not None:
                self.fall_reason = f"body '{body}' touches the ground"
            if self.fall_reason is not None:
                self.fall_time = sim.time
                self.log.error(f"fall at t = {sim.time:.3f} s: {self.fall_reason}")
        self.snapshot = self._snapshot()  # one assignment: the status thread reads it whole

    def _snapshot(self) -> tuple[float, np.ndarray, float]:
        """What the status reads (taken by the loop thread after each period): time, the
        free joint's qpos (position, quaternion w x y z), base height."""
        sim = self.sim
        return sim.data.time, sim.data.qpos[self._root : self._root + 7].copy(), sim.base_height()

    def loop(self) -> None:
        try:
            if self.lockstep:
                self._lockstep_loop()
            else:
                self._wall_loop()
        except Exception as exc:  # report, then let the main thread end the process
            self.log.error(f"update loop failed: {exc!r}")
            self.error = exc
        finally:
            self.stop.set()

    def _done(self) -> bool:
        return self.opts.duration > 0 and self.sim.time >= self.opts.duration - 1e-9

    def _begin(self) -> None:
        if self.wall_start is None:
            self.wall_start = time.perf_counter()
            self.start_xy = self.sim.q[:2].copy()

    def _wall_loop(self) -> None:
        next_t = time.perf_counter()
        while not self.stop.is_set() and not self._done():
            # read + broadcasters, then the forward controller's held command is written
            self.publish_state()
            with self.lock:
                started = self.first_command_wall is not None or not self.opts.wait_first_command
                tau = self.tau
                if self.first_command_wall is not None and self.periods > 0 and not self.fresh:
                    self.deadline_misses += 1
                self.fresh = False
            if started:
                self._begin()
                self.step(tau)
                self.periods += 1
            # absolute deadlines on a fixed grid: a late wake-up does not shift the next ones
            next_t += self.period
            delay = next_t - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            else:  # overrun: this period ended after the next one should have started
                self.overruns += 1
                if delay <= -self.period:  # whole periods lost: skipped, not caught up in a burst
                    next_t += self.period * math.floor(-delay / self.period)
        self._finish()

    def _lockstep_loop(self) -> None:
        while not self.stop.is_set() and not self._done():
            self.publish_state()
            resend = time.perf_counter() + self.opts.resend_period
            with self.lock:
                while self.answer is None and not self.stop.is_set():
                    remaining = resend - time.perf_counter()
                    if remaining <= 0:
                        break
                    self.lock.wait(min(remaining, 0.1))
                tau = self.answer
            if tau is None:
                continue  # re-publish the same state (discovery may have lost it)
            self._begin()
            self.step(tau)
            self.periods += 1
        self._finish()

    def _finish(self) -> None:
        if self._done():
            self.finished = True
            self.publish_state()  # the last instant (in lockstep: /clock at the end time)

    # -- status ---------------------------------------------------------------------------------

    def status(self) -> dict:
        """The evaluation side channel's content (see the module docstring)."""
        with self.lock:
            sim_time, root, base_height = self.snapshot
            lat = self.latencies[: min(self.n_latencies, self.latencies.size)] * 1e3
            tau = self.tau.copy()
            faults = {k: (sorted(v) if isinstance(v, set) else v) for k, v in self.faults.items()}
            commands, rejected = self.commands, self.rejected
        q = np.concatenate([root[:3], root[4:7], root[3:4]])  # the base pose, quaternion x y z w
        wall = time.perf_counter() - self.wall_start if self.wall_start is not None else 0.0
        dist = float(np.hypot(*(q[:2] - self.start_xy))) if self.start_xy is not None else 0.0
        return {
            "robot": self.robot.name,
            "clock": self.opts.clock,
            "time": sim_time,
            "steps": self.periods * self.substeps,
            "periods": self.periods,
            "control_period": self.period,
            "wall_time": wall,
            "real_time_factor": sim_time / wall if wall > 0 else 0.0,
            "started": self.wall_start is not None,
            "finished": self.finished,
            "fell": self.fall_reason is not None,
            "fall_reason": self.fall_reason,
            "fall_time": self.fall_time,
            "base_pose": [float(x) for x in q[:7]],
            "base_height": base_height,
            "distance_m": dist,
            "commands": commands,
            "rejected_commands": rejected,
            "deadline_misses": self.deadline_misses,
            "overruns": self.overruns,
            "command_latency_ms_p50": float(np.percentile(lat, 50)) if lat.size else None,
            "command_latency_ms_p99": float(np.percentile(lat, 99)) if lat.size else None,
            "max_abs_effort": float(np.max(np.abs(tau))),
            "joint_order": self.opts.joint_order,
            "command_joints": self.command_names,
            "faults": faults,
        }

    def publish_status(self) -> None:
        self.status_pub.publish(self._String(data=json.dumps(self.status())))

    # -- life cycle -------------------------------------------------------------------------------

    def run(self) -> dict:
        """Spin until ``--duration`` or :attr:`stop`; returns the final status."""
        self.thread.start()
        try:
            while not self.stop.is_set():
                self.executor.spin_once(timeout_sec=0.05)
        finally:
            self.stop.set()
            with self.lock:
                self.lock.notify_all()
            self.thread.join()
        final = self.status()
        self.status_pub.publish(self._String(data=json.dumps(final)))
        end = time.monotonic() + 0.3  # let subscribers take the final status
        while time.monotonic() < end:
            self.executor.spin_once(timeout_sec=0.05)
        return final

    def close(self) -> None:
        self.executor.shutdown()
        if self.params is not None:
            self.params.close()
        for n in self.nodes:
            n.destroy_node()


def main(argv: list[str] | None = None) -> int:
    import rclpy
    from rclpy.signals import SignalHandlerOptions

    opts = parse_args(argv)
    # the update loop shares the GIL with the executor thread: when it wakes up for its
    # period it takes the GIL within 0.1 ms (the default interval is 5 ms, longer than a period)
    sys.setswitchinterval(1e-4)
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    robot = None
    try:
        robot = RobotSim(opts)
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: robot.stop.set())
        if opts.realtime_priority > 0:
            # as ros2_control_node does for its update loop; a robot without the right runs on
            try:
                for tid in os.listdir("/proc/self/task"):
                    os.sched_setscheduler(int(tid), os.SCHED_FIFO, os.sched_param(opts.realtime_priority))
            except OSError as exc:
                robot.log.warning(f"SCHED_FIFO {opts.realtime_priority} refused: {exc}")
        robot.log.info(
            f"{robot.robot.name}: {opts.clock} clock at {opts.rate:g} Hz ({robot.substeps} physics steps), "
            f"commands on /{opts.controller_name}/commands"
        )
        final = robot.run()
        print(json.dumps(final), flush=True)
        return 1 if robot.error is not None else 0
    finally:
        if robot is not None:
            robot.close()
        rclpy.try_shutdown()


if __name__ == "__main__":
    sys.exit(main())
