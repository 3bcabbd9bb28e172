"""Footstep planning from a velocity command or a goal pose.

A step is described in the frame of the stance foot: the swing foot lands at
``(dx, s * width, dyaw)`` with ``s = +1`` for the left foot and ``-1`` for the
right one.  Limits (from :class:`~zmp_walker.config.WalkerConfig`):

* ``|dx| <= max_step_length`` [m];
* ``min_step_width <= width <= max_step_width`` [m];
* ``0 <= s * dyaw <= max_step_yaw`` [rad]: a foot may turn outwards (toe-out)
  relative to the stance foot but never inwards, so when turning the *inner*
  foot (left for a left turn) turns first and the outer foot catches up to
  parallel; the same opening/closing pattern is used for lateral steps;
* the two sole rectangles stay ``foot_clearance`` apart (separating-axis
  test, which accounts for yaw): the width is increased, then the yaw
  reduced, until they do.

Velocity command ``(vx, vy, wz)`` [m/s, m/s, rad/s] with step duration ``T``:
``dx = vx T`` every step (above the nominal speed ``max_step_length /
step_duration``, the fast gait's ``T`` and length limit,
:meth:`~zmp_walker.config.WalkerConfig.gait`: cadence and step length grow with
``|vx|``; the steps, the closing one too, carry that ``T`` as their
``duration``); the foot on the side of ``vy`` opens by ``2 |vy| T`` and the
other closes back to the nominal separation (mean lateral speed ``vy``);
likewise the foot on the side of ``wz`` turns by ``2 |wz| T`` and the other returns parallel (mean yaw rate ``wz``).

First foot from standing: the foot on the side of the turn (sign of ``wz``),
else on the side of the lateral motion (sign of ``vy``), else the right foot
(so the first stance foot is the left one).  A walk ends with a closing step
that puts the swing foot beside the stance foot at the nominal separation.

Terrain (optional ``ground_height(x, y) -> z`` [m], e.g. a platform): each
footstep gets the height of the ground under its sole, and a sole never lands
across a height change: when the sole rectangle, grown by
``config.edge_margin`` along its length, covers two levels, the step is made
longer (or, failing that within ``max_step_length``, shorter) along the
stance foot's heading, by the smallest change that puts the whole grown sole
on one level.  Without ``ground_height`` every footstep keeps the stance
foot's height (flat ground).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from zmp_walker.config import WalkerConfig
from zmp_walker.errors import PlanningError
from zmp_walker.geometry import FootPose, SoleRect, polygons_overlap, sole_corners

__all__ = ["Side", "Footstep", "FootstepPlanner", "other_side", "side_sign"]

Side = Literal["left", "right"]


def other_side(side: Side) -> Side:
    return "right" if side == "left" else "left"


def side_sign(side: Side) -> int:
    """+1 for the left foot, -1 for the right one."""
    return 1 if side == "left" else -1


@dataclass(frozen=True)
class Footstep:
    """One step: ``side`` foot swings during ``[t_start, t_end]`` [s] and lands at ``pose``.

    ``t_start``/``t_end`` are lift-off and touchdown times (generator clock);
    they are ``nan`` for an untimed plan.  ``duration`` [s] is the step's planned
    duration when the fast gait sets it (:meth:`WalkerConfig.gait`); None: the
    configured ``step_duration`` (:func:`zmp_walker.schedule.step_duration`).
    """

    side: Side
    pose: FootPose
    t_start: float = math.nan
    t_end: float = math.nan
    duration: float | None = None

    @property
    def position(self) -> np.ndarray:
        """Landing position of the sole frame [m]."""
        return self.pose.position

    @property
    def yaw(self) -> float:
        """Landing yaw [rad]."""
        return self.pose.yaw

    def timed(self, t_start: float, t_end: float) -> Footstep:
        return dataclasses.replace(self, t_start=t_start, t_end=t_end)

    def moved(self, pose: FootPose) -> Footstep:
        return dataclasses.replace(self, pose=pose)


class FootstepPlanner:
    """Untimed footstep sequences; the schedule gives them times.

    Args:
        config: step limits and durations.
        left_sole, right_sole: sole rectangles in their sole frames [m].
        separation: nominal lateral distance between the feet [m]
            (``config.foot_separation`` if set, else this value, typically the
            initial stance width).
        ground_height: terrain height ``(x, y) -> z`` [m] under the footsteps,
            or None for flat ground (see the module docstring).
    """

    def __init__(
        self,
        config: WalkerConfig,
        left_sole: SoleRect,
        right_sole: SoleRect,
        separation: float,
        ground_height: Callable[[float, float], float] | None = None,
    ):
        self.config = config
        self.ground_height = ground_height
        self.soles = {"left": left_sole, "right": right_sole}
        sep = config.foot_separation if config.foot_separation is not None else separation
        self.separation = float(np.clip(sep, config.min_step_width, config.max_step_width))

    # -- single steps -------------------------------------------------------

    def clamp(
        self, side: Side, dx: float, width: float, dyaw: float, max_length: float | None = None
    ) -> tuple[float, float, float]:
        """Apply the step limits to a step ``(dx, width, dyaw)`` in the stance frame.

        ``width`` is the unsigned lateral distance (positive away from the
        stance foot); ``dyaw`` is signed (world convention); ``max_length``
        replaces ``max_step_length`` (the fast gait's limit).
        """
        c = self.config
        s = side_sign(side)
        limit = c.max_step_length if max_length is None else max_length
        dx = float(np.clip(dx, -limit, limit))
        width = float(np.clip(width, c.min_step_width, c.max_step_width))
        dyaw = s * float(np.clip(s * dyaw, 0.0, c.max_step_yaw))
        return dx, width, dyaw

    def place(
        self, side: Side, stance: FootPose, dx: float, width: float, dyaw: float, max_length: float | None = None
    ) -> FootPose:
        """Landing pose of ``side`` for the step ``(dx, width, dyaw)`` from ``stance``.

        The step is clamped to the limits (``max_length``: see :meth:`clamp`), then made
        collision free by widening (up to ``max_step_width``) and, failing that, by
        reducing the yaw.
        """
        dx, width, dyaw = self.clamp(side, dx, width, dyaw, max_length)
        s = side_sign(side)
        for _ in range(40):
            for w in np.arange(width, self.config.max_step_width + 1e-9, 0.005):
                pose = stance.compose(dx, s * w, dyaw)
                if not self.collide(side, pose, stance):
                    return self._on_terrain(side, stance, pose, dx, s * w, dyaw)
            dyaw *= 0.5
        raise PlanningError(f"no collision-free placement of the {side} foot near {stance}")

    # -- terrain ------------------------------------------------------------

    def level(self, side: Side, pose: FootPose, margin: float = 0.0) -> float | None:
        """Ground height [m] under the ``side`` sole at ``pose`` (grown by ``margin`` [m] along its
        length), or None if it covers more than one level; the stance height on flat ground."""
        if self.ground_height is None:
            return float(pose.position[2])
        r = self.soles[side]
        xs = np.linspace(r.x_min - margin, r.x_max + margin, max(3, int((r.x_max - r.x_min + 2 * margin) / 0.01) + 1))
        heights = {
            round(float(self.ground_height(*pose.to_world((x, y)))), 4)
            for x in xs
            for y in (r.y_min, 0.5 * (r.y_min + r.y_max), r.y_max)
        }
        return heights.pop() if len(heights) == 1 else None

    def _on_terrain(self, side: Side, stance: FootPose, pose: FootPose, dx: float, dy: float, dyaw: float) -> FootPose:
        """``pose`` at the ground height, moved along the stance heading off a height change."""
        if self.ground_height is None:
            return pose
        margin = self.config.edge_margin
        z = self.level(side, pose, margin)
        if z is not None:
            return FootPose(np.array([pose.position[0], pose.position[1], z]), pose.yaw)
        limit = self.config.max_step_length
        for k in range(1, int(2 * limit / 0.005) + 2):
            for d in (dx + k * 0.005, dx - k * 0.005):  # longer first, at the same change
                if abs(d) > limit + 1e-9:
                    continue
                moved = stance.compose(d, dy, dyaw)
                z = self.level(side, moved, margin)
                if z is not None and not self.collide(side, moved, stance):
                    return FootPose(np.array([moved.position[0], moved.position[1], z]), moved.yaw)
        raise PlanningError(
            f"no landing of the {side} foot within {limit} m of {stance} that keeps {margin} m from a height change"
        )

    def collide(self, side: Side, pose: FootPose, stance: FootPose) -> bool:
        """Whether the ``side`` sole at ``pose`` comes within ``foot_clearance`` of the other sole."""
        a = sole_corners(pose, self.soles[side])
        b = sole_corners(stance, self.soles[other_side(side)])
        return polygons_overlap(a, b, self.config.foot_clearance)

    def velocity_step(self, side: Side, stance: FootPose, vx: float, vy: float, yaw_rate: float) -> FootPose:
        """Landing pose of ``side`` for the velocity command (see module docstring); its
        duration is :meth:`step_timing`'s."""
        T, max_length = self.step_timing(vx)
        s = side_sign(side)
        width = self.separation + (2.0 * abs(vy) * T if vy * s > 0 else 0.0)
        dyaw = 2.0 * yaw_rate * T if yaw_rate * s > 0 else 0.0
        return self.place(side, stance, vx * T, width, dyaw, max_length)

    def step_timing(self, vx: float) -> tuple[float, float | None]:
        """``(step duration [s], step length limit [m] or None: max_step_length)`` of the gait for
        the forward speed ``vx`` [m/s] (:meth:`WalkerConfig.gait`)."""
        gait = self.config.gait(vx)
        return (self.config.step_duration, None) if gait is None else gait

    def closing_step(self, side: Side, stance: FootPose) -> FootPose:
        """``side`` beside ``stance``, parallel, at the nominal separation."""
        return self.place(side, stance, 0.0, self.separation, 0.0)

    @staticmethod
    def first_side(vy: float, yaw_rate: float, eps: float = 1e-9) -> Side:
        """Foot that steps first from standing (see module docstring)."""
        if abs(yaw_rate) > eps:
            return "left" if yaw_rate > 0 else "right"
        if abs(vy) > eps:
            return "left" if vy > 0 else "right"
        return "right"

    # -- sequences ----------------------------------------------------------

    def from_velocity(
        self,
        feet: dict[Side, FootPose],
        n_steps: int,
        vx: float,
        vy: float = 0.0,
        yaw_rate: float = 0.0,
        first: Side | None = None,
        close: bool = True,
    ) -> list[Footstep]:
        """``n_steps`` untimed steps for a constant velocity command.

        With ``close`` the last of the ``n_steps`` is the closing step (feet side
        by side at the end).
        """
        if n_steps < 0:
            raise PlanningError(f"number of steps must be >= 0, got {n_steps}")
        feet = dict(feet)
        side = first or self.first_side(vy, yaw_rate)
        gait = self.config.gait(vx)
        duration = None if gait is None else gait[0]  # the fast gait's steps carry their duration
        steps = []
        for i in range(n_steps):
            stance = feet[other_side(side)]
            if close and i == n_steps - 1:
                pose = self.closing_step(side, stance)
            else:
                pose = self.velocity_step(side, stance, vx, vy, yaw_rate)
            steps.append(Footstep(side, pose, duration=duration))
            feet[side] = pose
            side = other_side(side)
        return steps

    def goal_feet(self, feet: dict[Side, FootPose], x: float, y: float, yaw: float) -> dict[Side, FootPose]:
        """Final foot poses for a goal pose ``(x, y, yaw)`` of the feet midpoint."""
        z = 0.5 * (feet["left"].position[2] + feet["right"].position[2])
        mid = FootPose(np.array([x, y, z]), yaw)
        half = 0.5 * self.separation
        return {"left": mid.compose(0.0, half, 0.0), "right": mid.compose(0.0, -half, 0.0)}

    def to_goal(
        self,
        feet: dict[Side, FootPose],
        x: float,
        y: float,
        yaw: float,
        tol: float = 1e-3,
        max_steps: int = 400,
    ) -> list[Footstep]:
        """Untimed steps that bring the feet midpoint to ``(x, y)`` [m] with heading ``yaw`` [rad].

        Each step moves the swing foot towards its final pose, clamped to the
        limits; the walk ends with the feet side by side at the goal.
        """
        goal = self.goal_feet(feet, x, y, yaw)
        feet = dict(feet)

        def done():
            return all(
                np.linalg.norm(feet[s].position[:2] - goal[s].position[:2]) < tol
                and abs(_wrap(feet[s].yaw - goal[s].yaw)) < tol
                for s in ("left", "right")
            )

        mid_yaw = 0.5 * (feet["left"].yaw + feet["right"].yaw)
        mid = FootPose(0.5 * (feet["left"].position + feet["right"].position), mid_yaw)
        rel = mid.to_local((x, y))
        turn = _wrap(yaw - mid_yaw)
        side = self.first_side(rel[1] if abs(rel[1]) > tol else 0.0, turn if abs(turn) > tol else 0.0)
        steps: list[Footstep] = []
        while not done():
            if len(steps) >= max_steps:
                raise PlanningError(f"goal ({x}, {y}, {yaw}) not reached in {max_steps} steps")
            stance = feet[other_side(side)]
            target = stance.to_local(goal[side].position)
            dyaw = _wrap(goal[side].yaw - stance.yaw)
            pose = self.place(side, stance, target[0], side_sign(side) * target[1], dyaw)
            steps.append(Footstep(side, pose))
            feet[side] = pose
            side = other_side(side)
        return steps


def _wrap(angle: float) -> float:
    """Angle wrapped to [-pi, pi) [rad]."""
    return (angle + math.pi) % (2.0 * math.pi) - math.pi
