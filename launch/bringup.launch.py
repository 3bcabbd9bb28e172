"""Hardware graph: zmp_walker + whole_body_controller + state_estimator next to ros2_control.

ros2_control provides /joint_states (joint_state_broadcaster), /imu, /<side>_foot/wrench
and a forward_command_controller (interface_name effort) named `controller_name`.
The graph is defined once in whole_body_control.ros.graph.hardware_graph.
    ros2 launch whole_body_control bringup.launch.py robot:=talos controller_name:=effort_controller
"""

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription
from whole_body_control.ros.graph import hardware_graph


def _nodes(context):
    def arg(name):
        return LaunchConfiguration(name).perform(context)

    specs = hardware_graph(
        robot=arg("robot"),
        params_file=arg("params_file") or None,
        controller_name=arg("controller_name"),
        walker=arg("walker").lower() == "true",
        use_sim_time=arg("use_sim_time").lower() == "true",
    )
    return [Node(**s.launch_kwargs()) for s in specs]


def generate_launch_description():
    return LaunchDescription(
        [
            DeclareLaunchArgument("robot", default_value="talos", description="robot name (config/robots/<name>.yaml)"),
            DeclareLaunchArgument(
                "controller_name",
                default_value="effort_controller",
                description="forward_command_controller (effort) receiving /<controller_name>/commands",
            ),
            DeclareLaunchArgument("walker", default_value="true", description="run the zmp_walker node"),
            DeclareLaunchArgument("use_sim_time", default_value="false", description="use /clock"),
            DeclareLaunchArgument(
                "params_file", default_value="", description="parameter YAML (empty: config/ros/hardware.yaml)"
            ),
            OpaqueFunction(function=_nodes),
        ]
    )
