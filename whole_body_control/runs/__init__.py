"""Runs in the simulation, in one process: stand and walk (:mod:`.runner`,
:mod:`.walk`), the robustness scenarios (:mod:`.scenarios`), the demo, the
benchmarks, run reports and MCAP logs, and the robot tools (``wbc robot init``,
``wbc check``).  They drive the core (controller, walker stage, control stage)
and :mod:`whole_body_control.sim`; nothing below imports them."""
