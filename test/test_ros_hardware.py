"""The hardware graph (walker + controller, base estimated in the controller's process)
against a robot process that plays ros2_control (``test/ros2_control_robot.py``: its
own MuJoCo model, its own joint and command orders, a forward_command_controller that
holds the last command), with real rclpy and DDS, each graph in a ROS domain of its own.

What the robot sees is what is checked: faults injected on the robot side (a NaN joint
state, a joint missing from /joint_states, an extra joint, a dead walker) must be
answered with damping naming the cause, never with silence; a command joint order that
disagrees with the forward controller's stops the controller before its first command;
an IMU on another topic is named while the controller waits.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

rclpy = pytest.importorskip("rclpy")

from rclpy.node import Node  # noqa: E402
from std_msgs.msg import String  # noqa: E402

from whole_body_control.robot import load_robot  # noqa: E402
from whole_body_control.ros.graph import Processes, domain_id, graph_env, hardware_graph  # noqa: E402

pytestmark = pytest.mark.ros

ROBOT_SCRIPT = Path(__file__).resolve().parent / "ros2_control_robot.py"
IMU = "/imu_sensor_broadcaster/imu"
RATE = 500.0  # [Hz] lockstep: the rate only sets the simulated period


class Graph:
    """Robot process + hardware graph + the operator's view (diagnostics, robot status)."""

    def __init__(self, did: int, robot_args: list[str], graph_kwargs: dict, params: dict, walker: bool = True):
        self.logs = Path(tempfile.mkdtemp(prefix="wbc_test_hw_"))
        env = graph_env(did)
        cmd = [sys.executable, str(ROBOT_SCRIPT), "--robot", "talos", "--rate", str(RATE), *robot_args]
        self.robot_log = open(self.logs / "robot.log", "wb")
        self.robot = subprocess.Popen(
            cmd, env=env, stdout=self.robot_log, stderr=subprocess.STDOUT, start_new_session=True
        )
        specs = hardware_graph("talos", walker=walker, **graph_kwargs)
        specs = [dataclasses.replace(s, parameters={**s.parameters, **params}) for s in specs]
        self.procs = Processes(specs, env, self.logs)
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=did)
        self.node = Node("operator", context=self.context)
        self.executor = rclpy.executors.SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.diag: dict | None = None
        self.status: dict | None = None
        self.node.create_subscription(
            String, "/whole_body_controller/diagnostics", lambda m: setattr(self, "diag", json.loads(m.data)), 10
        )
        self.node.create_subscription(
            String, "/robot_sim/status", lambda m: setattr(self, "status", json.loads(m.data)), 10
        )
        self.fault_pub = self.node.create_publisher(String, "/robot_sim/fault", 10)

    def spin_until(self, what: str, condition, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            self.executor.spin_once(timeout_sec=0.05)
            dead = [d for d in self.procs.dead() if "zmp_walker" not in d or not getattr(self, "walker_killed", False)]
            assert not dead, f"{what}: " + "; ".join(dead)
            assert self.robot.poll() is None, f"{what}: the robot process exited ({self.log('robot')})"
            assert time.monotonic() < deadline, f"{what}: not within {timeout} s; diagnostics {self.diag}"

    def sim_time(self) -> float:
        return self.status["time"] if self.status else 0.0

    def run_for(self, seconds: float) -> None:
        """Spin until ``seconds`` [s] of simulated time have passed."""
        self.spin_until("time", lambda: self.status is not None)
        end = self.sim_time() + seconds
        self.spin_until(f"simulated time {end:.2f} s", lambda: self.sim_time() >= end)

    def fault(self, text: str) -> None:
        self.fault_pub.publish(String(data=text))

    def log(self, name: str) -> str:
        path = self.logs / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def close(self) -> None:
        self.node.destroy_node()
        rclpy.shutdown(context=self.context)
        self.procs.stop()
        if self.robot.poll() is None:
            os.killpg(self.robot.pid, signal.SIGINT)
            try:
                self.robot.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.robot.pid, signal.SIGKILL)
                self.robot.wait()
        self.robot_log.close()


@pytest.fixture
def graph_factory():
    made = []

    def make(*args, **kwargs) -> Graph:
        ctx = domain_id()
        did = ctx.__enter__()
        made.append((ctx, None))
        g = Graph(did, *args, **kwargs)
        made[-1] = (ctx, g)
        return g

    try:
        yield make
    finally:
        for ctx, g in made:
            if g is not None:
                g.close()
            ctx.__exit__(None, None, None)
        assert all(p.poll() is not None for _, g in made if g is not None for _, p, _ in g.procs.procs)


LOCKSTEP = {"use_sim_time": True, "lockstep": True, "imu_topic": IMU}


@pytest.mark.slow
def test_faults_on_the_robot_side_end_in_damping_naming_the_cause(graph_factory):
    joint = "arm_left_4_joint"
    g = graph_factory(
        ["--clock", "lockstep", "--imu-topic", IMU, "--command-order", "shuffle:3"],
        LOCKSTEP,
        {"control_period": 1.0 / RATE},
    )
    g.spin_until("armed", lambda: g.diag is not None and g.diag["armed"] and g.sim_time() > 0.2)
    assert g.diag["status"] == "ok"
    assert "`joints` of /effort_controller" in g.log("whole_body_controller")  # the order was read

    # an extra joint in /joint_states (a gripper): ignored
    g.fault("extra_joint:gripper_joint")
    g.run_for(0.2)
    assert g.diag["armed"] and g.diag["status"] == "ok", g.diag

    # a NaN joint state: damping naming the joint, never a NaN command; back when it clears
    n0 = g.diag["damping_commands"]
    g.fault(f"nan_joint_state:{joint}")
    g.spin_until("damping on NaN", lambda: not g.diag["armed"] and g.diag["damping_commands"] > n0 + 10)
    assert f"non-finite joint position of {joint}" in g.diag["reason"], g.diag
    g.fault("clear")
    g.spin_until("re-armed after NaN", lambda: g.diag["armed"])

    # a joint missing from /joint_states: damping naming it
    n0 = g.diag["damping_commands"]
    g.fault(f"drop_joint:{joint}")
    g.spin_until("damping on a missing joint", lambda: not g.diag["armed"] and g.diag["damping_commands"] > n0 + 10)
    assert joint in g.diag["reason"] and "lack" in g.diag["reason"], g.diag
    assert joint in g.log("whole_body_controller")
    g.fault("clear")
    g.spin_until("re-armed after the missing joint", lambda: g.diag["armed"])
    g.run_for(0.2)
    assert not g.status["fell"], g.status

    # the walker dies: the controller does not wait forever for its reference
    walker = next(p for s, p, _ in g.procs.procs if s.name == "zmp_walker")
    g.walker_killed = True
    os.killpg(walker.pid, signal.SIGKILL)
    g.spin_until("damping without the walker", lambda: not g.diag["armed"], timeout=120.0)
    assert "walking reference" in g.diag["reason"], g.diag
    assert g.diag["commands"] > 0


@pytest.mark.slow
def test_a_command_order_that_disagrees_with_the_forward_controller_stops_the_controller(graph_factory):
    robot = load_robot("talos")
    g = graph_factory(
        ["--clock", "lockstep", "--imu-topic", IMU, "--command-order", "reversed"],
        LOCKSTEP,
        {"joints": list(robot.joint_names)},  # this node was told Pinocchio's order
        walker=False,
    )
    ctrl = next(p for s, p, _ in g.procs.procs if s.name == "whole_body_controller")
    deadline = time.monotonic() + 90.0
    while ctrl.poll() is None:
        g.executor.spin_once(timeout_sec=0.1)
        assert time.monotonic() < deadline, "the controller did not stop"
    assert ctrl.returncode == 2
    log = g.log("whole_body_controller")
    assert "command joint order mismatch" in log and f"[0] '{robot.joint_names[0]}' here" in log
    assert "Traceback" not in log
    assert g.status is None or g.status["commands"] == 0  # stopped before its first command


@pytest.mark.slow
def test_a_lost_joint_order_response_is_asked_again_and_the_controller_arms(graph_factory):
    # the forward controller's parameter service leaves the first request unanswered (a
    # response lost in discovery): the controller waited for it forever, never arming
    g = graph_factory(
        ["--clock", "lockstep", "--imu-topic", IMU, "--unanswered-parameter-requests", "1"], LOCKSTEP, {}, walker=False
    )
    g.spin_until("the first commands", lambda: g.status is not None and g.status["commands"] > 50, timeout=90.0)
    g.spin_until("diagnostics", lambda: g.diag is not None and g.diag["armed"], timeout=30.0)
    log = g.log("whole_body_controller")
    assert "/effort_controller/get_parameters has not answered in 1.0 s: asking again (retry 1)" in log
    assert "command joint order: `joints` of /effort_controller" in log
    g.run_for(1.0)
    assert not g.status["fell"] and g.status["rejected_commands"] == 0, g.status


@pytest.mark.slow
def test_an_imu_on_another_topic_is_named_while_the_controller_waits(graph_factory):
    g = graph_factory(
        ["--clock", "lockstep", "--imu-topic", "/imu_broadcaster/imu"],  # not where the controller listens
        LOCKSTEP,
        {},
        walker=False,
    )
    g.spin_until("diagnostics", lambda: g.diag is not None and g.diag["commands"] > 0, timeout=90.0)
    assert not g.diag["armed"]
    assert IMU in g.diag["status"] and g.diag["status"].startswith("waiting for"), g.diag
    g.spin_until("a log line", lambda: f"waiting for {IMU}" in g.log("whole_body_controller"), timeout=30.0)
