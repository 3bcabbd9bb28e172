"""Pinocchio and MuJoCo models of each robot agree; an altered URDF is caught
with a message naming the joint and body that moved."""

from __future__ import annotations

import dataclasses
import re

import pytest

from whole_body_control.errors import ModelMismatch
from whole_body_control.robot import RobotModel, available_robots, load_config, load_robot
from whole_body_control.sim import SimConfig, Simulation
from whole_body_control.sim.consistency import check_consistency, compare_report


@pytest.mark.parametrize("name", available_robots())
def test_models_agree(name):
    robot = load_robot(name, fresh=False)
    sim = Simulation(robot, SimConfig(visual_meshes=False))
    check_consistency(robot, sim, tol=1e-9)
    report = dict(compare_report(robot, sim))
    assert report["total mass [kg]"] < 1e-9
    assert any("spatial inertia moved by joint 'floating_base'" in what for what in report)


def _talos_with(tmp_path, link: str, new_mass: str) -> RobotModel:
    config, source = load_config("talos")
    robot = RobotModel(config, source)
    text = robot.urdf_path.read_text()
    pattern = rf'(<link name="{link}">\s*<inertial>.*?<mass value=")([^"]+)(")'
    altered, count = re.subn(pattern, rf"\g<1>{new_mass}\g<3>", text, count=1, flags=re.S)
    assert count == 1, f"no mass for {link}"
    path = tmp_path / "talos_altered.urdf"
    path.write_text(altered)
    return RobotModel(dataclasses.replace(config, urdf=str(path)), source)


@pytest.mark.parametrize(
    ("link", "joint"),
    [
        ("leg_left_4_link", "leg_left_4_joint"),  # a moving link
        ("left_sole_link", "leg_left_6_joint"),  # a fixed link merged into its parent joint's body
    ],
)
def test_altered_link_mass_is_named(tmp_path, link, joint):
    """Pinocchio loads the original URDF, MuJoCo a copy with one link 1 kg heavier."""
    robot = load_robot("talos", fresh=False)
    altered = _talos_with(tmp_path, link, "1.5")
    sim = Simulation(altered, SimConfig(visual_meshes=False))
    with pytest.raises(ModelMismatch) as info:
        check_consistency(robot, sim)
    message = str(info.value)
    assert "total mass" in message
    assert f"joint '{joint}'" in message and link in message
    # and the altered model is consistent with itself
    check_consistency(altered, sim)


def test_torque_limit_mismatch_is_named():
    robot = load_robot("g1", fresh=False)
    config = dataclasses.replace(robot.config, torque_limits={"left_knee_joint": 1.0})
    weak = RobotModel(config, robot.source)
    sim = Simulation(weak, SimConfig(visual_meshes=False))
    with pytest.raises(ModelMismatch, match=r"joint 'left_knee_joint' torque limit"):
        check_consistency(robot, sim)


def test_check_restores_the_simulation_state():
    robot = load_robot("g1", fresh=False)
    sim = Simulation(robot, SimConfig(visual_meshes=False))
    for _ in range(10):
        sim.step(robot.tau_max * 0.0)
    q, v, t = sim.q, sim.v, sim.time
    check_consistency(robot, sim)
    assert (sim.q == q).all() and (sim.v == v).all() and sim.time == t
