"""The control stage's solves in a second process (``StageConfig.solve_worker = "process"``).

Why a process: in a second thread the whole-body QP (about 1 ms of Python and
small numpy calls every few periods) holds the GIL while a joint state arrives.
The command loop then waits for the GIL on every callback: measured in the ROS
graph at 1 kHz, lockstep ran at the same rate with or without the thread, and in
real time a state waited 0.1 to 0.3 ms before its command went out.  A process
shares nothing with the command loop, and it can run under a lower scheduling
priority: a real-time command loop preempts it, which a thread sharing its GIL
cannot do (the ROS nodes' ``realtime_priority`` puts it one below the node's).

The worker process holds its own :class:`~whole_body_control.control_stage.ControlStage`
(controller, estimator, lift detector); the caller's stage keeps the supervisor,
the plans and the commands.  Every solve, foreground (arming, an expired plan) or
background (a due plan), runs in the worker in the order the caller asks for it,
so that a lockstep run is reproducible to the bit and gives what one process gives
(checked by the tests).  Before each solve the caller's stage sends what the
worker's stage must know (armed, re-seed, a time reset); the reply carries the
command or plan and what the solve changed (events, arming, lift, estimate).

Messages go through a pipe (pickled: 10 to 30 us a way; the robot model once, at
the start).  The process is started with ``spawn`` (a fork of a process running DDS threads is not safe),
ignores SIGINT (the caller's Ctrl-C ends the caller, whose exit closes the pipe)
and ends when the pipe closes.  It inherits the caller's scheduling at its start.
"""

from __future__ import annotations

import multiprocessing
import time

from whole_body_control.errors import WbcError

SLOW_SOLVE_S = 0.01  # [s] a solve whose wall time is longer is kept in SolveProcess.slow


class SolveProcess:
    """The worker process, seen from the caller's stage: the interface of the stage's
    solve thread: ``submit``, ``done``, ``collect``, ``wait``, ``call``, ``apply``,
    ``close`` and ``error``.

    Args:
        robot, wbc_config, config: what the worker builds its stage from (the caller's;
            the worker's stage solves in its own loop, it has no worker of its own).
        sync: ``() -> tuple`` what the worker's stage must know before a solve.
        absorb: ``(reply) -> Command | None`` applies a reply to the caller's stage.
    """

    arms_in_background = True  # real time: the arming solve's reply is absorbed by collect

    def __init__(self, robot, wbc_config, config, sync, absorb) -> None:
        from dataclasses import replace

        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._sync = sync
        self._absorb = absorb
        self._busy = False
        self._ready = False
        self.error: BaseException | None = None
        # the worker's own timing of its solves (wall and CPU time [s]): the caller reads and
        # clears ``slow`` and ``max_wall``; a slow solve whose CPU time is short was not run
        self.max_wall = 0.0
        self.slow: list[tuple[float, float]] = []  # over SLOW_SOLVE_S (at most 100 kept)
        inner = replace(config, solve_worker="none")
        self._process = ctx.Process(
            target=_serve, args=(child, robot, wbc_config, inner), name="wbc-solve", daemon=True
        )
        self._process.start()
        child.close()

    def _receive(self):
        """The next reply (blocking), checked; a dead worker is an error."""
        try:
            kind, payload, *timing = self._conn.recv()
        except (EOFError, OSError) as exc:
            raise WbcError(f"the solve process ended (exit code {self._process.exitcode})") from exc
        if kind == "error":
            raise payload
        if timing:
            wall, cpu = timing[0]
            self.max_wall = max(self.max_wall, wall)
            if wall > SLOW_SOLVE_S and len(self.slow) < 100:
                self.slow.append((wall, cpu))
        return payload

    def start(self) -> None:
        """Wait until the worker has built its stage."""
        if not self._ready:
            self._receive()  # the worker's stage is built ("ready")
            self._ready = True

    def ready(self) -> bool:
        """Whether the worker has built its stage (never blocks; it takes about a second)."""
        if not self._ready and self._conn.poll():
            self.start()
        return self._ready

    def _send_solve(self, job: tuple) -> None:
        self.start()
        self._conn.send(("solve", *job, self._sync()))

    def submit(self, job: tuple) -> bool:
        """Start a background solve ``(obs, reference, generation)`` unless one runs."""
        if self._busy:
            return False
        self._send_solve(job)
        self._busy = True
        return True

    def _finish(self) -> None:
        self._busy = False
        try:
            self._absorb(self._receive())
        except Exception as exc:  # noqa: BLE001 - reported to the stage, which damps
            self.error = exc

    def done(self) -> bool:
        """Whether the background solve's reply was taken in (by ``collect`` or ``wait``)."""
        return not self._busy

    def collect(self) -> None:
        """Take in the background solve's reply if it has come (never blocks)."""
        if self._busy and self._conn.poll():
            self._finish()

    def wait(self) -> None:
        if self._busy:
            self._finish()

    def call(self, job: tuple):
        """A foreground solve (the worker is idle): its command, as the stage's would be."""
        self._send_solve(job)
        return self._absorb(self._receive())

    def apply(self, changes: list[tuple]) -> None:
        """The caller's runtime changes, applied in the worker before its next solve."""
        self._conn.send(("apply", changes))

    def close(self) -> None:
        if self._process.is_alive():
            try:
                self._conn.send(("stop",))
            except OSError:
                pass
            self._process.join(timeout=2.0)
            if self._process.is_alive():
                self._process.kill()
        self._conn.close()


def freeze_startup_objects() -> None:
    """After a process (a node, this worker) has built its model: collect once and move every
    object left into the collector's permanent generation.  Python's full collection then
    skips them: in the 1 kHz controller node it took 24 ms (about one state in 20 s left
    without a command), the startup objects (Pinocchio, the QP, rclpy) being most of the heap."""
    import gc

    gc.collect()
    gc.freeze()


def warm_up(robot, wbc_config, config, solves: int = 3) -> None:
    """A few solves of a throwaway stage, standing at the reference posture: a process's
    first solve pays for first calls (LAPACK, the QP solver, NumPy's dispatch), 0.5 to 2 ms
    more than the next ones, and the stage that serves the robot should not pay them on
    the robot's first state."""
    import numpy as np

    from whole_body_control.control_stage import ControlStage, Observation

    stage = ControlStage(robot, wbc_config, config)
    q = robot.q_ref
    imu = (q[3:7].copy(), np.zeros(3), np.array([0.0, 0.0, 9.81]))
    for k in range(solves):
        obs = Observation(k * stage.period_ns, q[7:].copy(), np.zeros(robot.na), (), imu, (q[:7].copy(), np.zeros(6)))
        stage.cycle(obs)
        stage.finish()
    stage.close()


def _serve(conn, robot, wbc_config, config) -> None:
    """The worker process: build the stage, then answer solves until the pipe closes."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from whole_body_control.control_stage import ControlStage

    try:
        stage = ControlStage(robot, wbc_config, config)
        warm_up(robot, wbc_config, config)
    except Exception as exc:  # noqa: BLE001 - the caller raises it
        conn.send(("error", exc))
        return
    freeze_startup_objects()
    conn.send(("ready", None))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        kind = message[0]
        if kind == "stop":
            return
        if kind == "apply":
            try:
                stage.apply(message[1])
            except Exception:  # noqa: BLE001, S112 - the caller applies the same changes and raises it
                pass
            continue
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            reply = stage.serve(*message[1:])
        except Exception as exc:  # noqa: BLE001 - the caller's stage damps on it
            conn.send(("error", exc))
            continue
        conn.send(("ok", reply, (time.perf_counter() - wall, time.thread_time() - cpu)))
