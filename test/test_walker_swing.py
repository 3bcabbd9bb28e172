"""Swing-foot trajectories: C2 continuity (finite differences), rest at both ends, apex height."""

import numpy as np
import pytest

from zmp_walker.config import WalkerConfig
from zmp_walker.generator import PatternGenerator
from zmp_walker.geometry import FootPose, SoleRect
from zmp_walker.swing import SwingTrajectory

SOLE = SoleRect(-0.10, 0.10, -0.065, 0.065)


def test_swing_ends_at_rest_and_reaches_apex():
    start = FootPose(np.array([0.0, 0.1, 0.0]), 0.0)
    end = FootPose(np.array([0.3, 0.15, 0.02]), 0.25)
    swing = SwingTrajectory(start, end, 1.0, 1.6, 0.05)
    for t in (1.0, 1.6):
        s = swing(t)
        assert np.abs(s.vel).max() < 1e-12 and np.abs(s.acc).max() < 1e-12
        assert s.yaw_rate == pytest.approx(0.0, abs=1e-12) and s.yaw_acc == pytest.approx(0.0, abs=1e-12)
    assert swing(1.0).pos == pytest.approx(start.position)
    assert swing(1.6).pos == pytest.approx(end.position)
    assert swing(1.6).yaw == pytest.approx(0.25)
    assert swing(1.3).pos[2] == pytest.approx(0.02 + 0.05)  # mid-swing: height above the higher end
    ts = np.linspace(1.0, 1.6, 6001)
    z = np.array([swing(t).pos[2] for t in ts])
    assert 0.07 <= z.max() < 0.075 and z.min() >= -1e-12
    flat = SwingTrajectory(start, FootPose(np.array([0.3, 0.1, 0.0])), 0.0, 0.6, 0.05)
    z = np.array([flat(t).pos[2] for t in np.linspace(0.0, 0.6, 6001)])
    assert z.max() == pytest.approx(0.05, abs=1e-9) and ts[np.argmax(z)] - 1.0 == pytest.approx(0.3)


def test_swing_derivatives_match_finite_differences():
    swing = SwingTrajectory(FootPose(np.zeros(3), -0.2), FootPose(np.array([0.25, -0.05, 0.0]), 0.1), 0.0, 0.64, 0.05)
    h = 1e-6
    for t in np.linspace(0.0, 0.64, 33):
        s, sp, sm = swing(t), swing(t + h), swing(t - h)
        # at the ends t -+ h is outside the swing, where the foot rests: the difference is then
        # one-sided and off by jerk * h / 4 (~2e-5 here), hence the tolerance
        assert s.vel == pytest.approx((sp.pos - sm.pos) / (2 * h), abs=1e-6)
        assert s.acc == pytest.approx((sp.vel - sm.vel) / (2 * h), abs=1e-4)
        assert s.yaw_rate == pytest.approx((sp.yaw - sm.yaw) / (2 * h), abs=1e-6)
        assert s.yaw_acc == pytest.approx((sp.yaw_rate - sm.yaw_rate) / (2 * h), abs=1e-4)


def test_generator_feet_are_c2_across_phase_boundaries():
    cfg = WalkerConfig()
    dt = cfg.dt
    gen = PatternGenerator(cfg, FootPose([0, 0.085, 0]), FootPose([0, -0.085, 0]), np.array([0, 0, 0.87]), SOLE, SOLE)
    gen.walk_steps(4, 0.2, 0.05, 0.2)
    refs = [gen.cycle(i * dt) for i in range(int(7.5 / dt))]
    assert gen.steps_completed == 4
    for side in ("left", "right"):
        pos = np.array([r.feet[side].pos for r in refs])
        vel = np.array([r.feet[side].lin_vel for r in refs])
        acc = np.array([r.feet[side].lin_acc for r in refs])
        wz = np.array([r.feet[side].ang_vel[2] for r in refs])
        contact = np.array([r.feet[side].in_contact for r in refs])
        # the derivatives are consistent with the positions everywhere (central differences)
        assert np.abs((pos[2:] - pos[:-2]) / (2 * dt) - vel[1:-1]).max() < 5e-4
        # (the jerk jumps at lift-off/touchdown: there the central difference is off by |jerk| dt / 4)
        assert np.abs((vel[2:] - vel[:-2]) / (2 * dt) - acc[1:-1]).max() < 0.05
        # continuity: no jump larger than what the bounded derivative allows in one tick
        assert np.abs(np.diff(pos, axis=0)).max() < np.abs(vel).max() * dt * 1.01
        assert np.abs(np.diff(vel, axis=0)).max() < np.abs(acc).max() * dt * 1.01 + 1e-9
        jerk_bound = 60.0 * 0.3 / cfg.single_support_duration**3 * 10  # generous bound of |d acc / dt|
        assert np.abs(np.diff(acc, axis=0)).max() < jerk_bound * dt
        # in contact <=> at rest; the foot lifts off and lands at zero velocity
        assert np.abs(vel[contact]).max() == 0.0 and np.abs(wz[contact]).max() == 0.0
        boundaries = np.flatnonzero(np.diff(contact.astype(int)))
        assert len(boundaries) >= 2
        for i in boundaries:
            assert np.abs(vel[i]).max() < 1e-3 and np.abs(vel[i + 1]).max() < 1e-3
        apex = pos[~contact, 2].max()
        assert apex == pytest.approx(cfg.step_height, abs=1e-4)
