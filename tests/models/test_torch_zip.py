"""The torch-free state-dict reader: real torch.save output reads back exactly; pickles that would run code are
refused before anything runs."""

from __future__ import annotations

import builtins
import collections
import os
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest

from inference.errors import ModelError
from inference.models.torch_zip import UnsafeCheckpointError, open_torch_state_dict

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "nemo" / "state_dict.ckpt"


def test_reads_a_real_torch_save_state_dict() -> None:
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    with open_torch_state_dict(FIXTURE) as state:
        assert list(state.tensors) == [
            "plain",
            "transposed",
            "row_slice",
            "half",
            "bfloat",
            "counter",
            "param",
        ]
        np.testing.assert_array_equal(state.read("plain"), base)
        np.testing.assert_array_equal(state.read("transposed"), base.T)
        np.testing.assert_array_equal(state.read("row_slice"), base[2:])
        half = state.read("half")
        assert half.dtype == np.float16
        np.testing.assert_array_equal(half, np.arange(5, dtype=np.float16) / 4)
        bfloat = state.read("bfloat")
        assert bfloat.dtype == np.float32
        np.testing.assert_array_equal(bfloat, np.arange(5, dtype=np.float32) - 2)
        counter = state.read("counter")
        assert counter.shape == () and counter.dtype == np.int64 and int(counter) == 7
        np.testing.assert_array_equal(state.read("param"), np.arange(3, dtype=np.float32) * 0.5)
        assert state.read("transposed").flags.c_contiguous


def _zip_with_pickle(path: Path, payload: bytes) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", payload)
        archive.writestr("archive/byteorder", "little")
        archive.writestr("archive/version", "3\n")
    return path


class _RunsShell:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class _Evals:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (builtins.eval, (f"open({str(self.marker)!r}, 'w').close()",))


@pytest.mark.parametrize("make", [_RunsShell, _Evals])
def test_a_pickle_that_would_run_code_is_refused_and_nothing_runs(tmp_path: Path, make) -> None:
    marker = tmp_path / "pwned"
    # Hidden inside an otherwise plausible state dict, as a crafted .nemo would do it.
    state = collections.OrderedDict([("encoder.weight", make(marker))])
    checkpoint = _zip_with_pickle(tmp_path / "model_weights.ckpt", pickle.dumps(state, protocol=2))
    with pytest.raises(
        UnsafeCheckpointError, match=r"(posix|os|builtins|__builtin__)\.(system|eval)"
    ) as caught:
        open_torch_state_dict(checkpoint)
    assert "nothing from it was run" in caught.value.message
    assert not marker.exists()


@pytest.mark.parametrize("make", [_RunsShell, _Evals])
def test_the_crafted_payloads_do_run_under_a_plain_unpickler(tmp_path: Path, make) -> None:
    """The control: the payloads above are live, so the refusal is what keeps the marker away."""
    marker = tmp_path / "pwned"
    pickle.loads(pickle.dumps(collections.OrderedDict([("w", make(marker))]), protocol=2))
    assert marker.exists()


def test_a_refused_pickle_is_refused_before_any_earlier_entry_is_built(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    payload = pickle.dumps(_RunsShell(marker), protocol=4)  # STACK_GLOBAL instead of GLOBAL
    with pytest.raises(UnsafeCheckpointError):
        open_torch_state_dict(_zip_with_pickle(tmp_path / "x.ckpt", payload))
    assert not marker.exists()


def test_damaged_and_foreign_files_give_clear_errors(tmp_path: Path) -> None:
    legacy = tmp_path / "legacy.ckpt"
    legacy.write_bytes(pickle.dumps({"a": 1}))
    with pytest.raises(ModelError, match="not a torch zip checkpoint"):
        open_torch_state_dict(legacy)
    truncated = tmp_path / "truncated.ckpt"
    truncated.write_bytes(FIXTURE.read_bytes()[:1500])
    with pytest.raises(ModelError):
        open_torch_state_dict(truncated)
    not_tensors = _zip_with_pickle(tmp_path / "ints.ckpt", pickle.dumps({"a": 1}, protocol=2))
    with pytest.raises(ModelError, match="'a' is not a tensor"):
        open_torch_state_dict(not_tensors)


def test_an_unsupported_storage_type_is_named_not_called_hostile(tmp_path: Path) -> None:
    payload = (
        b"\x80\x02ccollections\nOrderedDict\n)R(X\x01\x00\x00\x00wctorch._utils\n_rebuild_tensor_v2\n"
        b"((X\x07\x00\x00\x00storagectorch\nComplexFloatStorage\n"
    )
    with pytest.raises(
        ModelError, match=r"torch\.ComplexFloatStorage, which this reader does not support"
    ) as caught:
        open_torch_state_dict(_zip_with_pickle(tmp_path / "complex.ckpt", payload))
    assert not isinstance(caught.value, UnsafeCheckpointError)
