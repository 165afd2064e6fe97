"""Exporters of the random Parakeet-TDT v3 bench checkpoint to the layouts of other runtimes (bench_peers.py)."""
