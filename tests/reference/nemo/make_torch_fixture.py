"""Write ``tests/fixtures/nemo/state_dict.ckpt`` with real ``torch.save``, for the torch-free reader's tests.

Run from the repository root with a venv holding torch (CPU): ``python tests/reference/nemo/make_torch_fixture.py``.
The values are ``arange``-based so the test recomputes them without torch (see tests/models/test_torch_zip.py).
"""

from __future__ import annotations

import collections
from pathlib import Path

import torch

OUT = Path(__file__).resolve().parents[2] / "fixtures" / "nemo" / "state_dict.ckpt"


def main() -> None:
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    state: collections.OrderedDict[str, torch.Tensor] = collections.OrderedDict()
    state["plain"] = base
    state["transposed"] = base.t()  # shares the storage of "plain", strided
    state["row_slice"] = base[2:]  # a storage offset
    state["half"] = torch.arange(5, dtype=torch.float16) / 4
    state["bfloat"] = torch.arange(5, dtype=torch.bfloat16) - 2
    state["counter"] = torch.tensor(7, dtype=torch.int64)  # like BatchNorm's num_batches_tracked
    state["param"] = torch.nn.Parameter(torch.arange(3, dtype=torch.float32) * 0.5)
    state._metadata = collections.OrderedDict({"": {"version": 1}})  # type: ignore[attr-defined]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    torch.save(state, OUT)
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
