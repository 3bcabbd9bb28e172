"""The walking-reference trajectory: samples of the walker's output on a ns grid, sent
as one MultiDOFJointTrajectory per walker period and evaluated by the controller at
its own rate.

* no DDS: walker -> message (objects and CDR bytes) -> trajectory -> ``at()`` gives the
  walker's own ``cycle()`` output on the grid, interpolates between samples, the
  buffer's replacement rules, bad messages rejected with the reason;
* with DDS: the walker node in its own process and ROS domain, driven by states
  published from the test: a trajectory every 1/rate of state stamps reaching
  ``ns + horizon``, equal to the same computation done here without ROS, and a
  /cmd_vel changes the plan from the next batch on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import tempfile
import time
import types
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")

from geometry_msgs.msg import Twist  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.serialization import deserialize_message, serialize_message  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from trajectory_msgs.msg import MultiDOFJointTrajectory  # noqa: E402

from whole_body_control.config import load_wbc_config  # noqa: E402
from whole_body_control.errors import StateError  # noqa: E402
from whole_body_control.reference_trajectory import (  # noqa: E402
    VECTOR_FIELDS,
    ReferenceBuffer,
    ReferenceOutOfRange,
    ReferenceTrajectory,
)
from whole_body_control.robot import load_robot  # noqa: E402
from whole_body_control.ros import conversions as cv  # noqa: E402
from whole_body_control.ros.graph import (  # noqa: E402
    GROUND_TRUTH,
    WALKER,
    NodeSpec,
    Processes,
    domain_id,
    graph_env,
    params_path,
)
from whole_body_control.state import RobotState  # noqa: E402
from whole_body_control.walker_stage import contacts_ahead, make_walker  # noqa: E402
from zmp_walker import MeasuredState, load_walker_config  # noqa: E402

MS = 1_000_000  # [ns]
SIDES = ("left", "right")
SCALARS = ("com_pos", "com_vel", "com_acc", "zmp_ref", "zmp_cmd", "dcm_ref")
FOOT = ("pos", "lin_vel", "ang_vel", "lin_acc", "ang_acc")


class OfflineWalker:
    """What the walker node computes, without ROS: seeded at the robot's reference
    posture, contacts released ``contact_lead`` before lift-off."""

    def __init__(self, robot):
        state = RobotState(robot)
        state.update(robot.q_ref, np.zeros(robot.model.nv))
        self.walker = make_walker(robot, types.SimpleNamespace(state=state), load_walker_config(robot=robot.name))
        self.lead = load_wbc_config(robot=robot.name).contacts.transition_time

    def sample(self, ns: int, measured: MeasuredState | None = None):
        t = ns * 1e-9
        ref = self.walker.cycle(t, measured)
        contacts = contacts_ahead(self.walker, t, self.lead)
        feet = {s: dataclasses.replace(ref.feet[s], in_contact=bool(contacts[s])) for s in SIDES}
        return dataclasses.replace(ref, feet=feet)


@pytest.fixture(scope="module")
def robot():
    return load_robot("talos")


@pytest.fixture(scope="module")
def walking_refs(robot):
    """2.5 s of walking and turning, one sample per ms (lift-off at 1.45 s, touchdown at 2.14 s)."""
    w = OfflineWalker(robot)
    w.walker.set_velocity(0.3, 0.0, 0.4)
    return [w.sample(k * MS) for k in range(2500)]


def assert_same_reference(a, b, rot_atol=0.0):
    for name in SCALARS:
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    for side in SIDES:
        fa, fb = a.feet[side], b.feet[side]
        for name in FOOT:
            assert np.array_equal(getattr(fa, name), getattr(fb, name)), (side, name)
        assert fa.in_contact == fb.in_contact, side
        if rot_atol == 0.0:
            assert np.array_equal(fa.rotation, fb.rotation), side
        else:
            assert np.allclose(fa.rotation, fb.rotation, rtol=0.0, atol=rot_atol), side


# -- no DDS --------------------------------------------------------------------------------------


def test_walker_samples_come_back_exactly_on_the_grid(walking_refs):
    start, period = 1400 * MS, MS
    refs = walking_refs[1400:2300]  # contacts change in it
    assert len({(r.feet["left"].in_contact, r.feet["right"].in_contact) for r in refs}) > 1
    traj = ReferenceTrajectory.from_references(start, period, refs)
    assert (traj.start_ns, traj.end_ns, traj.period_ns, len(traj)) == (start, start + 899 * MS, MS, 900)
    via_msg = cv.reference_trajectory_from_msg(cv.reference_trajectory_msg(start, period, refs))
    cdr = cv.reference_trajectory_cdr(traj)
    via_cdr = cv.reference_trajectory_from_cdr(cdr)
    # the bytes are the message rmw itself serializes (padding aside): any subscriber reads them
    assert deserialize_message(cdr, MultiDOFJointTrajectory) == cv.reference_trajectory_to_msg(traj)
    assert cv.reference_trajectory_from_cdr(
        serialize_message(cv.reference_trajectory_to_msg(traj))
    ).vectors.tobytes() == (via_cdr.vectors.tobytes())
    for k, ref in enumerate(refs):
        ns = start + k * period
        got = traj.at(ns)
        assert_same_reference(got, ref)  # bit for bit, rotations included
        assert (got.time, got.phase, got.omega, got.upcoming_footsteps) == (
            ref.time,
            ref.phase,
            ref.omega,
            ref.upcoming_footsteps,
        )
        for back in (via_msg, via_cdr):
            # the message carries float64 vectors and quaternions: rotations to rounding
            assert_same_reference(back.at(ns), ref, rot_atol=1e-15)
            assert back.at(ns).time == ns * 1e-9


def test_one_point_message_is_a_one_sample_trajectory(walking_refs):
    ref = walking_refs[700]
    msg = cv.reference_msg(cv.ns_to_stamp(700 * MS), ref)
    traj = cv.reference_trajectory_from_msg(msg, period_ns=2 * MS, omega=ref.omega)
    assert (len(traj), traj.start_ns, traj.end_ns, traj.period_ns) == (1, 700 * MS, 700 * MS, 2 * MS)
    assert_same_reference(traj.at(700 * MS), cv.reference_from_msg(msg), rot_atol=1e-15)
    assert traj.at(700 * MS).omega == ref.omega
    assert not traj.covers(700 * MS + 1) and not traj.covers(700 * MS - 1)


def test_midway_is_between_the_neighbours_with_the_earlier_contacts(walking_refs):
    period = 10 * MS
    refs = walking_refs[200:2500:10]
    traj = ReferenceTrajectory.from_references(200 * MS, period, refs)
    checked_contact_change = False
    for k in range(len(refs) - 1):
        a, b = refs[k], refs[k + 1]
        for frac in (0.5, 0.3):
            ns = 200 * MS + k * period + round(frac * period)
            got = traj.at(ns)
            alpha = round(frac * period) / period
            for name in SCALARS:
                x0, x1 = getattr(a, name), getattr(b, name)
                x = getattr(got, name)
                assert np.all(x >= np.minimum(x0, x1) - 1e-15) and np.all(x <= np.maximum(x0, x1) + 1e-15), name
                assert np.allclose(x, x0 + alpha * (x1 - x0), rtol=0.0, atol=1e-15), name
            for side in SIDES:
                fa, fb, f = a.feet[side], b.feet[side], got.feet[side]
                assert f.in_contact == fa.in_contact  # the earlier sample's
                checked_contact_change |= fa.in_contact != fb.in_contact
                assert np.allclose(f.rotation @ f.rotation.T, np.eye(3), atol=1e-14)
                yaw = math.atan2(f.rotation[1, 0], f.rotation[0, 0])
                y0 = math.atan2(fa.rotation[1, 0], fa.rotation[0, 0])
                y1 = y0 + math.remainder(math.atan2(fb.rotation[1, 0], fb.rotation[0, 0]) - y0, math.tau)
                assert abs(math.remainder(yaw - (y0 + alpha * (y1 - y0)), math.tau)) < 1e-6, side
            assert got.phase == a.phase and got.time == ns * 1e-9
    assert checked_contact_change


def test_interpolation_is_exact_for_a_linear_com():
    n, period, start = 5, 10 * MS, 3_000 * MS
    c0, v = np.array([0.1, -0.2, 0.9]), np.array([0.3, 0.05, -0.01])
    times = (start + period * np.arange(n)) * 1e-9
    vectors = np.zeros((n, len(VECTOR_FIELDS), 3))
    vectors[:, VECTOR_FIELDS.index("com_pos")] = c0 + times[:, None] * v
    vectors[:, VECTOR_FIELDS.index("com_vel")] = v
    yaw = 0.2 * np.arange(n)
    rot = np.zeros((n, 2, 3, 3))
    rot[:, :, 0, 0] = rot[:, :, 1, 1] = np.cos(yaw)[:, None]
    rot[:, :, 1, 0] = np.sin(yaw)[:, None]
    rot[:, :, 0, 1] = -np.sin(yaw)[:, None]
    rot[:, :, 2, 2] = 1.0
    traj = ReferenceTrajectory(start, period, vectors, rot, np.ones((n, 2), dtype=bool))
    for ns in range(start, traj.end_ns + 1, 1_234_567):
        ref = traj.at(ns)
        assert np.allclose(ref.com_pos, c0 + ns * 1e-9 * v, rtol=0.0, atol=1e-14)
        assert np.array_equal(ref.com_vel, v)
    # rotations: nlerp of a yaw of 0.2 rad per sample stays within 1e-3 rad of the slerp
    mid = traj.at(start + period // 2)
    assert abs(math.atan2(mid.feet["left"].rotation[1, 0], mid.feet["left"].rotation[0, 0]) - 0.1) < 1e-3


def test_outside_the_samples_is_an_error():
    traj = ReferenceTrajectory(
        100, 10, np.zeros((3, len(VECTOR_FIELDS), 3)), np.tile(np.eye(3), (3, 2, 1, 1)), np.ones((3, 2))
    )
    assert traj.covers(100) and traj.covers(120) and traj.covers(115)
    for ns in (99, 121, -5):
        assert not traj.covers(ns)
        with pytest.raises(ReferenceOutOfRange, match=f"t = {ns} ns.*100 .. 120 ns"):
            traj.at(ns)
    with pytest.raises(StateError, match="non-finite com_acc in sample 1"):
        bad = np.zeros((3, len(VECTOR_FIELDS), 3))
        bad[1, 2, 0] = np.nan
        ReferenceTrajectory(0, 10, bad, np.tile(np.eye(3), (3, 2, 1, 1)), np.ones((3, 2)))
    with pytest.raises(StateError, match="period_ns must be > 0"):
        ReferenceTrajectory(0, 0, np.zeros((1, len(VECTOR_FIELDS), 3)), np.tile(np.eye(3), (1, 2, 1, 1)), [[1, 1]])


def _constant(start_ns: int, n: int, value: float, period: int = MS) -> ReferenceTrajectory:
    vectors = np.full((n, len(VECTOR_FIELDS), 3), value)
    return ReferenceTrajectory(start_ns, period, vectors, np.tile(np.eye(3), (n, 2, 1, 1)), np.ones((n, 2)))


def test_buffer_newer_trajectory_replaces_from_its_start():
    buf = ReferenceBuffer()
    assert buf.end_ns is None and buf.last_received_ns is None and not buf.covers(0)
    with pytest.raises(ReferenceOutOfRange, match="received nothing"):
        buf.at(0)
    buf.add(_constant(0, 31, 1.0))  # 0 .. 30 ms
    buf.add(_constant(20 * MS, 21, 2.0))  # 20 .. 40 ms
    assert (buf.end_ns, buf.last_received_ns) == (40 * MS, 20 * MS)
    assert buf.at(19 * MS).com_pos[0] == 1.0  # before the newer start: the older one
    assert buf.at(20 * MS).com_pos[0] == 2.0  # from its start on: the newer one
    assert buf.at(25 * MS + 500_000).com_pos[0] == 2.0
    assert buf.at(40 * MS).com_pos[0] == 2.0 and not buf.covers(40 * MS + 1)
    # a gap: what lies between the older's end and the newer's start is not covered
    buf.add(_constant(45 * MS, 11, 3.0))
    assert buf.covers(40 * MS) and not buf.covers(42 * MS) and buf.covers(45 * MS)
    # the controller asked for 40 ms: the first trajectory (serving 0 .. 20 ms) is dropped
    assert len(buf) == 2 and not buf.covers(10 * MS)
    # re-seeded walker (time went back): replaces everything from its start on
    buf.add(_constant(30 * MS, 5, 4.0))
    assert buf.at(30 * MS).com_pos[0] == 4.0 and buf.end_ns == 34 * MS and not buf.covers(45 * MS)
    assert buf.at(25 * MS).com_pos[0] == 2.0  # before its start: still the older one
    buf.add(_constant(0, 3, 5.0))  # a reset to t = 0
    assert buf.at(0).com_pos[0] == 5.0 and len(buf) == 1 and buf.end_ns == 2 * MS


def test_buffer_keeps_few_trajectories():
    buf = ReferenceBuffer(max_kept=3)
    for i in range(10):  # never asked: only the bound applies
        buf.add(_constant(i * 10 * MS, 31, float(i)))
    assert len(buf) == 3 and buf.at(75 * MS).com_pos[0] == 7.0


_STANDING = []


def _bad(change):
    """A three-point standing reference, then ``change(msg)``."""
    if not _STANDING:
        _STANDING.append(OfflineWalker(load_robot("talos")).sample(0))
    msg = cv.reference_trajectory_msg(5 * MS, MS, _STANDING * 3)
    change(msg)
    return msg


def _drop_point(m):
    m.points = []


def _rename(m):
    m.joint_names[3] = "zmp_cmd"


def _duplicate(m):
    m.joint_names = [*m.joint_names, "com"]
    for p in m.points:
        p.transforms.append(p.transforms[0])
        p.velocities.append(p.velocities[0])
        p.accelerations.append(p.accelerations[0])


def _short_entries(m):
    m.points[1].velocities = m.points[1].velocities[:5]


def _uneven(m):
    m.points[2].time_from_start.nanosec = 2_500_000


def _backwards(m):
    m.points[1].time_from_start.nanosec = 0


def _zero_quaternion(m):
    from geometry_msgs.msg import Quaternion

    m.points[2].transforms[2].rotation = Quaternion(x=0.0, y=0.0, z=0.0, w=0.0)


def _nan(m):
    from geometry_msgs.msg import Transform, Vector3

    t = m.points[1].transforms[0]
    m.points[1].transforms[0] = Transform(translation=Vector3(x=float("nan"), y=0.0, z=0.0), rotation=t.rotation)


@pytest.mark.parametrize("decode", ["msg", "cdr"])
@pytest.mark.parametrize(
    "change, reason",
    [
        (_drop_point, "/walker/reference: the walking reference has no point"),
        (_rename, r"joint_names lack \['zmp'\]"),
        (_duplicate, r"joint_names has duplicates \['com'\]"),
        (_short_entries, "point 1 has .*5 velocities.* for 6 joint_names"),
        (_uneven, "point 2 at time_from_start 2500000 ns, expected 2000000 ns"),
        (_backwards, "time_from_start must increase"),
        (_zero_quaternion, "right_foot rotation has no valid norm in point 2"),
        (_nan, "non-finite com_pos in sample 1"),
    ],
)
def test_bad_messages_are_rejected_with_the_reason(change, reason, decode):
    msg = _bad(change)
    with pytest.raises(StateError, match=reason):
        if decode == "msg":
            cv.reference_trajectory_from_msg(msg)
        else:
            cv.reference_trajectory_from_cdr(serialize_message(msg))


def test_names_in_another_order_are_matched_by_name(walking_refs):
    refs = walking_refs[500:510]
    msg = cv.reference_trajectory_msg(500 * MS, MS, refs)
    order = [5, 3, 0, 2, 4, 1]
    msg.joint_names = [msg.joint_names[i] for i in order]
    for p in msg.points:
        p.transforms = [p.transforms[i] for i in order]
        p.velocities = [p.velocities[i] for i in order]
        p.accelerations = [p.accelerations[i] for i in order]
    for traj in (cv.reference_trajectory_from_msg(msg), cv.reference_trajectory_from_cdr(serialize_message(msg))):
        for k, ref in enumerate(refs):
            assert_same_reference(traj.at((500 + k) * MS), ref, rot_atol=1e-15)


# -- with DDS: the walker node in its own process -------------------------------------------------


def _state_msgs(robot, ns: int):
    stamp = cv.ns_to_stamp(ns)
    q, v = robot.q_ref, np.zeros(robot.model.nv)
    js = cv.joint_state_msg(stamp, robot.joint_names, q[7:], v[6:])
    return js, cv.odometry_msg(stamp, q[:7], v[:6], "base_link")


class _Driver:
    """A test's side of a walker node in its own process (its own domain): a node to publish
    and subscribe with, and ``spin_until``."""

    def __init__(self, context, procs: Processes, logs: Path):
        self.procs, self.logs = procs, logs
        self.node = Node("walker_test_driver", context=context)
        self.executor = rclpy.executors.SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)

    def spin_until(self, cond, what, timeout=15.0):
        deadline = time.monotonic() + timeout
        while not cond():
            assert not self.procs.dead(), self.procs.dead()
            assert time.monotonic() < deadline, f"timed out waiting for {what} (logs in {self.logs})"
            self.executor.spin_once(timeout_sec=0.01)


@contextlib.contextmanager
def _walker_process(spec: NodeSpec):
    """The walker node ``spec`` started in a fresh domain, with a :class:`_Driver`; every
    process it started is gone afterwards."""
    with domain_id() as did:
        context = rclpy.Context()
        rclpy.init(context=context, domain_id=did)
        logs = Path(tempfile.mkdtemp(prefix="wbc_test_walker_"))
        procs = Processes([spec], graph_env(did), logs)
        driver = None
        try:
            driver = _Driver(context, procs, logs)
            yield driver
        finally:
            if driver is not None:
                driver.node.destroy_node()
            rclpy.shutdown(context=context)
            procs.stop()
    assert all(p.poll() is not None for _, p, _ in procs.procs)


@pytest.mark.ros
@pytest.mark.parametrize("com_mode, sample_period", [("reference", 0.0), ("dcm", 0.0), ("reference", 0.005)])
def test_walker_node_publishes_at_its_rate_and_cmd_vel_changes_the_plan(robot, com_mode, sample_period):
    rate, horizon = 100.0, 0.03  # [Hz], [s]: a trajectory every 10 states, reaching 30 ms ahead
    params = {
        "robot": "talos",
        "rate": rate,
        "horizon": horizon,
        "sample_period": sample_period,
        "control_period": 0.001,
    }
    step = round(sample_period * 1e9) or MS  # [ns] between samples
    spec = NodeSpec(
        *WALKER, (str(params_path("sim")),), {**params, "com_mode": com_mode}, (("base_state", GROUND_TRUTH),)
    )
    got_typed: list[ReferenceTrajectory] = []
    got_raw: list[ReferenceTrajectory] = []
    status: list[dict] = []
    walk_from_state = 100 * MS  # /cmd_vel sent after the trajectory of this state
    states = [k * MS for k in range(201)]
    jump, reset = 500 * MS, 0  # then: states jump ahead (real time, a pause); time goes back (reset)
    with _walker_process(spec) as driver:
        node, executor, spin_until = driver.node, driver.executor, driver.spin_until
        node.create_subscription(
            MultiDOFJointTrajectory,
            "/walker/reference",
            lambda m: got_typed.append(cv.reference_trajectory_from_msg(m)),
            100,
        )
        node.create_subscription(
            MultiDOFJointTrajectory,
            "/walker/reference",
            lambda b: got_raw.append(cv.reference_trajectory_from_cdr(b)),
            100,
            raw=True,
        )
        node.create_subscription(String, "/walker/status", lambda m: status.append(json.loads(m.data)), 100)
        js_pub = node.create_publisher(JointState, "/joint_states", 10)
        odom_pub = node.create_publisher(Odometry, GROUND_TRUTH, 10)
        cmd_pub = node.create_publisher(Twist, "/cmd_vel", 10)

        def publish_state(ns, answered: bool):
            js, odom = _state_msgs(robot, ns)
            count = len(got_typed)
            js_pub.publish(js)
            odom_pub.publish(odom)
            if answered:  # due: its trajectory comes before the next state is sent
                spin_until(lambda: len(got_typed) > count and len(got_raw) > count, f"state {ns}")
            else:
                executor.spin_once(timeout_sec=0.001)

        # up and discovered both ways: a /cmd_vel (zero: no change) answered by a status
        def up():
            cmd_pub.publish(Twist())
            executor.spin_once(timeout_sec=0.2)
            return (
                status
                and node.count_subscribers("/joint_states") > 0
                and node.count_subscribers(GROUND_TRUTH) > 0
                and node.count_publishers("/walker/reference") > 0
            )

        spin_until(up, "the walker node", timeout=90.0)
        for ns in states:
            publish_state(ns, answered=ns % (10 * MS) == 0)
            if ns == walk_from_state:
                walk = Twist()
                walk.linear.x = 0.3
                cmd_pub.publish(walk)
                spin_until(lambda: status[-1]["cmd_vel"][0] == 0.3 and status[-1]["pending"], "the /cmd_vel")
        n_batches = len(states) // 10 + 1
        spin_until(lambda: status[-1]["trajectories"] == n_batches, "the status of the last batch")
        status_walking = status[-1]
        publish_state(jump, answered=True)
        publish_state(reset, answered=True)
        for _ in range(20):
            executor.spin_once(timeout_sec=0.01)

    # one trajectory per 1/rate of state stamps (none for the states between), each reaching ns + horizon
    state_ns = [ns for ns in states if ns % (10 * MS) == 0] + [jump, reset]
    assert len(got_typed) == len(got_raw) == len(state_ns)
    for i, (traj, raw) in enumerate(zip(got_typed, got_raw)):
        assert traj.end_ns == state_ns[i] + round(horizon * 1e9) and traj.period_ns == step
        assert np.array_equal(traj.vectors, raw.vectors) and np.array_equal(traj.contacts, raw.contacts)
        if 0 < i < len(state_ns) - 2:
            # continues the last one, repeating its last sample (no gap to interpolate across)
            assert traj.start_ns == got_typed[i - 1].end_ns
            assert np.array_equal(traj.vectors[0], got_typed[i - 1].vectors[-1])
    assert got_typed[0].start_ns == 0 and got_typed[-2].start_ns == jump and got_typed[-1].start_ns == reset
    # the same computation without ROS, bit for bit: the walk command from the next batch on;
    # with com_mode dcm, the CoM of the state that triggered the batch (here always the same)
    if com_mode == "dcm":
        state = RobotState(robot)
        state.update(robot.q_ref, np.zeros(robot.model.nv))
        measured = MeasuredState(state.com.copy(), state.vcom.copy())
    else:
        measured = None
    standing, walking = OfflineWalker(robot), OfflineWalker(robot)
    changed = False
    for i, traj in enumerate(got_typed):
        if state_ns[i] == walk_from_state + 10 * MS:
            walking.walker.set_velocity(0.3, 0.0, 0.0)
        if i == len(got_typed) - 1:  # the reset re-seeds the walker: no command
            walking, standing = OfflineWalker(robot), OfflineWalker(robot)
        elif i > 0 and traj.start_ns > got_typed[i - 1].end_ns + traj.period_ns:
            # the states jumped past the published samples: the node caught up without
            # planning at the grid points in between (PatternGenerator.catch_up)
            assert walking.walker.catch_up(traj.start_ns * 1e-9) > 0
            standing.walker.catch_up(traj.start_ns * 1e-9)
        repeated = i > 0 and traj.start_ns == got_typed[i - 1].end_ns  # its first sample was checked before
        for ns in range(traj.start_ns + (traj.period_ns if repeated else 0), traj.end_ns + 1, traj.period_ns):
            expected, still = walking.sample(ns, measured), standing.sample(ns, measured)
            assert_same_reference(traj.at(ns), expected, rot_atol=1e-15)
            moved = not np.array_equal(expected.com_acc, still.com_acc)
            if moved:  # not before the command
                assert state_ns[i] > walk_from_state, (i, ns)
            changed |= moved
    assert changed, "the /cmd_vel did not change the plan"
    assert status_walking["walking"] and status_walking["reference_end_ns"] == states[-1] + round(horizon * 1e9)
    # the longest batch since the status before (wall time; a slow one is logged with its CPU time)
    assert all(0.0 < s["batch_ms_max"] < 1e4 for s in status[1:] if s["trajectories"] > 1)


@pytest.mark.ros
def test_walker_node_rejects_a_horizon_shorter_than_its_period():
    spec = NodeSpec(*WALKER, (str(params_path("sim")),), {"robot": "talos", "rate": 50.0, "horizon": 0.01})
    with domain_id() as did:
        logs = Path(tempfile.mkdtemp(prefix="wbc_test_walker_"))
        procs = Processes([spec], graph_env(did), logs)
        try:
            proc = procs.procs[0][1]
            proc.wait(timeout=90.0)
        finally:
            procs.stop()
    assert proc.returncode != 0
    assert "parameter 'horizon' (0.01 s) must be at least 1/rate (0.02 s)" in (logs / "zmp_walker.log").read_text()


@pytest.mark.ros
def test_a_polling_walker_answers_the_newest_state_through_its_remaps(robot):
    """Real time (``state_poll_period``): the walker reads the newest joint states and base
    state (remapped to the ground truth, as the sim graph does) every 2 ms instead of on
    every message; each due state is answered, the states between are passed over."""
    horizon = 0.03  # [s]
    params = {"robot": "talos", "rate": 100.0, "horizon": horizon, "sample_period": 0.0, "control_period": 0.001}
    params.update(com_mode="reference", state_history=1, state_poll_period=0.002)
    spec = NodeSpec(*WALKER, (str(params_path("sim")),), params, (("base_state", GROUND_TRUTH),))
    got: list[ReferenceTrajectory] = []
    due = [k * 10 * MS for k in range(8)]
    with _walker_process(spec) as driver:
        node, executor, spin_until = driver.node, driver.executor, driver.spin_until
        node.create_subscription(
            MultiDOFJointTrajectory,
            "/walker/reference",
            lambda b: got.append(cv.reference_trajectory_from_cdr(b)),
            100,
            raw=True,
        )
        js_pub = node.create_publisher(JointState, "/joint_states", 10)
        odom_pub = node.create_publisher(Odometry, GROUND_TRUTH, 10)

        def up():  # node names are discovered apart from (and can come after) the endpoints
            executor.spin_once(timeout_sec=0.2)
            names = set(node.get_node_names())
            subscribed = node.count_subscribers("/joint_states") > 0 and node.count_subscribers(GROUND_TRUTH) > 0
            return subscribed and {"zmp_walker", "zmp_walker_state_sampler"} <= names

        spin_until(up, "the walker node and its state sampler node with their subscriptions", timeout=90.0)
        for ns in due:
            for between in range(ns - 9 * MS, ns, MS) if ns else ():  # passed over, unless polled
                for msg, pub in zip(_state_msgs(robot, between), (js_pub, odom_pub)):
                    pub.publish(msg)
            js, odom = _state_msgs(robot, ns)
            js_pub.publish(js)
            odom_pub.publish(odom)
            end = ns + round(horizon * 1e9)
            spin_until(lambda end=end: got and got[-1].end_ns == end, f"the trajectory of the state at {ns} ns")
    assert got[0].start_ns == 0
    for prev, traj in zip(got, got[1:]):
        assert traj.start_ns == prev.end_ns and traj.end_ns > prev.end_ns  # continued, never ahead of a state
    assert got[-1].end_ns == due[-1] + round(horizon * 1e9)
