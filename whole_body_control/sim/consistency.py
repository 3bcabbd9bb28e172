"""Check that the Pinocchio model and the MuJoCo simulation describe the same robot.

Compared (each mismatch names the joint or body):

* joint names and the name mapping (every actuated joint has a MuJoCo joint and
  one motor, and nothing else is actuated);
* total mass [kg];
* per moving joint, the rigid body it moves: Pinocchio ``model.inertias[j]``
  (fixed links already merged) against the MuJoCo body of that joint plus its
  static descendants (``fusestatic`` is off), as spatial inertias in the world;
* the centre of mass [m] and the sole placements at ``robot.q_ref`` and at a
  random configuration within the joint limits;
* position limits [rad] and torque limits [N m].
"""

from __future__ import annotations

import mujoco
import numpy as np
import pinocchio as pin

from whole_body_control.errors import ModelMismatch
from whole_body_control.robot import RobotModel
from whole_body_control.sim import ROOT_JOINT, SIDES, Simulation, q_to_qpos


def random_configuration(robot: RobotModel, rng: np.random.Generator) -> np.ndarray:
    """A configuration with joints uniform within their limits (``+-pi`` where
    unlimited), a random base orientation and position."""
    lower = np.where(np.isfinite(robot.q_lower), robot.q_lower, -np.pi)
    upper = np.where(np.isfinite(robot.q_upper), robot.q_upper, np.pi)
    quat = rng.normal(size=4)
    quat /= np.linalg.norm(quat)
    return np.concatenate([rng.uniform(-1.0, 1.0, 3), quat, rng.uniform(lower, upper)])


def _group_bodies(model: mujoco.MjModel, body: int) -> list[int]:
    """``body`` and its descendants reached without crossing a joint."""
    children: dict[int, list[int]] = {}
    for b in range(1, model.nbody):
        children.setdefault(int(model.body_parentid[b]), []).append(b)
    out, todo = [], [body]
    while todo:
        b = todo.pop()
        out.append(b)
        todo.extend(c for c in children.get(b, []) if model.body_jntnum[c] == 0)
    return out


def _world_inertia(model: mujoco.MjModel, data: mujoco.MjData, bodies: list[int]) -> pin.Inertia:
    total = pin.Inertia.Zero()
    for b in bodies:
        local = pin.Inertia(float(model.body_mass[b]), np.zeros(3), np.diag(model.body_inertia[b]))
        total += pin.SE3(data.ximat[b].reshape(3, 3).copy(), data.xipos[b].copy()).act(local)
    return total


def compare_report(robot: RobotModel, sim: Simulation, seed: int = 0) -> list[tuple[str, float]]:
    """Every compared quantity as ``(description, |difference|)``; raises
    :class:`ModelMismatch` at once for structural mismatches (names, mapping)."""
    model, data = sim.model, sim.data
    mj_joints = {model.joint(j).name for j in range(model.njnt)} - {ROOT_JOINT}
    if mj_joints != set(robot.joint_names):
        only_pin = sorted(set(robot.joint_names) - mj_joints)
        only_mj = sorted(mj_joints - set(robot.joint_names))
        raise ModelMismatch(f"{robot.name}: joints only in Pinocchio {only_pin}, only in MuJoCo {only_mj}")
    if model.nu != robot.na:
        raise ModelMismatch(f"{robot.name}: {model.nu} MuJoCo actuators for {robot.na} actuated joints")
    for i, name in enumerate(robot.joint_names):
        act = sim.index.actuator[i]
        target = model.joint(int(model.actuator_trnid[act, 0])).name
        if target != name or model.actuator_gear[act, 0] != 1.0:
            gear = model.actuator_gear[act, 0]
            raise ModelMismatch(f"{robot.name}: joint '{name}' is driven by the actuator of '{target}' (gear {gear})")

    report = [("total mass [kg]", abs(sim.total_mass() - robot.mass))]
    for i, name in enumerate(robot.joint_names):
        j = int(model.joint(name).id)
        if model.jnt_limited[j]:
            lo, hi = model.jnt_range[j]
            diff = max(abs(lo - robot.q_lower[i]), abs(hi - robot.q_upper[i]))
            report.append((f"joint '{name}' position limits [rad]", diff))
        elif np.isfinite(robot.q_lower[i]) and robot.q_upper[i] < 1e10:
            report.append((f"joint '{name}' is limited in Pinocchio only", np.inf))
        act = sim.index.actuator[i]
        lo, hi = model.actuator_ctrlrange[act]
        diff = max(abs(lo + robot.tau_max[i]), abs(hi - robot.tau_max[i]))
        report.append((f"joint '{name}' torque limit [N m]", diff))

    rng = np.random.default_rng(seed)
    pin_data = robot.model.createData()
    for label, q in (("q_ref", robot.q_ref), ("random q", random_configuration(robot, rng))):
        data.qpos[:] = q_to_qpos(q, sim.index)
        data.qvel[:] = 0.0
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)
        pin.forwardKinematics(robot.model, pin_data, q)
        pin.updateFramePlacements(robot.model, pin_data)
        com = pin.centerOfMass(robot.model, pin_data, q)
        report.append((f"centre of mass at {label} [m]", float(np.abs(com - data.subtree_com[sim.root_body]).max())))
        for j in range(1, robot.model.njoints):
            name = robot.model.names[j]
            body = sim.root_body if j == 1 else int(model.joint(name).bodyid[0])
            bodies = _group_bodies(model, body)
            mj_inertia = _world_inertia(model, data, bodies)
            pin_inertia = pin_data.oMi[j].act(robot.model.inertias[j])
            body_names = ", ".join(model.body(b).name for b in bodies)
            what = f"joint '{ROOT_JOINT if j == 1 else name}' (bodies {body_names})"
            report.append((f"mass moved by {what} [kg]", abs(mj_inertia.mass - pin_inertia.mass)))
            report.append(
                (
                    f"spatial inertia moved by {what} at {label}",
                    float(np.abs(mj_inertia.matrix() - pin_inertia.matrix()).max()),
                )
            )
        for side in SIDES:
            site = sim.sole_sites[side]
            oMf = pin_data.oMf[robot.foot_frame_ids[side]]
            diff = max(
                np.abs(data.site_xpos[site] - oMf.translation).max(),
                np.abs(data.site_xmat[site].reshape(3, 3) - oMf.rotation).max(),
            )
            report.append((f"{side} sole '{robot.feet[side].frame}' placement at {label}", float(diff)))
    mujoco.mj_forward(model, data)  # leave derived quantities consistent with the state
    return report


def check_consistency(robot: RobotModel, sim: Simulation, tol: float = 1e-6) -> None:
    """Raise :class:`ModelMismatch` naming the first quantity that differs by more than ``tol``.

    The simulation's state is saved and restored.
    """
    qpos, qvel, time = sim.data.qpos.copy(), sim.data.qvel.copy(), sim.data.time
    try:
        report = compare_report(robot, sim)
    finally:
        sim.data.qpos[:], sim.data.qvel[:], sim.data.time = qpos, qvel, time
        mujoco.mj_forward(sim.model, sim.data)
    bad = [(what, diff) for what, diff in report if not diff <= tol]
    if bad:
        lines = "; ".join(f"{what}: differs by {diff:.3g}" for what, diff in bad[:5])
        more = f" (and {len(bad) - 5} more)" if len(bad) > 5 else ""
        raise ModelMismatch(f"{robot.name}: Pinocchio and MuJoCo disagree (tol {tol:g}): {lines}{more}")
