"""Closed-loop runs in MuJoCo, in one process: the control stage and the simulator
tick together (lockstep), and a summary of what happened comes back.

Each tick goes through :class:`~whole_body_control.control_stage.ControlStage`, the
core the controller node runs next to a robot: its supervisor (finiteness, the tilt
rule, the fall latch), lift detection and airborne hold, then the controller.  The
base state is the simulation's (ground truth, as an external estimator gives it); the
IMU and the sole force sensors are the simulated ones.  A fall is
:class:`~whole_body_control.sim.fall.FallDetector`'s (its criteria are listed there),
latched by the stage's supervisor.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from dataclasses import dataclass, field

import numpy as np

from whole_body_control.config import wbc_config_for
from whole_body_control.control_stage import Command, ControlStage, Observation, StageConfig
from whole_body_control.controller import WbcResult, WholeBodyController
from whole_body_control.errors import ConfigError
from whole_body_control.robot import RobotModel
from whole_body_control.runs.report import Recorder
from whole_body_control.sim import SimConfig, Simulation
from whole_body_control.sim.fall import FallDetector

GRAVITY = 9.81
HARDEST_COUNT = 100  # problems kept by save_hardest (the slowest to solve)


@dataclass
class RunStats:
    """Per-tick figures gathered during a run."""

    tick_s: list[float] = field(default_factory=list)
    com_error: list[float] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    torque_rate_max: float = 0.0
    last_tau: np.ndarray | None = None

    def add(self, result: WbcResult, com_error: float) -> None:
        self.tick_s.append(result.tick_time)
        self.com_error.append(com_error)
        self.statuses[result.status] = self.statuses.get(result.status, 0) + 1
        if result.status not in ("ok", "airborne") and len(self.reasons) < 10:
            self.reasons.append(result.reason)
        if self.last_tau is not None:
            self.torque_rate_max = max(self.torque_rate_max, float(np.max(np.abs(result.tau - self.last_tau))))
        self.last_tau = result.tau

    @property
    def failures(self) -> int:
        return sum(n for s, n in self.statuses.items() if s not in ("ok", "airborne"))

    def timing(self) -> dict:
        ticks = np.array(self.tick_s) * 1e3
        return {
            "tick_ms_median": round(float(np.median(ticks)), 4) if ticks.size else None,
            "tick_ms_p99": round(float(np.percentile(ticks, 99)), 4) if ticks.size else None,
            "tick_ms_max": round(float(ticks.max()), 4) if ticks.size else None,
        }


def push_body(robot: RobotModel) -> str:
    return robot.config.torso_frame


@dataclass(frozen=True)
class StageOptions:
    """How in-process runs drive the control stage (:func:`stage_options`)."""

    # [s] the QP on every state whose stamp is solve_period past the last solve's (whole
    # periods), the states between answered from its plan, solved after the command: as the
    # ROS graph's controller with its `solve_period` (config/ros/*.yaml: 4 ms), so that the
    # configuration shipped for real time can be measured here.  0: every state solved at once
    solve_period: float = 0.0

    def validate(self) -> None:
        if not (math.isfinite(self.solve_period) and self.solve_period >= 0):
            raise ConfigError(f"solve_period must be finite and >= 0 [s], got {self.solve_period}")

    def solve_every(self, period: float) -> int:
        return max(1, round(self.solve_period / period)) if self.solve_period > 0 else 1


_stage_options = StageOptions()


def current_stage_options() -> StageOptions:
    return _stage_options


@contextlib.contextmanager
def stage_options(**changes):
    """In-process runs started inside the block (and in processes forked there) use
    :class:`StageOptions` with ``changes`` (e.g. ``with stage_options(solve_period=0.004): run_walk(...)``)."""
    global _stage_options
    saved = _stage_options
    options = dataclasses.replace(saved, **changes)
    options.validate()
    _stage_options = options
    try:
        yield options
    finally:
        _stage_options = saved


def in_process_stage(
    robot: RobotModel, ctrl: WholeBodyController, period: float, com_mode: str = "reference"
) -> ControlStage:
    """The control stage of an in-process run: the controller's time step the period
    (reproducible to the bit), the base state given; ``com_mode`` as in
    :func:`~whole_body_control.walker_stage.walker_to_reference`; solves as
    :func:`current_stage_options` says (:func:`control_tick` runs them)."""
    solve_every = _stage_options.solve_every(period)
    config = StageConfig(period=period, fixed_dt=True, com_mode=com_mode, solve_every=solve_every)
    return ControlStage(robot, config=config, controller=ctrl)


def observe(sim: Simulation, stamp_ns: int, q: np.ndarray, v: np.ndarray) -> Observation:
    """What the stage reads at ``stamp_ns``: the joints and the base of ``(q, v)`` (Pinocchio
    convention; an ``observe_hook``'s), the simulated IMU and sole force sensors."""
    imu = sim.imu()
    return Observation(
        stamp_ns,
        q[7:].copy(),
        v[6:].copy(),
        (),
        (imu.orientation, imu.gyro, imu.linear_acceleration),
        (q[:7].copy(), v[:6].copy()),
        sim.foot_wrenches(),
    )


def control_tick(stage: ControlStage, obs: Observation, reference=None) -> tuple[Command, WbcResult]:
    """One stage cycle and the solve it left due (multi-rate, after the command): the
    command and the result that stands for the tick (a damping result when the
    supervisor answered without a solve; between solves, the plan's result with the
    torques sent and this tick's time)."""
    before = stage.last_result
    start = time.perf_counter()
    cmd = stage.cycle(obs, reference)
    result = stage.last_result
    stage.finish()  # (multi-rate) the solve this state left due, after its command
    if result is None or (result is before and cmd.damping):
        return cmd, stage.ctrl.damping_result(cmd.tau, cmd.reason)
    if result is before:  # answered from the plan between solves
        return cmd, dataclasses.replace(result, tau=cmd.tau, tick_time=time.perf_counter() - start)
    return cmd, result


def run_stand(
    robot: RobotModel,
    duration: float,
    push_dv: tuple[float, float] | None = None,
    push_at: float = 1.0,
    push_duration: float = 0.1,
    sim_config: SimConfig | None = None,
    controller: WholeBodyController | None = None,
    settle_time: float = 0.5,
    on_tick=None,
    out_dir=None,
    *,
    sim_hook=None,
    observe_hook=None,
    actuate_hook=None,
    save_hardest=None,
    hardest_count: int = HARDEST_COUNT,
) -> dict:
    """Stand for ``duration`` [s] (simulated), optionally pushed at ``push_at``.

    ``push_dv`` (vx, vy) [m/s] sizes a horizontal force on the torso for
    ``push_duration`` so that it would change the whole robot's velocity by that much.
    ``com_error_max_m`` is taken after ``settle_time`` and outside the push recovery.

    Hooks for robustness scenarios (all optional, see :mod:`whole_body_control.runs.scenarios`):
    ``sim_hook(sim)`` edits the simulation once before the reset (masses,
    gravity); ``observe_hook(t, q, v) -> (q, v)`` is what the controller reads
    (sensor noise); ``actuate_hook(t, tau, sim) -> tau`` is the torque applied to
    the simulation (latency; external forces through ``sim.push``).
    """
    sim = Simulation(robot, sim_config or SimConfig())
    ctrl = controller or WholeBodyController(robot, wbc_config_for(robot))
    if save_hardest:
        ctrl.hqp.record_hardest(hardest_count)
    if sim_hook is not None:
        sim_hook(sim)
    sim.reset(robot.q_ref)
    ctrl.reset(sim.q, sim.v)
    dt = sim.timestep
    stage = in_process_stage(robot, ctrl, dt)
    n_ticks = int(round(duration / dt))
    stats = RunStats()
    fall = FallDetector(robot)
    pushed_until = None
    recorder = Recorder(robot, every=5) if out_dir is not None else None
    wall0 = time.perf_counter()
    for k in range(n_ticks):
        t = k * dt
        if push_dv is not None and pushed_until is None and t >= push_at:
            sim.push_velocity_change(push_body(robot), np.array(push_dv, dtype=float), push_duration)
            pushed_until = t + push_duration + 2.0
        q, v = sim.q, sim.v
        if observe_hook is not None:
            q, v = observe_hook(t, q, v)
        cmd, result = control_tick(stage, observe(sim, k * stage.period_ns, q, v))
        err = float(np.linalg.norm(ctrl.com_task.error(ctrl.state))) if ctrl.com_task else 0.0
        in_push = pushed_until is not None and t < pushed_until
        stats.add(result, err if (t >= settle_time and not in_push) else 0.0)
        if fall.update(t, sim, ctrl.state.com, ctrl.state.vcom, ctrl.support_polygon()):
            stage.supervisor.fall(fall.reason)
        if recorder is not None:
            record_tick(recorder, t, sim, ctrl, result)
        if not fall.step(sim, t, cmd.tau if actuate_hook is None else actuate_hook(t, cmd.tau, sim)):
            break
        if on_tick is not None:
            on_tick(t, sim, ctrl, result)
    wall = time.perf_counter() - wall0
    summary = {
        "robot": robot.name,
        "duration_s": round(n_ticks * dt, 6),
        "fell": fall.reason is not None,
        "fall_reason": fall.reason,
        "fall_time_s": fall.time,
        "latched": stage.supervisor.latched,
        "com_error_max_m": round(max(stats.com_error) if stats.com_error else 0.0, 6),
        "qp_failures": stats.failures,
        "statuses": stats.statuses,
        "failure_reasons": stats.reasons,
        "torque_rate_max_nm_per_tick": round(stats.torque_rate_max, 4),
        **stats.timing(),
        "real_time_factor": round(n_ticks * dt / wall, 4),
        "push_dv": list(push_dv) if push_dv is not None else None,
        "push_at_s": push_at if push_dv is not None else None,
        "final_base_pos": [round(float(x), 9) for x in sim.q[:3]],
    }
    sim.close()
    save_hardest_problems(ctrl, save_hardest, summary)
    if recorder is not None:
        summary["report"] = str(out_dir)
        recorder.write(out_dir, summary)
    return summary


def save_hardest_problems(ctrl: WholeBodyController, path, summary: dict) -> None:
    """With ``save_hardest``: the slowest problems of the run to ``path``
    (``bench/hqp_replay.py`` replays them), named in the summary."""
    if path:
        summary["hardest_problems_file"] = str(ctrl.hqp.save_recorded(path))


def record_tick(recorder: Recorder, t: float, sim: Simulation, ctrl: WholeBodyController, result: WbcResult) -> None:
    """One tick of the run report: time series (decimated by the recorder), bag and video."""
    zmp = sim.measured_zmp()
    loaded = sim.foot_contacts()
    corners, soles = {}, {}
    for side in ctrl.robot.feet:
        corners[f"{side}_sole_corners"] = sim.sole_corners(side)
        soles[f"{side}_sole"] = sim.data.site_xpos[sim.sole_sites[side]]
    recorder.add(
        t=t,
        com=ctrl.state.com,
        com_ref=ctrl.com_task.pos if ctrl.com_task else ctrl.state.com,
        zmp=zmp if zmp is not None else np.full(2, np.nan),
        tau=result.tau,
        tick_ms=result.tick_time * 1e3,
        solve_ms=result.solve_time * 1e3,
        base=sim.q[:3],
        loaded=[float(loaded[s]) for s in ("left", "right")],
        **soles,
        **corners,
    )
    polygon = sim.support_polygon()
    recorder.log_tick(t, sim, ctrl, result, polygon if len(polygon) else None)
