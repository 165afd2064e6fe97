"""Test support: audio.cpp GGUF packages (docs/gguf_packages.md) built from the fixture checkpoints.

Tensors are stored under their logical names (long ones renamed ``_audiocpp.<i>`` as audio.cpp does) in the
types a ``types`` rule picks: ``f32`` for all (the default), or a rule per tensor, e.g. the layout of the
published ``r2t2-q8_0.gguf`` (matrices q8_0, the tied embedding f16, vectors f32).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import gguf
import numpy as np

TypeRule = Callable[[str, np.ndarray], str]


def safetensors_f32(path: Path) -> dict[str, np.ndarray]:
    """float32 copies of every tensor of a (F32 or BF16) safetensors file, read by hand (numpy has no bf16)."""
    raw = path.read_bytes()
    size = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + size])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        chunk = raw[8 + size + begin : 8 + size + end]
        if info["dtype"] == "BF16":
            values = (np.frombuffer(chunk, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            values = np.frombuffer(chunk, dtype=np.float32)
        out[name] = values.reshape(info["shape"])
    return out


def all_f32(name: str, array: np.ndarray) -> str:
    return "f32"


def quantized_layout(matrix_type: str) -> TypeRule:
    """Matrices in ``matrix_type``, the embedding f16, vectors f32 (the q8_0 package layout); conv kernels f16
    in an f16 package, else f32 (their 3x3 rows do not fit quantized blocks)."""

    def rule(name: str, array: np.ndarray) -> str:
        if array.ndim == 4:
            return "f16" if matrix_type == "f16" else "f32"
        if array.ndim != 2:
            return "f32"
        return "f16" if name.endswith("embed_tokens.weight") else matrix_type

    return rule


def stored_values(array: np.ndarray, kind: str) -> np.ndarray:
    """The float32 values a tensor holds once stored as ``kind`` (what a checkpoint 'quantised the same
    way' must contain)."""
    if kind == "f32":
        return np.asarray(array, dtype=np.float32)
    qtype = gguf.GGMLQuantizationType[kind.upper()]
    return gguf.quants.dequantize(gguf.quants.quantize(np.asarray(array, np.float32), qtype), qtype)


def write_audiocpp_package(
    path: Path,
    source: Path,
    embed: dict[str, bytes] | None = None,
    physical_long_names: bool = True,
    types: TypeRule = all_f32,
    string_contents: bool = False,
) -> dict[str, str]:
    """Write the package; returns logical tensor name → stored type."""
    tensors = safetensors_f32(source / "model.safetensors")
    writer = gguf.GGUFWriter(str(path), "audiocpp")
    writer.add_string("general.name", source.name)
    writer.add_string("audiocpp.tensor_name_format", "native")
    writer.add_string("audiocpp.source_format", ".safetensors")
    writer.add_string("audiocpp.weight_type", "orig")
    writer.add_uint32("audiocpp.model_spec.version", 1)
    writer.add_string("audiocpp.model_spec.family", "confucius4_r2t2")
    writer.add_string("audiocpp.model_spec.json", json.dumps({"family": "confucius4_r2t2"}))
    names = sorted(tensors)
    writer.add_array("audiocpp.tensor_names", names)
    writer.add_array("audiocpp.tensor_ranks", [len(tensors[n].shape) for n in names])
    writer.add_key_value(
        "audiocpp.tensor_shapes",
        [d for n in names for d in tensors[n].shape],
        gguf.GGUFValueType.ARRAY,
        sub_type=gguf.GGUFValueType.INT64,
    )
    files = (
        embed
        if embed is not None
        else {
            p.name: p.read_bytes()
            for p in sorted(source.iterdir())
            if p.is_file() and p.suffix != ".safetensors"
        }
    )
    writer.add_array("audiocpp.embedded_files.names", list(files))
    if string_contents:  # the older layout: contents as a second string array
        writer.add_array("audiocpp.embedded_files.contents", [v.decode("utf-8") for v in files.values()])
    else:
        offsets = np.cumsum([0] + [len(v) for v in files.values()]).tolist()
        writer.add_key_value(
            "audiocpp.embedded_files.offsets",
            offsets,
            gguf.GGUFValueType.ARRAY,
            sub_type=gguf.GGUFValueType.UINT64,
        )
        writer.add_array("audiocpp.embedded_files.data", b"".join(files.values()))
    stored = {}
    for index, name in enumerate(names):
        physical = f"_audiocpp.{index}" if physical_long_names and len(name) >= 40 else name
        kind = stored[name] = types(name, tensors[name])
        array = np.ascontiguousarray(tensors[name], dtype=np.float32)
        if kind == "f32":
            writer.add_tensor(physical, array)
        elif kind == "f16":
            writer.add_tensor(physical, array.astype(np.float16))
        else:
            qtype = gguf.GGMLQuantizationType[kind.upper()]
            writer.add_tensor(physical, gguf.quants.quantize(array, qtype), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return stored
