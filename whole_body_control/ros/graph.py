"""The ROS node graph, defined once: which nodes, parameter files, parameters,
remappings and ``use_sim_time``.  ``launch/*.launch.py`` turn these specs into
``launch_ros`` nodes; ``wbc launch`` (:func:`run_graph`) runs the same specs
with real rclpy, each node in its own process, without ``ros2 launch``.

Graphs:
    :func:`sim_graph`: mujoco_bridge + zmp_walker + whole_body_controller (base
    state = the simulator's ground truth), optionally the state estimator;
    :func:`hardware_graph`: zmp_walker + whole_body_controller + state_estimator
    (base state = the estimator), talking to ros2_control's topics.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

GROUND_TRUTH = "/ground_truth/odom"
ESTIMATE = "/state_estimator/odom"


@dataclass(frozen=True)
class NodeSpec:
    """One node: ``name``, the Python ``module`` with ``main()``, the console
    script ``executable`` (``ros2 run whole_body_control <executable>``),
    ``params_files`` (YAML with ``ros__parameters``), ``parameters`` overriding
    them, and ``remappings`` ``(from, to)``."""

    name: str
    module: str
    executable: str
    params_files: tuple[str, ...] = ()
    parameters: dict = field(default_factory=dict)
    remappings: tuple[tuple[str, str], ...] = ()

    def cmdline(self, python: str = sys.executable) -> list[str]:
        """``python -m module --ros-args ...``: the same node outside ``ros2 launch``.

        ``parameters`` go into a YAML file of their own after ``params_files``: a
        node's section in a file outranks ``-p`` overrides, a later file outranks an
        earlier one (as launch_ros does with ``parameters=[file, dict]``)."""
        args = [python, "-m", self.module, "--ros-args", "-r", f"__node:={self.name}"]
        for f in self.params_files:
            args += ["--params-file", str(f)]
        if self.parameters:
            import yaml

            with tempfile.NamedTemporaryFile("w", prefix=f"wbc_{self.name}_", suffix=".yaml", delete=False) as f:
                yaml.safe_dump({self.name: {"ros__parameters": _plain(self.parameters)}}, f)
            args += ["--params-file", f.name]
        for src, dst in self.remappings:
            args += ["-r", f"{src}:={dst}"]
        return args

    def launch_kwargs(self) -> dict:
        """Keyword arguments of ``launch_ros.actions.Node`` for this node (the launch
        files' side of :meth:`cmdline`): parameter files first, then ``parameters``."""
        return {
            "package": PACKAGE,
            "executable": self.executable,
            "name": self.name,
            "parameters": [*map(str, self.params_files), _plain(self.parameters)],  # launch_ros takes lists
            "remappings": list(self.remappings),
            "output": "screen",
        }


def _plain(params: dict) -> dict:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in params.items()}


def params_path(name: str) -> Path:
    """``config/ros/<name>.yaml`` in the package share."""
    from whole_body_control.robot import share_dir

    return share_dir() / "config" / "ros" / f"{name}.yaml"


PACKAGE = "whole_body_control"
BRIDGE = ("mujoco_bridge", "whole_body_control.ros.mujoco_bridge", "mujoco_bridge")
CONTROLLER = ("whole_body_controller", "whole_body_control.ros.controller_node", "whole_body_controller")
WALKER = ("zmp_walker", "whole_body_control.ros.walker_node", "zmp_walker_node")
ESTIMATOR = ("state_estimator", "whole_body_control.ros.state_estimator", "state_estimator")


SIM_IMU = "/imu"  # the bridge's IMU topic
SIM_WRENCHES = {"left": "/left_foot/wrench", "right": "/right_foot/wrench"}  # the bridge's foot F/T topics
# ros2_control's defaults: joint_state_broadcaster, imu_sensor_broadcaster, forward_command_controller
JOINT_STATES = "/joint_states"
IMU = "/imu_sensor_broadcaster/imu"


def sim_graph(
    robot: str = "talos",
    lockstep: bool = True,
    params_file: str | None = None,
    headless: bool = True,
    walker: bool = True,
    estimator: bool = False,
    end_time: float = 0.0,
    start_paused: bool = False,
    bridge_params: dict | None = None,
    walker_params: dict | None = None,
    controller_params: dict | None = None,
) -> list[NodeSpec]:
    """The simulation graph (``launch/sim.launch.py``, ``wbc launch sim``).

    The controller takes the base state from the simulator's ground truth, or with
    ``estimator`` estimates it in its own process from the IMU, the legs and the
    simulated foot force sensors (the walker is then seeded from the IMU and the
    legs, as on hardware).  ``headless`` is accepted for the launch interface; the
    bridge has no viewer (record a report with ``wbc walk --out`` to see a run).
    ``bridge_params``, ``walker_params``, ``controller_params``: more parameters of
    those nodes (they override the parameter file; e.g. the bridge's ``friction``).
    """
    files = (str(params_file or params_path("sim")),)
    common = {"robot": robot, "use_sim_time": True}
    bridge = {
        "robot": robot,
        "mode": "lockstep" if lockstep else "realtime",
        "end_time": float(end_time),
        "start_paused": bool(start_paused),
    }
    ref_sync = "exact" if (walker and lockstep) else ("latest" if walker else "none")
    ctrl_timing, walker_timing = _timing(lockstep)
    ctrl = {
        **common,
        "reference_sync": ref_sync,
        "base_sync": "exact" if lockstep else "latest",
        **ctrl_timing,
        "imu_topic": SIM_IMU,
        "read_joint_order": False,  # the bridge's `joints` come from the same parameter file
    }
    # the walker runs on the state stamps and never reads its node clock: without use_sim_time
    # it does not subscribe to /clock (one reader less for the bridge's every period)
    wparams = {"robot": robot, "imu_topic": SIM_IMU, **walker_timing}
    if estimator:
        ctrl.update(
            estimator="internal", left_wrench_topic=SIM_WRENCHES["left"], right_wrench_topic=SIM_WRENCHES["right"]
        )
        # the walker has no base state to feed back (seeded from the IMU and the legs): open loop
        ctrl["com_mode"] = "reference"
        wparams.update(base_source="seed", com_mode="reference")
        walker_remap = ()
    else:
        ctrl["estimator"] = "external"
        walker_remap = (("base_state", GROUND_TRUTH),)
    if lockstep:
        bridge["realtime_priority"] = LOCKSTEP_PRIORITY  # (see _timing)
        # the solves in the command loop, after each command: every period is a round trip
        # with nothing beside it but the solve, and handing it to a worker costs more than it
        # saves (Talos 20 s, 2-core machine, normal scheduler: 602 periods per wall second,
        # 547 with the solve thread, 500 with the process).  Not in the hardware graph, chosen
        # when its controller took the newest foot wrenches, whose order against the joint
        # states varied more with the solve in the loop (Talos walked 0.14 to 0.18 m in 3 s,
        # 0.17 with the process); it now takes those of each state's stamp (not re-measured)
        ctrl["solve_worker"] = "none"
    bridge.update(bridge_params or {})
    ctrl.update(controller_params or {})
    specs = [
        NodeSpec(*BRIDGE, files, bridge),
        NodeSpec(*CONTROLLER, files, ctrl, (("base_state", GROUND_TRUTH),) if not estimator else ()),
    ]
    if walker:
        specs.append(NodeSpec(*WALKER, files, {**wparams, **(walker_params or {})}, walker_remap))
    return specs


# SCHED_FIFO priority of every node of a lockstep graph, the same for all: a state wakes the
# controller at once instead of after the normal scheduler's wake-up delay, and no node of
# the graph preempts another (Talos 20 s on the 2-core machine with other work at nice 19
# beside it: 1,020 to 1,250 periods per wall second, 700 to 770 with the normal scheduler;
# quiet: 1,240 and 1,350; the same final pose to the bit)
LOCKSTEP_PRIORITY = 40

WALKER_POLL_PERIOD = 0.002  # [s] real time: the walker reads the newest state this often (see _timing)


def _driver_priority(node, priority: int) -> bool:
    """This process's threads (the driver's rclpy and DDS threads) at SCHED_FIFO ``priority``,
    or (0) back under the normal scheduler.  Whether it was done (refused: logged, the
    driver runs as it is)."""
    from whole_body_control.ros.params import set_thread_priority

    try:
        set_thread_priority(priority)
    except OSError as exc:
        if node is not None:
            node.get_logger().warning(f"driver priority {priority} refused ({exc}): it may lose states under load")
        return False
    return True


def _timing(lockstep: bool) -> tuple[dict, dict]:
    """The controller's and the walker's settings that depend on lockstep.  Real time: the
    stamp differences as time steps, the newest finished solve, the walker on the newest
    state.  Lockstep: fixed time steps, a solve's plan taken two states later
    (reproducible with a worker), the walker on every state in order (its DCM feedback),
    and one SCHED_FIFO priority for every node (``LOCKSTEP_PRIORITY``; without the rtprio
    right the nodes log it and run as they are, with the same result, only slower).  Real
    time: the walker polls the newest state every ``WALKER_POLL_PERIOD``."""
    if not lockstep:
        # the walker polls the newest state every 2 ms rather than wake on each of the 1 kHz
        # joint states and base states (its batches come every 4 to 10 ms); the controller and
        # the walker read the states best effort: no acknowledgements with the robot's writers
        ctrl = {"fixed_dt": False, "solve_wait": 0, "state_best_effort": True}
        return ctrl, {"state_history": 1, "state_poll_period": WALKER_POLL_PERIOD, "state_best_effort": True}
    prio = {"realtime_priority": LOCKSTEP_PRIORITY}
    return {"fixed_dt": True, "solve_wait": 2, **prio}, {"state_history": 64, **prio}


def hardware_graph(
    robot: str = "talos",
    params_file: str | None = None,
    controller_name: str = "effort_controller",
    walker: bool = True,
    use_sim_time: bool = False,
    joint_states_topic: str = JOINT_STATES,
    imu_topic: str = IMU,
    left_wrench_topic: str = "",
    right_wrench_topic: str = "",
    estimator_node: bool = False,
    lockstep: bool = False,
) -> list[NodeSpec]:
    """The hardware graph (``launch/bringup.launch.py``): walker and controller next to
    ros2_control (joint_state_broadcaster on ``joint_states_topic``, an
    imu_sensor_broadcaster on ``imu_topic``, optional foot force/torque broadcasters,
    and a forward_command_controller named ``controller_name`` with interface_name
    effort, whose ``joints`` the controller reads).

    The base state is estimated inside the controller's process (one hop less);
    the walker is seeded from the IMU and the legs.  ``estimator_node`` runs the
    separate ``state_estimator`` node instead (``/state_estimator/odom``) for both.
    ``lockstep``: a simulated robot that steps once per command (needs ``use_sim_time``):
    each state waits for the walking reference of its stamp, and the time step is nominal."""
    files = (str(params_file or params_path("hardware")),)
    common = {"robot": robot, "use_sim_time": bool(use_sim_time)}
    ctrl_timing, walker_timing = _timing(lockstep)
    ctrl = {
        **common,
        "controller_name": controller_name,
        "reference_sync": ("exact" if lockstep else "latest") if walker else "none",
        "base_sync": "exact" if lockstep else "latest",  # estimator node: its odometry of the same stamp
        **ctrl_timing,
        "joint_states_topic": joint_states_topic,
        "imu_topic": imu_topic,
        "left_wrench_topic": left_wrench_topic,
        "right_wrench_topic": right_wrench_topic,
        "estimator": "external" if estimator_node else "internal",
    }
    remap = (("base_state", ESTIMATE),) if estimator_node else ()
    specs = [NodeSpec(*CONTROLLER, files, ctrl, remap)]
    state_remaps = (("/joint_states", joint_states_topic),) if joint_states_topic != "/joint_states" else ()
    if walker:
        # no use_sim_time: the walker runs on the state stamps, it reads no clock (see sim_graph)
        wparams = {"robot": robot, "base_source": "topic" if estimator_node else "seed", **walker_timing}
        wparams["imu_topic"] = imu_topic
        specs.insert(0, NodeSpec(*WALKER, files, wparams, remap + state_remaps))
    if estimator_node:
        wrench_remaps = tuple(
            (f"/{side}_foot/wrench", topic)
            for side, topic in (("left", left_wrench_topic), ("right", right_wrench_topic))
            if topic
        )
        specs.append(NodeSpec(*ESTIMATOR, files, common, (("/imu", imu_topic), *state_remaps, *wrench_remaps)))
    return specs


# -- running a graph without ros2 launch ---------------------------------------------------------

_counter = 0


@contextlib.contextmanager
def domain_id():
    """A ROS_DOMAIN_ID for one graph: ``$ROS_DOMAIN_ID`` if set, else one in 1..100
    derived from the pid and a counter, skipping ids locked by other runs (lock
    files in the temp directory, held for the duration of the block)."""
    global _counter
    if os.environ.get("ROS_DOMAIN_ID"):
        yield int(os.environ["ROS_DOMAIN_ID"])
        return
    lock_dir = Path(tempfile.gettempdir()) / "wbc_ros_domains"
    lock_dir.mkdir(exist_ok=True)
    _counter += 1
    start = (os.getpid() * 7 + _counter) % 100
    for k in range(100):
        did = (start + k) % 100 + 1
        fd = os.open(lock_dir / f"{did}.lock", os.O_CREAT | os.O_RDWR, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        try:
            yield did
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        return
    raise RuntimeError("no free ROS_DOMAIN_ID in 1..100")


def graph_env(did: int, base: dict | None = None) -> dict:
    """Environment of the graph's processes: the domain, localhost-only discovery
    (unless the caller set a range), unbuffered Python, this package on the path.

    With Fast DDS and no profile of the caller's, LOCALHOST becomes the package's
    localhost profile (``config/ros/fastdds_localhost.xml``: UDP on the loopback
    interface, unicast discovery) with the range SUBNET, so that rmw_fastrtps keeps it:
    for LOCALHOST it would install shared memory, whose port check stalled the nodes
    333 ms (see ``config/ros/fastdds_participant.xml``)."""
    from whole_body_control.ros.params import FASTDDS_PROFILE_ENV, fastdds_profile_path

    env = dict(os.environ if base is None else base)
    env["ROS_DOMAIN_ID"] = str(did)
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    fastdds = env.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp") in ("", "rmw_fastrtps_cpp")
    if env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST" and fastdds and not env.get(FASTDDS_PROFILE_ENV):
        env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "SUBNET"
        env[FASTDDS_PROFILE_ENV] = str(fastdds_profile_path("fastdds_localhost"))
    env["PYTHONUNBUFFERED"] = "1"
    # the children import this very checkout of the package (also when it is not pip-installed)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


class Processes:
    """Child processes of a graph, each in its own process group; :meth:`stop`
    ends them all (SIGINT, then SIGTERM, then SIGKILL)."""

    def __init__(self, specs: list[NodeSpec], env: dict, log_dir: Path):
        self.procs: list[tuple[NodeSpec, subprocess.Popen, Path]] = []
        log_dir.mkdir(parents=True, exist_ok=True)
        try:
            for spec in specs:
                log = log_dir / f"{spec.name}.log"
                with open(log, "wb") as out:
                    p = subprocess.Popen(
                        spec.cmdline(), env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
                    )
                self.procs.append((spec, p, log))
        except BaseException:
            self.stop()
            raise

    def dead(self) -> list[str]:
        return [f"{s.name} (exit {p.returncode}): {_tail(log)}" for s, p, log in self.procs if p.poll() is not None]

    def stop(self, timeout: float = 5.0) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            alive = [p for _, p, _ in self.procs if p.poll() is None]
            if not alive:
                return
            for p in alive:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, sig)
            deadline = time.monotonic() + timeout
            for p in alive:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(max(0.0, deadline - time.monotonic()))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def _tail(path: Path, n: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


def run_graph(
    robot: str = "talos",
    lockstep: bool = True,
    duration: float = 10.0,
    cmd_vel: float = 0.0,
    params_file: str | None = None,
    timeout: float | None = None,
    log_dir: str | None = None,
    estimator: bool = False,
    *,
    pushes: Sequence[tuple[float, str, Sequence[float]]] = (),
    stop_at: float | None = None,
    stop_on_fall: bool = True,
    bridge_params: dict | None = None,
    walker_params: dict | None = None,
    controller_params: dict | None = None,
    watch: bool = False,
    walker: bool = True,
) -> dict:
    """Run the simulation graph for ``duration`` [s] of simulated time, walking at
    ``cmd_vel`` [m/s] (forward) from the start; returns the run summary.

    The bridge starts paused; the driver (this process) sends /cmd_vel until the
    walker has taken it, then un-pauses: in lockstep the run is deterministic.

    What a user of the graph can do, at exact simulated times (for the scenario suite,
    :func:`whole_body_control.runs.scenarios.run_through_ros`):

    * ``pushes``: ``(t [s], body ('' = torso), force [N] (world))`` sent on /sim/push
      before the start, stamped ``t``: the bridge applies each for its ``push_duration``;
    * ``stop_at`` [s]: the bridge pauses itself there (its ``pause_at``), the driver sends
      a zero /cmd_vel, waits for the walker to take it and resumes (the walker applies it
      from its next batch of samples: the walk ends with a closing step);
    * ``bridge_params``, ``walker_params``, ``controller_params``: see :func:`sim_graph`;
    * ``stop_on_fall``: end at the bridge's first fall (otherwise run to ``duration``);
    * ``walker`` False: no walker node, the controller holds its standing reference (as
      ``wbc stand`` in-process); no ``cmd_vel`` or ``stop_at`` then.

    ``watch`` adds what the driver heard: ``controller`` (the last
    /whole_body_controller/diagnostics, sent after the end; ``damping_seen``: a status
    ``damping`` in any of them), ``walker`` (the last /walker/status), ``footsteps``
    (every planned footstep ``{"t", "position"}``: its last plan in /walker/footsteps,
    ``t`` the touchdown stamp [s]) and ``states`` (``{stamp_ns: q}``, Pinocchio
    order, from /ground_truth/odom and /joint_states: the first, the last and the first
    at or after each footstep's touchdown).
    """
    import rclpy
    from geometry_msgs.msg import Twist, WrenchStamped
    from nav_msgs.msg import Odometry
    from nav_msgs.msg import Path as PathMsg
    from rclpy.node import Node
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Bool, String

    from whole_body_control.ros import conversions as cv

    if not walker and (cmd_vel or stop_at is not None):
        raise ValueError("run_graph: cmd_vel and stop_at need the walker")
    bridge_params = dict(bridge_params or {})
    if stop_at is not None:
        bridge_params["pause_at"] = float(stop_at)
    specs = sim_graph(
        robot,
        lockstep,
        params_file,
        walker=walker,
        estimator=estimator,
        end_time=duration,
        start_paused=True,
        bridge_params=bridge_params,
        walker_params=walker_params,
        controller_params=controller_params,
    )
    timeout = timeout if timeout is not None else 120.0 + duration * (60.0 if lockstep else 3.0)
    logs = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="wbc_launch_"))
    seen: dict = {"sim": None, "walker": None, "controller": None, "damping_seen": False}
    planned: dict[int, list[float]] = {}  # touchdown stamp [ns] -> planned sole position
    raw: dict[str, dict[int, bytes]] = {"js": {}, "odom": {}}
    with domain_id() as did:
        env = graph_env(did)
        os.environ.update({k: env[k] for k in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")})
        context = rclpy.Context()
        rclpy.init(context=context, domain_id=did)
        procs = Processes(specs, env, logs)
        node = None
        fifo = False
        try:
            node = Node("wbc_launch_driver", context=context)
            executor = rclpy.executors.SingleThreadedExecutor(context=context)
            executor.add_node(node)
            if lockstep and (bridge_params or {}).get("realtime_priority", LOCKSTEP_PRIORITY) > 0:
                # the driver hears every state and footstep plan (watch) and takes part in the
                # stop handshake: under the normal scheduler, beside a graph at SCHED_FIFO, it
                # lost messages, and the same run (the same commands to the bit) gave other
                # figures (push_inward_ss: 7 or 8 landings, footstep error 0.1 to 14 cm)
                fifo = _driver_priority(node, LOCKSTEP_PRIORITY + 1)
            node.create_subscription(String, "/sim/status", lambda m: seen.__setitem__("sim", json.loads(m.data)), 10)
            node.create_subscription(
                String, "/walker/status", lambda m: seen.__setitem__("walker", json.loads(m.data)), 10
            )
            if watch:

                def on_diag(m):
                    d = json.loads(m.data)
                    seen["controller"] = d
                    seen["damping_seen"] |= d.get("status") == "damping"

                def on_path(m):
                    # the walker sends every step landing after the path's stamp: a planned
                    # touchdown after it that is not in the message was replanned (a stop
                    # replans the end, step timing adaptation moves a touchdown)
                    steps = {cv.stamp_to_ns(p.header.stamp): p.pose.position for p in m.poses}
                    made = cv.stamp_to_ns(m.header.stamp)
                    for k in [k for k in planned if k > made and k not in steps]:
                        del planned[k]
                    for k, p in steps.items():
                        planned[k] = [p.x, p.y, p.z]

                depth = 1000
                node.create_subscription(String, "/whole_body_controller/diagnostics", on_diag, 10)
                node.create_subscription(PathMsg, "/walker/footsteps", on_path, 10)
                for key, typ, topic in (("js", JointState, "/joint_states"), ("odom", Odometry, GROUND_TRUTH)):
                    node.create_subscription(
                        typ,
                        topic,
                        lambda d, key=key: raw[key].__setitem__(cv.cdr_stamp_ns(d), d),
                        depth,
                        raw=True,
                    )
            cmd_pub = node.create_publisher(Twist, "/cmd_vel", 10)
            pause_pub = node.create_publisher(Bool, "/sim/pause", 10)
            push_pub = node.create_publisher(WrenchStamped, "/sim/push", 10)
            twist = Twist()
            twist.linear.x = float(cmd_vel)
            t_start = time.monotonic()

            def check(what: str):
                dead = procs.dead()
                if dead:
                    raise RuntimeError(f"{what}: node(s) exited: " + "; ".join(dead))
                if time.monotonic() - t_start > timeout:
                    raise TimeoutError(f"{what}: no result after {timeout:.0f} s (logs in {logs})")

            def spin_for(seconds: float):
                end = time.monotonic() + seconds
                while time.monotonic() < end:
                    executor.spin_once(timeout_sec=0.05)

            def command(vx: float, what: str):
                """Send /cmd_vel ``vx`` until the walker has taken it."""
                msg = Twist()
                msg.linear.x = float(vx)
                while True:
                    check(what)
                    cmd_pub.publish(msg)
                    w = seen["walker"]
                    if w is not None and abs(w["cmd_vel"][0] - float(vx)) < 1e-12:
                        return
                    executor.spin_once(timeout_sec=0.1)

            # 1. the walker has the command and every node is up
            commands = f"/{'effort_controller'}/commands"
            while True:
                check("start-up")
                cmd_pub.publish(twist)
                w = seen["walker"]
                ready = (
                    (
                        not walker
                        or w is not None
                        and abs(w["cmd_vel"][0] - float(cmd_vel)) < 1e-12
                        and node.count_subscribers("/walker/reference") > 0
                    )
                    and node.count_publishers(commands) > 0
                    and node.count_subscribers("/sim/pause") > 0
                    and (not pushes or node.count_subscribers("/sim/push") > 0)
                )
                if ready:
                    break
                executor.spin_once(timeout_sec=0.1)
            for t, body, force in pushes:
                msg = WrenchStamped()
                msg.header.stamp = cv.ns_to_stamp(cv.seconds_to_ns(t))
                msg.header.frame_id = body
                msg.wrench.force.x, msg.wrench.force.y, msg.wrench.force.z = (float(f) for f in force)
                push_pub.publish(msg)
                spin_for(0.1)  # one at a time: the bridge's /sim/push queue keeps the last 10
            if pushes:
                spin_for(1.0)  # the pushes are queued in the bridge before the clock runs
            # 2. run
            pause_pub.publish(Bool(data=False))
            wall0 = time.monotonic()
            first = None
            stopped = stop_at is None
            while True:
                check("run")
                executor.spin_once(timeout_sec=0.1)
                s = seen["sim"]
                if s is None or (s["paused"] and not stopped and s["time"] < stop_at - 1e-9):
                    if time.monotonic() - wall0 > 5.0:  # the un-pause was lost, or the status
                        pause_pub.publish(Bool(data=False))
                        wall0 = time.monotonic()
                    if s is None:
                        continue
                if first is None:
                    first = s
                if not stopped and s["paused"] and s["time"] >= stop_at - 1e-9:
                    spin_for(1.0)  # the walker has handled every state before the pause
                    command(0.0, "stop")
                    stopped = True
                    seen["sim"] = None
                    pause_pub.publish(Bool(data=False))
                    wall0 = time.monotonic()
                    continue
                if s["finished"] or (s["fell"] and stop_on_fall):
                    break
            final = seen["sim"]
            if watch:  # the controller's diagnostics after the last command (wall-clock timer)
                seen["controller"] = None
                end = time.monotonic() + 5.0
                while seen["controller"] is None and time.monotonic() < end:
                    executor.spin_once(timeout_sec=0.1)
        finally:
            if node is not None:
                node.destroy_node()
            rclpy.shutdown(context=context)
            procs.stop()
            if fifo:
                _driver_priority(None, 0)
    x0, y0 = first["base_pose"][:2] if first else (0.0, 0.0)
    pose = final["base_pose"]
    summary = {
        "robot": robot,
        "mode": "lockstep" if lockstep else "realtime",
        "duration_s": final["time"],
        "cmd_vel_mps": cmd_vel,
        "fell": final["fell"],
        "fall_reason": final["fall_reason"],
        "distance_m": math.hypot(pose[0] - x0, pose[1] - y0),
        "control_rate_hz": final["control_rate_hz"],
        "real_time_factor": final["real_time_factor"],
        "deadline_misses": final["deadline_misses"],
        "deadline_miss_times_s": final["deadline_miss_times_s"],
        "rejected_commands": final["rejected_commands"],
        "round_trip_ms_median": final["round_trip_ms_median"],
        "round_trip_ms_p99": final["round_trip_ms_p99"],
        "final_base_pose": pose,
        "ros_domain_id": did,
        "logs": str(logs),
    }
    if watch:
        footsteps = [
            {"t": k * 1e-9, "position": p} for k, p in sorted(planned.items()) if k <= cv.seconds_to_ns(final["time"])
        ]
        stamps = sorted(set(raw["js"]) & set(raw["odom"]))
        wanted = set(stamps[:1] + stamps[-1:])
        for f in footsteps:
            after = [k for k in stamps if k >= cv.seconds_to_ns(f["t"])]
            if after:
                wanted.add(after[0])
        reader = cv.JointStateReader(_robot_joint_names(robot))
        states = {}
        for k in sorted(wanted):
            qj, vj, missing = reader.read(deserialize_message(raw["js"][k], JointState))
            qb, vb = cv.base_from_odometry(deserialize_message(raw["odom"][k], Odometry))
            states[k] = cv.assemble_state(qb, vb, qj, vj)[0].tolist()
        summary.update(
            controller={**(seen["controller"] or {}), "damping_seen": seen["damping_seen"]},
            walker=seen["walker"],
            footsteps=footsteps,
            states=states,
        )
    return summary


def _robot_joint_names(robot: str) -> list[str]:
    from whole_body_control.robot import load_robot

    return list(load_robot(robot).joint_names)


# -- the CLI ---------------------------------------------------------------------------------------


def _interrupt(*_):
    raise KeyboardInterrupt


def _period_params(control_period: float | None) -> dict:
    """``run_graph`` keyword arguments setting every node's control period [s] (None: the
    parameter file's)."""
    if control_period is None:
        return {}
    if not (math.isfinite(control_period) and control_period > 0):
        print(f"wbc launch: --control-period must be finite and > 0 [s], got {control_period}", file=sys.stderr)
        raise SystemExit(2)
    p = {"control_period": float(control_period)}
    return {"bridge_params": p, "walker_params": p, "controller_params": p}


def cmd_launch(args) -> int:
    signal.signal(signal.SIGTERM, _interrupt)  # children are stopped by run_graph's finally
    summary = run_graph(
        robot=args.robot,
        lockstep=args.lockstep,
        duration=args.duration,
        cmd_vel=args.cmd_vel,
        params_file=args.params_file,
        timeout=args.timeout,
        log_dir=args.logs,
        estimator=args.estimator,
        **_period_params(args.control_period),
    )
    if args.json:
        print(json.dumps(summary))
    else:
        width = max(len(k) for k in summary)
        for key, value in summary.items():
            print(f"{key:<{width}}  {value}")
    return 1 if summary["fell"] else 0


def register(subparsers) -> None:
    """``wbc launch sim ...``: the simulation graph with real rclpy, one process per node."""
    from whole_body_control.arguments import number

    p = subparsers.add_parser("launch", help="run a ROS 2 node graph with rclpy, one process per node")
    lsub = p.add_subparsers(dest="graph", required=True)
    s = lsub.add_parser("sim", help="mujoco_bridge + zmp_walker + whole_body_controller")
    s.add_argument(
        "--robot", default="talos", help="robot name (config/robots/<name>.yaml) or the path of a robot YAML"
    )
    s.add_argument("--lockstep", action="store_true", help="one control period per command (deterministic)")
    s.add_argument("--duration", type=number(gt=0.0, unit="[s]"), default=10.0, help="simulated time [s]")
    s.add_argument("--cmd-vel", type=number(unit="[m/s]"), default=0.0, help="forward /cmd_vel from the start [m/s]")
    s.add_argument("--params-file", default=None, help="parameter YAML (default config/ros/sim.yaml)")
    s.add_argument("--estimator", action="store_true", help="estimate the base in the controller (IMU, legs, foot F/T)")
    s.add_argument(
        "--control-period",
        type=float,
        default=None,
        help="control period of every node [s] (default: the parameter file's, 0.001)",
    )
    s.add_argument("--timeout", type=number(gt=0.0, unit="[s]"), default=None, help="wall-clock limit [s]")
    s.add_argument("--logs", default=None, help="directory for the nodes' logs")
    s.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    s.set_defaults(func=cmd_launch)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="wbc")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
