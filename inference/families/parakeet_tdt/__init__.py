"""Parakeet-TDT (NVIDIA parakeet-tdt-0.6b-v3 and Phonon-2): config and checkpoint loading, numpy frontend,
TDT decoder, text and word timestamps. The FastConformer encoder runs on ``inference.native`` (encoder.py)."""
