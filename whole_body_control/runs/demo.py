"""The headless demo behind ``wbc demo``: stand, get pushed, walk; one report per run.

Each part writes its own report under ``out/<part>/`` (summary, time series,
plots, an index page); ``out/index.html`` links them and ``out/summary.json``
collects the summaries.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from whole_body_control.robot import RobotModel, load_robot
from whole_body_control.runs.runner import run_stand


def run_demo(out: Path, robot: str | RobotModel = "talos") -> dict:
    """``robot``: a name, a YAML path or a loaded model (with its ``--wbc-config`` / ``--walker-config``)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model = robot if isinstance(robot, RobotModel) else load_robot(robot)
    parts = {
        "stand": run_stand(model, 3.0, out_dir=out / "stand"),
        "push": run_stand(model, 4.0, push_dv=(0.0, 0.25), push_at=1.5, out_dir=out / "push"),
    }
    try:
        from whole_body_control.runs.walk import run_walk

        parts["walk"] = run_walk(model, 0.2, 0.0, 0.0, 8, None, 1.0, None, None, out / "walk")
    except Exception as exc:  # the demo still reports standing if walking cannot run
        parts["walk"] = {"error": f"{type(exc).__name__}: {exc}"}
    summary = {
        "robot": model.name,
        "fell": any(p.get("fell", False) for p in parts.values()),
        "parts": {name: {k: p.get(k) for k in _KEYS if k in p} for name, p in parts.items()},
        "report": str(out / "index.html"),
    }
    (out / "summary.json").write_text(json.dumps({"summary": summary, "parts": parts}, indent=2, default=str))
    links = "".join(
        f'<li><a href="{name}/index.html">{name}</a>: {html.escape(json.dumps(summary["parts"][name]))}</li>'
        for name in parts
    )
    (out / "index.html").write_text(
        f"<!doctype html><html><head><meta charset='utf-8'><title>wbc demo</title></head><body>"
        f"<h1>wbc demo: {html.escape(model.name)}</h1><ul>{links}</ul></body></html>\n"
    )
    return summary


_KEYS = (
    "fell",
    "fall_reason",
    "duration_s",
    "com_error_max_m",
    "qp_failures",
    "steps_completed",
    "distance_m",
    "tick_ms_median",
    "tick_ms_p99",
    "real_time_factor",
    "error",
)
