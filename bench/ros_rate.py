"""Control rate of the ROS 2 graph in lockstep (benchmark, not a test): runs
``wbc launch sim --lockstep --json`` (whole_body_control/ros/graph.py: bridge, walker
and controller as separate rclpy processes over DDS) and reads its JSON line.

    python bench/ros_rate.py [--robots talos g1] [--duration 5] [--cmd-vel 0.2]

Prints a table, then a JSON line: ``{"results": [...], "versions": {...}}``;
``control_rate_hz`` is control periods per wall second through DDS.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import _common


def main() -> None:
    from whole_body_control.runs.bench import versions

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robots", nargs="+", default=["talos", "g1"])
    parser.add_argument("--duration", type=float, default=5.0, help="simulated time [s]")
    parser.add_argument("--cmd-vel", type=float, default=0.2, help="forward /cmd_vel [m/s]")
    parser.add_argument("--timeout", type=float, default=600.0, help="wall-clock limit per run [s]")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(_common.ROOT), os.environ.get("PYTHONPATH", "")])}
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    results = []
    for robot in args.robots:
        cmd = [
            sys.executable,
            "-m",
            "whole_body_control.cli",
            "launch",
            "sim",
            "--robot",
            robot,
            "--lockstep",
            "--duration",
            str(args.duration),
            "--cmd-vel",
            str(args.cmd_vel),
            "--json",
        ]
        row = {"robot": robot, "duration_s": args.duration}
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env, cwd=_common.ROOT)
            last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
            out = json.loads(last) if last.startswith("{") else None
        except (subprocess.TimeoutExpired, json.JSONDecodeError) as exc:
            proc, out = None, None
            row["error"] = f"{type(exc).__name__}"
        if out is None:
            row.setdefault(
                "error",
                f"no JSON line (exit {proc.returncode if proc else '?'}): "
                + (proc.stderr.strip().splitlines()[-1] if proc and proc.stderr.strip() else ""),
            )
        else:
            row.update({k: out.get(k) for k in ("control_rate_hz", "deadline_misses", "fell", "distance_m")})
            for k, digits in (("control_rate_hz", 1), ("distance_m", 3)):
                if isinstance(row[k], float):
                    row[k] = round(row[k], digits)
        results.append(row)
    _common.print_table(
        results, ["robot", "duration_s", "control_rate_hz", "deadline_misses", "fell", "distance_m", "error"]
    )
    print(json.dumps({"benchmark": "ros_rate", "results": results, "versions": versions()}))


if __name__ == "__main__":
    main()
