"""Controller tick benchmark (not a test): state update, QP build and solve of every level.

The robot stands in MuJoCo while its CoM reference sways sideways (2 cm at
0.5 Hz), so the timed ticks see realistic, changing states; only the
controller's ``cycle`` is timed.
"""

from __future__ import annotations

import platform

import numpy as np

from whole_body_control.config import LevelConfig, WbcConfig, wbc_config_for


def hierarchy(config: WbcConfig, levels: int) -> WbcConfig:
    """The default hierarchy folded into ``levels`` strict levels (1 to its own count).

    Folding merges the lowest levels into the one above, keeping task weights.
    """
    names = list(config.levels)
    if not 1 <= levels <= len(names):
        raise ValueError(f"levels must be between 1 and {len(names)}, got {levels}")
    merged: dict[str, LevelConfig] = {}
    for i, name in enumerate(names):
        target = names[min(i, levels - 1)]
        tasks = dict(merged[target].tasks) if target in merged else {}
        tasks.update(config.levels[name].tasks)
        merged[target] = LevelConfig(tasks=tasks)
    return WbcConfig(
        levels=merged,
        contacts=config.contacts,
        solver=config.solver,
        safety=config.safety,
        control_period=config.control_period,
    )


def versions() -> dict:
    import mujoco
    import pinocchio
    import proxsuite

    return {
        "pinocchio": pinocchio.__version__,
        "proxsuite": proxsuite.__version__,
        "mujoco": mujoco.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
    }


def bench_tick(robot_name: str, levels: int = 3, ticks: int = 3000, warmup: int = 300, wbc_config=None) -> dict:
    from whole_body_control.controller import WholeBodyController
    from whole_body_control.robot import load_robot
    from whole_body_control.sim import Simulation

    robot = load_robot(robot_name, wbc_config=wbc_config)
    config = hierarchy(wbc_config_for(robot), levels)
    ctrl = WholeBodyController(robot, config)
    sim = Simulation(robot)
    sim.reset(robot.q_ref)
    ctrl.reset(sim.q, sim.v)
    com0 = ctrl.com_task.pos.copy()
    times = []
    statuses: dict[str, int] = {}
    dt = sim.timestep
    for k in range(warmup + ticks):
        t = k * dt
        w = 2 * np.pi * 0.5
        ctrl.com_task.set_reference(
            com0 + [0.0, 0.02 * np.sin(w * t), 0.0],
            [0.0, 0.02 * w * np.cos(w * t), 0.0],
            [0.0, -0.02 * w * w * np.sin(w * t), 0.0],
        )
        result = ctrl.cycle(sim.q, sim.v, dt)
        sim.step(result.tau)
        if k >= warmup:
            times.append(result.tick_time)
            statuses[result.status] = statuses.get(result.status, 0) + 1
    ms = np.array(times) * 1e3
    sim.close()
    return {
        "robot": robot.name,
        "levels": levels,
        "ticks": ticks,
        "contacts": 2,
        "tick_ms_median": round(float(np.median(ms)), 4),
        "tick_ms_p99": round(float(np.percentile(ms, 99)), 4),
        "tick_ms_mean": round(float(np.mean(ms)), 4),
        "statuses": statuses,
        **versions(),
    }
