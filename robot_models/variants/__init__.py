"""Fleet variants of the planner: per-site or per-robot fine-tunes (LoRA adapters)
whose data derive from the shared dataset generator by declarative rewrites."""
