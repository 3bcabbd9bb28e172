"""ROS 2 shells around the ROS-free core (rclpy; imported only by the nodes).

Path of the data (see ``docs/ros.md`` for the topic contract)::

    mujoco_bridge (or the robot) --/joint_states, /imu, /odom--> zmp_walker node
        --/walker/reference--> whole_body_controller --/<controller>/commands--> robot

Every message <-> numpy conversion lives in :mod:`.conversions`; the node graph
(which nodes, parameter files, remappings) in :mod:`.graph`; the nodes are
:mod:`.mujoco_bridge`, :mod:`.controller_node`, :mod:`.walker_node` and
:mod:`.state_estimator`, each with a ``main()``.
"""

from whole_body_control import _threads  # noqa: F401, I001 - before any node imports NumPy
