"""The scenario suite through the ROS graph (``wbc scenarios --through ros``).

Without DDS: every scenario either runs through the graph or says why not, and the
zero /cmd_vel the driver sends at :attr:`WalkPlan.stop_at` gives the walker the very
footsteps of the in-process ``walk_steps`` walk.  With DDS (real processes in lockstep,
500 Hz to keep it short): Talos stands 10 s and takes the lateral push standing.
"""

from __future__ import annotations

import json
import math
import os
import types

import numpy as np
import pytest

from whole_body_control.robot import load_robot
from whole_body_control.runs.scenarios import (
    ROS_NOT_APPLICABLE,
    ROS_RUNS,
    SCENARIOS,
    WALKER_HORIZON,
    WALKER_PERIOD,
    RosOptions,
    run_suite,
    walk_plan,
)


def test_every_scenario_runs_through_ros_or_says_why_not():
    names = {s.name for s in SCENARIOS}
    assert set(ROS_RUNS) | set(ROS_NOT_APPLICABLE) == names
    assert not set(ROS_RUNS) & set(ROS_NOT_APPLICABLE)
    assert all(len(reason) > 20 for reason in ROS_NOT_APPLICABLE.values())


def test_not_applicable_rows_keep_the_summary_shape():
    summary = run_suite("talos", ["determinism,infeasible_qp"], through="ros")
    assert summary["through"] == "ros"
    assert (summary["passed"], summary["failed"], summary["not_applicable"]) == (0, 0, 2)
    for row in summary["scenarios"]:
        assert row["applies"] is False and row["passed"] is None and row["reason"] == ROS_NOT_APPLICABLE[row["name"]]
    json.dumps(summary)


@pytest.mark.parametrize(
    "robot_name, steps, speed",
    [("talos", 8, None), ("talos", 30, None), ("g1", 30, "fast"), ("talos", 30, "fast")],
)
def test_a_stop_at_the_planned_time_gives_the_in_process_footsteps(robot_name, steps, speed):
    """The walker as the node runs it: /cmd_vel from t = 0, the zero /cmd_vel taken at the
    pause and applied at the next batch start (up to one horizon later, on the walker's
    grid); its footsteps and timing are walk_steps(steps)'s, also at walk_fast's speed (the
    fast gait: the node's steps and closing step take its cadence as in-process)."""
    from whole_body_control.runs.scenarios import fast_walk_speed
    from whole_body_control.state import RobotState
    from whole_body_control.walker_stage import make_walker
    from zmp_walker import load_walker_config

    robot = load_robot(robot_name)
    plan = walk_plan(robot, steps) if speed is None else walk_plan(robot, steps, fast_walk_speed(robot))
    state = RobotState(robot)
    state.update(robot.q_ref, np.zeros(robot.nv))

    def walker():
        return make_walker(robot, types.SimpleNamespace(state=state), load_walker_config(robot=robot.name))

    reference = walker()
    reference.walk_steps(steps, plan.speed)
    reference.cycle(0.0)
    for apply_at in (plan.stop_at, plan.stop_at + WALKER_HORIZON + WALKER_PERIOD):  # the earliest, the latest
        ros = walker()
        ros.set_velocity(plan.speed)
        ros.cycle(0.0)
        ros.cycle(apply_at - 0.001)
        ros.set_velocity(0.0)
        ros.cycle(apply_at)
        got, want = ros.schedule.steps, reference.schedule.steps
        assert len(got) == len(want) == steps
        for a, b in zip(got, want, strict=True):
            assert a.side == b.side and a.duration == b.duration
            assert (a.duration is None) == (speed is None)
            assert math.isclose(a.t_end, b.t_end, abs_tol=1e-9)
            np.testing.assert_allclose(a.position, b.position, atol=1e-9)
        assert math.isclose(ros.schedule.end_time + 1.0, plan.end_time, abs_tol=1e-6)


# -- through the graph: real processes, DDS, lockstep -------------------------------------------


@pytest.mark.ros
@pytest.mark.slow
def test_stand_and_lateral_push_through_the_graph():
    pytest.importorskip("rclpy")
    summary = run_suite(
        "talos", ["stand_10s,push_lateral_ds"], through="ros", ros_options=RosOptions(control_period=0.002)
    )
    print(json.dumps(summary))
    rows = {r["name"]: r for r in summary["scenarios"]}
    for name in ("stand_10s", "push_lateral_ds"):
        r = rows[name]
        assert r["applies"] and r["passed"], r["figure"]
        assert not r["fell"] and r["damping_commands"] == 0 and r["deadline_misses"] == 0
    assert rows["stand_10s"]["simulated_s"] >= 10.0 - 1e-6
    assert rows["push_lateral_ds"]["simulated_s"] >= 4.0 - 1e-6


@pytest.mark.ros
@pytest.mark.slow
def test_the_walker_nodes_dcm_feedback_recovers_a_push_toward_the_stance_foot():
    """push_inward_ss through the graph (walker node at 250 Hz with DCM feedback, as the
    in-process walker): it failed there (3/8 steps) while the walker planned open loop."""
    pytest.importorskip("rclpy")
    runs = [
        run_suite("talos", ["push_inward_ss"], through="ros", ros_options=RosOptions(control_period=0.002))
        for _ in range(2)
    ]
    r = runs[0]["scenarios"][0]
    assert r["applies"] and r["passed"], r["figure"]
    assert r["steps_completed"] == 8 and not r["fell"] and r["damping_commands"] == 0
    # the same run twice, the same figures: the driver (this process, at SCHED_FIFO beside the
    # graph while it runs) heard every state and plan (under the normal scheduler it lost some:
    # 7 or 8 landings, footstep errors of 0.1 to 14 cm from the same commands)
    again = runs[1]["scenarios"][0]
    assert (again["figure"], again["distance_m"]) == (r["figure"], r["distance_m"])
    assert os.sched_getscheduler(0) == os.SCHED_OTHER, "the driver is back under the normal scheduler"


@pytest.mark.ros
@pytest.mark.slow
def test_a_10_deg_slope_through_the_graph():
    """slope_up_10deg through the graph: the walker node reads gravity's direction against
    the floor from the IMU (its orientation against gravity, the base's against the floor)
    and leans into the slope as in-process; without it the robot fell after one step."""
    pytest.importorskip("rclpy")
    summary = run_suite("talos", ["slope_up_10deg"], through="ros")
    print(json.dumps(summary))
    r = summary["scenarios"][0]
    assert r["applies"] and r["passed"], r["figure"]


@pytest.mark.ros
@pytest.mark.slow
def test_the_walking_lateral_push_of_half_a_meter_per_second_through_the_graph():
    """walk_push_lateral_0.5 (issue 13's acceptance command, 20 steps at 0.25 m/s, pushed
    0.5 m/s sideways at 4 s) through the graph at 1 kHz: it fell there (6/20 steps) while it
    passed in-process, until the walker node's horizon (its DCM feedback's delay) went from
    30 ms to 5 ms and the controller's QP ran on every state, as in-process."""
    pytest.importorskip("rclpy")
    summary = run_suite("talos", ["walk_push_lateral_0.5"], through="ros")
    print(json.dumps(summary))
    r = summary["scenarios"][0]
    assert r["applies"] and r["passed"], r["figure"]
    assert r["steps_completed"] == 20 and not r["fell"] and r["damping_commands"] == 0


def test_the_suites_walker_and_wbc_files_reach_the_graphs_nodes(tmp_path):
    """``wbc scenarios --through ros --walker-config F --wbc-config G``: the walker and the
    controller nodes load the robot by name, so the files go to them as parameters; the
    walker node (constructed here with those parameters) walks with F's values."""
    import shutil

    import rclpy
    import yaml
    from rclpy.parameter import Parameter

    from whole_body_control.config import default_path as wbc_default_path
    from whole_body_control.ros.graph import domain_id
    from whole_body_control.ros.walker_node import WalkerNode
    from whole_body_control.runs.scenarios import _ros_node_params
    from zmp_walker.config import default_config_path

    walker_file = tmp_path / "walker.yaml"
    data = yaml.safe_load(default_config_path().read_text())
    data["robots"]["talos"]["step_duration"] = 0.95
    walker_file.write_text(yaml.safe_dump(data))
    wbc_file = tmp_path / "wbc.yaml"
    shutil.copy(wbc_default_path(), wbc_file)

    shipped = load_robot("talos")
    walker, controller = _ros_node_params(shipped, RosOptions(), walk=True)
    assert "walker_config" not in walker and "wbc_config" not in controller  # the nodes' defaults

    robot = load_robot("talos", walker_config=walker_file, wbc_config=wbc_file)
    walker, controller = _ros_node_params(robot, RosOptions(), walk=True)
    assert walker["walker_config"] == str(walker_file.resolve())
    assert controller["wbc_config"] == str(wbc_file.resolve())
    assert walker["com_mode"] == controller["com_mode"] == "dcm"

    overrides = [Parameter(k, value=v) for k, v in {"robot": "talos", **walker}.items()]
    with domain_id() as did:
        context = rclpy.Context()
        rclpy.init(context=context, domain_id=did)
        try:
            node = WalkerNode(context=context, parameter_overrides=overrides)
            try:
                assert node.config.step_duration == 0.95
                assert str(walker_file.resolve()) in node.config_source
            finally:
                node.destroy_node()
        finally:
            rclpy.shutdown(context=context)


@pytest.mark.parametrize("robot_name", ["talos", "g1"])
def test_the_recovery_step_scenario_gives_the_walker_node_a_file_with_the_step_on(robot_name):
    """``push_standing_step_0.5`` through the graph: the walker node reads a copy of the walker
    file with the recovery step on (the shipped file has it off), and nothing else changed."""
    import dataclasses

    from whole_body_control.runs.scenarios import _walker_file_with_recovery_step
    from whole_body_control.walker_stage import walker_config_for

    robot = load_robot(robot_name)
    shipped = walker_config_for(robot)[0]
    assert not shipped.recovery_step.enabled
    path = _walker_file_with_recovery_step(robot)
    try:
        stepping = walker_config_for(load_robot(robot_name, walker_config=path))[0]
    finally:
        os.unlink(path)
    assert stepping.recovery_step.enabled
    assert stepping == shipped.replace(recovery_step=dataclasses.replace(shipped.recovery_step, enabled=True))
