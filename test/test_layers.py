"""Import layering, checked in fresh interpreters (``sys.modules`` after the imports):

* ``zmp_walker`` (every module) loads no ``whole_body_control`` module: what both
  need (errors, YAML config loading, the QP backend, the share lookup) is in
  ``zmp_walker.base``, below both;
* ``zmp_walker.base`` imports nothing of ``zmp_walker`` above it (source check);
* the hardware ROS nodes (controller, state estimator, walker) load no MuJoCo and
  none of the runs;
* the controller core (every module of ``whole_body_control`` outside ``sim``,
  ``runs`` and ``ros``, and the CLI) imports neither the simulation nor the runs
  nor ROS (source check, function bodies included).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parent.parent
HARDWARE_NODES = (
    "whole_body_control.ros.controller_node",
    "whole_body_control.ros.state_estimator",
    "whole_body_control.ros.walker_node",
)


def package_modules(package: str) -> list[str]:
    """Dotted names of the modules of ``package`` in the source tree."""
    root = SOURCE / package
    names = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(SOURCE).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def loaded_after_import(modules: list[str]) -> set[str]:
    """``sys.modules`` of a fresh interpreter after importing ``modules`` from this checkout."""
    code = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        f"assert sys.modules[{modules[0]!r}].__file__.startswith({str(SOURCE)!r})\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SOURCE), "MUJOCO_GL": "osmesa"}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=SOURCE, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return set(json.loads(result.stdout.splitlines()[-1]))


def imported_names(path: Path) -> set[str]:
    """Every module named by an import statement of ``path``, function bodies included."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_zmp_walker_loads_no_whole_body_control():
    modules = package_modules("zmp_walker")
    assert "zmp_walker.base.yaml_config" in modules
    loaded = loaded_after_import(modules)
    assert not {m for m in loaded if m.split(".")[0] == "whole_body_control"}


def test_zmp_walker_source_never_imports_whole_body_control():
    """Also the imports inside functions, which the import check above does not run."""
    for path in sorted((SOURCE / "zmp_walker").rglob("*.py")):
        above = {n for n in imported_names(path) if n.split(".")[0] == "whole_body_control"}
        assert not above, f"{path.relative_to(SOURCE)} imports {sorted(above)}"


def test_base_imports_nothing_above_it():
    for path in sorted((SOURCE / "zmp_walker" / "base").rglob("*.py")):
        above = {
            n
            for n in imported_names(path)
            if n.split(".")[0] in ("zmp_walker", "whole_body_control") and not n.startswith("zmp_walker.base")
        }
        assert not above, f"{path.relative_to(SOURCE)} imports {sorted(above)}"


def test_shared_concepts_are_one_object():
    """The names ``whole_body_control`` keeps for the base are the base's objects."""
    import whole_body_control.errors as wbc_errors
    import whole_body_control.qp_backend as wbc_qp
    import whole_body_control.yaml_config as wbc_yaml
    import zmp_walker.errors as walker_errors
    from zmp_walker.base import errors, qp_backend, yaml_config

    assert wbc_errors.WbcError is errors.WbcError and wbc_errors.ConfigError is errors.ConfigError
    assert walker_errors.ConfigError is errors.ConfigError
    assert issubclass(walker_errors.WalkerError, wbc_errors.WbcError)
    assert issubclass(errors.ConfigError, errors.WbcError) and issubclass(errors.ConfigError, ValueError)
    assert wbc_yaml.from_dict is yaml_config.from_dict and wbc_qp.proxsuite is qp_backend.proxsuite


@pytest.mark.parametrize("node", HARDWARE_NODES)
def test_hardware_node_loads_no_mujoco(node):
    pytest.importorskip("rclpy")
    loaded = loaded_after_import([node])
    assert "mujoco" not in loaded
    assert "whole_body_control.sim" not in loaded


CORE_EXCEPTIONS = {"cli.py"}  # the command line drives everything


def test_the_core_imports_no_simulation_runs_or_ros():
    layers = ("whole_body_control.sim", "whole_body_control.runs", "whole_body_control.ros", "rclpy", "mujoco")
    core = [p for p in sorted((SOURCE / "whole_body_control").glob("*.py")) if p.name not in CORE_EXCEPTIONS]
    assert {p.name for p in core} >= {"controller.py", "hqp.py", "control_stage.py", "walker_stage.py"}
    for path in core:
        above = {n for n in imported_names(path) if any(n == x or n.startswith(x + ".") for x in layers)}
        assert not above, f"whole_body_control/{path.name} imports {sorted(above)}"


def test_hardware_nodes_load_none_of_the_runs():
    loaded = loaded_after_import(list(HARDWARE_NODES))
    assert not {m for m in loaded if m.startswith("whole_body_control.runs")}
    assert not {m for m in loaded if m.startswith("whole_body_control.sim")}


@pytest.mark.parametrize("node", HARDWARE_NODES)
def test_a_node_runs_numpy_on_one_thread_without_being_told(node):
    """ros2 launch starts a node without ``wbc``'s environment: importing it must still leave
    BLAS with one thread (a pool's threads inherit the node's SCHED_FIFO and spin beside the
    control loop), before NumPy loads; an explicit setting wins."""
    pytest.importorskip("rclpy")
    code = f"import {node}, os, numpy\nprint(os.environ['OPENBLAS_NUM_THREADS'], os.environ['OMP_NUM_THREADS'])\n"
    base = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    for extra, expected in (({}, "1 1"), ({"OPENBLAS_NUM_THREADS": "2"}, "2 1")):
        env = {**base, **extra, "PYTHONPATH": str(SOURCE)}
        result = subprocess.run(
            [sys.executable, "-c", code], cwd=SOURCE, env=env, capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.split("\n")[-2] == expected, (extra, result.stdout)
