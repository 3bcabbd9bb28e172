"""``wbc robot init``: a starting robot YAML guessed from a URDF (and an SRDF), every guess commented.

What is guessed, and from what:

* **URDF repairs** (written to a copy next to the YAML, ``<yaml stem>.urdf``, only when needed,
  each repair an XML comment in the copy): meshes MuJoCo cannot read (Collada ``.dae`` and any
  format other than STL, OBJ, MSH) become boxes of the mesh's bounding box (read with coal, the
  collision library Pinocchio uses); inertias that break the triangle inequality get the mean of
  their principal moments (MuJoCo's ``balanceinertia``); a moving body with mass but no inertia
  gets that of a 5 cm solid sphere; ``package://`` mesh URIs become absolute paths.
* **feet**: the lowest joint on each side at the neutral configuration is the ankle; a link fixed
  to it whose name contains ``sole`` is the sole frame, else the sole frame is created on the ankle
  link (``parent`` + ``offset``) at the bottom of the foot's collision geometry.
* **sole rectangles**: the bounding box of the foot's collision geometry in the sole frame.
* **base and torso frames**: the URDF root link; the deepest link whose name contains torso,
  trunk or chest (else the root). Their x must point forward and z up like the soles': the YAML
  has no rotation field for them, so a frame that does not is reported in a comment and by
  ``wbc check``.
* **reference posture**: the SRDF's ``half_sitting`` state (or its first) or the zero posture with
  the knees bent, then a small Pinocchio IK (damped Gauss-Newton): soles flat and level, the CoM
  over the middle of the soles, the base upright and lowered to bend the knees.
* **torque limits**: the URDF's ``effort`` per joint.
* **walker section**: timing and step limits interpolated on leg length (power law) between the
  shipped G1 and Talos sections of ``config/walker.yaml``; step widths from the initial stance,
  margins from the sole size.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pinocchio as pin

from whole_body_control.errors import ConfigError, ModelError
from whole_body_control.robot import (
    Foot,
    RobotConfig,
    RobotModel,
    Sole,
    _balanced,
    _fix_sphere,
    _moments,
    _origin,
    example_robot_data_dir,
    package_dirs_for,
    resolve_package_uri,
)

MUJOCO_MESH_EXTENSIONS = (".stl", ".obj", ".msh")  # what MuJoCo's URDF importer decodes
SRDF_STATES = ("half_sitting", "standing", "home")  # SRDF group states tried first, in this order
KNEE_DROP = 0.06  # base lowered by this share of the leg length from straight legs [-]
MIN_KNEE_DROP = 0.03  # an SRDF posture dropping the base less than this share is bent further [-]
FRAME_TOLERANCE_DEG = 20.0  # base/torso x and z axes within this of the soles' [deg]

# the shipped walker sections the scaling sits between (config/walker.yaml): the robots' leg
# lengths [m] (hip pitch axis to sole, straight legs), measured with _leg_length on the shipped files
ANCHORS = {"g1": 0.689, "talos": 0.812}
# walker keys scaled with leg length L as L^k: durations sqrt(L) (Froude), lengths L, angles 1
WALKER_EXPONENTS = {
    "step_duration": 0.5,
    "start_duration": 0.5,
    "stop_duration": 0.5,
    "step_height": 1.0,
    "max_step_length": 1.0,
    "max_step_yaw": 0.0,
}


@dataclass
class Notes:
    """What init did and found: repairs made, and problems left for the user (``wbc check`` fails)."""

    repairs: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    info: list[str] = field(default_factory=list)


# -- URDF repairs ------------------------------------------------------------------------------------


def _mesh_box(path: Path, scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Centre and size [m] of the bounding box of a mesh file (any format assimp reads), scaled."""
    import coal  # Pinocchio's collision library; reads Collada through assimp

    try:
        mesh = coal.MeshLoader().load(str(path), np.asarray(scale, dtype=float))
        mesh.computeLocalAABB()
    except Exception as exc:  # coal raises RuntimeError / ValueError with the loader's message
        raise ModelError(f"{path}: cannot read the mesh to replace it by a box: {exc}") from exc
    lo, hi = np.array(mesh.aabb_local.min_), np.array(mesh.aabb_local.max_)
    return 0.5 * (lo + hi), np.maximum(hi - lo, 1e-3)


def _set_origin(el: ET.Element, placement: pin.SE3) -> None:
    origin = el.find("origin")
    if origin is None:
        origin = ET.SubElement(el, "origin")
    origin.set("xyz", " ".join(f"{v:.6g}" for v in placement.translation))
    origin.set("rpy", " ".join(f"{v:.6g}" for v in pin.rpy.matrixToRpy(placement.rotation)))


def _repair_meshes(root: ET.Element, urdf_path: Path, notes: Notes) -> bool:
    """Meshes MuJoCo cannot decode -> boxes; every mesh URI -> an absolute path. Returns whether
    a mesh was replaced."""
    dirs = package_dirs_for(urdf_path)
    replaced: dict[str, list[str]] = {}
    for link in root.iter("link"):
        for kind in ("visual", "collision"):
            for el in link.findall(kind):
                geometry = el.find("geometry")
                mesh = geometry.find("mesh") if geometry is not None else None
                if mesh is None:
                    continue
                uri = mesh.get("filename", "")
                path = resolve_package_uri(uri, dirs)
                if not path.is_absolute():
                    path = (urdf_path.parent / path).resolve()
                if path.suffix.lower() in MUJOCO_MESH_EXTENSIONS:
                    mesh.set("filename", str(path))
                    continue
                scale = np.array([float(s) for s in mesh.get("scale", "1 1 1").split()])
                center, size = _mesh_box(path, scale)
                geometry.remove(mesh)
                ET.SubElement(geometry, "box", size=" ".join(f"{s:.4g}" for s in size))
                _set_origin(el, _origin(el) * pin.SE3(np.eye(3), center))
                el.insert(0, ET.Comment(f" wbc robot init: {path.name} ({path.suffix}) -> its bounding box "))
                replaced.setdefault(path.suffix.lower(), []).append(f"{link.get('name')} {kind}")
    for suffix, where in replaced.items():
        notes.repairs.append(
            f"{len(where)} {suffix} mesh(es) MuJoCo cannot read replaced by their bounding boxes "
            f"(visual and collision): {', '.join(where[:6])}{' ...' if len(where) > 6 else ''}"
        )
    return bool(replaced)


def _inertia_element(inertial: ET.Element, inertia: np.ndarray) -> None:
    el = inertial.find("inertia")
    if el is None:
        el = ET.SubElement(inertial, "inertia")
    for key, (i, j) in {
        "ixx": (0, 0),
        "iyy": (1, 1),
        "izz": (2, 2),
        "ixy": (0, 1),
        "ixz": (0, 2),
        "iyz": (1, 2),
    }.items():
        el.set(key, f"{inertia[i, j]:.6g}")


def _read_inertial(link: ET.Element) -> tuple[float, np.ndarray] | None:
    inertial = link.find("inertial")
    if inertial is None:
        return None
    mass_el, el = inertial.find("mass"), inertial.find("inertia")
    try:
        mass = float(mass_el.get("value")) if mass_el is not None else 0.0
        keys = ("ixx", "iyy", "izz", "ixy", "ixz", "iyz")
        ixx, iyy, izz, ixy, ixz, iyz = (float(el.get(k, 0.0)) if el is not None else 0.0 for k in keys)
    except (TypeError, ValueError):
        return None
    return mass, np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])


def _repair_inertias(root: ET.Element, notes: Notes) -> bool:
    """Per link: unbalanced moments -> their mean; mass 0 with inertia -> inertia 0. Then per moving
    body (Pinocchio merges the fixed links as MuJoCo does): mass but no moments -> a 5 cm sphere on
    its link. Negative or missing masses are left to the load-time check (not guessable)."""
    changed = False
    links = {link.get("name"): link for link in root.iter("link")}
    for name, link in links.items():
        read = _read_inertial(link)
        if read is None:
            continue
        mass, inertia = read
        if not (math.isfinite(mass) and np.all(np.isfinite(inertia))) or mass < 0.0:
            continue
        moments = _moments(inertia)
        if mass == 0.0 and inertia.any():
            _inertia_element(link.find("inertial"), np.zeros((3, 3)))
            fix = "inertia zeroed (no mass)"
        elif not _balanced(moments):
            _inertia_element(link.find("inertial"), np.eye(3) * float(moments.sum()) / 3.0)
            fix = f"principal moments {np.round(moments, 6).tolist()} kg m^2 break A + B >= C: set to their mean"
        elif mass > 0.0 and moments[0] <= 1e-12:  # MuJoCo needs positive moments on every massive body
            _inertia_element(link.find("inertial"), inertia + np.eye(3) * 0.4 * mass * 0.05**2)
            fix = f"mass but no inertia: {_fix_sphere(mass)} added"
        else:
            continue
        link.insert(0, ET.Comment(f" wbc robot init: {fix} "))
        notes.repairs.append(f"link '{name}': {fix}")
        changed = True
    try:
        model = pin.buildModelFromXML(ET.tostring(root, encoding="unicode"), pin.JointModelFreeFlyer())
    except Exception:  # reported by the load that follows, with the file's name
        return changed
    children = {j.get("name"): j.find("child").get("link") for j in root.iter("joint") if j.find("child") is not None}
    for j in range(2, model.njoints):
        body = model.inertias[j]
        if body.mass <= 0.0 or _moments(body.inertia)[0] > 1e-12:
            continue
        link = links.get(children.get(model.names[j], ""))
        if link is None or link.find("inertial") is None:
            continue
        mass, inertia = _read_inertial(link)
        if mass <= 0.0:
            continue
        _inertia_element(link.find("inertial"), inertia + np.eye(3) * 0.4 * mass * 0.05**2)
        fix = f"moves with mass but no inertia: {_fix_sphere(mass)} added"
        link.insert(0, ET.Comment(f" wbc robot init: {fix} "))
        notes.repairs.append(f"link '{link.get('name')}' (joint '{model.names[j]}'): {fix}")
        changed = True
    return changed


# -- guesses on the model -----------------------------------------------------------------------


def _srdf_posture(srdf: Path, notes: Notes) -> dict[str, float]:
    try:
        root = ET.parse(srdf).getroot()
    except (ET.ParseError, OSError) as exc:
        raise ConfigError(f"--srdf {srdf}: cannot read it: {exc}") from exc
    states = {s.get("name"): s for s in root.iter("group_state")}
    if not states:
        notes.problems.append(f"{srdf.name} has no group_state: the posture starts from zero")
        return {}
    name = next((n for n in SRDF_STATES if n in states), next(iter(states)))
    posture, skipped = {}, []
    for joint in states[name].iter("joint"):
        try:
            posture[joint.get("name")] = float(joint.get("value"))
        except (TypeError, ValueError):  # a multi-DoF joint (the root's placement): not a posture value
            skipped.append(joint.get("name"))
    if skipped:
        notes.info.append(f"{srdf.name} group_state '{name}': not one number, skipped: {', '.join(skipped)}")
    notes.info.append(f"posture started from {srdf.name} group_state '{name}'")
    return posture


def _ancestors(model: pin.Model, j: int) -> list[int]:
    """Joints from the free flyer's child down to ``j`` (root first)."""
    chain = []
    while j > 1:
        chain.append(j)
        j = model.parents[j]
    return chain[::-1]


def _find_ankles(model: pin.Model) -> dict[str, int]:
    """The lowest joint on each side (y > 0 left) at the neutral configuration; deepest on ties."""
    data = model.createData()
    pin.forwardKinematics(model, data, pin.neutral(model))
    ankles = {}
    for side, sign in (("left", 1.0), ("right", -1.0)):
        candidates = [j for j in range(2, model.njoints) if sign * data.oMi[j].translation[1] > 1e-3]
        if not candidates:
            raise ModelError(f"no joint on the {side} side (y {'>' if sign > 0 else '<'} 0 at the neutral posture)")
        zmin = min(data.oMi[j].translation[2] for j in candidates)
        low = [j for j in candidates if data.oMi[j].translation[2] < zmin + 1e-3]
        ankles[side] = max(low, key=lambda j: len(_ancestors(model, j)))
    return ankles


def _geometry_boxes(model: pin.Model, urdf: Path, joint: int, kind: pin.GeometryType) -> list[np.ndarray]:
    """Corners (8 x 3, in the joint frame) of the bounding box of each ``kind`` geometry on ``joint``."""
    geom = pin.buildGeomFromUrdf(model, str(urdf), kind, package_dirs=[str(d) for d in package_dirs_for(urdf)])
    boxes = []
    for obj in geom.geometryObjects:
        if obj.parentJoint != joint:
            continue
        obj.geometry.computeLocalAABB()
        lo, hi = np.array(obj.geometry.aabb_local.min_), np.array(obj.geometry.aabb_local.max_)
        corners = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
        placement = obj.placement
        boxes.append(corners @ placement.rotation.T + placement.translation)
    return boxes


@dataclass(frozen=True)
class FootGuess:
    foot: Foot
    comment: str
    source: str  # the geometry the sole was sized from: collision or visual


def _guess_foot(model: pin.Model, urdf: Path, side: str, joint: int) -> FootGuess:
    sole_frames = [
        f for f in model.frames if f.parentJoint == joint and "sole" in f.name.lower() and f.type == pin.FrameType.BODY
    ]
    source = "collision"
    boxes = _geometry_boxes(model, urdf, joint, pin.GeometryType.COLLISION)
    if not boxes:
        source, boxes = "visual", _geometry_boxes(model, urdf, joint, pin.GeometryType.VISUAL)
    if not boxes:
        raise ModelError(
            f"{urdf}: the {side} foot (joint '{model.names[joint]}') has no collision or visual geometry to size "
            f"its sole: write {side}_foot by hand (docs/robots.md)"
        )
    points = np.vstack(boxes)  # joint frame
    joint_frame = model.getFrameId(model.names[joint], pin.FrameType.JOINT)
    link = next(f for f in model.frames if f.type == pin.FrameType.BODY and f.parentFrame == joint_frame)
    if sole_frames:
        frame = sole_frames[0]
        local = (points - frame.placement.translation) @ frame.placement.rotation
        foot = Foot(frame=frame.name, sole=_sole(local))
        comment = f"the URDF's sole link on the {side} ankle joint '{model.names[joint]}'"
    else:
        local = (points - link.placement.translation) @ link.placement.rotation
        offset = (0.0, 0.0, round(float(local[:, 2].min()), 4))
        local = local - np.array(offset)
        foot = Foot(frame=f"{side}_sole", sole=_sole(local), parent=link.name, offset=offset)
        comment = f"no sole link: created on '{link.name}' at the bottom of its {source} geometry"
    return FootGuess(foot, comment, source)


def _sole(points: np.ndarray) -> Sole:
    """The bounding rectangle of ``points`` (sole frame) [m], rounded to the millimetre inwards."""
    lo, hi = points[:, :2].min(axis=0), points[:, :2].max(axis=0)
    return Sole(
        x_min=math.ceil(lo[0] * 1000) / 1000,
        x_max=math.floor(hi[0] * 1000) / 1000,
        y_min=math.ceil(lo[1] * 1000) / 1000,
        y_max=math.floor(hi[1] * 1000) / 1000,
    )


def _guess_torso(model: pin.Model, base: str) -> str:
    words = ("torso", "trunk", "chest")
    candidates = [
        f
        for f in model.frames
        if f.type == pin.FrameType.BODY and any(w in f.name.lower() for w in words) and "arm" not in f.name.lower()
    ]
    if not candidates:
        return base
    return max(candidates, key=lambda f: len(_ancestors(model, f.parentJoint))).name


def _pitch_joints(robot: RobotModel, chain: list[int]) -> list[int]:
    """Joints of ``chain`` turning about the world y axis at the neutral configuration."""
    model, data = robot.model, robot.data
    q = pin.neutral(model)
    pin.computeJointJacobians(model, data, q)
    out = []
    for j in chain:
        axis = pin.getJointJacobian(model, data, j, pin.ReferenceFrame.WORLD)[3:, model.joints[j].idx_v]
        if abs(axis[1]) > 0.9 * np.linalg.norm(axis):
            out.append(j)
    return out


def _leg_length(robot: RobotModel, chain: list[int], sole: int) -> float:
    """Hip pitch axis to sole, straight legs (neutral configuration) [m]."""
    pitch = _pitch_joints(robot, chain) or chain
    data = robot.model.createData()
    pin.framesForwardKinematics(robot.model, data, pin.neutral(robot.model))
    return float(data.oMi[pitch[0]].translation[2] - data.oMf[sole].translation[2])


@dataclass(frozen=True)
class Posture:
    q: np.ndarray
    com_error: float  # [m] horizontal CoM to the middle of the soles
    tilt: float  # [rad] largest sole tilt
    height_gap: float  # [m] sole height difference


def solve_posture(
    robot: RobotModel, start: dict[str, float], base_drop: float | None, iterations: int = 200
) -> Posture:
    """Standing posture by damped Gauss-Newton on the joints and the base position (base orientation
    kept at the neutral one, as :class:`RobotModel` places it): both soles flat (their neutral
    orientation) at height 0 at their start (x, y), the CoM over the middle of the soles, the base at
    ``start height - base_drop`` [m] (``None``: the start height), the rest close to ``start``."""
    model, data = robot.model, robot.model.createData()
    q = pin.neutral(model)
    for name, value in start.items():
        q[robot.joint_q_index(name)] = value
    lo = np.where(np.isfinite(robot.q_lower), robot.q_lower, -np.pi)
    hi = np.where(np.isfinite(robot.q_upper), robot.q_upper, np.pi)
    q[7:] = np.clip(q[7:], lo, hi)
    q_start = q.copy()
    ids = [robot.foot_frame_ids[s] for s in ("left", "right")]
    pin.framesForwardKinematics(model, data, q)
    base_id = model.getFrameId(robot.config.base_frame)
    z_base = data.oMf[base_id].translation[2] - min(data.oMf[i].translation[2] for i in ids)
    z_target = z_base - (base_drop or 0.0)
    targets = [pin.SE3(np.eye(3), np.array([*data.oMf[i].translation[:2], 0.0])) for i in ids]
    free = np.r_[0:3, 6 : model.nv]  # base position and the joints
    for _ in range(iterations):
        pin.computeJointJacobians(model, data, q)
        pin.framesForwardKinematics(model, data, q)
        rows, errors, weights = [], [], []
        for i, target in zip(ids, targets):
            oMf = data.oMf[i]
            J = pin.getFrameJacobian(model, data, i, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
            rows.append(J)
            errors.append(np.r_[target.translation - oMf.translation, pin.log3(target.rotation @ oMf.rotation.T)])
            weights.append(np.full(6, 10.0))
        com = pin.centerOfMass(model, data, q)
        Jc = pin.jacobianCenterOfMass(model, data, q)
        mid = 0.5 * (targets[0].translation + targets[1].translation)
        rows.append(Jc[:2])
        errors.append(mid[:2] - com[:2])
        weights.append(np.full(2, 10.0))
        Jb = pin.getFrameJacobian(model, data, base_id, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
        rows.append(Jb[2:3])
        errors.append(np.array([z_target - data.oMf[base_id].translation[2]]))
        weights.append(np.array([10.0]))
        J = np.vstack(rows)[:, free]
        e = np.concatenate(errors)
        w = np.concatenate(weights)
        reg = 1e-2  # pulls the joints towards the start posture (and damps the steps)
        H = J.T @ (w[:, None] * J) + reg * np.eye(len(free))
        g = J.T @ (w * e) + reg * _posture_error(q, q_start, free, model)
        dv = np.zeros(model.nv)
        dv[free] = np.linalg.solve(H, g)
        q = pin.integrate(model, q, dv)
        q[7:] = np.clip(q[7:], lo, hi)
        if np.abs(e).max() < 1e-7:
            break
    pin.framesForwardKinematics(model, data, q)
    com = pin.centerOfMass(model, data, q)
    soles = [data.oMf[i] for i in ids]
    mid = 0.5 * (soles[0].translation + soles[1].translation)
    tilt = max(math.acos(min(1.0, float(s.rotation[2, 2]))) for s in soles)
    return Posture(
        q, float(np.linalg.norm(com[:2] - mid[:2])), tilt, abs(soles[0].translation[2] - soles[1].translation[2])
    )


def _base_height(robot: RobotModel, posture: dict[str, float]) -> float:
    """Height [m] of the base frame above the lower sole at ``posture`` (others 0)."""
    q = pin.neutral(robot.model)
    for name, value in posture.items():
        q[robot.joint_q_index(name)] = value
    data = robot.model.createData()
    pin.framesForwardKinematics(robot.model, data, q)
    base = data.oMf[robot.model.getFrameId(robot.config.base_frame)].translation[2]
    return float(base - min(data.oMf[i].translation[2] for i in robot.foot_frame_ids.values()))


def _posture_error(q: np.ndarray, q_start: np.ndarray, free: np.ndarray, model: pin.Model) -> np.ndarray:
    d = pin.difference(model, q, q_start)
    d[:6] = 0.0  # the base is placed by the tasks
    return d[free]


def _bend_knees(robot: RobotModel, chains: dict[str, list[int]], posture: dict[str, float]) -> None:
    """A starting guess with the knees bent (the IK then lowers the base; from straight knees it
    could not): unless bent 0.1 rad already, the middle pitch joint of each leg bent 0.4 rad to the
    side its limits allow most, the first and last (hip and ankle pitch) 0.2 rad against it."""
    for chain in chains.values():
        pitch = _pitch_joints(robot, chain)
        if len(pitch) < 3:
            continue
        names = [robot.model.names[j] for j in pitch]
        knee = names[len(names) // 2]
        i = robot.joint_index(knee)
        if abs(posture.get(knee, 0.0)) >= 0.1:  # already bent (an SRDF posture)
            continue
        sign = 1.0 if abs(robot.q_upper[i]) >= abs(robot.q_lower[i]) else -1.0
        posture.update({knee: 0.4 * sign, names[0]: -0.2 * sign, names[-1]: -0.2 * sign})


# -- walker scaling ----------------------------------------------------------------------------------


def scaled_walker(leg_length: float, separation: float, sole: Sole) -> tuple[dict, dict]:
    """Walker section for a robot of ``leg_length`` [m], stance ``separation`` [m] and ``sole``:
    ``(values, comments)``. Durations scale as ``sqrt(L)`` (equal Froude number), lengths as ``L``,
    angles not at all: ``v = c L^k`` with ``c`` the geometric mean of the G1 and Talos sections'
    (``config/walker.yaml``), so that the scaling sits between the two shipped robots."""
    from zmp_walker import load_walker_config

    g1, talos = load_walker_config(robot="g1"), load_walker_config(robot="talos")

    def scale(key: str, k: float, digits: int = 3):
        a, b = getattr(g1, key), getattr(talos, key)
        c = math.sqrt(a / ANCHORS["g1"] ** k * b / ANCHORS["talos"] ** k)
        value = round(c * leg_length**k, digits)
        return value, f"G1 {a:g}, Talos {b:g}: {c:.3g} x (leg length {leg_length:.3f} m)^{k:g}"

    values, comments = {}, {}
    for key, k in WALKER_EXPONENTS.items():
        values[key], comments[key] = scale(key, k)
    width, length = sole.y_max - sole.y_min, sole.x_max - sole.x_min
    values["min_step_width"] = round(min(width + 2 * g1.foot_clearance, 0.8 * separation), 3)
    comments["min_step_width"] = f"sole width {width:.3f} m + 2 x foot_clearance, at most 0.8 x the stance"
    room = 0.5 * (g1.max_step_width - 0.237 + talos.max_step_width - 0.17)  # G1 and Talos stances [m]
    values["max_step_width"] = round(separation + room * leg_length / ANCHORS["talos"], 3)
    comments["max_step_width"] = f"stance {separation:.3f} m + {room:.3f} m x leg length / Talos's (G1, Talos: ~0.17 m)"
    values["zmp_margin"] = round(min(0.01, 0.08 * width), 4)
    comments["zmp_margin"] = "8 % of the sole width, at most 1 cm (G1 0.005 on 6 cm, Talos 0.01 on 13 cm)"
    values["edge_margin"] = round(min(0.05, 0.12 * length), 3)
    comments["edge_margin"] = "12 % of the sole length, at most 5 cm (G1 0.02 on 17 cm, Talos 0.05 on 20 cm)"
    return values, comments


# -- the file ------------------------------------------------------------------------------------------


def _urdf_spec(path: Path, yaml_dir: Path) -> str:
    try:
        rel = path.resolve().relative_to(example_robot_data_dir().resolve())
        return f"example-robot-data:{rel.as_posix()}"
    except (ValueError, ModelError):
        pass
    try:
        return path.resolve().relative_to(yaml_dir.resolve()).as_posix()
    except ValueError:
        return str(path.resolve())


def _num(x: float) -> str:
    return f"{x:.6g}" if x != 0 else "0.0"


def init_robot(urdf: Path, out: Path, srdf: Path | None = None, name: str | None = None) -> dict:
    """Write a starting robot YAML at ``out`` (and ``<out stem>.urdf`` when the URDF needs repairs).

    Returns:
        a summary: the files written, repairs, guesses and problems left.

    Raises:
        ConfigError / ModelError: unusable input, naming the file.
    """
    urdf, out = Path(urdf), Path(out)
    if not urdf.is_file():
        raise ConfigError(f"URDF: file not found: {urdf}")
    if srdf is not None and not Path(srdf).is_file():
        raise ConfigError(f"--srdf: file not found: {srdf}")
    if out.suffix not in (".yaml", ".yml"):
        raise ConfigError(f"-o {out}: the robot file must end in .yaml or .yml")
    notes = Notes()
    try:
        tree = ET.parse(urdf)
    except (ET.ParseError, OSError) as exc:
        raise ConfigError(f"{urdf}: cannot read the URDF: {exc}") from exc
    root = tree.getroot()
    name = name or root.get("name") or urdf.stem
    out.parent.mkdir(parents=True, exist_ok=True)
    repaired = _repair_meshes(root, urdf, notes)
    repaired = _repair_inertias(root, notes) or repaired
    model_urdf = urdf
    if repaired:
        model_urdf = out.with_suffix(".urdf")
        if model_urdf.resolve() == urdf.resolve():  # never over the user's URDF
            model_urdf = out.with_name(f"{out.stem}.repaired.urdf")
        root.insert(0, ET.Comment(f" {urdf} repaired by wbc robot init for MuJoCo and Pinocchio (see the comments) "))
        tree.write(model_urdf, encoding="unicode", xml_declaration=False)

    model = pin.buildModelFromUrdf(str(model_urdf), pin.JointModelFreeFlyer())
    ankles = _find_ankles(model)
    feet = {side: _guess_foot(model, model_urdf, side, j) for side, j in ankles.items()}
    base = next(f.name for f in model.frames if f.type == pin.FrameType.BODY)
    torso = _guess_torso(model, base)
    config = RobotConfig(
        name=name,
        description="",
        urdf=str(model_urdf.resolve()),
        base_frame=base,
        torso_frame=torso,
        left_foot=feet["left"].foot,
        right_foot=feet["right"].foot,
    )
    robot = RobotModel(config, str(out))
    chains = {side: _ancestors(model, j) for side, j in ankles.items()}
    legs = {side: _leg_length(robot, chain, robot.foot_frame_ids[side]) for side, chain in chains.items()}
    leg = 0.5 * (legs["left"] + legs["right"])

    start = {k: v for k, v in (_srdf_posture(Path(srdf), notes) if srdf else {}).items() if k in robot.joint_names}
    # how far the start posture lowers the base from straight legs
    straight = _base_height(robot, {})
    _bend_knees(robot, chains, start)
    drop_now = straight - _base_height(robot, start)
    base_drop = None if drop_now >= MIN_KNEE_DROP * leg else KNEE_DROP * leg - drop_now
    posture = solve_posture(robot, start, base_drop)
    if posture.tilt > 1e-3 or posture.com_error > 1e-3 or posture.height_gap > 1e-3:
        notes.problems.append(
            f"the posture IK did not converge: sole tilt {math.degrees(posture.tilt):.2f} deg, CoM "
            f"{posture.com_error * 1000:.1f} mm from the middle of the soles, soles "
            f"{posture.height_gap * 1000:.1f} mm apart in height: edit reference_posture"
        )
    q = posture.q
    data = robot.model.createData()
    pin.framesForwardKinematics(robot.model, data, q)
    soles = [data.oMf[robot.foot_frame_ids[s]] for s in ("left", "right")]
    separation = float(abs(soles[0].translation[1] - soles[1].translation[1]))
    sole_z = min(s.translation[2] for s in soles)
    base_height = float(data.oMf[robot.model.getFrameId(base)].translation[2] - sole_z)
    frame_comments = {}
    forward = soles[0].rotation[:, 0] + soles[1].rotation[:, 0]
    for key, frame in (("base_frame", base), ("torso_frame", torso)):
        R = data.oMf[robot.model.getFrameId(frame)].rotation
        yaw = math.degrees(math.atan2(np.cross(forward, R[:, 0])[2], float(forward @ R[:, 0])))
        up = math.degrees(math.acos(max(-1.0, min(1.0, float(R[2, 2])))))
        if abs(yaw) > FRAME_TOLERANCE_DEG or up > FRAME_TOLERANCE_DEG:
            problem = (
                f"{key} '{frame}' does not face forward with z up like the soles (x turned {yaw:.0f} deg, z tilted "
                f"{up:.0f} deg); the robot file has no rotation field: pick a link that does, or add one to the URDF"
            )
            notes.problems.append(problem)
            frame_comments[key] = "CHECK: " + problem
    walker, walker_comments = scaled_walker(leg, separation, robot.feet["left"].sole)

    lines = [
        f"# {name}: starting robot file written by 'wbc robot init {urdf.name}'. Every value below is a guess:",
        "# check it with 'wbc check THIS_FILE', then 'wbc stand --robot THIS_FILE' and 'wbc walk --robot THIS_FILE'.",
        f"# mass {robot.mass:.2f} kg, {robot.na} joints, leg length {leg:.3f} m (hip pitch axis to sole, straight).",
    ]
    for repair in notes.repairs:
        lines.append(f"# repaired: {repair}")
    for info in notes.info:
        lines.append(f"# note: {info}")
    for problem in notes.problems:
        lines.append(f"# PROBLEM: {problem}")
    lines += [
        f"name: {name}",
        f"description: {name} from {urdf.name} (wbc robot init)",
        f"urdf: {_urdf_spec(model_urdf, out.parent)}"
        + ("   # a copy of the URDF with the repairs listed above" if repaired else ""),
        f"base_frame: {base}    # the URDF root link"
        + (f"  # {frame_comments['base_frame']}" if "base_frame" in frame_comments else ""),
        f"torso_frame: {torso}    # deepest link named torso/trunk/chest, else the root"
        + (f"  # {frame_comments['torso_frame']}" if "torso_frame" in frame_comments else ""),
    ]
    for side in ("left", "right"):
        foot, comment = feet[side].foot, feet[side].comment
        s = foot.sole
        lines.append(f"{side}_foot:")
        lines.append(f"  frame: {foot.frame}    # {comment}")
        if foot.parent is not None:
            lines.append(f"  parent: {foot.parent}")
            lines.append(f"  offset: [{', '.join(_num(v) for v in foot.offset)}]    # [m] in the parent link")
        lines.append(
            f"  sole: {{x_min: {s.x_min:g}, x_max: {s.x_max:g}, y_min: {s.y_min:g}, y_max: {s.y_max:g}}}"
            f"    # [m] bounding box of the foot's {feet[side].source} geometry in the sole frame"
        )
    lines.append("friction: 0.7    # friction coefficient the controller assumes [-] (the default)")
    lines.append(
        f"reference_posture:    # [rad] IK: soles flat and level, CoM {posture.com_error * 1000:.1f} mm from the "
        f"middle of the soles, base {base_height:.3f} m above them"
    )
    for name_j, value in zip(robot.joint_names, q[7:]):
        if abs(value) > 5e-6:
            lines.append(f"  {name_j}: {value:.5f}")
    effort = np.array(robot.model.effortLimit[6:], dtype=float)
    lines.append("torque_limits:    # [N m] the URDF's effort")
    missing = []
    for name_j, e in zip(robot.joint_names, effort):
        if np.isfinite(e) and e > 0:
            lines.append(f"  {name_j}: {e:g}")
        else:
            missing.append(name_j)
    default_tau = max(1.0, round(robot.mass * 1.0))
    lines.append(
        f"default_torque_limit: {default_tau:g}    # [N m] for joints without an effort in the URDF "
        f"(1 N m per kg of robot): {', '.join(missing) if missing else 'none'}"
    )
    kd = round(0.2 * robot.mass, 1)
    lines += [
        "damping:    # safe-mode damping tau = -kd v [N m s/rad]",
        f"  default: {kd:g}    # 0.2 per kg of robot (Talos 20 for 90 kg, G1 3 for 33 kg)",
        "  joints: {}",
        f"fall_height: {round(0.6 * base_height, 3):g}    # [m] base below this is a fall: 0.6 x its standing height",
        "walker:    # merged onto the base values of config/walker.yaml",
    ]
    for key, value in walker.items():
        lines.append(f"  {key}: {value:g}    # {walker_comments[key]}")
    out.write_text("\n".join(lines) + "\n")
    return {
        "robot_file": str(out),
        "urdf": str(model_urdf),
        "urdf_repaired": repaired,
        "mass_kg": round(robot.mass, 3),
        "leg_length_m": round(leg, 3),
        "feet": {side: feet[side].foot.frame for side in feet},
        "base_frame": base,
        "torso_frame": torso,
        "repairs": notes.repairs,
        "notes": notes.info,
        "problems": notes.problems,
    }
