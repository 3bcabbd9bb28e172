"""Replay recorded hierarchical problems through each solver path (benchmark, not a test).

    python bench/hqp_replay.py FILE [--repeat 5]
    python bench/hqp_replay.py --record talos [--seconds 6 --count 100 --out FILE]

``FILE`` comes from ``HierarchicalQP.save_recorded`` (``wbc walk --save-hardest FILE``).
``--record ROBOT`` makes one first: a walk at 0.25 m/s with a lateral push, keeping
the ``--count`` problems that took longest.  Each problem is solved by every backend
(``daqp``, ``proxsuite``) in turn, side by side; the script prints per backend the
median, p99 and max solve time and how many it failed (a level it could not solve),
the largest difference between the backends' solutions, then one JSON line with the
versions.
"""

from __future__ import annotations

import argparse
import json
import time

import _common
import numpy as np

BACKENDS = ("daqp", "proxsuite")


def record(robot_name: str, seconds: float, count: int, out: str) -> str:
    from whole_body_control.robot import load_robot
    from whole_body_control.runs.walk import run_walk

    steps = max(2, int(seconds / 0.8))
    summary = run_walk(
        load_robot(robot_name), 0.25, 0.0, 0.0, steps, (0.0, 0.25), 3.0, None, None, None,
        save_hardest=out, hardest_count=count,
    )  # fmt: skip
    return summary["hardest_problems_file"]


def main() -> None:
    from whole_body_control.config import SolverConfig
    from whole_body_control.hqp import HierarchicalQP, LevelFailure, load_recorded
    from whole_body_control.runs.bench import versions

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?")
    parser.add_argument("--record", metavar="ROBOT")
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--out", default="reports/hqp_hardest.pkl")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    path = record(args.record, args.seconds, args.count, args.out) if args.record else args.file
    if not path:
        parser.error("give a FILE or --record ROBOT")
    problems = [p for _, p in load_recorded(path)]
    cfg = SolverConfig()
    solvers = {b: HierarchicalQP(cfg.eps_abs, cfg.max_iter, cfg.regularization, backend=b) for b in BACKENDS}
    times = {b: [] for b in BACKENDS}
    failed = {b: 0 for b in BACKENDS}  # a level the backend could not solve (LevelFailure)
    gap = 0.0
    for _ in range(args.repeat):
        for p in problems:
            xs = {}
            for b, solver in solvers.items():
                solver.reset()  # no warm start from another problem
                t0 = time.perf_counter()
                try:
                    xs[b] = solver.solve_problem(p).x
                except LevelFailure:
                    failed[b] += 1
                times[b].append(time.perf_counter() - t0)
            if len(xs) == len(BACKENDS):
                gap = max(gap, float(np.max(np.abs(xs["daqp"] - xs["proxsuite"]))))
    rows = []
    for b in BACKENDS:
        ms = np.array(times[b]) * 1e3
        rows.append(
            {
                "backend": b,
                "problems": len(problems),
                "failed": failed[b],
                "median_ms": round(float(np.median(ms)), 4),
                "p99_ms": round(float(np.percentile(ms, 99)), 4),
                "max_ms": round(float(ms.max()), 4),
            }
        )
    _common.print_table(rows, ["backend", "problems", "failed", "median_ms", "p99_ms", "max_ms"])
    print(f"largest difference between the backends' solutions (both solved): {gap:.3g}")
    print(json.dumps({"benchmark": "hqp_replay", "file": path, "results": rows, "max_solution_gap": gap, **versions()}))


if __name__ == "__main__":
    main()
