"""How long this machine's CPUs stop running a real-time loop (benchmark, not a test).

One process per CPU, pinned to it under SCHED_FIFO (priority 90, above every node of
the graph: only interrupts, the kernel's own real-time threads and, on a virtual
machine, the hypervisor can take the CPU from it), reads the clock in a loop and
records every gap longer than ``--min-gap``.  It runs in bursts of 0.8 s with 0.2 s
of sleep, below the kernel's real-time throttling (95 % of each second).  A gap here
is a stall no node can avoid: a 500 Hz loop misses its deadline when one lasts more
than what is left of its 2 ms period.  The hypervisor's share is also in /proc/stat's
``steal`` column, printed beside.

    python bench/cpu_stalls.py [--duration 20] [--min-gap 0.3] [--priority 90]

Prints a table (per CPU: gaps over 0.5, 1 and 2 ms, the largest, and how many were
at the same time on every CPU), then a JSON line.  Run it on a quiet machine: any
other real-time process above priority 90 counts as a stall.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import time

import _common

BURST = 0.8  # [s] busy, then PAUSE asleep
PAUSE = 0.2


def _loop(cpu: int, duration: float, min_gap: float, priority: int, out) -> None:
    os.sched_setaffinity(0, {cpu})
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
        policy = f"SCHED_FIFO {priority}"
    except OSError as exc:
        policy = f"normal scheduler (SCHED_FIFO refused: {exc.strerror})"
    clock = time.perf_counter_ns
    limit = int(min_gap * 1e6)
    gaps: list[tuple[int, int]] = []  # (start [ns], length [ns])
    busy = 0
    end = clock() + int(duration * 1e9)
    while clock() < end:
        burst_end = min(end, clock() + int(BURST * 1e9))
        start = last = clock()
        while last < burst_end:
            now = clock()
            if now - last > limit:
                gaps.append((last, now - last))
            last = now
        busy += last - start
        time.sleep(PAUSE)
    out.put((cpu, policy, busy, gaps))


def _steal() -> int | None:
    """The hypervisor's steal time of all CPUs [ns] (/proc/stat, in USER_HZ ticks)."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        return int(fields[8]) * 1_000_000_000 // os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def main() -> None:
    from whole_body_control.runs.bench import versions

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=20.0, help="wall time [s]")
    parser.add_argument("--min-gap", type=float, default=0.3, help="shortest gap recorded [ms]")
    parser.add_argument("--priority", type=int, default=90, help="SCHED_FIFO priority of the loops")
    args = parser.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    queue = multiprocessing.get_context("fork").Queue()
    steal0 = _steal()
    procs = [
        multiprocessing.get_context("fork").Process(
            target=_loop, args=(cpu, args.duration, args.min_gap, args.priority, queue)
        )
        for cpu in cpus
    ]
    for p in procs:
        p.start()
    results = [queue.get() for _ in procs]
    for p in procs:
        p.join()
    steal1 = _steal()
    results.sort()
    # a stall on every CPU at once (the whole virtual machine stopped): overlapping gaps
    spans = [[(s, s + n) for s, n in r[3] if n > 1_000_000] for r in results]
    together = 0
    if len(spans) > 1:
        for a, b in spans[0]:
            if all(any(c < b and a < d for c, d in other) for other in spans[1:]):
                together += 1
    rows = []
    for cpu, policy, busy, gaps in results:
        lengths = [n * 1e-6 for _, n in gaps]
        minutes = busy * 1e-9 / 60.0
        rows.append(
            {
                "cpu": cpu,
                "policy": policy,
                "looped_s": round(busy * 1e-9, 2),
                "gaps_over_0.5ms": sum(x > 0.5 for x in lengths),
                "gaps_over_1ms": sum(x > 1.0 for x in lengths),
                "gaps_over_2ms": sum(x > 2.0 for x in lengths),
                "per_minute_over_1ms": round(sum(x > 1.0 for x in lengths) / minutes, 1) if minutes > 0 else None,
                "max_gap_ms": round(max(lengths), 2) if lengths else 0.0,
                "largest_ms": [round(x, 2) for x in sorted(lengths, reverse=True)[:8]],
            }
        )
    _common.print_table(
        rows,
        ["cpu", "looped_s", "gaps_over_0.5ms", "gaps_over_1ms", "gaps_over_2ms", "per_minute_over_1ms", "max_gap_ms"],
    )
    steal = None if steal0 is None or steal1 is None else (steal1 - steal0) * 1e-6
    print(f"stalls over 1 ms on every CPU at once: {together}; steal time (/proc/stat): {steal} ms")
    print(f"loops under {rows[0]['policy']}")
    print(
        json.dumps(
            {
                "duration_s": args.duration,
                "min_gap_ms": args.min_gap,
                "cpus": rows,
                "simultaneous_over_1ms": together,
                "steal_ms": steal,
                "load_average": os.getloadavg(),
                "versions": versions(),
            }
        )
    )


if __name__ == "__main__":
    main()
