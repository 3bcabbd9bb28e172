"""The control stage without ROS: the supervisor's rules on a simulated clock, and
the stage closing the loop on MuJoCo (standing, faults ending in damping, the
in-process estimator, lift detection)."""

from __future__ import annotations

import numpy as np
import pytest

from whole_body_control.control_stage import ControlStage, Observation, StageConfig, Supervisor
from whole_body_control.errors import WbcError
from whole_body_control.robot import load_robot
from whole_body_control.sim import SimConfig, Simulation

PERIOD_NS = 1_000_000


@pytest.fixture(scope="module")
def talos():
    return load_robot("talos")


def observe(sim: Simulation, ns: int, base=True, wrenches=True) -> Observation:
    q, v = sim.q, sim.v
    imu = sim.imu()
    return Observation(
        ns,
        q[7:].copy(),
        v[6:].copy(),
        (),
        (imu.orientation, imu.gyro, imu.linear_acceleration),
        (q[:7].copy(), v[:6].copy()) if base else None,
        sim.foot_wrenches() if wrenches else None,
    )


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


def test_stage_detects_a_lift_from_the_foot_sensors_and_holds_the_posture(talos):
    sim = Simulation(talos, SimConfig(visual_meshes=False))
    sim.reset(talos.q_ref)
    stage = ControlStage(talos, None, StageConfig(period=0.001, fixed_dt=True))
    for k in range(200):
        sim.step(stage.cycle(observe(sim, k * PERIOD_NS)).tau)
    assert not stage.lifted
    lifted = observe(sim, 200 * PERIOD_NS)
    for k in range(200, 300):
        lifted = observe(sim, k * PERIOD_NS)
        lifted.wrenches = {s: np.zeros(6) for s in ("left", "right")}  # both soles unloaded
        cmd = stage.cycle(lifted)
        sim.step(cmd.tau)
    assert stage.lifted and cmd.status == "airborne"
