"""``wbc check ROBOT``: is a robot file usable? Every check at once, each with what to change.

Checks, in order (a check that cannot run because an earlier one failed says so):

* ``inertias``: every URDF link's mass and inertia (:func:`whole_body_control.robot.check_inertials`,
  the load-time check, all bad links at once with the proposed fix);
* ``meshes``: every mesh file exists and MuJoCo can decode it (STL, OBJ, MSH; not Collada ``.dae``);
* ``frames``: the base and torso frames have x forward and z up like the soles at the reference
  posture (the robot file has no rotation field for them);
* ``sole flatness``: both soles flat and at the same height at the reference posture;
* ``locked joints``: Pinocchio and MuJoCo agree on them (MuJoCo simulates every URDF joint);
* ``consistency``: Pinocchio against MuJoCo (:mod:`whole_body_control.sim.consistency`): joints,
  masses, spatial inertias, CoM, sole placements, limits;
* ``wbc and walker``: the robot's WBC and walker sections load and fit its soles.

Unusable input (unknown robot, YAML errors, frames or joints not in the URDF) raises, as every
command does (exit code 2).
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pinocchio as pin

from whole_body_control.errors import ModelError, WbcError
from whole_body_control.robot import (
    RobotModel,
    check_inertials,
    load_config,
    package_dirs_for,
    resolve_package_uri,
    resolve_urdf,
)
from whole_body_control.runs.robot_init import MUJOCO_MESH_EXTENSIONS

FRAME_TOLERANCE_DEG = 10.0  # base / torso axes within this of the soles' [deg]
FLAT_TOLERANCE_DEG = 0.5  # sole tilt at the reference posture [deg]
LEVEL_TOLERANCE = 1e-3  # sole height difference at the reference posture [m]
CONSISTENCY_TOLERANCE = 1e-6  # Pinocchio vs MuJoCo, every compared quantity


@dataclass(frozen=True)
class Check:
    """One check's outcome: ``passed`` is None when it could not run (an earlier check failed)."""

    name: str
    passed: bool | None
    detail: str
    fix: str = ""


def _skipped(name: str, why: str) -> Check:
    return Check(name, None, f"not run: {why}")


def check_meshes(urdf_path: Path) -> Check:
    """Every ``<mesh>`` of the URDF resolves to a file MuJoCo decodes."""
    root = ET.parse(urdf_path).getroot()
    dirs = package_dirs_for(urdf_path)
    missing, unreadable = [], {}
    count = 0
    for link in root.iter("link"):
        for mesh in link.iter("mesh"):
            count += 1
            uri = mesh.get("filename", "")
            try:
                path = resolve_package_uri(uri, dirs)
            except ModelError:
                missing.append(f"{link.get('name')}: {uri}")
                continue
            if not path.is_absolute():
                path = urdf_path.parent / path
            if not path.is_file():
                missing.append(f"{link.get('name')}: {uri}")
            elif path.suffix.lower() not in MUJOCO_MESH_EXTENSIONS:
                unreadable.setdefault(path.suffix.lower(), []).append(link.get("name"))
    if not missing and not unreadable:
        return Check("meshes", True, f"{count} mesh(es), all {'/'.join(e[1:] for e in MUJOCO_MESH_EXTENSIONS)}")
    parts = (
        [f"{len(missing)} not found ({'; '.join(missing[:3])}{' ...' if len(missing) > 3 else ''})"] if missing else []
    )
    for suffix, links in unreadable.items():
        links = sorted(set(links))
        parts.append(
            f"{suffix} meshes MuJoCo cannot decode on {len(links)} link(s) ({', '.join(links[:5])}"
            f"{' ...' if len(links) > 5 else ''})"
        )
    return Check(
        "meshes",
        False,
        "; ".join(parts),
        "run 'wbc robot init URDF -o FILE': its URDF copy replaces each such mesh by its bounding box "
        "(visual and collision; read with coal), or convert the meshes to STL/OBJ",
    )


def _forward(robot: RobotModel, data: pin.Data) -> np.ndarray:
    return sum(data.oMf[robot.foot_frame_ids[s]].rotation[:, 0] for s in ("left", "right"))


def check_frames(robot: RobotModel) -> Check:
    """Base and torso: x along the soles' forward direction, z up, at ``robot.q_ref``."""
    data = robot.model.createData()
    pin.framesForwardKinematics(robot.model, data, robot.q_ref)
    forward = _forward(robot, data)
    rows, bad = [], []
    for key, frame in (("base_frame", robot.config.base_frame), ("torso_frame", robot.config.torso_frame)):
        R = data.oMf[robot.model.getFrameId(frame)].rotation
        yaw = math.degrees(math.atan2(float(np.cross(forward, R[:, 0])[2]), float(forward @ R[:, 0])))
        tilt = math.degrees(math.acos(max(-1.0, min(1.0, float(R[2, 2])))))
        rows.append(f"{key} '{frame}': x {yaw:+.1f} deg from the soles' forward, z {tilt:.1f} deg from up")
        if abs(yaw) > FRAME_TOLERANCE_DEG or tilt > FRAME_TOLERANCE_DEG:
            bad.append(key)
    if not bad:
        return Check("frames", True, "; ".join(rows))
    return Check(
        "frames",
        False,
        "; ".join(rows) + f" (allowed: {FRAME_TOLERANCE_DEG:g} deg)",
        f"{' and '.join(bad)}: name a link whose x points forward and z up at the reference posture (the robot "
        "file has no rotation field), add such a link to the URDF with a fixed joint, or correct "
        "reference_posture if it tilts the frame",
    )


def check_soles(robot: RobotModel) -> Check:
    """Both soles flat (z up) and level at ``robot.q_ref``."""
    data = robot.model.createData()
    pin.framesForwardKinematics(robot.model, data, robot.q_ref)
    soles = {s: data.oMf[robot.foot_frame_ids[s]] for s in ("left", "right")}
    tilts = {s: math.degrees(math.acos(max(-1.0, min(1.0, float(o.rotation[2, 2]))))) for s, o in soles.items()}
    gap = abs(float(soles["left"].translation[2] - soles["right"].translation[2]))
    detail = (
        f"tilt left {tilts['left']:.2f} deg, right {tilts['right']:.2f} deg (allowed {FLAT_TOLERANCE_DEG:g}); "
        f"height difference {gap * 1000:.1f} mm (allowed {LEVEL_TOLERANCE * 1000:g})"
    )
    if max(tilts.values()) <= FLAT_TOLERANCE_DEG and gap <= LEVEL_TOLERANCE:
        return Check("sole flatness", True, detail)
    return Check(
        "sole flatness",
        False,
        detail,
        "change reference_posture (ankle pitch and roll) until both soles are flat and level; "
        "'wbc robot init' solves such a posture",
    )


def check_locked_joints(robot: RobotModel) -> Check:
    locked = list(robot.config.locked_joints)
    if not locked:
        return Check("locked joints", True, "none")
    return Check(
        "locked joints",
        False,
        f"{', '.join(locked)} removed from the Pinocchio model but simulated as free joints by MuJoCo",
        "remove them from locked_joints (MuJoCo cannot lock joints yet); a joint whose links have no "
        "mass needs its mass and inertia in the URDF instead",
    )


def check_consistency_of(robot: RobotModel) -> Check:
    from whole_body_control.sim import SimConfig, Simulation
    from whole_body_control.sim.consistency import compare_report

    try:
        sim = Simulation(robot, SimConfig(visual_meshes=False))
        report = compare_report(robot, sim)
    except ModelError as exc:
        return Check("consistency", False, str(exc), "see the meshes and locked joints checks")
    bad = [(what, diff) for what, diff in report if not diff <= CONSISTENCY_TOLERANCE]
    worst = max(diff for _, diff in report)
    if not bad:
        return Check("consistency", True, f"{len(report)} quantities agree, largest difference {worst:.2g}")
    lines = "; ".join(f"{what}: {diff:.3g}" for what, diff in bad[:5])
    more = f" (and {len(bad) - 5} more)" if len(bad) > 5 else ""
    return Check(
        "consistency",
        False,
        f"{len(bad)} of {len(report)} quantities differ by more than {CONSISTENCY_TOLERANCE:g}: {lines}{more}",
        "the URDF is read differently by Pinocchio and MuJoCo: report it with this output",
    )


def check_sections(robot: RobotModel) -> Check:
    from whole_body_control.config import wbc_config_for
    from whole_body_control.walker_stage import walker_config_for

    try:
        wbc_config_for(robot)
        walker, source = walker_config_for(robot)
    except WbcError as exc:
        return Check("wbc and walker", False, str(exc), "see the message")
    left, right = (robot.sole_placement(s, robot.q_ref).translation for s in ("left", "right"))
    vx = walker.velocity_limits(float(abs(left[1] - right[1])))["vx"][0]
    return Check("wbc and walker", True, f"walker from {source}; forward speed up to {vx:.2f} m/s")


def quick_checks(robot: RobotModel) -> list[Check]:
    """The checks that need no simulation (milliseconds): frames, sole flatness, locked joints."""
    return [check_frames(robot), check_soles(robot), check_locked_joints(robot)]


def run_checks(name_or_path: str) -> dict:
    """All checks on a robot (name or YAML path): ``{"robot", "file", "passed", "checks": [...]}``.

    Raises:
        ConfigError / ModelError: the robot file cannot be used at all (exit code 2).
    """
    config, source = load_config(name_or_path)
    urdf = resolve_urdf(config.urdf, source)
    checks = []
    try:
        check_inertials(urdf)
        checks.append(Check("inertias", True, "every link: mass >= 0, moments >= 0 with A + B >= C; moving bodies > 0"))
    except ModelError as exc:
        checks.append(
            Check(
                "inertias",
                False,
                str(exc),
                "apply the fix proposed for each link in the URDF, or run 'wbc robot init URDF -o FILE' "
                "(its URDF copy balances bad inertias and gives massive links without inertia a 5 cm sphere's)",
            )
        )
    checks.append(check_meshes(urdf))
    if not checks[0].passed:
        names = ("frames", "sole flatness", "locked joints", "consistency", "wbc and walker")
        checks += [_skipped(n, "the model cannot be loaded (inertias)") for n in names]
    else:
        robot = RobotModel(config, source)
        checks += quick_checks(robot)
        if not checks[1].passed:
            checks.append(_skipped("consistency", "MuJoCo cannot load the meshes"))
        else:
            checks.append(check_consistency_of(robot))
        checks.append(check_sections(robot))
    return {
        "robot": config.name,
        "file": source,
        "urdf": str(urdf),
        "passed": all(c.passed is True for c in checks),
        "checks": [asdict(c) for c in checks],
    }


def format_report(report: dict) -> str:
    width = max(len(c["name"]) for c in report["checks"])
    lines = [f"robot {report['robot']} ({report['file']})"]
    for c in report["checks"]:
        status = {True: "ok", False: "FAIL", None: "skip"}[c["passed"]]
        detail = c["detail"].replace("\n", "\n" + " " * (width + 8))
        lines.append(f"  {status:<4}  {c['name']:<{width}}  {detail}")
        if c["fix"]:
            lines.append(f"        {'':<{width}}  fix: {c['fix']}")
    failed = [c["name"] for c in report["checks"] if c["passed"] is False]
    skipped = [c["name"] for c in report["checks"] if c["passed"] is None]
    if not failed:
        lines.append("all checks passed")
    else:
        lines.append(
            f"{len(failed)} check(s) failed: {', '.join(failed)}" + (f"; {len(skipped)} not run" if skipped else "")
        )
    return "\n".join(lines)
