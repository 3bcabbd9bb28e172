"""One BLAS / OpenMP thread per process, set before NumPy, SciPy and Pinocchio load their
thread pools (import this first).

The controller's matrices are small: threads only add overhead and spin on shared cores
(a G1 walk runs 15 % faster with one), and multithreaded reductions are not bitwise
reproducible, so the same seed would not give the same run (G1 walks drift apart after
about 1 s).  In a node under SCHED_FIFO the pool's threads inherit the node's priority
and busy-wait for work beside the control loop.  An explicit setting in the environment
wins.
"""

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
