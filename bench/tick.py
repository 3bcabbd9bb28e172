"""Controller tick time with 1, 2 and 3 strict priority levels on each robot (benchmark, not a test).

    python bench/tick.py [--robots talos g1 wbc_humanoid] [--ticks 3000] [--warmup 300]

Prints a table, then a JSON line: ``{"results": [...], "versions": {...}}``
(``whole_body_control.runs.bench.bench_tick`` per robot and level count).
"""

from __future__ import annotations

import argparse
import json

import _common


def main() -> None:
    from whole_body_control.robot import available_robots
    from whole_body_control.runs.bench import bench_tick, versions

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robots", nargs="+", default=None, help="default: every robot")
    parser.add_argument("--levels", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--ticks", type=int, default=3000)
    parser.add_argument("--warmup", type=int, default=300)
    args = parser.parse_args()
    results = []
    for robot in args.robots or available_robots():
        for levels in args.levels:
            r = bench_tick(robot, levels=levels, ticks=args.ticks, warmup=args.warmup)
            results.append(
                {
                    k: r[k]
                    for k in ("robot", "levels", "ticks", "tick_ms_median", "tick_ms_p99", "tick_ms_mean", "statuses")
                }
            )
    _common.print_table(results, ["robot", "levels", "ticks", "tick_ms_median", "tick_ms_p99", "tick_ms_mean"])
    print(json.dumps({"benchmark": "tick", "results": results, "versions": versions()}))


if __name__ == "__main__":
    main()
