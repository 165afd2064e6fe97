"""Write an audio.cpp-style GGUF package (docs/gguf_packages.md) from an HF Parakeet folder, for loader tests."""

from __future__ import annotations

import json
from pathlib import Path

import gguf
import numpy as np
from safetensors.numpy import load_file


def write_audiocpp_gguf(
    model_dir: Path, out: Path, *, legacy_sidecars: bool = False, rename_long: bool = True
) -> list[str]:
    tensors = load_file(str(model_dir / "model.safetensors"))
    writer = gguf.GGUFWriter(str(out), "audiocpp")
    writer.add_name(model_dir.name)
    writer.add_string("audiocpp.tensor_name_format", "native")
    writer.add_string("audiocpp.source_format", ".safetensors")
    writer.add_string("audiocpp.weight_type", "orig")
    writer.add_uint32("audiocpp.model_spec.version", 1)
    writer.add_string("audiocpp.model_spec.family", "parakeet_tdt")
    writer.add_string("audiocpp.model_spec.json", json.dumps({"family": "parakeet_tdt"}))
    names, ranks, shapes, physical = [], [], [], []
    for i, (name, array) in enumerate(sorted(tensors.items())):
        if name.endswith("num_batches_tracked"):
            continue
        phys = f"_audiocpp.{i}" if rename_long and (len(name) >= 40) else name
        names.append(name)
        ranks.append(array.ndim)
        shapes.extend(array.shape or (1,))
        physical.append(phys)
        writer.add_tensor(phys, np.ascontiguousarray(array))
    writer.add_array("audiocpp.tensor_names", names)
    writer.add_key_value("audiocpp.tensor_ranks", ranks, gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.INT32)
    writer.add_key_value(
        "audiocpp.tensor_shapes", [int(d) for d in shapes], gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.INT64
    )
    sidecars = sorted(p.name for p in model_dir.iterdir() if p.is_file() and p.suffix != ".safetensors")
    contents = [(model_dir / n).read_bytes() for n in sidecars]
    writer.add_array("audiocpp.embedded_files.names", sidecars)
    if legacy_sidecars:
        writer.add_array("audiocpp.embedded_files.contents", [c.decode("utf-8") for c in contents])
    else:
        offsets = np.cumsum([0] + [len(c) for c in contents]).astype(np.uint64)
        writer.add_key_value(
            "audiocpp.embedded_files.offsets",
            offsets.tolist(),
            gguf.GGUFValueType.ARRAY,
            gguf.GGUFValueType.UINT64,
        )
        writer.add_key_value(
            "audiocpp.embedded_files.data",
            list(b"".join(contents)),
            gguf.GGUFValueType.ARRAY,
            gguf.GGUFValueType.UINT8,
        )
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return physical
