"""Where the package's data is: ``config/``, ``urdf/``, ``launch/`` and ``package.xml``.

One ROS package, ``whole_body_control`` (``package.xml``), installs both Python
packages and these folders: a source checkout holds them next to
``zmp_walker/``; an install (colcon, ``pip install``) puts them in
``<prefix>/share/whole_body_control``.  Found by file layout, without importing
``whole_body_control`` (or ament_index, which needs a sourced ROS).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from zmp_walker.base.errors import ConfigError

__all__ = ["PACKAGE", "prefixes", "share_dir"]

PACKAGE = "whole_body_control"  # the ROS package (package.xml) that installs config/, urdf/, launch/


def _checkout() -> Path | None:
    """The source checkout holding this module, or ``None`` for an installed copy."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "package.xml").is_file() and (root / "config").is_dir() else None


def prefixes() -> list[Path]:
    """Install prefixes to search, in order: this module's own
    (``<prefix>/lib/python3.X/site-packages/zmp_walker/base/share.py``: a colcon
    install, whatever ``AMENT_PREFIX_PATH`` says), ``sys.prefix`` (pip), then
    ``$AMENT_PREFIX_PATH`` (a sourced ROS workspace)."""
    here = Path(__file__).resolve().parents
    found = [here[5]] if len(here) > 5 else []
    found.append(Path(sys.prefix))
    found += [Path(p) for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    return list(dict.fromkeys(found))


def share_dir(package: str = PACKAGE) -> Path:
    """The share folder of ``package``: the source checkout (for ``whole_body_control``),
    else the first ``<prefix>/share/<package>`` holding a ``package.xml`` (:func:`prefixes`).

    Raises:
        ConfigError: no such folder.
    """
    checkout = _checkout() if package == PACKAGE else None
    if checkout is not None:
        return checkout
    candidates = [prefix / "share" / package for prefix in prefixes()]
    for candidate in candidates:
        if (candidate / "package.xml").is_file():
            return candidate
    looked = ", ".join(str(c) for c in candidates)
    raise ConfigError(f"cannot find the share folder of '{package}' (config/, urdf/); looked in {looked}")
