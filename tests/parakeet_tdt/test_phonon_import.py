"""Phonon-2 import from a synthetic ``fermion-five-value-parakeet-v1`` container (docs/families/parakeet_tdt.md §7.2)."""

from __future__ import annotations

import importlib
import io
import json
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pytest
from parakeet_fixtures import audio_path, model_dir
from phonon_variant import make_phonon_variant
from safetensors.numpy import load_file, save_file

from inference.audio.io import load_audio_file
from inference.engine import load_engine
from inference.errors import ModelError, UsageError
from inference.families.parakeet_tdt.phonon_import import (
    FORMAT,
    Record,
    audiocpp_compensation,
    convert_phonon2,
    decode_record,
    punctuation_ids,
    read_container,
)

# ------------------------------------------------------------------------------------------ encoders
# Written from the format description (the reader's module doc), independently of the reader.


def encode_five_value(
    sign: np.ndarray, high: np.ndarray, low_level: np.ndarray, high_level: np.ndarray
) -> bytes:
    rows, cols = sign.shape
    codes = (sign + 1).astype(np.int64)
    per_row = -(-cols // 5)
    padded = np.ones((rows, per_row * 5), np.int64)  # padding digits: code 1 (zero)
    padded[:, :cols] = codes
    digits = padded.reshape(rows, per_row, 5)
    packed = sum(digits[:, :, k] * 3**k for k in range(5)).astype(np.uint8)
    flags = [bool(high[r, c]) for r in range(rows) for c in range(cols) if sign[r, c] != 0]
    flag_bytes = bytearray(-(-len(flags) // 8))
    for i, flag in enumerate(flags):
        flag_bytes[i // 8] |= int(flag) << (i % 8)
    return (
        packed.tobytes()
        + bytes(flag_bytes)
        + low_level.astype("<f2").tobytes()
        + high_level.astype("<f2").tobytes()
    )


def encode_int6(codes: np.ndarray, scales: np.ndarray) -> bytes:
    flat = (codes.reshape(-1) + 32).astype(np.uint32).tolist()
    flat += [32] * (-len(flat) % 4)
    out = bytearray()
    for i in range(0, len(flat), 4):
        word = flat[i] | flat[i + 1] << 6 | flat[i + 2] << 12 | flat[i + 3] << 18
        out += bytes([word & 0xFF, word >> 8 & 0xFF, word >> 16 & 0xFF])
    return bytes(out) + scales.astype("<f2").tobytes()


def write_container(
    path: Path, records: list[tuple[str, str, tuple[int, ...], bytes]], *, trailing: bytes = b""
) -> Path:
    index = [{"n": n, "k": k, "shape": list(shape), "b": len(blob)} for n, k, shape, blob in records]
    header = json.dumps({"format": FORMAT, "index": index}).encode()
    path.write_bytes(len(header).to_bytes(8, "little") + header + b"".join(r[3] for r in records) + trailing)
    return path


def encode_tensor(
    name: str, value: np.ndarray, kind: str, rng: np.random.Generator
) -> tuple[list, np.ndarray]:
    """A record for ``value`` in ``kind`` and the exact dense tensor the record stands for (lossy kinds
    quantise ``value``)."""
    if kind == "fp16":
        exact = value.astype(np.float16)
        return [name, "fp16", value.shape, exact.tobytes()], exact.astype(np.float32)
    matrix = value.reshape(value.shape[0], -1)
    if kind == "five_value":
        rows = matrix.shape[0]
        low_level = np.abs(matrix).mean(axis=1).astype(np.float16) + np.float16(1e-3)
        high_level = (np.abs(matrix).max(axis=1) + 1e-3).astype(np.float16)
        sign = np.sign(matrix).astype(np.int64) * (rng.random(matrix.shape) > 0.2)
        high = np.abs(matrix) > (low_level.astype(np.float32) + high_level.astype(np.float32))[:, None] / 2
        exact = sign * np.where(
            high, high_level.astype(np.float32)[:, None], low_level.astype(np.float32)[:, None]
        )
        assert exact.shape[0] == rows
        module = name.removesuffix(".weight")
        return [
            module,
            "five_value",
            matrix.shape,
            encode_five_value(sign, high, low_level, high_level),
        ], exact.astype(np.float32)
    scales = (np.abs(matrix).max(axis=1) / (127 if kind == "int8" else 31) + 1e-6).astype(np.float16)
    limit = 127 if kind == "int8" else 31
    codes = np.clip(
        np.round(matrix / scales.astype(np.float32)[:, None]), -limit - (kind == "int6"), limit
    ).astype(np.int64)
    blob = (
        codes.astype(np.int8).tobytes() + scales.tobytes() if kind == "int8" else encode_int6(codes, scales)
    )
    exact = (codes.astype(np.float32) * scales.astype(np.float32)[:, None]).reshape(value.shape)
    return [name, kind, value.shape, blob], exact


# ------------------------------------------------------------------------------------------ decoding vectors


def test_five_value_vector() -> None:
    # row 0: -lo 0 +hi +lo -hi 0 +lo (7 columns: two code bytes); row 1: all zero but the last (+hi)
    sign = np.array([[-1, 0, 1, 1, -1, 0, 1], [0, 0, 0, 0, 0, 0, 1]])
    high = np.array([[0, 0, 1, 0, 1, 0, 0], [0, 0, 0, 0, 0, 0, 1]], bool)
    blob = encode_five_value(sign, high, np.array([0.5, 0.25]), np.array([2.0, 8.0]))
    # codes row 0: 0 1 2 2 0 | 1 2 (1-padded) → 0+3+18+54+0 = 75, 1+6+9+27+81 = 124
    assert blob[:2] == bytes([75, 124])
    # five non-zeros in row 0 (flags 0 1 0 1 0), one in row 1 (flag 1): 0b101010 = 42
    assert blob[4] == 42 and len(blob) == 4 + 1 + 8
    dense = decode_record(Record("m", "five_value", (2, 7), len(blob), 0), blob)
    assert dense.tolist() == [[-0.5, 0.0, 2.0, 0.5, -2.0, 0.0, 0.5], [0, 0, 0, 0, 0, 0, 8.0]]


def test_int_vectors() -> None:
    blob = np.array([1, -2, 127, -128], np.int8).tobytes() + np.array([0.5, 2.0], "<f2").tobytes()
    assert decode_record(Record("w", "int8", (2, 2), len(blob), 0), blob).tolist() == [
        [0.5, -1.0],
        [254.0, -256.0],
    ]
    codes = np.array([[-32, -1, 0, 31, 5]])
    blob = encode_int6(codes, np.array([0.25]))
    # four fields per 3 bytes, stored +32: 0, 31, 32, 63 → 0 | 31<<6 | 32<<12 | 63<<18
    assert int.from_bytes(blob[:3], "little") == 0 | 31 << 6 | 32 << 12 | 63 << 18 and len(blob) == 6 + 2
    assert decode_record(Record("w", "int6", (1, 5), len(blob), 0), blob).tolist() == [
        [-8.0, -0.25, 0.0, 7.75, 1.25]
    ]
    half = np.array([1.5, -3.0], np.float16)
    assert decode_record(Record("b", "fp16", (2,), 4, 0), half.tobytes()).tolist() == [1.5, -3.0]


def test_pointwise_conv_weights_get_their_kernel_dimension_and_counters_are_dropped(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    pw, pw_exact = encode_tensor(
        "encoder.layers.0.conv.pointwise_conv1.weight", rng.normal(size=(4, 3)), "five_value", rng
    )
    counter = ["encoder.layers.0.conv.norm.num_batches_tracked", "fp16", (), np.float16(7).tobytes()]
    path = write_container(tmp_path / "model.fermion", [tuple(pw), tuple(counter)])  # type: ignore[list-item]
    got = dict(read_container(path))
    assert list(got) == ["encoder.layers.0.conv.pointwise_conv1.weight"]
    assert got["encoder.layers.0.conv.pointwise_conv1.weight"].shape == (4, 3, 1)
    assert np.array_equal(got["encoder.layers.0.conv.pointwise_conv1.weight"][:, :, 0], pw_exact)


# ------------------------------------------------------------------------------------------ damaged containers


def small_container_records() -> list[tuple[str, str, tuple[int, ...], bytes]]:
    """One small record of each kind (also the fuzz tests' valid container)."""
    rng = np.random.default_rng(1)
    return [
        tuple(encode_tensor("a.weight", rng.normal(size=(3, 11)), "five_value", rng)[0]),
        tuple(encode_tensor("b.weight", rng.normal(size=(2, 5)), "int6", rng)[0]),
        tuple(encode_tensor("c.bias", rng.normal(size=(4,)), "fp16", rng)[0]),
        tuple(encode_tensor("d.weight", rng.normal(size=(3, 4)), "int8", rng)[0]),
    ]


@pytest.fixture
def small_container(tmp_path: Path) -> Path:
    return write_container(tmp_path / "model.fermion", small_container_records())


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda data: data[:-1], "truncated: its records need"),
        (lambda data: data[:5], "truncated: it has no container header"),
        (lambda data: data + b"\0", "1 bytes after its last record"),
        (
            lambda data: data.replace(FORMAT.encode(), b"fermion-five-value-parakeet-v9"),
            "not 'fermion-five-value-parakeet-v1'",
        ),
        (lambda data: data.replace(b'"fp16"', b'"fp64"'), "unknown kind 'fp64'"),
        (lambda data: data.replace(b'"shape": [4]', b'"shape": [5]'), "its shape needs"),
    ],
)
def test_damaged_containers_are_refused(small_container: Path, damage, message: str) -> None:  # type: ignore[no-untyped-def]
    small_container.write_bytes(damage(small_container.read_bytes()))
    with pytest.raises(ModelError, match=message):
        list(read_container(small_container))


# ------------------------------------------------------------------------------------------ whole import


def sidecars_for(tmp_path: Path) -> Path:
    """The tiny model's sidecars in the role of the nvidia v3 ones."""
    out = tmp_path / "sidecars"
    out.mkdir()
    for name in ("config.json", "tokenizer.json", "processor_config.json"):
        shutil.copyfile(model_dir("tiny_a") / name, out / name)
    return out


def vocabulary() -> list[str]:
    tokenizer = json.loads((model_dir("tiny_a") / "tokenizer.json").read_text())
    config = json.loads((model_dir("tiny_a") / "config.json").read_text())
    pieces = {i: p for p, i in tokenizer["model"]["vocab"].items()}
    for added in tokenizer["added_tokens"]:
        pieces[added["id"]] = added["content"]
    return [pieces[i] for i in range(config["blank_token_id"])]


def phonon_archive_dir(tmp_path: Path) -> tuple[Path, dict[str, np.ndarray]]:
    """tiny_a's weights packed as a Phonon container (every record kind), and the dense tensors it holds."""
    rng = np.random.default_rng(2)
    weights = load_file(str(model_dir("tiny_a") / "model.safetensors"))
    records, exact = [], {}
    for name in sorted(weights):
        value = weights[name]
        if name.endswith("num_batches_tracked"):
            records.append((name, "fp16", (1,), np.float16(value).reshape(1).tobytes()))
            continue
        if value.ndim >= 2 and name.startswith("encoder.layers.") and "proj" in name:
            kind = "five_value"
        elif name.startswith("decoder.lstm.weight"):
            kind = "int8"
        elif name.startswith("joint.head.weight"):
            kind = "int6"
        else:
            kind = "fp16"
        if _is_pointwise := name.endswith(("pointwise_conv1.weight", "pointwise_conv2.weight")):
            value = value[:, :, 0]
            kind = "five_value"
        record, dense = encode_tensor(name, value, kind, rng)
        records.append(tuple(record))
        exact[name] = dense[:, :, None] if _is_pointwise else dense.reshape(weights[name].shape)
    folder = tmp_path / "archive"
    folder.mkdir()
    write_container(folder / "model.fermion", records)
    (folder / "config.json").write_text(json.dumps({"joint": {"vocabulary": vocabulary()}}))
    return folder, exact


def test_an_import_loads_and_decodes_like_the_dense_weights(tmp_path: Path) -> None:
    folder, exact = phonon_archive_dir(tmp_path)
    seen: list[int] = []
    out = convert_phonon2(
        folder,
        sidecars_for(tmp_path),
        tmp_path / "phonon2",
        progress=lambda done, total, _m: seen.append(done),
    )
    assert seen[-1] == len(exact) and sorted(p.name for p in tmp_path.iterdir()) == [
        "archive",
        "phonon2",
        "sidecars",
    ]
    converted = load_file(str(out / "model.safetensors"))
    assert converted.keys() == exact.keys()
    assert all(np.array_equal(converted[k], exact[k]) for k in exact)
    config = json.loads((out / "config.json").read_text())
    assert config["audiocpp_word_timestamp_mode"] == "token_duration"
    assert config["audiocpp_punctuation_token_ids"] == punctuation_ids(vocabulary())
    # The same dense tensors written directly next to the Phonon config: both load to the same engine output.
    direct = make_phonon_variant(tmp_path / "direct")
    save_file(exact, str(direct / "model.safetensors"))
    audio = load_audio_file(audio_path("short"))
    with load_engine(out, backend="cpu", threads=2) as a, load_engine(direct, backend="cpu", threads=2) as b:
        assert a.capabilities.hotwords and a.transcribe(audio).token_ids == b.transcribe(audio).token_ids


def test_import_refusals_leave_nothing_behind(tmp_path: Path) -> None:
    folder, _exact = phonon_archive_dir(tmp_path)
    sidecars = sidecars_for(tmp_path)
    target = tmp_path / "phonon2"
    with pytest.raises(ModelError, match="expected 0000"):
        convert_phonon2(folder, sidecars, target, expected_sha256="0" * 64)
    container = folder / "model.fermion"
    good = container.read_bytes()
    container.write_bytes(good[:-3])
    with pytest.raises(ModelError, match="truncated"):
        convert_phonon2(folder, sidecars, target)
    container.write_bytes(good)
    (folder / "config.json").write_text(json.dumps({"joint": {"vocabulary": ["x", *vocabulary()[1:]]}}))
    with pytest.raises(ModelError, match="does not spell the archive's vocabulary"):
        convert_phonon2(folder, sidecars, target)
    (sidecars / "tokenizer.json").unlink()
    with pytest.raises(ModelError, match="lacks tokenizer.json"):
        convert_phonon2(folder, sidecars, target)
    assert not target.exists() and not [p for p in tmp_path.iterdir() if ".partial" in p.name]
    target.mkdir()
    with pytest.raises(UsageError, match="already exists"):
        convert_phonon2(folder, sidecars, target)


def test_the_archive_path(tmp_path: Path) -> None:
    zstandard = pytest.importorskip(
        "zstandard", reason="reading .tar.zst needs the optional zstandard package"
    )
    folder, exact = phonon_archive_dir(tmp_path)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name in ("model.fermion", "config.json"):
            tar.add(folder / name, arcname=f"phonon-2/{name}")
    archive = tmp_path / "phonon-2.bps.tar.zst"
    archive.write_bytes(zstandard.ZstdCompressor().compress(buffer.getvalue()))
    sidecars = sidecars_for(tmp_path)
    out = convert_phonon2(archive, sidecars, tmp_path / "from_archive")
    assert load_file(str(out / "model.safetensors")).keys() == exact.keys()
    assert not (out / ".archive").exists()
    archive.write_bytes(archive.read_bytes()[:-100])
    with pytest.raises(ModelError, match="damaged or truncated"):
        convert_phonon2(archive, sidecars, tmp_path / "again")
    assert not (tmp_path / "again").exists()


def test_audiocpp_compensation_is_what_an_audiocpp_loader_needs() -> None:
    """audio.cpp's loader scales the subsampling output by 32 and floors BatchNorm variances; on the
    compensated weights it computes what this project's loader computes on the plain ones."""
    rng = np.random.default_rng(3)
    w = rng.normal(size=(8, 16)).astype(np.float32)
    assert np.array_equal(audiocpp_compensation("encoder.subsampling.linear.weight", w) * np.float32(32), w)
    gamma = rng.normal(size=6).astype(np.float32)
    var = np.array([2e-6, 0.0, 1e-5, 0.5, 1.0, 9e-6], np.float32)
    fixed = audiocpp_compensation("encoder.layers.0.conv.norm.weight", gamma, var)
    audiocpp_scale = fixed / np.sqrt(np.maximum(var, 1e-5) + 1e-5)
    plain_scale = gamma / np.sqrt(var.astype(np.float64) + 1e-5)
    assert np.allclose(audiocpp_scale, plain_scale, rtol=1e-6)
    assert np.array_equal(fixed[3:5], gamma[3:5])  # only floored channels change
    assert np.array_equal(audiocpp_compensation("decoder.lstm.weight_ih_l0", w), w)


def test_agrees_with_the_fermion_research_reader(small_container: Path) -> None:
    reader = pytest.importorskip(
        "fermion._speech._engine_phonon2.fermion_container", reason="fermion-research is not installed"
    )
    theirs, _index = reader.read_container(str(small_container))
    ours = dict(read_container(small_container))
    assert theirs.keys() == ours.keys()
    for name, value in ours.items():
        assert np.array_equal(np.asarray(theirs[name], np.float32).reshape(value.shape), value), name
    assert importlib.util.find_spec("fermion") is not None


def test_the_install_hook(tmp_path: Path) -> None:
    import dataclasses
    import threading

    from inference.families.parakeet_tdt.install import SIDECAR_DIR, build_phonon2, extra_space
    from inference.models.conversion import ConversionContext
    from inference.models.spec import PackageFile, load_family_spec

    packages = {p.id: p for p in load_family_spec("parakeet_tdt").packages}
    source, stock = packages["phonon2_source"], packages["parakeet_tdt"]
    assert extra_space(stock) == 0 and extra_space(source) > 2_500_000_000
    package_dir = tmp_path / "pkg"
    package_dir.mkdir()
    noop = ConversionContext(stock, package_dir, lambda *_: None)
    assert build_phonon2(noop) is None
    context = ConversionContext(source, package_dir, lambda *_: None, threading.Event())
    with pytest.raises(ModelError, match=r"one \.tar\.zst archive, found 0"):
        build_phonon2(context)
    zstandard = pytest.importorskip(
        "zstandard", reason="reading .tar.zst needs the optional zstandard package"
    )
    folder, exact = phonon_archive_dir(tmp_path)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name in ("model.fermion", "config.json"):
            tar.add(folder / name, arcname=name)
    (package_dir / "phonon-2.bps.tar.zst").write_bytes(zstandard.ZstdCompressor().compress(buffer.getvalue()))
    shutil.copytree(sidecars_for(tmp_path), package_dir / SIDECAR_DIR)
    with pytest.raises(ModelError, match="sha256"):  # not the published archive
        build_phonon2(context)
    assert not (package_dir / "phonon-2").exists()
    # With a digest pinned in the catalog (checked by the download), the hook converts.
    pinned = dataclasses.replace(source, files=(PackageFile("phonon-2.bps.tar.zst", sha256="0" * 64),))
    result = build_phonon2(ConversionContext(pinned, package_dir, lambda *_: None, threading.Event()))
    assert result is not None and result.model_path == "phonon-2"
    assert load_file(str(package_dir / "phonon-2" / "model.safetensors")).keys() == exact.keys()
