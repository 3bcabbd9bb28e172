"""Inputs validated at the controller's boundary: bad references, clocks and states are
rejected with a reason naming them, the torque never steps, control resumes."""

import dataclasses

import numpy as np
import pinocchio as pin
import pytest

from whole_body_control.controller import Reference, ReferenceRejected, WholeBodyController
from whole_body_control.errors import WbcError
from whole_body_control.robot import load_robot
from whole_body_control.sim import Simulation
from whole_body_control.tasks import FrameReference


@pytest.fixture(scope="module")
def robot():
    return load_robot("talos", fresh=False)


def standing(robot):
    ctrl = WholeBodyController(robot)
    q, v = robot.q_ref.copy(), np.zeros(robot.nv)
    v[6:] = 0.05  # a moving state: damping is not zero torque
    return ctrl, q, v


def foot_ref(ctrl, side="left", **changes):
    ref = ctrl.tasks[f"{side}_foot"].reference
    return dataclasses.replace(FrameReference(ref.pos.copy(), ref.rot.copy()), **changes)


def bad_references(ctrl, robot):
    com = ctrl.tasks["com"].pos
    nan3 = np.array([0.0, np.nan, 0.0])
    rot = np.eye(3)
    rot[0, 0] = np.nan
    return {
        "non-finite com position": Reference(com_pos=com + nan3),
        "non-finite com velocity": Reference(com_pos=com, com_vel=nan3),
        "non-finite com acceleration": Reference(com_pos=com, com_acc=np.array([np.inf, 0.0, 0.0])),
        "non-finite left_foot position": Reference(frames={"left_foot": foot_ref(ctrl, pos=nan3)}),
        "non-finite left_foot rotation": Reference(frames={"left_foot": foot_ref(ctrl, rot=rot)}),
        "non-finite right_foot linear velocity": Reference(
            frames={"right_foot": foot_ref(ctrl, "right", lin_vel=nan3)}
        ),
        "non-finite right_foot angular acceleration": Reference(
            frames={"right_foot": foot_ref(ctrl, "right", ang_acc=nan3)}
        ),
        "left_foot rotation is not a rotation matrix": Reference(
            frames={"left_foot": foot_ref(ctrl, rot=2 * np.eye(3))}
        ),
        "non-finite posture": Reference(posture=np.full(robot.na, np.nan)),
        "contacts flag 'left' is nan, not a bool": Reference(contacts={"left": float("nan")}),
        "unknown contact 'lefft'": Reference(contacts={"lefft": False}),
    }


@pytest.mark.parametrize(
    "field",
    [
        "non-finite com position",
        "non-finite com velocity",
        "non-finite com acceleration",
        "non-finite left_foot position",
        "non-finite left_foot rotation",
        "non-finite right_foot linear velocity",
        "non-finite right_foot angular acceleration",
        "left_foot rotation is not a rotation matrix",
        "non-finite posture",
        "contacts flag 'left' is nan, not a bool",
        "unknown contact 'lefft'",
    ],
)
def test_a_bad_reference_is_rejected_by_name_and_the_last_valid_one_kept(robot, field):
    ctrl, q, v = standing(robot)
    twin, _, _ = standing(robot)  # the same controller, never shown the bad reference
    ctrl.cycle(q, v)
    twin.cycle(q, v)
    bad = bad_references(ctrl, robot)[field]
    # a partly valid reference is rejected whole: the good CoM target must not be taken
    bad = dataclasses.replace(bad, com_pos=ctrl.tasks["com"].pos + [0.01, 0.0, 0.0]) if bad.com_pos is None else bad
    held = ctrl.cycle(q, v, reference=bad)
    assert held.status == "held"
    assert held.reason.startswith(f"reference rejected: {field}"), held.reason
    # control went on with the last valid reference: the same torques as the twin's
    same = twin.cycle(q, v)
    assert same.ok
    np.testing.assert_allclose(held.tau, same.tau, atol=1e-9)
    assert np.all(np.isfinite(held.tau)) and np.all(np.abs(held.tau) <= robot.tau_max)
    # the next valid reference resumes control
    target = ctrl.tasks["com"].pos + [0.0, 0.01, 0.0]
    resumed = ctrl.cycle(q, v, reference=Reference(com_pos=target))
    assert resumed.ok, resumed.reason
    np.testing.assert_allclose(ctrl.tasks["com"].pos, target)


def test_set_reference_raises_a_wbc_error_naming_the_field(robot):
    ctrl, _, _ = standing(robot)
    before = ctrl.tasks["left_foot"].reference.pos.copy()
    with pytest.raises(ReferenceRejected, match="non-finite left_foot position") as info:
        ctrl.set_reference(
            Reference(frames={"left_foot": foot_ref(ctrl, pos=np.array([np.nan, 0.0, 0.0]))}, contacts={"left": False})
        )
    assert isinstance(info.value, WbcError) and isinstance(info.value, ValueError)
    np.testing.assert_array_equal(ctrl.tasks["left_foot"].reference.pos, before)
    assert ctrl.contacts["left"].active and not ctrl.contacts["left"].removing  # nothing of it was applied


@pytest.mark.parametrize("dt", [float("nan"), -0.001, 0.0, float("inf")])
def test_a_bad_dt_is_rejected_by_name_and_the_clock_keeps_the_control_period(robot, dt):
    ctrl, q, v = standing(robot)
    ctrl.cycle(q, v, 0.001)
    t = ctrl.time
    result = ctrl.cycle(q, v, dt)
    assert result.status == "held"
    assert result.reason.startswith(f"dt rejected: {dt!r} (must be finite and > 0)"), result.reason
    assert ctrl.time == pytest.approx(t + ctrl.config.control_period)
    assert np.all(np.isfinite(result.tau)) and np.all(np.abs(result.tau) <= robot.tau_max)
    assert ctrl.cycle(q, v, 0.001).ok


def test_a_contact_removal_finishes_through_nan_clocks(robot):
    """The issue's case: with a NaN clock the removal ramp never ended (443 N after 100 ticks)."""
    ctrl, q, v = standing(robot)
    ctrl.cycle(q, v, 0.001, Reference(contacts={"left": False}))
    ramp_ticks = int(np.ceil(ctrl.config.contacts.transition_time / ctrl.config.control_period))
    for _ in range(ramp_ticks + 2):
        result = ctrl.cycle(q, v, float("nan"))
        assert result.status == "held" and result.reason.startswith("dt rejected: nan")
    assert not result.contacts["left"]
    assert np.abs(result.wrenches["left"]).max() < 1e-6  # [N, N m] the foot carries nothing
    assert result.wrenches["right"][2] == pytest.approx(robot.mass * 9.81, rel=0.05)


def test_a_rejected_state_blends_toward_damping_at_the_rate_bound_and_control_resumes(robot):
    ctrl, q, v = standing(robot)
    first = ctrl.cycle(q, v)
    assert first.ok and np.abs(first.tau).max() > 20.0  # gravity torques: a step would show
    max_step = ctrl.config.safety.max_torque_rate * ctrl.config.control_period  # [N m] per tick
    bad_q = q.copy()
    bad_q[7 + 3] = np.nan
    last = first.tau
    damping = np.clip(-robot.safe_damping(ctrl.config.control_period) * v[6:], -robot.tau_max, robot.tau_max)
    for k in range(1, 6):
        result = ctrl.cycle(bad_q, v)
        assert result.status == "damping"
        assert result.reason.startswith(f"state rejected: non-finite state in: {robot.joint_names[3]}"), result.reason
        assert "blending toward damping" in result.reason
        assert np.all(np.isfinite(result.tau))
        assert np.abs(result.tau - last).max() <= max_step + 1e-9
        # it moves toward damping as fast as allowed
        expected = first.tau + np.clip(damping - first.tau, -k * max_step, k * max_step)
        np.testing.assert_allclose(result.tau, expected, atol=1e-9)
        last = result.tau
    assert ctrl.cycle(q, v).ok


def test_the_reach_bound_holds_for_any_configuration(robot):
    """``foot_reach`` bounds the base-to-sole distance (sum of the chain's joint spacings)."""
    ctrl, _, _ = standing(robot)
    model, data = robot.model, robot.model.createData()
    base = model.getFrameId(robot.config.base_frame)
    rng = np.random.default_rng(0)
    farthest = {s: 0.0 for s in ("left", "right")}
    lo = np.where(np.isfinite(robot.q_lower), robot.q_lower, -np.pi)
    hi = np.where(np.isfinite(robot.q_upper), robot.q_upper, np.pi)
    for _ in range(300):
        q = robot.q_ref.copy()
        q[7:] = rng.uniform(lo, hi)
        pin.framesForwardKinematics(model, data, q)
        for side, fid in robot.foot_frame_ids.items():
            d = np.linalg.norm(data.oMf[fid].translation - data.oMf[base].translation)
            farthest[side] = max(farthest[side], d)
    for side in farthest:
        assert farthest[side] <= ctrl.foot_reach[side]
        assert farthest[side] > 0.85 * ctrl.foot_reach[side]  # and it is not loose


def test_a_foot_reference_100m_away_is_clamped_and_reported(robot):
    def lifted_left():
        ctrl, q, v = standing(robot)
        ctrl.cycle(q, v, reference=Reference(contacts={"left": False}))
        for _ in range(60):
            ctrl.cycle(q, v)
        assert not ctrl.contacts["left"].active
        return ctrl, q, v

    ctrl, q, v = lifted_left()
    far = foot_ref(ctrl, pos=ctrl.tasks["left_foot"].reference.pos + [100.0, 0.0, 0.0], lin_vel=np.ones(3))
    result = ctrl.cycle(q, v, reference=Reference(frames={"left_foot": far}))
    clamped = [w for w in result.warnings if w.startswith("left_foot reference 100 m from the base clamped")]
    assert clamped, result.warnings
    assert result.status == "ok" and np.all(np.isfinite(result.tau)) and np.all(np.abs(result.tau) <= robot.tau_max)
    # it tracked the point of the reach sphere toward the target, at rest
    twin, _, _ = lifted_left()
    base = twin.state.placement(twin.robot.model.getFrameId(robot.config.base_frame)).translation
    offset = far.pos - base
    edge = base + offset * twin.foot_reach["left"] / np.linalg.norm(offset)
    same = twin.cycle(q, v, reference=Reference(frames={"left_foot": foot_ref(twin, pos=edge)}))
    assert not any("clamped" in w for w in same.warnings)
    np.testing.assert_allclose(result.tau, same.tau, atol=1e-6)
    # within reach nothing is clamped
    near = foot_ref(ctrl, pos=ctrl.state.placement(robot.foot_frame_ids["left"]).translation + [0.1, 0.0, 0.05])
    assert not any("clamped" in w for w in ctrl.cycle(q, v, reference=Reference(frames={"left_foot": near})).warnings)


def test_talos_keeps_standing_through_bad_inputs_in_closed_loop(robot):
    """1.5 s in MuJoCo; from 0.4 s: 30 ticks of NaN CoM references, 30 of NaN foot references,
    20 of NaN dt and 3 of a NaN state; the robot stands and tracks its CoM afterwards."""
    sim = Simulation(robot)
    ctrl = WholeBodyController(robot)
    sim.reset(robot.q_ref)
    ctrl.reset(sim.q, sim.v)
    com0 = ctrl.tasks["com"].pos.copy()
    dt = sim.timestep
    max_step = ctrl.config.safety.max_torque_rate * dt
    statuses = []
    last_tau = None
    for k in range(1500):
        q, v, tick_dt, ref = sim.q, sim.v, dt, Reference(com_pos=com0)
        if 400 <= k < 430:
            ref = Reference(com_pos=np.array([np.nan, com0[1], com0[2]]))
        elif 430 <= k < 460:
            ref = Reference(frames={"right_foot": foot_ref(ctrl, "right", pos=np.full(3, np.nan))})
        elif 460 <= k < 480:
            tick_dt = float("nan")
        elif 480 <= k < 483:
            q = q.copy()
            q[0] = np.nan
        result = ctrl.cycle(q, v, tick_dt, ref)
        assert np.all(np.isfinite(result.tau)) and np.all(np.abs(result.tau) <= robot.tau_max)
        if result.status == "damping":
            assert np.abs(result.tau - last_tau).max() <= max_step + 1e-9
        statuses.append(result.status)
        last_tau = result.tau
        sim.step(result.tau)
    assert set(statuses[400:480]) == {"held"}
    assert statuses[480:483] == ["damping"] * 3
    assert set(statuses[:400]) == {"ok"} and set(statuses[600:]) == {"ok"}
    assert sim.base_height() > 0.8 * robot.q_ref[2]
    assert np.linalg.norm(ctrl.state.com - com0) < 0.01  # [m] back on its reference
    sim.close()
