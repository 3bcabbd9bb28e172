"""The prioritized QP controller: physics of every solution, strict priority, config validation, fallback ladder."""

import dataclasses

import numpy as np
import pinocchio as pin
import pytest

from whole_body_control import geometry
from whole_body_control.config import LevelConfig, TaskConfig, WbcConfig, load_wbc_config
from whole_body_control.controller import Reference, WholeBodyController
from whole_body_control.errors import ConfigError
from whole_body_control.robot import load_robot
from whole_body_control.runs.runner import run_stand


def independent_dynamics_residual(robot, q, v, result):
    """|M a + h - S^T tau - J^T f| with a fresh Pinocchio data (not the controller's)."""
    data = robot.model.createData()
    M = pin.crba(robot.model, data, q)
    h = pin.nonLinearEffects(robot.model, data, q, v)
    pin.computeJointJacobians(robot.model, data, q)
    pin.updateFramePlacements(robot.model, data)
    rhs = np.zeros(robot.nv)
    rhs[6:] = result.tau
    for side, fid in robot.foot_frame_ids.items():
        J = pin.getFrameJacobian(robot.model, data, fid, pin.ReferenceFrame.LOCAL)
        rhs += J.T @ result.wrenches[side]
    return float(np.linalg.norm(M @ result.a + h - rhs))


@pytest.mark.parametrize("name", ["talos", "g1"])
def test_every_solution_satisfies_dynamics_and_contact_limits(name):
    robot = load_robot(name)
    checked = []

    def check(t, sim, ctrl, result):
        if result.status != "ok" or len(checked) > 400 or int(round(t * 1000)) % 3:
            return
        q, v = ctrl.state.q, ctrl.state.v
        assert independent_dynamics_residual(robot, q, v, result) < 1e-6
        for side, c in ctrl.contacts.items():
            assert c.check_wrench(result.wrenches[side], tol=1e-3) == []
        assert np.all(np.abs(result.tau) <= robot.tau_max + 1e-9)
        checked.append(t)

    # A sway makes the references move; a push makes the constraints bite.
    push = (0.0, 0.15) if name == "talos" else None  # the push makes the inequalities bite
    summary = run_stand(robot, 1.2, push_dv=push, push_at=0.4, on_tick=check)
    assert not summary["fell"]
    assert len(checked) > 300


def _priority_config(levels: dict[str, dict[str, TaskConfig]]) -> WbcConfig:
    base = load_wbc_config()
    return dataclasses.replace(base, levels={k: LevelConfig(tasks=v) for k, v in levels.items()})


def test_strict_priority_higher_level_unaffected_by_conflicting_lower_level():
    robot = load_robot("talos", fresh=False)
    com = TaskConfig(type="com", weight=1.0, kp=100.0, kd=20.0)
    com_low = TaskConfig(type="com", weight=1.0, kp=100.0, kd=20.0)
    posture = TaskConfig(type="posture", weight=1.0, kp=30.0)
    alone = WholeBodyController(robot, _priority_config({"top": {"com": com}, "rest": {"posture": posture}}))
    stacked = WholeBodyController(
        robot, _priority_config({"top": {"com": com}, "low": {"com_low": com_low}, "rest": {"posture": posture}})
    )
    merged = WholeBodyController(
        robot, _priority_config({"top": {"com": com, "com_low": com_low}, "rest": {"posture": posture}})
    )
    q, v = robot.q_ref.copy(), np.zeros(robot.nv)
    target = alone.tasks["com"].pos + [0.005, 0.0, -0.005]
    conflicting = alone.tasks["com"].pos + [-0.005, 0.005, 0.0]
    for ctrl in (alone, stacked, merged):
        ctrl.tasks["com"].set_reference(target)
        if "com_low" in ctrl.tasks:
            ctrl.tasks["com_low"].set_reference(conflicting)
    r_alone = alone.cycle(q, v)
    r_stacked = stacked.cycle(q, v)
    r_merged = merged.cycle(q, v)
    assert r_alone.ok and r_stacked.ok and r_merged.ok
    assert not (r_alone.warnings or r_stacked.warnings or r_merged.warnings)  # no inequality in play
    # The conflict is real: merged in one level, the lower task pulls the higher one away.
    assert r_merged.task_residuals["com"] > r_alone.task_residuals["com"] + 1e-3
    # Strictly below, it does not.
    assert r_stacked.task_residuals["com"] == pytest.approx(r_alone.task_residuals["com"], abs=1e-8)
    assert r_stacked.residuals[0] == pytest.approx(r_alone.residuals[0], abs=1e-8)
    # And the lower level still used the freedom left to it.
    assert r_stacked.task_residuals["com_low"] < r_alone.task_residuals.get("com_low", np.inf)


def test_move_task_changes_the_priority_and_is_validated():
    robot = load_robot("talos", fresh=False)
    com = TaskConfig(type="com", weight=1.0, kp=100.0, kd=20.0)
    posture = TaskConfig(type="posture", weight=1.0, kp=30.0)
    levels = {"top": {"com": com}, "low": {"com_low": com}, "rest": {"posture": posture}}
    ctrl = WholeBodyController(robot, _priority_config(levels))
    q, v = robot.q_ref.copy(), np.zeros(robot.nv)
    target = ctrl.tasks["com"].pos + [0.005, 0.0, -0.005]
    conflicting = ctrl.tasks["com"].pos + [-0.005, 0.005, 0.0]
    ctrl.tasks["com"].set_reference(target)
    ctrl.tasks["com_low"].set_reference(conflicting)
    stacked = ctrl.cycle(q, v)
    # Errors name what is wrong and change nothing.
    with pytest.raises(ConfigError, match="did you mean 'com_low'"):
        ctrl.move_task("com_lo", 0)
    with pytest.raises(ConfigError, match=r"level 3 out of range 0\.\.2"):
        ctrl.move_task("com_low", 3)
    with pytest.raises(ConfigError, match="did you mean 'top'"):
        ctrl.move_task("com_low", "tp")
    with pytest.raises(ConfigError, match=r"would leave level\(s\) \['low'\] with no task"):
        ctrl.move_task("com_low", "top")
    assert [[t.name for t in tasks] for tasks in ctrl.levels] == [["com"], ["com_low"], ["posture"]]
    # A swap is checked as a whole; the lower CoM task now wins over the first one.
    levels_seen = ctrl.levels
    ctrl.move_tasks({"com": "low", "com_low": 0})
    assert ctrl.levels is levels_seen and [[t.name for t in tasks] for tasks in ctrl.levels] == [
        ["com_low"],
        ["com"],
        ["posture"],
    ]
    assert ctrl.level_of("com") == 1 and ctrl.level_of("com_low") == 0
    swapped = ctrl.cycle(q, v)
    assert swapped.ok and stacked.ok
    assert swapped.task_residuals["com_low"] == pytest.approx(stacked.task_residuals["com"], abs=1e-6)
    assert swapped.task_residuals["com"] > swapped.task_residuals["com_low"] + 1e-3
    # and back: the first solution again
    ctrl.move_tasks({"com": 0, "com_low": 1})
    again = ctrl.cycle(q, v)
    assert again.task_residuals["com"] == pytest.approx(stacked.task_residuals["com"], abs=1e-6)


def test_a_failed_level_raises_a_wbc_error_carrying_its_qp():
    from whole_body_control.errors import WbcError
    from whole_body_control.hqp import HierarchicalQP, LevelFailure, Objective

    E, e = np.zeros((0, 2)), np.zeros(0)
    C = np.array([[1.0, 0.0], [1.0, 0.0]])
    lower, upper = np.array([1.0, -np.inf]), np.array([np.inf, 0.0])  # x0 >= 1 and x0 <= 0
    levels = [[Objective("first", np.array([[1.0, 0.0]]), np.array([0.5]), 1.0)]]
    with pytest.raises(LevelFailure) as info:
        HierarchicalQP(max_iter=20).solve(E, e, C, lower, upper, levels)
    failure = info.value
    assert isinstance(failure, WbcError) and failure.level == 1
    p = failure.problem
    assert p.level == 1 and p.H.shape == (2, 2) and p.C.shape == (2, 2) and p.g.shape == (2,)
    # the carried QP is the infeasible one: the same row bounded below by more than above
    np.testing.assert_allclose(p.C[0], p.C[1])
    assert p.lower[0] > p.upper[1]


def _contact_zmp(robot, q, wrenches, z0):
    """ZMP [m] (x, y) on the plane z = z0 of the contact wrenches (sole frames) at ``q``."""
    data = robot.model.createData()
    pin.framesForwardKinematics(robot.model, data, q)
    f, tau = np.zeros(3), np.zeros(3)
    for side, fid in robot.foot_frame_ids.items():
        oMs = data.oMf[fid]
        fw = oMs.rotation @ wrenches[side][:3]
        f += fw
        tau += np.cross(oMs.translation, fw) + oMs.rotation @ wrenches[side][3:]
    return np.array([(z0 * f[0] - tau[1]) / f[2], (tau[0] + z0 * f[1]) / f[2]])


@pytest.mark.parametrize("zmp", [True, False])
def test_com_task_zmp_rows_keep_the_zmp_while_the_arms_swing(zmp):
    """G1 standing, the CoM asked to stay (acceleration 0) while the posture task swings
    both arms forward: with ``zmp`` the contacts' ZMP stays under the CoM (the moment the
    arms need comes from the CoM moving), without it the CoM stays and the ZMP moves."""
    robot = load_robot("g1", fresh=False)
    com = TaskConfig(type="com", weight=1.0, kp=100.0, kd=20.0, zmp=zmp)
    posture = TaskConfig(type="posture", weight=1.0, kp=400.0)
    ctrl = WholeBodyController(robot, _priority_config({"top": {"com": com}, "rest": {"posture": posture}}))
    q, v = robot.q_ref.copy(), np.zeros(robot.nv)
    arms = robot.q_ref[7:].copy()
    for name in ("left_shoulder_pitch_joint", "right_shoulder_pitch_joint"):
        arms[robot.joint_names.index(name)] -= 1.0
    ctrl.tasks["posture"].set_reference(arms)
    result = ctrl.cycle(q, v)
    assert result.ok
    st = ctrl.state
    z0 = min(st.placement(fid).translation[2] for fid in robot.foot_frame_ids.values())
    p = _contact_zmp(robot, q, result.wrenches, z0)
    com_acc = st.Jcom @ result.a + st.com_drift
    if zmp:
        assert np.linalg.norm(p - st.com[:2]) < 1e-4
        assert np.linalg.norm(com_acc[:2]) > 0.05  # the CoM takes the arms' moment
    else:
        assert np.linalg.norm(com_acc[:2]) < 1e-4
        assert np.linalg.norm(p - st.com[:2]) > 5e-3


def _with_com_hip(config: WbcConfig, hip_acc: float) -> WbcConfig:
    """``config`` with ``hip_acc`` on its ``com`` task (wherever its level)."""
    levels = {}
    for name, level in config.levels.items():
        tasks = {k: dataclasses.replace(t, hip_acc=hip_acc) if k == "com" else t for k, t in level.tasks.items()}
        levels[name] = dataclasses.replace(level, tasks=tasks)
    return dataclasses.replace(config, levels=levels)


def test_hip_strategy_turns_the_upper_body_while_the_zmp_stays_on_the_edge():
    """Talos standing, the whole body moving forward at 0.5 m/s: the DCM is 15 cm ahead,
    beyond the toes.  Without the hip strategy the guard puts the ZMP on the polygon's
    front edge and the CoM decelerates as much as that allows; with it the ZMP stays on
    the same edge, the CoM decelerates by ``hip`` more and the angular momentum rate
    makes up the difference (``x_ddot + L_dot_y / (m h)`` unchanged), with the torso and
    base attitude tasks left out of the tick."""
    robot = load_robot("talos", fresh=False)
    q, v = robot.q_ref.copy(), np.zeros(robot.nv)
    v[0] = 0.5
    base = load_wbc_config(robot=robot.name)
    out = {}
    for hip_acc in (0.0, 3.5):
        ctrl = WholeBodyController(robot, _with_com_hip(base, hip_acc))
        ctrl.reset(q, v)
        result = ctrl.cycle(q, v)
        assert result.status == "ok", result.reason
        assert independent_dynamics_residual(robot, q, v, result) < 1e-6
        st = ctrl.state
        z0 = min(st.placement(fid).translation[2] for fid in robot.foot_frame_ids.values())
        h = st.com[2] - z0
        com_acc = st.Jcom @ result.a + st.com_drift
        L_dot = st.Ag[3:] @ result.a + st.hg_drift[3:]
        zmp = _contact_zmp(robot, q, result.wrenches, z0)
        _, _, guard_polygon = ctrl._guard_polygon()
        assert abs(geometry.signed_distance(guard_polygon, zmp)) < 0.01  # at the front edge
        assert zmp[0] > st.com[0] + 0.05
        out[hip_acc] = (com_acc, L_dot, ctrl._hip, result, robot.mass * h, zmp)
    com0, L0, hip0, res0, mh, zmp0 = out[0.0]
    com1, L1, hip1, res1, _, zmp1 = out[3.5]
    assert np.linalg.norm(zmp1 - zmp0) < 2e-3  # the same ZMP with and without the hip strategy
    assert hip0 is None and "torso" in res0.task_residuals
    assert hip1 is not None and "torso" not in res1.task_residuals and "base" not in res1.task_residuals
    assert hip1[0] < -1.0 and abs(np.linalg.norm(hip1) - 3.5) < 1e-9  # capped at hip_acc
    # the ZMP rows' combination is the same (the ZMP is where the guard put it) ...
    assert abs((com1[0] + L1[1] / mh) - (com0[0] + L0[1] / mh)) < 0.02
    # ... and the CoM decelerates more, by at least half of ``hip`` (in this first tick
    # the level's constraints hold the rest back), the angular momentum rate making up for it
    assert com1[0] - com0[0] < 0.5 * hip1[0]
    assert L1[1] - L0[1] == pytest.approx(-mh * (com1[0] - com0[0]), rel=0.05)


def test_on_one_foot_the_guard_keeps_the_zmp_where_the_ankle_holds_the_weight():
    """G1 on its right foot, moving forward at 0.5 m/s: the DCM is far beyond the toe.  The
    guard's ZMP stops where the 35 N m ankle pitch holds the 327 N (0.107 m ahead of the
    ankle; the sole reaches 0.12), so the QP makes it without pressing the other foot down;
    on both feet the guard reaches the toes."""
    robot = load_robot("g1", fresh=False)
    q, v = robot.q_ref.copy(), np.zeros(robot.nv)
    v[0] = 0.5
    ctrl = WholeBodyController(robot, load_wbc_config(robot=robot.name))
    ctrl.reset(q, v)
    ankle_x = robot.sole_placement("right", q).translation[0]
    margin = ctrl.config.safety.support_margin
    _, _, both = ctrl._guard_polygon()
    toe = ankle_x + robot.feet["right"].sole.x_max
    assert toe - margin <= both[:, 0].max() < toe
    ctrl.set_contacts({"left": False})
    for _ in range(int(ctrl.config.contacts.transition_time / ctrl.config.control_period) + 2):
        result = ctrl.cycle(q, v)
    assert not ctrl.contacts["left"].active and ctrl.contacts["right"].active
    held, joint = robot.load_bearing_sole("right")
    assert joint == "right_ankle_pitch_joint" and held.x_max == pytest.approx(0.107)
    _, _, one = ctrl._guard_polygon()
    assert ankle_x + held.x_max - margin <= one[:, 0].max() < ankle_x + held.x_max < both[:, 0].max()
    assert result.status == "ok", result.reason
    assert independent_dynamics_residual(robot, q, v, result) < 1e-6
    z0 = robot.sole_placement("right", q).translation[2]
    zmp = _contact_zmp(robot, q, result.wrenches, z0)
    assert abs(zmp[0] - one[:, 0].max()) < 2e-3  # on the held front edge


def test_hip_strategy_config_is_validated():
    with pytest.raises(ConfigError, match="hip_acc"):
        TaskConfig(type="com", kp=1.0, hip_acc=2.0).validate()
    with pytest.raises(ConfigError, match="max_ang_acc"):
        TaskConfig(type="com", kp=1.0, max_ang_acc=2.0).validate()
    TaskConfig(type="com", kp=1.0, zmp=True, hip_acc=2.0).validate()


def test_config_errors_name_file_key_and_suggestion(tmp_path):
    src = load_wbc_config.__globals__["default_path"]().read_text()
    bad = tmp_path / "wbc.yaml"
    bad.write_text(src.replace("transition_time:", "transiton_time:"))
    with pytest.raises(ConfigError) as info:
        load_wbc_config(bad)
    msg = str(info.value)
    assert str(bad) in msg and "transiton_time" in msg and "did you mean 'transition_time'" in msg

    bad.write_text(src.replace("com: {type: com, weight: 1.0", "com: {type: com, weight: -1.0"))
    with pytest.raises(ConfigError, match=r"levels\.balance\.tasks\.com\.weight' must be >= 0"):
        load_wbc_config(bad)

    bad.write_text(src.replace("kp: 400.0", "kp: -400.0", 1))
    with pytest.raises(ConfigError, match=r"kp' must be >= 0"):
        load_wbc_config(bad)

    bad.write_text(src.replace("mu: null", "mu: 0.0"))
    with pytest.raises(ConfigError, match=r"contacts\.mu' must be > 0"):
        load_wbc_config(bad)

    bad.write_text(src.replace("type: posture", "type: postur"))
    with pytest.raises(ConfigError, match="must be one of"):
        load_wbc_config(bad)


def test_runtime_changes_are_validated():
    robot = load_robot("g1", fresh=False)
    ctrl = WholeBodyController(robot)
    with pytest.raises(ConfigError, match="weight must be >= 0"):
        ctrl.set_weight("posture", -1.0)
    with pytest.raises(ConfigError, match="did you mean 'posture'"):
        ctrl.set_weight("postur", 1.0)
    with pytest.raises(ValueError, match="must be > 0"):
        ctrl.set_mu(0.0)
    ctrl.set_weight("posture", 2.0)
    assert ctrl.tasks["posture"].weight == 2.0


def _finite_and_bounded(robot, result):
    return np.all(np.isfinite(result.tau)) and np.all(np.abs(result.tau) <= robot.tau_max)


def test_fallback_low_friction_and_com_target_outside_support():
    robot = load_robot("talos", fresh=False)
    ctrl = WholeBodyController(robot, mu=0.05)
    q, v = robot.q_ref.copy(), np.zeros(robot.nv)
    outside = ctrl.tasks["com"].pos + [0.0, 0.25, 0.0]  # feet at +-0.085 m: 10 cm past the left sole edge
    result = ctrl.cycle(q, v, reference=Reference(com_pos=outside))
    assert _finite_and_bounded(robot, result)
    reported = " ".join(result.warnings) + result.reason
    assert "limited" in reported


def test_fallback_com_target_100m_up():
    robot = load_robot("talos", fresh=False)
    ctrl = WholeBodyController(robot)
    q, v = robot.q_ref.copy(), np.zeros(robot.nv)
    target = ctrl.tasks["com"].pos.copy()
    target[2] = 100.0
    result = ctrl.cycle(q, v, reference=Reference(com_pos=target))
    assert _finite_and_bounded(robot, result)
    assert any("clamped" in w for w in result.warnings)


def test_fallback_ladder_reuse_then_damping_when_the_qp_keeps_failing():
    robot = load_robot("g1")
    ctrl = WholeBodyController(robot)
    q, v = robot.q_ref.copy(), np.zeros(robot.nv)
    v[6:] = 0.1
    first = ctrl.cycle(q, v)
    assert first.ok
    # A corrupted task (NaN CoM target written past the validated reference API) makes
    # every solve of the first level fail.
    statuses = []
    ctrl.tasks["com"].pos[1] = np.nan
    # reuse, then the blend toward damping (max_torque_rate x dt per tick), then damping
    max_step = ctrl.config.safety.max_torque_rate * ctrl.config.control_period
    blend_ticks = int(np.ceil(np.abs(first.tau).max() / max_step)) + 1
    for _ in range(ctrl.config.safety.max_reuse_ticks + blend_ticks):
        result = ctrl.cycle(q, v)
        assert _finite_and_bounded(robot, result), result.reason
        assert result.reason
        statuses.append(result.status)
    # Reuse the last torques for a bounded number of ticks, then damping: never an
    # exception, never the last torque forever.
    assert statuses[: ctrl.config.safety.max_reuse_ticks] == ["reused"] * ctrl.config.safety.max_reuse_ticks
    assert statuses[-1] == "damping"
    kd = robot.safe_damping(ctrl.config.control_period)
    np.testing.assert_allclose(ctrl.cycle(q, v).tau, np.clip(-kd * v[6:], -robot.tau_max, robot.tau_max))


def test_joint_position_look_ahead_gives_way_when_the_hard_rows_are_infeasible():
    """Every joint at a stop on both sides (the look-ahead lets none move) with torque for no
    more than 1 N m: standing still is impossible, sagging is not.  The ladder drops the
    joint position look-ahead for the tick ("relaxed", named) instead of replaying old
    torques; the solution is a valid one of the remaining rows (dynamics, torque limits)."""
    robot = load_robot("g1", fresh=False)
    ctrl = WholeBodyController(robot)
    q, v = robot.q_ref.copy(), np.zeros(robot.nv)
    assert ctrl.cycle(q, v).ok
    ctrl._q_lower[:] = ctrl._q_upper[:] = q[7:]
    ctrl._tau_bound[:] = 1.0
    result = ctrl.cycle(q, v)
    assert result.status == "relaxed", result.reason
    assert result.reason.startswith("level 1 QP: infeasible (daqp); joint position limits dropped")
    # a lower level solved within DEGENERATE_MARGIN (row-normalized, reported approximate) may
    # pass a bound by that margin: a few mN m here (the controller's own limit is 1e-2 N m;
    # its output is clipped to the robot's limits)
    overshoot = float(np.abs(result.tau).max()) - 1.0
    assert overshoot <= 1e-6 or (result.approximate_levels > 0 and overshoot <= 1e-2), overshoot
    assert np.abs(result.a[6:]).max() > 0.1  # the joints move: the dropped rows
    assert independent_dynamics_residual(robot, q, v, result) < 1e-6
    for side, c in ctrl.contacts.items():
        assert c.check_wrench(result.wrenches[side], tol=1e-3) == []
    ctrl._q_lower[:], ctrl._q_upper[:] = robot.q_lower, robot.q_upper
    ctrl._tau_bound[:] = robot.tau_max - 1e-4
    assert ctrl.cycle(q, v).ok  # the limits back: solved in full


def test_non_finite_state_is_rejected_before_any_solve():
    robot = load_robot("g1", fresh=False)
    ctrl = WholeBodyController(robot)
    q, v = robot.q_ref.copy(), np.zeros(robot.nv)
    v[10] = 0.5
    q[9] = np.nan
    result = ctrl.cycle(q, v)
    assert result.status == "damping"
    assert robot.joint_names[2] in result.reason  # q[9] is the third joint
    assert np.all(np.isfinite(result.tau))
    v[12] = np.inf
    result = ctrl.cycle(robot.q_ref.copy(), v)
    assert result.status == "damping" and np.all(np.isfinite(result.tau))


def test_contact_removal_ramps_the_force_down():
    robot = load_robot("talos", fresh=False)
    ctrl = WholeBodyController(robot)
    q, v = robot.q_ref.copy(), np.zeros(robot.nv)
    fz = []
    ctrl.cycle(q, v)
    ctrl.set_contacts({"left": False})
    for _ in range(80):
        r = ctrl.cycle(q, v)
        fz.append(r.wrenches["left"][2])
    T = ctrl.config.contacts.transition_time
    n_ramp = int(round(T / ctrl.config.control_period))
    assert fz[0] > 50.0  # still loaded at the start of the ramp
    assert np.all(np.diff(fz[: n_ramp - 1]) <= 1e-6)  # monotonically unloading
    assert abs(fz[-1]) < 1e-9 and not r.contacts["left"]


def _at_offset(a, offset):
    """Copy of ``a`` whose data starts ``offset`` bytes past a 64-byte boundary."""
    buf = np.empty(a.size + 8)
    start = (offset - buf.ctypes.data % 64) % 64 // 8
    view = buf[start : start + a.size].reshape(a.shape)
    view[...] = a
    assert view.ctypes.data % 64 == offset
    return view


def test_qp_result_does_not_depend_on_heap_addresses():
    """The same level QP, solved by QP objects made at different heap states and with its
    inputs at different alignments, gives bitwise-identical results (proxsuite's AVX2 and
    AVX-512 builds do not: fresh processes running the same seeded walk diverged)."""
    from whole_body_control.hqp import HierarchicalQP

    rng = np.random.default_rng(1)
    n, m = 37, 61
    A = rng.normal(size=(n + 5, n))
    H = A.T @ A + 1e-3 * np.eye(n)
    g = rng.normal(size=n)
    C = rng.normal(size=(m, n))
    C /= np.linalg.norm(C, axis=1, keepdims=True)
    lo, hi = np.full(m, -0.3), np.full(m, 0.2)
    results = []
    keep = []
    for k in range(24):
        keep.append(np.empty(1 + 5 * k))  # moves where the next QP object's workspace lands
        qp = HierarchicalQP()._qp(0, n, m)
        off = 16 * (k % 4)
        args = [_at_offset(x, off) for x in (H, g)] + [None, None] + [_at_offset(x, off) for x in (C, lo, hi)]
        qp.init(*args, compute_preconditioner=False)
        qp.solve(_at_offset(np.zeros(n), off), None, None)
        assert qp.results.info.status.name == "PROXQP_SOLVED"
        results.append(qp.results.x.copy())
    assert all(np.array_equal(x, results[0]) for x in results)


def test_cop_margin_shrinks_the_cop_rows_and_rejects_an_empty_region():
    from whole_body_control.config import ContactConfig
    from whole_body_control.contacts import Contact6D

    robot = load_robot("talos")
    sole = robot.feet["left"].sole
    fz = 400.0

    def admissible(margin, cop_x):
        c = Contact6D("left", robot.foot_frame_ids["left"], sole, 0.7, ContactConfig(cop_margin=margin), fz)
        F, lo, hi = c.force_bounds(1.0)
        f = np.array([0.0, 0.0, fz, 0.0, -cop_x * fz, 0.0])  # CoP (x, 0): ty = -x fz
        r = F @ f
        return bool(np.all(r >= lo - 1e-9) and np.all(r <= hi + 1e-9))

    edge = sole.x_max - 0.005
    assert admissible(0.0, edge)  # no margin: up to the edge
    assert not admissible(0.01, edge)  # 1 cm margin: 5 mm from the edge is out
    assert admissible(0.01, sole.x_max - 0.011)
    with pytest.raises(ValueError, match="cop_margin"):
        Contact6D("left", robot.foot_frame_ids["left"], sole, 0.7, ContactConfig(cop_margin=0.5), fz)


def _corner_wrench(points, forces):
    """Net wrench [f, t] at the sole origin of point forces (4, 3) at ``points`` (4, 3)."""
    return np.r_[forces.sum(0), sum(np.cross(p, f) for p, f in zip(points, forces))]


def _corner_lp(corners, mut, w):
    """Whether forces at ``corners`` (4, 3), each in the friction pyramid ``mut``, make wrench ``w``."""
    from scipy.optimize import linprog

    A_eq = np.zeros((6, 12))
    for i, p in enumerate(corners):
        for k in range(3):
            e = np.eye(3)[k]
            A_eq[:3, 3 * i + k], A_eq[3:, 3 * i + k] = e, np.cross(p, e)
    A_ub = []
    for i in range(4):
        for k in (0, 1):
            for sign in (1.0, -1.0):
                row = np.zeros(12)
                row[3 * i + k], row[3 * i + 2] = sign, -mut
                A_ub.append(row)
    lp = linprog(
        np.zeros(12),
        A_ub=np.array(A_ub),
        b_ub=np.zeros(len(A_ub)),
        A_eq=A_eq,
        b_eq=w,
        bounds=[(None, None), (None, None), (0.0, None)] * 4,
    )
    return lp.status == 0


@pytest.mark.parametrize("name", ["talos", "g1"])
def test_contact_rows_are_the_wrench_cone_of_the_sole_corners(name):
    """Every wrench that forces at the corners of the CoP rectangle make (each force in the
    inner friction pyramid) passes the contact rows, and every wrench that passes them is
    made by forces at the sole's corners (a linear program); G1's sole origin is not its
    centre.  The old yaw bound, ``|tz| <= c mu fz * half width`` about the sole origin
    (``c`` = 0.5, 0.15 for G1), let through wrenches no corner forces make: on the toe
    side with a sideways force, the yaw torque about the origin is small and the one about
    the toe corners is not."""
    from whole_body_control.config import ContactConfig
    from whole_body_control.contacts import Contact6D

    robot = load_robot(name)
    sole = robot.feet["left"].sole
    m, mu = 0.01, 0.7
    c = Contact6D("left", robot.foot_frame_ids["left"], sole, mu, ContactConfig(cop_margin=m), 300.0)
    F, lo, hi = c.force_bounds(1.0)
    F = F[:-1]  # the normal force bounds aside
    mut = mu / np.sqrt(2.0)

    def corners(margin):
        xs, ys = (sole.x_min + margin, sole.x_max - margin), (sole.y_min + margin, sole.y_max - margin)
        return np.array([[x, y, 0.0] for x in xs for y in ys])

    rng = np.random.default_rng(3)
    inner = corners(m)
    for _ in range(2000):
        fz = rng.uniform(0.0, 100.0, 4) * (rng.uniform(size=4) < 0.75)
        forces = np.c_[rng.uniform(-1, 1, (4, 2)) * mut * fz[:, None], fz]
        assert np.all(F @ _corner_wrench(inner, forces) <= 1e-9)
    tested = 0
    half = 0.5 * max(sole.x_max - sole.x_min, sole.y_max - sole.y_min)
    while tested < 150:
        w = (
            300.0
            * np.r_[
                rng.uniform(-mut, mut, 2),
                1.0,
                rng.uniform(sole.y_min, sole.y_max),
                -rng.uniform(sole.x_min, sole.x_max),
                rng.uniform(-1, 1) * mut * half,
            ]
        )
        if np.any(F @ w > 0.0):
            continue
        tested += 1
        assert _corner_lp(corners(0.0), mut, w), w
    # toe side, 60 N sideways: some yaw torque within the old bound is out of reach
    fz, x = 300.0, sole.x_max - m
    y_mid = 0.5 * (sole.y_min + sole.y_max)
    c_old = 0.15 if name == "g1" else 0.5
    old_bound = c_old * mu * 0.5 * min(sole.x_max - sole.x_min, sole.y_max - sole.y_min) * fz
    out = [
        w
        for tz in np.linspace(-old_bound, old_bound, 41)
        for w in [np.array([0.0, 60.0, fz, y_mid * fz, -x * fz, tz])]
        if not _corner_lp(corners(0.0), mut, w)
    ]
    assert out, "the old bound admitted only realisable wrenches here"
    assert all(np.any(F @ w > 1e-9) for w in out)


def test_a_row_the_lower_level_cannot_move_keeps_its_infinite_bound_without_nan():
    """Below the first level, an inequality row that the remaining freedom cannot move is
    dropped from that level's QP.  Contact rows have infinite lower bounds: dropping one
    must not compute inf * 0 (NaN, and a RuntimeWarning on every such tick)."""
    import warnings

    from whole_body_control.hqp import HierarchicalQP, Objective

    E, e = np.zeros((0, 3)), np.zeros(0)
    C = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    lower = np.array([-np.inf, -np.inf])  # row 0: fixed by level 1, infinite lower bound
    upper = np.array([2.0, 3.0])  # row 1: stops level 2 (x1 wants 5): the QP path runs
    levels = [
        [Objective("first", np.array([[1.0, 0.0, 0.0]]), np.array([1.0]), 1.0)],
        [Objective("second", np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]), np.array([5.0, 0.0]), 1.0)],
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        sol = HierarchicalQP().solve(E, e, C, lower, upper, levels)
    assert np.allclose(sol.x, [1.0, 3.0, 0.0], atol=1e-6)


def test_recorded_problems_replay_the_same_through_both_solver_backends(tmp_path):
    """G1 standing while its CoM sways: most ticks have active inequalities (the level QPs
    run).  The slowest problems are recorded to a file; replayed, daqp and proxsuite give
    the same solution, which keeps the hard equalities and every inequality.  Every tick is
    kept (the slowest by wall time are not those whose QPs ran when the machine is loaded)."""
    from whole_body_control.hqp import HierarchicalQP, load_recorded
    from whole_body_control.sim import Simulation

    robot = load_robot("g1")
    ctrl = WholeBodyController(robot)
    ticks = 300
    ctrl.hqp.record_hardest(ticks)
    sim = Simulation(robot)
    sim.reset(robot.q_ref)
    ctrl.reset(sim.q, sim.v)
    com0 = ctrl.com_task.pos.copy()
    for k in range(ticks):
        w, t = np.pi, k * sim.timestep
        ctrl.com_task.set_reference(com0 + [0.0, 0.02 * np.sin(w * t), 0.0], [0.0, 0.02 * w * np.cos(w * t), 0.0])
        result = ctrl.cycle(sim.q, sim.v, sim.timestep)
        assert result.ok, result.reason
        sim.step(result.tau)
    sim.close()
    recorded = load_recorded(ctrl.hqp.save_recorded(tmp_path / "hardest.pkl"))
    assert len(recorded) == ticks
    assert [t for t, _ in recorded] == sorted((t for t, _ in recorded), reverse=True)
    cfg = ctrl.config.solver
    solvers = {
        b: HierarchicalQP(cfg.eps_abs, cfg.max_iter, cfg.regularization, backend=b) for b in ("daqp", "proxsuite")
    }
    qp_ran = 0
    for _, problem in recorded:
        E, e, C, lower, upper = problem.E, problem.e, problem.C, problem.lower, problem.upper
        for solver in solvers.values():
            solver.reset()  # no warm start or active set carried over from another problem
        sols = {b: s.solve_problem(problem) for b, s in solvers.items()}
        qp_ran += sols["daqp"].iterations > 0
        for sol in sols.values():
            assert np.abs(E @ sol.x - e).max() < 1e-8
            cx = C @ sol.x
            scale = np.linalg.norm(C, axis=1)
            assert (cx >= lower - 1e-5 * scale).all() and (cx <= upper + 1e-5 * scale).all()
        np.testing.assert_allclose(sols["daqp"].x, sols["proxsuite"].x, atol=1e-4)
        # solved again: last tick's active set as the first guess, the same optimum
        again = solvers["daqp"].solve_problem(problem)
        # (daqp stops at its tolerances: up to 2e-6 seen; the KKT solve agrees with a tight
        # proxsuite solve to 1e-10)
        np.testing.assert_allclose(again.x, sols["daqp"].x, atol=1e-5)
        np.testing.assert_allclose(sols["daqp"].residuals, sols["proxsuite"].residuals, atol=1e-4)
    assert qp_ran >= ticks // 4, f"the recorded problems should exercise the level QPs ({qp_ran} did)"


def test_the_problem_a_tick_built_is_the_one_it_solved(tmp_path):
    """``last_problem()`` is the tick's problem, frozen and named: solved again (also after
    a save and load) it gives the tick's accelerations and wrenches to round-off."""
    from whole_body_control.hqp import HierarchicalQP, load_problem

    robot = load_robot("talos")
    ctrl = WholeBodyController(robot)
    q, v = robot.q_ref.copy(), np.zeros(robot.nv)
    v[6:] = 0.05 * np.sin(np.arange(robot.na))
    ctrl.reset(q)
    ctrl.cycle(q, v)
    ctrl.set_reference(
        Reference(com_pos=ctrl.com_task.pos + [0.01, -0.01, 0.0], contacts={"left": True, "right": False})
    )
    result = ctrl.cycle(q, v)
    assert result.ok, result.reason
    built = ctrl.last_problem()
    assert not built.C.flags.writeable  # a copy: the controller's buffers are reused next tick
    problem = load_problem(built.save(tmp_path / "tick.pkl"))
    names = [n for n, _, _ in problem.inequality_blocks]
    assert names == [
        "torque_limits",
        "contact_left",
        "contact_right",
        "joint_position_limits",
    ]  # right still ramping out
    assert problem.inequality_blocks[-1][2] == problem.C.shape[0]
    text = problem.describe()
    assert "level 1 'balance': com (3 rows" in text and "contact_left" in text
    cfg = ctrl.config.solver
    sol = HierarchicalQP(cfg.eps_abs, cfg.max_iter, cfg.regularization, backend=cfg.backend).solve_problem(problem)
    np.testing.assert_allclose(sol.x[: robot.nv], result.a, rtol=0, atol=1e-12)
    fs = robot.mass * 9.81
    np.testing.assert_allclose(sol.x[robot.nv : robot.nv + 6] * fs, result.wrenches["left"], rtol=0, atol=1e-9)
    # a damping tick builds no problem
    ctrl.latch_damping("test")
    ctrl.cycle(q, v)
    assert ctrl.last_problem() is None


def test_a_clearly_infeasible_level_fails_at_once_without_the_proxsuite_fallback():
    """A level daqp finds infeasible even with its bounds widened by 1e-3 (G1 walking, level
    1, by 75 to 480) fails at once for the controller's fallback ladder: proxsuite took 5
    to 20 ms to say so.  One infeasible by a hair still goes to proxsuite."""
    from whole_body_control.hqp import HierarchicalQP, LevelFailure, Objective

    n = 3
    E, e = np.zeros((0, n)), np.zeros(0)
    C = np.array([[1.0, 0.0, 0.0], [-1.0, 0.0, 0.0]])  # x0 <= upper[0] and x0 >= -upper[1]
    lower = np.array([-np.inf, -np.inf])
    levels = [[Objective("pull", np.eye(n), np.array([1.0, 2.0, -1.0]), 1.0)]]
    hqp = HierarchicalQP(backend="daqp")
    with pytest.raises(LevelFailure, match=r"level 1 QP: infeasible \(daqp\)") as failure:
        hqp.solve(E, e, C, lower, np.array([0.0, -1.0]), levels)  # x0 <= 0 and x0 >= 1
    assert not hqp._qps and failure.value.level == 1 and failure.value.problem is not None
    hqp = HierarchicalQP(backend="daqp")
    with pytest.raises(LevelFailure):
        hqp.solve(E, e, C, lower, np.array([0.0, -1e-4]), levels)  # by 1e-4: proxsuite tries, and fails
    assert hqp._qps
    sol = HierarchicalQP(backend="daqp").solve(E, e, C, lower, np.array([0.0, 0.0]), levels)  # x0 = 0
    np.testing.assert_allclose(sol.x, [0.0, 2.0, -1.0], atol=1e-9)


def test_the_full_rank_shortcut_agrees_with_the_svd_rank():
    """A last level's QP takes its flat directions from an SVD of its rows unless a Cholesky
    factor with a condition estimate shows them of full column rank: the shortcut must never
    say full rank where the SVD finds a null space (it would then leave a flat direction to
    the tiny Tikhonov term), and it should say so for ordinary well-posed rows."""
    from whole_body_control.hqp import _rank, _svd, _well_conditioned

    rng = np.random.default_rng(7)
    said_full = 0
    for trial in range(300):
        d = int(rng.integers(3, 40))
        rows = d + int(rng.integers(0, 25))
        A = rng.standard_normal((rows, d))
        kind = trial % 3
        if kind == 1:  # exactly rank deficient
            A[:, : int(rng.integers(1, d))] = 0.0
            A = A @ np.linalg.qr(rng.standard_normal((d, d)))[0]
        elif kind == 2:  # graded singular values down to 1e-4 .. 1e-12 of the largest
            u, _, vt = np.linalg.svd(A, full_matrices=False)
            A = (u * np.logspace(0, -float(rng.uniform(4, 12)), d)) @ vt
        full = _rank(_svd(A, full=False)[1]) == d
        shortcut = _well_conditioned(A.T @ A)
        assert not shortcut or full, (trial, d, rows)
        said_full += shortcut
        if kind == 0:
            assert shortcut, (trial, d, rows)
    assert said_full >= 100


def test_a_lower_level_daqp_calls_infeasible_is_solved_within_the_degenerate_margin():
    """A level QP recorded from G1 walking, pushed 0.2 m/s sideways (20 unknowns, 92 rows).
    z = 0 keeps every bound (below the first level the bounds are widened around the higher
    levels' solution), yet daqp calls it infeasible (rows tight at z = 0, dependent in the
    remaining freedom) and proxsuite ends at its iteration cap after about 40 ms: the level
    and every level below it were dropped.  Below the first level daqp now solves it again
    with the bounds widened by DEGENERATE_MARGIN: a solution keeping the bounds to that
    margin, better than z = 0, reported approximate.  The first level gets no such
    widening (z = 0 is not known to be feasible there)."""
    from pathlib import Path

    import daqp

    from whole_body_control.hqp import DEGENERATE_MARGIN, HierarchicalQP, LevelFailure

    data = np.load(Path(__file__).parent / "data" / "g1_degenerate_level_qp.npz")
    H, g, C, lower, upper = (data[k] for k in ("H", "g", "C", "lower", "upper"))
    d, m = H.shape[0], C.shape[0]
    assert (lower <= 0.0).all() and (upper >= 0.0).all()
    assert daqp.solve(H, g, C, np.minimum(upper, 1e30), np.maximum(lower, -1e30))[2] == -1
    # the level's rows AZ and residual r with AZ^T AZ = H and -AZ^T r = g
    L = np.linalg.cholesky(H)
    AZ, r = L.T.copy(), -np.linalg.solve(L, g)
    args = (AZ, r, None, np.eye(d), C, np.zeros(m), lower, upper, np.zeros(d), None)
    z, approximate, _ = HierarchicalQP()._solve_qp(1, *args)
    assert approximate == 1
    c = C @ z
    assert (c >= lower - DEGENERATE_MARGIN - 1e-9).all() and (c <= upper + DEGENERATE_MARGIN + 1e-9).all()
    assert 0.5 * z @ H @ z + g @ z < -1e-3 * abs(g).max()  # well below z = 0's objective (0)
    with pytest.raises(LevelFailure):
        HierarchicalQP()._solve_qp(0, *args)
