"""Hardware graph: zmp_walker + whole_body_controller next to ros2_control.

ros2_control provides /joint_states (joint_state_broadcaster), an IMU
(imu_sensor_broadcaster), optionally foot force/torque broadcasters, and a
forward_command_controller (interface_name effort) named `controller_name`, whose
`joints` the controller reads.  Every topic the graph reads is an argument with
ros2_control's default.  The graph is defined once in
whole_body_control.ros.graph.hardware_graph.
    ros2 launch whole_body_control bringup.launch.py robot:=talos controller_name:=effort_controller
"""

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription
from whole_body_control.ros.graph import IMU, JOINT_STATES, hardware_graph


def _nodes(context):
    def arg(name):
        return LaunchConfiguration(name).perform(context)

    def flag(name):
        return arg(name).lower() == "true"

    specs = hardware_graph(
        robot=arg("robot"),
        params_file=arg("params_file") or None,
        controller_name=arg("controller_name"),
        walker=flag("walker"),
        use_sim_time=flag("use_sim_time"),
        joint_states_topic=arg("joint_states_topic"),
        imu_topic=arg("imu_topic"),
        left_wrench_topic=arg("left_wrench_topic"),
        right_wrench_topic=arg("right_wrench_topic"),
        estimator_node=flag("estimator_node"),
        lockstep=flag("lockstep"),
    )
    return [Node(**s.launch_kwargs()) for s in specs]


def generate_launch_description():
    return LaunchDescription(
        [
            DeclareLaunchArgument("robot", default_value="talos", description="robot name or robot YAML path"),
            DeclareLaunchArgument(
                "controller_name",
                default_value="effort_controller",
                description="forward_command_controller (effort) receiving /<controller_name>/commands",
            ),
            DeclareLaunchArgument(
                "joint_states_topic", default_value=JOINT_STATES, description="joint_state_broadcaster topic"
            ),
            DeclareLaunchArgument("imu_topic", default_value=IMU, description="imu_sensor_broadcaster topic"),
            DeclareLaunchArgument(
                "left_wrench_topic", default_value="", description="left foot force/torque topic (empty: none)"
            ),
            DeclareLaunchArgument(
                "right_wrench_topic", default_value="", description="right foot force/torque topic (empty: none)"
            ),
            DeclareLaunchArgument("walker", default_value="true", description="run the zmp_walker node"),
            DeclareLaunchArgument("use_sim_time", default_value="false", description="use /clock"),
            DeclareLaunchArgument(
                "lockstep", default_value="false", description="a simulated robot stepping once per command"
            ),
            DeclareLaunchArgument(
                "estimator_node",
                default_value="false",
                description="run the state_estimator node (default: the controller estimates in its process)",
            ),
            DeclareLaunchArgument(
                "params_file", default_value="", description="parameter YAML (empty: config/ros/hardware.yaml)"
            ),
            OpaqueFunction(function=_nodes),
        ]
    )
