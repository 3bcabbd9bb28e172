"""Run reports: a per-tick recorder and the files it writes.

``Recorder.write(out_dir, summary)`` writes ``summary.json``, ``timeseries.npz``,
the plots (top view, tracking errors, torques against limits, solve times),
and, from what :meth:`Recorder.log_tick` saw, a ROS 2 bag in MCAP storage
(``bag/``, see :mod:`whole_body_control.runs.mcap_log` and ``docs/report.md``) and a
video (``run.mp4``, see :mod:`whole_body_control.sim.video`); ``index.html`` links them.
What is written besides the summary, time series and plots is chosen by
:class:`ReportOptions`, set for a block of code with :func:`options`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import html
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class ReportOptions:
    """What a run report holds besides the summary, time series and plots."""

    mcap: bool = True  # ROS 2 bag (MCAP) at the recorder's rate
    video: bool = True  # offscreen MuJoCo video
    video_fps: float = 30.0  # [Hz] of simulated time
    video_size: tuple[int, int] = (640, 480)  # (width, height) [px]


_options = ReportOptions()


def current_options() -> ReportOptions:
    return _options


@contextlib.contextmanager
def options(**changes):
    """Recorders created inside the block use ``ReportOptions`` with ``changes``
    (e.g. ``with options(video=False): run_walk(...)``)."""
    global _options
    saved = _options
    _options = dataclasses.replace(saved, **changes)
    try:
        yield _options
    finally:
        _options = saved


class Recorder:
    """Collects per-tick signals; ``write(out_dir, summary)`` saves them.

    Every ``every``-th tick is kept.  A call of :meth:`add` with ``t`` starts a
    tick; calls without ``t`` add more signals to the same tick (kept or not with it).
    """

    def __init__(self, robot, every: int = 1, report_options: ReportOptions | None = None):
        self.robot = robot
        self.every = every
        self.options = report_options or current_options()
        self._k = 0
        self._keep = True
        self._ticked = False
        self._t = 0.0
        self.rows: dict[str, list] = {}
        self.mcap = None
        self.video = None

    def add(self, **signals) -> None:
        if "t" in signals or not self._ticked:
            self._ticked = self._ticked or "t" in signals
            self._k += 1
            self._keep = (self._k - 1) % self.every == 0
            self._t = float(signals.get("t", self._t))
        if not self._keep:
            return
        for key, value in signals.items():
            self.rows.setdefault(key, []).append(np.array(value, dtype=float, copy=True))
        if self.mcap is not None and "t" not in signals:
            self.mcap.signals(self._t, **signals)

    def log_tick(self, t: float, sim, ctrl, result, polygon=None) -> None:
        """The bag and the video see the simulation and the controller (call right
        after the tick's :meth:`add` with ``t``; the bag keeps the same ticks)."""
        if self.options.video:
            if self.video is None:
                from whole_body_control.sim.video import VideoRecorder

                self.video = VideoRecorder(self.options.video_fps, self.options.video_size)
            self.video.tick(t, sim)
        if self.options.mcap and self._keep:
            if self.mcap is None:
                from whole_body_control.runs.mcap_log import McapLog

                self.mcap = McapLog(self.robot)
            self.mcap.tick(t, sim, ctrl, result, polygon)

    def arrays(self) -> dict[str, np.ndarray]:
        return {k: np.array(v) for k, v in self.rows.items()}

    def write(self, out_dir: Path, summary: dict) -> dict[str, str]:
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        files = {"summary": "summary.json", "timeseries": "timeseries.npz"}
        if self.mcap is not None:
            self.mcap.footsteps(summary.get("footsteps") or [])
            mcap_file = self.mcap.write(out_dir / "bag")
            files["mcap"] = str(mcap_file.relative_to(out_dir))
            files["bag_metadata"] = "bag/metadata.yaml"
        if self.video is not None:
            video_file = self.video.write(out_dir / "run")
            if video_file is not None:
                files["video"] = video_file.name
        (out_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        data = self.arrays()
        np.savez_compressed(out_dir / "timeseries.npz", **data)
        files.update(self._plots(out_dir, data, summary))
        (out_dir / "index.html").write_text(_index_page(summary, files))
        files["index"] = "index.html"
        return files

    def _plots(self, out_dir: Path, data: dict[str, np.ndarray], summary: dict) -> dict[str, str]:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        files = {}
        t = data.get("t")
        if t is None or len(t) == 0:
            return files

        def save(fig, name: str) -> None:
            fig.tight_layout()
            fig.savefig(out_dir / f"{name}.png", dpi=110, bbox_inches="tight")
            plt.close(fig)
            files[name] = f"{name}.png"

        if "com" in data and "com_ref" in data:
            extent = np.ptp(data["com"][:, :2], axis=0) + 0.4  # [m], soles around the CoM path
            height = float(np.clip(9.0 * extent[1] / extent[0], 2.0, 8.0))
            fig, ax = plt.subplots(figsize=(9, height + 1.0))
            self._top_view(ax, data, summary.get("footsteps") or [])
            save(fig, "top_view")
            fig, axes = plt.subplots(2, 1, figsize=(7, 5.5), sharex=True)
            axes[0].plot(t, np.linalg.norm(data["com"] - data["com_ref"], axis=1) * 1e3, "b", lw=0.8, label="CoM task")
            if "com_plan" in data and len(data["com_plan"]) == len(t):
                # the walker's plan (in 'dcm' mode the task's horizontal reference is the measured CoM)
                err = np.linalg.norm(data["com"] - data["com_plan"], axis=1) * 1e3
                axes[0].plot(t, err, "k", lw=0.8, label="walker's planned CoM")
            axes[0].set_ylabel("|CoM - reference| [mm]")
            axes[0].legend(loc="best", fontsize=8)
            for side, color in (("left", "g"), ("right", "m")):
                actual = data.get(f"{side}_foot", data.get(f"{side}_sole"))
                if actual is None:
                    continue
                ref = data.get(f"{side}_foot_ref")
                if ref is not None and len(ref) == len(actual):
                    err, label = np.linalg.norm(ref - actual, axis=1), f"{side}: |ref - sole|"
                else:
                    err, label = np.linalg.norm(actual - actual[0], axis=1), f"{side}: |sole - initial| (slip)"
                axes[1].plot(t[: len(err)], err * 1e3, color, lw=0.8, label=label)
            axes[1].set_ylabel("foot error [mm]")
            axes[1].set_xlabel("t [s]")
            axes[1].legend(loc="best", fontsize=8)
            axes[0].set_title("Tracking errors")
            save(fig, "tracking")
        if "tau" in data:
            tau_max = np.asarray(self.robot.tau_max, dtype=float)
            ratio = np.abs(data["tau"]) / tau_max
            fig, axes = plt.subplots(2, 1, figsize=(9, 6.5))
            axes[0].plot(t, ratio, lw=0.5)
            axes[0].axhline(1.0, color="k", ls="--", label="limit")
            axes[0].set_xlabel("t [s]")
            axes[0].set_ylabel("|tau| / tau_max [-]")
            axes[0].set_title("Joint torques against their limits")
            peak = ratio.max(axis=0)
            names = list(self.robot.joint_names)
            axes[1].bar(range(len(peak)), peak, color=["r" if p >= 0.999 else "C0" for p in peak])
            axes[1].axhline(1.0, color="k", ls="--")
            axes[1].set_xticks(range(len(peak)), names, rotation=90, fontsize=6)
            axes[1].set_ylabel("peak |tau| / tau_max [-]")
            save(fig, "torques")
        if "tick_ms" in data:
            fig, ax = plt.subplots(figsize=(7, 3.8))
            tick = data["tick_ms"]
            bins = np.linspace(0.0, max(float(np.percentile(tick, 99.9)) * 1.2, 1e-3), 80)
            if "solve_ms" in data:
                ax.hist(np.clip(data["solve_ms"], 0, bins[-1]), bins=bins, alpha=0.6, label="QP solve (all levels)")
            ax.hist(np.clip(tick, 0, bins[-1]), bins=bins, alpha=0.6, label="controller tick")
            for q, ls in ((50, "-"), (99, "--")):
                ax.axvline(
                    np.percentile(tick, q), color="k", ls=ls, lw=0.8, label=f"tick p{q} {np.percentile(tick, q):.2f} ms"
                )
            ax.set_xlabel("time [ms] (wall)")
            ax.set_ylabel("count")
            ax.set_yscale("log")
            ax.legend(fontsize=8)
            ax.set_title("Solve time")
            save(fig, "solve_time")
        return files

    def _top_view(self, ax, data: dict[str, np.ndarray], footsteps: list[dict]) -> None:
        """CoM (reference and actual), measured ZMP, soles, support polygons, footsteps."""
        from whole_body_control.geometry import convex_hull

        n = len(data["t"])
        every = max(1, n // 40)
        corners = {side: data.get(f"{side}_sole_corners") for side in ("left", "right")}
        loaded = data.get("loaded")
        for i in range(0, n, every):
            pts = []
            for j, side in enumerate(("left", "right")):
                c = corners[side]
                if c is None:
                    continue
                ax.fill(c[i][:, 0], c[i][:, 1], "g" if side == "left" else "m", alpha=0.04)
                if loaded is None or loaded[i][j] > 0.5:
                    pts.append(c[i])
            if pts:
                hull = convex_hull(np.vstack(pts))
                ax.plot(*np.vstack([hull, hull[:1]]).T, color="0.5", lw=0.5, alpha=0.5)
        ax.plot([], [], color="0.5", lw=0.5, label="support polygon (loaded soles)")
        for kind, key, yaw_key, style in (
            ("planned", "planned", "planned_yaw", "--"),
            ("landed", "landed", "landed_yaw", "-"),
        ):
            first = True
            for step in footsteps:
                if key not in step:
                    continue
                sole = self.robot.feet[step["side"]].sole
                c, s = np.cos(step[yaw_key]), np.sin(step[yaw_key])
                R = np.array([[c, -s], [s, c]])
                rect = (R @ sole.corners()[:, :2].T).T + np.asarray(step[key][:2])
                rect = np.vstack([rect, rect[:1]])
                ax.plot(
                    rect[:, 0],
                    rect[:, 1],
                    "k" if kind == "landed" else "orange",
                    ls=style,
                    lw=0.9,
                    label=f"footsteps ({kind})" if first else None,
                )
                first = False
        planned = "com_plan" in data and len(data["com_plan"]) == len(data["com"])
        ref = data["com_plan"] if planned else data["com_ref"]
        ax.plot(ref[:, 0], ref[:, 1], "k--", lw=1, label="CoM plan (walker)" if planned else "CoM reference")
        ax.plot(data["com"][:, 0], data["com"][:, 1], "b", lw=1, label="CoM")
        if "zmp" in data:
            z = data["zmp"]
            ok = np.isfinite(z[:, 0])
            ax.plot(z[ok, 0], z[ok, 1], "r.", ms=1, alpha=0.4, label="ZMP (measured)")
        if "zmp_ref" in data:
            ax.plot(data["zmp_ref"][:, 0], data["zmp_ref"][:, 1], "r-", lw=0.6, alpha=0.6, label="ZMP reference")
        ax.set_aspect("equal")
        ax.set_xlabel("x [m]")
        ax.set_ylabel("y [m]")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=4, fontsize=7)
        ax.set_title("Top view")


def _index_page(summary: dict, files: dict[str, str]) -> str:
    rows = "".join(
        f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(json.dumps(v))}</td></tr>"
        for k, v in summary.items()
        if k != "footsteps"
    )
    video = ""
    if "video" in files:
        f = html.escape(files["video"])
        video = (
            f'<h2>Video</h2><video src="{f}" controls loop width="640"></video>'
            if f.endswith(".mp4")
            else f'<h2>Video</h2><img src="{f}" alt="video">'
        )
    images = "".join(
        f'<figure><img src="{html.escape(f)}" alt="{html.escape(k)}"><figcaption>{html.escape(k)}</figcaption></figure>'
        for k, f in files.items()
        if f.endswith(".png")
    )
    links = "".join(
        f'<li>{html.escape(k)}: <a href="{html.escape(f)}">{html.escape(f)}</a></li>' for k, f in files.items()
    )
    bag = (
        "<p>The ROS 2 bag (<code>bag/</code>, MCAP storage) opens in Foxglove or PlotJuggler, "
        "or with <code>ros2 bag info bag</code>; topics in <code>docs/report.md</code>.</p>"
        if "mcap" in files
        else ""
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>wbc run report</title>"
        "<style>body{font-family:sans-serif;margin:2em}th{text-align:left;padding-right:1em}"
        "img{max-width:640px}figure{display:inline-block}</style></head><body>"
        f"<h1>Run report: {html.escape(str(summary.get('robot', '')))}</h1><table>{rows}</table>"
        f"{video}<h2>Plots</h2>{images}<h2>Files</h2>{bag}<ul>{links}</ul></body></html>\n"
    )
