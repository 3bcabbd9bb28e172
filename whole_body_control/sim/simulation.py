"""MuJoCo simulation of a :class:`~whole_body_control.robot.RobotModel`, built
programmatically from the same URDF that Pinocchio loads.

The URDF is parsed by MuJoCo's importer (after resolving ``package://`` mesh
URIs) into an ``mujoco.MjSpec`` that is then edited:

* a free joint on the root link (otherwise the root is welded to the world);
* static (fixed-joint) links kept as separate bodies (``fusestatic`` off) and
  masses / inertias taken verbatim from the URDF (``inertiafromgeom`` false,
  no inertia balancing), so that the mass moved by each joint equals
  Pinocchio's ``model.inertias[j]`` (checked by :mod:`whole_body_control.sim.consistency`);
* the URDF ``<dynamics>`` damping / friction are replaced by
  :class:`SimConfig` values (Pinocchio's dynamics do not model them);
* per foot a massless body at the sole frame carrying a collision BOX that
  exactly covers the sole rectangle (bottom face in the sole plane), the sole
  site and a force / torque sensor; the URDF collision geoms of the foot
  bodies are disabled, so the boxes are the only foot geoms that touch the floor;
* collision filtering: robot geoms collide with the floor only (neighbouring
  URDF collision meshes overlap at start-up); the two foot boxes also collide
  with each other;
* one torque motor per actuated joint, ``ctrlrange = +-robot.tau_max``, gear 1;
* a floor plane, an IMU site on the base frame (gyro, accelerometer, framequat);
* optional flat platforms (:attr:`SimConfig.platforms`): static boxes with the
  floor's collision bits and contact parameters.  Everything here that means
  "the ground" (foot contacts and wrenches, the measured ZMP, the fall
  detector's non-foot contacts, :meth:`Simulation.base_height`) counts the
  floor and the platforms alike; :meth:`SimConfig.ground_height` is the
  terrain height map.

Conventions (converted only by :func:`qpos_to_q`, :func:`q_to_qpos`,
:func:`qvel_to_v`, :func:`v_to_qvel`):

* Pinocchio free flyer ``q = [x y z qx qy qz qw, joints]``,
  ``v = [linear velocity in the base frame, angular velocity in the base frame, joints]``.
* MuJoCo free joint ``qpos = [x y z qw qx qy qz, joints]``,
  ``qvel = [linear velocity in the world frame, angular velocity in the body frame, joints]``.
* Joints are matched by NAME (:class:`IndexMap`); orders are never assumed equal.

Offscreen rendering needs a GL backend: without ``$DISPLAY`` and without
``$MUJOCO_GL`` this module sets ``MUJOCO_GL=egl`` before importing mujoco
(``osmesa`` also works when Debian's ``libosmesa6`` is installed).
"""

from __future__ import annotations

import os
import weakref
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pinocchio as pin

if not os.environ.get("DISPLAY") and not os.environ.get("MUJOCO_GL"):
    os.environ["MUJOCO_GL"] = "egl"

import mujoco  # noqa: E402  (after choosing the GL backend)

from whole_body_control.errors import ModelError, SimulationUnstable, StateError  # noqa: E402
from whole_body_control.geometry import convex_hull  # noqa: E402
from whole_body_control.robot import RobotModel, resolve_package_uri  # noqa: E402

ROOT_JOINT = "floating_base"
FLOOR = "floor"
PLATFORM = "platform"  # geom names platform_0, platform_1, ...
PLATFORM_LENGTH = 4.0  # [m] along x, from its x start
PLATFORM_WIDTH = 4.0  # [m] along y, centred on y = 0
IMU_SITE = "imu"
SIDES = ("left", "right")

# Collision bits: the floor (type 1) touches every robot geom (affinity 1);
# robot geoms have type 0 so they never touch each other, except the foot
# boxes (type 2, affinity 1|2) which also touch each other.
_FLOOR_BITS = (1, 0)
_ROBOT_BITS = (0, 1)
_FOOT_BITS = (2, 3)


@dataclass(frozen=True)
class SimConfig:
    """MuJoCo simulation parameters (YAML keys = field names)."""

    timestep: float = field(default=0.001, metadata={"gt": 0.0, "le": 0.01})  # [s]
    integrator: Literal["euler", "implicitfast", "implicit", "rk4"] = "implicitfast"
    cone: Literal["pyramidal", "elliptic"] = "pyramidal"
    friction: float = field(default=1.0, metadata={"gt": 0.0})  # floor / foot sliding friction [-]
    # contact solref (time constant [s], damping ratio [-]): stiff, critically damped feet
    solref: tuple[float, float] = field(default=(0.005, 1.0), metadata={"gt": 0.0})
    # contact solimp (dmin, dmax [-], width [m]): impedance 0.95..0.99 over 1 mm of penetration
    solimp: tuple[float, float, float] = field(default=(0.95, 0.99, 0.001), metadata={"gt": 0.0})
    joint_damping: float = field(default=0.0, metadata={"ge": 0.0})  # viscous joint damping [N m s / rad]
    joint_armature: float = field(default=0.0, metadata={"ge": 0.0})  # [kg m^2] added to the robot's armature
    foot_box_height: float = field(default=0.02, metadata={"gt": 0.0})  # thickness of the foot collision boxes [m]
    visual_meshes: bool = True  # keep the URDF visual meshes (render only, no collision)
    # flat platforms ((x_start [m], height [m]), ...): boxes over [x_start, x_start + PLATFORM_LENGTH]
    # x [-PLATFORM_WIDTH / 2, PLATFORM_WIDTH / 2], top face at height; the highest one wins where they overlap
    platforms: tuple[tuple[float, float], ...] = ()

    def ground_height(self, x: float, y: float) -> float:
        """Height [m] of the ground (floor or platform top) at ``(x, y)`` [m]."""
        z = 0.0
        for x0, h in self.platforms:
            if x0 <= x <= x0 + PLATFORM_LENGTH and abs(y) <= 0.5 * PLATFORM_WIDTH:
                z = max(z, float(h))
        return z

    def validate(self) -> None:
        from whole_body_control.errors import ConfigError

        if self.solref[0] < 2.0 * self.timestep:
            raise ConfigError(f"solref time constant {self.solref[0]} s must be >= 2 * timestep ({self.timestep} s)")
        if not 0.0 < self.solimp[0] <= self.solimp[1] < 1.0:
            raise ConfigError(f"solimp needs 0 < dmin <= dmax < 1, got {self.solimp}")
        for x0, h in self.platforms:
            if not (np.isfinite(x0) and np.isfinite(h) and h > 0.0):
                raise ConfigError(f"platform (x_start, height) needs finite values and height > 0, got {(x0, h)}")


@dataclass(frozen=True)
class IndexMap:
    """Where each Pinocchio quantity lives in MuJoCo, matched by joint name.

    ``qpos[i]``, ``dof[i]``, ``actuator[i]`` are the MuJoCo indices of
    ``robot.joint_names[i]``; ``root_qpos`` / ``root_dof`` the first index of
    the free joint.
    """

    root_qpos: int
    root_dof: int
    qpos: np.ndarray
    dof: np.ndarray
    actuator: np.ndarray
    nq: int  # MuJoCo nq
    nv: int  # MuJoCo nv


@dataclass(frozen=True)
class ImuReading:
    """IMU on the base frame.

    Attributes:
        orientation: quaternion ``[x y z w]`` of the IMU frame in the world.
        gyro: angular velocity in the IMU frame [rad/s].
        linear_acceleration: specific force in the IMU frame [m/s^2]
            (``+9.81`` along the up axis at rest).
    """

    orientation: np.ndarray
    gyro: np.ndarray
    linear_acceleration: np.ndarray


# -- conventions ---------------------------------------------------------------


def _quat_wxyz_to_matrix(wxyz: np.ndarray) -> np.ndarray:
    mat = np.empty(9)
    mujoco.mju_quat2Mat(mat, np.asarray(wxyz, dtype=float) / np.linalg.norm(wxyz))
    return mat.reshape(3, 3)


def q_to_qpos(q: np.ndarray, index: IndexMap) -> np.ndarray:
    """Pinocchio ``q`` -> MuJoCo ``qpos`` (quaternion ``xyzw`` -> ``wxyz``)."""
    qpos = np.zeros(index.nq)
    r = index.root_qpos
    qpos[r : r + 3] = q[0:3]
    qpos[r + 3 : r + 7] = (q[6], q[3], q[4], q[5])
    qpos[index.qpos] = q[7:]
    return qpos


def qpos_to_q(qpos: np.ndarray, index: IndexMap) -> np.ndarray:
    """MuJoCo ``qpos`` -> Pinocchio ``q`` (quaternion ``wxyz`` -> ``xyzw``)."""
    r = index.root_qpos
    w, x, y, z = qpos[r + 3 : r + 7]
    return np.concatenate([qpos[r : r + 3], (x, y, z, w), qpos[index.qpos]])


def qvel_to_v(qvel: np.ndarray, qpos: np.ndarray, index: IndexMap) -> np.ndarray:
    """MuJoCo ``qvel`` -> Pinocchio ``v``: the base linear velocity is rotated
    from the world frame into the base frame, ``v_lin = R^T qvel_lin``; the
    angular velocity is already in the base frame in both."""
    r, d = index.root_qpos, index.root_dof
    rot = _quat_wxyz_to_matrix(qpos[r + 3 : r + 7])
    return np.concatenate([rot.T @ qvel[d : d + 3], qvel[d + 3 : d + 6], qvel[index.dof]])


def v_to_qvel(v: np.ndarray, qpos: np.ndarray, index: IndexMap) -> np.ndarray:
    """Pinocchio ``v`` -> MuJoCo ``qvel`` (inverse of :func:`qvel_to_v`)."""
    r, d = index.root_qpos, index.root_dof
    rot = _quat_wxyz_to_matrix(qpos[r + 3 : r + 7])
    qvel = np.zeros(index.nv)
    qvel[d : d + 3] = rot @ v[0:3]
    qvel[d + 3 : d + 6] = v[3:6]
    qvel[index.dof] = v[6:]
    return qvel


# -- model building --------------------------------------------------------------


def _urdf_for_mujoco(robot: RobotModel, config: SimConfig) -> str:
    """The URDF text with absolute mesh paths and our compiler options."""
    try:
        root = ET.parse(robot.urdf_path).getroot()
    except ET.ParseError as exc:
        raise ModelError(f"{robot.urdf_path}: invalid XML: {exc}") from exc
    for link in root.iter("link"):
        if not config.visual_meshes:
            for visual in link.findall("visual"):
                link.remove(visual)
        for mesh in link.iter("mesh"):
            mesh.set("filename", str(resolve_package_uri(mesh.get("filename", ""), robot.package_dirs)))
    for element in root.findall("mujoco"):
        root.remove(element)
    extension = ET.SubElement(root, "mujoco")
    ET.SubElement(
        extension,
        "compiler",
        fusestatic="false",
        discardvisual="false",
        balanceinertia="false",
        strippath="false",
        inertiafromgeom="false",
    )
    return ET.tostring(root, encoding="unicode")


def _joint_body(spec: mujoco.MjSpec, robot: RobotModel, pin_joint: int) -> mujoco.MjsBody:
    """MuJoCo body moved by Pinocchio joint ``pin_joint`` (1 = free flyer)."""
    if pin_joint == 1:
        return spec.worldbody.first_body()
    return spec.joint(robot.model.names[pin_joint]).parent


def _static_subtree(body: mujoco.MjsBody) -> list[mujoco.MjsBody]:
    """``body`` and its descendants reached without crossing a joint."""
    out, todo = [], [body]
    while todo:
        b = todo.pop()
        out.append(b)
        todo.extend(c for c in b.bodies if not c.joints)
    return out


def _se3_to_pos_quat(placement: pin.SE3) -> tuple[np.ndarray, np.ndarray]:
    xyzw = pin.Quaternion(placement.rotation).coeffs()
    return np.array(placement.translation), np.array([xyzw[3], xyzw[0], xyzw[1], xyzw[2]])


def _contact_params(config: SimConfig) -> dict:
    """Contact parameters shared by the foot boxes and the floor (MuJoCo combines the two)."""
    return {
        "condim": 3,
        "friction": [config.friction, 0.005, 0.0001],
        "solref": list(config.solref),
        "solimp": [*config.solimp, 0.5, 2.0],
    }


def build_spec(robot: RobotModel, config: SimConfig) -> mujoco.MjSpec:
    """The edited ``MjSpec`` of ``robot`` (see the module docstring)."""
    try:
        spec = mujoco.MjSpec.from_string(_urdf_for_mujoco(robot, config))
    except Exception as exc:  # mujoco raises ValueError with the parser message
        raise ModelError(f"{robot.urdf_path}: MuJoCo cannot import it: {exc}") from exc
    spec.modelname = robot.name
    spec.option.timestep = config.timestep
    spec.option.integrator = {
        "euler": mujoco.mjtIntegrator.mjINT_EULER,
        "implicitfast": mujoco.mjtIntegrator.mjINT_IMPLICITFAST,
        "implicit": mujoco.mjtIntegrator.mjINT_IMPLICIT,
        "rk4": mujoco.mjtIntegrator.mjINT_RK4,
    }[config.integrator]
    spec.option.cone = {"pyramidal": mujoco.mjtCone.mjCONE_PYRAMIDAL, "elliptic": mujoco.mjtCone.mjCONE_ELLIPTIC}[
        config.cone
    ]

    roots = list(spec.worldbody.bodies)
    if len(roots) != 1:
        raise ModelError(f"{robot.urdf_path}: expected one root link, MuJoCo found {[b.name for b in roots]}")
    root = roots[0]
    root.add_freejoint(name=ROOT_JOINT)

    armature = dict(zip(robot.joint_names, robot.armature))
    for joint in spec.joints:
        if joint.name == ROOT_JOINT:
            continue
        joint.damping = [config.joint_damping, 0.0, 0.0]  # [linear, higher-order terms] in MuJoCo 4
        joint.armature = armature.get(joint.name, 0.0) + config.joint_armature  # the robot's, as Pinocchio's
        joint.frictionloss = 0.0
        joint.actfrclimited = mujoco.mjtLimited.mjLIMITED_FALSE  # the motors' ctrlrange limits torques

    foot_bodies = set()
    for side in SIDES:
        frame = robot.model.frames[robot.foot_frame_ids[side]]
        foot_bodies.update(b.name for b in _static_subtree(_joint_body(spec, robot, frame.parentJoint)))
    for geom in spec.geoms:
        if geom.contype == 0 and geom.conaffinity == 0:  # URDF <visual>
            geom.group = 2
            continue
        if geom.parent.name in foot_bodies:
            geom.contype, geom.conaffinity = 0, 0
            geom.group = 3
        else:
            geom.contype, geom.conaffinity = _ROBOT_BITS

    for side in SIDES:
        foot = robot.feet[side]
        frame = robot.model.frames[robot.foot_frame_ids[side]]
        pos, quat = _se3_to_pos_quat(frame.placement)
        sole = _joint_body(spec, robot, frame.parentJoint).add_body(name=f"{side}_sole_contact", pos=pos, quat=quat)
        half = [0.5 * (foot.sole.x_max - foot.sole.x_min), 0.5 * (foot.sole.y_max - foot.sole.y_min)]
        center = [0.5 * (foot.sole.x_max + foot.sole.x_min), 0.5 * (foot.sole.y_max + foot.sole.y_min)]
        sole.add_geom(
            name=f"{side}_foot_box",
            type=mujoco.mjtGeom.mjGEOM_BOX,
            size=[*half, 0.5 * config.foot_box_height],
            pos=[*center, 0.5 * config.foot_box_height],  # bottom face in the sole plane
            contype=_FOOT_BITS[0],
            conaffinity=_FOOT_BITS[1],
            **_contact_params(config),
            rgba=[0.2, 0.6, 0.9, 0.5],
        )
        sole.add_site(name=foot.frame, size=[0.01, 0.01, 0.01])
        spec.add_sensor(
            name=f"{side}_force",
            type=mujoco.mjtSensor.mjSENS_FORCE,
            objtype=mujoco.mjtObj.mjOBJ_SITE,
            objname=foot.frame,
        )
        spec.add_sensor(
            name=f"{side}_torque",
            type=mujoco.mjtSensor.mjSENS_TORQUE,
            objtype=mujoco.mjtObj.mjOBJ_SITE,
            objname=foot.frame,
        )

    base = robot.model.frames[robot.model.getFrameId(robot.config.base_frame)]
    pos, quat = _se3_to_pos_quat(base.placement)
    _joint_body(spec, robot, base.parentJoint).add_site(name=IMU_SITE, pos=pos, quat=quat, size=[0.01, 0.01, 0.01])
    for name, kind in (
        ("imu_gyro", mujoco.mjtSensor.mjSENS_GYRO),
        ("imu_accelerometer", mujoco.mjtSensor.mjSENS_ACCELEROMETER),
        ("imu_quat", mujoco.mjtSensor.mjSENS_FRAMEQUAT),
    ):
        spec.add_sensor(name=name, type=kind, objtype=mujoco.mjtObj.mjOBJ_SITE, objname=IMU_SITE)

    for name, tau_max in zip(robot.joint_names, robot.tau_max):
        spec.add_actuator(
            name=name,
            target=name,
            trntype=mujoco.mjtTrn.mjTRN_JOINT,
            gear=[1, 0, 0, 0, 0, 0],
            ctrllimited=mujoco.mjtLimited.mjLIMITED_TRUE,
            ctrlrange=[-tau_max, tau_max],
        )

    checker = spec.add_texture(
        name="grid",
        type=mujoco.mjtTexture.mjTEXTURE_2D,
        builtin=mujoco.mjtBuiltin.mjBUILTIN_CHECKER,
        rgb1=[0.3, 0.35, 0.4],
        rgb2=[0.2, 0.25, 0.3],
        width=256,
        height=256,
    )
    material = spec.add_material(name="floor", texrepeat=[4, 4], reflectance=0.1)
    material.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = checker.name
    spec.worldbody.add_geom(
        name=FLOOR,
        type=mujoco.mjtGeom.mjGEOM_PLANE,
        size=[0, 0, 0.05],
        contype=_FLOOR_BITS[0],
        conaffinity=_FLOOR_BITS[1],
        **_contact_params(config),
        material="floor",
    )
    for i, (x0, h) in enumerate(config.platforms):
        spec.worldbody.add_geom(
            name=f"{PLATFORM}_{i}",
            type=mujoco.mjtGeom.mjGEOM_BOX,
            size=[0.5 * PLATFORM_LENGTH, 0.5 * PLATFORM_WIDTH, 0.5 * h],
            pos=[x0 + 0.5 * PLATFORM_LENGTH, 0.0, 0.5 * h],
            contype=_FLOOR_BITS[0],
            conaffinity=_FLOOR_BITS[1],
            **_contact_params(config),
            rgba=[0.55, 0.5, 0.45, 1.0],
        )
    spec.worldbody.add_light(name="sun", pos=[0, 0, 5], dir=[0, 0, -1], type=mujoco.mjtLightType.mjLIGHT_DIRECTIONAL)
    return spec


def _index_map(model: mujoco.MjModel, robot: RobotModel) -> IndexMap:
    missing = [n for n in robot.joint_names if mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n) < 0]
    if missing:
        raise ModelError(f"{robot.name}: joints missing in the MuJoCo model: {missing}")
    joints = [model.joint(n) for n in robot.joint_names]
    root = model.joint(ROOT_JOINT)
    return IndexMap(
        root_qpos=int(root.qposadr[0]),
        root_dof=int(root.dofadr[0]),
        qpos=np.array([j.qposadr[0] for j in joints], dtype=int),
        dof=np.array([j.dofadr[0] for j in joints], dtype=int),
        actuator=np.array([model.actuator(n).id for n in robot.joint_names], dtype=int),
        nq=model.nq,
        nv=model.nv,
    )


# -- simulation ------------------------------------------------------------------


@dataclass(frozen=True)
class _GroundContacts:
    """The ground contacts of one simulation step, reduced (see ``Simulation._ground_contact_forces``)."""

    wrenches: dict[str, np.ndarray]  # per foot: force, torque about the sole origin, sole frame [N, N m]
    load: dict[str, float]  # per foot: vertical force [N]
    total_force: np.ndarray  # on the feet, world [N]
    total_torque: np.ndarray  # of the feet's contacts about the world origin [N m]
    non_foot_body: str | None  # a body other than the feet touching the ground


@dataclass
class _Push:
    body: int
    force: np.ndarray  # world frame [N]
    steps_left: int


# MuJoCo's warnings after which it resets its state (mj_checkPos, mj_checkVel, mj_checkAcc)
_BAD_STATE = (
    (mujoco.mjtWarning.mjWARN_BADQPOS, "a non-finite or huge position"),
    (mujoco.mjtWarning.mjWARN_BADQVEL, "a non-finite or huge velocity"),
    (mujoco.mjtWarning.mjWARN_BADQACC, "a non-finite or huge acceleration"),
)


class Simulation:
    """A MuJoCo simulation of ``robot``; states in Pinocchio convention.

    Args:
        robot: the robot (URDF, feet, limits).
        config: simulation parameters.
        q0: initial configuration (Pinocchio convention); ``robot.q_ref`` by default.

    Attributes:
        model, data: the ``mujoco.MjModel`` / ``mujoco.MjData``.
        index: the :class:`IndexMap` between Pinocchio and MuJoCo.
    """

    def __init__(self, robot: RobotModel, config: SimConfig = SimConfig(), q0: np.ndarray | None = None):
        self.robot = robot
        self.config = config
        self.spec = build_spec(robot, config)
        try:
            self.model = self.spec.compile()
        except Exception as exc:
            raise ModelError(f"{robot.urdf_path}: MuJoCo cannot compile the model: {exc}") from exc
        self.data = mujoco.MjData(self.model)
        self.index = _index_map(self.model, robot)
        self.root_body = int(self.model.joint(ROOT_JOINT).bodyid[0])
        self.floor_geom = self.model.geom(FLOOR).id
        # the floor and the platforms: what "the ground" means for contacts and falls
        self.ground_geoms = frozenset(
            [self.floor_geom, *(self.model.geom(f"{PLATFORM}_{i}").id for i in range(len(config.platforms)))]
        )
        self.foot_geoms = {side: self.model.geom(f"{side}_foot_box").id for side in SIDES}
        self._foot_row = {geom: row for row, geom in enumerate(self.foot_geoms[side] for side in SIDES)}
        self._f6 = np.zeros(6)  # mj_contactForce's output
        self._sole_corners = {side: robot.feet[side].sole.corners() for side in SIDES}  # (4, 3) sole frame
        self.sole_sites = {side: self.model.site(robot.feet[side].frame).id for side in SIDES}
        # sensordata indices of each sole's force then torque sensor (the wrench, negated)
        self._ft_index = {
            side: np.concatenate(
                [
                    self.model.sensor_adr[self.model.sensor(f"{side}_{kind}").id] + np.arange(3)
                    for kind in ("force", "torque")
                ]
            )
            for side in SIDES
        }
        self.imu_site = self.model.site(IMU_SITE).id
        self._steps = 0  # steps and resets so far: the key of the loads cache
        # the state at the start of the last step(): restored when MuJoCo blows up in it
        self._qpos_before, self._qvel_before = np.zeros(self.model.nq), np.zeros(self.model.nv)
        self._loads_cache: tuple | None = None  # (key, loads, total) of _sole_loads
        self._pushes: list[_Push] = []
        self._renderers: dict[tuple[int, int], mujoco.Renderer] = {}
        self.reset(q0)

    # -- state -------------------------------------------------------------------

    def reset(self, q: np.ndarray | None = None, v: np.ndarray | None = None) -> None:
        """Set the state (Pinocchio convention; default ``robot.q_ref``, zero velocity), time 0."""
        q = self.robot.q_ref if q is None else self._check("q", q, self.robot.nq)
        v = np.zeros(self.robot.nv) if v is None else self._check("v", v, self.robot.nv)
        mujoco.mj_resetData(self.model, self.data)
        q = q.copy()
        q[3:7] /= np.linalg.norm(q[3:7])
        self.data.qpos[:] = q_to_qpos(q, self.index)
        self.data.qvel[:] = v_to_qvel(v, self.data.qpos, self.index)
        self._pushes.clear()
        self._steps += 1
        mujoco.mj_forward(self.model, self.data)

    @property
    def q(self) -> np.ndarray:
        """Configuration, Pinocchio convention."""
        return qpos_to_q(self.data.qpos, self.index)

    @property
    def v(self) -> np.ndarray:
        """Velocity, Pinocchio convention (base linear velocity in the base frame)."""
        return qvel_to_v(self.data.qvel, self.data.qpos, self.index)

    @property
    def time(self) -> float:
        """Simulated time [s]."""
        return float(self.data.time)

    @property
    def timestep(self) -> float:
        return float(self.model.opt.timestep)

    def total_mass(self) -> float:
        """Sum of the body masses [kg]."""
        return float(self.model.body_mass.sum())

    @staticmethod
    def _check(name: str, value, size: int) -> np.ndarray:
        array = np.asarray(value, dtype=float)
        if array.shape != (size,):
            raise StateError(f"{name} must have shape ({size},), got {array.shape}")
        if not np.all(np.isfinite(array)):
            bad = np.flatnonzero(~np.isfinite(array))
            raise StateError(f"{name} is not finite at indices {bad.tolist()}: {array[bad]}")
        return array

    # -- stepping ----------------------------------------------------------------

    def step(self, tau: np.ndarray, nstep: int = 1) -> None:
        """Apply joint torques ``tau`` [N m] (``robot.joint_names`` order, clipped
        to ``+-tau_max`` by the motors) for ``nstep`` timesteps (the same result as
        ``nstep`` calls; without a push in progress MuJoCo runs them in one call).

        Raises:
            StateError (a ValueError): ``tau`` has the wrong size or is not finite.
            SimulationUnstable: MuJoCo met a bad state; the state before the call is
                back (see :meth:`_check_stable`).
        """
        tau = self._check("tau", tau, self.robot.na)
        self.data.ctrl[self.index.actuator] = tau
        t0 = self.data.time
        self._qpos_before[:] = self.data.qpos
        self._qvel_before[:] = self.data.qvel
        if not self._pushes:
            self.data.xfrc_applied[:] = 0.0
            self._steps += nstep
            mujoco.mj_step(self.model, self.data, nstep)
            self._check_stable(t0)
            return
        for _ in range(nstep):
            self.data.xfrc_applied[:] = 0.0
            for push in self._pushes:
                self.data.xfrc_applied[push.body, :3] += push.force
                push.steps_left -= 1
            self._pushes = [p for p in self._pushes if p.steps_left > 0]
            self._steps += 1
            mujoco.mj_step(self.model, self.data)
        self._check_stable(t0)

    def _check_stable(self, t0: float) -> None:
        """Raise :class:`SimulationUnstable` when MuJoCo found a bad state since
        :meth:`reset`: it then resets its state to the model's and its time to 0 on its own,
        and a run that went on would read a robot standing at the origin (a G1 "fell" at
        t = 0.001 s with its base at 0 m).  The state and time before the failing
        :meth:`step` are put back (what a report reads), and every later step raises
        again until :meth:`reset`."""
        for kind, what in _BAD_STATE:
            warning = self.data.warning[kind]
            if warning.number:
                dof = int(warning.lastinfo)
                if kind != mujoco.mjtWarning.mjWARN_BADQPOS and 0 <= dof < self.model.nv:
                    what += f" of joint '{self.model.joint(self.model.dof_jntid[dof]).name}'"
                fast = int(np.argmax(np.abs(self._qvel_before)))
                name = self.model.joint(self.model.dof_jntid[fast]).name
                before = f"{name} (dof {fast}) at {self._qvel_before[fast]:.3g}"
                # the state before the step rather than MuJoCo's reset one (the robot at its origin at t = 0)
                self.data.qpos[:], self.data.qvel[:], self.data.time = self._qpos_before, self._qvel_before, t0
                mujoco.mj_forward(self.model, self.data)
                raise SimulationUnstable(
                    f"MuJoCo: the simulation went unstable after t = {t0:.4f} s ({what}; the fastest "
                    f"velocity before the step: {before}); MuJoCo reset it, the state before the step is back"
                )

    def push(self, body_name: str, force_world: np.ndarray, duration: float) -> None:
        """Apply ``force_world`` [N] (world frame, at the body's CoM) to ``body_name``
        for ``duration`` [s] from now, i.e. during ``round(duration / timestep)``
        of the following :meth:`step` calls (impulse ``force * that * timestep``)."""
        body = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, body_name)
        if body < 0:
            names = [self.model.body(i).name for i in range(self.model.nbody)]
            from whole_body_control.yaml_config import closest_key

            raise ValueError(f"push: unknown body '{body_name}'{closest_key(body_name, names)}")
        force = np.asarray(force_world, dtype=float)
        if force.shape != (3,) or not np.all(np.isfinite(force)):
            raise ValueError(f"push: force_world must be 3 finite numbers [N], got {force_world!r}")
        if not (np.isfinite(duration) and duration > 0):
            raise ValueError(f"push: duration must be > 0 [s], got {duration!r}")
        steps = max(1, round(duration / self.timestep))
        self._pushes.append(_Push(body, force, steps))

    def push_velocity_change(self, body_name: str, dv_xy: np.ndarray, duration: float = 0.1) -> np.ndarray:
        """Push ``body_name`` horizontally with ``F = total_mass * dv / duration``
        [N], so that the whole robot's CoM velocity changes by about ``dv_xy``
        [m/s] (ignoring ground friction). Returns the force."""
        dv = np.asarray(dv_xy, dtype=float)
        if dv.shape != (2,):
            raise ValueError(f"push_velocity_change: dv_xy must have 2 elements [m/s], got {dv_xy!r}")
        force = np.array([*(self.total_mass() * dv / duration), 0.0])
        self.push(body_name, force, duration)
        return force

    # -- measurements --------------------------------------------------------------

    def imu(self) -> ImuReading:
        """The base IMU (the accelerometer reads ``+g`` up at rest).  Its orientation is
        the base's against gravity's vertical, as a real IMU's: with gravity tilted (a
        slope, the floor being the world's xy plane) it differs from the base pose's,
        which is against the floor."""
        w, x, y, z = self.data.sensor("imu_quat").data
        orientation = np.array([x, y, z, w])
        g = self.model.opt.gravity
        if g[0] != 0.0 or g[1] != 0.0:
            up = -g / np.linalg.norm(g)
            floor_to_gravity = pin.Quaternion.FromTwoVectors(up, np.array([0.0, 0.0, 1.0]))
            orientation = (floor_to_gravity * pin.Quaternion(w, x, y, z)).coeffs().copy()  # (x, y, z, w)
        return ImuReading(
            orientation=orientation,
            gyro=self.data.sensor("imu_gyro").data.copy(),
            linear_acceleration=self.data.sensor("imu_accelerometer").data.copy(),
        )

    def _ground_contact_forces(self) -> _GroundContacts:
        """The contacts between the ground (floor or platforms) and the robot, reduced, in
        one pass over the contacts: what the sole sensors
        measure, from the contact forces themselves (the tests compare the two), and the
        body touching the ground.  Plain Python floats: with a few contacts, each numpy
        call would cost more than its arithmetic."""
        d = self.data
        n = int(d.ncon)
        frames, points = d.contact.frame[:n].tolist(), d.contact.pos[:n].tolist()
        foot_row, f6 = self._foot_row, self._f6
        sums = [[0.0] * 6 for _ in SIDES]  # per foot, on the robot, world: force, torque about the origin
        non_foot = None
        for i, geom, sign in self._ground_pairs():
            row = foot_row.get(geom)
            if row is None:
                non_foot = geom if non_foot is None else non_foot
                continue
            mujoco.mj_contactForce(self.model, d, i, f6)
            a, b, c, ta, tb, tc = f6.tolist()
            r = frames[i]  # rows: normal (geom1 -> geom2), tangents
            fx = sign * (r[0] * a + r[3] * b + r[6] * c)
            fy = sign * (r[1] * a + r[4] * b + r[7] * c)
            fz = sign * (r[2] * a + r[5] * b + r[8] * c)
            px, py, pz = points[i]
            s = sums[row]
            s[0] += fx
            s[1] += fy
            s[2] += fz
            s[3] += sign * (r[0] * ta + r[3] * tb + r[6] * tc) + py * fz - pz * fy
            s[4] += sign * (r[1] * ta + r[4] * tb + r[7] * tc) + pz * fx - px * fz
            s[5] += sign * (r[2] * ta + r[5] * tb + r[8] * tc) + px * fy - py * fx
        wrenches, load = {}, {}
        for row, side in enumerate(SIDES):
            site = self.sole_sites[side]
            fx, fy, fz, mx, my, mz = sums[row]
            ox, oy, oz = d.site_xpos[site].tolist()
            moment = np.array([mx - (oy * fz - oz * fy), my - (oz * fx - ox * fz), mz - (ox * fy - oy * fx)])
            rot_t = d.site_xmat[site].reshape(3, 3).T  # world -> sole
            wrenches[side] = np.concatenate([rot_t.dot(np.array([fx, fy, fz])), rot_t.dot(moment)])  # about the sole
            load[side] = fz
        total = np.array(sums[0]) + np.array(sums[1])
        body = self.model.body(self.model.geom_bodyid[non_foot]).name if non_foot is not None else None
        return _GroundContacts(wrenches, load, total[:3], total[3:], body)

    def _ground_pairs(self):
        """``(contact index, robot geom, sign)`` of each contact with the ground (floor or
        platform); MuJoCo's contact force acts from geom1 on geom2: ``sign`` +1 when the
        robot's geom is geom2."""
        ground = self.ground_geoms
        for i, (g1, g2) in enumerate(self.data.contact.geom[: self.data.ncon].tolist()):
            if g1 in ground:
                yield i, g2, 1.0
            elif g2 in ground:
                yield i, g1, -1.0

    def _contact_key(self) -> tuple:
        """What identifies a simulation step's contacts: steps and resets so far, time, count."""
        return (self._steps, float(self.data.time), int(self.data.ncon))

    def foot_wrenches(self) -> dict[str, np.ndarray]:
        """Ground reaction on each foot box, from the contact forces
        (``mj_contactForce``): ``[force, torque]`` expressed in the sole frame,
        torque about the sole origin [N, N m]. The sole force/torque sensors
        (``<side>_force``, ``<side>_torque``) measure the same wrench with the
        opposite sign (force of the foot on the sole body): they are read here, MuJoCo
        computes them in the step (``_ground_contact_forces`` sums the contacts, for the
        tests that compare the two)."""
        data = self.data.sensordata
        return {side: -data[index] for side, index in self._ft_index.items()}

    def _sole_loads(self) -> tuple[dict[str, float], tuple[float, ...]]:
        """From the sole force/torque sensors (computed by MuJoCo in the step): each foot's
        vertical load [N] and the feet's total ``(fx, fy, fz, tx, ty, tz)`` [N, N m] in the
        world, torque about the world origin.  Once per step (asked several times a tick);
        plain Python floats: a few products cost less than numpy calls.  The sole bodies are
        massless and carry only the foot boxes: their sensors measure the boxes' contacts,
        the same wrench as the contact forces summed (``_ground_contact_forces``, tested)."""
        key = self._contact_key()
        cached = self._loads_cache
        if cached is not None and cached[0] == key:
            return cached[1], cached[2]
        d = self.data
        data = d.sensordata
        loads = {}
        total = [0.0] * 6
        for side, index in self._ft_index.items():
            fx, fy, fz, mx, my, mz = (-data[index]).tolist()  # on the foot, sole frame
            site = self.sole_sites[side]
            (r0, r1, r2, r3, r4, r5, r6, r7, r8) = d.site_xmat[site].tolist()
            px, py, pz = d.site_xpos[site].tolist()
            wx, wy, wz = r0 * fx + r1 * fy + r2 * fz, r3 * fx + r4 * fy + r5 * fz, r6 * fx + r7 * fy + r8 * fz
            loads[side] = wz
            total[0] += wx
            total[1] += wy
            total[2] += wz
            total[3] += r0 * mx + r1 * my + r2 * mz + py * wz - pz * wy
            total[4] += r3 * mx + r4 * my + r5 * mz + pz * wx - px * wz
            total[5] += r6 * mx + r7 * my + r8 * mz + px * wy - py * wx
        self._loads_cache = cached = (key, loads, tuple(total))
        return cached[1], cached[2]

    def foot_contacts(self, min_force: float = 1e-6) -> dict[str, bool]:
        """Whether each foot box pushes on the floor (normal force > ``min_force`` [N])."""
        load = self._sole_loads()[0]
        return {side: load[side] > min_force for side in SIDES}

    def measured_zmp(self, min_force: float = 1e-6) -> np.ndarray | None:
        """Ground ZMP ``(x, y)`` [m] in the world from the foot wrenches;
        ``None`` when the feet carry no vertical load (< ``min_force`` [N])."""
        _, (_, _, fz, tx, ty, _) = self._sole_loads()
        if fz <= min_force:
            return None
        return np.array([-ty / fz, tx / fz])

    def non_foot_ground_contact(self) -> str | None:
        """Name of a body other than the feet touching the ground (floor or platform), or ``None``.

        From the contacts' geoms alone (no force computed: the bridge and the runs ask every
        step), in plain Python: a few contacts cost less than the numpy calls would."""
        for _, geom, _ in self._ground_pairs():
            if geom not in self._foot_row:
                return self.model.body(self.model.geom_bodyid[geom]).name
        return None

    def base_height(self) -> float:
        """Height of the base frame above the ground under it (floor or platform) [m]."""
        x, y, z = self.data.site_xpos[self.imu_site]
        return float(z) - self.config.ground_height(float(x), float(y))

    def sole_corners(self, side: str) -> np.ndarray:
        """(4, 2) world x-y of the sole's corners (``robot.feet[side].sole``), counter-clockwise
        seen from above while the sole faces down."""
        site = self.sole_sites[side]
        rot = self.data.site_xmat[site].reshape(3, 3)
        return self._sole_corners[side].dot(rot[:2].T) + self.data.site_xpos[site][:2]

    def support_polygon(self, min_force: float = 1e-6) -> np.ndarray:
        """Convex hull (k x 2, world x-y) of the soles that push on the floor (normal force >
        ``min_force`` [N]); (0, 2) when none does."""
        loaded = self.foot_contacts(min_force)
        pts = [self.sole_corners(side) for side in SIDES if loaded[side]]
        return convex_hull(np.vstack(pts)) if pts else np.zeros((0, 2))

    def sole_placement(self, side: str) -> pin.SE3:
        """World placement of the sole site (for comparisons with Pinocchio)."""
        site = self.sole_sites[side]
        return pin.SE3(self.data.site_xmat[site].reshape(3, 3).copy(), self.data.site_xpos[site].copy())

    def com(self) -> np.ndarray:
        """Whole-body centre of mass [m] (world)."""
        return self.data.subtree_com[self.root_body].copy()

    # -- rendering ---------------------------------------------------------------

    def render(
        self,
        width: int = 640,
        height: int = 480,
        camera: str | int | mujoco.MjvCamera | None = None,
        distance: float = 3.0,
        azimuth: float = 135.0,
        elevation: float = -15.0,
    ) -> np.ndarray:
        """RGB image ``(height, width, 3)`` uint8 rendered offscreen. Without
        ``camera``, a free camera looks at the base from ``distance`` [m],
        ``azimuth`` and ``elevation`` [deg]."""
        key = (int(width), int(height))
        renderer = self._renderers.get(key)
        if renderer is None:
            self.model.vis.global_.offwidth = max(self.model.vis.global_.offwidth, key[0])
            self.model.vis.global_.offheight = max(self.model.vis.global_.offheight, key[1])
            renderer = mujoco.Renderer(self.model, height=key[1], width=key[0])
            # Free the GL context before interpreter shutdown (osmesa fails later).
            weakref.finalize(self, renderer.close)
            self._renderers[key] = renderer
        if camera is None:
            camera = mujoco.MjvCamera()
            camera.type = mujoco.mjtCamera.mjCAMERA_FREE
            camera.lookat[:] = self.data.site_xpos[self.imu_site]
            camera.distance, camera.azimuth, camera.elevation = distance, azimuth, elevation
        renderer.update_scene(self.data, camera=camera)
        return renderer.render()

    def close(self) -> None:
        """Release the renderers' GL contexts."""
        for renderer in self._renderers.values():
            renderer.close()
        self._renderers.clear()
