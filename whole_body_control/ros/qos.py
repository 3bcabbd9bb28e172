"""QoS profiles of the stack's topics, in one place (no MuJoCo, no node imports)."""

from rclpy.qos import QoSProfile, ReliabilityPolicy

# State (joint states, IMU, odometry, wrenches): only the newest sample matters.
STATE_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
# Effort commands: only the newest command matters (forward_command_controller keeps the last one).
COMMAND_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
