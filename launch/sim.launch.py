"""Simulation graph: mujoco_bridge + zmp_walker + whole_body_controller.

The graph (nodes, parameter files, remappings, use_sim_time) is defined once in
whole_body_control.ros.graph.sim_graph; this file only turns it into launch_ros nodes.
    ros2 launch whole_body_control sim.launch.py robot:=talos lockstep:=true
"""

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription
from whole_body_control.ros.graph import sim_graph


def _nodes(context):
    def arg(name):
        return LaunchConfiguration(name).perform(context)

    specs = sim_graph(
        robot=arg("robot"),
        lockstep=arg("lockstep").lower() == "true",
        params_file=arg("params_file") or None,
        headless=arg("headless").lower() == "true",
    )
    return [Node(**s.launch_kwargs()) for s in specs]


def generate_launch_description():
    return LaunchDescription(
        [
            DeclareLaunchArgument("robot", default_value="talos", description="robot name (config/robots/<name>.yaml)"),
            DeclareLaunchArgument("headless", default_value="true", description="no viewer (the bridge has none)"),
            DeclareLaunchArgument(
                "lockstep", default_value="true", description="true: one control period per command; false: real time"
            ),
            DeclareLaunchArgument(
                "params_file", default_value="", description="parameter YAML (empty: config/ros/sim.yaml)"
            ),
            OpaqueFunction(function=_nodes),
        ]
    )
