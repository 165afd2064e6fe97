"""Check the tests' hand-written .nemo against real torch: ``torch.load(weights_only=True)`` reads its weights back
exactly. The tests build the archive without torch (tests/parakeet_tdt/nemo_package.py); this keeps that writer honest.

Run from the repository root with a venv holding torch (CPU) and PyYAML:
``python tests/reference/nemo/check_nemo_package.py``.
"""

from __future__ import annotations

import io
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "parakeet_tdt"))
from nemo_package import build_nemo, nemo_tensors  # noqa: E402
from parakeet_fixtures import model_dir  # noqa: E402


def main() -> None:
    with tempfile.TemporaryDirectory() as work:
        for name in ("tiny_a", "tiny_b"):
            source = build_nemo(model_dir(name), Path(work) / f"{name}.nemo")
            with tarfile.open(source) as tar:
                member = next(m for m in tar.getmembers() if m.name.endswith("model_weights.ckpt"))
                stream = tar.extractfile(member)
                assert stream is not None
                state = torch.load(io.BytesIO(stream.read()), map_location="cpu", weights_only=True)
            wanted = nemo_tensors(model_dir(name))
            assert list(state) == list(wanted), f"{name}: names differ"
            for key, array in wanted.items():
                assert np.array_equal(state[key].numpy(), array), f"{name}: {key} differs"
            print(f"{name}: torch {torch.__version__} reads all {len(state)} tensors exactly")


if __name__ == "__main__":
    main()
