"""Footstep planner: limits, alternation, collision-free feet, goals, zero command."""

import math

import numpy as np
import pytest

from zmp_walker.config import WalkerConfig
from zmp_walker.footsteps import FootstepPlanner, other_side, side_sign
from zmp_walker.generator import PatternGenerator
from zmp_walker.geometry import FootPose, SoleRect

SOLE = SoleRect(-0.10, 0.10, -0.065, 0.065)
CFG = WalkerConfig()


def start_feet(x=0.0, y=0.0, yaw=0.0, sep=0.17):
    mid = FootPose(np.array([x, y, 0.0]), yaw)
    return {"left": mid.compose(0.0, sep / 2, 0.0), "right": mid.compose(0.0, -sep / 2, 0.0)}


def rect_points(pose, sole, n=15):
    """World points sampled on a sole rectangle (interior and boundary)."""
    xs, ys = np.meshgrid(np.linspace(sole.x_min, sole.x_max, n), np.linspace(sole.y_min, sole.y_max, n))
    local = np.stack([xs.ravel(), ys.ravel()], axis=1)
    c, s = math.cos(pose.yaw), math.sin(pose.yaw)
    return pose.position[:2] + local @ np.array([[c, s], [-s, c]])


def inside(points, pose, sole):
    c, s = math.cos(pose.yaw), math.sin(pose.yaw)
    d = points - pose.position[:2]
    lx, ly = c * d[:, 0] + s * d[:, 1], -s * d[:, 0] + c * d[:, 1]
    return (lx >= sole.x_min) & (lx <= sole.x_max) & (ly >= sole.y_min) & (ly <= sole.y_max)


def assert_valid_sequence(feet, steps, cfg=CFG, sole=SOLE):
    """Limits in the stance frame, alternation and no sole overlap (independent point test)."""
    feet = dict(feet)
    for i, step in enumerate(steps):
        if i > 0:
            assert step.side == other_side(steps[i - 1].side), "feet must alternate"
        stance = feet[other_side(step.side)]
        dx, dy = stance.to_local(step.position)
        dyaw = (step.yaw - stance.yaw + math.pi) % (2 * math.pi) - math.pi
        s = side_sign(step.side)
        assert abs(dx) <= cfg.max_step_length + 1e-9
        assert cfg.min_step_width - 1e-9 <= s * dy <= cfg.max_step_width + 1e-9
        assert -1e-9 <= s * dyaw <= cfg.max_step_yaw + 1e-9, "toe-out only, within max_step_yaw"
        for a, b in ((step.pose, stance), (stance, step.pose)):
            assert not inside(rect_points(a, sole), b, sole).any(), f"step {i}: soles overlap"
        feet[step.side] = step.pose
    return feet


@pytest.mark.parametrize(
    "cmd",
    [
        (0.3, 0.0, 0.0),
        (2.0, 0.0, 0.0),
        (-0.2, 0.0, 0.0),
        (0.0, 0.3, 0.0),
        (0.0, -0.5, 0.0),
        (0.0, 0.0, 0.5),
        (0.2, 0.1, -0.4),
        (0.5, -0.2, 2.0),
    ],
)
def test_velocity_steps_respect_limits_alternate_and_never_overlap(cmd):
    planner = FootstepPlanner(CFG, SOLE, SOLE, 0.17)
    feet = start_feet()
    steps = planner.from_velocity(feet, 16, *cmd)
    final = assert_valid_sequence(feet, steps)
    # the walk ends with the feet side by side, parallel, at the nominal separation
    rel = final["right"].to_local(final["left"].position)
    assert rel == pytest.approx([0.0, 0.17], abs=1e-9)
    assert final["left"].yaw == pytest.approx(final["right"].yaw)


def test_velocity_command_sets_mean_speed_and_first_foot():
    planner = FootstepPlanner(CFG, SOLE, SOLE, 0.17)
    T = CFG.step_duration
    steps = planner.from_velocity(start_feet(), 10, 0.2, 0.0, 0.0, close=False)
    assert steps[0].side == "right"  # straight walk: right foot first (documented)
    # 10 steps of T: the midpoint moved about 0.2 m/s * 10 T (the last foot leads by half a step)
    assert steps[-1].position[0] == pytest.approx(0.2 * 10 * T, abs=1e-9)
    left_turn = planner.from_velocity(start_feet(), 4, 0.0, 0.0, 0.15, close=False)
    assert left_turn[0].side == "left" and left_turn[0].yaw > 0.0  # inner foot turns first
    assert left_turn[1].yaw == pytest.approx(left_turn[0].yaw)  # outer foot catches up to parallel
    assert left_turn[-1].yaw == pytest.approx(0.15 * 4 * T)  # mean yaw rate 0.15 rad/s over 4 steps
    fast_turn = planner.from_velocity(start_feet(), 2, 0.0, 0.0, 5.0, close=False)
    assert fast_turn[0].yaw == pytest.approx(CFG.max_step_yaw)  # clamped
    right_side = planner.from_velocity(start_feet(), 2, 0.0, -0.2, 0.0, close=False)
    assert right_side[0].side == "right" and right_side[0].position[1] < -0.085


@pytest.mark.parametrize(
    "goal", [(1.0, 0.0, 0.0), (1.0, 0.5, 0.8), (0.0, 0.0, 3.0), (-0.5, 0.3, -1.0), (0.3, -0.6, 0.0), (2.0, 1.0, -2.5)]
)
def test_goal_is_reached_with_valid_steps(goal):
    planner = FootstepPlanner(CFG, SOLE, SOLE, 0.17)
    feet = start_feet(0.1, -0.2, 0.3)
    steps = planner.to_goal(feet, *goal)
    assert steps, "a goal away from the start needs steps"
    final = assert_valid_sequence(feet, steps)
    mid = 0.5 * (final["left"].position + final["right"].position)
    assert mid[:2] == pytest.approx(goal[:2], abs=2e-3)
    for side in ("left", "right"):
        assert math.cos(final[side].yaw - goal[2]) == pytest.approx(1.0, abs=1e-6)
    assert np.linalg.norm(final["left"].position - final["right"].position) == pytest.approx(0.17, abs=2e-3)


def test_goal_at_current_pose_needs_no_step():
    planner = FootstepPlanner(CFG, SOLE, SOLE, 0.17)
    assert planner.to_goal(start_feet(0.2, 0.1, 0.5), 0.2, 0.1, 0.5) == []


def test_zero_velocity_command_takes_no_step():
    feet = start_feet()
    gen = PatternGenerator(CFG, feet["left"], feet["right"], np.array([0.0, 0.0, 0.87]), SOLE, SOLE)
    gen.set_velocity(0.0, 0.0, 0.0)
    for i in range(3000):
        ref = gen.cycle(i * CFG.dt)
        assert ref.feet["left"].in_contact and ref.feet["right"].in_contact
    assert not gen.is_walking and gen.steps_completed == 0 and ref.upcoming_footsteps == ()
    assert ref.phase == "standing"


def test_generator_goal_walk_ends_at_goal_in_double_support():
    feet = start_feet()
    gen = PatternGenerator(CFG, feet["left"], feet["right"], np.array([0.0, 0.0, 0.87]), SOLE, SOLE)
    gen.set_goal(0.6, 0.2, 0.5)
    t, ref = 0.0, None
    for i in range(40000):
        t = i * CFG.dt
        ref = gen.cycle(t)
        if i > 10 and not gen.is_walking:
            break
    assert not gen.is_walking and ref.phase == "standing"
    assert ref.feet["left"].in_contact and ref.feet["right"].in_contact
    mid = 0.5 * (ref.feet["left"].pos + ref.feet["right"].pos)
    assert mid[:2] == pytest.approx([0.6, 0.2], abs=2e-3)
    yaw = math.atan2(ref.feet["left"].rotation[1, 0], ref.feet["left"].rotation[0, 0])
    assert yaw == pytest.approx(0.5, abs=1e-6)
    assert gen.steps_completed > 0


def test_replanning_while_walking_keeps_valid_steps_and_stops_side_by_side():
    feet = start_feet()
    gen = PatternGenerator(CFG, feet["left"], feet["right"], np.array([0.0, 0.0, 0.87]), SOLE, SOLE)
    dt = CFG.dt
    gen.set_velocity(0.2, 0.0, 0.0)
    ref = None
    for i in range(int(14.0 / dt)):
        t = i * dt
        if i == int(3.0 / dt):
            gen.set_velocity(0.1, 0.05, 0.3)  # new command mid-walk: the step in swing is kept
            swinging = ref.upcoming_footsteps[0]
        if i == int(3.0 / dt) + 1:
            assert ref.upcoming_footsteps[0] == swinging
        if i == int(7.0 / dt):
            gen.stop()
        ref = gen.cycle(t)
    assert not gen.is_walking and ref.phase == "standing"
    steps = gen.schedule.steps
    assert len(steps) == gen.steps_completed >= 6
    final = assert_valid_sequence(gen.schedule.feet_before[0], steps)
    assert final["right"].to_local(final["left"].position) == pytest.approx([0.0, 0.17], abs=1e-9)
    assert final["left"].yaw == pytest.approx(final["right"].yaw) and final["left"].yaw > 0.3  # it turned
