"""Lifted robot: the lift detector on synthetic foot forces, the walker's freeze, the
controller's airborne hold, and the closed loop (a hoist lifts Talos while walking)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from whole_body_control.controller import AIRBORNE_KP, WholeBodyController
from whole_body_control.errors import ConfigError
from whole_body_control.lift import LiftDetector
from whole_body_control.robot import load_robot
from zmp_walker import PlanningError
from zmp_walker.config import WalkerConfig
from zmp_walker.generator import PatternGenerator
from zmp_walker.geometry import FootPose, SoleRect

W = 1000.0  # [N] weight of the synthetic robot
DT = 0.001
SOLE = SoleRect(-0.10, 0.10, -0.065, 0.065)


def _feed(det: LiftDetector, forces, t0: float = 0.0, expects: bool = True) -> list[bool]:
    return [det.update(t0 + k * DT, f, expects) for k, f in enumerate(forces)]


# -- the detector ---------------------------------------------------------------------


def test_lift_declared_after_the_debounce_only():
    det = LiftDetector(W, threshold=0.07, debounce=0.05)
    out = _feed(det, [(500.0, 500.0)] * 100 + [(10.0, 5.0)] * 100)
    first = out.index(True)
    assert not any(out[:first]) and all(out[first:])
    assert first == 100 + 50  # 50 ms of both feet unloaded, counted from the first unloaded tick
    assert det.time == pytest.approx(0.150)


def test_one_loaded_foot_or_a_short_dip_is_not_a_lift():
    det = LiftDetector(W, threshold=0.07, debounce=0.05)
    # single support: the swing foot carries nothing, the stance foot the weight
    assert not any(_feed(det, [(0.0, 1000.0)] * 300))
    # both feet just above the threshold (7 % of 1000 N = 70 N)
    assert not any(_feed(det, [(75.0, 71.0)] * 300, t0=0.3))
    # unloaded 40 ms, a 1-tick load of 200 N, unloaded 40 ms again: the debounce restarts
    seq = [(0.0, 0.0)] * 40 + [(200.0, 0.0)] + [(0.0, 0.0)] * 40
    assert not any(_feed(det, seq, t0=0.6))
    # a robot the controller does not expect on its feet is never "lifted"
    assert not any(_feed(det, [(0.0, 0.0)] * 300, t0=1.0, expects=False))


def test_recontact_is_debounced_with_hysteresis():
    det = LiftDetector(W, threshold=0.07, recontact=0.15, debounce=0.05)
    assert _feed(det, [(0.0, 0.0)] * 60)[-1]
    # loads between the two thresholds, or a touch shorter than the debounce: still lifted
    assert all(_feed(det, [(100.0, 100.0)] * 200, t0=0.1))
    assert all(_feed(det, [(600.0, 0.0)] * 30 + [(0.0, 0.0)] * 30, t0=0.3))
    # a foot loaded above 15 % for 50 ms: down again (whatever the controller expects)
    out = _feed(det, [(0.0, 400.0)] * 100, t0=0.5, expects=False)
    assert out[49] and not out[50] and not any(out[50:])
    assert det.time is None
    # and it can be lifted again
    assert _feed(det, [(0.0, 0.0)] * 60, t0=1.0)[-1]
    det.reset()
    assert not det.lifted and det.time is None


def test_detector_rejects_bad_settings():
    for kwargs in ({"weight": 0.0}, {"weight": W, "threshold": 0.2, "recontact": 0.1}, {"weight": W, "debounce": -1}):
        with pytest.raises(ConfigError):
            LiftDetector(**kwargs)


# -- the walker's freeze ----------------------------------------------------------------


def _walking_generator() -> tuple[PatternGenerator, float]:
    cfg = WalkerConfig()
    gen = PatternGenerator(cfg, FootPose([0, 0.085, 0]), FootPose([0, -0.085, 0]), np.array([0, 0, 0.87]), SOLE, SOLE)
    gen.walk_steps(6, 0.25)
    t = 0.0
    while True:  # into the middle of the second swing
        ref = gen.cycle(t)
        if gen.steps_completed == 1 and not all(f.in_contact for f in ref.feet.values()):
            swing = next(s for s, f in ref.feet.items() if not f.in_contact)
            if ref.feet[swing].pos[2] > 0.02:
                return gen, t
        t += cfg.dt


def test_freeze_holds_the_reference_where_it_is():
    gen, t = _walking_generator()
    before = gen.cycle(t)
    swing = next(s for s, f in before.feet.items() if not f.in_contact)
    assert np.linalg.norm(before.feet[swing].lin_vel) > 0.05  # the foot is moving
    gen.freeze()
    assert gen.frozen and not gen.is_walking
    steps = gen.steps_completed
    refs = [gen.cycle(t + k * 0.01) for k in range(1, 500)]  # 5 s on
    for r in refs:
        assert r.phase == "frozen" and r.upcoming_footsteps == ()
        for side in ("left", "right"):
            f, f0 = r.feet[side], before.feet[side]
            np.testing.assert_array_equal(f.pos, f0.pos)  # the swinging foot stays in the air
            np.testing.assert_array_equal(f.rotation, f0.rotation)
            assert f.in_contact == f0.in_contact
            for a in (f.lin_vel, f.ang_vel, f.lin_acc, f.ang_acc):
                assert np.all(a == 0.0)
        np.testing.assert_array_equal(r.com_pos, before.com_pos)
        assert np.all(r.com_vel == 0.0) and np.all(r.com_acc == 0.0)
        assert all(np.all(np.isfinite(x)) for x in (r.com_pos, r.zmp_ref, r.zmp_cmd, r.dcm_ref))
    assert refs[-1].feet[swing].pos[2] > 0.02
    assert gen.steps_completed == steps and not gen.is_walking
    assert refs[-1].time == pytest.approx(t + 4.99)


def test_after_a_freeze_walk_commands_are_refused_and_stop_is_harmless():
    gen, t = _walking_generator()
    gen.freeze(t)
    gen.stop()  # nothing walks: no closing step
    assert gen.cycle(t + 1.0).phase == "frozen"
    for command in (lambda: gen.set_velocity(0.2), lambda: gen.walk_steps(2, 0.2), lambda: gen.set_goal(1, 0, 0)):
        with pytest.raises(PlanningError, match="freeze"):
            command()
    gen.freeze()  # twice: the first freeze stays
    assert gen.cycle(t + 2.0).phase == "frozen"


def test_freeze_before_any_cycle_holds_the_standing_reference():
    cfg = WalkerConfig()
    gen = PatternGenerator(cfg, FootPose([0, 0.085, 0]), FootPose([0, -0.085, 0]), np.array([0, 0, 0.87]), SOLE, SOLE)
    gen.freeze()
    ref = gen.cycle(1.0)
    assert all(f.in_contact for f in ref.feet.values())
    assert ref.feet["left"].pos == pytest.approx([0, 0.085, 0])


# -- the controller's airborne hold -----------------------------------------------------


def test_airborne_hold_drops_contacts_and_gives_finite_torques():
    robot = load_robot("talos")
    ctrl = WholeBodyController(robot)
    q = robot.q_ref.copy()
    q[2] += 0.3  # in the air
    v = np.zeros(robot.nv)
    ctrl.reset(q, v)
    ctrl.hold_airborne()
    assert ctrl.airborne and not any(c.active for c in ctrl.contacts.values())
    assert len(ctrl.support_polygon()) == 0
    r = ctrl.cycle(q, v)
    assert r.status == "airborne" and not any(r.contacts.values())
    # at the hold posture and at rest: the torques are the joint gravity torques
    np.testing.assert_allclose(r.tau, np.clip(ctrl.state.data.g[6:], -robot.tau_max, robot.tau_max), atol=1e-9)
    # away from it: a restoring PD torque on top of gravity, per joint with its own
    # inertia at the hold (decoupled, constant gains), inside the limits
    inertia = np.diag(ctrl.state.M)[6:].copy()
    q2 = q.copy()
    q2[7:] += 0.2
    r2 = ctrl.cycle(q2, v)
    expected = ctrl.state.data.g[6:] - inertia * AIRBORNE_KP * 0.2
    np.testing.assert_allclose(r2.tau, np.clip(expected, -robot.tau_max, robot.tau_max), atol=1e-3)
    assert np.all(np.isfinite(r2.tau)) and np.all(np.abs(r2.tau) <= robot.tau_max)
    ctrl.reset(robot.q_ref)
    assert not ctrl.airborne and all(c.active for c in ctrl.contacts.values())


# -- closed loop ------------------------------------------------------------------------


def test_talos_lifted_while_walking_stops_and_does_not_fall():
    from whole_body_control.runs.scenarios import hoist
    from whole_body_control.runs.walk import run_walk

    robot = load_robot("talos")
    seen = {"ref": None, "moved": 0.0, "statuses": set()}

    def on_tick(t, sim, ctrl, result, wref):
        if ctrl.airborne:
            seen["statuses"].add(result.status)
            assert np.all(np.isfinite(result.tau))
            feet = np.concatenate([wref.feet[s].pos for s in ("left", "right")])
            if seen["ref"] is None:
                seen["ref"] = feet
            seen["moved"] = max(seen["moved"], float(np.max(np.abs(feet - seen["ref"]))))

    summary = run_walk(
        robot, 0.25, 0.0, 0.0, 8, None, 1.0, None, None, None, actuate_hook=hoist(robot, 2.0), on_tick=on_tick
    )
    assert not summary["fell"], summary["fall_reason"]
    assert 2.0 < summary["lifted_at_s"] < 2.5
    assert summary["simulated_s"] >= summary["lifted_at_s"] + 1.0
    assert summary["steps_completed"] <= 2
    assert seen["statuses"] == {"airborne"} and seen["moved"] == 0.0
    assert summary["statuses"]["airborne"] > 1000
    assert math.isfinite(summary["distance_m"])
