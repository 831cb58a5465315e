"""LRTrace: compose multi-robot planning workloads, replay them against the planning
service (real engine, ROS 2, or a calibrated virtual-time simulator), and report
time utility, response, waiting and completion times (TimelyLLM §6)."""
