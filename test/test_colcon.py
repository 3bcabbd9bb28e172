"""``colcon build`` of the package (ament_python) in a temporary workspace installs
what ``ros2 launch`` / ``ros2 run`` look for:

* ``share/whole_body_control/{package.xml, launch/, config/, urdf/}``,
* ``share/ament_index/resource_index/packages/whole_body_control``,
* one executable per console script in ``lib/whole_body_control/``,
* the Python packages in ``lib/python3.X/site-packages``.

Needs Debian's ``colcon`` and ``python3-colcon-ros`` (``.ci/setup.sh`` installs them);
skipped when ``colcon`` is not on PATH. The build runs offline in ~5 s.
"""

from __future__ import annotations

import ast
import configparser
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = "whole_body_control"
SOURCE = Path(__file__).resolve().parent.parent
# Not part of the package: the build must not need them.
NOT_COPIED = (".git", ".venv", "venv", "build", "install", "log", "test", "bench", "docs", "reports")
ROS_EXECUTABLES = {"mujoco_bridge", "whole_body_controller", "zmp_walker_node", "state_estimator"}

pytestmark = pytest.mark.skipif(
    shutil.which("colcon") is None,
    reason="colcon is not on PATH (apt-get install colcon python3-colcon-ros python3-setuptools)",
)


def console_scripts() -> dict[str, str]:
    """``name -> "module:function"`` from ``setup.py``'s ``entry_points["console_scripts"]``."""
    tree = ast.parse((SOURCE / "setup.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value == "console_scripts":
                    specs = ast.literal_eval(value)
                    return {name.strip(): target.strip() for name, target in (s.split("=") for s in specs)}
    raise AssertionError("setup.py has no console_scripts entry point")


@pytest.fixture(scope="module")
def install(tmp_path_factory) -> Path:
    """``colcon build`` of a copy of the package; returns ``install/whole_body_control``."""
    ws = tmp_path_factory.mktemp("colcon_ws")
    generated = shutil.ignore_patterns("__pycache__", "*.egg-info", ".*_cache")

    def ignore(folder: str, names: list[str]) -> set[str]:
        top = {n for n in names if n in NOT_COPIED} if Path(folder) == SOURCE else set()
        return top | generated(folder, names)

    shutil.copytree(SOURCE, ws / "src" / PACKAGE, ignore=ignore)
    # No variables of a sourced ROS / colcon workspace: the build sees only this workspace.
    env = {"PATH": os.environ["PATH"], "HOME": str(ws), "COLCON_HOME": str(ws / ".colcon"), "LANG": "C.UTF-8"}
    cmd = [
        "colcon",
        "--log-base",
        str(ws / "log"),
        "build",
        "--base-paths",
        str(ws / "src"),
        "--build-base",
        str(ws / "build"),
        "--install-base",
        str(ws / "install"),
        "--executor",
        "sequential",
    ]
    result = subprocess.run(cmd, cwd=ws, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"colcon build failed:\n{result.stdout}\n{result.stderr}"
    prefix = ws / "install" / PACKAGE
    assert prefix.is_dir(), f"no {prefix} after colcon build:\n{result.stdout}"
    return prefix


def site_packages(prefix: Path) -> Path:
    found = sorted(prefix.glob("lib/python3.*/site-packages"))
    assert len(found) == 1, f"expected one lib/python3.*/site-packages under {prefix}, found {found}"
    return found[0]


def test_share_layout(install):
    share = install / "share" / PACKAGE
    expected = [
        "package.xml",
        "launch/sim.launch.py",
        "launch/bringup.launch.py",
        "config/wbc.yaml",
        "config/walker.yaml",
        "config/ros/hardware.yaml",
        "config/ros/sim.yaml",
        "config/ros/fastdds_participant.xml",
        "config/ros/fastdds_localhost.xml",
        "urdf/wbc_humanoid.urdf",
    ]
    missing = [rel for rel in expected if not (share / rel).is_file()]
    assert not missing, f"missing from {share}: {missing}"
    robots = sorted(p.name for p in (SOURCE / "config" / "robots").glob("*.yaml"))
    installed = sorted(p.name for p in (share / "config" / "robots").glob("*.yaml"))
    assert robots and installed == robots
    assert (install / "share" / "ament_index" / "resource_index" / "packages" / PACKAGE).is_file()


def test_python_packages_installed(install):
    sp = site_packages(install)
    for package in (PACKAGE, "zmp_walker"):
        assert (sp / package / "__init__.py").is_file(), f"{package} not installed in {sp}"
    assert not list(sp.glob("test")), "the tests must not be installed as a package"


def test_executables(install):
    """Every console script is an executable in ``lib/<package>`` (where ``ros2 run`` looks),
    and its ``module:function`` target exists in the installed Python packages."""
    scripts = console_scripts()
    assert ROS_EXECUTABLES <= set(scripts), f"setup.py console_scripts: {sorted(scripts)}"
    sp = site_packages(install)
    for name, target in scripts.items():
        exe = install / "lib" / PACKAGE / name
        assert exe.is_file(), f"{exe} not installed"
        assert os.access(exe, os.X_OK), f"{exe} is not executable"
        # The first python3 on PATH (a venv with rclpy) runs it, not colcon's interpreter.
        assert exe.read_text().splitlines()[0] == "#!/usr/bin/env python3"
        module, function = target.split(":")
        source = sp.joinpath(*module.split(".")).with_suffix(".py")
        assert source.is_file(), f"{name}: {source} not installed"
        defined = {n.name for n in ast.parse(source.read_text()).body if isinstance(n, ast.FunctionDef)}
        assert function in defined, f"{name}: {module} defines no {function}()"
    # The metadata the generated scripts load their entry point from.
    (egg_info,) = sp.glob(f"{PACKAGE}-*.egg-info")
    entry_points = configparser.ConfigParser()
    entry_points.read(egg_info / "entry_points.txt")
    assert dict(entry_points["console_scripts"]) == scripts


def test_entry_points_import_from_install(install):
    """This interpreter (the venv, with rclpy) imports each executable's ``main`` from the
    installed copy, not from the source tree; nothing is run."""
    pytest.importorskip("rclpy")
    targets = sorted(set(console_scripts().values()))
    sp = site_packages(install)
    code = (
        "import importlib, sys\n"
        f"for target in {targets!r}:\n"
        "    module, function = target.split(':')\n"
        "    m = importlib.import_module(module)\n"
        "    assert callable(getattr(m, function)), target\n"
        f"    assert m.__file__.startswith({str(sp)!r}), (target, m.__file__)\n"
    )
    run_installed(install, code)


def test_installed_code_finds_its_share(install):
    """The installed copy reads config/ and urdf/ from ``share/whole_body_control`` of its
    own prefix, with no ``AMENT_PREFIX_PATH`` (no sourced workspace) to point there."""
    share = install / "share" / PACKAGE
    code = (
        "from zmp_walker.base.share import share_dir\n"
        "from zmp_walker.config import default_config_path, load_walker_config\n"
        f"assert str(share_dir()) == {str(share)!r}, share_dir()\n"
        f"assert str(default_config_path()) == {str(share / 'config' / 'walker.yaml')!r}, default_config_path()\n"
        "load_walker_config(robot='talos')\n"
        "from whole_body_control.robot import robots_dir\n"
        f"assert str(robots_dir()) == {str(share / 'config' / 'robots')!r}, robots_dir()\n"
    )
    run_installed(install, code)


def run_installed(install: Path, code: str) -> None:
    """Run ``code`` in this interpreter with the installed Python packages first on the path."""
    env = {k: v for k, v in os.environ.items() if k != "AMENT_PREFIX_PATH"}
    env.update(PYTHONPATH=str(site_packages(install)), MUJOCO_GL="osmesa")
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=install, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
