"""From a URDF to walking with `wbc robot init` and `wbc check` only, as a user would: the commands
run as subprocesses on humanoids of example-robot-data, and the generated files are used unedited.

Romeo is not shipped by the project: its URDF has Collada meshes MuJoCo cannot read and two links
whose inertia breaks the triangle inequality, so the generated URDF copy is exercised too."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from whole_body_control.robot import example_robot_data_dir, robots_dir

ROBOTS = example_robot_data_dir() / "robots"
ROMEO_URDF = ROBOTS / "romeo_description" / "urdf" / "romeo_small.urdf"
ROMEO_SRDF = ROBOTS / "romeo_description" / "srdf" / "romeo_small.srdf"
TALOS_URDF = ROBOTS / "talos_data" / "robots" / "talos_reduced.urdf"
TALOS_SRDF = ROBOTS / "talos_data" / "srdf" / "talos.srdf"
G1_URDF = ROBOTS / "g1_description" / "urdf" / "g1_29dof_rev_1_0.urdf"


def wbc(*args, timeout=600):
    return subprocess.run(
        [sys.executable, "-m", "whole_body_control.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def init(tmp: Path, urdf: Path, srdf: Path | None = None) -> Path:
    out = tmp / "robot.yaml"
    args = ["robot", "init", urdf, "-o", out] + (["--srdf", srdf] if srdf else [])
    result = wbc(*args)
    assert result.returncode == 0, result.stderr
    return out


def last_json(result) -> dict:
    return json.loads(result.stdout.strip().splitlines()[-1])


def check_passes(robot_file: Path) -> dict:
    result = wbc("check", robot_file, "--json")
    report = last_json(result)
    assert result.returncode == 0, [c for c in report["checks"] if not c["passed"]]
    assert len(result.stdout.strip().splitlines()) == 1  # one JSON line
    return report


# -- Romeo: not shipped, Collada meshes, bad inertias ------------------------------------------


@pytest.fixture(scope="module")
def romeo(tmp_path_factory) -> Path:
    robot_file = init(tmp_path_factory.mktemp("romeo"), ROMEO_URDF, ROMEO_SRDF)
    check_passes(robot_file)
    return robot_file


def test_romeo_raw_urdf_fails_the_check_with_the_fixes(tmp_path):
    """The URDF as it is: both bad links and the Collada meshes named at once, each with a fix;
    the checks that need the model say they did not run; exit code 1."""
    text = (robots_dir() / "g1.yaml").read_text()  # any robot file, pointed at Romeo
    text = re.sub(r"^urdf: .*$", f"urdf: {ROMEO_URDF}", text, count=1, flags=re.M)
    text = text.replace("pelvis", "base_link").replace("torso_link", "torso")
    text = re.sub(r"^reference_posture:.*?(?=^damping:)", "", text, flags=re.M | re.S)
    path = tmp_path / "romeo_raw.yaml"
    path.write_text(text.replace("left_ankle_roll_link", "l_ankle").replace("right_ankle_roll_link", "r_ankle"))
    result = wbc("check", path)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    out = result.stdout
    assert re.search(r"FAIL\s+inertias", out) and "RShoulderYawLink" in out and "RElbowYawLink" in out
    assert "A + B >= C" in out and "fix:" in out
    assert re.search(r"FAIL\s+meshes\s+\.dae meshes MuJoCo cannot decode", out)
    assert re.search(r"skip\s+consistency", out)
    report = last_json(wbc("check", path, "--json"))
    assert not report["passed"]
    assert {c["name"]: c["passed"] for c in report["checks"]}["inertias"] is False


def test_romeo_init_comments_every_guess_and_repairs_a_urdf_copy(romeo):
    text = romeo.read_text()
    for key in ("base_frame", "torso_frame", "frame", "sole", "reference_posture", "torque_limits", "walker"):
        line = next(line for line in text.splitlines() if line.strip().startswith(f"{key}:"))
        assert "#" in line, line
    assert re.search(r"^urdf: robot\.urdf", text, flags=re.M)  # the copy, next to the YAML
    copy = (romeo.parent / "robot.urdf").read_text()
    assert ".dae" not in copy.replace(".dae (.dae)", "")  # only named in the repair comments
    assert "bounding box" in copy and "A + B >= C" in copy
    assert "PROBLEM" not in text


def test_romeo_from_urdf_stands(romeo):
    summary = last_json(wbc("stand", "--robot", romeo, "--duration", 5, "--json"))
    assert not summary["fell"], summary
    assert summary["qp_failures"] == 0


@pytest.mark.slow
def test_romeo_from_urdf_walks_20_steps_at_0_2(romeo):
    """The acceptance test: the generated file, unedited, walks 20 steps at 0.2 m/s."""
    result = wbc("walk", "--robot", romeo, "--speed", 0.2, "--steps", 20, "--json")
    summary = last_json(result)
    assert not summary["fell"], summary
    assert summary["steps_completed"] == 20
    assert summary["distance_m"] > 0.95 * summary["planned_distance_m"]
    assert summary["zmp_outside_polygon_max_m"] < 1e-3
    assert summary["lateral_deviation_max_m"] < 0.05


# -- Talos and G1 from their URDFs ---------------------------------------------------------------


@pytest.fixture(scope="module", params=["talos", "g1"])
def from_urdf(request, tmp_path_factory) -> Path:
    """Talos (with its SRDF) and G1 (none) through wbc robot init, passing wbc check."""
    urdf, srdf = {"talos": (TALOS_URDF, TALOS_SRDF), "g1": (G1_URDF, None)}[request.param]
    robot_file = init(tmp_path_factory.mktemp(request.param), urdf, srdf)
    check_passes(robot_file)
    return robot_file


def test_shipped_robots_from_urdf_stand_10_s(from_urdf):
    stand = last_json(wbc("stand", "--robot", from_urdf, "--duration", 10, "--json"))
    assert not stand["fell"], stand
    assert stand["qp_failures"] == 0


def test_shipped_robots_from_urdf_walk(from_urdf):
    """6 steps at 0.2 m/s here to keep the suite fast (both walk 20 by hand: docs/robots.md)."""
    walk = last_json(wbc("walk", "--robot", from_urdf, "--speed", 0.2, "--steps", 6, "--json"))
    assert not walk["fell"], walk
    assert walk["steps_completed"] == 6


# -- what the check catches ------------------------------------------------------------------------


def test_check_names_a_tilted_sole_and_a_locked_joint(tmp_path):
    text = (robots_dir() / "talos.yaml").read_text()
    text = text.replace("leg_left_5_joint: -0.448041", "leg_left_5_joint: -0.348041")  # left ankle pitch +0.1 rad
    text = text.replace("fall_height:", "locked_joints: [head_1_joint]\nfall_height:")
    text = re.sub(
        r"^urdf: .*$", "urdf: example-robot-data:robots/talos_data/robots/talos_reduced.urdf", text, flags=re.M
    )
    path = tmp_path / "talos_tilted.yaml"
    path.write_text(text)
    result = wbc("check", path)
    assert result.returncode == 1, result.stderr
    assert re.search(r"FAIL\s+sole flatness\s+tilt left 5\.\d\d deg", result.stdout), result.stdout
    assert re.search(r"FAIL\s+locked joints\s+head_1_joint", result.stdout), result.stdout
    assert re.search(r"ok\s+frames", result.stdout)
    # wbc stand runs the quick checks and warns
    stand = wbc("stand", "--robot", path, "--duration", 0.01, "--json")
    assert stand.returncode == 0, stand.stderr
    assert "warning: check 'sole flatness' failed: tilt left 5." in stand.stderr
    assert "warning: check 'locked joints' failed: head_1_joint" in stand.stderr


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["check", "no_such_robot"], ["unknown robot 'no_such_robot'"]),
        (["robot", "init", "missing.urdf", "-o", "x.yaml"], ["URDF: file not found: missing.urdf"]),
        (["robot", "init", TALOS_URDF, "-o", "robot.txt"], ["-o robot.txt", ".yaml"]),
        (["robot", "init", TALOS_URDF, "--srdf", "none.srdf", "-o", "x.yaml"], ["--srdf: file not found"]),
    ],
)
def test_unusable_input_is_exit_code_2(tmp_path, args, fragments):
    result = subprocess.run(
        [sys.executable, "-m", "whole_body_control.cli", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


def test_walker_scaling_anchors_are_the_shipped_robots_leg_lengths():
    """The leg lengths the walker scaling is anchored on are those of the shipped G1 and Talos."""
    from whole_body_control.robot import load_robot
    from whole_body_control.runs.robot_init import ANCHORS, _ancestors, _find_ankles, _leg_length

    for name, length in ANCHORS.items():
        robot = load_robot(name, fresh=False)
        ankle = _find_ankles(robot.model)["left"]
        measured = _leg_length(robot, _ancestors(robot.model, ankle), robot.foot_frame_ids["left"])
        assert measured == pytest.approx(length, abs=1e-3), name


def test_feet_without_collision_geometry_are_sized_from_the_visual_one(tmp_path):
    """G1 with the ankle links' collision geometry removed: the soles come from the foot meshes."""
    text = G1_URDF.read_text()  # package:// URIs: the copy resolves them too
    for side in ("left", "right"):
        link = re.search(rf'<link name="{side}_ankle_roll_link">.*?</link>', text, flags=re.S).group(0)
        text = text.replace(link, re.sub(r"<collision>.*?</collision>", "", link, flags=re.S))
    urdf = tmp_path / "g1_no_foot_collision.urdf"
    urdf.write_text(text)
    yaml_text = init(tmp_path, urdf).read_text()
    assert "at the bottom of its visual geometry" in yaml_text
    assert "bounding box of the foot's visual geometry" in yaml_text
    check_passes(tmp_path / "robot.yaml")


def test_a_robot_pickles_as_what_it_was_built_from_and_unpickles_the_same():
    """The controller's solve process gets the robot through a pipe: a few kB (the model
    is rebuilt from the same files), not the 7 MB of the whole model."""
    import pickle

    import numpy as np
    import pinocchio as pin

    from whole_body_control.robot import load_robot

    robot = load_robot("talos")
    data = pickle.dumps(robot)
    assert len(data) < 50_000
    copy = pickle.loads(data)
    assert copy.joint_names == robot.joint_names and copy.source == robot.source
    np.testing.assert_array_equal(copy.q_ref, robot.q_ref)
    np.testing.assert_array_equal(copy.tau_max, robot.tau_max)
    np.testing.assert_array_equal(copy.kd_safe, robot.kd_safe)
    q = pin.randomConfiguration(robot.model, -np.ones(robot.model.nq), np.ones(robot.model.nq))
    np.testing.assert_array_equal(
        pin.crba(copy.model, copy.model.createData(), q), pin.crba(robot.model, robot.model.createData(), q)
    )
