"""The ros2_control stand-in (``test/ros2_control_robot.py``) seen from outside, as a
controller would: a real robot process in a ROS domain of its own, a real rclpy client
in the test.  Its joint order, its command order (read from the controller's
``joints`` parameter), wrong-size commands, the held command, faults, the status side
channel, lockstep stepping and the clean exit."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import signal
import struct
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")

from geometry_msgs.msg import WrenchStamped  # noqa: E402
from rcl_interfaces.srv import GetParameters  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from sensor_msgs.msg import Imu, JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray, MultiArrayDimension, String  # noqa: E402

from whole_body_control.robot import load_robot  # noqa: E402
from whole_body_control.ros.graph import domain_id  # noqa: E402

SCRIPT = Path(__file__).resolve().parent / "ros2_control_robot.py"


def load_script():
    spec = importlib.util.spec_from_file_location("ros2_control_robot", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


class Client:
    """A controller's view of the robot: subscriptions, a command publisher, a spin helper."""

    def __init__(self, context, proc, controller="effort_controller", imu_topic="/imu_sensor_broadcaster/imu"):
        self.proc = proc
        self.node = Node("test_client", context=context)
        self.executor = rclpy.executors.SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        self.js: list[JointState] = []
        self.status: dict | None = None
        self.clock: list[int] = []
        self.imu: Imu | None = None
        self.wrench: WrenchStamped | None = None
        n = self.node
        n.create_subscription(JointState, "/joint_states", self.js.append, 10)
        n.create_subscription(String, "/robot_sim/status", lambda m: setattr(self, "status", json.loads(m.data)), 10)
        n.create_subscription(
            Clock, "/clock", lambda m: self.clock.append(m.clock.sec * 1_000_000_000 + m.clock.nanosec), 10
        )
        n.create_subscription(Imu, imu_topic, lambda m: setattr(self, "imu", m), 10)
        n.create_subscription(WrenchStamped, "/left_ft/wrench", lambda m: setattr(self, "wrench", m), 10)
        self.cmd = n.create_publisher(Float64MultiArray, f"/{controller}/commands", 10)
        self.fault = n.create_publisher(String, "/robot_sim/fault", 10)
        self.params = n.create_client(GetParameters, f"/{controller}/get_parameters")

    def spin_until(self, pred, timeout: float, what: str) -> None:
        end = time.monotonic() + timeout
        while not pred():
            assert time.monotonic() < end, f"timed out ({timeout} s) waiting for {what}"
            if self.proc.poll() is not None and not pred():
                raise AssertionError(f"robot exited ({self.proc.returncode}): {self.proc.stderr.read()[-2000:]}")
            self.executor.spin_once(timeout_sec=0.02)

    def spin_for(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.executor.spin_once(timeout_sec=0.02)

    def send(self, data, stamp_ns: int | None = None) -> None:
        msg = Float64MultiArray(data=[float(x) for x in data])
        if stamp_ns is not None:
            msg.layout.dim = [MultiArrayDimension(label=f"stamp_ns={stamp_ns}", size=len(data), stride=len(data))]
        self.cmd.publish(msg)

    def get_parameters(self, names: list[str]):
        assert self.params.wait_for_service(timeout_sec=10.0), "no get_parameters service"
        future = self.params.call_async(GetParameters.Request(names=names))
        self.executor.spin_until_future_complete(future, timeout_sec=10.0)
        assert future.done(), "get_parameters did not answer"
        return future.result().values


@contextlib.contextmanager
def robot_process(*args: str):
    """The robot in its own process and ROS domain; yields (process, client)."""
    with domain_id() as did:
        env = dict(os.environ, ROS_DOMAIN_ID=str(did), PYTHONUNBUFFERED="1")
        env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        proc = subprocess.Popen(
            [sys.executable, str(SCRIPT), *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        context = rclpy.Context()
        rclpy.init(context=context, domain_id=did)
        client = None
        try:
            client = Client(context, proc)
            yield proc, client
        finally:
            if client is not None:
                client.node.destroy_node()
            rclpy.shutdown(context=context)
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()


def urdf_order(robot) -> list[str]:
    """The actuated joints in URDF file order (independent of the script's helper)."""
    names = set(robot.joint_names)
    return [j.get("name") for j in ET.parse(robot.urdf_path).getroot().findall("joint") if j.get("name") in names]


def efforts_by_name(msg: JointState) -> dict[str, float]:
    return dict(zip(msg.name, msg.effort))


@pytest.mark.ros
def test_wall_clock_robot_speaks_ros2_control():
    robot = load_robot("talos")
    script = load_script()
    command_order = script.joint_order("shuffle:3", urdf_order(robot))
    args = ["--robot", "talos", "--rate", "250", "--joint-order", "reversed", "--command-order", "shuffle:3"]
    args += ["--wrench-topics", "left:/left_ft/wrench,right:/right_ft/wrench"]
    with robot_process(*args) as (proc, c):
        c.spin_until(lambda: c.js and c.status and c.imu and c.wrench, 30.0, "joint states, IMU, wrench, status")
        # the robot's own joint order, not Pinocchio's
        assert list(c.js[-1].name) == list(reversed(urdf_order(robot)))
        assert list(c.js[-1].name) != robot.joint_names
        assert c.imu.header.frame_id == robot.config.base_frame
        assert c.wrench.header.frame_id == robot.feet["left"].frame
        assert len(c.js[-1].effort) == robot.na and not any(c.js[-1].effort), "zero effort before a command"
        assert c.status["commands"] == 0 and not c.status["started"]  # no physics before the first command

        # the controller reads the command order from the forward_command_controller
        joints, interface = c.get_parameters(["joints", "interface_name"])
        assert list(joints.string_array_value) == command_order != robot.joint_names
        assert interface.string_value == "effort"

        # a command in that order lands on the joints of that order (read back by name)
        values = [0.5 + 0.01 * k for k in range(robot.na)]  # [N m], within every limit
        expected = dict(zip(command_order, values))
        c.spin_until(lambda: c.cmd.get_subscription_count() > 0, 10.0, "the command subscription")
        c.send(values)

        def applied():
            return c.js and all(abs(efforts_by_name(c.js[-1])[n] - e) < 1e-9 for n, e in expected.items())

        c.spin_until(applied, 10.0, "the command in /joint_states' effort")
        c.spin_until(lambda: c.status["commands"] == 1 and c.status["started"], 5.0, "status: one command")

        # wrong size: logged and ignored, the previous command stays applied
        c.send([7.0] * (robot.na - 1))
        c.spin_until(lambda: c.status["rejected_commands"] == 1, 5.0, "status: one rejected command")
        periods = c.status["periods"]
        # held forever: no new command for 1 s, still applied, each period a deadline miss
        c.spin_for(1.0)
        assert applied(), "the last command must be held"
        assert c.status["periods"] > periods and c.status["deadline_misses"] >= c.status["periods"] - periods - 30
        assert c.status["command_latency_ms_p50"] is not None and c.status["time"] > 0.0
        for key in ("fell", "fall_reason", "base_pose", "distance_m", "wall_time", "max_abs_effort"):
            assert key in c.status, key
        assert c.status["max_abs_effort"] == pytest.approx(max(values))

        # faults: dropped joint, extra joint, NaN, freeze, clear
        dropped, nan_joint = command_order[0], command_order[1]
        for fault in (f"drop_joint:{dropped}", "extra_joint:not_a_joint", f"nan_joint_state:{nan_joint}"):
            c.fault.publish(String(data=fault))
        c.js.clear()

        def faulty():
            if not c.js:
                return False
            m = c.js[-1]
            pos = dict(zip(m.name, m.position))
            return dropped not in pos and "not_a_joint" in pos and math.isnan(pos.get(nan_joint, 0.0))

        c.spin_until(faulty, 5.0, "faulty joint states")
        c.fault.publish(String(data="freeze"))
        c.spin_until(lambda: c.status["faults"]["freeze"], 5.0, "freeze")
        c.spin_for(0.1)
        c.js.clear()
        periods = c.status["periods"]
        c.spin_for(0.5)
        assert not c.js and c.status["periods"] > periods, "frozen: no joint states, physics goes on"
        c.fault.publish(String(data="clear"))
        c.spin_until(lambda: len(c.js) > 3, 5.0, "joint states after clear")
        m = c.js[-1]
        assert len(m.name) == robot.na and all(np.isfinite(m.position))

        # clean exit on SIGINT with a final status on stdout
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=15)
    assert proc.returncode == 0, err[-2000:]
    final = json.loads(out.strip().splitlines()[-1])
    assert final["commands"] == 1 and final["rejected_commands"] == 1 and not final["finished"]


@pytest.mark.ros
def test_lockstep_robot_steps_only_on_answers():
    period_ns = 2_000_000
    args = ["--robot", "talos", "--clock", "lockstep", "--rate", "500", "--duration", "0.01"]
    with robot_process(*args, "--resend-period", "0.5") as (proc, c):
        n = len(load_robot("talos").joint_names)
        c.spin_until(lambda: c.clock and c.js and c.cmd.get_subscription_count() > 0, 30.0, "first state")
        assert c.clock[-1] == 0
        c.spin_for(1.2)  # unanswered: re-published, time stands still
        assert len(c.clock) >= 2 and set(c.clock) == {0}
        js_stamp = c.js[-1].header.stamp
        assert js_stamp.sec == 0 and js_stamp.nanosec == 0  # stamps are the simulated time

        c.send([0.0] * n, stamp_ns=123)  # answers another state: ignored
        c.spin_for(0.5)
        assert set(c.clock) == {0}
        c.send([0.0] * (n + 1), stamp_ns=0)  # wrong size: ignored
        c.spin_for(0.3)
        assert set(c.clock) == {0}

        c.send([0.0] * n, stamp_ns=0)  # the answer: exactly one period
        c.spin_until(lambda: c.clock[-1] == period_ns, 5.0, "one period")
        c.spin_for(0.3)
        assert c.clock[-1] == period_ns
        c.send([0.0] * n)  # no label: the first command after the state answers it
        c.spin_until(lambda: c.clock[-1] == 2 * period_ns, 5.0, "second period")
        for k in (2, 3, 4):  # the rest up to --duration, then a final status and exit 0
            c.send([0.0] * n, stamp_ns=k * period_ns)
            c.spin_until(lambda k=k: c.clock[-1] == (k + 1) * period_ns or proc.poll() is not None, 5.0, "period")
        c.spin_until(lambda: c.status and c.status["finished"], 10.0, "final status")
        assert c.status["periods"] == 5 and c.status["deadline_misses"] == 0
        assert c.status["command_latency_ms_p50"] is not None
        out, err = proc.communicate(timeout=15)
    assert proc.returncode == 0, err[-2000:]
    assert json.loads(out.strip().splitlines()[-1])["time"] == pytest.approx(0.01)


def load_bench():
    bench = SCRIPT.parent.parent / "bench"
    sys.path.insert(0, str(bench))  # its _common
    try:
        spec = importlib.util.spec_from_file_location("ros2_control_hw", bench / "ros2_control_hw.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(bench))
    return module


@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.parametrize("robot, wrenches", [("talos", True), ("g1", False)])  # G1 has no foot F/T sensors
def test_hardware_graph_lockstep_stands_and_walks_on_the_ros2_control_robot(robot, wrenches):
    """The hardware graph (walker, controller estimating the base in its process) against
    the robot process: its own joint and command orders (the controller reads the forward
    controller's ``joints`` itself), G1 without foot force sensors (contacts from the
    walking schedule),
    lockstep at 500 Hz: stands 2 s, then walks 3 s through a stamped /cmd_vel (about 70 s wall each
    on the shared 2-core machine; bench/ros2_control_hw.py runs the longer and the
    real-time versions)."""
    summary = load_bench().run(robot, "lockstep", stand=2.0, walk=3.0, cmd_vel=0.2, rate=500.0, wrenches=wrenches)
    print(json.dumps(summary))
    assert summary["time"] == pytest.approx(5.0)
    assert not summary["fell"], summary["fall_reason"]
    assert summary["deadline_misses"] == 0
    # walked (a standing robot drifts less than 1 cm): the driver's stamped /cmd_vel starts the
    # walk at 2 s exactly, and two runs end in the same pose to the bit (Talos 0.201 m, G1
    # without foot sensors 0.282 m, 2026-12-05); from an unstamped /cmd_vel sent on the wall
    # clock Talos walked anything from 0.096 to 0.184 m
    assert summary["distance_m"] >= 0.15


def test_broadcast_bytes_are_rclpys_serialization_of_the_messages():
    """The robot publishes CDR it writes itself and decodes the commands with numpy: as
    long as rclpy's serialization of the messages built field by field (its padding bytes
    are not zeroed), and the same messages when rclpy reads them, faults included; the
    same command data and labels."""
    from builtin_interfaces.msg import Time
    from rclpy.serialization import deserialize_message, serialize_message

    def same(data: bytearray | bytes, msg) -> None:
        assert len(data) == len(serialize_message(msg))
        got = deserialize_message(bytes(data), type(msg))
        if isinstance(msg, JointState):
            assert got.header == msg.header and got.name == msg.name
            for field in ("position", "velocity", "effort"):
                np.testing.assert_array_equal(getattr(got, field), getattr(msg, field))
        else:
            assert got == msg

    script = load_script()
    opts = script.parse_args(
        ["--robot", "talos", "--wrench-topics", "left:/l/wrench,right:/r/wrench", "--joint-order", "shuffle:3"]
    )
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=0)
    robot = None
    try:
        robot = script.RobotSim(opts, context=context)
        sim = robot.sim
        rng = np.random.default_rng(1)
        for faults in (
            [],
            ["nan_joint_state", "drop_joint:" + robot.state_names[3], "extra_joint:zz", "extra_joint:a"],
        ):
            for f in faults:
                robot.apply_fault(f)
            robot.step(rng.normal(0.0, 5.0, robot.robot.na))
            ns = robot.publish_state()
            stamp = Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)
            imu = sim.imu()
            m = Imu()
            m.header.stamp, m.header.frame_id = stamp, robot.robot.config.base_frame
            m.orientation.x, m.orientation.y, m.orientation.z, m.orientation.w = (float(x) for x in imu.orientation)
            m.angular_velocity.x, m.angular_velocity.y, m.angular_velocity.z = (float(x) for x in imu.gyro)
            a = imu.linear_acceleration
            m.linear_acceleration.x, m.linear_acceleration.y, m.linear_acceleration.z = (float(x) for x in a)
            same(robot._imu_msg.buf, m)
            for side, w6 in sim.foot_wrenches().items():
                w = WrenchStamped()
                w.header.stamp, w.header.frame_id = stamp, robot.robot.feet[side].frame
                w.wrench.force.x, w.wrench.force.y, w.wrench.force.z = (float(x) for x in w6[:3])
                w.wrench.torque.x, w.wrench.torque.y, w.wrench.torque.z = (float(x) for x in w6[3:])
                same(robot._wrench_msgs[side][0].buf, w)
            q, v = sim.q[7:], sim.v[6:]
            effort = sim.data.actuator_force[sim.index.actuator]
            js = JointState()
            js.header.stamp = stamp
            for name, k in zip(robot.state_names, robot.state_index):
                if name in robot.faults["drop"]:
                    continue
                js.name.append(name)
                js.position.append(math.nan if name in robot.faults["nan"] else float(q[k]))
                js.velocity.append(float(v[k]))
                js.effort.append(float(effort[k]))
            for name in sorted(robot.faults["extra"]):
                js.name.append(name)
                js.position.append(0.0)
                js.velocity.append(0.0)
                js.effort.append(0.0)
            if faults:  # the faults show: a NaN first position, no dropped joint, the extra ones last
                assert math.isnan(js.position[0]) and js.name[-2:] == ["a", "zz"]
                assert robot.state_names[3] not in js.name
            same(robot._js_layout[1][0].buf, js)
            same(script.clock_cdr(ns), Clock(clock=stamp))
        robot.apply_fault("freeze")
        robot.publish_state()
        assert robot._js_layout[1] is None
    finally:
        if robot is not None:
            robot.close()
        rclpy.shutdown(context=context)

    for data, labels in (([], []), ([1.5, -2.0, 3.25], ["joints"]), ([0.5] * 31, ["j", "stamp_ns=123456789"])):
        msg = Float64MultiArray(data=data)
        msg.layout.dim = [MultiArrayDimension(label=lab, size=7, stride=9) for lab in labels]
        msg.layout.data_offset = 3
        values, got = script.parse_command(serialize_message(msg))
        assert values.tolist() == data and got == labels
    with pytest.raises((ValueError, struct.error)):
        script.parse_command(serialize_message(Float64MultiArray(data=[1.0, 2.0]))[:-4])
