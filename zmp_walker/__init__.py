"""zmp_walker: ROS-free walking pattern generator for humanoids (numpy, scipy, proxsuite).

Path of the data: :class:`PatternGenerator` plans footsteps
(:mod:`.footsteps`), times them (:mod:`.schedule`), builds a ZMP reference
(:mod:`.zmp_reference`), plans the CoM with preview control (:mod:`.preview`)
or an MPC (:mod:`.mpc`), adds swing-foot trajectories (:mod:`.swing`) and DCM
feedback (:mod:`.dcm`), and returns a :class:`WalkerReference` per tick.
"""

from zmp_walker import _blas  # noqa: F401  (first: OpenBLAS's kernels, before numpy loads it)
from zmp_walker.config import MpcConfig, PreviewConfig, WalkerConfig, load_walker_config
from zmp_walker.errors import ConfigError, InfeasibleMpc, PlanningError, WalkerError
from zmp_walker.footsteps import Footstep, FootstepPlanner
from zmp_walker.generator import FootRef, MeasuredState, PatternGenerator, WalkerReference
from zmp_walker.geometry import FootPose, Polygon, SoleRect
from zmp_walker.schedule import Phase, Schedule

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
