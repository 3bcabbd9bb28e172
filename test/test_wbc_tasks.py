"""Task Jacobians and drifts (J_dot v) against finite differences through pin.integrate."""

import numpy as np
import pinocchio as pin
import pytest

from whole_body_control.controller import WholeBodyController
from whole_body_control.errors import StateError
from whole_body_control.robot import load_robot
from whole_body_control.state import LOCAL, LWA, KinematicState, RobotState

H = 1e-6


@pytest.fixture(scope="module", params=["talos", "g1"])
def setup(request):
    robot = load_robot(request.param, fresh=False)
    rng = np.random.default_rng(3)
    q = robot.q_ref.copy()
    q[7:] += rng.uniform(-0.2, 0.2, robot.na)
    q[:3] += rng.uniform(-0.1, 0.1, 3)
    q[3:7] = pin.Quaternion(pin.rpy.rpyToMatrix(*rng.uniform(-0.3, 0.3, 3))).coeffs()
    v = rng.normal(0.0, 0.5, robot.nv)
    return robot, q, v


def moved(robot, q, dq):
    return pin.integrate(robot.model, q, dq)


def fd_jacobian(robot, f, q):
    y0 = f(q)
    J = np.zeros((y0.size, robot.nv))
    for i in range(robot.nv):
        dq = np.zeros(robot.nv)
        dq[i] = H
        J[:, i] = (f(moved(robot, q, dq)) - f(moved(robot, q, -dq))) / (2 * H)
    return J


def fd_second(robot, f, q, v, h=1e-4):
    """d^2/dt^2 f(q (+) v t) at t = 0: constant v is zero acceleration in Pinocchio's convention."""
    return (f(moved(robot, q, v * h)) - 2 * f(q) + f(moved(robot, q, -v * h))) / (h * h)


def state_at(robot, q, v=None):
    st = RobotState(robot)
    st.update(q, np.zeros(robot.nv) if v is None else v)
    return st


def test_com_jacobian_and_drift(setup):
    robot, q, v = setup
    st = state_at(robot, q, v)
    J_fd = fd_jacobian(robot, lambda x: state_at(robot, x).com, q)
    np.testing.assert_allclose(st.Jcom, J_fd, atol=1e-6)
    drift_fd = fd_second(robot, lambda x: state_at(robot, x).com, q, v)
    np.testing.assert_allclose(st.com_drift, drift_fd, atol=2e-4)


@pytest.mark.parametrize("which", ["left", "torso"])
def test_frame_jacobian_and_drift_lwa(setup, which):
    robot, q, v = setup
    fid = robot.foot_frame_ids["left"] if which == "left" else robot.model.getFrameId(robot.config.torso_frame)
    st = state_at(robot, q, v)
    J = st.jacobian(fid, LWA)

    def pos(x):
        return state_at(robot, x).placement(fid).translation.copy()

    def rot(x):
        return state_at(robot, x).placement(fid).rotation.copy()

    np.testing.assert_allclose(J[:3], fd_jacobian(robot, pos, q), atol=1e-6)
    # Angular rows: the world angular velocity, log3(R(q+dq) R(q)^T) / dq.
    R0 = rot(q)
    J_ang = np.zeros((3, robot.nv))
    for i in range(robot.nv):
        dq = np.zeros(robot.nv)
        dq[i] = H
        J_ang[:, i] = pin.log3(rot(moved(robot, q, dq)) @ R0.T) / H
    np.testing.assert_allclose(J[3:], J_ang, atol=1e-5)
    # Drift: classical acceleration at a = 0.
    drift = st.drift(fid, LWA)
    np.testing.assert_allclose(drift[:3], fd_second(robot, pos, q, v), atol=2e-4)
    h = 1e-5

    def omega(x):
        s = state_at(robot, x, v)
        return s.velocity(fid, LWA)[3:]

    ang_fd = (omega(moved(robot, q, v * h)) - omega(moved(robot, q, -v * h))) / (2 * h)
    np.testing.assert_allclose(drift[3:], ang_fd, atol=2e-4)


def test_contact_local_jacobian_and_drift(setup):
    robot, q, v = setup
    fid = robot.foot_frame_ids["right"]
    st = state_at(robot, q, v)
    J = st.jacobian(fid, LOCAL)
    # LOCAL linear velocity = R^T d(pos)/dt
    R = st.placement(fid).rotation
    J_pos = fd_jacobian(robot, lambda x: state_at(robot, x).placement(fid).translation.copy(), q)
    np.testing.assert_allclose(J[:3], R.T @ J_pos, atol=1e-6)
    h = 1e-5

    def vel_local(x):
        return state_at(robot, x, v).velocity(fid, LOCAL)

    # Classical acceleration in LOCAL: d/dt (R^T p_dot) + w x (R^T p_dot) ... compare the spatial form:
    # a_classical_local = R^T d/dt(p_dot world) for the linear part.
    def pdot_world(x):
        s = state_at(robot, x, v)
        return s.velocity(fid, LWA)[:3]

    pddot = (pdot_world(moved(robot, q, v * h)) - pdot_world(moved(robot, q, -v * h))) / (2 * h)
    np.testing.assert_allclose(st.drift(fid, LOCAL)[:3], R.T @ pddot, atol=2e-4)
    assert vel_local(q).shape == (6,)


def test_angular_momentum_rows(setup):
    robot, q, v = setup
    st = state_at(robot, q, v)
    np.testing.assert_allclose(st.Ag @ v, st.hg, atol=1e-9)
    h = 1e-5

    def hg(x):
        return state_at(robot, x, v).hg

    dh_fd = (hg(moved(robot, q, v * h)) - hg(moved(robot, q, -v * h))) / (2 * h)
    np.testing.assert_allclose(st.hg_drift, dh_fd, atol=5e-4 * max(1.0, np.abs(dh_fd).max()))


def test_task_rows_are_pd_laws(setup):
    """Each task's b equals a_ref + kp e + kd de - drift for its own Jacobian."""
    robot, q, v = setup
    ctrl = WholeBodyController(robot)
    st = ctrl.state
    st.update(q, v)
    com = ctrl.tasks["com"]
    A, b = com.rows(st)
    expected = com.acc + com.kp * (com.pos - st.com) + com.kd * (com.vel - st.vcom) - st.com_drift
    np.testing.assert_allclose(b, expected)
    np.testing.assert_allclose(A, st.Jcom)
    posture = ctrl.tasks["posture"]
    A, b = posture.rows(st)
    np.testing.assert_allclose(A @ v, v[6:])
    np.testing.assert_allclose(b, posture.kp * (posture.q_ref - q[7:]) - posture.kd * v[6:])


def test_the_kinematic_state_is_the_full_states_com_and_soles_to_the_bit(setup):
    """The walker node reads the CoM and the soles from a KinematicState (no dynamics): the
    numbers the in-process walker reads from the controller's RobotState, bit for bit."""
    robot = setup[0]
    full, light = RobotState(robot), KinematicState(robot)
    rng = np.random.default_rng(3)
    for _ in range(20):
        q = robot.q_ref.copy()
        q[:3] += rng.standard_normal(3)
        q[3:7] = pin.Quaternion(pin.SE3.Random().rotation).coeffs()
        q[7:] += 0.3 * rng.standard_normal(robot.na)
        v = rng.standard_normal(robot.nv)
        full.update(q, v)
        light.update(q, v)
        assert np.array_equal(light.com, full.com) and np.array_equal(light.vcom, full.vcom)
        for frame in robot.foot_frame_ids.values():
            assert np.array_equal(light.placement(frame).homogeneous, full.placement(frame).homogeneous)
    q[7 + 3] = np.nan
    with pytest.raises(StateError, match=f"non-finite state in: {robot.joint_names[3]}$"):
        light.update(q, v)
