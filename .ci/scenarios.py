"""CI: the whole scenario suite for each robot of .ci/known_failures.yaml, in-process and
through the ROS graph (lockstep, ``--through ros``).

Fails (exit code 1) when a scenario that is not a known failure fails, so that a change
that breaks an earlier acceptance (a walking push, a slope, the graph's scenarios) fails
CI; a known failure that passes is reported.

CI has 90 minutes and the machines differ about 4 times in speed: on a slow one the test
suite alone takes 26 minutes and the four suites about 2 h.  With ``CI_STARTED`` (epoch
seconds, set by .ci/run before the setup) every suite gets a share of the time left before
``CI_MINUTES`` (default 90) minus a margin; a suite does not start a scenario it expects to
overrun its share (``wbc scenarios --budget``) and the ones left out are listed by name
("not run"), neither passed nor failed.  The in-process suites come first and get the
larger shares; without ``CI_STARTED`` everything runs.
Usage: .venv/bin/python .ci/scenarios.py [in_process|through_ros ...]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


MODES = {"in_process": [], "through_ros": ["--through", "ros"]}
# relative shares of the time left.  The in-process suites guard the physics and come first:
# on the slow machine of 2026-12-05 (tests 27 min) Talos's took 1158 s and G1's did not end
# in its share (827 s of 3:2:2:1.5, 5 scenarios left out); through the graph a scenario
# takes about twice its in-process time and pytest runs a subset of them (test_scenarios_ros)
SHARES = {
    ("in_process", "talos"): 3.0,
    ("in_process", "g1"): 2.5,
    ("through_ros", "talos"): 1.0,
    ("through_ros", "g1"): 0.8,
}
MARGIN_S = 360.0  # [s] kept before CI's limit: the last report, a suite's overrun of its share


def deadline() -> float | None:
    """Epoch seconds by which the suites must be over (None: no limit)."""
    started = os.environ.get("CI_STARTED")
    if not started:
        return None
    return float(started) + 60.0 * float(os.environ.get("CI_MINUTES", "90")) - MARGIN_S


def main(modes: list[str]) -> int:
    known = yaml.safe_load((ROOT / ".ci" / "known_failures.yaml").read_text())
    for mode in modes:
        if mode not in MODES or mode not in known:
            print(f"[ci] unknown mode '{mode}' (.ci/known_failures.yaml has {', '.join(known)})")
            return 1
    runs = [(mode, robot) for mode in (modes or list(MODES)) for robot in known[mode]]
    end = deadline()
    code = 0
    for i, (mode, robot) in enumerate(runs):
        budget = None
        if end is not None:
            left = end - time.time()
            share = SHARES.get((mode, robot), 1.0) / sum(SHARES.get(r, 1.0) for r in runs[i:])
            budget = max(60.0, left * share)
            print(f"[ci] {robot} ({mode.replace('_', ' ')}): budget {budget:.0f} s of the {left:.0f} s left")
        code |= run_suite(mode, robot, known[mode][robot], budget, end)
    return code


def run_suite(mode: str, robot: str, expected: list | None, budget: float | None, end: float | None) -> int:
    cmd = [sys.executable, "-m", "whole_body_control.cli", "scenarios", "--robot", robot, "--json", *MODES[mode]]
    if budget is not None:
        cmd += ["--budget", f"{budget:.0f}"]
    label = f"{robot} ({mode.replace('_', ' ')})"
    # the budget bounds what starts; the hard limit only guards against a hung suite
    timeout = max(120.0, end + MARGIN_S - 60.0 - time.time()) if end is not None else 3600.0
    try:
        out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        print(f"[ci] {label}: killed after {timeout:.0f} s, at CI's limit\n{(exc.stdout or b'')[-2000:]!r}")
        return 1
    try:
        summary = json.loads(out.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        print(f"[ci] {label}: no JSON line from the suite\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
        return 1
    ran = [s for s in summary["scenarios"] if s.get("applies", True) and s.get("ran", True)]
    # (through the graph, a scenario that does not apply has passed: None)
    failed = {s["name"]: s["figure"] for s in ran if not s["passed"]}
    not_run = [s["name"] for s in summary["scenarios"] if not s.get("ran", True)]
    expected = set(expected or [])
    new = sorted(set(failed) - expected)
    fixed = sorted(expected & {s["name"] for s in ran} - set(failed))
    print(f"[ci] {label}: {summary['passed']} passed, {summary['failed']} failed ({summary['wall_s']:.0f} s)")
    for name in new:
        print(f"[ci] {label}: FAILED {name}: {failed[name]}")
    for name in sorted(set(failed) & expected):
        print(f"[ci] {label}: known failure {name}: {failed[name]}")
    for name in fixed:
        print(f"[ci] {label}: {name} passes now: remove it from .ci/known_failures.yaml")
    if not_run:
        print(f"[ci] {label}: NOT RUN (time budget, this machine's pace): {', '.join(not_run)}")
    if summary.get("ss_thresholds_mps"):
        print(f"[ci] {label}: single-support thresholds [m/s]: {summary['ss_thresholds_mps']}")
    return int(bool(new))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
