"""CI: the whole scenario suite for each robot of .ci/known_failures.yaml, in-process and
through the ROS graph (lockstep, ``--through ros``).

Fails (exit code 1) when a scenario that is not a known failure fails, so that a change
that breaks an earlier acceptance (a walking push, a slope, the graph's scenarios) fails
CI; a known failure that passes is reported.
Usage: .venv/bin/python .ci/scenarios.py [in_process|through_ros ...]
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


MODES = {"in_process": [], "through_ros": ["--through", "ros"]}


def main(modes: list[str]) -> int:
    known = yaml.safe_load((ROOT / ".ci" / "known_failures.yaml").read_text())
    code = 0
    for mode in modes or list(MODES):
        if mode not in MODES or mode not in known:
            print(f"[ci] unknown mode '{mode}' (.ci/known_failures.yaml has {', '.join(known)})")
            return 1
        code |= run_mode(mode, known[mode])
    return code


def run_mode(mode: str, known: dict) -> int:
    code = 0
    for robot, expected in known.items():
        cmd = [sys.executable, "-m", "whole_body_control.cli", "scenarios", "--robot", robot, "--json", *MODES[mode]]
        label = f"{robot} ({mode.replace('_', ' ')})"
        out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=3600)
        try:
            summary = json.loads(out.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            print(f"[ci] {label}: no JSON line from the suite\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
            code = 1
            continue
        # (through the graph, a scenario that does not apply has passed: None)
        failed = {s["name"]: s["figure"] for s in summary["scenarios"] if s.get("applies", True) and not s["passed"]}
        new = sorted(set(failed) - set(expected or []))
        fixed = sorted(set(expected or []) - set(failed))
        print(f"[ci] {label}: {summary['passed']} passed, {summary['failed']} failed ({summary['wall_s']:.0f} s)")
        for name in new:
            print(f"[ci] {label}: FAILED {name}: {failed[name]}")
        for name in sorted(set(failed) & set(expected or [])):
            print(f"[ci] {label}: known failure {name}: {failed[name]}")
        for name in fixed:
            print(f"[ci] {label}: {name} passes now: remove it from .ci/known_failures.yaml")
        code |= bool(new)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
