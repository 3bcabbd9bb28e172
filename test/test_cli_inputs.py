"""Bad inputs to the command line: each is exit code 2 with a message naming the file,
key, link, joint or flag and the allowed range, never a Python traceback.

The commands run as subprocesses, as a user runs them."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from whole_body_control.robot import robots_dir, share_dir

HUMANOID_URDF = share_dir() / "urdf" / "wbc_humanoid.urdf"


def run_cli(*args, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "whole_body_control.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def assert_bad_input(out, *fragments):
    """Exit code 2, no traceback, and every fragment in the message."""
    assert out.returncode == 2, (out.returncode, out.stdout[-2000:], out.stderr[-2000:])
    assert "Traceback" not in out.stderr, out.stderr
    for fragment in fragments:
        assert fragment in out.stderr, (fragment, out.stderr)


def humanoid_yaml(tmp_path: Path, urdf: Path, name: str = "robot.yaml") -> Path:
    """The shipped humanoid's YAML, pointing at ``urdf`` (absolute path)."""
    text = (robots_dir() / "wbc_humanoid.yaml").read_text()
    text = re.sub(r"^urdf: .*$", f"urdf: {urdf}", text, count=1, flags=re.M)
    path = tmp_path / name
    path.write_text(text)
    return path


def edit_link(urdf_text: str, link: str, old: str, new: str) -> str:
    """Replace ``old`` by ``new`` once inside ``<link name="link">``."""
    start = urdf_text.index(f'<link name="{link}">')
    end = urdf_text.index("</link>", start)
    body = urdf_text[start:end]
    assert old in body, (link, old)
    return urdf_text[:start] + body.replace(old, new, 1) + urdf_text[end:]


def test_every_bad_link_inertia_is_reported_at_once_with_a_fix(tmp_path):
    text = HUMANOID_URDF.read_text()
    text = edit_link(text, "torso_link", '<mass value="13" />', '<mass value="-13" />')
    # triangle inequality: 0.041 + 0.017 < 0.436 (a factor-10 typo on izz)
    text = edit_link(text, "pelvis", 'izz="0.0436"', 'izz="0.436"')
    urdf = tmp_path / "bad.urdf"
    urdf.write_text(text)
    out = run_cli("stand", "--robot", humanoid_yaml(tmp_path, urdf), "--duration", "0.1")
    assert_bad_input(
        out,
        str(urdf),
        "2 link(s)",
        "link 'torso_link': mass -13 kg must be >= 0; fix: mass 13",
        "link 'pelvis': principal moments",
        "A + B >= C",
        "ixx = iyy = izz =",
    )


def test_a_moving_link_without_inertia_is_named(tmp_path):
    text = HUMANOID_URDF.read_text()
    # left_hip_yaw_link is on a revolute joint and has no link fixed to it
    start = text.index('<link name="left_hip_yaw_link">')
    inertial = text[text.index("<inertia ", start) : text.index("/>", text.index("<inertia ", start)) + 2]
    text = edit_link(text, "left_hip_yaw_link", inertial, '<inertia ixx="0" ixy="0" ixz="0" iyy="0" iyz="0" izz="0" />')
    urdf = tmp_path / "zero.urdf"
    urdf.write_text(text)
    out = run_cli("stand", "--robot", humanoid_yaml(tmp_path, urdf), "--duration", "0.1")
    assert_bad_input(
        out, str(urdf), "link 'left_hip_yaw_link' (joint 'left_hip_yaw_joint')", "must be > 0", "a 5 cm solid sphere of"
    )


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (("stand", "--duration", "-1"), ("--duration", "> 0 [s]", "-1")),
        (("stand", "--duration", "0"), ("--duration", "> 0 [s]")),
        (("stand", "--timestep", "0"), ("--timestep", "> 0 and <= 0.01 [s]")),
        (("stand", "--push-dv", "nan", "0"), ("--push-dv", "finite", "nan")),
        (("stand", "--push-at", "inf"), ("--push-at", "finite")),
        (("walk", "--friction", "-1"), ("--friction", "> 0")),
        (("walk", "--speed", "nan"), ("--speed", "finite")),
        (("walk", "--steps", "-1"), ("--steps", "an integer >= 0")),
        (("bench", "tick", "--levels", "4"), ("--levels", ">= 1 and <= 3")),
        (("scenarios", "--jobs", "0"), ("--jobs", ">= 1")),
    ],
)
def test_a_number_out_of_range_names_the_flag_and_the_range(args, fragments):
    out = run_cli(*args, timeout=60)
    assert_bad_input(out, *fragments)


def test_a_speed_beyond_the_walker_limit_names_the_limit():
    out = run_cli("walk", "--robot", "g1", "--speed", "5")
    assert_bad_input(
        out,
        "--speed 5 m/s",
        "fast_gait.max_step_length / fast_gait.step_duration = 0.25 m / 0.45 s = 0.556 m/s",
        "robots.g1",
    )
    # beyond the fast gait's maximum too, the message names the file and the key
    out = run_cli("walk", "--robot", "talos", "--speed", "0.7")
    assert_bad_input(out, "--speed 0.7 m/s", "= 0.4 m / 0.6 s = 0.667 m/s", "walker.yaml: robots.talos")


def test_a_wbc_task_on_an_unknown_frame_names_the_file_and_the_key(tmp_path):
    wbc = tmp_path / "wbc.yaml"
    text = (share_dir() / "config" / "wbc.yaml").read_text()
    wbc.write_text(text.replace("frame: torso,", "frame: torsoo_link,", 1))
    out = run_cli("stand", "--robot", "g1", "--wbc-config", wbc, "--duration", "0.1")
    assert_bad_input(out, str(wbc), "levels.motion.tasks.torso.frame", "unknown frame 'torsoo_link'", "torso_link")


def test_a_sole_too_small_for_the_cop_margin_names_both_keys(tmp_path):
    robot = humanoid_yaml(tmp_path, HUMANOID_URDF)
    text = robot.read_text().replace(
        "sole: {x_min: -0.08, x_max: 0.14, y_min: -0.05, y_max: 0.05}",
        "sole: {x_min: -0.0005, x_max: 0.0005, y_min: -0.0005, y_max: 0.0005}",
        1,
    )
    robot.write_text(text)
    out = run_cli("stand", "--robot", robot, "--duration", "0.1")
    assert_bad_input(out, "contacts.cop_margin (0.01 m)", "left_foot.sole", str(robot), "must be < 0.0005 m")
