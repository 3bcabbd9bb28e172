"""The MuJoCo bridge's command timeout, services and /diagnostics, each bridge in its
own process and ROS domain, driven by a real rclpy client (no controller)."""

from __future__ import annotations

import contextlib
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")

from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray, MultiArrayDimension, MultiArrayLayout  # noqa: E402
from std_srvs.srv import SetBool, Trigger  # noqa: E402

from whole_body_control.robot import load_robot  # noqa: E402
from whole_body_control.ros.graph import BRIDGE, NodeSpec, Processes, domain_id, graph_env, params_path  # noqa: E402
from whole_body_control.ros.mujoco_bridge import CommandTimeout  # noqa: E402


def test_command_timeout_counts_consecutive_missed_periods():
    t = CommandTimeout(3)
    assert [t.period(f) for f in (True, False, False, False, False, True, False)] == [
        False,
        False,
        False,
        True,
        True,
        False,
        False,
    ]
    assert t.timeouts == 1 and t.damped_periods == 2
    off = CommandTimeout(0)
    assert not any(off.period(False) for _ in range(100))


class Client:
    def __init__(self, context, procs):
        self.procs = procs
        self.node = n = Node("test_bridge_client", context=context)
        self.executor = rclpy.executors.SingleThreadedExecutor(context=context)
        self.executor.add_node(n)
        self.js: list[JointState] = []
        self.clock: list[int] = []
        self.diag: dict | None = None
        self.answer: np.ndarray | None = None  # answer each joint state with this command
        self.policy = None  # or with policy(state) -> efforts, the command stamped with the state's stamp
        self.sent: dict[int, np.ndarray] = {}  # stamp -> what the policy answered
        self.answered: list[int] = []  # stamps answered
        n.create_subscription(JointState, "/joint_states", self.on_js, 10)
        n.create_subscription(Clock, "/clock", lambda m: self.clock.append(_ns(m.clock)), 10)
        n.create_subscription(DiagnosticArray, "/diagnostics", self.on_diag, 10)
        self.cmd = n.create_publisher(Float64MultiArray, "/effort_controller/commands", 10)
        self.set_pause = n.create_client(SetBool, "/mujoco_bridge/set_pause")
        self.reset_world = n.create_client(Trigger, "/mujoco_bridge/reset_world")
        self.step = n.create_client(Trigger, "/mujoco_bridge/step_simulation")

    def on_js(self, msg: JointState) -> None:
        self.js.append(msg)
        if self.answer is not None:
            self.cmd.publish(Float64MultiArray(data=self.answer.tolist()))
            self.answered.append(_ns(msg.header.stamp))
        elif self.policy is not None:
            ns = _ns(msg.header.stamp)
            tau = self.sent[ns] = self.policy(msg)
            stamp = MultiArrayDimension(label=f"stamp_ns={ns}")
            self.cmd.publish(Float64MultiArray(data=tau.tolist(), layout=MultiArrayLayout(dim=[stamp])))

    def on_diag(self, msg: DiagnosticArray) -> None:
        for s in msg.status:
            if s.name == "mujoco_bridge":
                self.diag = {kv.key: kv.value for kv in s.values} | {"_level": s.level, "_message": s.message}

    def spin_until(self, pred, timeout: float, what: str) -> None:
        end = time.monotonic() + timeout
        while not pred():
            dead = self.procs.dead()
            assert not dead, "; ".join(dead)
            assert time.monotonic() < end, f"timed out ({timeout} s) waiting for {what}"
            self.executor.spin_once(timeout_sec=0.02)

    def spin_for(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.executor.spin_once(timeout_sec=0.02)

    def call(self, client, request):
        self.spin_until(lambda: client.service_is_ready(), 20.0, f"service {client.srv_name}")
        future = client.call_async(request)
        self.spin_until(future.done, 20.0, f"answer of {client.srv_name}")
        return future.result()


def _ns(stamp) -> int:
    return stamp.sec * 1_000_000_000 + stamp.nanosec


@contextlib.contextmanager
def bridge(**params):
    spec = NodeSpec(*BRIDGE, (str(params_path("sim")),), {"robot": "talos", **params})
    with domain_id() as did:
        procs = Processes([spec], graph_env(did), Path(tempfile.mkdtemp(prefix="wbc_test_bridge_")))
        context = rclpy.Context()
        rclpy.init(context=context, domain_id=did)
        client = None
        try:
            client = Client(context, procs)
            yield client
        finally:
            if client is not None:
                client.node.destroy_node()
            rclpy.shutdown(context=context)
            procs.stop()
    assert all(p.poll() is not None for _, p, _ in procs.procs)


@pytest.mark.ros
def test_realtime_bridge_damps_when_commands_stop_and_resumes_on_a_fresh_one():
    robot = load_robot("talos")
    kd, n, N = robot.safe_damping(0.001), robot.na, 3  # (one 1 ms step per period)
    hold = np.full(n, 3.0)  # [N m]: not what damping gives

    def damped(prev: JointState, msg: JointState) -> bool:
        """The effort of ``msg`` is -kd v at the start of its period (one physics step per period)."""
        return np.allclose(msg.effort, -kd * np.array(prev.velocity), rtol=1e-12, atol=1e-12)

    def held(msg: JointState, tau) -> bool:
        return np.array_equal(msg.effort, tau)

    params = {"mode": "realtime", "real_time_factor": 0.05, "command_timeout_periods": N, "start_paused": True}
    with bridge(**params) as c:
        c.spin_until(lambda: c.cmd.get_subscription_count() > 0 and c.step.service_is_ready(), 30.0, "the bridge")
        # paused, stepped by hand: exact periods
        c.cmd.publish(Float64MultiArray(data=hold.tolist()))
        c.spin_for(0.5)  # the command is in before the first step (topic and service are not ordered)
        states = []
        for _ in range(N + 1):
            c.js.clear()
            assert c.call(c.step, Trigger.Request()).success
            c.spin_until(lambda: c.js, 5.0, "the stepped state")
            states.append(c.js[-1])
        assert held(states[0], hold), f"a fresh command is applied: {states[0].effort[:3]}"
        assert all(held(s, hold) for s in states[1:N]), f"held for {N - 1} periods without a fresh command"
        assert not held(states[N], hold) and damped(states[N - 1], states[N]), f"damped in period {N + 1}"
        c.spin_until(lambda: c.diag and json.loads(c.diag["command_timeouts"]) == 1, 5.0, "diagnostics")
        assert json.loads(c.diag["damping"]) is True and c.diag["_level"] == b"\x01"  # WARN
        again = np.full(n, -2.0)
        c.cmd.publish(Float64MultiArray(data=again.tolist()))
        c.spin_for(0.5)
        c.js.clear()
        assert c.call(c.step, Trigger.Request()).success
        c.spin_until(lambda: c.js, 5.0, "the stepped state")
        assert held(c.js[-1], again), "a fresh command ends the damping"

        # running on the wall clock: a "controller" answers 30 states, then dies
        assert c.call(c.set_pause, SetBool.Request(data=False)).success
        c.answer = hold
        c.spin_until(lambda: len(c.answered) >= 30, 20.0, "30 answered states")
        c.answer = None
        last = c.answered[-1]
        c.js.clear()
        c.spin_for(0.8)  # about 40 periods at real_time_factor 0.05
        after = [m for m in c.js if _ns(m.header.stamp) > last]
        assert len(after) > N + 5, f"{len(after)} states after the last answer"
        first_damped = next((k for k, m in enumerate(after) if not held(m, hold)), None)
        assert first_damped is not None, "the last command is held forever"
        period = 1_000_000  # [ns]
        # within N + 1 periods of the answered state (one more if the last command came a period late)
        late = (_ns(after[first_damped].header.stamp) - last) / period
        assert late <= N + 2, f"damping {late} periods after the last answered state"
        assert all(not held(m, hold) for m in after[first_damped:]), "damping until a fresh command"
        pairs = [
            (a, b)
            for a, b in zip(after[first_damped:-1], after[first_damped + 1 :])
            if _ns(b.header.stamp) - _ns(a.header.stamp) == period  # consecutive states (none lost)
        ]
        assert len(pairs) > 5, f"{len(pairs)} consecutive damped states"
        assert all(damped(a, b) for a, b in pairs)
        c.spin_until(lambda: json.loads(c.diag["command_timeouts"]) >= 2, 5.0, "a second timeout")


@pytest.mark.ros
def test_realtime_bridge_runs_a_period_when_its_command_comes_with_the_physics_of_the_tick():
    """In real time a command stamped with the newest state runs that period's physics at
    once (the next state waits only for its tick); the state of the next tick then carries
    exactly that command as its effort: no period stepped twice or with another command."""
    robot = load_robot("talos")
    gains = np.linspace(5.0, 40.0, robot.na)  # the command depends on the state it answers

    def policy(msg: JointState) -> np.ndarray:
        return -gains * np.array(msg.velocity) + 0.5

    with bridge(mode="realtime", real_time_factor=0.05, command_timeout_periods=0) as c:
        c.policy = policy
        c.spin_until(lambda: len(c.sent) >= 40, 30.0, "40 answered states")
        c.policy = None
        c.spin_until(lambda: c.diag is not None and json.loads(c.diag["steps"]) > 40, 5.0, "diagnostics")
        effort = {_ns(m.header.stamp): np.array(m.effort) for m in c.js}
        period = 1_000_000
        pairs = [(ns, ns + period) for ns in sorted(c.sent) if ns + period in effort and ns > 0]
        assert len(pairs) >= 30, f"{len(pairs)} answered states followed by the next one"
        applied = [np.array_equal(effort[after], c.sent[ns]) for ns, after in pairs]
        # a late answer (a loaded machine, a stall of the VM) leaves an earlier answer held:
        # never a command that answers a later state, and never an older one after a newer
        answered = sorted(c.sent)

        def source(ns: int, tau: np.ndarray) -> int | None:
            """The newest state up to ``ns`` whose answer is ``tau`` (None: no answer is)."""
            return next((m for m in reversed(answered) if m <= ns and np.array_equal(tau, c.sent[m])), None)

        sources = [source(ns, effort[after]) for ns, after in pairs]
        assert None not in sources, "a state carries a command that answers neither it nor an earlier state"
        assert sources == sorted(sources), f"an older command applied after a newer one: {sources}"
        assert sum(applied) >= 0.8 * len(pairs), f"{sum(applied)} of {len(pairs)} answers applied in their period"
        stepped = json.loads(c.diag["stepped_on_command"])
        assert stepped >= sum(applied) - 2, f"{stepped} periods ran on their command's arrival"


@pytest.mark.ros
def test_bridge_services_pause_step_reset_and_diagnostics():
    robot = load_robot("talos")
    with bridge(mode="lockstep", start_paused=True) as c:
        c.spin_until(lambda: c.step.service_is_ready() and c.diag is not None, 30.0, "services and diagnostics")
        assert c.diag["_message"] == "paused" and json.loads(c.diag["paused"]) is True
        c.spin_for(0.3)
        assert not c.clock, "paused: no state"
        # step_simulation advances /clock by exactly one control period per call
        for k in (1, 2):
            assert c.call(c.step, Trigger.Request()).success
            c.spin_until(lambda k=k: c.clock and c.clock[-1] == k * 1_000_000, 5.0, f"/clock at {k} ms")
        assert c.js and not np.array_equal(c.js[-1].position, robot.q_ref[7:]), "zero torque: the joints sag"
        # only while paused, as mujoco_ros2_control
        assert c.call(c.set_pause, SetBool.Request(data=False)).message == "running"
        r = c.call(c.step, Trigger.Request())
        assert not r.success and "paused" in r.message
        assert c.call(c.set_pause, SetBool.Request(data=True)).success
        # reset_world: the reference posture at once, the clock goes on
        c.js.clear()
        assert c.call(c.reset_world, Trigger.Request()).success
        c.spin_until(lambda: c.js, 5.0, "the reset state")
        assert np.array_equal(c.js[-1].position, robot.q_ref[7:])
        assert _ns(c.js[-1].header.stamp) >= 2 * 1_000_000
