"""Tasks: each turns a reference and the current state into acceleration rows.

A task asks for ``A a = b`` where ``a`` is the generalized acceleration
(Pinocchio order, ``nv``).  With a task-space quantity ``y = f(q)`` of Jacobian
``J`` and drift ``J_dot v``, a PD law gives::

    A = J,   b = y_ddot_ref + kp * e + kd * e_dot - J_dot v

Frame quantities are expressed in ``LOCAL_WORLD_ALIGNED``: origin velocity and
angular velocity in world coordinates.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin

from whole_body_control.config import TaskConfig
from whole_body_control.state import RobotState


@dataclass
class FrameReference:
    """Desired placement and motion of a frame, world coordinates, SI units."""

    pos: np.ndarray
    rot: np.ndarray = field(default_factory=lambda: np.eye(3))
    lin_vel: np.ndarray = field(default_factory=lambda: np.zeros(3))
    ang_vel: np.ndarray = field(default_factory=lambda: np.zeros(3))
    lin_acc: np.ndarray = field(default_factory=lambda: np.zeros(3))
    ang_acc: np.ndarray = field(default_factory=lambda: np.zeros(3))

    @classmethod
    def from_se3(cls, placement: pin.SE3) -> FrameReference:
        return cls(placement.translation.copy(), placement.rotation.copy())


class Task:
    """Base class: name, weight [-], gains kp [1/s^2] and kd [1/s]."""

    def __init__(self, name: str, config: TaskConfig):
        self.name = name
        self.config = config
        self.weight = config.weight
        self.kp = config.kp
        self.kd = config.kd_value
        self.enabled = True

    def rows(self, state: RobotState) -> tuple[np.ndarray, np.ndarray]:
        """``(A, b)`` with ``A`` of shape (m, nv) and ``b`` of shape (m,)."""
        raise NotImplementedError

    def error(self, state: RobotState) -> np.ndarray:
        """Task-space position error (reference minus current)."""
        raise NotImplementedError


class ComTask(Task):
    """Centre of mass position [m].

    With ``config.zmp`` and the CoM ``height`` above the ground given to
    :meth:`rows`, the horizontal rows are the moment balance of the contact
    wrench about its ZMP ``p`` (constant height ``h``, ``lift = g + z_ddot``)::

        x_ddot = lift / h (x - p_x) - L_dot_y / (m h)
        y_ddot = lift / h (y - p_y) + L_dot_x / (m h)

    A desired acceleration ``lift / h (c - p)`` (a walker's ZMP through the
    LIPM) is asked for as ``x_ddot + L_dot_y / (m h)`` and
    ``y_ddot - L_dot_x / (m h)``: whatever the swinging legs and arms do to
    the angular momentum ``L``, the ZMP stays at ``p`` and the CoM moves as
    the momentum requires, instead of the ZMP moving to keep the CoM on its
    LIPM acceleration.

    The hip strategy: given ``hip`` (the horizontal CoM acceleration [m/s^2]
    the ZMP could not give, see ``TaskConfig.hip_acc``), two more rows ask for
    ``(x_ddot, y_ddot) = acc[:2] + hip``.  With the ZMP rows above that asks the
    angular momentum rate for ``L_dot_y = -m h hip_x``, ``L_dot_x = m h hip_y``:
    the ZMP stays at ``p`` and the upper body makes the rest.
    """

    def __init__(self, name: str, config: TaskConfig, com: np.ndarray):
        super().__init__(name, config)
        self.set_reference(com)

    def set_reference(self, pos, vel=None, acc=None) -> None:
        self.pos = np.asarray(pos, dtype=float).copy()
        self.vel = np.zeros(3) if vel is None else np.asarray(vel, dtype=float)
        self.acc = np.zeros(3) if acc is None else np.asarray(acc, dtype=float)

    def error(self, state: RobotState) -> np.ndarray:
        return self.pos - state.com

    def desired_acceleration(self, state: RobotState) -> np.ndarray:
        return self.acc + self.kp * (self.pos - state.com) + self.kd * (self.vel - state.vcom)

    def rows(
        self,
        state: RobotState,
        acc: np.ndarray | None = None,
        height: float | None = None,
        hip: np.ndarray | None = None,
    ):
        if acc is None:
            acc = self.desired_acceleration(state)
        b = acc - state.com_drift
        if not self.config.zmp or height is None:
            return state.Jcom, b
        mh = state.robot.mass * height
        if hip is None:
            A = state.Jcom.copy()
        else:
            A = np.empty((5, state.Jcom.shape[1]))
            A[:3] = state.Jcom
            A[3:] = state.Jcom[:2]
            b = np.concatenate((b, b[:2] + hip))
        A[0] += state.Ag[4] / mh
        A[1] -= state.Ag[3] / mh
        b[0] -= state.hg_drift[4] / mh
        b[1] += state.hg_drift[3] / mh
        return A, b


class FrameTask(Task):
    """SE3 placement of a frame; ``mask`` keeps a subset of (x, y, z, roll, pitch, yaw).

    With ``bounded`` and ``config.max_ang_acc`` the angular rows ask for at most that
    norm [rad/s^2] (the PD and feed-forward together, before the drift): the large
    attitude error the hip strategy leaves comes back without a burst of angular momentum.
    """

    def __init__(self, name: str, config: TaskConfig, frame_id: int, reference: FrameReference):
        super().__init__(name, config)
        self.frame_id = frame_id
        self.mask = np.array(config.mask, dtype=bool)
        self._rows = np.flatnonzero(self.mask)  # the controlled axes, for the masked rows
        self._full = bool(self.mask.all())
        self._angular_only = self.mask.tolist() == [False, False, False, True, True, True]
        self.reference = reference

    def set_reference(self, reference: FrameReference) -> None:
        self.reference = reference

    def error(self, state: RobotState) -> np.ndarray:
        oMf = state.placement(self.frame_id)
        ref = self.reference
        e = np.empty(6)
        e[:3] = ref.pos - oMf.translation
        e[3:] = pin.log3(ref.rot @ oMf.rotation.T)
        return e

    def rows(self, state: RobotState, reference: FrameReference | None = None, bounded: bool = False):
        """Rows for ``reference`` (default: the task's own); ``bounded``: the angular
        acceleration asked for is at most ``config.max_ang_acc``."""
        ref = self.reference if reference is None else reference
        fid = self.frame_id
        oMf = state.placement(fid)
        vel = state.velocity(fid)
        drift = state.drift(fid)
        J = state.jacobian(fid)
        # (ndarray.dot: numpy's ``@`` costs several times more on 3 x 3 operands)
        ang = ref.ang_acc + self.kp * pin.log3(ref.rot.dot(oMf.rotation.T)) + self.kd * (ref.ang_vel - vel[3:])
        limit = self.config.max_ang_acc
        if bounded and limit > 0.0:
            norm = float(np.linalg.norm(ang))
            if norm > limit:
                ang *= limit / norm
        ang -= drift[3:]
        if self._angular_only:
            return J[3:], ang
        b = np.empty(6)
        b[:3] = ref.lin_acc + self.kp * (ref.pos - oMf.translation) + self.kd * (ref.lin_vel - vel[:3]) - drift[:3]
        b[3:] = ang
        if self._full:
            return J, b
        return J[self._rows], b[self._rows]


class PostureTask(Task):
    """Joint positions [rad] of the actuated joints."""

    def __init__(self, name: str, config: TaskConfig, q_ref: np.ndarray, nv: int):
        super().__init__(name, config)
        self.q_ref = np.asarray(q_ref, dtype=float).copy()
        self.A = np.zeros((nv - 6, nv))
        self.A[:, 6:] = np.eye(nv - 6)

    def set_reference(self, q_ref: np.ndarray) -> None:
        self.q_ref = np.asarray(q_ref, dtype=float).copy()

    def error(self, state: RobotState) -> np.ndarray:
        return self.q_ref - state.q[7:]

    def rows(self, state: RobotState):
        return self.A, self.kp * (self.q_ref - state.q[7:]) - self.kd * state.v[6:]


class AngularMomentumTask(Task):
    """Centroidal angular momentum [kg m^2/s], driven to a reference (zero by default)."""

    def __init__(self, name: str, config: TaskConfig):
        super().__init__(name, config)
        self.L_ref = np.zeros(3)

    def error(self, state: RobotState) -> np.ndarray:
        return self.L_ref - state.hg[3:]

    def rows(self, state: RobotState):
        return state.Ag[3:], self.kd * (self.L_ref - state.hg[3:]) - state.hg_drift[3:]


class ForceRegularizationTask(Task):
    """Keeps contact wrenches near an even share of the weight (acts on wrenches, not accelerations)."""

    def rows(self, state: RobotState):  # pragma: no cover - handled by the formulation
        raise TypeError("ForceRegularizationTask acts on contact wrenches; the formulation builds its rows")

    def error(self, state: RobotState) -> np.ndarray:
        return np.zeros(0)
