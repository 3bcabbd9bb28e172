"""Closed-loop walking in MuJoCo: ZMP pattern generator + whole-body controller.

Path of the data, every 1 ms tick::

    sim (q, v) -> controller state (CoM, CoM velocity)
               -> PatternGenerator.cycle(t, MeasuredState) -> WalkerReference
               -> ControlStage.cycle(Observation, WalkerReference): the supervisor's
                  checks, lift detection, walker_to_reference(...) -> controller Reference,
                  WholeBodyController.cycle(q, v, dt, reference) -> tau -> sim.step(tau)

The CoM state given to the walker is the controller's state of the previous
tick (one tick, 1 ms, of delay; it saves a second rigid-body update per tick).

Contacts: a contact removal ramps the normal force down over the controller's
``contacts.transition_time`` while the foot stays constrained.  The removal
is therefore started that long *before* the walker's lift-off (the walker's
schedule is known ahead), so that the foot is free exactly when its swing
trajectory starts moving; a touchdown adds the contact when the walker puts
the foot back in contact (the swing lands with zero velocity).

CoM tracking (``com_mode``; ``"dcm"`` by default: it walks all three robots, and
G1, whose soles are 6 cm wide, falls at 0.25 m/s under ``"reference"`` with the
default CoM gains, whose PD asks for ZMP excursions the sole cannot give):
    * ``"reference"``: the controller's CoM task tracks the planned CoM
      (position, velocity, acceleration as feed-forward) with its PD gains.
    * ``"dcm"``: the walker closes the loop on the measured DCM and its
      ``com_acc = omega^2 (c - zmp_cmd)`` is tracked as given (the horizontal
      PD of the CoM task acts on the measured state, i.e. is zero; height
      keeps the PD).  With the CoM task's ``zmp`` rows (``config/wbc.yaml``)
      this puts the contacts' ZMP at ``zmp_cmd`` while the swing leg changes
      the angular momentum (without them a G1 swing leg moved the ZMP 3 cm
      from it at the median of single support, 8 cm at the 95th percentile).
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import TYPE_CHECKING

import numpy as np

from whole_body_control import geometry
from whole_body_control.config import wbc_config_for
from whole_body_control.controller import WholeBodyController
from whole_body_control.errors import ConfigError
from whole_body_control.robot import RobotModel
from whole_body_control.runs.report import Recorder
from whole_body_control.state import KinematicState
from whole_body_control.walker_stage import (
    SIDES,
    make_walker,
    reference_heading,
    released_ahead,
    rot_z,
    yaw_of,
)
from zmp_walker import MeasuredState, WalkerConfig, WalkerReference

if TYPE_CHECKING:
    from whole_body_control.sim import SimConfig, Simulation

LIFTED_HOLD = 1.5  # [s] a lifted run lasts this long after the lift was detected (then ends)


# -- set-up -------------------------------------------------------------------------------


def capture_polygon(polygon: np.ndarray, ref: WalkerReference, robot: RobotModel) -> np.ndarray:
    """Where the capture point may be while walking: the loaded soles (simulation) and, while
    a foot swings, the sole at its planned touchdown (the walker will step there)."""
    upcoming = ref.upcoming_footsteps
    swinging = [s for s in SIDES if not ref.feet[s].in_contact]
    if not swinging or not upcoming or upcoming[0].side != swinging[0]:
        return polygon
    step = upcoming[0]
    R = rot_z(step.yaw)
    corners = (R @ robot.feet[step.side].sole.corners().T).T[:, :2] + step.position[:2]
    return geometry.convex_hull(np.vstack([polygon, corners]) if len(polygon) else corners)


# -- the run ------------------------------------------------------------------------------


def run_walk(
    robot: RobotModel,
    speed: float,
    vy: float,
    yaw_rate: float,
    steps: int,
    push_dv: tuple[float, float] | None,
    push_at: float,
    friction: float | None,
    sim_config: SimConfig | None,
    out_dir,
    *,
    walker_config: WalkerConfig | None = None,
    controller: WholeBodyController | None = None,
    com_mode: str = "dcm",
    settle_time: float = 1.0,
    push_duration: float = 0.1,
    on_tick=None,
    sim_hook=None,
    observe_hook=None,
    actuate_hook=None,
    save_hardest=None,
    hardest_count: int | None = None,
    measure_gravity: bool = True,
) -> dict:
    """Walk ``steps`` steps at ``(speed, vy)`` [m/s] and ``yaw_rate`` [rad/s] in MuJoCo
    (``steps = 0``: stand with the walker, which may step to recover from a push).

    The run lasts until the walker has finished (last step landed, final
    double support over) and the push is over, then ``settle_time`` [s] more.  ``push_dv`` (vx, vy)
    [m/s] sizes a push on the torso at ``push_at`` [s] for ``push_duration``
    [s] (see :meth:`Simulation.push_velocity_change`).  ``friction`` is the
    floor friction of the simulation; the controller then assumes the smaller
    of it and the robot's friction.  With platforms in ``sim_config`` the walker
    plans its footsteps on that terrain (:meth:`SimConfig.ground_height`, a
    perfect terrain map); the controller's contacts take the footstep heights
    from the walker's foot references.  The robot starts in its reference posture
    set down on the ground under its base (on a platform when it starts on one).

    Hooks for robustness scenarios (all optional, see :mod:`whole_body_control.runs.scenarios`):
    ``sim_hook(sim)`` edits the simulation once before the reset (masses,
    gravity); ``observe_hook(t, q, v) -> (q, v)`` is what the controller reads
    (sensor noise); ``actuate_hook(t, tau, sim) -> tau`` is the torque applied to
    the simulation (latency; external forces through ``sim.push``).  ``measure_gravity``:
    the walker reads the simulated gravity vector (an IMU's attitude) and leans the CoM
    against its floor component; False: it does not (as through the ROS graph), its
    disturbance observer alone leans it.

    Summary keys (SI units): ``duration_s`` is the time from the walk command
    until the last step has landed in the simulation (all steps counted by the
    walker and both feet loaded), ``planned_duration_s`` the planned time of
    that touchdown (start double support included), ``duration_ratio`` the first
    over the second (None without a last touchdown); ``walking_speed_mps`` is
    ``distance_m`` over the time from the planned first lift-off to that
    touchdown; ``distance_m`` the horizontal displacement of the sole
    midpoint (simulation) from start to end, ``planned_distance_m`` the
    walker's; ``zmp_outside_polygon_max_m`` the largest distance of the
    measured ZMP (simulated contact forces) outside the hull of the loaded
    soles; ``com_tracking_error_max_m`` the largest |planned CoM - CoM|
    during the walk; ``lateral_deviation_max_m`` the largest distance of the
    CoM from the planned CoM path, perpendicular to the planned heading;
    ``footstep_error_max_m`` the largest distance between a planned footstep
    (after the walker's step adjustment) and the sole where it landed;
    ``wall_ms_per_tick`` the wall time of a tick [ms] in the walker, the control stage,
    the run's measurements and the simulation step.

    Each tick goes through the control stage (:mod:`whole_body_control.runs.runner`), with
    the walker's reference whose contact flags release a foot the controller's contact
    transition time before its lift-off (:func:`released_ahead`, as the walker node sends
    them).  Lifted robot (the stage's :class:`~whole_body_control.lift.LiftDetector` on the
    simulated sole force sensors' normal forces): the controller enters its airborne mode
    (:meth:`WholeBodyController.hold_airborne`: no contacts, joint posture held), then the
    walker is frozen (:meth:`PatternGenerator.freeze`, no closing step), the fall
    detector's capture point criterion is off, and the run ends ``LIFTED_HOLD`` [s]
    later; ``lifted_at_s`` says when (``None``: never lifted).
    """
    from whole_body_control.runs.runner import (
        HARDEST_COUNT,
        RunStats,
        control_tick,
        in_process_stage,
        observe,
        push_body,
        record_tick,
        save_hardest_problems,
    )
    from whole_body_control.sim import SimConfig, Simulation
    from whole_body_control.sim.fall import FallDetector

    if int(steps) != steps or steps < 0:
        raise ConfigError(f"steps must be an integer >= 0, got {steps}")
    sim_config = sim_config or SimConfig()
    if friction is not None:
        sim_config = dataclasses.replace(sim_config, friction=float(friction))
        sim_config.validate()
    sim = Simulation(robot, sim_config)
    mu = min(friction, robot.config.friction) if friction is not None else None
    ctrl = controller or WholeBodyController(robot, wbc_config_for(robot), mu=mu)
    if save_hardest:
        ctrl.hqp.record_hardest(hardest_count or HARDEST_COUNT)
    if sim_hook is not None:
        sim_hook(sim)
    q0 = robot.q_ref.copy()
    # set down on the terrain under the base (a platform: the robot starts on top of it)
    q0[2] += sim_config.ground_height(float(q0[0]), float(q0[1]))
    sim.reset(q0)
    ctrl.reset(sim.q, sim.v)
    walker = make_walker(robot, ctrl, walker_config, sim_config.ground_height if sim_config.platforms else None)
    if steps:
        walker.walk_steps(int(steps), speed, vy, yaw_rate)
    dt = sim.timestep
    lead = ctrl.config.contacts.transition_time
    stage = in_process_stage(robot, ctrl, dt, com_mode)
    # the walker measures the controller's state, unless the QP runs every few states: that
    # state is then up to a solve period old, while the ROS walker measures the joint state of
    # its own batch (Talos at 2 ms solves kept its 0.5 m/s forward push with this, 0.3625 without)
    fresh = KinematicState(robot) if stage.config.solve_every > 1 else None

    stats = RunStats()
    fall = FallDetector(robot)
    lifted_at: float | None = None
    recorder = Recorder(robot, every=5) if out_dir is not None else None
    start_mid = _sole_midpoint(sim)
    zmp_out_max = 0.0
    com_err_max = 0.0
    lateral_max = 0.0
    residual_max = 0.0
    pushed = False
    push_end = push_at + push_duration if push_dv is not None else 0.0  # the run lasts past it
    walk_end: float | None = None  # all steps landed in the sim
    walker_done: float | None = None  # walker finished (final double support over)
    schedule = None
    landed: list[dict] = []
    prev_contact = {s: True for s in SIDES}
    t = 0.0
    k = 0
    max_ticks = 1
    parts = dict.fromkeys(("walker", "control", "measurements", "simulation"), 0.0)  # wall time [s]
    clock = time.perf_counter
    wall0 = clock()
    while k < max_ticks:
        t = k * dt
        if push_dv is not None and not pushed and t >= push_at:
            sim.push_velocity_change(push_body(robot), np.array(push_dv, dtype=float), push_duration)
            pushed = True
        q, v = sim.q, sim.v
        if observe_hook is not None:
            q, v = observe_hook(t, q, v)
        st = ctrl.state
        if fresh is not None:
            fresh.update(q, v)
            st = fresh
        # the gravity vector in the floor's frame stands for the IMU attitude (ground truth, as q and v)
        gravity = sim.model.opt.gravity.copy() if measure_gravity else None
        # the soles where the controller's kinematics put them: the walker may re-anchor its plan on a landing
        soles = {s: st.placement(robot.foot_frame_ids[s]).translation.copy() for s in SIDES}
        measured = MeasuredState(st.com.copy(), st.vcom.copy(), gravity=gravity, feet=soles)
        t_walker = clock()
        wref = walker.cycle(t, measured if com_mode == "dcm" else None)
        if schedule is None:
            schedule = walker.schedule
            # (no steps: the walker stands, and may step to recover from a push)
            end = schedule.end_time if math.isfinite(schedule.end_time) else 0.0
            max_ticks = int(math.ceil((max(end, push_end) + settle_time + 10.0) / dt))
        # the controller's contacts release a foot `lead` before the walker lifts it (once lifted,
        # the stage holds the posture and takes no reference)
        reference = released_ahead(wref, walker, t, lead)
        t_control = clock()
        cmd, result = control_tick(stage, observe(sim, k * stage.period_ns, q, v), reference)
        t_measure = clock()
        if stage.lifted and lifted_at is None:
            lifted_at = t
            walker.freeze()
        st = ctrl.state
        stats.add(result, 0.0)
        if result.ok:
            residual_max = max(residual_max, result.dynamics_residual)

        # measurements
        walking = walker_done is None and lifted_at is None
        com_err = float(np.linalg.norm(wref.com_pos - st.com))
        if walking:
            com_err_max = max(com_err_max, com_err)
            heading = reference_heading(wref)
            d = st.com[:2] - wref.com_pos[:2]
            lateral_max = max(lateral_max, float(abs(-math.sin(heading) * d[0] + math.cos(heading) * d[1])))
        polygon = sim.support_polygon()
        zmp = sim.measured_zmp()
        if zmp is not None and len(polygon) >= 3:
            zmp_out_max = max(zmp_out_max, geometry.signed_distance(polygon, zmp))
        if fall.update(t, sim, st.com, st.vcom, capture_polygon(polygon, wref, robot), lifted=stage.lifted):
            stage.supervisor.fall(fall.reason)
        for side in SIDES:
            now = wref.feet[side].in_contact
            if now and not prev_contact[side]:
                oMf = sim.sole_placement(side)
                landed.append(
                    {"side": side, "t": round(t, 4), "pos": oMf.translation.copy(), "yaw": yaw_of(oMf.rotation)}
                )
            prev_contact[side] = now
        if recorder is not None:
            record_tick(recorder, t, sim, ctrl, result)
            recorder.add(
                com_plan=wref.com_pos,
                zmp_ref=wref.zmp_ref[:2],
                zmp_cmd=wref.zmp_cmd[:2],
                left_foot_ref=wref.feet["left"].pos,
                right_foot_ref=wref.feet["right"].pos,
                left_foot=st.placement(robot.foot_frame_ids["left"]).translation,
                right_foot=st.placement(robot.foot_frame_ids["right"]).translation,
                contacts_ctrl=[float(ctrl.contacts[s].active) for s in SIDES],
                contacts_sim=[float(c) for c in sim.foot_contacts().values()],
                fz_sim=[sim.foot_wrenches()[s][2] for s in SIDES],
                base_rpy=_rpy(sim.q[3:7]),
                status_ok=float(result.ok),
            )
        t_sim = clock()
        if not fall.step(sim, t, cmd.tau if actuate_hook is None else actuate_hook(t, cmd.tau, sim)):
            break
        t_end = clock()
        parts["walker"] += t_control - t_walker
        parts["control"] += t_measure - t_control
        parts["measurements"] += t_sim - t_measure
        parts["simulation"] += t_end - t_sim
        if on_tick is not None:
            on_tick(t, sim, ctrl, result, wref)
        k += 1
        if fall.reason is not None:
            break
        if walk_end is None and steps and walker.steps_completed >= steps and all(sim.foot_contacts(1.0).values()):
            walk_end = t
        if walker_done is None and walker.steps_completed >= steps and not walker.is_walking:
            walker_done = t
        elif walker_done is not None and walker.is_walking:
            walker_done = None  # walking again: a recovery step (config.recovery_step)
        if walker_done is not None and t >= max(walker_done, push_end) + settle_time:
            break
        if lifted_at is not None and t >= lifted_at + LIFTED_HOLD:
            break
    wall = clock() - wall0

    end_mid = _sole_midpoint(sim)
    t0 = schedule.t0 if schedule is not None and math.isfinite(schedule.t0) else 0.0
    planned_touchdown = schedule.steps[-1].t_end - t0 if schedule is not None and schedule.steps else 0.0
    t_lift = schedule.steps[0].t_start if schedule is not None and schedule.steps else None  # first lift-off
    planned_feet = schedule.final_feet if schedule is not None else None
    planned_distance = (
        float(
            np.linalg.norm(0.5 * (planned_feet["left"].position[:2] + planned_feet["right"].position[:2]) - start_mid)
        )
        if planned_feet is not None
        else 0.0
    )
    footsteps = []
    step_err_max = 0.0
    if schedule is not None:
        # the walker's step adjustment may move landings: the error is to the final (adjusted) plan
        # (a landing that re-anchored the plan is measured against the footstep it was aimed at)
        final = walker.schedule.steps if len(walker.schedule.steps) == len(schedule.steps) else schedule.steps
        aimed = walker.landing_targets if final is walker.schedule.steps else {}
        for i, step in enumerate(schedule.steps):
            row = {
                "side": step.side,
                "planned": [round(float(x), 4) for x in step.position[:2]],
                "planned_yaw": round(step.yaw, 4),
                "t_touchdown": round(step.t_end, 4),
            }
            target = aimed.get(i, final[i].position[:2])
            if float(np.linalg.norm(target - step.position[:2])) > 1e-6:
                row["adjusted"] = [round(float(x), 4) for x in target]
            if i < len(landed) and landed[i]["side"] == step.side:
                err = float(np.linalg.norm(landed[i]["pos"][:2] - target))
                step_err_max = max(step_err_max, err)
                row["landed"] = [round(float(x), 4) for x in landed[i]["pos"][:2]]
                row["landed_yaw"] = round(landed[i]["yaw"], 4)
            footsteps.append(row)
    summary = {
        "robot": robot.name,
        "speed_mps": speed,
        "vy_mps": vy,
        "yaw_rate_radps": yaw_rate,
        "steps": int(steps),
        "fell": fall.reason is not None,
        "fall_reason": fall.reason,
        "fall_time_s": fall.time,
        "latched": stage.supervisor.latched,
        "lifted_at_s": round(lifted_at, 4) if lifted_at is not None else None,
        "steps_completed": int(min(walker.steps_completed, steps)),  # landed by the end (or the fall)
        "recovery_walks": walker.recoveries,  # walks started from standing to catch the DCM
        "distance_m": round(float(np.linalg.norm(end_mid - start_mid)), 4),
        "planned_distance_m": round(planned_distance, 4),
        "duration_s": round(walk_end - t0, 4) if walk_end is not None else None,
        "planned_duration_s": round(planned_touchdown, 4),
        "duration_ratio": round((walk_end - t0) / planned_touchdown, 4)
        if walk_end is not None and planned_touchdown > 0.0
        else None,
        "walking_speed_mps": round(float(np.linalg.norm(end_mid - start_mid)) / (walk_end - t_lift), 4)
        if walk_end is not None and t_lift is not None and walk_end > t_lift
        else None,
        "simulated_s": round(k * dt, 4),
        "zmp_outside_polygon_max_m": round(zmp_out_max, 5),
        "com_tracking_error_max_m": round(com_err_max, 5),
        "lateral_deviation_max_m": round(lateral_max, 5),
        "footstep_error_max_m": round(step_err_max, 5),
        "dynamics_residual_max": float(f"{residual_max:.3g}"),
        "qp_failures": stats.failures,
        "statuses": stats.statuses,
        "failure_reasons": stats.reasons,
        "torque_rate_max_nm_per_tick": round(stats.torque_rate_max, 4),
        **stats.timing(),
        "real_time_factor": round(k * dt / wall, 4),
        # where the wall time of a tick went [ms]: the walker (with its inputs), the control stage
        # (observation, supervisor, controller), the run's measurements (support polygon, ZMP, fall
        # check, landings, recording), the simulation step; the rest of the loop is in neither
        "wall_ms_per_tick": {name: round(1e3 * part / max(k, 1), 4) for name, part in parts.items()},
        "com_mode": com_mode,
        "push_dv": list(push_dv) if push_dv is not None else None,
        "push_at_s": push_at if push_dv is not None else None,
        "friction": friction,
    }
    sim.close()
    save_hardest_problems(ctrl, save_hardest, summary)
    if recorder is not None:
        summary["report"] = str(out_dir)
        recorder.write(out_dir, {**summary, "footsteps": footsteps})
    return summary


def _sole_midpoint(sim: Simulation) -> np.ndarray:
    return 0.5 * (sim.sole_placement("left").translation[:2] + sim.sole_placement("right").translation[:2])


def _rpy(quat_xyzw: np.ndarray) -> np.ndarray:
    x, y, z, w = quat_xyzw
    roll = math.atan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y))
    pitch = math.asin(max(-1.0, min(1.0, 2 * (w * y - z * x))))
    yaw = math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    return np.array([roll, pitch, yaw])
