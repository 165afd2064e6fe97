"""Loading a checkpoint keeps about one copy of the weights resident, not the mapped file plus the copy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

from inference.native import load_weights, open_backend, open_checkpoint


def _rss_bytes() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * 4096


def test_copied_tensors_release_their_file_pages(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    # 8 x 8 MiB f32 matrices; stored as f16 they must be converted, so nothing is used in place.
    tensors = {f"w{i}": rng.standard_normal((1024, 2048), dtype=np.float32) for i in range(8)}
    path = tmp_path / "model.safetensors"
    save_file(tensors, str(path))
    del tensors
    file_mib = path.stat().st_size / 2**20
    with open_backend("cpu", threads=1) as backend, open_checkpoint(path) as checkpoint:
        before = _rss_bytes()
        with load_weights(backend, checkpoint, storage="f16") as weights:
            grown_mib = (_rss_bytes() - before) / 2**20
            assert weights.bytes_by_type() == {"f16": 8 * 1024 * 2048 * 2}
    # The f16 copy is half the file (32 MiB); keeping the file's pages too would add another 64 MiB.
    assert grown_mib < 0.5 * file_mib + 20, f"RSS grew by {grown_mib:.0f} MiB for a {file_mib:.0f} MiB file"
