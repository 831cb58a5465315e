"""The torch backend: our paged-KV, continuous-batching engine for Llama-family checkpoints."""
