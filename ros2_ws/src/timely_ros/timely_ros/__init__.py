"""Timely on ROS 2: planner node, skill-executor nodes, bring-up, CLI."""
