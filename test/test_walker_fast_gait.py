"""The fast gait (``fast_gait`` in config/walker.yaml): above the nominal speed the step length and
the cadence grow with the commanded speed, within the robot's configured maxima; at the nominal
speed and below the gait is exactly the nominal one."""

import numpy as np
import pytest

from zmp_walker.config import FastGaitConfig, WalkerConfig, load_walker_config
from zmp_walker.errors import ConfigError
from zmp_walker.footsteps import FootstepPlanner, other_side
from zmp_walker.generator import MeasuredState, PatternGenerator
from zmp_walker.geometry import FootPose, SoleRect

SOLE = SoleRect(-0.10, 0.10, -0.065, 0.065)
ROBOTS = {"g1": 0.5, "talos": 0.6}  # issue 13's fast walks [m/s]


def start_feet(sep=0.17):
    return {"left": FootPose([0.0, sep / 2, 0.0]), "right": FootPose([0.0, -sep / 2, 0.0])}


@pytest.mark.parametrize("robot", sorted(ROBOTS))
def test_the_fast_gait_reaches_the_issue_speed_within_the_robot_maxima(robot):
    cfg = load_walker_config(robot=robot)
    fast = cfg.fast_gait
    assert fast.enabled
    assert cfg.max_speed >= ROBOTS[robot] > cfg.nominal_speed
    previous = (cfg.step_duration, cfg.max_step_length)
    for v in np.linspace(cfg.nominal_speed + 1e-3, cfg.max_speed, 12):
        duration, limit = cfg.gait(v)
        length = v * duration
        # within the configured maxima: never shorter than the fastest step, never longer than its limit
        assert fast.step_duration - 1e-9 <= duration <= cfg.step_duration
        assert cfg.max_step_length <= length <= fast.max_step_length + 1e-9
        assert limit == fast.max_step_length
        # cadence and step length both grow with speed
        assert duration <= previous[0] + 1e-12 and length >= previous[1] - 1e-12
        previous = (duration, length)
    assert cfg.gait(cfg.max_speed) == pytest.approx((fast.step_duration, fast.max_step_length))
    assert cfg.gait(10.0)[0] == pytest.approx(fast.step_duration)  # beyond: the fastest gait (clamped)


@pytest.mark.parametrize("robot", sorted(ROBOTS))
def test_planned_fast_steps_keep_the_robot_limits_and_the_commanded_speed(robot):
    cfg = load_walker_config(robot=robot)
    v = ROBOTS[robot]
    planner = FootstepPlanner(cfg, SOLE, SOLE, 0.2)
    feet = start_feet(0.2)
    steps = planner.from_velocity(feet, 30, v)
    duration, _ = cfg.gait(v)
    for i, step in enumerate(steps):
        assert step.duration == pytest.approx(duration)  # the closing step too
        stance = feet[other_side(step.side)]
        dx = stance.to_local(step.position)[0]
        assert abs(dx) <= cfg.fast_gait.max_step_length + 1e-9
        if 0 < i < len(steps) - 1:
            assert dx == pytest.approx(v * duration)  # v = step length / step duration
        feet[step.side] = step.pose
    gen = PatternGenerator(cfg, *start_feet(0.2).values(), np.array([0.0, 0.0, 0.7]), SOLE, SOLE)
    gen.walk_steps(30, v)
    gen.cycle(0.0)
    starts = np.array([s.t_start for s in gen.schedule.steps])
    assert np.diff(starts) == pytest.approx(duration)
    swing = gen.schedule.steps[3].t_end - gen.schedule.steps[3].t_start
    assert swing == pytest.approx((1.0 - cfg.double_support_ratio) * duration)
    # the planned time: start, 29 steps and the last swing
    planned = gen.schedule.steps[-1].t_end - gen.schedule.t0
    assert planned == pytest.approx(cfg.start_duration + 29 * duration + (1 - cfg.double_support_ratio) * duration)


@pytest.mark.parametrize("robot", ["g1", "talos", "wbc_humanoid"])
def test_at_the_nominal_speed_and_below_the_gait_is_untouched(robot):
    cfg = load_walker_config(robot=robot)
    plain = cfg.replace(fast_gait=FastGaitConfig())
    for v in (0.0, 0.1, 0.25 if robot != "wbc_humanoid" else 0.2, -cfg.nominal_speed, cfg.nominal_speed):
        assert cfg.gait(v) is None
        a = FootstepPlanner(cfg, SOLE, SOLE, 0.2).from_velocity(start_feet(0.2), 10, v)
        b = FootstepPlanner(plain, SOLE, SOLE, 0.2).from_velocity(start_feet(0.2), 10, v)
        assert [(s.side, tuple(s.position), s.yaw, s.duration) for s in a] == [
            (s.side, tuple(s.position), s.yaw, s.duration) for s in b
        ]
        assert all(s.duration is None for s in a)


def test_a_fast_walk_through_the_generator_with_feedback_closes_at_its_cadence():
    cfg = load_walker_config(robot="g1")
    gen = PatternGenerator(cfg, *start_feet(0.24).values(), np.array([0.0, 0.0, 0.6]), SOLE, SOLE)
    gen.set_velocity(0.5)
    t, measured = 0.0, None
    while t < 4.0:
        ref = gen.cycle(t, measured)
        measured = MeasuredState(ref.com_pos.copy(), ref.com_vel.copy())  # perfect tracking, feedback on
        t += cfg.dt
    gen.stop()
    while gen.is_walking or t < 4.1:
        gen.cycle(t)
        t += cfg.dt
    steps = gen.schedule.steps
    duration = cfg.gait(0.5)[0]
    assert all(s.duration == pytest.approx(duration) for s in steps)
    final = gen.schedule.final_feet
    assert final["right"].to_local(final["left"].position)[0] == pytest.approx(0.0, abs=1e-6)


def test_fast_gait_values_are_validated(tmp_path):
    base = WalkerConfig()
    with pytest.raises(ConfigError, match="fast_gait.step_duration"):
        base.replace(fast_gait=FastGaitConfig(step_duration=0.5))
    with pytest.raises(ConfigError, match="fast_gait.step_duration"):
        base.replace(fast_gait=FastGaitConfig(step_duration=1.0, max_step_length=0.4))
    # a nominal step lengthened beyond the fast gait's (step_up_5cm's step onto a platform) is no
    # error: the fast gait's limit is then the nominal one
    longer = load_walker_config(robot="g1").replace(max_step_length=0.25 + 1e-12)
    assert longer.gait(0.4) is None  # 0.25 m / 0.6 s: nominal up to 0.417 m/s
    assert longer.gait(0.5)[1] == longer.step_reach == longer.max_step_length
    path = tmp_path / "walker.yaml"
    path.write_text("fast_gait: {step_duration: -0.5, max_step_length: 0.4}\n")
    with pytest.raises(ConfigError) as info:
        load_walker_config(path)
    assert str(path) in str(info.value) and "fast_gait.step_duration" in str(info.value)


@pytest.mark.parametrize("robot", sorted(ROBOTS))
def test_the_velocity_limit_is_the_fast_gait_s(robot):
    cfg = load_walker_config(robot=robot)
    limit, formula = cfg.velocity_limits(0.2)["vx"]
    assert limit == pytest.approx(cfg.fast_gait.max_step_length / cfg.fast_gait.step_duration)
    assert "fast_gait.max_step_length / fast_gait.step_duration" in formula
    plain = cfg.replace(fast_gait=FastGaitConfig())
    limit, formula = plain.velocity_limits(0.2)["vx"]
    assert limit == pytest.approx(cfg.nominal_speed) and formula.startswith("max_step_length / step_duration")


@pytest.mark.parametrize("robot_name", sorted(ROBOTS))
def test_the_cli_and_the_ros_walker_node_share_the_speed_limit(robot_name):
    """``wbc walk`` refuses and the walker node warns about the same commands, with the same message:
    the issue's speed passes, one beyond the fast gait's maximum names the file and the key."""
    from whole_body_control.robot import load_robot
    from whole_body_control.walker_stage import velocity_command_problems, walker_config_for

    robot = load_robot(robot_name)
    config, source = walker_config_for(robot)
    assert velocity_command_problems(robot, config, source, ROBOTS[robot_name], 0.0, 0.0) == []
    beyond = config.max_speed + 0.01
    (problem,) = velocity_command_problems(robot, config, source, beyond, 0.0, 0.0)
    assert f"--speed {beyond:g} m/s is beyond the walker's limit for robot '{robot_name}'" in problem
    assert "fast_gait.max_step_length / fast_gait.step_duration" in problem
    assert f"walker.yaml: robots.{robot_name}" in problem
