"""``wbc``: the command line of the whole-body control stack.

Subcommands import what they need lazily so that ``wbc --help`` stays fast.
With ``--json`` the last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from whole_body_control import _threads  # noqa: F401, I001 - one BLAS thread, before NumPy loads
from whole_body_control.arguments import number


def _add_robot(p: argparse.ArgumentParser, default: str = "talos", walker: bool = True) -> None:
    p.add_argument(
        "--robot",
        default=default,
        help="robot name (config/robots/<name>.yaml, see 'wbc robots') or the path of a robot YAML",
    )
    p.add_argument(
        "--wbc-config",
        metavar="FILE",
        help="WBC file in place of config/wbc.yaml (the robot YAML's 'wbc' section still goes on top)",
    )
    if walker:
        p.add_argument(
            "--walker-config",
            metavar="FILE",
            help="walker file in place of config/walker.yaml (the robot YAML's 'walker' section still goes on top)",
        )


def _load_robot(args):
    from whole_body_control.robot import load_robot

    return load_robot(args.robot, wbc_config=args.wbc_config, walker_config=getattr(args, "walker_config", None))


def _warn_quick_checks(robot) -> None:
    """The quick part of `wbc check` (frames, sole flatness, locked joints): a warning per failure."""
    from whole_body_control.runs.robot_check import quick_checks

    for check in quick_checks(robot):
        if not check.passed:
            print(f"wbc: warning: check '{check.name}' failed: {check.detail}; fix: {check.fix}", file=sys.stderr)


def _print_result(summary: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(summary))
        return
    width = max(len(k) for k in summary)
    for key, value in summary.items():
        print(f"{key:<{width}}  {value}")


def cmd_robots(args) -> int:
    from whole_body_control.robot import available_robots, load_robot

    rows = [load_robot(name).summary() for name in (args.robot or available_robots())]
    if args.json:
        print(json.dumps(rows))
        return 0
    print(f"{'robot':<14}{'nq':>5}{'nv':>5}{'joints':>8}{'mass [kg]':>11}")
    for r in rows:
        print(f"{r['robot']:<14}{r['nq']:>5}{r['nv']:>5}{r['joints']:>8}{r['mass_kg']:>11.2f}")
    return 0


def _sim_config(args):
    from whole_body_control.sim import SimConfig

    return SimConfig(timestep=args.timestep)


def _closed_loop_options(args) -> dict:
    """The options `wbc stand` and `wbc walk` share: push, simulation, report directory."""
    return {
        "push_dv": tuple(args.push_dv) if args.push_dv else None,
        "push_at": args.push_at,
        "sim_config": _sim_config(args),
        "out_dir": Path(args.out) if args.out else None,
        "save_hardest": args.save_hardest,
    }


def cmd_stand(args) -> int:
    from whole_body_control.config import wbc_config_for
    from whole_body_control.runs.progress import Progress
    from whole_body_control.runs.runner import run_stand, stage_options

    robot = _load_robot(args)
    wbc_config_for(robot)  # a bad WBC file or section stops here, before the simulation starts
    _warn_quick_checks(robot)
    progress = Progress(args.duration, "stand ")
    with stage_options(solve_period=args.solve_period):
        summary = run_stand(
            robot,
            args.duration,
            **_closed_loop_options(args),
            on_tick=progress,
        )
    progress.close()
    _print_result(summary, args.json)
    return 0


def cmd_walk(args) -> int:
    from whole_body_control.config import wbc_config_for
    from whole_body_control.runs.progress import Progress
    from whole_body_control.runs.runner import stage_options
    from whole_body_control.runs.walk import run_walk
    from whole_body_control.walker_stage import walker_config_for

    robot = _load_robot(args)
    wbc_config_for(robot)  # a bad WBC file or section stops here, before the simulation starts
    walker_config, source = walker_config_for(robot)
    _check_walk_command(args, robot, walker_config, source)
    _warn_quick_checks(robot)
    # the walk's length is known once planned: estimate it for the bar (steps + start + stop)
    gait = walker_config.gait(args.speed)  # the fast gait's step duration above the nominal speed
    progress = Progress((args.steps + 2) * (walker_config.step_duration if gait is None else gait[0]) + 1.0, "walk ")
    with stage_options(solve_period=args.solve_period):
        summary = run_walk(
            robot,
            speed=args.speed,
            vy=args.vy,
            yaw_rate=args.yaw_rate,
            steps=args.steps,
            friction=args.friction,
            **_closed_loop_options(args),
            on_tick=progress,
        )
    progress.close()
    _print_result(summary, args.json)
    return 0


def _check_walk_command(args, robot, walker_config, source: str) -> None:
    """A velocity command beyond what the walker's step limits allow is an error naming the
    limit (the planner would clamp each step to it, and the run would not go at that speed)."""
    from whole_body_control.errors import ConfigError
    from whole_body_control.walker_stage import velocity_command_problems

    problems = velocity_command_problems(robot, walker_config, source, args.speed, args.vy, args.yaw_rate)
    if problems:
        raise ConfigError(problems[0])


def cmd_bench(args) -> int:
    from whole_body_control.runs.bench import bench_tick

    summary = bench_tick(
        args.robot, levels=args.levels, ticks=args.ticks, warmup=args.warmup, wbc_config=args.wbc_config
    )
    _print_result(summary, args.json)
    return 0


def cmd_demo(args) -> int:
    from whole_body_control.runs.demo import run_demo

    summary = run_demo(Path(args.out), robot=_load_robot(args))
    _print_result(summary, args.json)
    return 0 if not summary.get("fell") else 1


def cmd_scenarios(args) -> int:
    from whole_body_control.runs.scenarios import format_row, format_table, run_suite

    def progress(result):  # each row as it comes, on a terminal
        if sys.stderr.isatty():
            print(format_row(result), file=sys.stderr, flush=True)

    options = None
    if args.through == "ros":
        from whole_body_control.runs.scenarios import RosOptions

        options = RosOptions(control_period=args.control_period, solve_period=args.solve_period)
    robot = _load_robot(args)  # a bad robot, WBC or walker file stops here, before the suite starts
    from whole_body_control.config import wbc_config_for
    from whole_body_control.runs.runner import stage_options
    from whole_body_control.walker_stage import walker_config_for

    wbc_config_for(robot)
    walker_config_for(robot)
    with stage_options(solve_period=args.solve_period):  # (in-process; the graph's is in options)
        summary = run_suite(
            args.robot,
            args.only,
            args.out,
            video=args.video,
            jobs=args.jobs,
            on_result=progress,
            through=args.through,
            ros_options=options,
            configs={"wbc_config": args.wbc_config, "walker_config": args.walker_config},
            budget=args.budget,
        )
    print(format_table(summary))
    if args.json:
        print(json.dumps(summary))
    return 0 if summary["failed"] == 0 else 1


def cmd_robot_init(args) -> int:
    from whole_body_control.runs.robot_init import init_robot

    summary = init_robot(
        Path(args.urdf), Path(args.output), srdf=Path(args.srdf) if args.srdf else None, name=args.name
    )
    if args.json:
        print(json.dumps(summary))
        return 0
    print(f"wrote {summary['robot_file']}" + (f" and {summary['urdf']}" if summary["urdf_repaired"] else ""))
    for repair in summary["repairs"]:
        print(f"  repaired: {repair}")
    for note in summary["notes"]:
        print(f"  note: {note}")
    for problem in summary["problems"]:
        print(f"  PROBLEM: {problem}")
    print(f"next: wbc check {summary['robot_file']}")
    return 0


def cmd_check(args) -> int:
    from whole_body_control.runs.robot_check import format_report, run_checks

    report = run_checks(args.robot)
    if args.json:
        print(json.dumps(report))
    else:
        print(format_report(report))
    return 0 if report["passed"] else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wbc", description="Whole-body control for humanoid robots")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("robots", help="list the robots and their sizes")
    p.add_argument("robot", nargs="*", help="robot names or robot YAML paths (default: the shipped robots)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_robots)

    p = sub.add_parser("robot", help="set up a robot of your own")
    rsub = p.add_subparsers(dest="robot_command", required=True)
    r = rsub.add_parser("init", help="write a starting robot YAML from a URDF, every guessed value commented")
    r.add_argument("urdf", help="the robot's URDF")
    r.add_argument("--srdf", metavar="FILE", help="SRDF whose half_sitting (or first) group_state starts the posture")
    r.add_argument("-o", "--output", required=True, metavar="FILE", help="robot YAML to write (.yaml)")
    r.add_argument("--name", help="robot name (default: the URDF's)")
    r.add_argument("--json", action="store_true", help="print one JSON object")
    r.set_defaults(func=cmd_robot_init)

    p = sub.add_parser(
        "check",
        help="check a robot file: Pinocchio vs MuJoCo, frames, sole flatness, inertias, meshes, locked joints",
    )
    p.add_argument("robot", help="robot name (see 'wbc robots') or the path of a robot YAML")
    p.add_argument("--json", action="store_true", help="print one JSON line")
    p.set_defaults(func=cmd_check)

    def solve_period(p):
        p.add_argument(
            "--solve-period",
            type=number(ge=0.0, unit="[s]"),
            default=0.0,
            help="the whole-body QP every SOLVE_PERIOD [s] of states, its plan held between, "
            "as the ROS controller's solve_period (config/ros/*.yaml: 0.004); default 0: every state",
        )

    def closed_loop(p):
        _add_robot(p)
        solve_period(p)
        p.add_argument(
            "--push-dv",
            nargs=2,
            type=number(unit="[m/s]"),
            metavar=("VX", "VY"),
            help="push sized as a velocity change [m/s]",
        )
        p.add_argument("--push-at", type=number(ge=0.0, unit="[s]"), default=1.0, help="push time [s]")
        p.add_argument(
            "--timestep",
            type=number(gt=0.0, le=0.01, unit="[s]"),
            default=0.001,
            help="simulation and control period [s]",
        )
        p.add_argument("--out", help="directory for the run report")
        p.add_argument(
            "--save-hardest",
            metavar="FILE",
            help="save the QP problems that took longest (the 100 slowest) to FILE (replay: bench/hqp_replay.py FILE)",
        )
        p.add_argument("--json", action="store_true", help="print one JSON object as the last line")

    p = sub.add_parser("stand", help="stand in MuJoCo under the whole-body controller")
    closed_loop(p)
    p.add_argument("--duration", type=number(gt=0.0, unit="[s]"), default=10.0, help="simulated time [s]")
    p.set_defaults(func=cmd_stand)

    p = sub.add_parser("walk", help="walk in MuJoCo: ZMP pattern generator + whole-body controller")
    closed_loop(p)
    p.add_argument("--speed", type=number(unit="[m/s]"), default=0.2, help="forward speed [m/s]")
    p.add_argument("--vy", type=number(unit="[m/s]"), default=0.0, help="lateral speed [m/s]")
    p.add_argument("--yaw-rate", type=number(unit="[rad/s]"), default=0.0, help="turning rate [rad/s]")
    p.add_argument("--steps", type=number(int, ge=0), default=10, help="number of steps (0: stand with the walker)")
    p.add_argument(
        "--friction", type=number(gt=0.0, unit="[-]"), default=None, help="floor friction in the simulation [-]"
    )
    p.set_defaults(func=cmd_walk)

    p = sub.add_parser("scenarios", help="robustness suite in MuJoCo: a table of scenarios, pass/fail, key figure")
    _add_robot(p)
    p.add_argument("--only", action="append", help="scenario names (repeat or comma-separate; 'fast': the short ones)")
    p.add_argument("--out", help="directory for one run report per scenario and scenarios.json")
    p.add_argument("--video", action="store_true", help="with --out: also render a video per scenario (slow)")
    p.add_argument(
        "--jobs",
        type=number(int, ge=1),
        default=max(1, os.cpu_count() or 1),
        help="scenarios run in parallel processes (default: one per core)",
    )
    p.add_argument(
        "--through",
        choices=["process", "ros"],
        default="process",
        help="'ros': each scenario through the ROS graph (real processes, DDS, lockstep); "
        "the ones that cannot apply are listed with the reason",
    )
    p.add_argument(
        "--control-period",
        type=number(gt=0.0, unit="[s]"),
        default=0.001,
        help="--through ros: control period of the graph [s] (0.002 halves the wall time)",
    )
    solve_period(p)
    p.add_argument(
        "--budget",
        type=number(gt=0.0, unit="[s]"),
        help="wall time [s]: a scenario that would overrun it (its cost at the pace measured so far) "
        "is not started and listed as not run (CI on a slow machine)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    p.set_defaults(func=cmd_scenarios)

    p = sub.add_parser("bench", help="benchmarks (not tests)")
    bsub = p.add_subparsers(dest="bench", required=True)
    b = bsub.add_parser("tick", help="controller tick time: state update, QP build and solve for every level")
    _add_robot(b, walker=False)
    b.add_argument(
        "--levels", type=number(int, ge=1, le=3), default=3, help="number of strict priority levels (1, 2 or 3)"
    )
    b.add_argument("--ticks", type=number(int, ge=1), default=3000)
    b.add_argument("--warmup", type=number(int, ge=0), default=300)
    b.add_argument("--json", action="store_true")
    b.set_defaults(func=cmd_bench)

    p = sub.add_parser("demo", help="headless demo: stand, push, walk; writes a report")
    _add_robot(p)
    p.add_argument("--out", default="reports/demo", help="report directory")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_demo)

    from whole_body_control.ros.graph import register as register_launch  # rclpy only when run

    register_launch(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from whole_body_control.errors import WbcError

    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except WbcError as exc:
        print(f"wbc: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
