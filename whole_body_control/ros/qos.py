"""QoS profiles of the stack's topics, in one place (no MuJoCo, no node imports)."""

from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy


def state_qos(depth: int, best_effort: bool = False) -> QoSProfile:
    """State subscriptions keeping ``depth`` samples.  The walker in lockstep with DCM feedback
    needs every state in order (a walker busy with a batch catches up on stamps, ~5 us each):
    the state that makes a batch due is the one measured, and a dropped state would make
    another one measured.  In real time only the newest matters (a deep queue would make a
    late walker work through stale states).

    ``best_effort`` (real time): a best-effort reader matches a reliable writer (a
    ros2_control broadcaster, the bridge) and takes part in no acknowledgements: the writer
    neither waits for it nor resends to it, and the reader keeps the newest sample."""
    reliability = ReliabilityPolicy.BEST_EFFORT if best_effort else ReliabilityPolicy.RELIABLE
    return QoSProfile(depth=int(depth), reliability=reliability)


# State (joint states, IMU, odometry, wrenches): only the newest sample matters.
STATE_QOS = state_qos(1)


# Effort commands: only the newest command matters (forward_command_controller keeps the last one).
COMMAND_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
# Walking reference trajectories: each one carries only the samples past the previous one,
# so none may be lost: a deep history on both sides (a controller busy for a few walker
# periods still gets every batch), transient local (a controller that subscribes late still
# gets the walker's first batches, so lockstep never waits on a lost one).
REFERENCE_QOS = QoSProfile(
    depth=64, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)
