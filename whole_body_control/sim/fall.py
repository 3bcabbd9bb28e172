"""Fall detection in the simulation (the in-process runs and the MuJoCo bridge).

Fall criteria (any of them):
    * the base frame below the robot's ``fall_height``;
    * a body other than the feet touching the ground;
    * the capture point more than 5 cm outside the support polygon for 0.2 s
      (the capture point of the simulated gravity, which a slope scenario tilts;
      not while the robot is lifted: then the feet carry nothing, see
      :mod:`whole_body_control.lift`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from whole_body_control import geometry
from whole_body_control.errors import SimulationUnstable
from whole_body_control.robot import RobotModel
from whole_body_control.sim.simulation import Simulation


@dataclass
class FallDetector:
    """Latches the first fall and why."""

    robot: RobotModel
    cp_margin: float = 0.05  # [m] capture point outside the polygon by more than this...
    cp_duration: float = 0.2  # [s] ...for this long
    reason: str | None = None
    time: float | None = None
    _cp_out_since: float | None = None

    def update(
        self, t: float, sim: Simulation, com: np.ndarray, vcom: np.ndarray, polygon: np.ndarray, lifted: bool = False
    ) -> bool:
        """Whether the robot has fallen (latched); ``lifted``: it is carried (no capture point criterion)."""
        if self.reason is not None:
            return True
        base_z = sim.base_height()
        if base_z < self.robot.config.fall_height:
            return self._fall(t, f"base height {base_z:.3f} m below {self.robot.config.fall_height} m")
        body = sim.non_foot_ground_contact()
        if body is not None:
            return self._fall(t, f"body '{body}' touches the ground")
        if lifted:
            self._cp_out_since = None
        elif len(polygon) >= 3:
            # LIPM along the simulated gravity (a tilted one on a simulated slope): the
            # capture point is where the ZMP must be to stop, c + v / omega + g_xy / omega^2
            gx, gy, gz = sim.model.opt.gravity.tolist()
            omega2 = abs(gz) / max(float(com[2]) - polygon_z(sim), 0.1)
            omega = math.sqrt(omega2)
            cp = (com[0] + vcom[0] / omega + gx / omega2, com[1] + vcom[1] / omega + gy / omega2)
            if geometry.signed_distance(polygon, cp) > self.cp_margin:
                if self._cp_out_since is None:
                    self._cp_out_since = t
                elif t - self._cp_out_since >= self.cp_duration:
                    return self._fall(t, "capture point outside the support polygon for 0.2 s")
            else:
                self._cp_out_since = None
        return False

    def unstable(self, t: float, error: Exception) -> None:
        """The simulation broke down at ``t`` (``SimulationUnstable``): the end of the run,
        a fall unless one was latched before."""
        if self.reason is None:
            self._fall(t, f"simulation unstable: {error}")

    def step(self, sim: Simulation, t: float, tau: np.ndarray) -> bool:
        """Step ``sim`` with the joint torques ``tau``; False when MuJoCo met a bad state
        (recorded by :meth:`unstable`): nothing is left to simulate."""
        try:
            sim.step(tau)
        except SimulationUnstable as exc:
            self.unstable(t, exc)
            return False
        return True

    def _fall(self, t: float, reason: str) -> bool:
        self.reason, self.time = reason, t
        return True


def polygon_z(sim: Simulation) -> float:
    """Height [m] of the support: the lowest loaded sole (the lowest sole when none is loaded)."""
    loaded = [s for s, on in sim.foot_contacts().items() if on] or ["left", "right"]
    return min(float(sim.data.site_xpos[sim.sole_sites[s], 2]) for s in loaded)
