"""The control stage without ROS: the supervisor's rules on a simulated clock, and
the stage closing the loop on MuJoCo (standing, faults ending in damping, the
in-process estimator, lift detection)."""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest

from whole_body_control.control_stage import (
    ARMING,
    RESUME_LIMIT_NS,
    ControlStage,
    Observation,
    StageConfig,
    Supervisor,
)
from whole_body_control.errors import WbcError
from whole_body_control.robot import load_robot
from whole_body_control.runs import runner
from whole_body_control.sim import SimConfig, Simulation

PERIOD_NS = 1_000_000


@pytest.fixture(scope="module")
def talos():
    return load_robot("talos")


def observe(sim: Simulation, ns: int, base=True, wrenches=True) -> Observation:
    """The in-process runners' observation, without the base state or the wrenches if asked."""
    obs = runner.observe(sim, ns, sim.q, sim.v)
    return dataclasses.replace(obs, base=obs.base if base else None, wrenches=obs.wrenches if wrenches else None)


def _pitched(robot, pitch: float, hip_sign: float):
    """Joint positions of the reference posture with every hip pitch joint moved by
    ``hip_sign * pitch``, and the base attitude pitched by ``pitch`` (x, y, z, w)."""
    qj = robot.q_ref[7:].copy()
    for k, name in enumerate(robot.joint_names):
        if "hip_pitch" in name or name.startswith("leg_") and name.endswith("_3_joint"):  # G1, Talos
            qj[k] += hip_sign * pitch
    return qj, np.array([0.0, np.sin(0.5 * pitch), 0.0, np.cos(0.5 * pitch)])


@pytest.mark.parametrize("name", ["talos", "g1"])
def test_a_pelvis_bent_over_flat_soles_is_no_fall(name):
    """The tilt rule: the pelvis pitched 1 rad (beyond max_tilt 0.8) by the hips, the soles
    flat, is the hip strategy's posture, not a fall (G1 pitched 1.01 rad standing after a 0.35
    m/s forward push, and recovered); the same tilt with the legs along the pelvis, or
    beyond BENT_MAX_TILT, is one."""
    from whole_body_control.control_stage import BENT_MAX_TILT, FLAT_SOLE_TILT

    robot = load_robot(name)
    stage = ControlStage(robot, None, StageConfig(period=0.001, max_tilt=0.8))
    # the hip sign that keeps the soles flat (the joint axes' conventions differ)
    sign = min((1.0, -1.0), key=lambda s: stage._sole_tilt(*_pitched(robot, 1.0, s)[::-1]))
    bent = _pitched(robot, 1.0, sign)
    assert stage._sole_tilt(bent[1], bent[0]) < 0.05  # the construction: soles flat
    straight = (robot.q_ref[7:].copy(), bent[1])
    assert stage._sole_tilt(straight[1], straight[0]) > FLAT_SOLE_TILT

    def state(qj, quat) -> Observation:
        zero = np.zeros(robot.na)
        base = (np.concatenate([robot.q_ref[:3], quat]), np.zeros(6))
        return Observation(0, qj, zero, (), (quat, np.zeros(3), np.array([0.0, 0.0, 9.81])), base, None)

    stage._unusable(state(*bent), "")
    assert stage.supervisor.latched is None
    stage._unusable(state(*straight), "")
    assert stage.supervisor.latched.startswith("fall: IMU tilt 1.00 rad > max_tilt 0.8 rad (a sole at")
    stage = ControlStage(robot, None, StageConfig(period=0.001, max_tilt=0.8))
    over = _pitched(robot, BENT_MAX_TILT + 0.05, sign)
    assert stage._sole_tilt(over[1], over[0]) < FLAT_SOLE_TILT  # bent over, soles flat, but too far
    stage._unusable(state(*over), "")
    assert stage.supervisor.latched is not None


def test_stale_rule_damps_within_three_periods_checked_every_period():
    sup = Supervisor(PERIOD_NS, stale_periods=3)
    assert sup.stale(10 * PERIOD_NS) is None  # nothing received yet: not stale, not armed
    sup.received(0)
    # the watchdog checks once per period: the first check at or after 2.5 periods fires
    assert sup.stale(2 * PERIOD_NS) is None
    assert "stale" in sup.stale(3 * PERIOD_NS)
    sup.received(3 * PERIOD_NS)
    assert sup.stale(5 * PERIOD_NS) is None


def test_latches_need_a_rearm_and_the_e_stop_released():
    sup = Supervisor(PERIOD_NS, 3)
    sup.press(True)
    assert sup.latched == "e-stop"
    assert "still pressed" in sup.rearm()
    sup.press(False)
    assert sup.latched == "e-stop", "releasing alone does not re-arm"
    assert sup.rearm() == "" and sup.latched is None


def test_bad_stage_settings_are_errors():
    with pytest.raises(WbcError, match="period"):
        StageConfig(period=float("nan"))
    with pytest.raises(WbcError, match="stale_periods"):
        StageConfig(stale_periods=0)


def test_the_one_clip_zeroes_non_finite_torques_and_holds_the_limits(talos):
    """Whatever reaches the command: a non-finite entry becomes 0, the rest is held to the
    motors' limits, and finite torques inside them pass unchanged (to the bit)."""
    stage = ControlStage(talos, None, StageConfig(period=0.001))
    tau_max = talos.tau_max
    inside = np.linspace(-0.9, 0.9, talos.na) * tau_max
    np.testing.assert_array_equal(stage._clip(inside), inside)
    wild = inside.copy()
    wild[:5] = [np.nan, np.inf, -np.inf, 1e300, -1e300]
    out = stage._clip(wild)
    np.testing.assert_array_equal(out[:5], [0.0, 0.0, 0.0, tau_max[3], -tau_max[4]])
    np.testing.assert_array_equal(out[5:], inside[5:])
    big = np.full(talos.na, 1e308)  # finite, their sum is not
    np.testing.assert_array_equal(stage._clip(big), tau_max)


def test_stage_stands_and_every_unusable_state_ends_in_finite_damping(talos):
    sim = Simulation(talos, SimConfig(visual_meshes=False))
    sim.reset(talos.q_ref)
    stage = ControlStage(talos, None, StageConfig(period=0.001, fixed_dt=True))
    ns = 0

    def tick(obs):
        nonlocal ns
        cmd = stage.cycle(obs)
        assert np.all(np.isfinite(cmd.tau)) and np.all(np.abs(cmd.tau) <= talos.tau_max + 1e-12)
        sim.step(cmd.tau)
        ns += PERIOD_NS
        return cmd

    for _ in range(300):
        cmd = tick(observe(sim, ns))
    assert not cmd.damping and stage.supervisor.armed

    bad = observe(sim, ns)
    bad.q_joints[5] = np.nan
    cmd = tick(bad)
    assert cmd.damping and f"non-finite joint position of {talos.joint_names[5]}" in cmd.reason
    assert not stage.supervisor.armed

    gone = observe(sim, ns)
    gone.q_joints[7], gone.v_joints[7] = np.nan, np.nan
    gone.missing = (talos.joint_names[7],)
    cmd = tick(gone)
    assert cmd.damping and talos.joint_names[7] in cmd.reason

    cmd = tick(Observation(**{**observe(sim, ns).__dict__, "imu": None}))
    assert cmd.damping and "IMU" in cmd.reason

    cmd = tick(observe(sim, ns, base=False))  # no estimator and no base state
    assert cmd.damping and "base state" in cmd.reason

    cmd = stage.cycle(observe(sim, ns), None, reference_missing="no walking reference at t = 1 s")
    assert cmd.damping and "walking reference" in cmd.reason

    # a short outage resumes without re-seeding the controller; the robot still stands
    for _ in range(300):
        cmd = tick(observe(sim, ns))
    assert not cmd.damping and any(e.startswith("resumed") for e in stage.supervisor.events)
    assert sim.base_height() > 0.9 * talos.q_ref[2]

    # a fall (IMU tilt) latches damping until re-armed
    tilted = observe(sim, ns)
    tilted.imu = (np.array([np.sin(0.5), 0.0, 0.0, np.cos(0.5)]), tilted.imu[1], tilted.imu[2])  # 1 rad roll
    cmd = tick(tilted)
    assert cmd.damping and stage.supervisor.latched.startswith("fall: IMU tilt")
    assert tick(observe(sim, ns)).damping
    assert stage.rearm() == ""
    assert not tick(observe(sim, ns)).damping

    # the watchdog: no state for three periods -> damping
    stage.supervisor.received(0)
    assert stage.watchdog(3 * PERIOD_NS).damping


def test_an_outage_under_the_resume_limit_keeps_the_contacts_a_longer_one_re_seeds(talos):
    """Damping for a late walking reference, in single support: back within
    ``RESUME_LIMIT_NS`` (50 ms here, over 20 periods at 1 kHz) the controller resumes with the
    foot in the air still out of contact; after a longer outage it is re-seeded standing on
    both feet."""
    sim = Simulation(talos, SimConfig(visual_meshes=False))
    sim.reset(talos.q_ref)
    stage = ControlStage(talos, None, StageConfig(period=0.001, fixed_dt=True))
    assert stage.resume_ns == RESUME_LIMIT_NS > 20 * PERIOD_NS
    for k in range(50):
        stage.cycle(observe(sim, k * PERIOD_NS))
    stage.ctrl.contacts["left"].remove(stage.ctrl.time - 1.0, 0.0)  # (ramp done at the next update)
    ns = 50 * PERIOD_NS
    for outage_ms, resumed in ((50, True), (RESUME_LIMIT_NS // 1_000_000 + 20, False)):
        cmd = stage.cycle(observe(sim, ns))
        assert not cmd.damping and not stage.ctrl.contacts["left"].active
        stage.supervisor.events.clear()
        for j in range(1, outage_ms + 1):
            missing = stage.cycle(observe(sim, ns + j * PERIOD_NS), None, reference_missing="no walking reference")
            assert missing.damping
        ns += (outage_ms + 1) * PERIOD_NS
        back = stage.cycle(observe(sim, ns))
        assert not back.damping and stage.supervisor.armed
        events = " ".join(stage.supervisor.events)
        if resumed:
            assert f"resumed at t = {ns * 1e-9:.3f} s after {outage_ms + 1}.0 ms" in events, events
            assert not stage.ctrl.contacts["left"].active
        else:
            assert "armed at" in events and "resumed" not in events, events
            assert all(c.active for c in stage.ctrl.contacts.values())
        ns += PERIOD_NS


def test_the_stage_lets_the_hip_strategy_catch_a_standing_push():
    """G1 standing, pushed forward by 0.35 m/s: the hip strategy pitches the pelvis past
    max_tilt (1.01 rad in-process) over flat soles and recovers.  The stage's tilt rule
    latched a fall there and damped (at 1.176 s); now it keeps control, and the robot stands."""
    from whole_body_control.control_stage import _tilt
    from whole_body_control.runs.runner import push_body

    g1 = load_robot("g1")
    sim = Simulation(g1, SimConfig(visual_meshes=False))
    sim.reset(g1.q_ref)
    stage = ControlStage(g1, None, StageConfig(period=0.001, fixed_dt=True, max_tilt=0.8))
    tilt_max = 0.0
    for k in range(2500):
        if k == 1000:
            sim.push_velocity_change(push_body(g1), np.array([0.35, 0.0]), 0.1)
        cmd = stage.cycle(observe(sim, k * PERIOD_NS, wrenches=False))
        assert not cmd.damping, (k, cmd.reason)
        sim.step(cmd.tau)
        tilt_max = max(tilt_max, _tilt(sim.q[3:7]))
    assert tilt_max > 0.8  # the rule's exception was needed
    assert sim.base_height() > 0.9 * g1.q_ref[2]


def test_stage_estimates_the_base_in_process(talos):
    """No base state from outside: the leg odometry in the stage keeps Talos standing and
    its estimate close to the simulated truth."""
    sim = Simulation(talos, SimConfig(visual_meshes=False))
    sim.reset(talos.q_ref)
    stage = ControlStage(talos, None, StageConfig(period=0.001, fixed_dt=True, estimator=True))
    stage.estimator.x = None
    errors = []
    for k in range(1000):
        cmd = stage.cycle(observe(sim, k * PERIOD_NS, base=False))
        assert not cmd.damping, cmd.reason
        q_est, _ = stage.base_estimate
        # the estimate starts from the lowest sole at z = 0 above the origin; compare displacements
        if k == 0:
            offset = sim.q[:3] - q_est[:3]
        errors.append(np.linalg.norm(q_est[:3] + offset - sim.q[:3]))
        sim.step(cmd.tau)
    assert max(errors) < 0.005
    assert sim.base_height() > 0.9 * talos.q_ref[2]


@pytest.mark.parametrize(
    "solve_every, worker, wait",
    [(1, "none", 0), (4, "none", 0), (4, "process", 2)],
    ids=["every-state", "4", "4-process"],
)
def test_stage_detects_a_lift_from_the_foot_sensors_and_holds_the_posture(talos, solve_every, worker, wait):
    """Both soles unloaded for the debounce (50 ms) on every state: lifted at the 50th,
    the posture held; a foot loaded on three states in four (a robot on its feet whose
    sensors drop out on the others) is no lift, whichever states the QP solves: the
    detector sees every state (fed the solves' states alone it declared this a lift, or
    not, depending on which states the solve process took)."""
    config = StageConfig(period=0.001, fixed_dt=True, solve_every=solve_every, solve_worker=worker, solve_wait=wait)
    unloaded = {s: np.zeros(6) for s in ("left", "right")}
    # the dropouts at each phase of the 4-state solve period (one of them the solves' own states)
    for pattern in ("dropouts 0", "dropouts 1", "dropouts 2", "dropouts 3", "unloaded"):
        sim = Simulation(talos, SimConfig(visual_meshes=False))
        sim.reset(talos.q_ref)
        stage = ControlStage(talos, None, config)
        try:
            lifted_at = None
            for k in range(400):
                obs = observe(sim, k * PERIOD_NS)
                if k >= 200 and (pattern == "unloaded" or pattern == f"dropouts {k % 4}"):
                    obs.wrenches = unloaded
                cmd = stage.cycle(obs)
                stage.finish()
                sim.step(cmd.tau)
                if stage.lifted and lifted_at is None:
                    lifted_at = k
                    assert any(e.startswith(f"lifted at t = {k * 1e-3:.3f} s") for e in stage.supervisor.events)
        finally:
            stage.close()
        if pattern != "unloaded":
            assert lifted_at is None and cmd.status == "ok", (pattern, lifted_at, cmd.reason)
        else:
            assert lifted_at == 250 and cmd.status == "airborne", (lifted_at, cmd.reason)


def walk_through_stage(robot, config: StageConfig, steps: int, push=None):
    """Closed loop on MuJoCo through the stage, walking ``steps`` at 0.25 m/s from 0.2 s
    (``push``: (t, dv) on the torso).  Returns (sim, stage, commands, solves)."""
    from whole_body_control.runs.runner import push_body
    from whole_body_control.sim.fall import FallDetector
    from whole_body_control.walker_stage import make_walker, walker_reference
    from zmp_walker import MeasuredState

    sim = Simulation(robot, SimConfig(visual_meshes=False))
    sim.reset(robot.q_ref)
    stage = ControlStage(robot, None, config)
    lead = stage.ctrl.config.contacts.transition_time
    fall = FallDetector(robot)
    walker, commands, solves, k = None, [], 0, 0
    while walker is None or k * 1e-3 < walker.schedule.end_time + 0.5:
        t = k * 1e-3
        if push is not None and abs(t - push[0]) < 5e-4:
            sim.push_velocity_change(push_body(robot), np.array(push[1]), 0.1)
        if walker is None and t >= 0.2:
            walker = make_walker(robot, stage.ctrl)
            walker.walk_steps(steps, 0.25)
        st = stage.ctrl.state
        measured = MeasuredState(st.com.copy(), st.vcom.copy()) if config.com_mode == "dcm" else None
        ref = walker_reference(walker, t, lead, measured) if walker is not None else None
        before = stage.last_result
        # as the node does: the reference sampled only where a solve uses it
        cmd = stage.cycle(observe(sim, k * PERIOD_NS), (lambda ref=ref: ref) if ref is not None else None)
        stage.finish()
        solves += stage.last_result is not before
        commands.append(cmd)
        sim.step(cmd.tau)
        st = stage.ctrl.state
        assert not fall.update(t, sim, st.com, st.vcom, stage.ctrl.support_polygon()), fall.reason
        k += 1
    return sim, stage, commands, solves


@pytest.mark.parametrize("robot_name", ["talos", "g1"])
def test_multi_rate_stage_walks_solving_every_fourth_state(robot_name, talos):
    """solve_every = 4 (the ROS graph's 250 Hz QP under a 1 kHz loop): the robot walks
    6 steps (the walker with DCM feedback on the measured CoM, as in-process), one
    solve per 4 states, every command answering its own state."""
    robot = talos if robot_name == "talos" else load_robot("g1")
    sim, stage, commands, solves = walk_through_stage(
        robot, StageConfig(period=0.001, fixed_dt=True, solve_every=4, com_mode="dcm"), steps=6
    )
    assert not any(c.damping for c in commands)
    assert [c.stamp_ns for c in commands] == [k * PERIOD_NS for k in range(len(commands))]
    assert abs(solves - len(commands) / 4) <= 2, (solves, len(commands))
    assert sim.q[0] > 0.5 and sim.base_height() > 0.9 * robot.q_ref[2]


def test_multi_rate_holds_the_plan_and_damps_at_once_on_a_bad_state(talos):
    sim = Simulation(talos, SimConfig(visual_meshes=False))
    sim.reset(talos.q_ref)
    stage = ControlStage(talos, None, StageConfig(period=0.001, fixed_dt=True, solve_every=4))
    taus = []
    for k in range(8):
        cmd = stage.cycle(observe(sim, k * PERIOD_NS))
        stage.finish()
        taus.append(cmd.tau)
        sim.step(cmd.tau)
    # state 0 solved and answered; states 1-4 hold its torques (hold_bandwidth 0); the solve
    # on state 4 (after its command) answers 5-8
    for k in (1, 2, 3, 4):
        np.testing.assert_array_equal(taus[k], taus[0])
    assert not np.array_equal(taus[5], taus[4])
    np.testing.assert_array_equal(taus[6], taus[5])
    bad = observe(sim, 8 * PERIOD_NS)
    bad.q_joints[3] = np.nan  # a hold state: checked all the same, no plan used
    cmd = stage.cycle(bad)
    assert cmd.damping and talos.joint_names[3] in cmd.reason and np.isfinite(cmd.tau).all()
    cmd = stage.cycle(observe(sim, 9 * PERIOD_NS))
    assert not cmd.damping, "the next usable state solves at once"


@pytest.mark.parametrize("worker", ["thread", "process"])
def test_multi_rate_in_a_worker_stands_and_drops_a_plan_overtaken_by_damping(talos, worker):
    sim = Simulation(talos, SimConfig(visual_meshes=False))
    sim.reset(talos.q_ref)
    stage = ControlStage(talos, None, StageConfig(period=0.001, solve_every=4, solve_worker=worker))
    cmd = stage.cycle(observe(sim, 0))
    assert not cmd.damping or cmd.reason == "waiting for the solve process to start"  # real time: never waits
    stage._worker.start()
    for k in range(500):
        cmd = stage.cycle(observe(sim, k * PERIOD_NS))
        # a solve process arms in the background (the first state is damped meanwhile)
        arming = k == 0 and worker == "process" and cmd.reason == ARMING
        assert not cmd.damping or arming, cmd.reason
        stage.finish()
        # this loop outruns the clock the stamps stand for: a solve takes 0.5 to 1 ms of wall
        # time, within a period or two of a real 1 kHz loop, but dozens of states here, and a
        # real-time stage damps rather than wait for a solve that late (see the test below)
        stage._worker.wait()
        sim.step(cmd.tau)
    assert sim.base_height() > 0.95 * talos.q_ref[2]
    # a solve in flight when a damping comes in must not install its plan
    for k in range(500, 520):  # the next state a solve is due for
        stage._worker.wait()
        obs = observe(sim, k * PERIOD_NS)
        stage.cycle(obs)
        stage.finish()  # handed to the worker after the command
        if stage._submitted_ns == obs.stamp_ns:
            break
    assert stage._submitted_ns == obs.stamp_ns
    stage.fail(obs.stamp_ns, "test: damping while the solve runs")
    stage._worker.wait()
    assert stage._plan is None and not stage.supervisor.armed
    stage.close()
    with pytest.raises(WbcError, match="solve_every"):
        StageConfig(solve_every=0)
    with pytest.raises(WbcError, match="solve_worker"):
        StageConfig(solve_worker="gpu")


def test_real_time_holds_a_plan_that_came_back_expired_instead_of_solving_in_the_loop(talos):
    """Real time (solve_wait 0): a solve that finishes only after its plan expired (the
    worker preempted for 10 periods, the robot holding the last command meanwhile) is
    held while the next solve runs; the command loop solves only to arm."""
    sim = Simulation(talos, SimConfig(visual_meshes=False))
    sim.reset(talos.q_ref)
    stage = ControlStage(talos, None, StageConfig(period=0.001, solve_every=4, solve_worker="thread"))
    in_loop = []
    call = stage._worker.call
    stage._worker.call = lambda job: in_loop.append(job[0].stamp_ns) or call(job)
    ns, jumps = 0, 0
    for _ in range(80):
        cmd = stage.cycle(observe(sim, ns))
        stage.finish()
        assert not cmd.damping, cmd.reason
        assert np.isfinite(cmd.tau).all()
        gap = 1
        if stage._submitted_ns == ns:  # a solve went to the worker: it ends 10 periods later
            stage._worker.wait()
            gap, jumps = 10, jumps + 1
        for _ in range(gap):
            sim.step(cmd.tau)
        ns += gap * PERIOD_NS
    stage.close()
    assert jumps > 5 and stage.late_plans >= jumps - 1
    assert in_loop == [0], f"solved in the command loop at {in_loop} (ns)"
    assert sim.base_height() > 0.95 * talos.q_ref[2]


def test_real_time_arms_in_the_solve_process_and_never_solves_in_the_loop(talos):
    """Real time with a solve process: the arming solve (the controller's reset and its
    first solve, 1.4 to 4 ms) runs in the worker; every state meanwhile gets damping at
    once, and the arming solve's plan is held from the first state after it came back."""
    sim = Simulation(talos, SimConfig(visual_meshes=False))
    sim.reset(talos.q_ref)
    stage = ControlStage(talos, None, StageConfig(period=0.001, solve_every=4, solve_worker="process"))
    try:
        stage._worker.start()
        stage._worker.call = lambda job: pytest.fail(f"solved in the command loop at {job[0].stamp_ns} ns")
        first = stage.cycle(observe(sim, 0))
        assert first.damping and first.reason == ARMING
        # (before finish: finish takes in a reply that has come, and on a loaded machine the
        # worker's arming solve can end before this process is back to call it)
        assert np.isfinite(first.tau).all() and not stage.supervisor.armed
        stage.finish()
        busy = stage.cycle(observe(sim, PERIOD_NS))  # the worker has not answered (or just did)
        assert busy.damping or stage.supervisor.armed
        stage._worker.wait()  # the arming reply: taken in by the next state
        held = stage.cycle(observe(sim, 2 * PERIOD_NS))
        stage.finish()
        assert not held.damping, held.reason
        assert stage.supervisor.armed and stage._plan is not None and stage._plan.stamp_ns == 0
        assert any(e.startswith("armed at t = 0.000") for e in stage.supervisor.events)
        for k in range(3, 300):  # and it stands on from there, every solve in the worker
            cmd = stage.cycle(observe(sim, k * PERIOD_NS))
            assert not cmd.damping, cmd.reason
            stage.finish()
            stage._worker.wait()  # (this loop outruns the clock: see the test above)
            sim.step(cmd.tau)
        assert sim.base_height() > 0.95 * talos.q_ref[2]
    finally:
        stage.close()


def _real_time_ticker(talos):
    """A Talos simulation, a real-time stage with a solve process (started: states 0 to 99
    answered, armed), ``tick(ns, missing="")``: one state through the stage (the reference
    missing for ``missing``), its command applied; and the command of state 99."""
    sim = Simulation(talos, SimConfig(visual_meshes=False))
    sim.reset(talos.q_ref)
    stage = ControlStage(talos, None, StageConfig(period=0.001, solve_every=4, solve_worker="process"))

    def tick(ns: int, missing: str = ""):
        stage.supervisor.received(ns)
        cmd = stage.cycle(observe(sim, ns), None, missing)
        stage.finish()
        stage._worker.wait()  # (this loop outruns the clock)
        sim.step(cmd.tau)
        return cmd

    stage._worker.start()
    try:
        for k in range(100):
            cmd = tick(k * PERIOD_NS)
        assert not cmd.damping, cmd.reason
    except BaseException:
        stage.close()
        raise
    return sim, stage, tick, cmd


def test_real_time_resumes_from_the_kept_plan_after_a_short_stale_outage(talos):
    """Real time with a solve process: joint states that stop for 8 periods (a stalled
    machine) get damping from the watchdog within 3 periods; the first state back is
    answered at once from the plan kept through the outage, not damped while an arming
    solve runs.  An outage longer than the held plans' limit re-arms through a solve."""
    sim, stage, tick, cmd = _real_time_ticker(talos)
    try:
        last = 99 * PERIOD_NS
        answers = [stage.watchdog(last + j * PERIOD_NS) for j in range(1, 9)]  # no state for 8 periods
        assert answers[0] is None and answers[1] is None
        assert all(a is not None and a.damping and "stale" in a.reason for a in answers[2:])
        for a in answers:  # the robot holds the last command, then the watchdog's damping
            sim.step(cmd.tau if a is None else a.tau)
        stage.supervisor.events.clear()
        back = tick(last + 9 * PERIOD_NS)
        assert not back.damping, back.reason
        assert stage.supervisor.armed
        assert any(e.startswith("resumed at") and "holding the plan" in e for e in stage.supervisor.events)
        for k in range(109, 300):
            cmd = tick(k * PERIOD_NS)
            assert not cmd.damping, cmd.reason
        assert sim.base_height() > 0.95 * talos.q_ref[2]
        # an outage beyond the held plans' limit: the plan is dropped, a solve arms
        last = 299 * PERIOD_NS
        assert stage.watchdog(last + 3 * PERIOD_NS).damping
        late = stage._plan_limit_ns + 10 * PERIOD_NS
        stage.supervisor.received(last + late)
        again = stage.cycle(observe(sim, last + late))
        stage.finish()
        assert again.damping and again.reason == ARMING
    finally:
        stage.close()


def test_real_time_resumes_from_the_kept_plan_after_a_late_walking_reference(talos):
    """Real time with a solve process: a walking reference missing for 40 periods (the
    walker node starved of CPU) damps the robot with that reason, but the plan is kept:
    the first state with a reference again is answered at once from it (resumed), not
    damped while an arming solve runs.  Other refusals (a NaN state) drop the plan."""
    sim, stage, tick, _ = _real_time_ticker(talos)
    try:
        for k in range(100, 140):
            late = tick(k * PERIOD_NS, "no walking reference at t = 0.100 s")
            assert late.damping and late.reason.startswith("no walking reference"), late.reason
        assert not stage.supervisor.armed
        stage.supervisor.events.clear()
        back = tick(140 * PERIOD_NS)
        assert not back.damping, back.reason
        assert any(e.startswith("resumed at") and "holding the plan" in e for e in stage.supervisor.events)
        for k in range(141, 300):
            cmd = tick(k * PERIOD_NS)
            assert not cmd.damping, cmd.reason
        assert sim.base_height() > 0.95 * talos.q_ref[2]
        # a refusal that is not an outage (a non-finite joint velocity) drops the plan: re-armed by a solve
        obs = observe(sim, 300 * PERIOD_NS)
        obs.v_joints[0] = np.nan
        stage.supervisor.received(obs.stamp_ns)
        assert stage.cycle(obs).damping
        stage.finish()
        again = tick(301 * PERIOD_NS)
        assert again.damping and again.reason == ARMING
    finally:
        stage.close()


def _waiting_worker_run(talos, worker: str) -> tuple[np.ndarray, list[str]]:
    """300 states with solve_wait = 2; at state 150 a runtime change of a task's weight,
    at 200 a damping (the next state re-arms): torques and the supervisor's events."""
    sim = Simulation(talos, SimConfig(visual_meshes=False))
    sim.reset(talos.q_ref)
    config = StageConfig(period=0.001, fixed_dt=True, solve_every=4, solve_worker=worker, solve_wait=2)
    stage = ControlStage(talos, None, config)
    task = next(iter(stage.ctrl.tasks))
    out, events = [], []
    for k in range(300):
        if k == 150:
            stage.apply([("weight", task, 2.0 * stage.ctrl.tasks[task].weight)])
        obs = observe(sim, k * PERIOD_NS)
        cmd = stage.fail(obs.stamp_ns, "test") if k == 200 else stage.cycle(obs)
        out.append(cmd.tau)
        events += stage.supervisor.events
        stage.supervisor.events.clear()
        sim.step(cmd.tau)
    stage.close()
    return np.array(out), events


def test_multi_rate_with_a_waiting_thread_is_reproducible_to_the_bit(talos):
    """solve_wait = 2 (lockstep): the plan of state k is taken at state k + 2 whatever the
    threads' timing, so two runs give the same torques."""
    a, _ = _waiting_worker_run(talos, "thread")
    b, _ = _waiting_worker_run(talos, "thread")
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a[5], a[0])  # state 0's plan until state 4's is taken, at 6
    assert not np.array_equal(a[6], a[5])


def test_the_solve_process_gives_the_thread_s_torques_to_the_bit(talos):
    """The worker process holds its own controller: arming, a runtime weight change and a
    damping with re-arming reach it, so its run is the thread's, bit for bit."""
    a, events_a = _waiting_worker_run(talos, "thread")
    b, events_b = _waiting_worker_run(talos, "process")
    np.testing.assert_array_equal(a, b)
    assert events_a == events_b and any("armed" in e for e in events_b), events_b


def test_real_time_damps_instead_of_waiting_for_a_solve_that_hangs(talos):
    """Real time: a solve that does not come back (its worker stalled) never blocks the
    command loop.  Its plan is held up to the limit, then every state is answered with
    damping naming the late solve; control resumes once the worker is back."""
    sim = Simulation(talos, SimConfig(visual_meshes=False))
    sim.reset(talos.q_ref)
    stage = ControlStage(talos, None, StageConfig(period=0.001, solve_every=4, solve_worker="thread"))
    worker = stage._worker
    solve, gate, hung = worker._solve, threading.Event(), []

    def stalled(*job):
        if len(job) == 3 and job[2] is not None and not hung:  # the first background solve hangs
            hung.append(job[0].stamp_ns)
            gate.wait(30.0)
        return solve(*job)

    worker._solve = stalled
    released_late = threading.Timer(20.0, gate.set)  # only if a cycle blocks (the test then fails)
    released_late.start()
    ns, commands = 0, []
    try:
        while ns < stage._plan_limit_ns + 40 * PERIOD_NS:
            cmd = stage.cycle(observe(sim, ns))
            stage.finish()
            commands.append(cmd)
            sim.step(cmd.tau)
            ns += PERIOD_NS
        assert not gate.is_set(), "a cycle waited for the hung solve"
        gate.set()
        worker.wait()
        for _ in range(20):
            cmd = stage.cycle(observe(sim, ns))
            stage.finish()
            sim.step(cmd.tau)
            ns += PERIOD_NS
    finally:
        released_late.cancel()
        gate.set()
        stage.close()
    assert hung, "no solve went to the worker"
    held = [c for c in commands if c.stamp_ns > hung[0] and not c.damping]
    damped = [c for c in commands if c.damping]
    assert held, "the last plan is held while its successor is late"
    assert damped and all("the solve is late" in c.reason for c in damped), {c.reason for c in damped}
    assert all(np.isfinite(c.tau).all() for c in commands)
    assert damped[0].stamp_ns - hung[0] <= stage._plan_limit_ns + 5 * PERIOD_NS
    assert not cmd.damping and stage.supervisor.armed, cmd.reason
