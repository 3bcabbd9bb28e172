"""Walker configuration: ``config/walker.yaml`` -> frozen :class:`WalkerConfig`.

Keys equal field names; the loader is :mod:`zmp_walker.base.yaml_config`
(unknown key -> :class:`ConfigError` naming the file, the key and the closest
valid key; bounds from field metadata).  A ``robots:`` section holds per-robot
overlays merged recursively onto the base values::

    step_duration: 0.8
    robots:
      g1: {step_duration: 0.6, max_step_length: 0.15}

``load_walker_config(robot="g1")`` returns the base overlaid by ``robots.g1``.
Every overlay in the file is validated, not only the one requested.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from zmp_walker.base.errors import ConfigError
from zmp_walker.base.share import share_dir
from zmp_walker.base.yaml_config import closest_key, from_dict, read_yaml

__all__ = [
    "PreviewConfig",
    "MpcConfig",
    "StepAdjustmentConfig",
    "DisturbanceObserverConfig",
    "FastGaitConfig",
    "RecoveryStepConfig",
    "WalkerConfig",
    "load_walker_config",
    "default_config_path",
]


@dataclass(frozen=True)
class PreviewConfig:
    """Kajita's preview control (cart-table model, jerk input).

    Cost: ``sum Qe e_k^2 + R u_k^2`` with ``e`` the ZMP tracking error [m] and
    ``u`` the CoM jerk [m/s^3] (the integral form of Katayama/Kajita, so ``Qe``
    weighs the accumulated error).
    """

    horizon: float = field(default=1.6, metadata={"gt": 0.0})  # preview window [s]
    qe: float = field(default=1.0, metadata={"gt": 0.0})  # ZMP error weight [1/m^2]
    r: float = field(default=1e-6, metadata={"gt": 0.0})  # jerk weight [s^6/m^2]


@dataclass(frozen=True)
class MpcConfig:
    """Linear MPC on the LIPM (Wieber 2006, Herdt 2010).

    Cost per axis: ``jerk_weight/2 |J|^2 + zmp_weight/2 |Z - Z_ref|^2
    + velocity_weight/2 |Cdot - v_ref|^2 + footstep_weight/2 |F - F_plan|^2``
    subject to the ZMP inside the support polygon at every sample.
    """

    horizon_steps: int = field(default=16, metadata={"gt": 0})  # number of samples N [-]
    period: float = field(default=0.1, metadata={"gt": 0.0})  # sampling period T [s]
    jerk_weight: float = field(default=1e-5, metadata={"ge": 0.0})  # [s^6/m^2]
    zmp_weight: float = field(default=1.0, metadata={"ge": 0.0})  # [1/m^2]
    velocity_weight: float = field(default=0.0, metadata={"ge": 0.0})  # [s^2/m^2]
    footstep_weight: float = field(default=1.0, metadata={"ge": 0.0})  # auto footsteps only [1/m^2]
    auto_footsteps: bool = False  # footstep positions are decision variables (Herdt)


@dataclass(frozen=True)
class StepAdjustmentConfig:
    """DCM-based step adjustment (capture-point rule, see :mod:`zmp_walker.step_adjust`).

    In single support, with a measured state, the landing position of the
    swing foot moves by the DCM error the stance foot's ZMP cannot absorb
    before touchdown, ``e^{omega T_r} e - (e^{omega T_r} - 1) u`` [m], when it
    exceeds ``deadband``; the move stays within the step limits, with the
    fastest gait's step length (``fast_gait.max_step_length``, the leg's reach)
    in place of the nominal ``max_step_length``, and within ``max_adjustment``
    of the planned landing position.  With ``timing``, a
    move out of reach shortens the swing, to no less than
    ``min_swing_duration``, where the unreachable part plus ``timing_cost``
    times the shortening [s] is smallest (see :mod:`zmp_walker.step_adjust`).
    A move towards the stance foot's side larger than the landing's room before
    ``min_step_width``, which the swing leg cannot make without crossing the
    stance leg (it lands early beside it and the stance leg steps out next),
    may shorten that swing and the stance leg's step after
    it down to ``min_swing_duration_stance_side`` instead (None:
    ``min_swing_duration``), when it arises during the swing: a swing whose
    first adjustment already points that way keeps ``min_swing_duration``.
    In double support, the next lift-off waits, up to ``max_lift_off_delay``
    in all, while that step could not catch the DCM and the double support's
    ZMP can still bring it back (:meth:`PatternGenerator._delay_lift_off`).
    With ``anchor_tolerance`` set and measured feet, a sole that landed further
    than that from its footstep moves the plan onto where it landed
    (:meth:`PatternGenerator._anchor_touchdown`).  With ``max_swing_acc``, a
    landing move goes only as far as the re-planned swing gets without asking the
    foot for more acceleration, and a shorter swing must come down within it too.
    """

    enabled: bool = True
    max_adjustment: float = field(default=0.4, metadata={"ge": 0.0})  # max landing move from the plan [m]
    deadband: float = field(default=0.01, metadata={"ge": 0.0})  # smallest move applied [m]
    min_time_to_touchdown: float = field(default=0.1, metadata={"gt": 0.0})  # no move later in the swing [s]
    timing: bool = True  # shorten the swing when the landing move is out of reach
    min_swing_duration: float = field(default=0.35, metadata={"gt": 0.0})  # shortest swing, lift-off to touchdown [s]
    # shortest swing [s] when a push during the swing moves the landing towards the stance foot's side,
    # past min_step_width; None: min_swing_duration
    min_swing_duration_stance_side: float | None = field(default=None, metadata={"gt": 0.0})
    timing_cost: float = field(default=0.3, metadata={"ge": 0.0})  # unreachable move worth 1 s of shortening [m/s]
    max_lift_off_delay: float = field(default=0.0, metadata={"ge": 0.0})  # longest wait in double support [s]
    lift_off_notice: float = field(default=0.1, metadata={"gt": 0.0})  # a delayed lift-off stays this far ahead [s]
    # landing error [m] from which the plan is re-anchored on the landed sole; None: off
    anchor_tolerance: float | None = field(default=None, metadata={"ge": 0.0})
    anchor_delay: float = field(default=0.05, metadata={"ge": 0.0})  # after the touchdown: the sole has settled [s]
    # peak acceleration [m/s^2] a re-planned swing may ask of the foot (what the whole-body controller
    # tracks); None: no limit
    max_swing_acc: float | None = field(default=None, metadata={"gt": 0.0})


@dataclass(frozen=True)
class DisturbanceObserverConfig:
    """Observer of a constant disturbance on the DCM (see :class:`zmp_walker.dcm.DcmDisturbanceObserver`).

    A slope the walker does not know about, a CoM offset of the model or a
    steady external force all act as ``xi_dot = omega (xi - p) + d``; the
    observer estimates ``d`` and the DCM and CoM references move by
    ``-d / omega`` so that the ZMP stays where it was planned (the robot leans
    into the force instead of pushing its ZMP to the sole's edge).
    """

    enabled: bool = True
    bandwidth: float = field(default=1.5, metadata={"gt": 0.0})  # observer poles (double) [rad/s]
    max_offset: float = field(default=0.15, metadata={"ge": 0.0})  # largest reference shift [m]


@dataclass(frozen=True)
class RecoveryStepConfig:
    """A recovery step from standing (needs a measured state in ``cycle()`` and the step
    adjustment, :class:`StepAdjustmentConfig`).

    Standing, when the measured DCM (less the slope lean) is more than ``threshold`` outside
    the hull of the soles (the ZMP alone cannot stop it), the walker starts a walk of two
    steps in place: the foot nearer to the DCM lifts off after a ``start_duration`` weight
    shift for a ``swing_duration`` swing, the other foot closes beside it, then the walker
    stands again.  The step adjustment moves the first landing under the DCM during the swing
    (and shortens the swing when that is out of reach); the closing step follows it.  A DCM
    still outside when the walker stands again starts another recovery.
    """

    enabled: bool = False
    threshold: float = field(default=0.01, metadata={"ge": 0.0})  # DCM outside the soles' hull [m]
    start_duration: float = field(default=0.05, metadata={"gt": 0.0})  # weight shift before lift-off [s]
    swing_duration: float = field(default=0.4, metadata={"gt": 0.0})  # lift-off to touchdown [s]


@dataclass(frozen=True)
class FastGaitConfig:
    """The gait above the nominal speed ``v0 = max_step_length / step_duration`` (of the
    :class:`WalkerConfig`), up to ``v1 = fast_gait.max_step_length / fast_gait.step_duration``.

    Between the two, the step length grows linearly with the forward speed, from the nominal
    ``max_step_length`` at ``v0`` to ``fast_gait.max_step_length`` at ``v1``, and the step
    duration is step length / speed: it shortens monotonically from ``step_duration`` to
    ``fast_gait.step_duration`` (cadence and step length both grow with speed, as in human
    and humanoid walking).  At ``v0`` and below the gait is the nominal one, untouched.
    Both None: no fast gait (``v0`` is the walker's limit).
    """

    step_duration: float | None = field(default=None, metadata={"gt": 0.0})  # at the fastest gait [s]
    max_step_length: float | None = field(default=None, metadata={"gt": 0.0})  # at the fastest gait [m]

    @property
    def enabled(self) -> bool:
        return self.step_duration is not None and self.max_step_length is not None


@dataclass(frozen=True)
class WalkerConfig:
    """Walking pattern generator parameters (SI units).

    A step lasts ``step_duration``: single support for
    ``(1 - double_support_ratio) * step_duration``, then double support; a
    step between two heights (up or down) lasts ``level_change_duration_factor``
    times longer (:func:`zmp_walker.schedule.step_duration`).
    Step limits are expressed in the frame of the stance foot: the swing foot
    lands at ``(dx, +-width, dyaw)`` with ``|dx| <= max_step_length``,
    ``min_step_width <= width <= max_step_width``, ``|dyaw| <= max_step_yaw``.
    """

    dt: float = field(default=0.001, metadata={"gt": 0.0})  # control period, one cycle() [s]
    planner_period: float = field(default=0.01, metadata={"gt": 0.0})  # CoM planner period [s]
    gravity: float = field(default=9.81, metadata={"gt": 0.0})  # [m/s^2]
    com_height: float | None = field(default=None, metadata={"gt": 0.0})  # [m], None: initial CoM
    # half step [m] a slope's lean keeps within reach: CoM lowered (dcm.slope_height); None: height kept
    slope_reach: float | None = field(default=None, metadata={"ge": 0.0})
    step_duration: float = field(default=0.8, metadata={"gt": 0.0})  # [s]
    double_support_ratio: float = field(default=0.2, metadata={"gt": 0.0, "lt": 1.0})  # [-]
    start_duration: float = field(default=1.5, metadata={"gt": 0.0})  # initial double support [s]
    stop_duration: float = field(default=1.0, metadata={"gt": 0.0})  # final double support [s]
    step_height: float = field(default=0.05, metadata={"ge": 0.0})  # swing apex [m]
    level_change_duration_factor: float = field(default=1.0, metadata={"ge": 1.0})  # step up/down slower [-]
    max_step_length: float = field(default=0.25, metadata={"gt": 0.0})  # [m]
    max_step_width: float = field(default=0.35, metadata={"gt": 0.0})  # [m]
    min_step_width: float = field(default=0.15, metadata={"gt": 0.0})  # [m]
    max_step_yaw: float = field(default=0.3, metadata={"ge": 0.0})  # [rad]
    foot_separation: float | None = field(default=None, metadata={"gt": 0.0})  # [m], None: initial
    foot_clearance: float = field(default=0.01, metadata={"ge": 0.0})  # min gap between soles [m]
    edge_margin: float = field(default=0.05, metadata={"ge": 0.0})  # sole <-> terrain height change [m]
    zmp_margin: float = field(default=0.01, metadata={"ge": 0.0})  # sole shrink for the ZMP [m]
    method: Literal["preview", "mpc"] = "preview"
    k_dcm: float = field(default=2.0, metadata={"gt": 1.0})  # DCM feedback gain [-]
    clamp_zmp: bool = True  # clamp the corrected ZMP to the support polygon
    preview: PreviewConfig = field(default_factory=PreviewConfig)
    mpc: MpcConfig = field(default_factory=MpcConfig)
    step_adjustment: StepAdjustmentConfig = field(default_factory=StepAdjustmentConfig)
    disturbance_observer: DisturbanceObserverConfig = field(default_factory=DisturbanceObserverConfig)
    fast_gait: FastGaitConfig = field(default_factory=FastGaitConfig)
    recovery_step: RecoveryStepConfig = field(default_factory=RecoveryStepConfig)

    def validate(self) -> None:
        """Cross-field checks, run by the loader and by :meth:`replace`."""
        if self.min_step_width >= self.max_step_width:
            raise ConfigError(
                f"'min_step_width' ({self.min_step_width}) must be < 'max_step_width' ({self.max_step_width})"
            )
        if self.foot_separation is not None and not (
            self.min_step_width <= self.foot_separation <= self.max_step_width
        ):
            raise ConfigError(
                f"'foot_separation' ({self.foot_separation}) must lie in "
                f"[min_step_width, max_step_width] = [{self.min_step_width}, {self.max_step_width}]"
            )
        if self.planner_period < self.dt:
            raise ConfigError(f"'planner_period' ({self.planner_period}) must be >= 'dt' ({self.dt})")
        if self.preview.horizon < self.planner_period:
            raise ConfigError(f"'preview.horizon' ({self.preview.horizon}) must be >= 'planner_period'")
        fast = self.fast_gait
        if (fast.step_duration is None) != (fast.max_step_length is None):
            raise ConfigError(
                "'fast_gait.step_duration' and 'fast_gait.max_step_length' are set together or not at all"
            )
        if fast.enabled:
            if fast.step_duration > self.step_duration:
                raise ConfigError(
                    f"'fast_gait.step_duration' ({fast.step_duration}) must be <= "
                    f"'step_duration' ({self.step_duration})"
                )

    @property
    def nominal_speed(self) -> float:
        """Fastest forward speed of the nominal gait, ``max_step_length / step_duration`` [m/s]."""
        return self.max_step_length / self.step_duration

    @property
    def max_speed(self) -> float:
        """Fastest forward speed [m/s]: that of the fast gait when there is one, else :attr:`nominal_speed`."""
        fast = self.fast_gait
        if not fast.enabled:
            return self.nominal_speed
        return max(self._fast_length / fast.step_duration, self.nominal_speed)

    @property
    def _fast_length(self) -> float:
        """The fast gait's step length limit [m], never below ``max_step_length`` (a scenario may
        lengthen the nominal one, e.g. for a step onto a platform)."""
        return max(self.fast_gait.max_step_length, self.max_step_length)

    def gait(self, vx: float) -> tuple[float, float] | None:
        """The fast gait for the forward speed ``vx`` [m/s] (:class:`FastGaitConfig`): ``(step
        duration [s], step length limit [m])``, or None when ``|vx|`` is within the nominal
        gait's speed (or there is no fast gait): the nominal gait, ``step_duration`` and
        ``max_step_length``.  Beyond :attr:`max_speed`, the fastest gait (the planner clamps
        the step)."""
        v = abs(float(vx))
        v0, v1 = self.nominal_speed, self.max_speed
        if not self.fast_gait.enabled or v <= v0 + 1e-12 or v1 <= v0:
            return None
        s = min((v - v0) / (v1 - v0), 1.0)
        length = self.max_step_length + s * (self._fast_length - self.max_step_length)
        duration = length / min(v, v1)
        return duration, self._fast_length

    @property
    def step_reach(self) -> float:
        """The longest step [m] (``|dx|``) the gait plans, the fast gait's when there is one: how
        far a landing moved by the step adjustment may go (the nominal ``max_step_length`` held
        G1's landing in place under a forward push and it fell at 0.25 m/s)."""
        return self._fast_length if self.fast_gait.enabled else self.max_step_length

    @property
    def single_support_duration(self) -> float:
        """Swing time of one step [s]."""
        return (1.0 - self.double_support_ratio) * self.step_duration

    @property
    def double_support_duration(self) -> float:
        """Double support between two steps [s]."""
        return self.double_support_ratio * self.step_duration

    def velocity_limits(self, separation: float) -> dict[str, tuple[float, str]]:
        """The largest velocity command the footstep planner follows without clamping a step
        (:meth:`zmp_walker.footsteps.FootstepPlanner.velocity_step`), with how it is derived.

        Args:
            separation: lateral distance between the soles at the start [m] (``foot_separation``
                wins when set; clipped to the step widths as the planner does).

        Returns:
            ``{"vx": (limit [m/s], formula), "vy": (limit [m/s], formula), "yaw_rate": (limit [rad/s], formula)}``.
        """
        T = self.step_duration
        sep = self.foot_separation if self.foot_separation is not None else separation
        sep = min(max(sep, self.min_step_width), self.max_step_width)
        fast = self.fast_gait
        if fast.enabled and self.max_speed > self.nominal_speed:
            vx = (
                self.max_speed,
                f"fast_gait.max_step_length / fast_gait.step_duration = "
                f"{fast.max_step_length:g} m / {fast.step_duration:g} s",
            )
        else:
            vx = (self.nominal_speed, f"max_step_length / step_duration = {self.max_step_length:g} m / {T:g} s")
        return {
            "vx": vx,
            "vy": (
                (self.max_step_width - sep) / (2.0 * T),
                f"(max_step_width - foot separation) / (2 step_duration) = "
                f"({self.max_step_width:g} m - {sep:.3g} m) / (2 x {T:g} s)",
            ),
            "yaw_rate": (
                self.max_step_yaw / (2.0 * T),
                f"max_step_yaw / (2 step_duration) = {self.max_step_yaw:g} rad / (2 x {T:g} s)",
            ),
        }

    def replace(self, **changes) -> WalkerConfig:
        """Copy with ``changes`` applied and validated (nested: pass a dataclass)."""
        new = dataclasses.replace(self, **changes)
        new.validate()
        return new


def default_config_path() -> Path:
    """``config/walker.yaml`` of the source checkout or of the installed share of
    ``whole_body_control`` (which installs zmp_walker), else of a ``zmp_walker`` share."""
    looked = []
    for package in ("whole_body_control", "zmp_walker"):
        try:
            path = share_dir(package) / "config" / "walker.yaml"
        except ConfigError as exc:
            looked.append(str(exc))
            continue
        if path.is_file():
            return path
        looked.append(str(path))
    raise ConfigError(f"cannot find config/walker.yaml: {'; '.join(looked)}")


def _overlay(base: dict, over: dict) -> dict:
    """Recursive merge: mappings merge key by key, other values replace."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _overlay(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def load_walker_config(
    path: str | Path | None = None,
    robot: str | None = None,
    overlay: dict | None = None,
    overlay_source: str = "",
) -> WalkerConfig:
    """Load and validate the walker configuration.

    Args:
        path: YAML file; ``None`` is :func:`default_config_path`.
        robot: name of an overlay in the ``robots:`` section, or ``None`` for
            the base values.
        overlay: a robot's section from elsewhere (its robot file), merged onto the
            base values in place of the file's ``robots.<robot>`` section;
            ``overlay_source`` says where it comes from in messages.

    Raises:
        ConfigError: unreadable file, unknown key, value out of bounds,
            unknown robot; the message names the file and the key.
    """
    path = Path(path) if path is not None else default_config_path()
    data = read_yaml(path)
    robots = data.pop("robots", None) or {}
    if not isinstance(robots, dict):
        raise ConfigError(f"{path}: 'robots' must be a mapping of robot name -> overrides")
    base = from_dict(WalkerConfig, data, str(path))
    configs = {}
    for name, over in robots.items():
        if not isinstance(over, dict):
            raise ConfigError(f"{path}: 'robots.{name}' must be a mapping")
        configs[name] = from_dict(WalkerConfig, _overlay(data, over), str(path), f"robots.{name}")
    if overlay is not None:
        if not isinstance(overlay, dict):
            raise ConfigError(f"{overlay_source}: the walker section must be a mapping")
        return from_dict(WalkerConfig, _overlay(data, overlay), f"{path} (with {overlay_source})")
    if robot is None:
        return base
    if robot not in configs:
        raise ConfigError(f"{path}: no 'robots.{robot}' section{closest_key(robot, configs)}")
    return configs[robot]
