"""The block zoo (BlockLLM): checkpoints and LoRA adapters partitioned at
architectural boundaries, each distinct block stored once by content, and a manifest
per variant naming its chain of blocks. The torch engine serves variants straight
from it; robot_models/blocks adds the tooling (the command, export, the logit-lens
test that lets a full fine-tune point a block at the base's)."""
