"""OpenBLAS's kernels are pinned (zmp_walker._blas) so that results do not depend on the CPU:
checked in fresh processes, where numpy is not yet loaded."""

import os
import subprocess
import sys

import pytest

from zmp_walker import _blas

CORENAME = """
import ctypes, glob, os, numpy
corename = "unknown"
for lib in glob.glob(os.path.join(os.path.dirname(numpy.__file__), "..", "numpy.libs", "*openblas*")):
    for name in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename", "openblas_get_corename"):
        f = getattr(ctypes.CDLL(lib), name, None)
        if f is not None and corename == "unknown":
            f.restype = ctypes.c_char_p
            corename = f().decode()
print(corename)
"""


def run(code: str, **env) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"} | env
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environ, check=True)


needs_avx2 = pytest.mark.skipif(not _blas._has_avx2_fma(), reason="an x86-64 CPU with AVX2 and FMA")


@needs_avx2
def test_importing_the_package_first_pins_the_kernels_for_this_process_and_its_children():
    out = run("import whole_body_control, os\n" + CORENAME + "print(os.environ['OPENBLAS_CORETYPE'])")
    corename, child_env = out.stdout.split()
    assert corename in ("Haswell", "unknown")  # unknown: this numpy's OpenBLAS has no query
    assert child_env == _blas.CORETYPE
    assert "RuntimeWarning" not in out.stderr


@needs_avx2
def test_numpy_first_is_too_late_and_says_so():
    out = run("import numpy, zmp_walker")
    assert "OPENBLAS_CORETYPE=Haswell" in out.stderr


def test_a_coretype_in_the_environment_is_kept():
    out = run("import zmp_walker, os; print(os.environ['OPENBLAS_CORETYPE'])", OPENBLAS_CORETYPE="Zen")
    assert out.stdout.strip() == "Zen"
