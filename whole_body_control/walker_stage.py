"""The walker stage: the pattern generator seeded from the controller's state, and its
reference turned into the whole-body controller's (no simulation, no ROS).

Used by the in-process runner (:mod:`whole_body_control.runs.walk`), the control
stage (:mod:`whole_body_control.control_stage`) and the walker node; the hardware
nodes import it, so it loads neither MuJoCo nor the runners (``test/test_layers.py``).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from whole_body_control.controller import Reference, WholeBodyController
from whole_body_control.errors import ConfigError
from whole_body_control.robot import RobotModel, check_sole_margin
from whole_body_control.tasks import FrameReference
from zmp_walker import FootPose, PatternGenerator, SoleRect, WalkerConfig, WalkerReference, load_walker_config
from zmp_walker.base.yaml_config import read_yaml
from zmp_walker.config import default_config_path

SIDES = ("left", "right")
COM_MODES = ("reference", "dcm")


def yaw_of(rotation: np.ndarray) -> float:
    """Heading [rad] of a rotation matrix: the angle of its x axis in the xy plane."""
    return math.atan2(rotation[1, 0], rotation[0, 0])


def rot_z(yaw: float) -> np.ndarray:
    """Rotation matrix [-] of ``yaw`` [rad] about the world z axis."""
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def walker_to_reference(
    ref: WalkerReference,
    contacts: dict[str, bool] | None = None,
    com_mode: str = "reference",
    measured_com: np.ndarray | None = None,
    measured_vcom: np.ndarray | None = None,
) -> Reference:
    """Controller reference for one tick from the walker's reference (world frame, SI).

    * ``left_foot`` / ``right_foot`` frame references: the walker's sole
      references (position, rotation, velocities, accelerations);
    * contacts: ``contacts`` if given (the caller's lift-off anticipation),
      else the walker's ``in_contact`` flags;
    * ``torso`` / ``base`` orientation references: upright, heading the mean
      yaw of the two soles, turning at their mean yaw rate;
    * CoM: ``"reference"``: the planned position, velocity and acceleration;
      ``"dcm"``: the walker's ``com_acc`` (its DCM feedback on the measured
      state) with the horizontal position and velocity references set to the
      measured ones (``measured_com``, ``measured_vcom``), so that the CoM
      task adds no second horizontal feedback.
    """
    if com_mode not in COM_MODES:
        raise ConfigError(f"com_mode must be one of {COM_MODES}, got '{com_mode}'")
    frames: dict[str, FrameReference] = {}
    for side in SIDES:
        f = ref.feet[side]
        frames[f"{side}_foot"] = FrameReference(
            np.array(f.pos, dtype=float),
            np.array(f.rotation, dtype=float),
            np.array(f.lin_vel, dtype=float),
            np.array(f.ang_vel, dtype=float),
            np.array(f.lin_acc, dtype=float),
            np.array(f.ang_acc, dtype=float),
        )
    heading = reference_heading(ref)
    yaw_rate = 0.5 * sum(float(ref.feet[s].ang_vel[2]) for s in SIDES)
    yaw_acc = 0.5 * sum(float(ref.feet[s].ang_acc[2]) for s in SIDES)
    upright = FrameReference(
        np.array(ref.com_pos, dtype=float),  # position is masked out: orientation tasks
        rot_z(heading),
        ang_vel=np.array([0.0, 0.0, yaw_rate]),
        ang_acc=np.array([0.0, 0.0, yaw_acc]),
    )
    frames["torso"] = upright
    frames["base"] = upright
    com_pos = np.array(ref.com_pos, dtype=float)
    com_vel = np.array(ref.com_vel, dtype=float)
    com_acc = np.array(ref.com_acc, dtype=float)
    if com_mode == "dcm":
        if measured_com is None or measured_vcom is None:
            raise ConfigError("com_mode 'dcm' needs the measured CoM position and velocity")
        com_pos[:2] = measured_com[:2]
        com_vel[:2] = measured_vcom[:2]
    if contacts is None:
        contacts = {s: bool(ref.feet[s].in_contact) for s in SIDES}
    return Reference(com_pos=com_pos, com_vel=com_vel, com_acc=com_acc, frames=frames, contacts=dict(contacts))


def reference_heading(ref: WalkerReference) -> float:
    """Heading [rad] of the walker's reference: the mean yaw of the two soles (the upright
    torso and base references of :func:`walker_to_reference` head there)."""
    yaws = [yaw_of(ref.feet[s].rotation) for s in SIDES]
    return math.atan2(sum(math.sin(y) for y in yaws), sum(math.cos(y) for y in yaws))


def walker_config_for(robot: RobotModel) -> tuple[WalkerConfig, str]:
    """The walker configuration for ``robot`` and where it comes from (for messages).

    The base values come from ``robot.walker_config_path`` (``--walker-config``) or
    ``config/walker.yaml``; onto them goes the robot file's ``walker`` section when it
    has one, else that file's ``robots.<name>`` section; with ``--walker-config`` and
    neither, the file's base values are used as they are.

    Raises:
        ConfigError: no section for the robot (the message says where to add one), a bad
            key or value (naming the file and the key), a ZMP margin that leaves no room
            on a sole.
    """
    path = robot.walker_config_path or default_config_path()
    section, where = robot.section("walker")
    if section is not None:
        config = load_walker_config(path, overlay=section, overlay_source=where)
        source = f"{path} (with {where})"
    else:
        robots = read_yaml(path).get("robots") or {}
        if isinstance(robots, dict) and robot.name in robots:
            config, source = load_walker_config(path, robot=robot.name), f"{path}: robots.{robot.name}"
        elif robot.walker_config_path is not None:
            config, source = load_walker_config(path), str(path)
        else:
            raise ConfigError(
                f"no walker section for robot '{robot.name}': add a 'walker:' mapping to {robot.source} "
                f"(merged onto the base values of {path}), a 'robots.{robot.name}' section to {path}, "
                "or pass --walker-config FILE"
            )
    check_sole_margin(robot, config.zmp_margin, "zmp_margin", "ZMP", source)
    return config, source


def velocity_command_problems(
    robot: RobotModel, config: WalkerConfig, source: str, vx: float, vy: float, yaw_rate: float
) -> list[str]:
    """What is beyond the walker's limits in the velocity command ``(vx, vy, yaw_rate)`` [m/s, m/s,
    rad/s] (:meth:`WalkerConfig.velocity_limits`, the fast gait's forward limit when there is
    one): one message per component, naming the limit's formula and ``source`` (file and key).
    The footstep planner would clamp every step to the limit.  ``wbc walk`` refuses such a
    command; the ROS walker node warns and walks at the limit."""
    left, right = (robot.sole_placement(side, robot.q_ref).translation for side in ("left", "right"))
    limits = config.velocity_limits(float(abs(left[1] - right[1])))
    problems = []
    for flag, value, key, unit in (
        ("--speed", vx, "vx", "m/s"),
        ("--vy", vy, "vy", "m/s"),
        ("--yaw-rate", yaw_rate, "yaw_rate", "rad/s"),
    ):
        limit, formula = limits[key]
        if abs(value) > limit + 1e-9:
            problems.append(
                f"{flag} {value:g} {unit} is beyond the walker's limit for robot '{robot.name}': "
                f"|{flag}| <= {formula} = {limit:.3g} {unit} ({source}); the planner would clamp every step to it"
            )
    return problems


def sole_rect(robot: RobotModel, side: str) -> SoleRect:
    s = robot.feet[side].sole
    return SoleRect(s.x_min, s.x_max, s.y_min, s.y_max)


def make_walker(
    robot: RobotModel, ctrl: WholeBodyController, config: WalkerConfig | None = None, ground_height=None
) -> PatternGenerator:
    """Pattern generator seeded at the controller's current state (sole poses and CoM);
    ``ground_height(x, y) -> z`` [m] is the terrain for its footsteps (None: flat)."""
    config = config if config is not None else walker_config_for(robot)[0]
    feet = {}
    for side in SIDES:
        oMf = ctrl.state.placement(robot.foot_frame_ids[side])
        feet[side] = FootPose(oMf.translation.copy(), yaw_of(oMf.rotation))
    return PatternGenerator(
        config,
        feet["left"],
        feet["right"],
        ctrl.state.com.copy(),
        sole_rect(robot, "left"),
        sole_rect(robot, "right"),
        ground_height,
    )


def contacts_ahead(walker: PatternGenerator, t: float, lead: float) -> dict[str, bool]:
    """Contacts for the controller: a foot is released ``lead`` [s] before the walker lifts it."""
    now = walker.schedule.contacts_at(t)
    ahead = walker.schedule.contacts_at(t + lead)
    # release early (ahead says off while now on); never add early
    return {s: now[s] and ahead[s] for s in SIDES}


def walker_reference(walker: PatternGenerator, t: float, lead: float, measured=None) -> WalkerReference:
    """The walker's reference at ``t`` with the contact flags the controller should use
    (:func:`contacts_ahead`: a foot released ``lead`` [s] before its lift-off)."""
    return released_ahead(walker.cycle(t, measured), walker, t, lead)


def released_ahead(ref: WalkerReference, walker: PatternGenerator, t: float, lead: float) -> WalkerReference:
    """``ref`` (the walker's at ``t``) with :func:`contacts_ahead`'s contact flags."""
    contacts = contacts_ahead(walker, t, lead)
    if all(bool(ref.feet[s].in_contact) == contacts[s] for s in SIDES):
        return ref  # no foot released early: no copy (about 10 us each)
    feet = {s: dataclasses.replace(ref.feet[s], in_contact=bool(contacts[s])) for s in SIDES}
    return dataclasses.replace(ref, feet=feet)
