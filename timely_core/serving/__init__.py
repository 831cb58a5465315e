"""The PlanningService's parts, in the order a request meets them: admission, the
loop and one iteration, segment dispatch, execution feedback; the state they share."""
