"""Tool plugins that know the robots (timely_core/tools runs them): an early
validator of calls against the skill set and the scene, and a perception tool that
answers from the simulated robot's scene."""
