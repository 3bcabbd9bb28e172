"""Mean cost of one :meth:`PatternGenerator.cycle` tick, printed as JSON.

Usage: ``python -m zmp_walker.bench [--robot talos] [--method preview|mpc] [--seconds 12]``.
Walks 10 steps (with and without a measured state) at the configured control
period and reports the mean and worst tick time [us].
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

import numpy as np

from zmp_walker.config import load_walker_config
from zmp_walker.generator import MeasuredState, PatternGenerator
from zmp_walker.geometry import FootPose, SoleRect


def bench(method: str | None = None, robot: str | None = None, seconds: float = 12.0, measured: bool = False) -> dict:
    """Run a 10-step walk and time every tick."""
    cfg = load_walker_config(robot=robot)
    if method is not None:
        cfg = dataclasses.replace(cfg, method=method)
    sole = SoleRect(-0.10, 0.10, -0.065, 0.065)
    gen = PatternGenerator(cfg, FootPose([0, 0.085, 0]), FootPose([0, -0.085, 0]), np.array([0, 0, 0.87]), sole, sole)
    gen.walk_steps(10, 0.25)
    n = int(seconds / cfg.dt)
    ticks = np.empty(n)
    state = MeasuredState(np.array([0.0, 0.0, 0.87]), np.zeros(3))
    for i in range(n):
        t0 = time.perf_counter()
        ref = gen.cycle(i * cfg.dt, state if measured else None)
        ticks[i] = time.perf_counter() - t0
        if measured:
            state = MeasuredState(ref.com_pos, ref.com_vel)
    return {
        "method": cfg.method,
        "measured_state": measured,
        "ticks": n,
        "mean_us": round(float(ticks.mean() * 1e6), 2),
        "p99_us": round(float(np.percentile(ticks, 99) * 1e6), 2),
        "max_us": round(float(ticks.max() * 1e6), 2),
        "steps_completed": gen.steps_completed,
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default=None, help="robot overlay of config/walker.yaml")
    parser.add_argument("--method", choices=["preview", "mpc"], default=None, help="CoM planner (default: config)")
    parser.add_argument("--seconds", type=float, default=12.0, help="simulated walking time [s]")
    args = parser.parse_args(argv)
    methods = [args.method] if args.method else ["preview", "mpc"]
    results = [bench(m, args.robot, args.seconds, measured) for m in methods for measured in (False, True)]
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
