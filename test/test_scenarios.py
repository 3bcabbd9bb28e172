"""Robustness scenarios: the fast subset in MuJoCo, the CLI's JSON line, the hooks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from whole_body_control.errors import ConfigError
from whole_body_control.robot import load_robot
from whole_body_control.runs import scenarios
from whole_body_control.sim import Simulation

ROOT = Path(__file__).resolve().parents[1]


def test_fast_subset_passes_on_talos():
    summary = scenarios.run_suite("talos", ["fast"])
    names = [r["name"] for r in summary["scenarios"]]
    assert names == ["push_lateral_ds", "overload", "infeasible_qp"]
    by_name = {r["name"]: r for r in summary["scenarios"]}
    assert summary["failed"] == 0, [(r["name"], r["figure"]) for r in summary["scenarios"]]
    # the overload is a detected fall that ends in latched damping, never NaN
    over = by_name["overload"]
    assert over["fell"] and over["latched"] and over["final_status"] == "damping" and over["finite"]
    # infeasible QP: the fallback ladder acts, no exception
    qp = by_name["infeasible_qp"]
    assert qp["exception"] is None and set(qp["statuses_infeasible"]) - {"ok"}


@pytest.mark.slow
def test_talos_walks_10_deg_slopes_up_and_down():
    """Issue 13's terrain acceptance for Talos (in process): the walker leans the CoM
    against the measured gravity tilt; before, Talos fell on both 10 deg slopes."""
    summary = scenarios.run_suite("talos", ["slope_up_10deg,slope_down_10deg"])
    rows = {r["name"]: r for r in summary["scenarios"]}
    assert summary["failed"] == 0, [(r["name"], r["figure"]) for r in summary["scenarios"]]
    assert set(rows) == {"slope_up_10deg", "slope_down_10deg"}


@pytest.mark.slow
def test_g1_survives_the_lateral_push_towards_its_stance_foot():
    """``walk_push_lateral_0.25``'s push, in a 10-step walk: at 4 s G1 ends a swing, the push goes
    towards its stance foot.  With a 0.4 s lift-off delay the DCM ran 9 cm ahead of the plan and
    the outward step landed 6 cm off its footstep; with 0.2 s and the touchdown anchoring it
    walks on and lands every step within the tolerance (judged against the footstep aimed at)."""
    figures = scenarios.walk_push((0.0, 0.25), 4.0, steps=10)(load_robot("g1"), None)
    assert figures["passed"], figures["figure"]
    assert figures["footstep_error_max_m"] < 0.02


def test_cli_json_last_line():
    cmd = ["scenarios", "--robot", "g1", "--only", "infeasible_qp", "--json"]  # a short one
    out = subprocess.run(
        [sys.executable, "-m", "whole_body_control.cli", *cmd],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    last = json.loads(out.stdout.strip().splitlines()[-1])
    assert last["robot"] == "g1" and last["passed"] + last["failed"] == 1
    assert [s["name"] for s in last["scenarios"]] == ["infeasible_qp"]
    assert out.returncode == (0 if last["failed"] == 0 else 1)


def test_a_time_budget_skips_what_would_overrun_it_and_names_it():
    """``--budget``: a scenario starts only if its cost at the pace measured so far fits (10 s
    of wall per unit of cost here, 1 s before any finished); the ones left out are rows with
    ``ran: false``, neither passed nor failed."""
    costs = {"a": 10.0, "b": 10.0, "c": 1.0, "d": 3.0, "instant": 0.0}
    chosen = [scenarios.Scenario(n, run=None, cost=c) for n, c in costs.items()]
    ran = []

    def run_one(name):
        ran.append(name)
        return {"name": name, "passed": name != "c", "figure": "", "wall_s": 10.0 * costs[name]}

    # real elapsed time is milliseconds: the reported wall times (10 s per unit) decide alone;
    # one process with a budget: the cheapest first
    results = scenarios.run_scheduled(chosen, run_one, budget=50.0)
    assert ran == ["instant", "c", "d"]  # then a and b: 10 x 10 s > 50 - 40 s
    assert results["a"]["ran"] is False
    assert results["b"]["ran"] is False and results["b"]["passed"] is None
    assert "time budget (50 s)" in results["b"]["figure"]
    # without a budget everything runs, in the suite's order
    ran.clear()
    scenarios.run_scheduled(chosen, run_one)
    assert ran == list(costs)


def test_the_suite_counts_not_run_rows_apart():
    # a budget of 1 s, which neither scenario fits at the prior pace (1 s per unit of cost)
    summary = scenarios.run_suite("talos", ["push_lateral_ds,overload"], budget=1.0)
    assert [r["ran"] for r in summary["scenarios"]] == [False, False]
    assert (summary["passed"], summary["failed"], summary["not_run"]) == (0, 0, 2)
    assert "2 not run (time budget)" in scenarios.format_table(summary)
    assert "skip" in scenarios.format_row(summary["scenarios"][0])


def test_single_support_thresholds_are_one_scenario_per_direction():
    names = [s.name for s in scenarios.SCENARIOS if s.name.startswith("push_ss_")]
    assert names == [f"push_ss_{d}" for d in scenarios.SS_PUSH_DIRECTIONS]
    rows = [{"name": "push_ss_stance", "direction": "stance", "threshold_mps": 0.1}, {"name": "x", "passed": True}]
    assert scenarios.thresholds_figure(rows) == {"stance": 0.1}


def test_single_support_thresholds_fail_below_the_acceptance():
    """A robot with an acceptance (issue 13: Talos 0.4, G1 0.3 m/s) fails a direction below it, so
    that a change that loses a direction fails CI; another robot's rows report."""
    found = {"survived": 0.45, "fell": 0.5375, "trials": []}
    assert scenarios.threshold_figures("talos", "forward", found)["passed"]
    assert not scenarios.threshold_figures("talos", "forward", {**found, "survived": 0.3625})["passed"]
    assert scenarios.threshold_figures("g1", "backward", {**found, "survived": 0.3})["passed"]
    assert not scenarios.threshold_figures("g1", "stance", {"survived": None, "fell": 0.1, "trials": []})["passed"]
    row = scenarios.threshold_figures("romeo", "stance", {"survived": None, "fell": 0.1, "trials": []})
    assert row["passed"] and row["required_mps"] is None


def test_push_bisection_tries_the_required_push_first():
    """With ``first``, the first split is the required push itself: its verdict is the row's,
    whatever the grid (0.1 to 0.8 m/s in 3 halvings never tries 0.3)."""
    for limit, passed in ((0.31, True), (0.29, False)):
        found = scenarios.push_bisect(lambda dv, limit=limit: dv <= limit, 0.1, 0.8, 3, first=0.3)
        assert found["trials"][:3] == [(0.1, True), (0.8, False), (0.3, passed)]
        assert len(found["trials"]) == 6 and found["survived"] <= limit < found["fell"]
        assert scenarios.threshold_figures("g1", "swing", found)["passed"] == passed
    plain = scenarios.push_bisect(lambda dv: dv <= 0.31, 0.1, 0.8, 3)
    assert plain["survived"] == 0.275 and 0.3 not in [dv for dv, _ in plain["trials"]]


def test_unknown_scenario_names_the_closest():
    with pytest.raises(ConfigError, match="did you mean 'overload'"):
        scenarios.select(["overlaod"])


def test_hooks_change_the_simulation_only():
    robot = load_robot("g1")
    sim = Simulation(robot)
    mass = sim.total_mass()
    scenarios.scale_masses(1.1)(sim)
    assert sim.total_mass() == pytest.approx(1.1 * mass)
    scenarios.add_torso_mass(robot, -1.0)(sim)
    assert sim.total_mass() == pytest.approx(1.1 * mass - 1.0)
    scenarios.tilt_gravity(10.0)(sim)
    g = sim.model.opt.gravity
    assert np.degrees(np.arctan2(-g[0], -g[2])) == pytest.approx(10.0)
    tilting = scenarios.tilting_gravity(-6.0, ramp=2.0)  # the slope comes in over 2 s
    for t, deg in ((0.0, 0.0), (1.0, -3.0), (2.0, -6.0), (5.0, -6.0)):
        tilting(t, np.zeros(1), sim)
        g = sim.model.opt.gravity
        assert np.degrees(np.arctan2(-g[0], -g[2])) == pytest.approx(deg)
        assert np.linalg.norm(g) == pytest.approx(9.81, rel=1e-3)
    # latency: the n-th torque comes out n ticks later
    hook = scenarios.delay(5)
    outs = [hook(0.0, np.array([float(k)]), sim)[0] for k in range(10)]
    assert outs == [0, 0, 0, 0, 0, 0, 1, 2, 3, 4]
    # noise: seeded, unit quaternion, the simulation state untouched
    q, v = sim.q, sim.v
    a = scenarios.SensorNoise(seed=1).hook()(0.0, q, v)
    b = scenarios.SensorNoise(seed=1).hook()(0.0, q, v)
    np.testing.assert_array_equal(a[0], b[0])
    assert np.linalg.norm(a[0][3:7]) == pytest.approx(1.0)
    assert not np.array_equal(a[0], q)
    np.testing.assert_array_equal(sim.q, q)
    sim.close()


def test_walks_up_a_slope_it_was_not_told_about_only_with_the_disturbance_observer():
    """5 deg uphill (tilted gravity), the walker not reading the gravity (as through the
    ROS graph): the walker's observer shifts the CoM reference so the ZMP stays planned;
    without it the DCM feedback alone runs the ZMP to the heel: the robot falls, or (with
    step timing adaptation) its capture-point steps keep it up but it does not get up the
    slope."""
    from zmp_walker import load_walker_config
    from zmp_walker.config import DisturbanceObserverConfig

    robot = load_robot("talos")
    slope = {"actuate_hook": scenarios.tilting_gravity(5.0), "measure_gravity": False}
    on = scenarios._walk(robot, None, **slope)
    assert on["passed"], on["figure"]
    off_config = load_walker_config(robot="talos").replace(
        disturbance_observer=DisturbanceObserverConfig(enabled=False)
    )
    off = scenarios._walk(robot, None, walker_config=off_config, **slope)
    assert off["fell"] or off["distance_m"] < 0.5 * off["planned_distance_m"], off["figure"]
