"""From tokens to plan statements: the plan-language protocols, chat mode,
incremental detokenization and segmentation."""
