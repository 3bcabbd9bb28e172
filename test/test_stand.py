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


def run_cli(*args):
    out = subprocess.run(
        [sys.executable, "-m", "whole_body_control.cli", *args], capture_output=True, text=True, timeout=300
    )
    return out


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
