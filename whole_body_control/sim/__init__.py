"""The simulation layer: MuJoCo built from the robot's URDF (:mod:`.simulation`), the
Pinocchio/MuJoCo consistency check (:mod:`.consistency`) and run videos
(:mod:`.video`).  The controller core never imports it; the hardware ROS nodes do
not either (``test/test_layers.py``)."""

from whole_body_control.sim.simulation import (
    IMU_SITE,
    ROOT_JOINT,
    SIDES,
    ImuReading,
    IndexMap,
    SimConfig,
    Simulation,
    build_spec,
    q_to_qpos,
    qpos_to_q,
    qvel_to_v,
    v_to_qvel,
)

__all__ = [
    "IMU_SITE",
    "ROOT_JOINT",
    "SIDES",
    "ImuReading",
    "IndexMap",
    "SimConfig",
    "Simulation",
    "build_spec",
    "q_to_qpos",
    "qpos_to_q",
    "qvel_to_v",
    "v_to_qvel",
]
