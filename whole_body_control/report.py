"""Run reports: a per-tick recorder and the files it writes (summary, time series, plots, index page)."""

from __future__ import annotations

import html
import json
from pathlib import Path

import numpy as np


class Recorder:
    """Collects per-tick signals; ``write(out_dir, summary)`` saves them."""

    def __init__(self, robot, every: int = 1):
        self.robot = robot
        self.every = every
        self._k = 0
        self.rows: dict[str, list] = {}

    def add(self, **signals) -> None:
        self._k += 1
        if (self._k - 1) % self.every:
            return
        for key, value in signals.items():
            self.rows.setdefault(key, []).append(np.array(value, dtype=float, copy=True))

    def arrays(self) -> dict[str, np.ndarray]:
        return {k: np.array(v) for k, v in self.rows.items()}

    def write(self, out_dir: Path, summary: dict) -> dict[str, str]:
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        files = {"summary": "summary.json", "timeseries": "timeseries.npz"}
        (out_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        data = self.arrays()
        np.savez_compressed(out_dir / "timeseries.npz", **data)
        files.update(self._plots(out_dir, data))
        (out_dir / "index.html").write_text(_index_page(summary, files))
        files["index"] = "index.html"
        return files

    def _plots(self, out_dir: Path, data: dict[str, np.ndarray]) -> dict[str, str]:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        files = {}
        t = data.get("t")
        if t is None:
            return files
        if "com" in data and "com_ref" in data:
            fig, ax = plt.subplots(figsize=(6, 6))
            ax.plot(data["com_ref"][:, 0], data["com_ref"][:, 1], "k--", label="CoM reference")
            ax.plot(data["com"][:, 0], data["com"][:, 1], "b", label="CoM")
            if "zmp" in data:
                z = data["zmp"]
                ok = np.isfinite(z[:, 0])
                ax.plot(z[ok, 0], z[ok, 1], "r.", ms=1, alpha=0.4, label="ZMP (measured)")
            for key, style in (("left_sole", "g"), ("right_sole", "m")):
                if key + "_corners" in data:
                    corners = data[key + "_corners"]
                    for c in corners[:: max(1, len(corners) // 40)]:
                        ax.fill(c[:, 0], c[:, 1], style, alpha=0.05)
            ax.set_aspect("equal")
            ax.set_xlabel("x [m]")
            ax.set_ylabel("y [m]")
            ax.legend(loc="best", fontsize=8)
            ax.set_title("Top view")
            fig.tight_layout()
            fig.savefig(out_dir / "top_view.png", dpi=110)
            plt.close(fig)
            files["top_view"] = "top_view.png"
            fig, ax = plt.subplots(figsize=(7, 3.5))
            ax.plot(t, np.linalg.norm(data["com"] - data["com_ref"], axis=1) * 1e3)
            ax.set_xlabel("t [s]")
            ax.set_ylabel("|CoM error| [mm]")
            fig.tight_layout()
            fig.savefig(out_dir / "com_error.png", dpi=110)
            plt.close(fig)
            files["com_error"] = "com_error.png"
        if "tau" in data:
            fig, ax = plt.subplots(figsize=(7, 3.5))
            ratio = np.abs(data["tau"]) / self.robot.tau_max
            ax.plot(t, ratio, lw=0.6)
            ax.axhline(1.0, color="k", ls="--")
            ax.set_xlabel("t [s]")
            ax.set_ylabel("|tau| / tau_max [-]")
            fig.tight_layout()
            fig.savefig(out_dir / "torques.png", dpi=110)
            plt.close(fig)
            files["torques"] = "torques.png"
        if "tick_ms" in data:
            fig, ax = plt.subplots(figsize=(6, 3.5))
            ax.hist(data["tick_ms"], bins=80)
            ax.set_xlabel("controller tick [ms]")
            ax.set_ylabel("count")
            ax.set_yscale("log")
            fig.tight_layout()
            fig.savefig(out_dir / "tick_time.png", dpi=110)
            plt.close(fig)
            files["tick_time"] = "tick_time.png"
        return files


def _index_page(summary: dict, files: dict[str, str]) -> str:
    rows = "".join(
        f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(json.dumps(v))}</td></tr>" for k, v in summary.items()
    )
    images = "".join(
        f'<figure><img src="{html.escape(f)}" alt="{html.escape(k)}"><figcaption>{html.escape(k)}</figcaption></figure>'
        for k, f in files.items()
        if f.endswith(".png")
    )
    links = "".join(f'<li><a href="{html.escape(f)}">{html.escape(f)}</a></li>' for f in files.values())
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>wbc run report</title>"
        "<style>body{font-family:sans-serif;margin:2em}th{text-align:left;padding-right:1em}"
        "img{max-width:640px}figure{display:inline-block}</style></head><body>"
        f"<h1>Run report: {html.escape(str(summary.get('robot', '')))}</h1><table>{rows}</table>"
        f"<h2>Plots</h2>{images}<h2>Files</h2><ul>{links}</ul></body></html>\n"
    )
