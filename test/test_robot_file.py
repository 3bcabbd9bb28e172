"""One robot file holds everything robot-specific: a robot YAML outside the project, with
its URDF next to it (a relative path resolves against the YAML), its walker section inside
and its WBC overlay in a file beside it, stands and walks with no edit to the project."""

import json
import shutil
import subprocess
import sys

import pytest

from whole_body_control.robot import robots_dir, share_dir

WALKER_SECTION = """
walker:                  # merged onto the base values of config/walker.yaml
  step_duration: 0.7
  start_duration: 1.2
  stop_duration: 0.8
  max_step_length: 0.20
  max_step_width: 0.30
  min_step_width: 0.12
wbc: wbc_overlay.yaml    # relative to this file
"""


def run_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "whole_body_control.cli", *map(str, args)], capture_output=True, text=True, timeout=600
    )


@pytest.fixture
def robot_dir(tmp_path):
    """The shipped humanoid renamed 'my_humanoid' (no section for it in the project's files)."""
    shutil.copy(share_dir() / "urdf" / "wbc_humanoid.urdf", tmp_path / "my_humanoid.urdf")
    text = (robots_dir() / "wbc_humanoid.yaml").read_text()
    text = text.replace("name: wbc_humanoid", "name: my_humanoid", 1)
    text = text.replace("urdf: ../../urdf/wbc_humanoid.urdf", "urdf: my_humanoid.urdf", 1)
    (tmp_path / "my_humanoid.yaml").write_text(text + WALKER_SECTION)
    (tmp_path / "wbc_overlay.yaml").write_text("contacts: {cop_margin: 0.008}\n")
    return tmp_path


def test_a_robot_file_outside_the_project_stands_and_walks(robot_dir):
    robot = robot_dir / "my_humanoid.yaml"
    out = run_cli("robots", robot, "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)[0]["urdf"] == str(robot_dir / "my_humanoid.urdf")
    out = run_cli("stand", "--robot", robot, "--duration", "1.0", "--json")
    assert out.returncode == 0, out.stderr
    assert not json.loads(out.stdout.splitlines()[-1])["fell"]
    out = run_cli("walk", "--robot", robot, "--steps", "4", "--speed", "0.2", "--json")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout.splitlines()[-1])
    assert not summary["fell"] and summary["steps_completed"] == 4


def test_the_robot_files_sections_are_the_ones_used(robot_dir):
    from whole_body_control.config import wbc_config_for
    from whole_body_control.robot import load_robot
    from whole_body_control.walker_stage import walker_config_for

    robot = load_robot(robot_dir / "my_humanoid.yaml")
    assert wbc_config_for(robot).contacts.cop_margin == 0.008
    config, source = walker_config_for(robot)
    assert config.step_duration == 0.7 and "my_humanoid.yaml: walker" in source


def test_a_walk_without_a_walker_section_says_where_to_add_one(robot_dir):
    robot = robot_dir / "my_humanoid.yaml"
    robot.write_text(robot.read_text().split("\nwalker:")[0])
    out = run_cli("walk", "--robot", robot, "--steps", "2")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert f"add a 'walker:' mapping to {robot}" in out.stderr and "--walker-config" in out.stderr
    # --walker-config: that file's base values
    walker = robot_dir / "walker.yaml"
    walker.write_text("step_duration: 0.7\nmax_step_length: 0.2\nmax_step_width: 0.3\nmin_step_width: 0.12\n")
    out = run_cli("walk", "--robot", robot, "--walker-config", walker, "--steps", "2", "--json")
    assert out.returncode == 0, out.stderr
    assert not json.loads(out.stdout.splitlines()[-1])["fell"]
