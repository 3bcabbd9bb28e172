"""Lift detection from the foot force sensors: the robot is carried (crane, a
person), not standing on its feet.

What a real robot can measure for it is the normal force under each sole (foot
force/torque sensors; in the simulation :meth:`Simulation.foot_wrenches`, the
same wrench).  The robot is *lifted* when, while the controller expects at
least one foot on the ground, every foot carries less than ``threshold`` times
the robot's weight for ``debounce`` [s] without interruption.  It is *down*
again when a foot carries more than ``recontact`` times the weight for
``debounce`` [s] (hysteresis: the threshold to come back is higher than the
one to leave, so that noise around one level does not toggle the state).

A walking robot never unloads both feet (no flight phase) and a fall on the
feet does not either, so the thresholds can be small; the debounce filters a
foot that bounces at touchdown or a sensor spike.  While lifted, the capture
point criterion of :class:`~whole_body_control.sim.fall.FallDetector` is void
(the feet carry nothing: the support polygon does not hold the robot).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from whole_body_control.errors import ConfigError

GRAVITY = 9.81


@dataclass
class LiftDetector:
    """Debounced "both feet unloaded" detector.

    Args:
        weight: the robot's weight [N] (mass times g).
        threshold: a foot below ``threshold * weight`` [N] normal force is unloaded.
        recontact: a foot above ``recontact * weight`` [N] is loaded again.
        debounce: how long [s] the condition must hold without interruption.
    """

    weight: float
    threshold: float = 0.07
    recontact: float = 0.15
    debounce: float = 0.05
    lifted: bool = False
    time: float | None = None  # when the current lift was declared [s]
    _since: float | None = None  # start of the uninterrupted condition [s]

    def __post_init__(self) -> None:
        if not self.weight > 0:
            raise ConfigError(f"LiftDetector: weight must be > 0, got {self.weight}")
        if not 0 < self.threshold <= self.recontact < 1:
            raise ConfigError(
                f"LiftDetector: need 0 < threshold <= recontact < 1, got {self.threshold}, {self.recontact}"
            )
        if not self.debounce >= 0:
            raise ConfigError(f"LiftDetector: debounce must be >= 0, got {self.debounce}")

    @classmethod
    def for_robot(cls, robot, **kwargs) -> LiftDetector:
        return cls(robot.mass * GRAVITY, **kwargs)

    def update(self, t: float, normal_forces: Iterable[float], expects_contact: bool = True) -> bool:
        """Feed the feet's normal forces [N] at time ``t`` [s]; returns whether the robot is lifted.

        ``expects_contact``: whether the controller has a foot in contact (a
        robot that is meant to have no contact cannot be detected as lifted).
        """
        forces = [float(f) for f in normal_forces]
        if self.lifted:
            condition = any(f > self.recontact * self.weight for f in forces)
        else:
            condition = expects_contact and all(f < self.threshold * self.weight for f in forces)
        if not condition:
            self._since = None
            return self.lifted
        if self._since is None:
            self._since = t
        if t - self._since >= self.debounce - 1e-9:
            self.lifted = not self.lifted
            self.time = t if self.lifted else None
            self._since = None
        return self.lifted

    def reset(self) -> None:
        self.lifted, self.time, self._since = False, None, None
