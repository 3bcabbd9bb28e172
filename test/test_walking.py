"""Walking: the walker -> controller conversion, and a closed-loop walk of Talos in MuJoCo."""

from __future__ import annotations

import math

import numpy as np
import pytest

from whole_body_control import geometry
from whole_body_control.controller import WholeBodyController
from whole_body_control.errors import ConfigError
from whole_body_control.robot import load_robot
from whole_body_control.runs.walk import run_walk
from whole_body_control.walker_stage import contacts_ahead, make_walker, walker_to_reference
from zmp_walker import FootRef, WalkerReference
from zmp_walker.geometry import rotation_z

STEPS = 6
SPEED = 0.2  # [m/s]
ZMP_TOLERANCE = 0.005  # [m] measured ZMP at most this far outside the loaded soles...
ZMP_SHARE = 0.98  # ...on at least this share of the loaded ticks
RESIDUAL = 1e-6  # |M a + h - S^T tau - J^T f| of an "ok" solution


def _foot(pos, yaw, in_contact, lin_vel=(0, 0, 0), yaw_rate=0.0) -> FootRef:
    return FootRef(
        np.array(pos, dtype=float),
        rotation_z(yaw),
        np.array(lin_vel, dtype=float),
        np.array([0.0, 0.0, yaw_rate]),
        np.array([0.0, 0.0, 0.5]),
        np.zeros(3),
        in_contact,
    )


def _walker_ref() -> WalkerReference:
    return WalkerReference(
        time=2.0,
        phase="single_support_left",
        com_pos=np.array([0.1, 0.05, 0.87]),
        com_vel=np.array([0.2, -0.1, 0.0]),
        com_acc=np.array([0.3, -0.4, 0.0]),
        feet={
            "left": _foot([0.0, 0.1, 0.0], 0.2, True),
            "right": _foot([0.1, -0.1, 0.03], 0.4, False, lin_vel=(0.5, 0.0, 0.1), yaw_rate=0.6),
        },
        zmp_ref=np.zeros(3),
        zmp_cmd=np.zeros(3),
        dcm_ref=np.zeros(3),
        upcoming_footsteps=(),
        omega=3.4,
    )


def test_conversion_maps_feet_contacts_attitude_and_com():
    wref = _walker_ref()
    ref = walker_to_reference(wref)
    assert ref.contacts == {"left": True, "right": False}
    for side, name in (("left", "left_foot"), ("right", "right_foot")):
        f, fr = wref.feet[side], ref.frames[name]
        np.testing.assert_allclose(fr.pos, f.pos)
        np.testing.assert_allclose(fr.rot, f.rotation)
        np.testing.assert_allclose(fr.lin_vel, f.lin_vel)
        np.testing.assert_allclose(fr.ang_vel, f.ang_vel)
        np.testing.assert_allclose(fr.lin_acc, f.lin_acc)
        np.testing.assert_allclose(fr.ang_acc, f.ang_acc)
    # upright torso and base, heading the mean sole yaw, turning at the mean yaw rate
    for name in ("torso", "base"):
        fr = ref.frames[name]
        np.testing.assert_allclose(fr.rot, rotation_z(0.3), atol=1e-12)
        np.testing.assert_allclose(fr.ang_vel, [0.0, 0.0, 0.3])
    np.testing.assert_allclose(ref.com_pos, wref.com_pos)
    np.testing.assert_allclose(ref.com_vel, wref.com_vel)
    np.testing.assert_allclose(ref.com_acc, wref.com_acc)


def test_conversion_contacts_override_and_dcm_mode():
    wref = _walker_ref()
    ref = walker_to_reference(wref, contacts={"left": False, "right": True})
    assert ref.contacts == {"left": False, "right": True}
    com, vcom = np.array([0.12, 0.04, 0.9]), np.array([0.25, -0.05, 0.01])
    ref = walker_to_reference(wref, com_mode="dcm", measured_com=com, measured_vcom=vcom)
    # horizontal PD acts on the measured state (no second feedback); height tracks the plan
    np.testing.assert_allclose(ref.com_pos, [0.12, 0.04, 0.87])
    np.testing.assert_allclose(ref.com_vel, [0.25, -0.05, 0.0])
    np.testing.assert_allclose(ref.com_acc, wref.com_acc)
    with pytest.raises(ConfigError, match="com_mode"):
        walker_to_reference(wref, com_mode="bogus")


def test_heading_average_wraps_around_pi():
    wref = _walker_ref()
    feet = {"left": _foot([0, 0.1, 0], math.pi - 0.1, True), "right": _foot([0, -0.1, 0], -math.pi + 0.1, True)}
    ref = walker_to_reference(WalkerReference(**{**wref.__dict__, "feet": feet}))
    np.testing.assert_allclose(ref.frames["base"].rot, rotation_z(math.pi), atol=1e-12)


def test_contact_released_one_transition_before_lift_off():
    robot = load_robot("talos")
    ctrl = WholeBodyController(robot)
    walker = make_walker(robot, ctrl)
    walker.walk_steps(2, 0.2)
    walker.cycle(0.0)
    lead = ctrl.config.contacts.transition_time
    first = walker.schedule.steps[0]
    stance = "left" if first.side == "right" else "right"
    before = contacts_ahead(walker, first.t_start - 1.5 * lead, lead)
    ramp = contacts_ahead(walker, first.t_start - 0.5 * lead, lead)
    swing = contacts_ahead(walker, first.t_start + 0.1, lead)
    landed = contacts_ahead(walker, first.t_end + 1e-6, lead)
    assert before == {"left": True, "right": True}
    assert ramp == {first.side: False, stance: True}
    assert swing == {first.side: False, stance: True}
    assert landed[first.side]  # touchdown: added when the walker lands it, never early


@pytest.fixture(scope="module")
def talos_walk():
    robot = load_robot("talos")
    ticks = {"residual_bad": [], "zmp_out": [], "ok": 0}

    def on_tick(t, sim, ctrl, result, wref):
        if result.ok:
            ticks["ok"] += 1
            if not result.dynamics_residual < RESIDUAL:
                ticks["residual_bad"].append((t, result.dynamics_residual))
        zmp = sim.measured_zmp()
        polygon = sim.support_polygon()
        if zmp is not None and len(polygon) >= 3:
            ticks["zmp_out"].append(geometry.signed_distance(polygon, zmp))

    summary = run_walk(robot, SPEED, 0.0, 0.0, STEPS, None, 0.0, None, None, None, settle_time=0.3, on_tick=on_tick)
    return summary, ticks


def test_talos_walks_six_steps(talos_walk):
    summary, _ = talos_walk
    assert not summary["fell"], summary["fall_reason"]
    assert summary["steps_completed"] == STEPS
    planned = summary["planned_distance_m"]
    assert planned > 0.5
    assert abs(summary["distance_m"] - planned) <= 0.3 * planned, summary
    assert summary["duration_s"] <= 1.1 * summary["planned_duration_s"]
    assert summary["footstep_error_max_m"] < 0.03
    # where a tick's wall time went (figures, not asserted): every part measured, within the wall time
    parts = summary["wall_ms_per_tick"]
    assert set(parts) == {"walker", "control", "measurements", "simulation"}
    assert all(v > 0.0 for v in parts.values())
    assert sum(parts.values()) <= 1e3 / summary["real_time_factor"] * 1.01  # [ms] per simulated ms


def test_talos_walk_measured_zmp_inside_loaded_soles(talos_walk):
    _, ticks = talos_walk
    out = np.array(ticks["zmp_out"])
    assert out.size > 1000
    share_inside = float(np.mean(out <= ZMP_TOLERANCE))
    assert share_inside >= ZMP_SHARE, f"measured ZMP within {ZMP_TOLERANCE} m on only {share_inside:.3f} of the ticks"


def test_talos_walk_solutions_satisfy_the_dynamics(talos_walk):
    summary, ticks = talos_walk
    assert ticks["ok"] > 0.95 * sum(summary["statuses"].values()), summary["statuses"]
    assert not ticks["residual_bad"], ticks["residual_bad"][:5]


def test_talos_walks_with_the_real_time_graphs_solve_period():
    """The QP every 4 ms, its plan held between (config/ros's ``solve_period``), the walker
    measuring each state itself (the controller's state is up to 4 ms old): the walk lands
    every step where planned, and every tick counts as its plan's status (none as damping)."""
    from whole_body_control.runs.runner import stage_options

    with stage_options(solve_period=0.004):
        s = run_walk(load_robot("talos"), SPEED, 0.0, 0.0, 4, None, 1.0, None, None, None)
    assert not s["fell"], s["fall_reason"]
    assert s["steps_completed"] == 4
    assert s["footstep_error_max_m"] < 0.01
    assert set(s["statuses"]) == {"ok"}, s["statuses"]
