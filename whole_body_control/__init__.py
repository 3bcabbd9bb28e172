"""Prioritized QP whole-body control for humanoid robots.

The package root stays light: import submodules explicitly
(``whole_body_control.robot``, ``.controller``, ``.sim``) so that tools that
only need the configuration loader do not pay for Pinocchio or MuJoCo.
"""

import zmp_walker._blas  # noqa: F401  (first: OpenBLAS's kernels, before numpy loads it)

__version__ = "0.1.0"
