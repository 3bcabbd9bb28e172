"""Exception hierarchy of whole_body_control: one root, specific leaves.

The root :class:`WbcError` and :class:`ConfigError` live in the base shared with
``zmp_walker`` (:mod:`zmp_walker.base.errors`) and are re-exported here.
"""

from zmp_walker.base.errors import ConfigError, WbcError

__all__ = ["WbcError", "ConfigError", "ModelError", "ModelMismatch", "StateError", "SimulationUnstable"]


class ModelError(WbcError):
    """A robot model cannot be loaded or is inconsistent."""


class ModelMismatch(ModelError):
    """Two models of the same robot (Pinocchio, MuJoCo) disagree."""


class StateError(WbcError, ValueError):
    """A robot state is invalid (non-finite, wrong size, unknown joint)."""


class SimulationUnstable(WbcError):
    """MuJoCo met a non-finite or huge acceleration and reset its state (``Simulation`` puts
    back the one before the step): the run is over."""
