"""MuJoCo simulation: conventions, kinematics, contacts, sensors and pushes,
checked against Pinocchio and Newton's laws (real MuJoCo, real Pinocchio)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import mujoco
import numpy as np
import pinocchio as pin
import pytest

from whole_body_control import yaml_config
from whole_body_control.errors import ConfigError, SimulationUnstable
from whole_body_control.robot import Armature, RobotModel, available_robots, load_config, load_robot, with_overrides
from whole_body_control.sim import (
    SimConfig,
    Simulation,
    q_to_qpos,
    qpos_to_q,
    qvel_to_v,
    v_to_qvel,
)
from whole_body_control.sim.consistency import random_configuration

ROBOTS = available_robots()
G = 9.81


@pytest.fixture(scope="module", params=ROBOTS)
def sim(request) -> Simulation:
    """One simulation per robot; every test resets it."""
    simulation = Simulation(load_robot(request.param, fresh=False))
    yield simulation
    simulation.close()


def pd_gains(sim: Simulation) -> tuple[np.ndarray, np.ndarray]:
    """Joint PD gains that are stiff yet stable with explicit 1 ms steps:
    ``kp = M_ii wn^2``, ``kd = 2 M_ii wn``, capped by the effective inertia
    ``1 / (M^-1)_ii`` (the distal joints' limit)."""
    robot = sim.robot
    data = robot.model.createData()
    m_eff = 1.0 / np.diag(pin.computeMinverse(robot.model, data, robot.q_ref))[6:]
    m_diag = np.diag(pin.crba(robot.model, data, robot.q_ref))[6:]
    dt, wn = sim.timestep, 40.0
    return np.minimum(m_diag * wn**2, 0.5 * m_eff / dt**2), np.minimum(2 * m_diag * wn, 0.5 * m_eff / dt)


def hold(sim: Simulation, kp: np.ndarray, kd: np.ndarray) -> np.ndarray:
    q, v = sim.q, sim.v
    return kp * (sim.robot.q_ref[7:] - q[7:]) - kd * v[6:]


def com_velocity(sim: Simulation) -> np.ndarray:
    """Whole-body CoM velocity [m/s] from Pinocchio with the simulated (q, v)."""
    robot = sim.robot
    data = robot.model.createData()
    pin.centerOfMass(robot.model, data, sim.q, sim.v)
    return data.vcom[0].copy()


def lift(robot, height: float = 1.0) -> np.ndarray:
    q = robot.q_ref.copy()
    q[2] += height
    return q


# -- conventions -------------------------------------------------------------------


def test_q_v_round_trip(sim):
    rng = np.random.default_rng(1)
    for _ in range(5):
        q = random_configuration(sim.robot, rng)
        v = rng.normal(size=sim.robot.nv)
        qpos = q_to_qpos(q, sim.index)
        np.testing.assert_allclose(qpos_to_q(qpos, sim.index), q, atol=1e-15)
        np.testing.assert_allclose(qvel_to_v(v_to_qvel(v, qpos, sim.index), qpos, sim.index), v, atol=1e-12)
        # quaternion order: MuJoCo w first, Pinocchio w last
        assert qpos[3] == q[6]


def test_velocity_convention_matches_pinocchio_finite_difference(sim):
    """A MuJoCo qvel integrated by MuJoCo over dt equals Pinocchio's integration of v."""
    rng = np.random.default_rng(2)
    model, data = sim.model, sim.data
    q = random_configuration(sim.robot, rng)
    sim.reset(q)
    data.qvel[:] = rng.normal(size=model.nv)
    v = sim.v
    dt = 1e-6
    qpos_next = data.qpos.copy()
    mujoco.mj_integratePos(model, qpos_next, data.qvel, dt)
    v_fd = pin.difference(sim.robot.model, sim.q, qpos_to_q(qpos_next, sim.index)) / dt
    np.testing.assert_allclose(v_fd, v, atol=1e-5)
    # the sole frame's velocity in its own frame agrees with MuJoCo's site velocity
    mujoco.mj_forward(model, data)
    pin_data = sim.robot.model.createData()
    pin.forwardKinematics(sim.robot.model, pin_data, sim.q, v)
    for side in ("left", "right"):
        nu = pin.getFrameVelocity(sim.robot.model, pin_data, sim.robot.foot_frame_ids[side], pin.LOCAL)
        res = np.zeros(6)  # [angular, linear] in the site frame
        mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_SITE, sim.sole_sites[side], res, 1)
        np.testing.assert_allclose(res[3:], nu.linear, atol=1e-9)
        np.testing.assert_allclose(res[:3], nu.angular, atol=1e-9)


def test_forward_kinematics_soles_agree(sim):
    rng = np.random.default_rng(3)
    for _ in range(5):
        q = random_configuration(sim.robot, rng)
        sim.reset(q)
        for side in ("left", "right"):
            oMf = sim.robot.sole_placement(side, q)
            mj = sim.sole_placement(side)
            np.testing.assert_allclose(mj.translation, oMf.translation, atol=1e-9)
            np.testing.assert_allclose(mj.rotation, oMf.rotation, atol=1e-9)


def test_reset_default_is_reference_posture_at_rest(sim):
    sim.reset()
    np.testing.assert_allclose(sim.q, sim.robot.q_ref, atol=1e-15)
    assert np.all(sim.v == 0.0) and sim.time == 0.0
    assert sim.total_mass() == pytest.approx(sim.robot.mass, rel=1e-12)


# -- input validation -------------------------------------------------------------


def test_step_rejects_bad_torques(sim):
    sim.reset()
    with pytest.raises(ValueError, match=r"tau must have shape"):
        sim.step(np.zeros(sim.robot.na + 1))
    tau = np.zeros(sim.robot.na)
    tau[3] = np.nan
    with pytest.raises(ValueError, match=r"tau is not finite at indices \[3\]"):
        sim.step(tau)
    assert sim.time == 0.0
    with pytest.raises(ValueError, match="unknown body"):
        sim.push("no_such_link", np.zeros(3), 0.1)


def test_motors_are_mapped_by_name_and_clipped(sim):
    """A torque on joint i moves joint i (gravity off, floating): name mapping, gear 1,
    and the motor clips at tau_max."""
    sim.reset(lift(sim.robot))
    sim.model.opt.gravity[:] = 0.0
    try:
        i = sim.robot.na // 2
        tau = np.zeros(sim.robot.na)
        tau[i] = 10.0 * sim.robot.tau_max[i]
        sim.step(tau)
        a = sim.v[6:] / sim.timestep
        assert np.argmax(np.abs(a)) == i
        assert sim.data.actuator_force[sim.index.actuator[i]] == pytest.approx(sim.robot.tau_max[i])
    finally:
        sim.model.opt.gravity[:] = (0.0, 0.0, -G)


# -- external forces --------------------------------------------------------------


def test_an_unstable_step_is_an_error_not_a_silent_restart(sim):
    sim.reset()
    sim.step(np.zeros(sim.robot.na))
    sim.data.qvel[-1] = 1e12  # [rad/s]: MuJoCo's accelerations overflow, it resets its state
    last = sim.model.joint(sim.model.dof_jntid[sim.model.nv - 1]).name
    match = rf"unstable after t = 0\.0010 s .*joint '.*before the step: {last} .* 1e\+12"
    with pytest.raises(SimulationUnstable, match=match):
        sim.step(np.zeros(sim.robot.na), 2)
    # the state before the step, not MuJoCo's reset one
    assert sim.time == pytest.approx(0.001) and sim.data.qvel[-1] == 1e12
    np.testing.assert_allclose(sim.q[:3], sim.robot.q_ref[:3], atol=0.01)
    with pytest.raises(SimulationUnstable):  # nothing left to simulate
        sim.step(np.zeros(sim.robot.na))
    sim.reset()  # a reset clears it
    sim.step(np.zeros(sim.robot.na))


def test_the_robots_armature_is_mujocos():
    """MuJoCo's joints carry the robot file's rotor inertias (``armature``), as Pinocchio's
    mass matrix does, plus ``SimConfig.joint_armature``."""
    robot = load_robot("g1", fresh=False)
    assert robot.armature.min() > 0.003
    for extra in (0.0, 0.002):
        simulation = Simulation(robot, SimConfig(visual_meshes=False, joint_armature=extra))
        try:
            dofs = [simulation.model.joint(n).dofadr[0] for n in robot.joint_names]
            np.testing.assert_allclose(simulation.model.dof_armature[dofs], robot.armature + extra, rtol=1e-12)
        finally:
            simulation.close()


def test_the_safe_damping_calms_the_light_joints_in_mujoco():
    """G1 without its rotor inertias (``armature``: its wrists and ankle rolls as light as
    the URDF makes them, as a robot file without them would be) under ``-kd v`` from random
    joint speeds: with the configured ``kd_safe`` (3 N m s) held over a 1 ms step they flap
    at up to 60 rad/s between the torque limits; with ``safe_damping`` nothing moves faster
    than the collapse under gravity (a few rad/s)."""
    config, source = load_config("g1")
    robot = RobotModel(with_overrides(config, armature=Armature()), source)
    simulation = Simulation(robot)
    rng = np.random.default_rng(0)
    v = np.zeros(robot.nv)
    v[6:] = rng.normal(0.0, 0.3, robot.na)
    try:
        peaks = []
        for kd in (robot.kd_safe, robot.safe_damping(simulation.timestep)):
            simulation.reset(robot.q_ref, v)
            peak = 0.0
            for _ in range(50):
                simulation.step(-kd * simulation.v[6:])
                peak = max(peak, float(np.abs(simulation.v[6:]).max()))
            peaks.append(peak)
    finally:
        simulation.close()
    assert peaks[0] > 20.0  # the test can fail: the configured gains, explicit, do
    assert peaks[1] < 3.0


def test_push_applies_the_impulse(sim):
    """Floating without gravity: the CoM momentum changes by F * duration (to the
    time discretisation of the internal motion, well below one step's 2 %)."""
    sim.reset(lift(sim.robot))
    sim.model.opt.gravity[:] = 0.0
    try:
        force, duration = np.array([30.0, -20.0, 10.0]), 0.05
        sim.push(sim.robot.config.torso_frame, force, duration)
        body = sim.model.body(sim.robot.config.torso_frame).id
        pushed_steps = 0
        for _ in range(80):
            sim.step(np.zeros(sim.robot.na))
            pushed_steps += bool(sim.data.xfrc_applied[body].any())
        assert pushed_steps == round(duration / sim.timestep)
        np.testing.assert_allclose(sim.total_mass() * com_velocity(sim), force * duration, rtol=1e-2)
        assert not sim.data.xfrc_applied.any()

        sim.reset(lift(sim.robot))
        dv = np.array([0.3, -0.2])
        sim.push_velocity_change(sim.robot.config.torso_frame, dv, duration=0.1)
        for _ in range(100):
            sim.step(np.zeros(sim.robot.na))
        np.testing.assert_allclose(com_velocity(sim)[:2], dv, rtol=1e-2)
    finally:
        sim.model.opt.gravity[:] = (0.0, 0.0, -G)


# -- contacts and sensors --------------------------------------------------------


def test_foot_wrenches_satisfy_newton(sim):
    """Standing under joint PD: the impulse of the foot wrenches equals the change of
    momentum plus the weight's impulse, and only the feet touch the floor."""
    sim.reset()
    kp, kd = pd_gains(sim)
    for _ in range(50):
        sim.step(hold(sim, kp, kd))
    mass, dt = sim.total_mass(), sim.timestep
    v0, impulse = com_velocity(sim), np.zeros(3)
    for _ in range(50):
        sim.step(hold(sim, kp, kd))
        for side, wrench in sim.foot_wrenches().items():
            rot = sim.sole_placement(side).rotation  # placement used by the step just taken
            impulse += rot @ wrench[:3] * dt
        assert sim.non_foot_ground_contact() is None
    expected = mass * (com_velocity(sim) - v0) + np.array([0.0, 0.0, mass * G * 50 * dt])
    np.testing.assert_allclose(impulse, expected, atol=2e-3 * mass * G * 50 * dt)
    assert all(sim.foot_contacts().values())
    # the force/torque sensors at the soles see the same wrench (force of the foot on the ground)
    # (foot_wrenches reads them; the contact forces summed give the same)
    from_contacts = sim._ground_contact_forces().wrenches
    for side, wrench in sim.foot_wrenches().items():
        np.testing.assert_allclose(sim.data.sensor(f"{side}_force").data, -wrench[:3], atol=1e-12)
        np.testing.assert_allclose(from_contacts[side], wrench, atol=1e-6 * mass)
    # the loads and the ZMP (read from the sensors) are those of the contact forces
    c = sim._ground_contact_forces()
    assert sim.foot_contacts() == {side: c.load[side] > 1e-6 for side in ("left", "right")}
    zmp = np.array([-c.total_torque[1], c.total_torque[0]]) / c.total_force[2]
    np.testing.assert_allclose(sim.measured_zmp(), zmp, atol=1e-9)


def test_sole_corners_are_the_sole_rectangle_at_the_sole_site(sim):
    """``sole_corners`` (the support polygon's input) is the robot's sole rectangle placed at
    the simulated sole site, in the order of ``Sole.corners`` (counter-clockwise)."""
    sim.reset()
    kp, kd = pd_gains(sim)
    for _ in range(20):
        sim.step(hold(sim, kp, kd))
    for side in ("left", "right"):
        oMf = sim.sole_placement(side)
        expected = (oMf.rotation @ sim.robot.feet[side].sole.corners().T).T[:, :2] + oMf.translation[:2]
        np.testing.assert_allclose(sim.sole_corners(side), expected, atol=1e-15)


def test_talos_stands_on_its_sole_boxes():
    """Talos held by joint PD settles: the feet carry m g, the ZMP is between the
    feet, the IMU reads gravity."""
    robot = load_robot("talos", fresh=False)
    sim = Simulation(robot, SimConfig(visual_meshes=False))
    kp, kd = pd_gains(sim)
    for _ in range(600):
        sim.step(hold(sim, kp, kd))
    wrenches = sim.foot_wrenches()
    assert wrenches["left"][2] + wrenches["right"][2] == pytest.approx(robot.mass * G, rel=0.01)
    assert wrenches["left"][2] > 0.3 * robot.mass * G and wrenches["right"][2] > 0.3 * robot.mass * G
    zmp = sim.measured_zmp()
    sole = robot.feet["left"].sole
    left, right = sim.sole_placement("left").translation, sim.sole_placement("right").translation
    assert sole.x_min + left[0] < zmp[0] < sole.x_max + left[0]
    assert right[1] + sole.y_min < zmp[1] < left[1] + sole.y_max
    imu = sim.imu()
    rot = pin.Quaternion(imu.orientation[3], *imu.orientation[:3]).matrix()
    # quasi-static (PD is no balance controller: Talos leans slowly), so a ~ 0
    np.testing.assert_allclose(imu.linear_acceleration, rot.T @ [0.0, 0.0, G], atol=0.25)
    assert np.linalg.norm(imu.gyro) < 0.05
    assert sim.base_height() > robot.config.fall_height
    sim.reset(lift(robot))
    assert sim.measured_zmp() is None and not any(sim.foot_contacts().values())


def test_imu_in_free_fall(sim):
    """Falling freely, the accelerometer reads 0 and the gyro the base angular velocity."""
    rng = np.random.default_rng(4)
    v = np.zeros(sim.robot.nv)
    v[3:6] = rng.normal(size=3)
    sim.reset(lift(sim.robot), v)
    for _ in range(20):
        sim.step(np.zeros(sim.robot.na))
    imu = sim.imu()
    np.testing.assert_allclose(imu.gyro, sim.v[3:6], atol=0.05 * np.linalg.norm(v[3:6]) + 1e-3)
    # the free-fall specific force is the joints' internal reaction only: small
    assert np.linalg.norm(imu.linear_acceleration) < 0.5
    q = sim.q
    np.testing.assert_allclose(np.abs(imu.orientation @ q[3:7]), 1.0, atol=1e-2)


def test_unactuated_robot_falls_and_fall_is_detected(sim):
    sim.reset()
    touched = None
    for _ in range(3000):
        sim.step(np.zeros(sim.robot.na))
        touched = sim.non_foot_ground_contact()
        if touched is not None:
            break
    assert touched is not None, "the robot never touched the ground with anything but its feet"
    assert touched != "world"
    assert sim.base_height() < sim.robot.q_ref[2]


def test_a_platform_is_ground_for_the_feet_the_zmp_and_the_fall_checks():
    """Talos on a 5 cm platform (and then collapsing on it): the soles load it, the ZMP is
    measured on it, the base height is above it, a non-foot body on it is a contact."""
    robot = load_robot("talos", fresh=False)
    h = 0.05
    config = SimConfig(visual_meshes=False, platforms=((-1.0, h),))
    assert config.ground_height(0.0, 0.0) == h and config.ground_height(-1.5, 0.0) == 0.0
    sim = Simulation(robot, config)
    q = robot.q_ref.copy()
    q[2] += h
    sim.reset(q)
    kp, kd = pd_gains(sim)
    for _ in range(300):
        sim.step(hold(sim, kp, kd))
    assert all(sim.foot_contacts(1.0).values())
    wrenches = sim.foot_wrenches()
    assert wrenches["left"][2] + wrenches["right"][2] == pytest.approx(robot.mass * G, rel=0.05)
    assert sim.measured_zmp() is not None and sim.non_foot_ground_contact() is None
    assert sim.base_height() == pytest.approx(robot.q_ref[2] - 0.0, abs=0.03)
    touched = None
    for _ in range(3000):
        sim.step(np.zeros(robot.na))
        touched = sim.non_foot_ground_contact()
        if touched is not None:
            break
    assert touched is not None and touched != "world"
    with pytest.raises(ConfigError, match="platform"):
        SimConfig(platforms=((0.5, -0.05),)).validate()


@pytest.mark.parametrize("direction", ["up", "down"])
def test_a_staircase_is_overlapping_platforms_the_highest_on_top(direction):
    """Stairs as :func:`whole_body_control.runs.scenarios.stairs` builds them (10 cm risers,
    edges at 0.8 and 1.3 m): going up a box per level from its edge on, going down a box per
    level up to its edge.  A ray cast down onto the MuJoCo boxes meets the top of each step at
    ``SimConfig.ground_height``."""
    from whole_body_control.sim.simulation import PLATFORM_LENGTH

    edges, riser = (0.8, 1.3), 0.1
    if direction == "up":
        platforms = tuple((e, (i + 1) * riser) for i, e in enumerate(edges))
        expected = {0.5: 0.0, 1.0: 0.1, 1.6: 0.2}
    else:
        platforms = tuple((e - PLATFORM_LENGTH, 0.2 - i * riser) for i, e in enumerate(edges))
        expected = {0.5: 0.2, 1.0: 0.1, 1.6: 0.0}
    config = SimConfig(visual_meshes=False, platforms=platforms)
    sim = Simulation(load_robot("talos", fresh=False), config)
    mujoco.mj_forward(sim.model, sim.data)
    geomid = np.zeros(1, dtype=np.int32)
    for x, z in expected.items():
        assert config.ground_height(x, 1.5) == pytest.approx(z)
        # from 1 m up, 1.5 m to the side of the robot: the first static geom hit is the step top
        d = mujoco.mj_ray(sim.model, sim.data, np.array([x, 1.5, 1.0]), np.array([0.0, 0.0, -1.0]), None, 1, -1, geomid)
        assert 1.0 - d == pytest.approx(z, abs=1e-9), x
    assert len({sim.model.geom(f"platform_{i}").id for i in range(2)}) == 2


# -- configuration and rendering ----------------------------------------------------------


def test_sim_config_validation():
    config = yaml_config.from_dict(SimConfig, {"timestep": 0.002, "integrator": "rk4", "solref": [0.01, 1.0]})
    assert config.timestep == 0.002 and config.integrator == "rk4"
    with pytest.raises(ConfigError, match="did you mean 'friction'"):
        yaml_config.from_dict(SimConfig, {"frictoin": 1.0})
    with pytest.raises(ConfigError, match="integrator"):
        yaml_config.from_dict(SimConfig, {"integrator": "verlet"})
    with pytest.raises(ConfigError, match="solref"):
        yaml_config.from_dict(SimConfig, {"solref": [0.001, 1.0]})
    assert dataclasses.replace(config, friction=0.5).friction == 0.5


RENDER_SCRIPT = """
import numpy as np
from whole_body_control.robot import load_robot
from whole_body_control.sim import Simulation
sim = Simulation(load_robot("{robot}"))
image = sim.render(64, 48)
print(image.shape, image.dtype, float(image.std()))
"""


@pytest.mark.parametrize("backend", ["egl", "osmesa"])
def test_render_offscreen(backend):
    """Render in a fresh process: the GL backend is chosen when mujoco is imported."""
    env = {**os.environ, "MUJOCO_GL": backend, "PYOPENGL_PLATFORM": backend}
    env.pop("DISPLAY", None)
    result = subprocess.run(
        [sys.executable, "-c", RENDER_SCRIPT.format(robot=ROBOTS[0])],
        env=env,
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if result.returncode != 0 and ("OpenGL" in result.stderr or "GL" in result.stderr):
        last = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else "?"
        pytest.skip(f"MUJOCO_GL={backend} unavailable here: {last}")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr  # e.g. a GL context freed at shutdown
    std = float(result.stdout.split()[-1])
    assert result.stdout.startswith("(48, 64, 3) uint8"), result.stdout
    assert std > 5.0, "blank frame"


def test_a_body_on_the_ground_is_named_from_the_contact_geoms_as_from_the_forces():
    """Talos collapses without torques: the fast geom check (the bridge asks every step)
    names the same body as the full contact pass, from standing to lying."""
    sim = Simulation(load_robot("talos", fresh=False), SimConfig(visual_meshes=False))
    sim.reset()
    named = set()
    for _ in range(1500):
        sim.step(np.zeros(sim.robot.na))
        body = sim.non_foot_ground_contact()
        assert body == sim._ground_contact_forces().non_foot_body
        named.add(body)
    assert None in named and len(named) >= 2  # on its feet first, then a body down


def test_the_imu_orientation_is_against_gravity_and_the_base_pose_against_the_floor(sim):
    """A slope is gravity tilted in the floor's frame: the base pose stays against the floor,
    the IMU's orientation is against gravity's vertical, as a real IMU's; from the two, the
    gravity vector in the floor's frame (what the walker leans by) comes back."""
    import pinocchio as pin

    sim.reset(sim.robot.q_ref)
    g = float(np.linalg.norm(sim.model.opt.gravity))
    np.testing.assert_array_equal(sim.imu().orientation, sim.q[3:7])  # upright, gravity vertical: the same
    a = np.radians(10.0)
    gravity = np.array([-g * np.sin(a), 0.0, -g * np.cos(a)])
    try:
        sim.model.opt.gravity[:] = gravity
        o, q = sim.imu().orientation, sim.q
        r_gravity_base = pin.Quaternion(o[3], *o[:3]).toRotationMatrix()
        r_floor_base = pin.Quaternion(q[6], *q[3:6]).toRotationMatrix()
        np.testing.assert_allclose(r_floor_base @ r_gravity_base.T @ [0.0, 0.0, -g], gravity, atol=1e-12)
        # the base upright on the floor reads a 10 deg pitch against gravity
        assert np.isclose(np.arccos(r_gravity_base[2, 2]), a)
    finally:
        sim.model.opt.gravity[:] = [0.0, 0.0, -g]
