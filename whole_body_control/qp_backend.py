"""proxsuite in its baseline (SSE2) build: :mod:`zmp_walker.base.qp_backend`, shared with
``zmp_walker``'s MPC, under the name this package's modules use."""

from zmp_walker.base.qp_backend import BUILD, proxsuite

__all__ = ["BUILD", "proxsuite"]
