"""Parameter declaration with descriptions and ranges (generate_parameter_library style).

Each node lists its parameters as :class:`Param` s; :func:`declare` declares them
with a ``ParameterDescriptor`` (description, ``FloatingPointRange`` /
``IntegerRange``, read-only flag), so that rclpy itself rejects out-of-range
values at start-up and at run time.  Checks that a range cannot express go into
the node's ``add_on_set_parameters_callback``, which must return a reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, SetParametersResult
from rclpy.node import Node
from rclpy.parameter import Parameter

INF = 1.0e300  # "no upper bound" (FloatingPointRange needs a finite bound)


@dataclass(frozen=True)
class Param:
    """One parameter: ``name``, ``default`` (its type is the parameter's type), a
    ``description`` with units, an optional inclusive ``range`` (lo, hi) for
    numbers, and ``read_only`` for what is read once at start-up."""

    name: str
    default: Any
    description: str
    range: tuple[float, float] | None = None
    read_only: bool = False

    def descriptor(self) -> ParameterDescriptor:
        d = ParameterDescriptor(name=self.name, description=self.description, read_only=self.read_only)
        if self.range is not None:
            lo, hi = self.range
            if isinstance(self.default, bool):
                raise TypeError(f"parameter '{self.name}': a bool has no range")
            if isinstance(self.default, int):
                d.integer_range = [IntegerRange(from_value=int(lo), to_value=int(hi), step=0)]
            else:
                d.floating_point_range = [FloatingPointRange(from_value=float(lo), to_value=float(hi), step=0.0)]
        return d


def declare(node: Node, params: list[Param]) -> dict[str, Any]:
    """Declare ``params`` on ``node``; returns ``{name: value}`` (overrides applied).

    An override that is an integer for a floating-point parameter (``-p max_tilt:=1``)
    is taken as that number, as ``ros2 param set`` users expect, rather than refused
    as the wrong type."""
    overrides = getattr(node, "_parameter_overrides", {})  # rclpy keeps them by name
    values = {}
    for p in params:
        default = p.default
        over = overrides.get(p.name)
        if over is not None and isinstance(p.default, float) and over.type_ == Parameter.Type.INTEGER:
            overrides[p.name] = Parameter(p.name, value=float(over.value))
        if isinstance(default, (list, tuple)) and len(default) == 0:
            default = Parameter.Type.STRING_ARRAY  # an empty list has no type: declare as string array
        param = node.declare_parameter(p.name, default, p.descriptor())
        value = param.value
        if value is None and isinstance(p.default, (list, tuple)):
            value = list(p.default)  # a list parameter declared by type alone and not set
        values[p.name] = list(value) if isinstance(value, (list, tuple)) or hasattr(value, "tolist") else value
    return values


def command_line_overrides(argv: list[str]) -> list[Parameter]:
    """The ``-p name:=value`` (``--param``) arguments inside ``--ros-args`` of ``argv``.

    rcl ranks a node's section of a ``--params-file`` above ``-p``; ``ros2 launch``
    users expect the opposite (a launch argument overrides the file), so the
    nodes hand these back to rclpy as ``parameter_overrides``, which win.  Values
    are YAML, as rcl reads them (``-p joints:="[a, b]"``)."""
    import yaml

    out = []
    in_ros = False
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--ros-args":
            in_ros = True
        elif arg == "--":
            in_ros = False
        elif in_ros and arg in ("-p", "--param") and i + 1 < len(argv):
            name, sep, text = argv[i + 1].partition(":=")
            if sep and ":" not in name:  # "node:name:=value" forms are rcl's to apply
                try:
                    value = yaml.safe_load(text)
                except yaml.YAMLError:
                    value = text
                out.append(Parameter(name, value=value))
            i += 1
        i += 1
    return out


def result(reason: str = "") -> SetParametersResult:
    """``SetParametersResult``: successful when ``reason`` is empty."""
    return SetParametersResult(successful=not reason, reason=reason)


def make_executor(context=None, logger=None):
    """``rclpy.experimental.EventsExecutor`` (about 3x the callback rate of the
    single-threaded executor), or the ``SingleThreadedExecutor`` where it is not
    available, which is then logged.  ``WBC_EXECUTOR=single`` in the environment
    chooses the single-threaded one."""
    import os

    from rclpy.executors import SingleThreadedExecutor

    if os.environ.get("WBC_EXECUTOR", "events") == "single":
        return SingleThreadedExecutor(context=context)
    try:
        from rclpy.experimental import EventsExecutor

        return EventsExecutor(context=context)
    except (ImportError, AttributeError, RuntimeError) as exc:
        if logger is not None:
            logger.warning(f"EventsExecutor unavailable ({exc}): using SingleThreadedExecutor")
        return SingleThreadedExecutor(context=context)


class LogThrottle:
    """``throttle(key)``: whether to log the message ``key`` now, at most once per
    ``period`` seconds (wall clock).  rclpy's logger inspects its caller's source file
    on every call, throttled or not (about 0.5 ms on the development machine, half a
    control period): a message that may come every period asks this first."""

    def __init__(self, period: float = 1.0) -> None:
        self.period = period
        self._last: dict[str, float] = {}

    def __call__(self, key: str) -> bool:
        import time

        now = time.monotonic()
        last = self._last.get(key)
        if last is not None and now - last < self.period:
            return False
        self._last[key] = now
        return True


REALTIME_PRIORITY = Param(
    "realtime_priority",
    0,
    "SCHED_FIFO priority of the node's threads (1-99, as ros2_control_node's 50; 0: the normal scheduler). "
    "Refused without the right (rtprio in /etc/security/limits.conf): logged, the node runs on",
    (0, 99),
    read_only=True,
)


STATE_BEST_EFFORT = Param(
    "state_best_effort",
    False,
    "real time: the state subscriptions are best effort (no acknowledgements with the robot's reliable "
    "publishers; the newest sample wins); lockstep needs every state, reliably",
    read_only=True,
)


def set_thread_priority(priority: int, pid: str = "self") -> set[int]:
    """Every thread of process ``pid`` under SCHED_FIFO at ``priority`` (0: back to the
    normal scheduler); threads started later inherit it.  Returns the processes those
    threads started.  Raises OSError when refused (no rtprio right)."""
    import os

    policy, prio = (os.SCHED_FIFO, int(priority)) if priority > 0 else (os.SCHED_OTHER, 0)
    children = set()
    for tid in os.listdir(f"/proc/{pid}/task"):
        os.sched_setscheduler(int(tid), policy, os.sched_param(prio))
        with open(f"/proc/{pid}/task/{tid}/children") as f:
            children.update(int(child) for child in f.read().split())
    return children


def set_realtime_priority(node: Node, priority: int) -> bool:
    """Every thread of this process (rclpy's and DDS's included) under SCHED_FIFO at
    ``priority``; threads started later inherit it.  The processes this one started (the
    controller's solve process) go one below: the node's threads preempt them.  Logs and
    returns False when refused."""
    if priority <= 0:
        return False
    try:
        for pid in set_thread_priority(priority):
            set_thread_priority(max(1, int(priority) - 1), str(pid))
    except (OSError, AttributeError) as exc:
        node.get_logger().warning(
            f"realtime_priority {priority} refused ({exc}): normal scheduling; a real-time loop needs "
            "the rtprio right (limits.conf) as ros2_control_node does"
        )
        return False
    node.get_logger().info(f"SCHED_FIFO priority {priority}")
    return True


def process_age() -> float:
    """Seconds since this process started (Linux: ``/proc/self/stat``; 0 elsewhere): a
    node's start-up counts from there, its imports included."""
    import os
    import time

    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22: starttime
        return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return 0.0


class StopRequest:
    """A stop asked by a signal handler, acted on between two events: a handler that
    shut the context down itself could run inside a callback, which then published on a
    destroyed publisher (``InvalidHandle``, a traceback at every stop of a graph)."""

    def __init__(self) -> None:
        self.requested = False

    def __call__(self, *_signal) -> None:
        self.requested = True


def spin_executor(executor, context=None, stop: StopRequest | None = None) -> None:
    """Spin until the context shuts down or ``stop`` is requested.  ``spin_once`` in a
    loop: the Kilted wheels' ``EventsExecutor.spin()`` runs no timer and ignores a
    shutdown, while its ``spin_once`` does both (checked here with a 10 Hz timer) and
    raises ``ExternalShutdownException`` once the context is shut down.  ``rclpy.ok`` is
    asked every 100 events, not every event (3 to 4 % of a 1 kHz controller's time); the
    stop flag after every event (within 0.1 s when none comes)."""
    import rclpy

    stop = stop or StopRequest()
    while rclpy.ok(context=context) and not stop.requested:
        for _ in range(100):
            executor.spin_once(timeout_sec=0.1)
            if stop.requested:
                return


def per_period(callback):
    """``callback`` for a timer that fires every control period.  rclpy inspects a timer
    callback's signature at every call (looking for a ``TimerInfo`` parameter): 9 to 35 us
    for a bound method, about 1 us for this wrapper, whose signature is preset."""
    import inspect

    def call() -> None:
        callback()

    call.__signature__ = inspect.Signature()
    return call


FASTDDS_PROFILE_ENV = "FASTDDS_DEFAULT_PROFILES_FILE"


def fastdds_profile_path(name: str):
    """``config/ros/<name>.xml`` (a Fast DDS profile) in the package share."""
    from zmp_walker.base.share import share_dir

    return share_dir() / "config" / "ros" / f"{name}.xml"


def use_fastdds_profile() -> None:
    """Point Fast DDS at this package's participant profile (``config/ros/fastdds_participant.xml``:
    a 0.5 s announcement period) before the node's participant is created, unless the user
    configures Fast DDS with a profile file of their own (the environment variable, or
    ``DEFAULT_FASTDDS_PROFILES.xml`` in the working directory), which is left alone.  Other RMWs
    ignore it."""
    import os

    if os.environ.get(FASTDDS_PROFILE_ENV) or os.environ.get("SKIP_DEFAULT_XML_FILE"):
        return
    if os.path.exists("DEFAULT_FASTDDS_PROFILES.xml"):
        return
    profile = fastdds_profile_path("fastdds_participant")
    if profile.is_file():
        os.environ[FASTDDS_PROFILE_ENV] = str(profile)


def spin(node_class, args=None) -> None:
    """``main()`` of a node: init, spin ``node_class()`` until Ctrl-C / SIGTERM, clean up.

    ``-p`` overrides on the command line win over parameter files (see
    :func:`command_line_overrides`)."""
    import signal
    import sys

    import rclpy
    from rclpy.executors import ExternalShutdownException

    from whole_body_control.errors import WbcError
    from whole_body_control.solve_process import freeze_startup_objects

    code = 0
    argv = list(sys.argv if args is None else args)
    use_fastdds_profile()  # (see there: found a robot that came up after this node in 3 s, not 0.5)
    rclpy.init(args=argv)
    # Ctrl-C and SIGTERM end the spin between two events.  (rclpy's SIGINT handler chains
    # to Python's KeyboardInterrupt, which landed inside a timer callback now and then: the
    # executor logged it as a fatal exception with a traceback when a graph was stopped.)
    stop = StopRequest()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stop)
    node = None
    try:
        node = node_class(parameter_overrides=command_line_overrides(argv))
        executor = make_executor(logger=node.get_logger())
        executor.add_node(node)
        if node.has_parameter(REALTIME_PRIORITY.name):
            set_realtime_priority(node, node.get_parameter(REALTIME_PRIORITY.name).value)
        freeze_startup_objects()  # (see there: a 24 ms full collection at 1 kHz otherwise)
        spin_executor(executor, stop=stop)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except WbcError as exc:  # a configuration error: the message, no traceback, exit code 2
        print(f"[{node_class.__name__}] error: {exc}", file=sys.stderr, flush=True)
        code = 2
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
    if getattr(node, "fatal", None):
        code = 2  # the node stopped itself on a configuration error it logged
    if code:
        sys.exit(code)


def quantiles(values: np.ndarray, fractions: tuple[float, ...]) -> list[float | None]:
    """Nearest-rank quantiles of ``values`` by one partial sort: the diagnostics of the
    1 kHz nodes run inside their loops, and ``np.median`` with ``np.percentile`` on 4096
    samples cost ten times more.  None for each when ``values`` is empty."""
    if not values.size:
        return [None] * len(fractions)
    ranks = [int(round(f * (values.size - 1))) for f in fractions]
    part = np.partition(values, ranks)
    return [float(part[k]) for k in ranks]


class Ring:
    """The last ``size`` values of a series, in a preallocated array (a 1 kHz node appends one
    a period)."""

    def __init__(self, size: int):
        self._data = np.zeros(int(size))
        self.count = 0

    def append(self, value: float) -> None:
        self._data[self.count % self._data.size] = value
        self.count += 1

    def values(self) -> np.ndarray:
        """The kept values (in no particular order)."""
        return self._data[: min(self.count, self._data.size)]
