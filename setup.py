"""ament_python build of whole_body_control (also works with ``pip install -e .``).

Installs the Python packages ``whole_body_control`` and ``zmp_walker``, and the
share files the code finds through ``whole_body_control.robot.share_dir()``:
``share/whole_body_control/{package.xml, config/..., urdf/..., launch/...}``.
"""

from pathlib import Path

from setuptools import find_packages, setup

PACKAGE = "whole_body_control"
HERE = Path(__file__).resolve().parent


def share_files(folder: str, pattern: str) -> list[tuple[str, list[str]]]:
    """``data_files`` entries for the files of ``folder`` matching ``pattern``,
    keeping subfolders (``config/robots/g1.yaml`` -> ``share/<pkg>/config/robots``)."""
    by_dir: dict[str, list[str]] = {}
    for path in sorted((HERE / folder).glob(pattern)):
        if path.is_file() and "__pycache__" not in path.parts:
            rel = path.relative_to(HERE)
            by_dir.setdefault(str(Path("share", PACKAGE, rel.parent)), []).append(str(rel))
    return sorted(by_dir.items())


setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(include=[PACKAGE, f"{PACKAGE}.*", "zmp_walker", "zmp_walker.*"], exclude=["test", "test.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        *share_files("launch", "*.py"),
        *share_files("config", "**/*.yaml"),
        *share_files("config", "**/*.xml"),
        *share_files("urdf", "*"),
    ],
    # ROS 2 itself (rclpy, message packages) is deliberately not listed: it comes from
    # the system ROS install (rosdep, package.xml) or from requirements-ros.txt.
    install_requires=[
        "numpy>=1.24",
        "scipy>=1.10",
        "pyyaml>=6.0",
        "pin>=3.0",
        "proxsuite>=0.6",
        "daqp>=0.6",  # the level QPs (dual active set); proxsuite is the fallback
        "mujoco>=3.2",
        "example-robot-data>=4.1",
        "urdf-parser-py",
        "rosbags",
        "matplotlib",
        "imageio-ffmpeg",  # run videos (ships an ffmpeg binary)
    ],
    extras_require={"test": ["pytest", "pytest-timeout"]},
    python_requires=">=3.10",
    zip_safe=False,
    maintainer="whole_body_control maintainers",
    maintainer_email="wbc@example.com",
    description="Prioritized QP whole-body torque control and ZMP walking for humanoid robots",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "wbc = whole_body_control.cli:main",
            "mujoco_bridge = whole_body_control.ros.mujoco_bridge:main",
            "whole_body_controller = whole_body_control.ros.controller_node:main",
            "zmp_walker_node = whole_body_control.ros.walker_node:main",
            "state_estimator = whole_body_control.ros.state_estimator:main",
        ],
    },
)
