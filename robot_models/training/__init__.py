"""How the planner checkpoint is made: tokenizer, model, prefix-shared training."""
