"""QoS profiles of the stack's topics, in one place (no MuJoCo, no node imports)."""

from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

# State (joint states, IMU, odometry, wrenches): only the newest sample matters.
STATE_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
# Effort commands: only the newest command matters (forward_command_controller keeps the last one).
COMMAND_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
# Walking reference trajectories: a controller that subscribes late (start-up, restart)
# still gets the newest ones (transient local), so lockstep never waits on a lost first batch.
REFERENCE_QOS = QoSProfile(depth=4, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
