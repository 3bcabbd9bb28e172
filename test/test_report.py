"""Run reports: a short closed-loop stand writes the documented bag, plots, video and index."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from rosbags.rosbag2 import Reader
from rosbags.typesys import Stores, get_typestore

from whole_body_control.robot import load_robot
from whole_body_control.runs import report
from whole_body_control.runs.mcap_log import TOPICS, read_topics
from whole_body_control.runs.progress import Progress
from whole_body_control.runs.runner import run_stand

DOC = Path(__file__).resolve().parents[1] / "docs" / "report.md"
WALK_ONLY = {"/zmp_ref", "/footsteps", "/footsteps/markers"}


def documented_topics() -> dict[str, str]:
    """``{topic: type}`` from the topic table of docs/report.md."""
    topics = {}
    for line in DOC.read_text().splitlines():
        m = re.match(r"\| (`/[^|]+) \| ([a-z_]+/msg/\w+) \|", line)
        if m:
            for name in re.findall(r"`(/[^`]+)`", m.group(1)):
                topics[name] = m.group(2)
    return topics


@pytest.fixture(scope="module")
def stand_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    with report.options(video_fps=10.0, video_size=(320, 240)):
        summary = run_stand(load_robot("talos"), 0.6, out_dir=out)
    return out, summary


def test_documented_topics_are_the_logged_ones():
    assert documented_topics() == TOPICS


def test_bag_holds_the_documented_topics_and_types(stand_report):
    out, summary = stand_report
    assert not summary["fell"]
    assert (out / "bag" / "metadata.yaml").is_file()
    assert list((out / "bag").glob("*.mcap"))
    topics = read_topics(out / "bag")
    expected = {t: ty for t, ty in documented_topics().items() if t not in WALK_ONLY}
    assert {t: ty for t, (ty, _) in topics.items()} == expected
    n = 0.6 / 0.001 / 5  # recorded every 5th tick
    for topic, (_, count) in topics.items():
        assert count == pytest.approx(n, abs=1), topic


def test_bag_messages_carry_the_run(stand_report):
    out, _ = stand_report
    robot = load_robot("talos")
    ts = get_typestore(Stores.ROS2_KILTED)
    seen = {}
    with Reader(out / "bag") as reader:
        stamps = [t for _, t, _ in reader.messages()]
        for conn, t, raw in reader.messages():
            seen[conn.topic] = (t, ts.deserialize_cdr(raw, conn.msgtype))  # the last one
    assert stamps == sorted(stamps)
    js = seen["/joint_states"][1]
    assert list(js.name) == list(robot.joint_names)
    assert len(js.position) == len(js.velocity) == len(js.effort) == robot.na
    assert np.all(np.isfinite(js.effort))
    odom = seen["/ground_truth/odom"][1]
    assert odom.header.frame_id == "world"
    assert 0.5 < odom.pose.pose.position.z < 1.5
    # standing (at the end): the feet carry the weight
    fz = seen["/left_foot/wrench"][1].wrench.force.z + seen["/right_foot/wrench"][1].wrench.force.z
    assert fz == pytest.approx(9.81 * robot.mass, rel=0.1)
    diag = json.loads(seen["/wbc/diagnostics"][1].data)
    assert diag["status"] == "ok" and diag["solve_time_ms"] > 0 and len(diag["residuals"]) == len(diag["levels"])
    assert len(seen["/effort_commands"][1].data) == robot.na


def test_plots_video_and_index(stand_report):
    out, _ = stand_report
    for name in ("top_view", "tracking", "torques", "solve_time"):
        assert (out / f"{name}.png").stat().st_size > 1000, name
    videos = list(out.glob("run.*"))
    assert videos and videos[0].stat().st_size > 1000
    page = (out / "index.html").read_text()
    for target in ("bag/bag.mcap", "top_view.png", "tracking.png", "torques.png", "solve_time.png", videos[0].name):
        assert f'"{target}"' in page, target
    data = np.load(out / "timeseries.npz")
    assert len(data["t"]) == len(data["solve_ms"]) == len(data["loaded"])


def test_progress_bar_only_on_a_terminal():
    class Stream:
        def __init__(self, tty):
            self.tty, self.text = tty, ""

        def isatty(self):
            return self.tty

        def write(self, s):
            self.text += s

        def flush(self):
            pass

    quiet, shown = Stream(False), Stream(True)
    for stream in (quiet, shown):
        bar = Progress(2.0, stream=stream)
        bar(1.0)
        bar.close()
    assert quiet.text == ""
    assert "1.00/2.00 s" in shown.text and shown.text.endswith("\n")


def test_recorder_keeps_extra_signals_of_kept_ticks():
    rec = report.Recorder(robot=None, every=3)
    for k in range(7):
        rec.add(t=k * 0.001, a=k)
        rec.add(b=k)
    data = rec.arrays()
    assert data["a"].tolist() == data["b"].tolist() == [0, 3, 6]
