"""zmp_walker: ROS-free walking pattern generator for humanoids (numpy, scipy, proxsuite).

Path of the data: :class:`PatternGenerator` plans footsteps
(:mod:`.footsteps`), times them (:mod:`.schedule`), builds a ZMP reference
(:mod:`.zmp_reference`), plans the CoM with preview control (:mod:`.preview`)
or an MPC (:mod:`.mpc`), adds swing-foot trajectories (:mod:`.swing`) and DCM
feedback (:mod:`.dcm`), and returns a :class:`WalkerReference` per tick.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from zmp_walker import _blas  # noqa: F401  (first: OpenBLAS's kernels, before numpy loads it)

# the public names and their modules, imported on first use: ``import zmp_walker`` (which
# ``import whole_body_control`` does, for the OpenBLAS pin) stays free of numpy and scipy
_EXPORTS = {
    "zmp_walker.config": ("MpcConfig", "PreviewConfig", "WalkerConfig", "load_walker_config"),
    "zmp_walker.errors": ("ConfigError", "InfeasibleMpc", "PlanningError", "WalkerError"),
    "zmp_walker.footsteps": ("Footstep", "FootstepPlanner"),
    "zmp_walker.generator": ("FootRef", "MeasuredState", "PatternGenerator", "WalkerReference"),
    "zmp_walker.geometry": ("FootPose", "Polygon", "SoleRect"),
    "zmp_walker.schedule": ("Phase", "Schedule"),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}

if TYPE_CHECKING:
    from zmp_walker.config import MpcConfig, PreviewConfig, WalkerConfig, load_walker_config
    from zmp_walker.errors import ConfigError, InfeasibleMpc, PlanningError, WalkerError
    from zmp_walker.footsteps import Footstep, FootstepPlanner
    from zmp_walker.generator import FootRef, MeasuredState, PatternGenerator, WalkerReference
    from zmp_walker.geometry import FootPose, Polygon, SoleRect
    from zmp_walker.schedule import Phase, Schedule


def __getattr__(name: str):
    if name not in _MODULE_OF:
        raise AttributeError(f"module 'zmp_walker' has no attribute '{name}'")
    value = getattr(importlib.import_module(_MODULE_OF[name]), name)
    globals()[name] = value
    return value


__all__ = [
    "ConfigError",
    "FootPose",
    "FootRef",
    "Footstep",
    "FootstepPlanner",
    "InfeasibleMpc",
    "MeasuredState",
    "MpcConfig",
    "PatternGenerator",
    "Phase",
    "PlanningError",
    "Polygon",
    "PreviewConfig",
    "Schedule",
    "SoleRect",
    "WalkerConfig",
    "WalkerError",
    "WalkerReference",
    "load_walker_config",
]
