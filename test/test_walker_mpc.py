"""Linear MPC: the cart-table ZMP stays in the support polygon at every MPC sample."""

import numpy as np
import pytest

from zmp_walker.config import MpcConfig, WalkerConfig
from zmp_walker.generator import PatternGenerator
from zmp_walker.geometry import FootPose, SoleRect

SOLE = SoleRect(-0.10, 0.10, -0.065, 0.065)
G = 9.81


def walk(cfg, command, duration):
    gen = PatternGenerator(
        cfg, FootPose([0, 0.085, 0]), FootPose([0, -0.085, 0]), np.array([0.0, 0.0, 0.87]), SOLE, SOLE
    )
    refs = []
    for i in range(int(duration / cfg.dt)):
        if i == 100:
            command(gen)
        if i == int(0.6 * duration / cfg.dt) and gen._velocity is not None:
            gen.stop()
        refs.append(gen.cycle(i * cfg.dt))
    return gen, refs


def zmp_distances(gen, refs, period):
    """Signed distance of the cart-table ZMP to the support polygon at the MPC samples [m]."""
    out = []
    for r in refs:
        k = r.time / period
        if abs(k - round(k)) < 1e-6:
            p = r.com_pos[:2] - gen.com_height / G * r.com_acc[:2]
            out.append(gen.zmp_reference.polygon(r.time).signed_distance(p))
    return np.array(out)


@pytest.mark.parametrize("auto", [False, True])
def test_zmp_tracking_walk_stays_in_support(auto):
    cfg = WalkerConfig(method="mpc", mpc=MpcConfig(auto_footsteps=auto))
    gen, refs = walk(cfg, lambda g: g.walk_steps(8, 0.2, 0.0, 0.2), 9.0)
    d = zmp_distances(gen, refs, cfg.mpc.period)
    assert len(d) == 90 and d.max() < 1e-3
    assert gen.steps_completed == 8 and refs[-1].phase == "standing"
    com = refs[-1].com_pos[:2]
    mid = 0.5 * (refs[-1].feet["left"].pos[:2] + refs[-1].feet["right"].pos[:2])
    assert com == pytest.approx(mid, abs=0.01)


@pytest.mark.parametrize("auto", [False, True])
def test_velocity_tracking_walk_saturates_but_respects_support(auto):
    """Herdt-style weights (velocity tracking dominates): the ZMP constraints become active."""
    mpc = MpcConfig(auto_footsteps=auto, zmp_weight=1e-3, velocity_weight=1.0)
    cfg = WalkerConfig(method="mpc", mpc=mpc)
    gen, refs = walk(cfg, lambda g: g.set_velocity(0.3, 0.0, 0.0), 10.0)
    d = zmp_distances(gen, refs, cfg.mpc.period)
    assert d.max() < 1e-3
    assert d.max() > -1e-3  # the constraints are active, so the test is not vacuous
    com = np.array([r.com_pos for r in refs])
    t = np.array([r.time for r in refs])
    i0, i1 = np.searchsorted(t, [3.0, 5.5])
    assert (com[i1, 0] - com[i0, 0]) / (t[i1] - t[i0]) == pytest.approx(0.3, rel=0.1)
    if auto:
        nominal = np.array(gen._nominal)
        placed = np.array([s.position[:2] for s in gen.schedule.steps])
        assert np.abs(placed - nominal).max() > 0.005  # the MPC moved footsteps
        for k, s in enumerate(gen.schedule.steps[1:], 1):  # within the step limits
            stance = gen.schedule.feet_before[k]["left" if s.side == "right" else "right"]
            dx, dy = stance.to_local(s.position)
            assert abs(dx) <= cfg.max_step_length + 1e-6
            assert cfg.min_step_width - 1e-6 <= abs(dy) <= cfg.max_step_width + 1e-6
