"""Exception hierarchy of zmp_walker: one root under the project's ``WbcError``.

Configuration errors are the base's :class:`zmp_walker.base.errors.ConfigError`
(also ``whole_body_control.errors.ConfigError``) so that a caller catching
configuration problems catches them from every package.
"""

from zmp_walker.base.errors import ConfigError, WbcError

__all__ = ["ConfigError", "WalkerError", "PlanningError", "InfeasibleMpc"]


class WalkerError(WbcError):
    """Root of every runtime error raised by zmp_walker."""


class PlanningError(WalkerError, ValueError):
    """A walking command cannot be planned (bad argument, goal unreachable)."""


class InfeasibleMpc(WalkerError):
    """The MPC quadratic program has no solution.

    Attributes:
        status: proxsuite's status string.
        time: generator time of the failed solve [s].
    """

    def __init__(self, status: str, time: float):
        super().__init__(f"MPC QP not solved at t={time:.3f} s: {status}")
        self.status = status
        self.time = time
