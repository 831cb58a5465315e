"""Everything the planner needs to know about robots: skill sets, the plan language
and its streaming parser, execution-time models, executors, the plan interpreter,
and the embedded planner checkpoint. Depends on nothing in timely_core."""
