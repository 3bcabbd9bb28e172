#!/usr/bin/env python3
"""Generate ``urdf/wbc_humanoid.urdf``: the project's own adult-size humanoid.

A torque-controlled humanoid about 1.57 m tall (legs straight) and 53 kg, built
from primitive shapes only (box, cylinder, sphere), so that it loads anywhere
without meshes.  Every link's inertia is computed from its shapes (uniform
density per shape, parallel-axis theorem for composites), which makes it
physically valid by construction.

Kinematic tree (24 actuated joints)::

    pelvis (floating base)
    ├── {left,right}_hip_yaw (z) - hip_roll (x) - hip_pitch (y) - knee (y)
    │       - ankle_pitch (y) - ankle_roll (x) - [fixed] {left,right}_sole
    └── torso_yaw (z) - torso_link
            ├── [fixed] head_link
            └── {left,right}_shoulder_pitch (y) - shoulder_roll (x)
                    - shoulder_yaw (z) - elbow (y) - [fixed] {left,right}_hand

Sign conventions (all frames x forward, y left, z up at q = 0, legs and arms
hanging straight):
    hip_pitch < 0 swings the thigh forward, knee > 0 bends the knee,
    ankle_pitch < 0 lifts the toes; hip_roll and shoulder_roll > 0 move the
    left limb outward (right limb: < 0); elbow < 0 flexes the elbow.

The sole frames ``left_sole`` / ``right_sole`` lie on the bottom face of the
foot box, right below the ankle axes, with z normal to the sole and x forward;
the foot box spans x in [-0.08, 0.14] m and y in [-0.05, 0.05] m there.

Usage: ``python urdf/make_wbc_humanoid.py [-o OUT.urdf]`` (default: next to this
script).  The file is generated, not edited by hand.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROBOT_NAME = "wbc_humanoid"
DEFAULT_OUTPUT = Path(__file__).resolve().parent / f"{ROBOT_NAME}.urdf"

# -- dimensions [m] -------------------------------------------------------------
HIP_Y = 0.09  # lateral offset of the hip from the pelvis origin
HIP_YAW_Z = -0.07  # hip yaw joint below the pelvis origin
HIP_ROLL_Z = -0.05  # hip roll/pitch below the hip yaw joint
THIGH = 0.36  # hip pitch axis to knee axis
SHANK = 0.36  # knee axis to ankle axis
ANKLE_HEIGHT = 0.07  # ankle axes above the sole
FOOT_X = (-0.08, 0.14)  # foot box along x in the sole frame
FOOT_WIDTH = 0.10
FOOT_THICKNESS = 0.04
TORSO_Z = 0.06  # torso yaw joint above the pelvis origin
SHOULDER_Y = 0.20
SHOULDER_Z = 0.32  # shoulders above the torso yaw joint
UPPER_ARM = 0.28  # shoulder to elbow
FOREARM_HAND = 0.26  # elbow to hand centre

# Joint limits: (lower [rad], upper [rad], effort [N m], velocity [rad/s]).
# Limits of roll and yaw joints are given for the left side and mirrored.
LIMITS = {
    "hip_yaw": (-0.5, 0.8, 150.0, 8.0),
    "hip_roll": (-0.4, 0.7, 200.0, 8.0),
    "hip_pitch": (-2.0, 0.7, 250.0, 10.0),
    "knee": (0.0, 2.4, 300.0, 10.0),
    "ankle_pitch": (-1.0, 0.7, 150.0, 10.0),
    "ankle_roll": (-0.4, 0.4, 100.0, 8.0),
    "torso_yaw": (-1.0, 1.0, 150.0, 6.0),
    "shoulder_pitch": (-3.0, 1.5, 60.0, 10.0),
    "shoulder_roll": (-0.3, 2.8, 60.0, 10.0),
    "shoulder_yaw": (-2.0, 2.0, 40.0, 10.0),
    "elbow": (-2.4, 0.0, 50.0, 10.0),
}
MIRRORED = ("hip_yaw", "hip_roll", "shoulder_roll", "shoulder_yaw")

MATERIALS = {
    "dark": (0.25, 0.25, 0.28, 1.0),
    "light": (0.82, 0.82, 0.85, 1.0),
    "accent": (0.15, 0.40, 0.75, 1.0),
}

_CYLINDER_RPY = {"x": (0.0, math.pi / 2, 0.0), "y": (math.pi / 2, 0.0, 0.0), "z": (0.0, 0.0, 0.0)}


@dataclass(frozen=True)
class Part:
    """A solid primitive of uniform density, placed in its link frame.

    Attributes:
        shape: ``"box"``, ``"cylinder"`` or ``"sphere"``.
        dims: box ``(x, y, z)`` sizes, cylinder ``(radius, length)``, sphere ``(radius,)`` [m].
        mass: [kg].
        xyz: centre in the link frame [m].
        axis: cylinder axis, ``"x"``, ``"y"`` or ``"z"``.
        material: a key of ``MATERIALS``.
    """

    shape: str
    dims: tuple[float, ...]
    mass: float
    xyz: tuple[float, float, float] = (0.0, 0.0, 0.0)
    axis: str = "z"
    material: str = "light"

    @property
    def rpy(self) -> tuple[float, float, float]:
        return _CYLINDER_RPY[self.axis] if self.shape == "cylinder" else (0.0, 0.0, 0.0)

    def inertia(self) -> np.ndarray:
        """3x3 inertia about the part's centre, in the link frame [kg m^2]."""
        m = self.mass
        if self.shape == "box":
            x, y, z = self.dims
            diag = m / 12.0 * np.array([y * y + z * z, x * x + z * z, x * x + y * y])
        elif self.shape == "cylinder":
            r, h = self.dims
            radial = m * (3.0 * r * r + h * h) / 12.0
            axial = m * r * r / 2.0
            diag = np.array([radial, radial, radial])
            diag["xyz".index(self.axis)] = axial
        elif self.shape == "sphere":
            (r,) = self.dims
            diag = np.full(3, 0.4 * m * r * r)
        else:
            raise ValueError(f"unknown shape {self.shape!r}")
        return np.diag(diag)


def box(size, mass, xyz=(0.0, 0.0, 0.0), material="light") -> Part:
    return Part("box", tuple(size), mass, tuple(xyz), material=material)


def cylinder(radius, length, mass, xyz=(0.0, 0.0, 0.0), axis="z", material="light") -> Part:
    return Part("cylinder", (radius, length), mass, tuple(xyz), axis, material)


def sphere(radius, mass, xyz=(0.0, 0.0, 0.0), material="light") -> Part:
    return Part("sphere", (radius,), mass, tuple(xyz), material=material)


def composite_inertia(parts: list[Part]) -> tuple[float, np.ndarray, np.ndarray]:
    """Mass [kg], centre of mass [m] and 3x3 inertia about it [kg m^2] of ``parts``."""
    mass = sum(p.mass for p in parts)
    com = sum(p.mass * np.array(p.xyz) for p in parts) / mass
    inertia = np.zeros((3, 3))
    for p in parts:
        d = np.array(p.xyz) - com
        inertia += p.inertia() + p.mass * (d @ d * np.eye(3) - np.outer(d, d))
    return mass, com, inertia


@dataclass(frozen=True)
class Link:
    name: str
    parts: tuple[Part, ...] = ()  # no parts: a massless frame (sole, hand)


@dataclass(frozen=True)
class Joint:
    name: str
    parent: str
    child: str
    xyz: tuple[float, float, float]
    axis: str | None = None  # "x", "y", "z"; None: fixed joint
    limits: tuple[float, float, float, float] | None = None


def _with_limits(joint: Joint) -> Joint:
    """``joint`` with its ``LIMITS`` entry, mirrored for the right side where needed."""
    if joint.axis is None:
        return joint
    kind = joint.name.removesuffix("_joint").removeprefix("left_").removeprefix("right_")
    lower, upper, effort, velocity = LIMITS[kind]
    if joint.name.startswith("right_") and kind in MIRRORED:
        lower, upper = -upper, -lower
    return dataclasses.replace(joint, limits=(lower, upper, effort, velocity))


def leg(side: str, sign: int) -> tuple[list[Link], list[Joint]]:
    p = f"{side}_"
    foot_len = FOOT_X[1] - FOOT_X[0]
    foot_cx = 0.5 * (FOOT_X[0] + FOOT_X[1])
    links = [
        Link(p + "hip_yaw_link", (cylinder(0.05, 0.06, 1.2, (0, 0, -0.02), "z", "dark"),)),
        Link(p + "hip_roll_link", (cylinder(0.055, 0.09, 1.5, axis="x", material="dark"),)),
        Link(
            p + "hip_pitch_link",
            (
                cylinder(0.06, 0.09, 1.0, axis="y", material="dark"),
                cylinder(0.055, THIGH - 0.06, 3.5, (0, 0, -THIGH / 2), "z", "light"),
            ),
        ),
        Link(
            p + "knee_link",
            (
                cylinder(0.05, 0.09, 0.8, axis="y", material="dark"),
                cylinder(0.045, SHANK - 0.06, 1.9, (0, 0, -SHANK / 2), "z", "light"),
            ),
        ),
        Link(p + "ankle_pitch_link", (cylinder(0.035, 0.06, 0.4, axis="y", material="dark"),)),
        Link(
            p + "ankle_roll_link",
            (
                cylinder(0.035, 0.07, 0.3, axis="x", material="dark"),
                box(
                    (foot_len, FOOT_WIDTH, FOOT_THICKNESS),
                    0.9,
                    (foot_cx, 0, -ANKLE_HEIGHT + FOOT_THICKNESS / 2),
                    "accent",
                ),
            ),
        ),
        Link(p + "sole"),
    ]
    joints = [
        Joint(p + "hip_yaw_joint", "pelvis", p + "hip_yaw_link", (0, sign * HIP_Y, HIP_YAW_Z), "z"),
        Joint(p + "hip_roll_joint", p + "hip_yaw_link", p + "hip_roll_link", (0, 0, HIP_ROLL_Z), "x"),
        Joint(p + "hip_pitch_joint", p + "hip_roll_link", p + "hip_pitch_link", (0, 0, 0), "y"),
        Joint(p + "knee_joint", p + "hip_pitch_link", p + "knee_link", (0, 0, -THIGH), "y"),
        Joint(p + "ankle_pitch_joint", p + "knee_link", p + "ankle_pitch_link", (0, 0, -SHANK), "y"),
        Joint(p + "ankle_roll_joint", p + "ankle_pitch_link", p + "ankle_roll_link", (0, 0, 0), "x"),
        Joint(p + "sole_joint", p + "ankle_roll_link", p + "sole", (0, 0, -ANKLE_HEIGHT)),
    ]
    return links, joints


def arm(side: str, sign: int) -> tuple[list[Link], list[Joint]]:
    p = f"{side}_"
    links = [
        Link(p + "shoulder_pitch_link", (cylinder(0.045, 0.07, 0.7, axis="y", material="dark"),)),
        Link(p + "shoulder_roll_link", (cylinder(0.04, 0.07, 0.6, axis="x", material="dark"),)),
        Link(p + "shoulder_yaw_link", (cylinder(0.04, UPPER_ARM - 0.08, 1.4, (0, 0, -0.10), "z", "light"),)),
        Link(
            p + "elbow_link",
            (
                cylinder(0.04, 0.07, 0.3, axis="y", material="dark"),
                cylinder(0.035, FOREARM_HAND - 0.06, 0.8, (0, 0, -0.12), "z", "light"),
                sphere(0.045, 0.4, (0, 0, -FOREARM_HAND), "accent"),
            ),
        ),
        Link(p + "hand"),
    ]
    joints = [
        Joint(
            p + "shoulder_pitch_joint", "torso_link", p + "shoulder_pitch_link", (0, sign * SHOULDER_Y, SHOULDER_Z), "y"
        ),
        Joint(p + "shoulder_roll_joint", p + "shoulder_pitch_link", p + "shoulder_roll_link", (0, 0, 0), "x"),
        Joint(p + "shoulder_yaw_joint", p + "shoulder_roll_link", p + "shoulder_yaw_link", (0, 0, -0.06), "z"),
        Joint(p + "elbow_joint", p + "shoulder_yaw_link", p + "elbow_link", (0, 0, -(UPPER_ARM - 0.06)), "y"),
        Joint(p + "hand_joint", p + "elbow_link", p + "hand", (0, 0, -FOREARM_HAND)),
    ]
    return links, joints


def humanoid() -> tuple[list[Link], list[Joint]]:
    """All links and joints, parents before children."""
    links = [
        Link("pelvis", (box((0.14, 0.26, 0.12), 6.0, material="dark"),)),
        Link("torso_link", (box((0.18, 0.30, 0.36), 13.0, (0, 0, 0.20), "light"),)),
        Link(
            "head_link",
            (
                cylinder(0.04, 0.04, 0.5, (0, 0, 0.02), "z", "dark"),
                sphere(0.09, 2.5, (0, 0, 0.13), "light"),
            ),
        ),
    ]
    joints = [
        Joint("torso_yaw_joint", "pelvis", "torso_link", (0, 0, TORSO_Z), "z"),
        Joint("head_joint", "torso_link", "head_link", (0, 0, 0.38)),
    ]
    for side, sign in (("left", 1), ("right", -1)):
        for part_links, part_joints in (leg(side, sign), arm(side, sign)):
            links += part_links
            joints += part_joints
    return links, [_with_limits(j) for j in joints]


# -- XML --------------------------------------------------------------------------


def _num(x: float) -> str:
    x = float(x)
    if abs(x) < 1e-12:
        return "0"
    return f"{x:.9g}"


def _vec(v) -> str:
    return " ".join(_num(x) for x in v)


def _geometry(parent: ET.Element, part: Part) -> None:
    geometry = ET.SubElement(parent, "geometry")
    if part.shape == "box":
        ET.SubElement(geometry, "box", size=_vec(part.dims))
    elif part.shape == "cylinder":
        ET.SubElement(geometry, "cylinder", radius=_num(part.dims[0]), length=_num(part.dims[1]))
    else:
        ET.SubElement(geometry, "sphere", radius=_num(part.dims[0]))


def _link_xml(robot: ET.Element, link: Link) -> None:
    el = ET.SubElement(robot, "link", name=link.name)
    if not link.parts:
        return
    mass, com, inertia = composite_inertia(list(link.parts))
    inertial = ET.SubElement(el, "inertial")
    ET.SubElement(inertial, "origin", xyz=_vec(com), rpy="0 0 0")
    ET.SubElement(inertial, "mass", value=_num(mass))
    ET.SubElement(
        inertial,
        "inertia",
        ixx=_num(inertia[0, 0]),
        ixy=_num(inertia[0, 1]),
        ixz=_num(inertia[0, 2]),
        iyy=_num(inertia[1, 1]),
        iyz=_num(inertia[1, 2]),
        izz=_num(inertia[2, 2]),
    )
    for part in link.parts:
        visual = ET.SubElement(el, "visual")
        ET.SubElement(visual, "origin", xyz=_vec(part.xyz), rpy=_vec(part.rpy))
        _geometry(visual, part)
        ET.SubElement(visual, "material", name=part.material)
    for part in link.parts:
        collision = ET.SubElement(el, "collision")
        ET.SubElement(collision, "origin", xyz=_vec(part.xyz), rpy=_vec(part.rpy))
        _geometry(collision, part)


def _joint_xml(robot: ET.Element, joint: Joint) -> None:
    el = ET.SubElement(robot, "joint", name=joint.name, type="fixed" if joint.axis is None else "revolute")
    ET.SubElement(el, "parent", link=joint.parent)
    ET.SubElement(el, "child", link=joint.child)
    ET.SubElement(el, "origin", xyz=_vec(joint.xyz), rpy="0 0 0")
    if joint.axis is not None:
        ET.SubElement(el, "axis", xyz=_vec(np.eye(3)["xyz".index(joint.axis)]))
        lower, upper, effort, velocity = joint.limits
        ET.SubElement(el, "limit", lower=_num(lower), upper=_num(upper), effort=_num(effort), velocity=_num(velocity))


def build_urdf() -> str:
    """The URDF text."""
    links, joints = humanoid()
    robot = ET.Element("robot", name=ROBOT_NAME)
    robot.append(ET.Comment(" Generated by urdf/make_wbc_humanoid.py: edit the script, not this file. "))
    for name, rgba in MATERIALS.items():
        material = ET.SubElement(robot, "material", name=name)
        ET.SubElement(material, "color", rgba=_vec(rgba))
    for link in links:
        _link_xml(robot, link)
    for joint in joints:
        _joint_xml(robot, joint)
    ET.indent(robot, space="  ")
    return '<?xml version="1.0"?>\n' + ET.tostring(robot, encoding="unicode") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", type=Path, default=DEFAULT_OUTPUT, help="URDF file to write")
    args = parser.parse_args(argv)
    text = build_urdf()
    args.output.write_text(text)
    links, joints = humanoid()
    mass = sum(composite_inertia(list(link.parts))[0] for link in links if link.parts)
    actuated = sum(j.axis is not None for j in joints)
    print(f"wrote {args.output}: {len(links)} links, {actuated} actuated joints, {mass:.2f} kg")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
