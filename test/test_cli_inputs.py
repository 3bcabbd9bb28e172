"""Bad inputs to the command line: each is exit code 2 with a message naming the file,
key, link, joint or flag and the allowed range, never a Python traceback.

The commands run as subprocesses, as a user runs them."""

import re
import subprocess
import sys
from pathlib import Path

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
