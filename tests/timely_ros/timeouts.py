"""How long test robots, planners and clients wait for each other. A loaded test
machine (CI, a full run beside other work) can take seconds to discover a robot or
to run its heartbeat timer; the planner's defaults (2 s each) are for a fleet's own
computers. Tests of those bounds set them. Kept apart from `ros_support`, which
claims a ROS domain when imported, so client processes can import these."""

TEST_EXECUTOR_WAIT_S = 15.0
TEST_ROBOT_TIMEOUT_S = 10.0
TEST_PLANNER_TIMEOUT_S = 10.0  # how long robots and test clients wait for a late planner heartbeat
