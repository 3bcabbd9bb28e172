"""Robot models: every configured robot loads with a consistent model and a
reference posture standing flat on the ground; the project's own humanoid is
physically valid (masses, inertias, symmetry, geometry); configuration mistakes
are errors that say where they are."""

from __future__ import annotations

import math
import runpy
import xml.etree.ElementTree as ET

import numpy as np
import pinocchio as pin
import pytest

from whole_body_control.errors import ConfigError
from whole_body_control.robot import available_robots, load_robot, robots_dir, share_dir

ROBOTS = available_robots()
MASS_RANGE = {"talos": (85.0, 100.0), "g1": (30.0, 40.0), "wbc_humanoid": (45.0, 60.0)}  # [kg]
FLAT_TOL = 0.01  # [rad] sole tilt allowed at q_ref (g1.yaml's posture leaves 6 mrad)

URDF_DIR = share_dir() / "urdf"
HUMANOID_URDF = URDF_DIR / "wbc_humanoid.urdf"


@pytest.fixture(scope="module", params=ROBOTS)
def robot(request):
    return load_robot(request.param, fresh=False)


@pytest.fixture(scope="module")
def humanoid():
    return load_robot("wbc_humanoid", fresh=False)


@pytest.fixture(scope="module")
def humanoid_xml() -> ET.Element:
    return ET.parse(HUMANOID_URDF).getroot()


def test_the_three_robots_are_configured():
    assert {"talos", "g1", "wbc_humanoid"} <= set(ROBOTS)


# -- every robot ------------------------------------------------------------------


def test_model_dimensions(robot):
    assert robot.nv == robot.nq - 1  # free-flyer quaternion: one more q than v
    assert robot.na == robot.nv - 6 == len(robot.joint_names)
    assert robot.q_ref.shape == (robot.nq,)
    assert np.all(np.isfinite(robot.tau_max)) and np.all(robot.tau_max > 0)
    assert np.all(robot.kd_safe >= 0)


def _damping_growth(robot, kd: np.ndarray, period: float, q: np.ndarray) -> float:
    """Largest eigenvalue modulus of ``v -> v - period M(q)^-1 S^T diag(kd) S v``: a
    safe-mode command ``-kd v`` held over ``period`` on the free robot (the base's six
    modes stay at 1: nothing pushes it)."""
    M = pin.crba(robot.model, robot.model.createData(), q)
    M = np.triu(M) + np.triu(M, 1).T
    gain = np.zeros((robot.nv, robot.nv))
    gain[6:, 6:] = np.diag(kd)
    return float(np.abs(np.linalg.eigvals(np.eye(robot.nv) - period * np.linalg.solve(M, gain))).max())


@pytest.mark.parametrize("period", [0.001, 0.002, 0.005])
def test_the_safe_damping_is_stable_at_the_rate_it_is_commanded(robot, period):
    rng = np.random.default_rng(7)
    kd = robot.safe_damping(period)
    assert np.all(kd <= robot.kd_safe) and np.all(kd >= 0)
    if period == 0.001:  # the heaviest joint (a hip, the waist) keeps most of its gain
        heavy = int(np.argmax(robot._joint_inertia()))
        assert kd[heavy] >= 0.85 * robot.kd_safe[heavy]
    worst = 0.0
    for k in range(12):
        q = robot.q_ref.copy()
        if k:
            q[7:] = np.clip(q[7:] + rng.normal(0.0, 0.3, robot.na), robot.q_lower, robot.q_upper)
        worst = max(worst, _damping_growth(robot, kd, period, q))
    assert worst <= 1.0 + 1e-9
    # the configured gains as they are grow Talos's grippers at every rate, G1's wrists (rotor
    # inertia 4 g m^2 with its armature, 0.35 without) from 5 ms
    if robot.name == "talos" or (robot.name == "g1" and period >= 0.005):
        assert _damping_growth(robot, robot.kd_safe, period, robot.q_ref) > 2.0


def test_mass_is_plausible(robot):
    low, high = MASS_RANGE.get(robot.name, (20.0, 150.0))
    assert low <= robot.mass <= high


def test_soles_flat_on_the_ground_at_q_ref(robot):
    for side in ("left", "right"):
        oMs = robot.sole_placement(side, robot.q_ref)
        assert oMs.translation[2] == pytest.approx(0.0, abs=1e-9), side
        tilt = math.acos(min(1.0, oMs.rotation[2, 2]))  # angle between the sole normal and world z
        assert tilt < FLAT_TOL, f"{side} sole tilted by {tilt:.4f} rad"


def test_feet_apart_laterally_and_base_above_fall_height(robot):
    left = robot.sole_placement("left", robot.q_ref).translation
    right = robot.sole_placement("right", robot.q_ref).translation
    sole = robot.config.left_foot.sole
    assert left[1] - right[1] > sole.y_max - sole.y_min  # the two sole rectangles do not overlap
    assert left[0] == pytest.approx(right[0], abs=1e-6)
    assert robot.q_ref[2] > robot.config.fall_height


def test_com_above_the_support_polygon_at_q_ref(robot):
    com = pin.centerOfMass(robot.model, robot.data, robot.q_ref)
    corners = []
    for side, foot in robot.feet.items():
        oMs = robot.sole_placement(side, robot.q_ref)
        corners += [oMs.act(c) for c in foot.sole.corners()]
    corners = np.array(corners)
    # both soles flat and side by side: the support polygon is the bounding box of their corners
    assert corners[:, 0].min() < com[0] < corners[:, 0].max()
    assert corners[:, 1].min() < com[1] < corners[:, 1].max()
    assert com[2] > 0.5 * robot.q_ref[2]


def _holding_torques(robot, side: str, point: np.ndarray) -> np.ndarray:
    """Joint torques [N m] that hold the whole weight pushing along the sole's normal at ``point``
    (sole frame) at q_ref, the links' own weight left out: RNEA with gravity off and the force
    as an external one on the sole's joint (not the Jacobian that ``load_bearing_sole`` uses)."""
    model = pin.Model(robot.model)
    model.gravity.linear[:] = 0.0
    frame = model.frames[robot.foot_frame_ids[side]]
    force = frame.placement.rotation @ np.array([0.0, 0.0, robot.mass * 9.81])
    at = frame.placement.act(point)
    fext = [pin.Force.Zero() for _ in range(model.njoints)]
    fext[frame.parentJoint] = pin.Force(force, np.cross(at, force))
    zero = np.zeros(model.nv)
    return pin.rnea(model, model.createData(), robot.q_ref, zero, zero, pin.StdVec_Force(fext))[6:]


def test_each_leg_holds_the_whole_weight_on_its_load_bearing_sole(robot):
    """Every corner of ``load_bearing_sole`` holds the weight within the torque limits, and it is
    the whole sole where every corner of the sole does."""
    for side, foot in robot.feet.items():
        held, joint = robot.load_bearing_sole(side)
        for corner in held.corners():
            load = np.abs(_holding_torques(robot, side, corner)) / robot.tau_max
            worst = int(np.argmax(load))
            assert load[worst] <= 1.0, f"{side} corner {corner[:2]}: {robot.joint_names[worst]} at {load[worst]:.2f}"
        whole = all((np.abs(_holding_torques(robot, side, c)) <= robot.tau_max).all() for c in foot.sole.corners())
        assert (held == foot.sole) == whole == (joint == ""), side


def test_the_load_bearing_sole_ends_where_the_ankle_gives_out():
    """G1's sole reaches its toe spheres (x 0.12 m); its 35 N m ankle pitch holds the 327 N
    only to 0.107, and 1 mm further it does not."""
    robot = load_robot("g1", fresh=False)
    sole = robot.feet["left"].sole
    held, joint = robot.load_bearing_sole("left")
    assert joint == "left_ankle_pitch_joint" and sole.x_max == 0.12
    assert (held.x_min, held.y_min, held.y_max) == (sole.x_min, sole.y_min, sole.y_max)
    ankle = robot.joint_names.index(joint)
    for x, holds in ((held.x_max, True), (held.x_max + 0.001, False)):
        for y in (held.y_min, held.y_max):
            tau = _holding_torques(robot, "left", np.array([x, y, 0.0]))
            assert (abs(tau[ankle]) <= robot.tau_max[ankle]) == holds, (x, y, tau[ankle])


def test_q_ref_within_joint_limits(robot):
    q = robot.q_ref[7:]
    assert np.all(q >= robot.q_lower) and np.all(q <= robot.q_upper)


# -- wbc_humanoid ------------------------------------------------------------------


def _inertial(link: ET.Element) -> tuple[float, np.ndarray, np.ndarray] | None:
    """Mass [kg], centre of mass [m] and 3x3 inertia [kg m^2] of a URDF link, or None."""
    el = link.find("inertial")
    if el is None:
        return None
    origin = el.find("origin")
    assert origin is None or origin.get("rpy", "0 0 0").split() == ["0", "0", "0"]
    com = np.array([float(x) for x in origin.get("xyz").split()]) if origin is not None else np.zeros(3)
    i = {k: float(v) for k, v in el.find("inertia").attrib.items()}
    inertia = np.array(
        [
            [i["ixx"], i["ixy"], i["ixz"]],
            [i["ixy"], i["iyy"], i["iyz"]],
            [i["ixz"], i["iyz"], i["izz"]],
        ]
    )
    return float(el.find("mass").get("value")), com, inertia


def test_humanoid_dimensions(humanoid):
    assert humanoid.nq == 28 and humanoid.nv == 27  # 12 legs + torso yaw + 8 arms
    assert 45.0 <= humanoid.mass <= 60.0
    assert 0.8 <= humanoid.q_ref[2] <= 0.9  # pelvis height, knees bent [m]
    names = set(humanoid.joint_names)
    for side in ("left", "right"):
        for j in ("hip_yaw", "hip_roll", "hip_pitch", "knee", "ankle_pitch", "ankle_roll"):
            assert f"{side}_{j}_joint" in names
        for j in ("shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow"):
            assert f"{side}_{j}_joint" in names


def test_humanoid_inertias_are_physical(humanoid_xml, humanoid):
    links = humanoid_xml.findall("link")
    massive = 0
    for link in links:
        inertial = _inertial(link)
        if inertial is None:
            assert link.get("name").endswith(("sole", "hand")), f"{link.get('name')} has no mass"
            continue
        massive += 1
        mass, _, inertia = inertial
        name = link.get("name")
        assert mass > 0, name
        eig = np.linalg.eigvalsh(inertia)
        assert eig[0] > 0, f"{name}: inertia not positive definite: {eig}"
        # principal moments of a real body: each at most the sum of the other two
        assert eig[2] <= eig[0] + eig[1] + 1e-12, f"{name}: triangle inequality violated: {eig}"
    assert massive >= 20
    assert sum(_inertial(link)[0] for link in links if _inertial(link)) == pytest.approx(humanoid.mass)
    for inertia in humanoid.model.inertias[1:]:  # bodies as Pinocchio merged them (head on torso)
        eig = np.linalg.eigvalsh(inertia.inertia)
        assert inertia.mass > 0 and eig[0] > 0 and eig[2] <= eig[0] + eig[1] + 1e-12


def test_humanoid_is_left_right_symmetric(humanoid_xml, humanoid):
    flip = np.diag([1.0, -1.0, 1.0])  # mirror y
    links = {link.get("name"): link for link in humanoid_xml.findall("link")}
    lefts = [name for name in links if name.startswith("left_")]
    assert len(lefts) == 12
    for left in lefts:
        right = "right_" + left.removeprefix("left_")
        a, b = _inertial(links[left]), _inertial(links[right])
        assert (a is None) == (b is None), left
        if a is None:
            continue
        assert a[0] == b[0], left
        np.testing.assert_allclose(flip @ a[1], b[1], atol=1e-12, err_msg=left)
        np.testing.assert_allclose(flip @ a[2] @ flip, b[2], atol=1e-12, err_msg=left)
    for name in humanoid.joint_names:
        if not name.startswith("left_"):
            continue
        i, k = humanoid.joint_index(name), humanoid.joint_index("right_" + name.removeprefix("left_"))
        mirrored = ("roll" in name) or ("yaw" in name)
        lo, hi = humanoid.q_lower[k], humanoid.q_upper[k]
        assert (humanoid.q_lower[i], humanoid.q_upper[i]) == ((-hi, -lo) if mirrored else (lo, hi)), name
        assert humanoid.tau_max[i] == humanoid.tau_max[k] and humanoid.v_max[i] == humanoid.v_max[k]
    pin.centerOfMass(humanoid.model, humanoid.data, humanoid.q_ref)
    assert humanoid.data.com[0][1] == pytest.approx(0.0, abs=1e-9)


def test_humanoid_joint_limits_are_realistic(humanoid):
    tau = dict(zip(humanoid.joint_names, humanoid.tau_max, strict=True))
    for name, limit in tau.items():
        if "hip" in name or "knee" in name:
            assert 150 <= limit <= 300, name
        elif "ankle" in name:
            assert 100 <= limit <= 150, name
        elif any(k in name for k in ("shoulder", "elbow")):
            assert 30 <= limit <= 60, name
    assert np.all((humanoid.v_max >= 5) & (humanoid.v_max <= 15))
    assert np.all(humanoid.q_upper - humanoid.q_lower > 0.5)


def _vertical_extent(geometry, oMg: pin.SE3) -> tuple[float, float]:
    """Lowest and highest world z [m] of a coal box, cylinder or sphere."""
    R, z = oMg.rotation, oMg.translation[2]
    kind = type(geometry).__name__
    if kind == "Sphere":
        half = geometry.radius
    elif kind == "Box":
        half = float(np.abs(R[2]) @ geometry.halfSide)
    elif kind == "Cylinder":
        c = abs(R[2, 2])
        half = c * geometry.halfLength + geometry.radius * math.sqrt(max(0.0, 1 - c * c))
    else:
        raise AssertionError(f"unexpected geometry {kind}")
    return z - half, z + half


def _extents(robot, q):
    geom = pin.buildGeomFromUrdf(robot.model, str(robot.urdf_path), pin.GeometryType.COLLISION)
    gdata = geom.createData()
    pin.updateGeometryPlacements(robot.model, robot.data, geom, gdata, q)
    return [_vertical_extent(o.geometry, gdata.oMg[i]) for i, o in enumerate(geom.geometryObjects)]


def test_humanoid_height_and_sole_at_the_bottom_of_the_foot(humanoid):
    q = humanoid.q_ref.copy()
    q[7:] = 0.0  # legs straight
    q[2] = 0.0
    q[2] = -humanoid.sole_placement("left", q).translation[2]
    extents = _extents(humanoid, q)
    assert min(e[0] for e in extents) == pytest.approx(0.0, abs=1e-9)
    assert 1.5 <= max(e[1] for e in extents) <= 1.6  # standing height [m]
    # at q_ref nothing goes below the soles, which lie on the ground
    assert min(e[0] for e in _extents(humanoid, humanoid.q_ref)) == pytest.approx(0.0, abs=1e-9)


def test_humanoid_sole_rectangle_is_the_foot_box(humanoid_xml, humanoid):
    joints = {j.get("name"): j for j in humanoid_xml.findall("joint")}
    links = {link.get("name"): link for link in humanoid_xml.findall("link")}
    for side, foot in humanoid.feet.items():
        sole_joint = joints[f"{side}_sole_joint"]
        assert sole_joint.get("type") == "fixed" and sole_joint.find("child").get("link") == foot.frame
        assert sole_joint.find("origin").get("rpy", "0 0 0").split() == ["0", "0", "0"]
        offset = np.array([float(x) for x in sole_joint.find("origin").get("xyz").split()])
        parent = links[sole_joint.find("parent").get("link")]
        boxes = [c for c in parent.findall("collision") if c.find("geometry/box") is not None]
        assert len(boxes) == 1
        size = np.array([float(x) for x in boxes[0].find("geometry/box").get("size").split()])
        center = np.array([float(x) for x in boxes[0].find("origin").get("xyz").split()]) - offset
        lo, hi = center - size / 2, center + size / 2
        assert lo[2] == pytest.approx(0.0, abs=1e-12)  # the sole frame is on the bottom face
        s = foot.sole
        np.testing.assert_allclose([s.x_min, s.x_max, s.y_min, s.y_max], [lo[0], hi[0], lo[1], hi[1]], atol=1e-12)


def test_humanoid_urdf_uses_primitives_only(humanoid_xml):
    assert humanoid_xml.find(".//mesh") is None
    for link in humanoid_xml.findall("link"):
        if link.find("inertial") is not None:
            assert link.findall("visual") and link.findall("collision"), link.get("name")


def test_humanoid_urdf_is_generated_by_its_script():
    build_urdf = runpy.run_path(str(URDF_DIR / "make_wbc_humanoid.py"))["build_urdf"]
    assert build_urdf() == HUMANOID_URDF.read_text(), "run urdf/make_wbc_humanoid.py and commit the result"


# -- configuration errors ------------------------------------------------------------


def _robot_yaml(tmp_path, old: str, new: str):
    text = (robots_dir() / "wbc_humanoid.yaml").read_text()
    text = text.replace("urdf: ../../urdf/", f"urdf: {robots_dir().parent.parent / 'urdf'}/")  # the copy moves
    assert old in text
    path = tmp_path / "broken.yaml"
    path.write_text(text.replace(old, new, 1))
    return path


def test_unknown_key_names_the_file_and_the_closest_key(tmp_path):
    path = _robot_yaml(tmp_path, "friction:", "frictoin:")
    with pytest.raises(ConfigError) as info:
        load_robot(path)
    message = str(info.value)
    assert str(path) in message and "frictoin" in message and "did you mean 'friction'" in message


def test_unknown_nested_key_names_its_path(tmp_path):
    path = _robot_yaml(tmp_path, "fall_height:", "fall_hieght:")
    with pytest.raises(ConfigError, match="did you mean 'fall_height'"):
        load_robot(path)
    path = _robot_yaml(tmp_path, "{x_min: -0.08", "{xmin: -0.08")
    with pytest.raises(ConfigError, match=r"left_foot\.sole\.xmin.*did you mean 'x_min'"):
        load_robot(path)


def test_unknown_joint_in_reference_posture(tmp_path):
    path = _robot_yaml(tmp_path, "left_knee_joint: 0.7", "left_knee_jiont: 0.7")
    with pytest.raises(ConfigError) as info:
        load_robot(path)
    message = str(info.value)
    assert str(path) in message and "reference_posture" in message and "left_knee_jiont" in message
    assert "did you mean 'left_knee_joint'" in message


def test_armature_reaches_the_mass_matrix_and_names_an_unknown_joint(tmp_path):
    """``armature``: the rotor inertias add to the joints' diagonal of Pinocchio's mass
    matrix (MuJoCo's side: test_sim); a joint it names must exist."""
    path = _robot_yaml(
        tmp_path, "fall_height:", "armature: {default: 0.01, joints: {left_knee_joint: 0.03}}\nfall_height:"
    )
    plain, geared = load_robot(robots_dir() / "wbc_humanoid.yaml"), load_robot(path)
    knee = geared.joint_names.index("left_knee_joint")
    expected = np.full(geared.na, 0.01)
    expected[knee] = 0.03
    np.testing.assert_array_equal(geared.armature, expected)
    diag = [np.diag(pin.crba(r.model, r.model.createData(), plain.q_ref))[6:] for r in (plain, geared)]
    np.testing.assert_allclose(diag[1] - diag[0], expected, atol=1e-12)
    path = _robot_yaml(tmp_path, "fall_height:", "armature: {joints: {left_knee_jiont: 0.03}}\nfall_height:")
    with pytest.raises(ConfigError) as info:
        load_robot(path)
    message = str(info.value)
    assert str(path) in message and "armature.joints" in message and "did you mean 'left_knee_joint'" in message


def test_unknown_robot_name_suggests_one():
    with pytest.raises(ConfigError, match="did you mean 'wbc_humanoid'"):
        load_robot("wbc_humanoi")
