"""Replay a trace against a target: the in-process service (real engine), the
virtual-time simulator, or a running ROS 2 planner."""
