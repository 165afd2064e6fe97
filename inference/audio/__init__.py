"""Audio utilities shared by both processes: file reading, resampling, frontends, VAD (no Qt)."""
