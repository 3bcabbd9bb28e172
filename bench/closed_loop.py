"""Closed-loop real-time factor (simulated s / wall s) of stand and walk in MuJoCo, one process,
controller and simulator in lockstep (benchmark, not a test).

    python bench/closed_loop.py [--robots talos g1] [--stand 5] [--steps 8]

Prints a table, then a JSON line: ``{"results": [...], "versions": {...}}``.
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
        results.append(_row(name, f"walk {args.steps} steps", w, w["simulated_s"]))
    _common.print_table(
        results, ["robot", "run", "simulated_s", "real_time_factor", "tick_ms_median", "tick_ms_p99", "fell"]
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
