"""Tooling over the block zoo (timely_core/blocks, BlockLLM): the command, export to
folders, the report, and the logit-lens test with lazy sharing that lets a full
fine-tune point a block at the base's."""
