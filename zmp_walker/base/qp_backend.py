"""proxsuite, loaded in its baseline (SSE2) build: QP results independent of heap addresses.

On a CPU with AVX2 or AVX-512, ``import proxsuite`` loads the matching vectorized
build.  Those builds compute in 32- or 64-byte packets, but part of a dense QP's
workspace is only as aligned as ``malloc`` makes it (16 bytes; apparently the
byte buffer ``ldl_stack``): Eigen then peels a different number of leading
elements, so sums are rounded in a different order depending on where the heap
put the QP object.  The same QP (same inputs, same settings) solved by freshly
made QP objects differs in the last bits for a third to a half of them, and
fresh processes running the same seeded walk diverged (G1).  The baseline
build's 16-byte packets are always aligned; at this stack's sizes it is about as
fast.  ``test/test_wbc_controller.py`` checks the property.

Import ``proxsuite`` from here (``from zmp_walker.base.qp_backend import proxsuite``;
``whole_body_control.qp_backend`` re-exports it) so that whichever module comes
first loads the baseline build.
"""

from __future__ import annotations

import sys
import types
import warnings


def _load():
    if "proxsuite" not in sys.modules:
        # proxsuite's __init__ picks its build with proxsuite.instructionset: answer "no".
        stub = types.ModuleType("proxsuite.instructionset")
        stub.has_AVX512F = stub.has_AVX2 = lambda: False
        sys.modules[stub.__name__] = stub
        try:
            import proxsuite
        finally:
            del sys.modules[stub.__name__]
    import proxsuite

    build = proxsuite.proxqp.dense.QP.__module__.split(".")[1]
    if build != "proxsuite_pywrap":
        warnings.warn(
            f"proxsuite was imported before zmp_walker.base.qp_backend and uses its {build} build:"
            " QP results may depend on heap addresses (runs not reproducible)",
            RuntimeWarning,
            stacklevel=3,
        )
    return proxsuite, build


proxsuite, BUILD = _load()
