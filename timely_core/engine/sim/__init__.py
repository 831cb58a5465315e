"""The simulator backend: the same paged-KV books in virtual time, costed by a latency model."""
