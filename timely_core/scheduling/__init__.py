"""Who runs next: TUFs (Eq. 1), PUD priorities (Eq. 4), the ranked table of live
generations, latency-guided batching and the policies."""
