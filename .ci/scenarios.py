"""CI: the whole scenario suite for each robot of .ci/known_failures.yaml, in-process and
through the ROS graph (lockstep, ``--through ros``).

Fails (exit code 1) when a scenario that is not a known failure fails, so that a change
that breaks an earlier acceptance (a walking push, a slope, the graph's scenarios) fails
CI; a known failure that passes is reported.  A known failure may carry a floor (``- name:
0.175``): a row whose ``threshold_mps`` (the single-support push bisections) falls below it
fails CI too, so that what a listed row has reached cannot be lost unnoticed.

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
    try:
        for mode, robot in runs:
            known_failures(known[mode][robot])
    except ValueError as exc:
        print(f"[ci] {exc}")
        return 1
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
    v = verdict(summary["scenarios"], expected)
    print(f"[ci] {label}: {summary['passed']} passed, {summary['failed']} failed ({summary['wall_s']:.0f} s)")
    for name, why in v["new"].items():
        print(f"[ci] {label}: FAILED {name}: {why}")
    for name, why in v["known"].items():
        print(f"[ci] {label}: known failure {name}: {why}")
    for name in v["fixed"]:
        print(f"[ci] {label}: {name} passes now: remove it from .ci/known_failures.yaml")
    not_run = v["not_run"]
    if not_run:
        print(f"[ci] {label}: NOT RUN (time budget, this machine's pace): {', '.join(not_run)}")
    if summary.get("ss_thresholds_mps"):
        print(f"[ci] {label}: single-support thresholds [m/s]: {summary['ss_thresholds_mps']}")
    return int(bool(v["new"]))


def known_failures(listed: list | None) -> dict[str, float | None]:
    """A robot's entries of .ci/known_failures.yaml: ``name`` or ``{name: floor}`` -> floor (or None)."""
    known: dict[str, float | None] = {}
    for entry in listed or []:
        if isinstance(entry, str):
            known[entry] = None
        elif isinstance(entry, dict) and len(entry) == 1:
            ((name, floor),) = entry.items()
            if not isinstance(floor, (int, float)) or isinstance(floor, bool):
                raise ValueError(f".ci/known_failures.yaml: '{name}': the floor must be a number [m/s], got {floor!r}")
            known[str(name)] = float(floor)
        else:
            raise ValueError(f".ci/known_failures.yaml: an entry is a scenario name or 'name: floor', got {entry!r}")
    return known


def verdict(scenarios: list[dict], listed: list | None) -> dict:
    """A suite's rows against its known failures: ``new`` failures (not listed, or listed with a
    floor and a ``threshold_mps`` below it) and ``known`` ones, by name with the figure; the listed
    ones that pass (``fixed``); the ones the budget left out (``not_run``)."""
    known = known_failures(listed)
    # (through the graph, a scenario that does not apply has passed: None)
    ran = [s for s in scenarios if s.get("applies", True) and s.get("ran", True)]
    new, old = {}, {}
    for s in ran:
        if s["passed"]:
            continue
        name, floor = s["name"], known.get(s["name"])
        threshold = s.get("threshold_mps")
        if name not in known:
            new[name] = s["figure"]
        elif floor is not None and (threshold is None or threshold < floor - 1e-9):
            new[name] = f"{s['figure']}: below its floor {floor} m/s (.ci/known_failures.yaml)"
        else:
            old[name] = s["figure"]
    return {
        "new": dict(sorted(new.items())),
        "known": dict(sorted(old.items())),
        "fixed": sorted(set(known) & {s["name"] for s in ran if s["passed"]}),
        "not_run": [s["name"] for s in scenarios if not s.get("ran", True)],
    }


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
