# First, before any test module imports numpy: OpenBLAS's kernels pinned (zmp_walker._blas),
# so that the tests compute what the console commands and CI compute on any CPU.
import zmp_walker._blas  # noqa: F401
