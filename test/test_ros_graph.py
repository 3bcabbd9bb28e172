"""The ROS graph: message conversions, graph specs and launch files (no DDS), then
with real rclpy and DDS, each graph in a ROS domain of its own:

* hardware interface: the test plays ros2_control (steps its own MuJoCo model,
  publishes /joint_states, /imu, foot wrenches, applies the effort commands) under
  the bringup graph (walker, controller, state estimator): the robot stands 5 s
  and the estimate stays close to the truth;
* the simulation graph in lockstep (``wbc launch sim``): stands, then walks
  through /cmd_vel.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

rclpy = pytest.importorskip("rclpy")

import pinocchio as pin  # noqa: E402
from geometry_msgs.msg import WrenchStamped  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from sensor_msgs.msg import Imu, JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402

from whole_body_control.errors import StateError  # noqa: E402
from whole_body_control.robot import load_robot  # noqa: E402
from whole_body_control.ros import conversions as cv  # noqa: E402
from whole_body_control.ros.graph import (  # noqa: E402
    ESTIMATE,
    GROUND_TRUTH,
    Processes,
    domain_id,
    graph_env,
    hardware_graph,
    params_path,
    run_graph,
    sim_graph,
)
from whole_body_control.ros.mujoco_bridge import command_stamp  # noqa: E402
from whole_body_control.sim import SimConfig, Simulation  # noqa: E402
from zmp_walker import FootRef, WalkerReference  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


# -- no DDS --------------------------------------------------------------------------------------


def test_quaternion_and_odometry_round_trip():
    rng = np.random.default_rng(0)
    R = pin.rpy.rpyToMatrix(*rng.uniform(-1, 1, 3))
    xyzw = pin.Quaternion(R).coeffs()
    q = cv.xyzw_to_quat(xyzw)
    assert (q.x, q.y, q.z, q.w) == tuple(xyzw)  # named fields <-> xyzw
    assert np.allclose(cv.quat_to_rotation(cv.rotation_to_quat(R)), R, atol=1e-12)
    q_base = np.concatenate([rng.normal(size=3), xyzw])
    v_base = rng.normal(size=6)
    back_q, back_v = cv.base_from_odometry(cv.odometry_msg(cv.ns_to_stamp(123), q_base, v_base, "base_link"))
    assert np.array_equal(back_q, q_base) and np.array_equal(back_v, v_base)  # bit for bit


def test_joint_map_matches_by_name_and_names_the_bad_joints():
    jm = cv.JointMap(["a", "b", "c"])
    msg = cv.joint_state_msg(cv.ns_to_stamp(0), ["c", "a", "b"], [3.0, 1.0, 2.0], [30.0, 10.0, 20.0])
    q, v = cv.joints_from_msg(msg, jm)
    assert q.tolist() == [1.0, 2.0, 3.0] and v.tolist() == [10.0, 20.0, 30.0]
    with pytest.raises(StateError, match=r"missing joints \['b'\].*unknown joints \['x'\]"):
        jm.indices(["a", "c", "x"])


def test_walking_reference_message_round_trip():
    R = pin.rpy.rpyToMatrix(0.0, 0.0, 0.3)

    def foot(y, contact):
        return FootRef(np.array([0.1, y, 0.0]), R, np.ones(3), np.array([0, 0, 0.2]), np.zeros(3), np.zeros(3), contact)

    ref = WalkerReference(
        time=1.5,
        phase="ss",
        com_pos=np.array([0.1, 0.0, 0.88]),
        com_vel=np.array([0.2, 0.01, 0.0]),
        com_acc=np.array([0.3, -0.1, 0.0]),
        feet={"left": foot(0.1, True), "right": foot(-0.1, False)},
        zmp_ref=np.array([0.1, 0.05, 0.0]),
        zmp_cmd=np.array([0.11, 0.05, 0.0]),
        dcm_ref=np.array([0.2, 0.0, 0.88]),
        upcoming_footsteps=(),
        omega=3.3,
    )
    back = cv.reference_from_msg(cv.reference_msg(cv.ns_to_stamp(1_500_000_000), ref))
    assert back.time == 1.5
    for name in ("com_pos", "com_vel", "com_acc", "zmp_ref", "zmp_cmd", "dcm_ref"):
        assert np.array_equal(getattr(back, name), getattr(ref, name)), name
    for side in ("left", "right"):
        a, b = back.feet[side], ref.feet[side]
        assert a.in_contact == b.in_contact
        assert np.allclose(a.rotation, b.rotation, atol=1e-12) and np.array_equal(a.pos, b.pos)
        assert np.array_equal(a.lin_vel, b.lin_vel) and np.array_equal(a.ang_vel, b.ang_vel)


def test_graphs_remap_the_base_state_and_use_the_parameter_files():
    sim = {s.name: s for s in sim_graph("talos", lockstep=True)}
    assert set(sim) == {"mujoco_bridge", "whole_body_controller", "zmp_walker"}
    assert dict(sim["whole_body_controller"].remappings)["base_state"] == GROUND_TRUTH
    assert sim["whole_body_controller"].parameters["use_sim_time"] is True
    assert sim["mujoco_bridge"].parameters["mode"] == "lockstep"
    hw = {s.name: s for s in hardware_graph("talos", controller_name="my_effort")}
    assert set(hw) == {"zmp_walker", "whole_body_controller"}  # the estimator runs in the controller
    ctrl = hw["whole_body_controller"].parameters
    assert ctrl["controller_name"] == "my_effort" and ctrl["estimator"] == "internal"
    assert ctrl["imu_topic"] == "/imu_sensor_broadcaster/imu" and ctrl["joint_states_topic"] == "/joint_states"
    assert hw["zmp_walker"].parameters["base_source"] == "seed"
    hw = {s.name: s for s in hardware_graph("talos", estimator_node=True, imu_topic="/my_imu")}
    assert set(hw) == {"zmp_walker", "whole_body_controller", "state_estimator"}
    assert dict(hw["whole_body_controller"].remappings)["base_state"] == ESTIMATE
    assert dict(hw["state_estimator"].remappings)["/imu"] == "/my_imu"
    cmd = sim["whole_body_controller"].cmdline()
    assert cmd.count("--params-file") == 2 and "base_state:=/ground_truth/odom" in cmd
    overrides = yaml.safe_load(Path(cmd[cmd.index("--params-file", cmd.index("--params-file") + 1) + 1]).read_text())
    assert overrides["whole_body_controller"]["ros__parameters"]["reference_sync"] == "exact"
    for name in ("sim", "hardware"):
        data = yaml.safe_load(params_path(name).read_text())
        for node, section in data.items():
            assert set(section) == {"ros__parameters"}, (name, node)
    # the launch files' Node arguments say the same as the command line: files, then overrides
    kw = sim["whole_body_controller"].launch_kwargs()
    assert kw["package"] == "whole_body_control" and kw["executable"] == "whole_body_controller"
    assert kw["parameters"][:-1] == [str(f) for f in sim["whole_body_controller"].params_files]
    assert kw["parameters"][-1] == overrides["whole_body_controller"]["ros__parameters"]
    assert ("base_state", GROUND_TRUTH) in kw["remappings"]


def test_real_time_graphs_read_the_states_best_effort_and_lockstep_reliably():
    for lockstep in (False, True):
        for graph in (sim_graph("talos", lockstep=lockstep), hardware_graph("talos", lockstep=lockstep)):
            nodes = {s.name: s.parameters for s in graph}
            for name in ("whole_body_controller", "zmp_walker"):
                assert nodes[name].get("state_best_effort", False) is not lockstep, (name, lockstep)
            assert nodes["zmp_walker"].get("state_poll_period", 0.0) == (0.0 if lockstep else 0.002)


@pytest.mark.ros
def test_a_best_effort_state_reader_takes_a_reliable_writers_newest_samples():
    """As from a ros2_control broadcaster (reliable): the real-time nodes' best-effort
    readers match it and receive its samples."""
    from whole_body_control.ros.qos import STATE_QOS, state_qos

    got = []
    with domain_id() as did:
        context = rclpy.Context()
        rclpy.init(context=context, domain_id=did)
        try:
            node = Node("qos_test", context=context)
            pub = node.create_publisher(JointState, "/joint_states", STATE_QOS)
            node.create_subscription(JointState, "/joint_states", got.append, state_qos(1, best_effort=True))
            executor = rclpy.executors.SingleThreadedExecutor(context=context)
            executor.add_node(node)
            deadline = time.monotonic() + 10.0
            k = 0
            while len(got) < 5:
                assert time.monotonic() < deadline, "no sample through a reliable writer to a best-effort reader"
                msg = JointState()
                msg.header.stamp.nanosec = k
                pub.publish(msg)
                k += 1
                executor.spin_once(timeout_sec=0.01)
            node.destroy_node()
        finally:
            rclpy.shutdown(context=context)
    stamps = [m.header.stamp.nanosec for m in got]
    assert stamps == sorted(stamps)


@pytest.mark.parametrize("name", ["sim.launch.py", "bringup.launch.py"])
def test_launch_files_are_thin_and_declare_described_arguments(name):
    tree = ast.parse((ROOT / "launch" / name).read_text())
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    declared = [c for c in calls if getattr(c.func, "id", None) == "DeclareLaunchArgument"]
    assert declared and all(any(k.arg == "description" for k in c.keywords) for c in declared)
    graph_fn = "sim_graph" if name.startswith("sim") else "hardware_graph"
    assert any(getattr(c.func, "id", None) == graph_fn for c in calls)
    assert any(getattr(c.func, "attr", None) == "launch_kwargs" for c in calls)  # Node(**spec.launch_kwargs())
    names = {c.args[0].value for c in declared}
    assert names >= (
        {"robot", "headless", "lockstep", "params_file"}
        if graph_fn == "sim_graph"
        else {"robot", "controller_name", "params_file"}
    )
    if graph_fn == "hardware_graph":  # every topic the graph reads is a launch argument
        import inspect

        assert names >= set(inspect.signature(hardware_graph).parameters)


# -- with DDS: the test plays ros2_control --------------------------------------------------------


class Ros2ControlStandIn:
    """Steps its own MuJoCo model: publishes /joint_states (broadcaster), /imu, foot
    wrenches; applies each effort command to the state it answers (stamp in its layout)."""

    def __init__(self, context, robot, period):
        self.robot, self.period = robot, period
        self.sim = Simulation(robot, SimConfig(visual_meshes=False))
        self.substeps = round(period / self.sim.timestep)
        self.node = Node("ros2_control_stand_in", context=context)
        self.executor = rclpy.executors.SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        n = self.node
        self.js_pub = n.create_publisher(JointState, "/joint_states", 10)
        self.clock_pub = n.create_publisher(Clock, "/clock", 10)
        self.imu_pub = n.create_publisher(Imu, "/imu", 10)
        self.wrench_pubs = {s: n.create_publisher(WrenchStamped, f"/{s}_foot/wrench", 10) for s in ("left", "right")}
        self.cmd: Float64MultiArray | None = None
        n.create_subscription(Float64MultiArray, "/effort_controller/commands", self._on_cmd, 10)
        self.estimates: dict[int, Odometry] = {}
        n.create_subscription(
            Odometry, ESTIMATE, lambda m: self.estimates.__setitem__(cv.stamp_to_ns(m.header.stamp), m), 100
        )
        self.truth: dict[int, np.ndarray] = {}
        self.k = 0

    def _on_cmd(self, msg):
        self.cmd = msg

    def publish(self):
        ns = cv.seconds_to_ns(self.k * self.period)
        stamp = cv.ns_to_stamp(ns)
        sim = self.sim
        imu = sim.imu()
        self.clock_pub.publish(Clock(clock=stamp))  # simulated time: the graph runs with use_sim_time
        self.imu_pub.publish(cv.imu_msg(stamp, "base_link", imu.orientation, imu.gyro, imu.linear_acceleration))
        for side, w in sim.foot_wrenches().items():
            self.wrench_pubs[side].publish(cv.wrench_msg(stamp, side, w))
        q, v = sim.q, sim.v
        self.js_pub.publish(cv.joint_state_msg(stamp, self.robot.joint_names, q[7:], v[6:]))
        self.truth[ns] = np.concatenate([q[:3], pin.Quaternion(q[6], *q[3:6]).toRotationMatrix() @ v[:3]])
        return ns

    def step_when_commanded(self, timeout=30.0) -> None:
        ns = self.publish()
        deadline = time.monotonic() + timeout
        resend = time.monotonic() + 1.0
        while True:
            self.executor.spin_once(timeout_sec=0.05)
            if self.cmd is not None and command_stamp(self.cmd) == ns:
                break
            if time.monotonic() > resend:  # discovery may have lost the first state
                self.publish()
                resend = time.monotonic() + 1.0
            assert time.monotonic() < deadline, f"no command for the state at {ns * 1e-9:.3f} s"
        tau = np.array(self.cmd.data)
        for _ in range(self.substeps):
            self.sim.step(tau)
        self.k += 1


def _with(specs, **params):
    return [dataclasses.replace(s, parameters={**s.parameters, **params}) for s in specs]


@pytest.mark.ros
@pytest.mark.slow
def test_hardware_interface_stands_5s_with_the_state_estimator():
    robot = load_robot("talos")
    period = 0.002  # [s] 500 Hz: keeps this test short on a shared 2-core machine
    wrenches = {"left_wrench_topic": "/left_foot/wrench", "right_wrench_topic": "/right_foot/wrench"}
    graph = hardware_graph("talos", use_sim_time=True, lockstep=True, imu_topic="/imu", estimator_node=True, **wrenches)
    specs = _with(graph, control_period=period, read_joint_order=False)
    # the estimator starts from where the robot stands (the rest it measures)
    specs = [
        _with([s], initial_xy=[float(x) for x in robot.q_ref[:2]])[0] if s.name == "state_estimator" else s
        for s in specs
    ]
    with domain_id() as did:
        context = rclpy.Context()
        rclpy.init(context=context, domain_id=did)
        logs = Path(tempfile.mkdtemp(prefix="wbc_test_hw_"))
        procs = Processes(specs, graph_env(did), logs)
        try:
            hw = Ros2ControlStandIn(context, robot, period)
            z0 = hw.sim.base_height()
            wall0 = time.monotonic()
            heights = []
            for _ in range(round(5.0 / period)):
                hw.step_when_commanded()
                heights.append(hw.sim.base_height())
            wall = time.monotonic() - wall0
            for _ in range(20):
                hw.executor.spin_once(timeout_sec=0.01)
        finally:
            rclpy.shutdown(context=context)
            procs.stop()
    assert all(p.poll() is not None for _, p, _ in procs.procs)
    print(f"hardware loop: {round(5.0 / period) / wall:.0f} Hz through DDS (walker, estimator, controller)")
    assert hw.sim.non_foot_ground_contact() is None
    assert max(abs(h - z0) for h in heights) < 0.03, "base height must stay"
    common = sorted(set(hw.estimates) & set(hw.truth))
    assert len(common) > 0.9 * len(heights)
    errors = np.array(
        [np.concatenate(cv.base_from_odometry(hw.estimates[k])[:1])[:3] - hw.truth[k][:3] for k in common]
    )
    vel_err = []
    for k in common:
        qb, vb = cv.base_from_odometry(hw.estimates[k])
        R = pin.Quaternion(qb[6], *qb[3:6]).toRotationMatrix()
        vel_err.append(np.linalg.norm(R @ vb[:3] - hw.truth[k][3:]))
    pos_err = float(np.max(np.linalg.norm(errors, axis=1)))
    print(f"estimator: max position error {pos_err * 1e3:.2f} mm, max velocity error {max(vel_err) * 1e3:.1f} mm/s")
    assert pos_err < 0.005
    assert max(vel_err) < 0.05


class ImuLateStandIn(Ros2ControlStandIn):
    """Publishes the IMU after the joint states when ``imu_late`` (broadcasters in no set
    order), with ``tilt`` [rad] about x added to its orientation."""

    imu_late = False
    tilt = 0.0

    def publish(self):
        if not self.imu_late:
            return super().publish()
        ns = cv.seconds_to_ns(self.k * self.period)
        stamp = cv.ns_to_stamp(ns)
        self.clock_pub.publish(Clock(clock=stamp))
        for side, w in self.sim.foot_wrenches().items():
            self.wrench_pubs[side].publish(cv.wrench_msg(stamp, side, w))
        q, v = self.sim.q, self.sim.v
        self.js_pub.publish(cv.joint_state_msg(stamp, self.robot.joint_names, q[7:], v[6:]))
        deadline = time.monotonic() + 0.3
        while time.monotonic() < deadline:  # the controller must not answer without the IMU
            self.executor.spin_once(timeout_sec=0.02)
            assert self.cmd is None or command_stamp(self.cmd) != ns, "answered before its IMU came"
        imu = self.sim.imu()
        tilted = pin.Quaternion(*imu.orientation[[3, 0, 1, 2]]) * pin.Quaternion(
            pin.AngleAxis(self.tilt, np.array([1.0, 0.0, 0.0]))
        )
        xyzw = np.array([tilted.x, tilted.y, tilted.z, tilted.w])
        self.imu_pub.publish(cv.imu_msg(stamp, "base_link", xyzw, imu.gyro, imu.linear_acceleration))
        return ns


@pytest.mark.ros
@pytest.mark.slow
def test_lockstep_controller_answers_a_state_with_the_imu_of_its_instant():
    """Lockstep on the hardware graph: a state whose IMU comes after the joint states waits
    for it and is answered with it (a tilted IMU at that instant: a fall, damping), not with
    the IMU of the instant before."""
    robot = load_robot("talos")
    period = 0.002
    wrenches = {"left_wrench_topic": "/left_foot/wrench", "right_wrench_topic": "/right_foot/wrench"}
    specs = _with(
        hardware_graph("talos", use_sim_time=True, lockstep=True, imu_topic="/imu", **wrenches),
        control_period=period,
        read_joint_order=False,
    )
    with domain_id() as did:
        context = rclpy.Context()
        rclpy.init(context=context, domain_id=did)
        procs = Processes(specs, graph_env(did), Path(tempfile.mkdtemp(prefix="wbc_test_imu_late_")))
        try:
            hw = ImuLateStandIn(context, robot, period)
            for _ in range(100):
                hw.step_when_commanded()
            upright = np.abs(np.array(hw.cmd.data)).max()
            hw.imu_late = True  # upright: the command is not damping
            hw.step_when_commanded()
            assert np.abs(np.array(hw.cmd.data)).max() > 0.5 * upright
            hw.tilt = 1.0  # beyond max_tilt (0.8 rad), at this instant only
            hw.step_when_commanded()
            damping = np.abs(np.array(hw.cmd.data)).max()
        finally:
            rclpy.shutdown(context=context)
            procs.stop()
    assert upright > 20.0, upright  # standing: gravity torques
    assert damping < 0.2 * upright, (damping, upright)


# -- with DDS: the simulation graph ----------------------------------------------------------------


@pytest.mark.ros
@pytest.mark.slow
def test_sim_graph_lockstep_walks_through_cmd_vel():
    params = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
    data = yaml.safe_load(params_path("sim").read_text())
    data["/**"]["ros__parameters"]["control_period"] = 0.002  # 500 Hz keeps the test short
    yaml.safe_dump(data, params)
    params.close()
    summary = run_graph("talos", lockstep=True, duration=10.0, cmd_vel=0.3, params_file=params.name)
    print(json.dumps(summary))
    assert not summary["fell"], summary["fall_reason"]
    assert summary["deadline_misses"] == 0
    assert summary["distance_m"] >= 2.0


def test_cdr_readers_agree_with_rclpy_deserialization():
    """The controller reads its inputs from their CDR bytes (rclpy's message objects cost
    45 to 130 us each): the same values as rclpy's own deserialization, for frame ids of
    every length (alignment), joints in another order, extra, missing and short arrays."""
    from rclpy.serialization import serialize_message

    rng = np.random.default_rng(3)
    robot = load_robot("talos")
    names = list(robot.joint_names)
    reader = cv.JointStateReader(names)
    for frame in ("", "b", "base", "base_link", "abcdefghi"):
        stamp = cv.ns_to_stamp(int(rng.integers(0, 10**12)))
        ns = cv.stamp_to_ns(stamp)
        q, g, a = rng.normal(size=4), rng.normal(size=3), rng.normal(size=3)
        assert _equal(cv.imu_from_cdr(serialize_message(cv.imu_msg(stamp, frame, q, g, a))), (ns, q, g, a))
        qb, vb = rng.normal(size=7), rng.normal(size=6)
        odom = cv.odometry_msg(stamp, qb, vb, frame + "_child")
        odom.header.frame_id = frame
        assert _equal(cv.odometry_from_cdr(serialize_message(odom)), (ns, qb, vb))
        w = rng.normal(size=6)
        assert _equal(cv.wrench_from_cdr(serialize_message(cv.wrench_msg(stamp, frame, w))), (ns, w))
        for order in (names, names[::-1], [*names, "gripper"], names[:4] + names[5:]):
            msg = cv.joint_state_msg(stamp, order, rng.normal(size=len(order)), rng.normal(size=len(order)))
            msg.header.frame_id = frame
            for _ in range(2):  # parsed, then from the cached name list
                got = reader.read_cdr(serialize_message(msg))
                assert got[0] == ns and _equal(got[1:], reader.read(msg))
        msg.velocity = list(msg.velocity)[:-3]  # shorter than the names: those joints are missing
        got = reader.read_cdr(serialize_message(msg))
        assert _equal(got[1:], reader.read(msg)) and len(got[3]) >= 3


def _equal(a, b) -> bool:
    return len(a) == len(b) and all(
        np.array_equal(x, y, equal_nan=True) if isinstance(x, np.ndarray) else x == y for x, y in zip(a, b)
    )


def test_log_throttle_lets_one_message_per_key_and_period_through():
    """Per-period messages ask LogThrottle before rclpy's logger, which costs about 0.5 ms a
    call throttled or not: the first of a key goes through, a repeat within the period not."""
    from whole_body_control.ros.params import LogThrottle

    throttle = LogThrottle(period=0.05)
    assert throttle("a") and not throttle("a") and throttle("b")
    time.sleep(0.06)
    assert throttle("a") and not throttle("a")


def test_quantiles_are_nearest_ranks_of_the_kept_values_of_a_ring():
    """The nodes' diagnostics (tick and round-trip percentiles) keep the last values in a ring
    and take nearest-rank quantiles by one partial sort."""
    from whole_body_control.ros.params import Ring, quantiles

    ring = Ring(100)
    assert quantiles(ring.values(), (0.5, 0.99)) == [None, None]
    for k in range(250):  # only the last 100 (150 .. 249) are kept
        ring.append(float(k))
    assert ring.count == 250 and sorted(ring.values()) == list(range(150, 250))
    assert quantiles(ring.values(), (0.0, 0.5, 0.99, 1.0)) == [150.0, 200.0, 248.0, 249.0]
    x = np.random.default_rng(0).random(4096)
    median, p99 = quantiles(x, (0.5, 0.99))
    assert abs(median - np.median(x)) < 1e-3 and abs(p99 - np.percentile(x, 99)) < 1e-3


@pytest.mark.ros
def test_per_period_timer_runs_without_rclpy_inspecting_it_and_spin_stops_on_shutdown():
    """The 1 kHz timers (the bridge's real-time tick, the controller's watchdog) are wrapped
    by ``per_period``: rclpy finds no parameter to inspect; the callback still runs every
    period, and ``spin_executor`` returns when the context shuts down."""
    import inspect
    import threading

    from whole_body_control.ros.params import make_executor, per_period, spin_executor

    class Counter:
        n = 0

        def tick(self) -> None:
            self.n += 1

    counter = Counter()
    wrapped = per_period(counter.tick)
    assert inspect.signature(wrapped).parameters == {}
    with domain_id() as did:
        context = rclpy.Context()
        rclpy.init(context=context, domain_id=did)
        node = Node("per_period", context=context)
        node.create_timer(0.001, wrapped)
        executor = make_executor(context=context)
        executor.add_node(node)
        threading.Timer(0.5, lambda: rclpy.try_shutdown(context=context)).start()
        t0 = time.monotonic()
        with pytest.raises(rclpy.executors.ExternalShutdownException):
            spin_executor(executor, context)
        assert time.monotonic() - t0 < 5.0
        assert counter.n > 50, counter.n
        node.destroy_node()


@pytest.mark.ros
def test_command_line_parameters_win_over_the_parameter_file():
    """``ros2 launch``/``ros2 run`` users pass ``-p name:=value``; rcl ranks a node's own
    section of a parameter file above it, the nodes do not (hardware.yaml sets both)."""
    from rcl_interfaces.srv import GetParameters

    spec = hardware_graph("talos", walker=False)[0]
    cmd = [*spec.cmdline(), "-p", "stale_periods:=7", "-p", "max_tilt:=1", "-p", "imu_topic:=/my/imu"]
    assert "--params-file" in cmd and str(params_path("hardware")) in cmd
    with domain_id() as did:
        logs = Path(tempfile.mkdtemp(prefix="wbc_test_params_"))
        env = graph_env(did)
        context = rclpy.Context()
        rclpy.init(context=context, domain_id=did)
        with open(logs / "controller.log", "wb") as out:
            proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            node = Node("param_reader", context=context)
            client = node.create_client(GetParameters, "/whole_body_controller/get_parameters")
            assert client.wait_for_service(timeout_sec=60.0), (logs / "controller.log").read_text()
            future = client.call_async(GetParameters.Request(names=["stale_periods", "max_tilt", "imu_topic"]))
            executor = rclpy.executors.SingleThreadedExecutor(context=context)
            executor.add_node(node)
            executor.spin_until_future_complete(future, timeout_sec=20.0)
            values = future.result().values
            assert values[0].integer_value == 7  # hardware.yaml says 3
            assert values[1].double_value == 1.0  # hardware.yaml says 0.6; an integer taken as a number
            assert values[2].string_value == "/my/imu"
        finally:
            rclpy.shutdown(context=context)
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def test_command_reader_agrees_with_the_message():
    """The bridge reads each command from its bytes: the efforts and the stamp
    :func:`command_stamp` finds in the message (the first ``stamp_ns=`` label; an
    unreadable one is no stamp), for any layout; truncated bytes are an error."""
    from rclpy.serialization import serialize_message
    from std_msgs.msg import MultiArrayDimension

    from whole_body_control.errors import StateError

    rng = np.random.default_rng(7)
    labels = (
        ["joints"],
        [],
        ["joints", "stamp_ns=123"],
        ["x", "stamp_ns=12", "stamp_ns=34"],
        ["stamp_ns=zz", "stamp_ns=5"],
    )
    for dims in labels:
        for n in (0, 1, 32):
            msg = Float64MultiArray(data=rng.normal(size=n).tolist())
            msg.layout.dim = [MultiArrayDimension(label=lb, size=k, stride=2 * k) for k, lb in enumerate(dims)]
            msg.layout.data_offset = 3
            data = serialize_message(msg)
            values, stamp = cv.command_from_cdr(data)
            assert np.array_equal(values, cv.command_from_msg(msg)) and stamp == command_stamp(msg)
            with pytest.raises(StateError):
                cv.command_from_cdr(data[:-1] if n else data[:-5])


def test_cdr_writers_agree_with_rclpy_serialization():
    """The control loop publishes CDR bytes it builds itself (message objects cost 4 to 13
    times more): rclpy reads them back as the message the typed helper builds."""
    from rclpy.serialization import deserialize_message
    from rosgraph_msgs.msg import Clock
    from std_msgs.msg import MultiArrayDimension

    rng = np.random.default_rng(5)
    for frame in ("", "a", "base_link", "abcdefgh"):
        ns = int(rng.integers(0, 10**12))
        stamp = cv.ns_to_stamp(ns)
        v = rng.normal(size=int(rng.integers(1, 40)))
        cmd = cv.command_msg(v)
        assert deserialize_message(cv.command_cdr(v), Float64MultiArray) == cmd
        cmd.layout.dim.append(MultiArrayDimension(label=f"stamp_ns={ns}", size=0, stride=0))
        assert deserialize_message(cv.command_cdr(v, ns), Float64MultiArray) == cmd
        names = [f"joint_{i}" * (i % 3 + 1) for i in range(7)]
        q, qd, tau = rng.normal(size=7), rng.normal(size=7), rng.normal(size=7)
        for effort in (tau, None):
            assert deserialize_message(cv.joint_state_cdr(ns, names, q, qd, effort), JointState) == (
                cv.joint_state_msg(stamp, names, q, qd, effort)
            )
        quat, gyro, acc = rng.normal(size=4), rng.normal(size=3), rng.normal(size=3)
        assert deserialize_message(cv.imu_cdr(ns, frame, quat, gyro, acc), Imu) == cv.imu_msg(
            stamp, frame, quat, gyro, acc
        )
        qb, vb = rng.normal(size=7), rng.normal(size=6)
        assert deserialize_message(cv.odometry_cdr(ns, qb, vb, frame), Odometry) == cv.odometry_msg(
            stamp, qb, vb, frame
        )
        w = rng.normal(size=6)
        assert deserialize_message(cv.wrench_cdr(ns, frame, w), WrenchStamped) == cv.wrench_msg(stamp, frame, w)
        assert deserialize_message(cv.clock_cdr(ns), Clock) == Clock(clock=stamp)


def _writer_messages(ns, names, q, qd, tau, frame, values):
    """The 1 kHz messages written field by field with the CDR writer (the templates' reference)."""
    w = cv._CdrWriter()
    w.header(ns, "")
    w.u32(len(names))
    for name in names:
        w.string(name)
    for a in (q, qd, () if tau is None else tau):
        w.doubles(a, sequence=True)
    js = w.bytes()
    w = cv._CdrWriter()
    w.header(ns, frame)
    w.doubles(np.concatenate([q[:4], np.zeros(9), q[4:7], np.zeros(9), qd[:3], np.zeros(9)]))
    imu = w.bytes()
    w = cv._CdrWriter()
    w.header(ns, cv.WORLD_FRAME)
    w.string(frame)
    w.doubles(np.concatenate([q[:7], np.zeros(36), qd[:6], np.zeros(36)]))
    odom = w.bytes()
    commands = []
    for stamp in (None, ns):
        w = cv._CdrWriter()
        w.u32(1 if stamp is None else 2)
        w.string("joints")
        w.u32(len(values))
        w.u32(len(values))
        if stamp is not None:
            w.string(f"stamp_ns={stamp}")
            w.u32(0)
            w.u32(0)
        w.u32(0)
        w.doubles(values, sequence=True)
        commands.append(w.bytes())
    w = cv._CdrWriter()
    w.header(ns, frame)
    w.doubles(qd[:6])
    wrench = w.bytes()
    w = cv._CdrWriter()
    w.time(ns)
    return js, imu, odom, commands, wrench, w.bytes()


def test_the_templated_1khz_messages_are_the_writers_bytes():
    """The bridge's and the controller's per-period messages come from templates (their fixed
    bytes cut around the stamp and the arrays): byte for byte what the CDR writer gives, for
    any names, frame, array sizes (empty included) and stamp length."""
    rng = np.random.default_rng(11)
    for k in range(60):
        n = int(rng.integers(7, 40))
        names = [f"j{i}" * int(rng.integers(1, 4)) for i in range(n)]
        q, qd, tau = rng.normal(size=n), rng.normal(size=n), rng.normal(size=n)
        frame = ("", "a", "base_link", "abcdefgh", "imu_link_x")[k % 5]
        ns = int(rng.integers(0, 10 ** int(rng.integers(1, 13))))
        values = rng.normal(size=int(rng.integers(0, 40)))
        effort = tau if k % 3 else None
        js, imu, odom, commands, wrench, clock = _writer_messages(ns, names, q, qd, effort, frame, values)
        assert cv.joint_state_cdr(ns, names, q, qd, effort) == js
        assert cv.imu_cdr(ns, frame, q[:4], q[4:7], qd[:3]) == imu
        assert cv.odometry_cdr(ns, q, qd, frame) == odom
        assert cv.command_cdr(values) == commands[0] and cv.command_cdr(values, ns) == commands[1]
        assert cv.wrench_cdr(ns, frame, qd) == wrench
        assert cv.clock_cdr(ns) == clock


def test_launch_control_period_reaches_every_node_and_rejects_bad_values():
    from whole_body_control.ros.graph import _period_params

    kw = _period_params(0.002)
    specs = sim_graph("talos", **kw)
    assert {s.name: s.parameters["control_period"] for s in specs} == {
        "mujoco_bridge": 0.002,
        "whole_body_controller": 0.002,
        "zmp_walker": 0.002,
    }
    assert _period_params(None) == {}
    for bad in ("0", "-1", "nan"):
        out = subprocess.run(
            [sys.executable, "-m", "whole_body_control.cli", "launch", "sim", "--control-period", bad],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 2 and "--control-period must be finite and > 0" in out.stderr
        assert "Traceback" not in out.stderr


def test_fastdds_profile_unless_the_user_has_one(monkeypatch, tmp_path):
    """The nodes' processes take the package's Fast DDS participant profile (0.5 s announcement
    period: a robot that comes up after them is found within it, not within 3 s), a profile of
    the user's own stays."""
    from whole_body_control.ros.params import FASTDDS_PROFILE_ENV, use_fastdds_profile

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(FASTDDS_PROFILE_ENV, raising=False)
    monkeypatch.delenv("SKIP_DEFAULT_XML_FILE", raising=False)
    use_fastdds_profile()
    profile = Path(os.environ[FASTDDS_PROFILE_ENV])
    assert profile.name == "fastdds_participant.xml" and profile.is_file()
    assert "<leaseAnnouncement>" in profile.read_text()
    monkeypatch.setenv(FASTDDS_PROFILE_ENV, "/user/profile.xml")
    use_fastdds_profile()
    assert os.environ[FASTDDS_PROFILE_ENV] == "/user/profile.xml"


PARTICIPANT_THREADS = """
import glob, rclpy
from rclpy.node import Node
rclpy.init()
node = Node("transport_probe")
print(sorted(open(t + "/comm").read().strip() for t in glob.glob("/proc/self/task/*")))
"""


def _env_without_rmw_choice() -> dict:
    """This environment without an RMW or a Fast DDS profile of its own (what graph_env decides on)."""
    from whole_body_control.ros.params import FASTDDS_PROFILE_ENV

    return {k: v for k, v in os.environ.items() if k not in ("RMW_IMPLEMENTATION", FASTDDS_PROFILE_ENV)}


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs /proc (Linux)")
@pytest.mark.parametrize("profile", ["fastdds_participant", "fastdds_localhost"])
def test_the_nodes_participants_talk_over_udp_without_shared_memory(profile):
    """With the package's profiles a node's participant has Fast DDS's UDP transport and no
    shared-memory one (whose port check slept 333 ms: see fastdds_participant.xml): the
    nodes' own profile (discovery range SUBNET, Fast DDS's default) and the localhost one
    that ``graph_env`` gives a graph asked for LOCALHOST (for which rmw_fastrtps would set
    the transports itself, shared memory included)."""
    from whole_body_control.ros.params import FASTDDS_PROFILE_ENV, fastdds_profile_path

    base = _env_without_rmw_choice()
    with domain_id() as did:
        if profile == "fastdds_localhost":
            env = graph_env(did, {**base, "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"})
            assert env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "SUBNET"
        else:
            env = graph_env(did, {**base, "ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET"})
            env[FASTDDS_PROFILE_ENV] = str(fastdds_profile_path("fastdds_participant"))
        assert Path(env[FASTDDS_PROFILE_ENV]).name == f"{profile}.xml"
        out = subprocess.run(
            [sys.executable, "-c", PARTICIPANT_THREADS], env=env, capture_output=True, text=True, timeout=60
        )
    assert out.returncode == 0, out.stderr
    threads = out.stdout.strip().splitlines()[-1]
    assert "dds.udp" in threads, threads  # (Fast DDS names its receive threads by transport)
    assert "dds.shm" not in threads, threads


def test_graph_env_keeps_a_range_or_a_profile_of_the_callers():
    from whole_body_control.ros.params import FASTDDS_PROFILE_ENV

    base = _env_without_rmw_choice()
    env = graph_env(5, {**base, "ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET"})
    assert env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "SUBNET" and FASTDDS_PROFILE_ENV not in env
    env = graph_env(5, {**base, "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST", FASTDDS_PROFILE_ENV: "/mine.xml"})
    assert env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST" and env[FASTDDS_PROFILE_ENV] == "/mine.xml"
    env = graph_env(
        5, {**base, "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST", "RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp"}
    )
    assert env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST" and FASTDDS_PROFILE_ENV not in env
    env = graph_env(5, {k: v for k, v in base.items() if k != "ROS_AUTOMATIC_DISCOVERY_RANGE"})
    assert env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "SUBNET"  # LOCALHOST by default, over UDP
    assert Path(env[FASTDDS_PROFILE_ENV]).name == "fastdds_localhost.xml" and Path(env[FASTDDS_PROFILE_ENV]).is_file()
