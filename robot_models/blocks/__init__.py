"""The block zoo (BlockLLM): checkpoints and LoRA adapters partitioned at
architectural boundaries, each distinct block stored once by content, a manifest per
variant naming its chain of blocks, and the logit-lens test that lets a full
fine-tune point a block at the base's."""
