"""Closed-loop standing in MuJoCo under the whole-body controller, and the `wbc` command line."""

import json
import subprocess
import sys

import numpy as np
import pytest

from whole_body_control.robot import available_robots, load_robot
from whole_body_control.runs.runner import run_stand


@pytest.mark.parametrize("name", available_robots())
def test_stands_still(name):
    s = run_stand(load_robot(name), 2.0)
    assert not s["fell"], s["fall_reason"]
    assert s["com_error_max_m"] < 0.01
    assert s["qp_failures"] == 0, s["failure_reasons"]
    assert s["torque_rate_max_nm_per_tick"] < 20.0


def test_talos_survives_a_lateral_push():
    s = run_stand(load_robot("talos"), 3.0, push_dv=(0.0, 0.25), push_at=1.0)
    assert not s["fell"], s["fall_reason"]


@pytest.mark.parametrize("name", ["talos", "g1"])
def test_standing_forward_push_of_0_35_survived_with_the_hip_strategy_only(name):
    """Issue 13: a forward push of 0.35 m/s while standing.  With the ZMP rows alone both
    robots fall (the ZMP on the toes cannot stop the DCM); the hip strategy (``hip_acc``
    on the CoM task) saves it without a single damping tick."""
    import dataclasses

    from whole_body_control.config import wbc_config_for
    from whole_body_control.controller import WholeBodyController

    robot = load_robot(name)
    config = wbc_config_for(robot)
    assert config.levels["balance"].tasks["com"].hip_acc > 0.0
    s = run_stand(robot, 3.0, push_dv=(0.35, 0.0), push_at=1.0)
    assert not s["fell"], s["fall_reason"]
    assert s["statuses"].get("damping", 0) == 0, s["statuses"]
    balance = config.levels["balance"]
    off = dataclasses.replace(
        balance, tasks={**balance.tasks, "com": dataclasses.replace(balance.tasks["com"], hip_acc=0.0)}
    )
    ctrl = WholeBodyController(robot, dataclasses.replace(config, levels={**config.levels, "balance": off}))
    s_off = run_stand(robot, 3.0, push_dv=(0.35, 0.0), push_at=1.0, controller=ctrl)
    assert s_off["fell"]


def run_cli(*args):
    out = subprocess.run(
        [sys.executable, "-m", "whole_body_control.cli", *args], capture_output=True, text=True, timeout=300
    )
    return out


def test_run_stand_goes_through_the_control_stage_supervisor():
    """The in-process runner ticks the controller node's ControlStage: a joint position
    that reads NaN for 3 ticks is refused by its supervisor (damping, the joint named),
    control resumes on the next good state, and a fall is the supervisor's latch."""
    robot = load_robot("talos")
    joint = robot.joint_names[3]

    def nan_joint(t, q, v):
        if 0.5 <= t < 0.503 - 1e-9:
            q = q.copy()
            q[7 + 3] = np.nan
        return q, v

    s = run_stand(robot, 1.0, observe_hook=nan_joint)
    assert not s["fell"], s["fall_reason"]
    assert s["statuses"].get("damping") == 3, s["statuses"]
    assert f"non-finite joint position of {joint}" in s["failure_reasons"], s["failure_reasons"]
    assert s["latched"] is None
    assert s["statuses"]["ok"] == 1000 - 3


def test_run_stand_can_solve_every_solve_period_as_the_ros_controller():
    """``stage_options(solve_period=0.004)``: the QP runs on one state in four (after the
    command, as the ROS controller with config/ros's solve_period), the states between get
    its plan's torques and count as its status, not as damping; a refused state (NaN)
    still damps at once, and the next one re-arms.  A bad period is named."""
    from whole_body_control.config import wbc_config_for
    from whole_body_control.controller import WholeBodyController
    from whole_body_control.errors import ConfigError
    from whole_body_control.runs.runner import stage_options

    robot = load_robot("talos")
    ctrl = WholeBodyController(robot, wbc_config_for(robot))
    solve, solves = ctrl.cycle, []

    def counted(*args, **kwargs):
        solves.append(args[2])  # dt
        return solve(*args, **kwargs)

    ctrl.cycle = counted

    def nan_joint(t, q, v):
        if 0.5 <= t < 0.503 - 1e-9:
            q = q.copy()
            q[7 + 3] = np.nan
        return q, v

    with stage_options(solve_period=0.004):
        s = run_stand(robot, 1.0, controller=ctrl, observe_hook=nan_joint)
    assert not s["fell"], s["fall_reason"]
    assert s["statuses"] == {"ok": 997, "damping": 3}, s["statuses"]
    assert 245 <= len(solves) <= 255, len(solves)  # 1000 states, one in four solved
    assert np.median(solves) == pytest.approx(0.004)  # the controller steps 4 periods between solves
    assert s["com_error_max_m"] < 0.01
    with pytest.raises(ConfigError, match="solve_period"):
        with stage_options(solve_period=-0.004):
            pass


def test_cli_stand_json_last_line(tmp_path):
    hardest = tmp_path / "hardest.pkl"
    out = run_cli(
        "stand", "--robot", "g1", "--duration", "0.5", "--json", "--out", str(tmp_path / "r"),
        "--save-hardest", str(hardest),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    # the 100 slowest of the 500 problems, slowest first, each a problem the solver replays
    from whole_body_control.hqp import HierarchicalQP, load_recorded

    assert summary["hardest_problems_file"] == str(hardest)
    recorded = load_recorded(hardest)
    assert len(recorded) == 100 and recorded[0][0] >= recorded[-1][0]
    assert np.isfinite(HierarchicalQP().solve_problem(recorded[0][1]).x).all()
    for key in (
        "robot",
        "duration_s",
        "fell",
        "com_error_max_m",
        "qp_failures",
        "torque_rate_max_nm_per_tick",
        "tick_ms_median",
        "tick_ms_p99",
        "real_time_factor",
    ):
        assert key in summary
    assert summary["robot"] == "g1" and summary["fell"] is False
    assert (tmp_path / "r" / "summary.json").is_file() and (tmp_path / "r" / "index.html").is_file()
    assert (tmp_path / "r" / "top_view.png").stat().st_size > 1000


def test_cli_robots_and_errors():
    out = run_cli("robots", "--json")
    rows = json.loads(out.stdout.strip().splitlines()[-1])
    assert {r["robot"] for r in rows} >= {"talos", "g1", "wbc_humanoid"}
    assert all(r["nv"] == r["nq"] - 1 and r["mass_kg"] > 20 for r in rows)
    bad = run_cli("stand", "--robot", "tallos", "--duration", "0.1")
    assert bad.returncode == 2 and "did you mean 'talos'" in bad.stderr
