"""The Engine protocol, the paged-KV books every backend shares, and the backends:
torch/ (our engine) and sim/ (virtual time)."""
