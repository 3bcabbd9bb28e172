"""Whole-body controller configuration: ``config/wbc.yaml`` -> frozen dataclasses.

The hierarchy is a list of strict priority levels; each level holds named
tasks with a weight (relative importance inside the level) and PD gains.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from whole_body_control import yaml_config
from whole_body_control.errors import ConfigError

if TYPE_CHECKING:
    from whole_body_control.robot import RobotModel

TaskType = Literal["com", "frame", "posture", "angular_momentum", "force_regularization"]

#: Symbolic frame names resolved against the robot config.
FRAME_ALIASES = ("left_foot", "right_foot", "torso", "base")


@dataclass(frozen=True)
class TaskConfig:
    """One task.

    ``kp`` [1/s^2] and ``kd`` [1/s] are PD gains on the task error; the task
    asks for ``a_ref + kp * e + kd * de``.  ``weight`` [-] scales the task's
    squared residual inside its level.  ``frame`` (frame tasks) is a URDF frame
    name or one of ``left_foot``, ``right_foot``, ``torso``, ``base``;
    ``mask`` selects the controlled axes (x, y, z, roll, pitch, yaw).
    ``zmp`` (CoM tasks) asks for the horizontal CoM acceleration together with
    the centroidal angular momentum rate, so that the contacts' ZMP is the one
    the acceleration implies without angular momentum (see
    :class:`whole_body_control.tasks.ComTask`); False asks for the acceleration
    alone.
    ``hip_acc`` [m/s^2] (CoM tasks with ``zmp``): while the controller's guard moves
    the ZMP the CoM acceleration implies onto the support polygon, the horizontal
    CoM acceleration it took away, up to this norm, is asked for as well, so that the
    centroidal angular momentum (the upper body) gives what the ZMP cannot: the hip
    strategy.  Only in double support; meanwhile the frame tasks other than the
    feet (torso and base attitude) are left out, so that the upper body turns.
    0 turns it off; the ZMP stays on the polygon either way.
    ``max_ang_acc`` [rad/s^2] (frame tasks other than the feet): bound on the angular
    acceleration the task asks for in double support (0: none); never on one foot.
    """

    type: TaskType
    weight: float = field(default=1.0, metadata={"ge": 0.0})
    kp: float = field(default=0.0, metadata={"ge": 0.0})
    kd: float | None = field(default=None, metadata={"ge": 0.0})  # None: 2 sqrt(kp), critical damping
    frame: str | None = None
    mask: tuple[bool, bool, bool, bool, bool, bool] = (True, True, True, True, True, True)
    zmp: bool = False
    hip_acc: float = field(default=0.0, metadata={"ge": 0.0})
    max_ang_acc: float = field(default=0.0, metadata={"ge": 0.0})

    def validate(self) -> None:
        if self.type == "frame" and not self.frame:
            raise ConfigError("a task of type 'frame' needs 'frame'")
        if self.type != "frame" and self.frame is not None:
            raise ConfigError(f"'frame' is only for tasks of type 'frame', not '{self.type}'")
        if self.type != "com" and self.zmp:
            raise ConfigError(f"'zmp' is only for tasks of type 'com', not '{self.type}'")
        if self.hip_acc > 0.0 and not self.zmp:
            raise ConfigError(f"'hip_acc' ({self.hip_acc}) needs 'zmp: true' on a task of type 'com'")
        if self.type != "frame" and self.max_ang_acc > 0.0:
            raise ConfigError(f"'max_ang_acc' is only for tasks of type 'frame', not '{self.type}'")
        if not any(self.mask):
            raise ConfigError("'mask' selects no axis")

    @property
    def kd_value(self) -> float:
        return 2.0 * self.kp**0.5 if self.kd is None else self.kd


@dataclass(frozen=True)
class LevelConfig:
    """A strict priority level: tasks solved together, weighted."""

    tasks: dict[str, TaskConfig]

    def validate(self) -> None:
        if not self.tasks:
            raise ConfigError("a level has no task")


@dataclass(frozen=True)
class ContactConfig:
    """6D foot contacts.

    mu: friction coefficient [-] (None: the robot config's ``friction``).
    f_min / f_max: normal force bounds [N] of an established contact.
    transition_time: force ramp duration when a contact is added or removed [s].
    kd: velocity feedback on the contact acceleration constraint [1/s].
    yaw_friction: share of the (inner pyramid) friction coefficient the sole corners may use
        against yaw torque in the contact wrench cone, in (0, 1] [-] (see :mod:`whole_body_control.contacts`).
    cop_margin: the CoP is kept this far inside the sole rectangle [m] (a CoP on the
        edge leaves the foot on a line contact: any torque error tips or spins it).
    """

    mu: float | None = field(default=None, metadata={"gt": 0.0})
    f_min: float = field(default=5.0, metadata={"ge": 0.0})
    f_max: float = field(default=3000.0, metadata={"gt": 0.0})
    transition_time: float = field(default=0.05, metadata={"ge": 0.0})
    kd: float = field(default=0.0, metadata={"ge": 0.0})
    yaw_friction: float = field(default=1.0, metadata={"gt": 0.0, "le": 1.0})
    cop_margin: float = field(default=0.0, metadata={"ge": 0.0})

    def validate(self) -> None:
        if self.f_min >= self.f_max:
            raise ConfigError(f"f_min ({self.f_min}) must be below f_max ({self.f_max})")


@dataclass(frozen=True)
class SolverConfig:
    """The level QPs' solver and the hierarchy's numerical tolerances.

    backend: "daqp" (dual active set, default: about 8 times faster than proxsuite on
        this controller's level QPs, measured by ``bench/hqp_replay.py``; proxsuite takes
        over when it fails) or "proxsuite" (proxsuite only).
    eps_abs, max_iter: proxsuite's tolerance and iteration budget.
    """

    backend: Literal["daqp", "proxsuite"] = "daqp"
    eps_abs: float = field(default=1e-7, metadata={"gt": 0.0})
    max_iter: int = field(default=200, metadata={"gt": 0})
    regularization: float = field(default=1e-8, metadata={"ge": 0.0})  # Tikhonov on each level [-]
    joint_limit_horizon: float = field(default=0.05, metadata={"gt": 0.0})  # [s] for acceleration bounds


@dataclass(frozen=True)
class SafetyConfig:
    """Fallback ladder and output guards.

    max_reuse_ticks: ticks the last good solution is reused after a failure.
    max_com_height: CoM references above this height are clamped [m] (None: 1.2 x reference).
    support_margin: CoM reference kept this far inside the support polygon [m].
    dynamics_tolerance: residual of M a + h - S^T tau - J^T f above which a solution is rejected.
    max_torque_rate: rate [N m/s] per joint at which the output torque moves toward damping
        when a tick cannot use the QP (rejected state, failed solves, latched damping): the
        torque never steps; each tick moves it by at most this times dt.
    """

    max_reuse_ticks: int = field(default=20, metadata={"ge": 0})
    max_com_height: float | None = field(default=None, metadata={"gt": 0.0})
    support_margin: float = field(default=0.01, metadata={"ge": 0.0})
    dynamics_tolerance: float = field(default=1e-6, metadata={"gt": 0.0})
    max_torque_rate: float = field(default=5000.0, metadata={"gt": 0.0})  # [N m/s]


@dataclass(frozen=True)
class WbcConfig:
    """Contents of ``config/wbc.yaml``."""

    levels: dict[str, LevelConfig]  # name -> level, highest priority first
    contacts: ContactConfig = field(default_factory=ContactConfig)
    solver: SolverConfig = field(default_factory=SolverConfig)
    safety: SafetyConfig = field(default_factory=SafetyConfig)
    control_period: float = field(default=0.001, metadata={"gt": 0.0})  # [s]

    def validate(self) -> None:
        if not self.levels:
            raise ConfigError("'levels' is empty")
        names = set()
        for level in self.levels.values():
            for name in level.tasks:
                if name in names:
                    raise ConfigError(f"task name '{name}' appears in two levels")
                names.add(name)

    def task(self, name: str) -> TaskConfig:
        for level in self.levels.values():
            if name in level.tasks:
                return level.tasks[name]
        raise ConfigError(f"no task '{name}'{yaml_config.closest_key(name, self.task_names())}")

    def task_names(self) -> list[str]:
        return [n for level in self.levels.values() for n in level.tasks]

    def level_of(self, name: str) -> int:
        for i, level in enumerate(self.levels.values()):
            if name in level.tasks:
                return i
        raise ConfigError(f"no task '{name}'{yaml_config.closest_key(name, self.task_names())}")


def default_path() -> Path:
    from whole_body_control.robot import share_dir

    return share_dir() / "config" / "wbc.yaml"


def load_wbc_config(path: str | Path | None = None, robot: str | None = None) -> WbcConfig:
    """Load ``config/wbc.yaml`` (or ``path``).

    The file holds the base hierarchy; a top-level ``robots: {name: {...}}``
    section overlays per-robot values (mappings merge, lists replace).
    """
    path = Path(path) if path is not None else default_path()
    data = yaml_config.read_yaml(path)
    overlays = data.pop("robots", None) or {}
    if not isinstance(overlays, dict):
        raise ConfigError(f"{path}: 'robots' must be a mapping of robot name to overrides")
    if robot is not None and robot in overlays:
        data = merge(data, overlays[robot])
    return yaml_config.from_dict(WbcConfig, data, str(path))


def merge(base: dict, overlay: dict) -> dict:
    """Recursive merge: mappings merge, anything else replaces."""
    out = dict(base)
    for key, value in (overlay or {}).items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def wbc_config_for(robot: RobotModel) -> WbcConfig:
    """The hierarchy for ``robot``, checked against it.

    The base file is ``robot.wbc_config_path`` (``--wbc-config``) or ``config/wbc.yaml``;
    onto it goes the robot file's ``wbc`` section when it has one, else the base
    file's ``robots.<name>`` section (mappings merge, other values replace).

    Raises:
        ConfigError: a bad key or value (naming the file and the key), a frame task on a
            frame the robot does not have, a CoP margin that leaves no room on a sole.
    """
    path = robot.wbc_config_path or default_path()
    data = yaml_config.read_yaml(path)
    overlays = data.pop("robots", None) or {}
    if not isinstance(overlays, dict):
        raise ConfigError(f"{path}: 'robots' must be a mapping of robot name to overrides")
    overlay, where = robot.section("wbc")
    if overlay is None and robot.name in overlays:
        overlay, where = overlays[robot.name], f"{path}: robots.{robot.name}"
    source = f"{path} (with {where})" if overlay is not None else str(path)
    config = yaml_config.from_dict(WbcConfig, merge(data, overlay or {}), source)
    check_for_robot(config, robot, source)
    return config


def check_for_robot(config: WbcConfig, robot: RobotModel, source: str) -> None:
    """What a hierarchy asks of a robot, checked where both are known (see :func:`wbc_config_for`)."""
    frames = [f.name for f in robot.model.frames]
    for level_name, level in config.levels.items():
        for task_name, task in level.tasks.items():
            if task.type == "frame" and task.frame not in FRAME_ALIASES and not robot.model.existFrame(task.frame):
                hint = yaml_config.closest_key(task.frame, [*FRAME_ALIASES, *frames])
                raise ConfigError(
                    f"{source}: levels.{level_name}.tasks.{task_name}.frame: unknown frame '{task.frame}'; "
                    f"use one of {', '.join(FRAME_ALIASES)} or a frame of {robot.urdf_path.name}"
                    + (hint if hint.startswith(" (did you mean") else "")
                )
    from whole_body_control.robot import check_sole_margin

    check_sole_margin(robot, config.contacts.cop_margin, "contacts.cop_margin", "CoP", source)
