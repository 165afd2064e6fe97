"""Confucius4-R2T2 / Qwen3-ASR family: Whisper-style audio tower feeding a Qwen3 thinker (docs/families/confucius4_r2t2.md)."""
