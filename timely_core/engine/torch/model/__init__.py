"""Llama-family transformer over a paged KV cache (Llama and Qwen2 checkpoints)."""
