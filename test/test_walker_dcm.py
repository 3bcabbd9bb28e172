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
