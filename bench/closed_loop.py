"""Closed-loop real-time factor (simulated s / wall s) of stand and walk in MuJoCo, one process,
controller and simulator in lockstep (benchmark, not a test).

    python bench/closed_loop.py [--robots talos g1] [--stand 5] [--steps 8]

Prints a table, then a JSON line: ``{"results": [...], "versions": {...}}``.  Walks also
print the wall time of a tick in the walker, the control stage, the run's measurements and
the simulation step [ms], and the ratio of all but the control stage to it.
No report is written (recording, the bag and the video cost extra).
"""

from __future__ import annotations

import argparse
import json

import _common


def main() -> None:
    from whole_body_control.robot import load_robot
    from whole_body_control.runs.bench import versions
    from whole_body_control.runs.runner import run_stand
    from whole_body_control.runs.walk import run_walk

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robots", nargs="+", default=["talos", "g1"])
    parser.add_argument("--stand", type=float, default=5.0, help="standing time [s]")
    parser.add_argument("--steps", type=int, default=8, help="walking steps at 0.25 m/s")
    args = parser.parse_args()
    results = []
    for name in args.robots:
        robot = load_robot(name)
        s = run_stand(robot, args.stand)
        results.append(_row(name, "stand", s, s["duration_s"]))
        w = run_walk(robot, 0.25, 0.0, 0.0, args.steps, None, 1.0, None, None, None)
        row = _row(name, f"walk {args.steps} steps", w, w["simulated_s"])
        parts = w["wall_ms_per_tick"]
        row.update({f"{k}_ms": v for k, v in parts.items()})
        # issue 12: the closed loop should cost less than the controller (the control stage)
        row["outside_over_control"] = round(sum(v for k, v in parts.items() if k != "control") / parts["control"], 3)
        results.append(row)
    _common.print_table(
        results,
        ["robot", "run", "simulated_s", "real_time_factor", "tick_ms_median", "tick_ms_p99", "fell"]
        + ["walker_ms", "control_ms", "measurements_ms", "simulation_ms", "outside_over_control"],
    )
    print(json.dumps({"benchmark": "closed_loop", "results": results, "versions": versions()}))


def _row(robot: str, run: str, summary: dict, simulated: float) -> dict:
    return {
        "robot": robot,
        "run": run,
        "simulated_s": simulated,
        "real_time_factor": summary["real_time_factor"],
        "tick_ms_median": summary["tick_ms_median"],
        "tick_ms_p99": summary["tick_ms_p99"],
        "fell": summary["fell"],
    }


if __name__ == "__main__":
    main()
