"""DCM feedback closes the loop on a simulated LIPM: pushes are absorbed, not without it."""

import math

import numpy as np
import pytest

from zmp_walker.config import WalkerConfig
from zmp_walker.dcm import DcmFeedback, dcm, omega
from zmp_walker.generator import MeasuredState, PatternGenerator
from zmp_walker.geometry import FootPose, SoleRect, support_polygon

SOLE = SoleRect(-0.10, 0.10, -0.065, 0.065)
G, Z_C, DT = 9.81, 0.87, 0.001
W = omega(G, Z_C)
FEET = [FootPose([0, 0.085, 0]), FootPose([0, -0.085, 0])]
POLY = support_polygon(FEET, [SOLE, SOLE], margin=0.01)


def simulate_standing(push, k, seconds=3.0):
    """LIPM c'' = omega^2 (c - p) standing above the origin, pushed by a velocity ``push``."""
    fb = DcmFeedback(k, W) if k is not None else None
    c, v = np.zeros(2), np.asarray(push, dtype=float)
    xi, zmp = [], []
    for _ in range(int(seconds / DT)):
        xi_m = dcm(c, v, W)
        p = fb.zmp(np.zeros(2), np.zeros(2), xi_m, POLY) if fb else np.zeros(2)
        a = W * W * (c - p)
        v = v + a * DT
        c = c + v * DT
        xi.append(np.linalg.norm(xi_m))
        zmp.append(p)
    return np.array(xi), np.array(zmp)


def test_error_decays_at_rate_omega_k_minus_one():
    k = 2.0
    xi, zmp = simulate_standing([0.05, 0.0], k, seconds=1.0)
    t = 0.5
    expected = xi[0] * math.exp(-W * (k - 1.0) * t)  # unsaturated: e' = omega (1 - k) e
    assert xi[int(t / DT)] == pytest.approx(expected, rel=0.02)
    assert max(POLY.signed_distance(p) for p in zmp) < 0.0  # small push: never clamped


def test_push_absorbed_with_feedback_and_divergent_without():
    push = [0.25, -0.15]
    xi_fb, zmp_fb = simulate_standing(push, k=3.0)
    assert xi_fb[-1] < 1e-3 * xi_fb[0]
    assert np.all(np.diff(xi_fb) <= 1e-12)  # monotone convergence of |xi error|
    assert max(POLY.signed_distance(p) for p in zmp_fb) < 1e-12  # clamped into the support polygon
    assert max(POLY.signed_distance(p) for p in zmp_fb) > -1e-6  # ... and the clamp was needed
    xi_ol, _ = simulate_standing(push, k=None)
    assert xi_ol[-1] > 100 * xi_ol[0]  # xi' = omega xi: exponential divergence
    assert math.log(xi_ol[-1] / xi_ol[-1001]) == pytest.approx(W * 1.0, rel=0.01)


def run_pushed_walk(feedback: bool):
    cfg = WalkerConfig(k_dcm=3.0)
    gen = PatternGenerator(cfg, FEET[0], FEET[1], np.array([0.0, 0.0, Z_C]), SOLE, SOLE)
    gen.walk_steps(6, 0.2)
    c, v = np.zeros(2), np.zeros(2)
    errors, outside = [], []
    for i in range(int(8.0 / DT)):
        t = i * DT
        if i == int(3.2 / DT):
            v = v + np.array([0.05, 0.12])  # push during single support
        measured = MeasuredState(np.array([c[0], c[1], Z_C]), np.array([v[0], v[1], 0.0])) if feedback else None
        ref = gen.cycle(t, measured)
        p = ref.zmp_cmd[:2]  # the ZMP the whole-body controller realises
        outside.append(gen.zmp_reference.polygon(t).signed_distance(p))
        if feedback:
            assert ref.com_acc[:2] == pytest.approx(W * W * (c - p))  # what the WBC should track
        v = v + W * W * (c - p) * DT
        c = c + v * DT
        errors.append(np.linalg.norm(dcm(c, v, W) - ref.dcm_ref[:2]))
        if errors[-1] > 1.0:
            break
    return np.array(errors), np.array(outside), gen


def test_pushed_walk_recovers_with_dcm_feedback():
    err, outside, gen = run_pushed_walk(feedback=True)
    i_push = int(3.2 / DT)
    assert err[i_push + 1] > 0.03  # the push made a real DCM error
    assert err[-1] < 1e-3 and gen.steps_completed == 6
    assert outside.max() < 1e-9  # corrected ZMP inside the support polygon at every tick
    err_ol, _, _ = run_pushed_walk(feedback=False)
    assert err_ol.max() > 0.3  # without feedback the same push diverges


def run_walk_with_constant_force(observer: bool, accel, seconds=9.0):
    """LIPM walk under a constant horizontal acceleration ``accel`` (a slope or a steady
    push the walker does not know about), ramped in over the first second."""
    from zmp_walker.config import DisturbanceObserverConfig

    cfg = WalkerConfig(k_dcm=3.0, disturbance_observer=DisturbanceObserverConfig(enabled=observer))
    gen = PatternGenerator(cfg, FEET[0], FEET[1], np.array([0.0, 0.0, Z_C]), SOLE, SOLE)
    gen.walk_steps(6, 0.2)
    c, v = np.zeros(2), np.zeros(2)
    accel = np.asarray(accel, dtype=float)
    for i in range(int(seconds / DT)):
        t = i * DT
        ref = gen.cycle(t, MeasuredState(np.array([c[0], c[1], Z_C]), np.array([v[0], v[1], 0.0])))
        p = ref.zmp_cmd[:2]
        v = v + (W * W * (c - p) + min(1.0, t) * accel) * DT
        c = c + v * DT
        if np.linalg.norm(c - ref.zmp_ref[:2]) > 1.0:
            break
    return ref, gen, c


def test_observer_leans_into_a_constant_force_and_keeps_the_zmp_planned():
    accel = np.array([-0.6, 0.25])  # [m/s^2] about a 3.5 deg slope uphill plus a sideways pull
    ref, gen, c = run_walk_with_constant_force(True, accel)
    assert gen.steps_completed == 6 and not gen.is_walking
    # the reference moved by -d / omega = -accel / omega^2: the CoM leans into the force...
    assert gen.disturbance_offset == pytest.approx(-accel / W**2, rel=0.02)
    assert c - ref.zmp_ref[:2] == pytest.approx(-accel / W**2, abs=2e-3)
    # ... and the ZMP is back where it was planned
    assert np.linalg.norm(ref.zmp_cmd[:2] - ref.zmp_ref[:2]) < 1e-3
    # without the observer the DCM feedback holds the ZMP off the plan by accel / omega^2 / (k - 1) * k
    ref_off, gen_off, _ = run_walk_with_constant_force(False, accel)
    assert np.linalg.norm(ref_off.zmp_cmd[:2] - ref_off.zmp_ref[:2]) > 0.5 * np.linalg.norm(accel) / W**2
    assert np.all(gen_off.disturbance_offset == 0.0)


def test_observer_rejects_non_finite_input_and_limits_its_offset():
    from zmp_walker.dcm import DcmDisturbanceObserver

    obs = DcmDisturbanceObserver(W, bandwidth=3.0, max_offset=0.05)
    p = np.zeros(2)
    xi = np.array([0.0, 0.0])
    for i in range(5000):  # a huge steady drift: the estimate saturates at max_offset
        xi = xi + DT * np.array([1.0, 0.0])
        obs.update(i * DT, xi, p)
    assert np.linalg.norm(obs.offset) == pytest.approx(0.05)
    before = obs.offset.copy()
    assert np.all(obs.update(5.001, np.array([np.nan, 0.0]), p) == before)  # NaN: estimate kept, restarted
    assert np.all(np.isfinite(obs.update(5.002, xi, p)))
    with pytest.raises(ValueError):
        DcmDisturbanceObserver(W, bandwidth=0.0, max_offset=0.1)


def walk_on_tilting_floor(measure_gravity: bool, slope_deg: float, seconds=9.0):
    """LIPM walk in the ground's frame while gravity tilts to ``slope_deg`` about y over
    the first 2 s (as the slope scenarios): ``c'' = (g_z / -z_c) (c - p) + g_xy``."""
    cfg = WalkerConfig(k_dcm=3.0)
    gen = PatternGenerator(cfg, FEET[0], FEET[1], np.array([0.0, 0.0, Z_C]), SOLE, SOLE)
    gen.walk_steps(6, 0.2)
    c, v = np.zeros(2), np.zeros(2)
    zmp_off = 0.0
    for i in range(int(seconds / DT)):
        t = i * DT
        a = math.radians(slope_deg) * min(1.0, t / 2.0)
        g = np.array([-G * math.sin(a), 0.0, -G * math.cos(a)])
        measured = MeasuredState(
            np.array([c[0], c[1], Z_C]), np.array([v[0], v[1], 0.0]), gravity=g if measure_gravity else None
        )
        ref = gen.cycle(t, measured)
        p = ref.zmp_cmd[:2]
        zmp_off = max(zmp_off, float(np.linalg.norm(p - ref.zmp_ref[:2])))
        v = v + (-g[2] / Z_C * (c - p) + g[:2]) * DT
        c = c + v * DT
        if np.linalg.norm(c - ref.zmp_ref[:2]) > 1.0:
            break
    return ref, gen, c, zmp_off


@pytest.mark.parametrize("slope_deg", [10.0, -10.0])
def test_measured_gravity_leans_the_com_by_h_tan_a_and_keeps_the_zmp_on_its_plan(slope_deg):
    from zmp_walker.dcm import slope_shift

    a = math.radians(slope_deg)
    g = np.array([-G * math.sin(a), 0.0, -G * math.cos(a)])
    assert slope_shift(g, Z_C) == pytest.approx([Z_C * math.tan(a), 0.0])  # uphill (a > 0): lean forward
    assert np.all(slope_shift([0.0, 0.0, G], Z_C) == 0.0)  # gravity not into the ground: no lean
    ref, gen, c, zmp_off = walk_on_tilting_floor(True, slope_deg)
    assert gen.steps_completed == 6 and not gen.is_walking
    assert c[0] - ref.zmp_ref[0] == pytest.approx(Z_C * math.tan(a), abs=3e-3)
    assert np.linalg.norm(gen.observer.offset) < 5e-3  # the observer is left with (almost) nothing
    # the observer alone lags the tilt: the DCM feedback pushes the ZMP much further off its plan
    _, _, _, zmp_off_observer = walk_on_tilting_floor(False, slope_deg)
    assert zmp_off < 0.5 * zmp_off_observer


@pytest.mark.parametrize("slope_deg", [10.0, -10.0])
def test_slope_reach_lowers_the_com_so_that_the_lean_keeps_the_legs_flat_ground_reach(slope_deg):
    from zmp_walker.dcm import slope_height, slope_shift

    a = math.radians(slope_deg)
    g = np.array([-G * math.sin(a), 0.0, -G * math.cos(a)])
    reach = 0.075
    hn = slope_height(g, Z_C, reach)
    s = abs(float(slope_shift(g, hn)[0]))  # the lean of the lowered CoM
    # a foot `reach` from the ZMP on the far side of the lean is as far from the CoM as on flat ground
    assert hn**2 + (reach + s) ** 2 == pytest.approx(Z_C**2 + reach**2)
    assert slope_height(g, Z_C, 0.0) == pytest.approx(Z_C * math.cos(a))  # no reach: h along gravity
    assert slope_height([0.0, 0.0, G], Z_C, reach) == Z_C  # gravity not into the ground: unchanged
    # the walker's CoM reference: lowered with slope_reach, the height kept without
    for cfg_reach, height in ((reach, hn), (None, Z_C)):
        gen = PatternGenerator(
            WalkerConfig(slope_reach=cfg_reach), FEET[0], FEET[1], np.array([0.0, 0.0, Z_C]), SOLE, SOLE
        )
        ref = gen.cycle(0.0, MeasuredState(np.array([0.0, 0.0, Z_C]), np.zeros(3), gravity=g))
        assert ref.com_pos[2] == pytest.approx(height)
        assert gen.disturbance_offset[0] == pytest.approx(height * math.tan(a))
