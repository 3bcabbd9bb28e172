"""Contact schedule: when each foot swings and which feet support the robot.

Timeline of a walk that starts at ``t0`` [s] with ``n`` steps, ``T_k`` the
duration of step ``k`` and ``T_ss,k = (1 - double_support_ratio) T_k`` its
swing time::

    [t0, t0 + start_duration)                 double_support_start
    step k: [t_k, t_k + T_ss,k)               single_support_<stance side>
            [t_k + T_ss,k, t_k + T_k)         double_support   (k < n - 1)
    [t_{n-1} + T_ss,n-1, ... + stop_duration) double_support_stop
    afterwards                                standing

with ``t_0 = t0 + start_duration`` and ``t_{k+1} = t_k + T_k``.  ``T_k`` is
``step_duration``, times ``level_change_duration_factor`` for a step between
two heights (a step up or down, :func:`step_duration`; a fast-gait step has its
own ``Footstep.duration`` in place of ``step_duration``): a longer swing to
clear the edge and a longer double support after it.  A step's swing may be
shortened (step timing adaptation, :mod:`zmp_walker.step_adjust`): ``swing_durations[k]``
then replaces ``T_ss,k`` and every later step starts that much earlier (the
double support after it keeps its duration).  A step's lift-off may be delayed
(``lift_off_delays[k]`` [s], the double support before it lengthened while the
DCM is brought back within reach of the next landing); every later step then
starts that much later.  Before ``t0`` the phase is
``standing``.  An *open* schedule (continuous walking whose end is not yet
planned) has no stop phase: after its last step the robot stays in double
support until the generator appends more steps.

Support height (:meth:`Schedule.support_height`, what the CoM height follows
on uneven ground): at the middle of each single support, the lowest of the
stance foot's height and the swing foot's lift-off and landing heights; for a
trailing foot stepping up (lift-off below both the stance foot and the
landing), the lift-off height at lift-off and the lower of the other two at
touchdown instead; the mean height of the two feet at ``t0`` and at the end
of a final schedule; joined by minimum-jerk quintics (C2, at rest at each
knot); constant before the first and after the last knot.  On flat ground it
is constant.  Taking the lowest foot of a step keeps the CoM at its nominal
height above the foot furthest below the hips: on a step up the CoM rises
only once the trailing foot has left the lower level (raised earlier, above
the leading foot on the platform, it stretches the trailing leg, which then
cannot lift its foot over the edge), during that foot's swing (raised later,
the trailing leg, its foot well behind the hips, bends so much to lift the
foot over the edge that its ankle reaches its dorsiflexion limit: G1 on 10 cm
stairs); on a step down it lowers during the leading foot's swing, which must
reach down.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

from zmp_walker.config import WalkerConfig
from zmp_walker.footsteps import Footstep, Side, other_side
from zmp_walker.geometry import FootPose
from zmp_walker.swing import min_jerk

__all__ = ["Phase", "Schedule", "step_duration"]

LEVEL_CHANGE = 1e-3  # a step between two heights differing by more than this [m] changes level


def step_duration(config: WalkerConfig, start: FootPose, end: FootPose, duration: float | None = None) -> float:
    """Duration [s] of the step from the sole pose ``start`` to ``end``: ``duration`` (the
    fast gait's, :attr:`Footstep.duration`) or else ``step_duration``, times
    ``level_change_duration_factor`` when the two are at different heights."""
    T = config.step_duration if duration is None else duration
    if abs(float(end.position[2]) - float(start.position[2])) > LEVEL_CHANGE:
        return T * config.level_change_duration_factor
    return T


@dataclass(frozen=True)
class Phase:
    """One contact phase.

    Attributes:
        name: ``standing``, ``double_support_start``, ``single_support_left``
            (left foot supports, right swings), ``single_support_right``,
            ``double_support``, ``double_support_stop``.
        t_start, t_end: phase interval [s].
        support: feet in contact.
        step: index of the swinging step (single support), of the step that
            just landed (double support), ``None`` otherwise.
        feet: sole poses of the feet at the start of the phase.
    """

    name: str
    t_start: float
    t_end: float
    support: tuple[Side, ...]
    step: int | None
    feet: dict

    @property
    def is_single_support(self) -> bool:
        return len(self.support) == 1


class Schedule:
    """Timed footsteps and contact phases of one walk.

    Args:
        config: durations.
        t0: time the walk starts (beginning of the initial double support) [s].
        feet: sole poses before the first step.
        steps: footsteps in order (their times are recomputed).
        final: whether the last step ends the walk (stop phase follows).
        swing_durations: per step, a swing time [s] replacing the planned one,
            or None (the first steps only when shorter than ``steps``).
        lift_off_delays: per step, extra double support [s] before it lifts
            off (the first steps only when shorter than ``steps``).
        start_duration: the initial double support [s]; None: ``config.start_duration``
            (a recovery step from standing starts sooner).
    """

    def __init__(
        self,
        config: WalkerConfig,
        t0: float,
        feet: dict[Side, FootPose],
        steps,
        final: bool,
        swing_durations: tuple[float | None, ...] = (),
        lift_off_delays: tuple[float, ...] = (),
        start_duration: float | None = None,
    ):
        self.config = config
        self.t0 = float(t0)
        self.final = bool(final)
        self.start_duration = float(config.start_duration if start_duration is None else start_duration)
        if not self.start_duration > 0.0:
            raise ValueError(f"the start duration must be > 0, got {start_duration}")
        t_first = self.t0 + self.start_duration
        # feet_before[k]: sole poses before step k lifts off; feet_before[n]: after the walk
        self.feet_before: list[dict[Side, FootPose]] = [dict(feet)]
        for s in steps:
            nxt = dict(self.feet_before[-1])
            nxt[s.side] = s.pose
            self.feet_before.append(nxt)
        # step k lasts durations[k] (longer between two levels), the last one ends at t_k + T_ss
        self.durations: tuple[float, ...] = tuple(
            step_duration(config, self.feet_before[k][s.side], s.pose, s.duration) for k, s in enumerate(steps)
        )
        overrides = tuple(swing_durations)[: len(self.durations)]
        self.swing_durations: tuple[float | None, ...] = overrides + (None,) * (len(self.durations) - len(overrides))
        delays = tuple(float(d) for d in lift_off_delays)[: len(self.durations)]
        if any(not d >= 0.0 for d in delays):
            raise ValueError(f"lift-off delays must be >= 0, got {delays}")
        self.lift_off_delays: tuple[float, ...] = delays + (0.0,) * (len(self.durations) - len(delays))
        timed, t_k = [], t_first
        for s, T, T_ss, delay in zip(steps, self.durations, self.swing_durations, self.lift_off_delays):
            t_k += delay
            planned = (1.0 - config.double_support_ratio) * T
            if T_ss is None:
                timed.append(s.timed(t_k, t_k + planned))
                t_k += T
            else:
                if not T_ss > 0.0:
                    raise ValueError(f"a swing duration must be > 0, got {T_ss}")
                timed.append(s.timed(t_k, t_k + T_ss))
                t_k += T - planned + T_ss
        self.steps: tuple[Footstep, ...] = tuple(timed)
        both = ("left", "right")
        phases = [Phase("standing", -math.inf, self.t0, both, None, self.feet_before[0])]
        phases.append(Phase("double_support_start", self.t0, t_first, both, None, self.feet_before[0]))
        n = len(self.steps)
        for k, s in enumerate(self.steps):
            stance = other_side(s.side)
            phases.append(Phase(f"single_support_{stance}", s.t_start, s.t_end, (stance,), k, self.feet_before[k]))
            if k < n - 1:
                t_next = self.steps[k + 1].t_start
                phases.append(Phase("double_support", s.t_end, t_next, both, k, self.feet_before[k + 1]))
        t_last = self.steps[-1].t_end if n else t_first
        if self.final:
            self.end_time = t_last + config.stop_duration
            phases.append(
                Phase("double_support_stop", t_last, self.end_time, both, n - 1 if n else None, self.feet_before[n])
            )
            phases.append(Phase("standing", self.end_time, math.inf, both, None, self.feet_before[n]))
        else:
            self.end_time = math.inf
            phases.append(Phase("double_support", t_last, math.inf, both, n - 1 if n else None, self.feet_before[n]))
        self.phases: tuple[Phase, ...] = tuple(phases)
        self._starts = [p.t_start for p in self.phases]

        # support height knots (time [s], height [m]), see the module docstring
        def mean_z(feet):
            return 0.5 * (float(feet["left"].position[2]) + float(feet["right"].position[2]))

        knots = [(self.t0, mean_z(self.feet_before[0]))]
        if math.isfinite(self.t0):
            for k, s in enumerate(self.steps):
                before = self.feet_before[k]
                stance, lift_off = float(before[other_side(s.side)].position[2]), float(before[s.side].position[2])
                landing = float(s.position[2])
                if lift_off < min(stance, landing) - LEVEL_CHANGE:  # a trailing foot stepping up
                    knots.append((s.t_start, lift_off))
                    knots.append((s.t_end, min(stance, landing)))
                else:
                    knots.append((0.5 * (s.t_start + s.t_end), min(stance, lift_off, landing)))
            if self.final:
                knots.append((self.end_time, mean_z(self.feet_before[n])))
        self._knot_t = [k[0] for k in knots]
        self._knot_z = [k[1] for k in knots]

    def replaced(self, **changes) -> Schedule:
        """This schedule re-timed with some of its arguments changed (``steps``, ``final``,
        ``swing_durations``, ``lift_off_delays``); the rest are kept."""
        args = {
            "t0": self.t0,
            "feet": self.feet_before[0],
            "steps": self.steps,
            "final": self.final,
            "swing_durations": self.swing_durations,
            "lift_off_delays": self.lift_off_delays,
            "start_duration": self.start_duration,
        }
        unknown = set(changes) - set(args)
        if unknown:
            raise TypeError(f"Schedule.replaced: unknown argument(s) {sorted(unknown)}")
        return Schedule(self.config, **{**args, **changes})

    @property
    def planned_until(self) -> float:
        """Touchdown time of the last planned step [s] (``t0 + start`` if none)."""
        return self.steps[-1].t_end if self.steps else self.t0 + self.start_duration

    @property
    def final_feet(self) -> dict[Side, FootPose]:
        """Sole poses after the last planned step."""
        return self.feet_before[-1]

    def support_height(self, t: float) -> tuple[float, float, float]:
        """Support height [m] and its first two time derivatives at ``t`` [s] (module docstring)."""
        i = bisect.bisect_right(self._knot_t, t) - 1
        if i < 0:
            return self._knot_z[0], 0.0, 0.0
        if i >= len(self._knot_t) - 1:
            return self._knot_z[-1], 0.0, 0.0
        t_a, t_b = self._knot_t[i], self._knot_t[i + 1]
        z_a, dz = self._knot_z[i], self._knot_z[i + 1] - self._knot_z[i]
        if dz == 0.0:
            return z_a, 0.0, 0.0
        D = t_b - t_a
        q, dq, ddq = min_jerk((t - t_a) / D)
        return z_a + dz * q, dz * dq / D, dz * ddq / (D * D)

    def phase_index(self, t: float) -> int:
        """Index in :attr:`phases` of the phase containing ``t`` [s]."""
        return max(bisect.bisect_right(self._starts, t) - 1, 0)

    def phase_at(self, t: float) -> Phase:
        """The contact phase at time ``t`` [s]."""
        return self.phases[self.phase_index(t)]

    def contacts_at(self, t: float) -> dict[Side, bool]:
        """Whether each foot is in contact at ``t`` [s]."""
        support = self.phase_at(t).support
        return {"left": "left" in support, "right": "right" in support}

    def steps_completed(self, t: float) -> int:
        """Number of steps whose touchdown time is <= ``t`` [s]."""
        return sum(1 for s in self.steps if s.t_end <= t)

    def steps_after(self, t: float) -> tuple[Footstep, ...]:
        """Steps not yet landed at ``t`` [s] (including the one in swing)."""
        return tuple(s for s in self.steps if s.t_end > t)
