"""Robot models: a URDF loaded into Pinocchio with a free-flyer root, plus the
per-robot facts the controller needs (feet, soles, friction, reference posture,
torque limits, safe-mode damping) read from ``config/robots/<name>.yaml``.

Conventions (converted nowhere else):
    Pinocchio free-flyer ``q = [x y z qx qy qz qw, joints]`` and
    ``v = [v_lin, w_ang (local frame), joint velocities]``.
    ``joint_names`` lists the actuated joints in Pinocchio order; other
    programs map to it by name (:meth:`RobotModel.joint_index`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import site
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pinocchio as pin

from whole_body_control import yaml_config
from whole_body_control.errors import ConfigError, ModelError
from zmp_walker.base.share import share_dir  # the source checkout, or <prefix>/share/whole_body_control

ERD_PREFIX = "example-robot-data:"


@functools.cache
def example_robot_data_dir() -> Path:
    """``.../share/example-robot-data`` from the ``example-robot-data`` pip package
    (cmeel prefix), ``$EXAMPLE_ROBOT_DATA_DIR`` or a ROS install."""
    candidates = []
    if os.environ.get("EXAMPLE_ROBOT_DATA_DIR"):
        candidates.append(Path(os.environ["EXAMPLE_ROBOT_DATA_DIR"]))
    for sp in [*site.getsitepackages(), site.getusersitepackages(), *sys.path]:
        candidates.append(Path(sp) / "cmeel.prefix" / "share" / "example-robot-data")
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) + ["/opt/openrobots"]:
        if prefix:
            candidates.append(Path(prefix) / "share" / "example-robot-data")
    for c in candidates:
        if (c / "robots").is_dir():
            return c
    raise ModelError(
        "example-robot-data not found: install it with 'pip install example-robot-data' "
        "or set EXAMPLE_ROBOT_DATA_DIR to its share/example-robot-data directory"
    )


@dataclass(frozen=True)
class Sole:
    """Sole rectangle in the foot (sole) frame [m]; the sole frame's z is the ground normal."""

    x_min: float
    x_max: float
    y_min: float
    y_max: float

    def validate(self) -> None:
        if not (self.x_min < self.x_max and self.y_min < self.y_max):
            raise ConfigError(f"sole rectangle is empty: {self}")

    def corners(self) -> np.ndarray:
        """4x3 corners in the sole frame, counter-clockwise."""
        return np.array(
            [
                [self.x_max, self.y_max, 0.0],
                [self.x_min, self.y_max, 0.0],
                [self.x_min, self.y_min, 0.0],
                [self.x_max, self.y_min, 0.0],
            ]
        )


@dataclass(frozen=True)
class Foot:
    """A foot. ``frame`` is the sole frame; when ``parent`` is given the frame is
    created on that URDF link at ``offset`` [m] (same orientation as the link)."""

    frame: str
    sole: Sole
    parent: str | None = None
    offset: tuple[float, float, float] = (0.0, 0.0, 0.0)


# how much a period of safe-mode damping may take off a light joint's velocity: 1 / this
# (see RobotModel.safe_damping; in 40 random configurations of Talos, G1 and wbc_humanoid,
# 3 kept the coupled chains stable up to 5 ms, 4 up to 10 ms, 2.5 not G1's at 2 ms)
SAFE_DAMPING_MARGIN = 4.0


@dataclass(frozen=True)
class Damping:
    """Safe-mode joint damping ``tau = -kd * v`` [N m s / rad]."""

    default: float = field(default=5.0, metadata={"ge": 0.0})
    joints: dict[str, float] = field(default_factory=dict, metadata={"ge": 0.0})


@dataclass(frozen=True)
class Armature:
    """Rotor inertia reflected through each joint's gear [kg m^2], added to the joint's
    diagonal of the mass matrix (Pinocchio's ``model.armature``, MuJoCo's joint armature).
    URDFs leave it out; on a light joint it is most of the inertia the motor moves."""

    default: float = field(default=0.0, metadata={"ge": 0.0})
    joints: dict[str, float] = field(default_factory=dict, metadata={"ge": 0.0})


@dataclass(frozen=True)
class RobotConfig:
    """Contents of ``config/robots/<name>.yaml``."""

    name: str
    description: str
    urdf: str  # path relative to the package share, absolute, or "example-robot-data:<path>"
    base_frame: str  # the floating-base link (pelvis)
    torso_frame: str  # link used for torso orientation tasks and pushes
    left_foot: Foot
    right_foot: Foot
    friction: float = field(default=0.7, metadata={"gt": 0.0})  # mu the controller assumes
    reference_posture: dict[str, float] = field(default_factory=dict)  # [rad]; others 0
    torque_limits: dict[str, float] = field(default_factory=dict, metadata={"gt": 0.0})  # [N m] overrides
    default_torque_limit: float = field(default=100.0, metadata={"gt": 0.0})  # where the URDF has none
    damping: Damping = field(default_factory=Damping)
    armature: Armature = field(default_factory=Armature)
    fall_height: float = field(default=0.4, metadata={"gt": 0.0})  # base below this [m] is a fall
    locked_joints: tuple[str, ...] = ()  # joints removed from the model (grippers)
    # the robot's WBC overlay (merged onto config/wbc.yaml) and walker section (merged onto the
    # base values of config/walker.yaml): a mapping, or a YAML file holding it (relative to this file)
    wbc: str | dict[str, Any] | None = None
    walker: str | dict[str, Any] | None = None


class RobotModel:
    """A humanoid: Pinocchio model with free-flyer, feet and limits.

    Attributes:
        config: the :class:`RobotConfig`.
        urdf_path: resolved URDF file.
        model: ``pin.Model`` with a free-flyer root and the sole frames.
        joint_names: actuated joints in Pinocchio order (``nv - 6`` of them).
        feet: ``{"left": Foot, "right": Foot}``.
        foot_frame_ids: ``{"left": id, "right": id}`` Pinocchio frame ids.
        tau_max: torque limits [N m] per actuated joint.
        kd_safe: safe-mode damping [N m s / rad] per actuated joint.
        q_ref: reference configuration with both soles flat at z = 0.
        mass: total mass [kg].
    """

    def __init__(
        self,
        config: RobotConfig,
        source: str = "<config>",
        wbc_config: str | Path | None = None,
        walker_config: str | Path | None = None,
    ):
        self.config = config
        self.source = source
        self._built_from = (config, source, wbc_config, walker_config)
        # the WBC and walker files in place of config/wbc.yaml and config/walker.yaml (--wbc-config, --walker-config)
        self.wbc_config_path = Path(wbc_config) if wbc_config is not None else None
        self.walker_config_path = Path(walker_config) if walker_config is not None else None
        self.urdf_path = resolve_urdf(config.urdf, source)
        self.package_dirs = package_dirs_for(self.urdf_path)
        check_inertials(self.urdf_path)
        try:
            model = pin.buildModelFromUrdf(str(self.urdf_path), pin.JointModelFreeFlyer())
        except Exception as exc:  # Pinocchio raises plain RuntimeError/ValueError
            raise ModelError(f"{self.urdf_path}: Pinocchio cannot load it: {exc}") from exc
        if config.locked_joints:
            ids = []
            for name in config.locked_joints:
                if not model.existJointName(name):
                    raise ConfigError(f"{source}: locked_joints: no joint '{name}' in {self.urdf_path.name}")
                ids.append(model.getJointId(name))
            model = pin.buildReducedModel(model, ids, pin.neutral(model))
        self.model = model
        self.feet = {"left": config.left_foot, "right": config.right_foot}
        self.foot_frame_ids = {side: self._add_foot_frame(side, foot) for side, foot in self.feet.items()}
        for key, frame in (("base_frame", config.base_frame), ("torso_frame", config.torso_frame)):
            if not model.existFrame(frame):
                raise ConfigError(f"{source}: {key}: no frame '{frame}' in {self.urdf_path.name}")
        self.joint_names: list[str] = [model.names[j] for j in range(2, model.njoints)]
        for j in range(2, model.njoints):
            if model.joints[j].nv != 1:
                raise ModelError(f"{self.urdf_path}: joint '{model.names[j]}' is not 1-DoF")
        self._check_joint_keys("reference_posture", config.reference_posture)
        self._check_joint_keys("torque_limits", config.torque_limits)
        self._check_joint_keys("damping.joints", config.damping.joints)
        self._check_joint_keys("armature.joints", config.armature.joints)
        self.armature = np.array([config.armature.joints.get(n, config.armature.default) for n in self.joint_names])
        model.armature[6:] = self.armature  # in every mass matrix Pinocchio computes (crba, computeAllTerms, Minv)
        self.nq, self.nv, self.na = model.nq, model.nv, model.nv - 6
        effort = np.array(model.effortLimit[6:], dtype=float)
        effort[~np.isfinite(effort) | (effort <= 0)] = config.default_torque_limit
        self.tau_max = np.array([config.torque_limits.get(n, e) for n, e in zip(self.joint_names, effort)])
        self.kd_safe = np.array([config.damping.joints.get(n, config.damping.default) for n in self.joint_names])
        self.q_lower = np.array(model.lowerPositionLimit[7:], dtype=float)
        self.q_upper = np.array(model.upperPositionLimit[7:], dtype=float)
        self.v_max = np.array(model.velocityLimit[6:], dtype=float)
        self.data = model.createData()
        self.mass = float(pin.computeTotalMass(model))
        self.q_ref = self._reference_configuration()
        self._inertia: np.ndarray | None = None  # per joint, see _joint_inertia

    # -- construction helpers -------------------------------------------------

    def __reduce__(self):
        """Pickled as what it was built from (a few kB), rebuilt from the same files when
        unpickled: the whole model pickles to 7 MB (Talos), and sending it to the
        controller's solve process held the node 0.5 s, the new interpreter reading it only
        after its own start-up.  (A RobotModel is not changed after it is built.)"""
        return (RobotModel, self._built_from)

    def _check_joint_keys(self, key: str, mapping: dict) -> None:
        for name in mapping:
            if name not in self.joint_names:
                raise ConfigError(
                    f"{self.source}: {key}: unknown joint '{name}'{yaml_config.closest_key(name, self.joint_names)}"
                )

    def _add_foot_frame(self, side: str, foot: Foot) -> int:
        model = self.model
        if foot.parent is None:
            if not model.existFrame(foot.frame):
                raise ConfigError(f"{self.source}: {side}_foot.frame: no frame '{foot.frame}' in {self.urdf_path.name}")
            return model.getFrameId(foot.frame)
        if not model.existFrame(foot.parent):
            raise ConfigError(f"{self.source}: {side}_foot.parent: no link '{foot.parent}' in {self.urdf_path.name}")
        parent = model.frames[model.getFrameId(foot.parent)]
        placement = parent.placement * pin.SE3(np.eye(3), np.array(foot.offset, dtype=float))
        frame = pin.Frame(
            foot.frame, parent.parentJoint, model.getFrameId(foot.parent), placement, pin.FrameType.OP_FRAME
        )
        return model.addFrame(frame)

    def _reference_configuration(self) -> np.ndarray:
        q = pin.neutral(self.model)
        for name, value in self.config.reference_posture.items():
            q[self.joint_q_index(name)] = value
        pin.framesForwardKinematics(self.model, self.data, q)
        soles = [self.data.oMf[i].translation for i in self.foot_frame_ids.values()]
        q[2] -= min(s[2] for s in soles)
        q[0] -= 0.5 * (soles[0][0] + soles[1][0])
        q[1] -= 0.5 * (soles[0][1] + soles[1][1])
        return q

    # -- safe state ---------------------------------------------------------------

    def safe_damping(self, period: float) -> np.ndarray:
        """Safe-mode damping gains [N m s / rad] for ``tau = -kd v`` held over ``period`` [s]:
        ``kd_safe`` on the heavy joints, less on the light ones, so that the safe state is
        stable at the rate it is commanded.

        Held over a period, ``-kd v`` changes a joint's velocity by ``a = kd period / I``
        times itself (``I`` its inertia with the rest of the robot free, at ``q_ref``): from
        ``a > 1`` on it reverses the velocity every period, from ``a > 2`` on it grows it too.  At 1 kHz a G1 wrist
        roll without its rotor inertia (``armature``) has ``a`` = 8 (``I`` = 0.37 g m^2,
        ``kd`` = 3; 0.77 with it), a Talos gripper 17: the damping
        made them flap at 50 rad/s between the torque limits within 5 ms, and a MuJoCo run
        went unstable.  Here ``kd / (1 + SAFE_DAMPING_MARGIN a)``: a joint's velocity shrinks
        by at most ``1 / SAFE_DAMPING_MARGIN`` of itself per period, never reverses, and the
        coupled chains stay stable in random configurations (``test_robots``); a joint with
        ``a`` << 1 (legs, torso) keeps its ``kd_safe``.
        """
        if not (math.isfinite(period) and period > 0):
            raise ValueError(f"safe_damping: period must be finite and > 0 [s], got {period!r}")
        a = self.kd_safe * period / self._joint_inertia()
        return self.kd_safe / (1.0 + SAFE_DAMPING_MARGIN * a)

    def _joint_inertia(self) -> np.ndarray:
        """Per actuated joint, its inertia [kg m^2] with every other joint and the base free
        (``1 / (M^-1)_jj`` at ``q_ref``), computed once."""
        if self._inertia is None:
            data = self.model.createData()
            pin.computeMinverse(self.model, data, self.q_ref)
            minv = np.triu(data.Minv) + np.triu(data.Minv, 1).T
            self._inertia = 1.0 / np.diag(minv)[6:].copy()
        return self._inertia

    # -- name maps --------------------------------------------------------------

    def joint_index(self, name: str) -> int:
        """Index of actuated joint ``name`` in ``joint_names`` (and in ``tau``)."""
        try:
            return self.joint_names.index(name)
        except ValueError:
            raise ModelError(f"unknown joint '{name}'{yaml_config.closest_key(name, self.joint_names)}") from None

    def joint_q_index(self, name: str) -> int:
        """Index of joint ``name`` in the Pinocchio configuration ``q``."""
        return 7 + self.joint_index(name)

    def joint_v_index(self, name: str) -> int:
        """Index of joint ``name`` in the Pinocchio velocity ``v``."""
        return 6 + self.joint_index(name)

    @property
    def name(self) -> str:
        return self.config.name

    def section(self, key: str) -> tuple[dict | None, str]:
        """The robot file's ``wbc`` or ``walker`` section and where it comes from (for messages):
        ``(None, "")`` when absent; a path in the file is read relative to the file."""
        value = getattr(self.config, key)
        if value is None:
            return None, ""
        if isinstance(value, dict):
            return value, f"{self.source}: {key}"
        path = Path(value)
        if not path.is_absolute():
            path = Path(self.source).parent / path
        return yaml_config.read_yaml(path), str(path)

    def sole_placement(self, side: str, q: np.ndarray) -> pin.SE3:
        pin.framesForwardKinematics(self.model, self.data, q)
        return self.data.oMf[self.foot_frame_ids[side]].copy()

    def load_bearing_sole(self, side: str) -> tuple[Sole, str]:
        """The part of ``side``'s sole rectangle where the leg can hold the whole weight, and the
        joint that bounds it most ("" when the whole sole holds).

        Statics at the reference posture: the weight ``m g`` as a force along the
        sole's normal at a point ``p`` of the sole asks ``tau = J^T w(p)`` of the joints (the
        links' own weight left out), linear in ``p``.  Each edge moves inwards, to the
        millimetre, until every joint is within its torque limit at both of the edge's corners.
        The controller keeps the ZMP on it in single support (``WholeBodyController._guard_polygon``):
        G1's 35 N m ankle pitch holds 327 N only 0.107 m ahead of the ankle, its sole reaches 0.12.
        """
        sole = self.feet[side].sole
        data = self.model.createData()
        pin.computeJointJacobians(self.model, data, self.q_ref)
        J = pin.getFrameJacobian(self.model, data, self.foot_frame_ids[side], pin.LOCAL)[:, 6:]
        weight = self.mass * 9.81
        # tau(p) = weight (J_z + p_y J_wx - p_x J_wy)
        base, per_x, per_y = weight * J[2], -weight * J[4], weight * J[3]

        def interval(offset: np.ndarray, slope: np.ndarray) -> tuple[float, float]:
            """Values s with |offset + slope s| <= tau_max for every joint that s moves."""
            moved = np.abs(slope) > 1e-9
            ends = np.stack(((-self.tau_max - offset)[moved], (self.tau_max - offset)[moved])) / slope[moved]
            return float(ends.min(axis=0).max(initial=-np.inf)), float(ends.max(axis=0).min(initial=np.inf))

        xs = [interval(base + per_y * y, per_x) for y in (sole.y_min, sole.y_max)]
        x_min = max(sole.x_min, math.ceil(max(lo for lo, _ in xs) * 1000) / 1000)
        x_max = min(sole.x_max, math.floor(min(hi for _, hi in xs) * 1000) / 1000)
        ys = [interval(base + per_x * x, per_y) for x in (x_min, x_max)]
        y_min = max(sole.y_min, math.ceil(max(lo for lo, _ in ys) * 1000) / 1000)
        y_max = min(sole.y_max, math.floor(min(hi for _, hi in ys) * 1000) / 1000)
        corners = sole.corners()
        load = np.abs(base + np.outer(corners[:, 0], per_x) + np.outer(corners[:, 1], per_y)) / self.tau_max
        worst = int(np.argmax(load.max(axis=0)))
        return Sole(x_min, x_max, y_min, y_max), (self.joint_names[worst] if load.max() > 1.0 else "")

    def summary(self) -> dict:
        return {
            "robot": self.name,
            "nq": self.nq,
            "nv": self.nv,
            "joints": self.na,
            "mass_kg": round(self.mass, 3),
            "urdf": str(self.urdf_path),
        }


def resolve_urdf(spec: str, source: str = "<config>") -> Path:
    """The URDF file: ``example-robot-data:<path>``, an absolute path, or a path relative to the
    robot YAML ``source`` (to the project's share when there is no file)."""
    if spec.startswith(ERD_PREFIX):
        path = example_robot_data_dir() / spec[len(ERD_PREFIX) :]
    else:
        path = Path(spec)
        if not path.is_absolute():
            base = Path(source).parent if Path(source).is_file() else share_dir()
            path = base / path
    if not path.is_file():
        raise ConfigError(f"{source}: urdf: file not found: {path}")
    return path


def _origin(el) -> pin.SE3:
    """``<origin xyz rpy>`` of a URDF element (identity when absent)."""
    origin = el.find("origin") if el is not None else None
    if origin is None:
        return pin.SE3.Identity()
    xyz = np.array([float(x) for x in origin.get("xyz", "0 0 0").split()])
    rpy = np.array([float(x) for x in origin.get("rpy", "0 0 0").split()])
    return pin.SE3(pin.rpy.rpyToMatrix(*rpy), xyz)


def _moments(inertia: np.ndarray) -> np.ndarray:
    """Principal moments [kg m^2] of a 3x3 inertia, ascending."""
    return np.linalg.eigvalsh(0.5 * (inertia + inertia.T))


def _balanced(moments: np.ndarray) -> bool:
    tol = 1e-9 * max(float(moments[-1]), 0.0) + 1e-12
    return bool(moments[0] >= -tol and moments[0] + moments[1] >= moments[2] - tol)


def _fix_sphere(mass: float) -> str:
    return f"ixx = iyy = izz = {0.4 * mass * 0.05**2:.3g} (a 5 cm solid sphere of {mass:g} kg)"


def _link_inertia(link) -> tuple[float, np.ndarray, np.ndarray]:
    """A URDF link's mass [kg], CoM [m] and inertia at the CoM [kg m^2], in the link frame
    (zero for a link without ``<inertial>``).

    Raises:
        ValueError: what is wrong and the proposed fix.
    """
    inertial = link.find("inertial")
    if inertial is None:
        return 0.0, np.zeros(3), np.zeros((3, 3))
    mass_el, el = inertial.find("mass"), inertial.find("inertia")
    try:
        mass = float(mass_el.get("value")) if mass_el is not None else 0.0
        keys = ("ixx", "iyy", "izz", "ixy", "ixz", "iyz")
        ixx, iyy, izz, ixy, ixz, iyz = (float(el.get(k, 0.0)) if el is not None else 0.0 for k in keys)
        origin = _origin(inertial)
    except (TypeError, ValueError):
        raise ValueError("mass, inertia or origin is not a number") from None
    inertia = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    if not (math.isfinite(mass) and np.all(np.isfinite(inertia))):
        raise ValueError(f"mass {mass} kg or inertia not finite; fix: finite values")
    moments = _moments(inertia)
    if mass < 0.0:
        raise ValueError(f"mass {mass:g} kg must be >= 0; fix: mass {-mass:g} if the sign is a typo")
    if mass == 0.0 and inertia.any():
        raise ValueError(
            f"mass 0 kg with principal moments {_fmt(moments)} kg m^2; fix: give the link its mass, "
            "or zero its inertia if it has none"
        )
    if not _balanced(moments):
        fix = (
            _fix_sphere(mass)
            if moments[0] < 0.0
            else f"ixx = iyy = izz = {float(moments.sum()) / 3.0:.3g} (their mean, as MuJoCo's balanceinertia)"
        )
        raise ValueError(
            f"principal moments {_fmt(moments)} kg m^2 must be >= 0 with A + B >= C; "
            f"fix: the link's real inertia, or {fix}"
        )
    return mass, origin.translation, origin.rotation @ inertia @ origin.rotation.T


def check_inertials(urdf_path: Path) -> None:
    """Every link's mass [kg] and inertia [kg m^2] in the URDF, all at once.

    Each link: mass >= 0, principal moments >= 0 satisfying the triangle
    inequality ``A + B >= C`` (a physical body), and no inertia without mass.
    Each moving body (a link on a non-fixed joint, the root included, with the
    links fixed to it merged in, as MuJoCo merges them): mass > 0 and principal
    moments > 0 (MuJoCo cannot simulate a moving body without them; Pinocchio
    would divide by them).

    Raises:
        ModelError: naming the URDF, every bad link with its values, the allowed
            range and a proposed fix.
    """
    try:
        root = ET.parse(urdf_path).getroot()
    except (ET.ParseError, OSError) as exc:
        raise ModelError(f"{urdf_path}: cannot read the URDF: {exc}") from exc
    problems: list[str] = []
    inertias: dict[str, tuple[float, np.ndarray, np.ndarray]] = {}  # mass, CoM, inertia at the CoM (link frame)
    reported: set[str] = set()
    for link in root.iter("link"):
        name = link.get("name", "?")
        try:
            inertias[name] = _link_inertia(link)
        except ValueError as exc:
            problems.append(f"  link '{name}': {exc}")
            reported.add(name)
    # merge the links fixed to a moving body into it (as MuJoCo does), then check the moving bodies
    fixed_to: dict[str, tuple[str, pin.SE3]] = {}  # child -> (parent, placement of the child in the parent)
    moving: dict[str, str] = {}  # child link of a moving joint -> the joint
    for joint in root.iter("joint"):
        parent, child = joint.find("parent"), joint.find("child")
        if parent is None or child is None:
            continue
        if joint.get("type") == "fixed":
            try:
                fixed_to[child.get("link")] = (parent.get("link"), _origin(joint))
            except ValueError:
                problems.append(f"  joint '{joint.get('name')}': origin is not a number")
        else:
            moving[child.get("link")] = joint.get("name", "?")
    bodies: dict[str, list] = {}
    for link in root.iter("link"):
        placement, body, name = pin.SE3.Identity(), link.get("name", "?"), link.get("name", "?")
        seen = set()
        while body in fixed_to and body not in seen:  # climb the fixed joints to the moving body
            seen.add(body)
            parent, oMc = fixed_to[body]
            placement, body = oMc * placement, parent
        members = bodies.setdefault(body, [])
        if name in reported:
            reported.add(body)  # its body is incomplete: not checked again
        elif name in inertias:
            mass, com, inertia = inertias[name]
            R = placement.rotation
            members.append((mass, R @ com + placement.translation, R @ inertia @ R.T))
    for name, members in bodies.items():
        if name in reported:
            continue
        what = f"joint '{moving[name]}'" if name in moving else "the root, on the free flyer"
        mass = sum(m for m, _, _ in members)
        if mass <= 0.0:
            problems.append(
                f"  link '{name}' ({what}) moves but has no mass, the links fixed to it included: it needs "
                "mass > 0 [kg]; fix: give it (or a link fixed to it) its mass and inertia"
            )
            continue
        com = sum(m * c for m, c, _ in members) / mass
        inertia = sum(
            I + m * (float((c - com) @ (c - com)) * np.eye(3) - np.outer(c - com, c - com)) for m, c, I in members
        )
        moments = _moments(inertia)
        if moments[0] <= 1e-12:
            problems.append(
                f"  link '{name}' ({what}) moves with principal moments {_fmt(moments)} kg m^2, the links fixed "
                f"to it included: each must be > 0; fix: the link's real inertia, or {_fix_sphere(mass)}"
            )
    if problems:
        raise ModelError(
            f"{urdf_path}: {len(problems)} link(s) with bad inertial parameters (mass >= 0 [kg], principal moments "
            ">= 0 [kg m^2] with A + B >= C, and a moving body needs mass > 0 and moments > 0):\n" + "\n".join(problems)
        )


def _fmt(values) -> str:
    return "[" + ", ".join(f"{v:.3g}" for v in values) + "]"


def package_dirs_for(urdf_path: Path) -> list[Path]:
    """Directories that ``package://`` URIs resolve against."""
    dirs = [urdf_path.parent.parent, urdf_path.parent]
    try:
        erd = example_robot_data_dir()
        dirs.append(erd.parent)  # package://example-robot-data/...
    except ModelError:
        pass
    return dirs


def resolve_package_uri(uri: str, package_dirs: list[Path]) -> Path:
    """``package://pkg/rel/path`` -> an existing file under one of ``package_dirs``."""
    if not uri.startswith("package://"):
        return Path(uri)
    rel = uri[len("package://") :]
    for d in package_dirs:
        for candidate in (d / rel, d / rel.split("/", 1)[-1]):
            if candidate.is_file():
                return candidate
    raise ModelError(f"cannot resolve mesh '{uri}' under {', '.join(map(str, package_dirs))}")


def robots_dir() -> Path:
    return share_dir() / "config" / "robots"


def available_robots() -> list[str]:
    return sorted(p.stem for p in robots_dir().glob("*.yaml"))


def load_config(name_or_path: str | Path) -> tuple[RobotConfig, str]:
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        path = robots_dir() / f"{name_or_path}.yaml"
        if not path.is_file():
            names = available_robots()
            raise ConfigError(f"unknown robot '{name_or_path}'{yaml_config.closest_key(str(name_or_path), names)}")
    return yaml_config.load(RobotConfig, path), str(path)


@functools.cache
def _load_cached(name_or_path: str, wbc_config: str | None, walker_config: str | None) -> RobotModel:
    config, source = load_config(name_or_path)
    return RobotModel(config, source, wbc_config, walker_config)


def load_robot(
    name_or_path: str | Path,
    fresh: bool = True,
    wbc_config: str | Path | None = None,
    walker_config: str | Path | None = None,
) -> RobotModel:
    """Load a robot by name (``talos``, ``g1``, ...) or YAML path.

    ``wbc_config`` / ``walker_config``: files in place of ``config/wbc.yaml`` and
    ``config/walker.yaml`` for this robot (see :func:`whole_body_control.config.wbc_config_for`
    and :func:`whole_body_control.runs.walk.walker_config_for`).
    With ``fresh=False`` a cached instance is shared (read-only use only).
    """
    for flag, path in (("--wbc-config", wbc_config), ("--walker-config", walker_config)):
        if path is not None and not Path(path).is_file():
            raise ConfigError(f"{flag}: file not found: {path}")
    if not fresh:
        return _load_cached(
            str(name_or_path), None if wbc_config is None else str(wbc_config), walker_config and str(walker_config)
        )
    config, source = load_config(name_or_path)
    return RobotModel(config, source, wbc_config, walker_config)


def with_overrides(config: RobotConfig, **changes) -> RobotConfig:
    return dataclasses.replace(config, **changes)


def check_sole_margin(robot: RobotModel, margin: float, key: str, point: str, source: str) -> None:
    """A margin [m] kept inside every sole (``key``, e.g. ``contacts.cop_margin``) must leave
    room for the ``point`` (CoP, ZMP): less than half the sole's shorter side.

    Raises:
        ConfigError: naming ``source``, the key, the sole and the largest margin allowed.
    """
    for side, foot in robot.feet.items():
        s = foot.sole
        room = 0.5 * min(s.x_max - s.x_min, s.y_max - s.y_min)
        if margin >= room:
            raise ConfigError(
                f"{source}: {key} ({margin:g} m) leaves no room for the {point} on the {side} sole: "
                f"{side}_foot.sole in {robot.source} is {s.x_max - s.x_min:.4g} m x {s.y_max - s.y_min:.4g} m, "
                f"so {key.split('.')[-1]} must be < {room:.4g} m (half its shorter side), or the sole larger"
            )
