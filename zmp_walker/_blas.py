"""OpenBLAS's kernels pinned to its Haswell (AVX2) set: results that do not depend on the CPU.

numpy's and scipy's OpenBLAS is built with ``DYNAMIC_ARCH``: when it loads, it picks the
kernels of the CPU it runs on (Haswell or Zen on AVX2 machines, SkylakeX or Cooperlake on
AVX-512 ones), and those sum products in different orders.  A closed loop amplifies the last
bits: on an AVX-512 machine, Talos's standing push of 0.35 m/s (``push_standing_0.35``)
falls at 2.74 s where the Haswell kernels, and every AVX2 machine, keep it standing
(2026-12-06), so a scenario's verdict would depend on the machine CI happens to get.

``OPENBLAS_CORETYPE`` must be set before OpenBLAS loads, that is before the first ``import
numpy``: ``zmp_walker`` and ``whole_body_control`` import this module first (so do the
console commands, and the child processes they start inherit it; ``test/conftest.py`` for
pytest).  A value already in the environment is kept; a CPU without AVX2 and FMA, or not
x86-64, is left to OpenBLAS's own choice.  When numpy was imported first it is too late:
a warning says so (set ``OPENBLAS_CORETYPE=Haswell`` in the environment instead).
"""

from __future__ import annotations

import os
import platform
import sys
import warnings

CORETYPE = "Haswell"


def _has_avx2_fma() -> bool:
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = line.split(":", 1)[1].split()
                    return "avx2" in flags and "fma" in flags
    except OSError:
        pass
    return False


def pin() -> str | None:
    """Set ``OPENBLAS_CORETYPE`` (unless set) before numpy loads; the value in force, or None."""
    if "OPENBLAS_CORETYPE" in os.environ:
        return os.environ["OPENBLAS_CORETYPE"]
    if not _has_avx2_fma():
        return None
    if "numpy" in sys.modules:
        warnings.warn(
            "numpy was imported before zmp_walker / whole_body_control: OpenBLAS kept the kernels of"
            f" this CPU, so results may differ from other machines' (set OPENBLAS_CORETYPE={CORETYPE})",
            RuntimeWarning,
            stacklevel=3,
        )
    os.environ["OPENBLAS_CORETYPE"] = CORETYPE  # for the processes this one starts
    return CORETYPE


pin()
