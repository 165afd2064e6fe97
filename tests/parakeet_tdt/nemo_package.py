"""Build a tiny NeMo ``.nemo`` from a tiny Parakeet-TDT fixture checkpoint, without torch.

The archive holds what NeMo writes: ``model_config.yaml`` (NeMo key names), ``model_weights.ckpt`` (torch's zip
serialisation, written here opcode by opcode with NeMo tensor names and the extras NeMo saves: BatchNorm
counters, the preprocessor's window and filterbank) and ``<hash>_tokenizer.model`` (a SentencePiece BPE
``ModelProto`` rebuilt from the fixture's ``tokenizer.json``). The torch-saved fixture
``tests/fixtures/nemo/state_dict.ckpt`` checks the reader against real ``torch.save`` output.
"""

from __future__ import annotations

import base64
import io
import json
import re
import struct
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import yaml

TOKENIZER_MEMBER = "2b8f1c0d_tokenizer.model"

# This family's names → NeMo's (the inverse of the importer's table, written out separately on purpose).
_TO_NEMO = (
    (r"^encoder\.subsampling\.layers\.", "encoder.pre_encode.conv."),
    (r"^encoder\.subsampling\.linear\.", "encoder.pre_encode.out."),
    (r"\.conv\.norm\.", ".conv.batch_norm."),
    (r"\.self_attn\.q_proj\.", ".self_attn.linear_q."),
    (r"\.self_attn\.k_proj\.", ".self_attn.linear_k."),
    (r"\.self_attn\.v_proj\.", ".self_attn.linear_v."),
    (r"\.self_attn\.o_proj\.", ".self_attn.linear_out."),
    (r"\.self_attn\.relative_k_proj\.", ".self_attn.linear_pos."),
    (r"\.self_attn\.bias_([uv])$", r".self_attn.pos_bias_\1"),
    (r"^decoder\.embedding\.", "decoder.prediction.embed."),
    (r"^decoder\.lstm\.", "decoder.prediction.dec_rnn.lstm."),
    (r"^encoder_projector\.", "joint.enc."),
    (r"^decoder\.decoder_projector\.", "joint.pred."),
    (r"^joint\.head\.", "joint.joint_net.2."),
)


def nemo_name(name: str) -> str:
    for pattern, replacement in _TO_NEMO:
        name = re.sub(pattern, replacement, name)
    return name


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    data = path.read_bytes()
    size = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8 : 8 + size])
    kinds = {"F32": "<f4", "I64": "<i8", "F16": "<f2"}
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        start, end = entry["data_offsets"]
        blob = data[8 + size + start : 8 + size + end]
        out[name] = np.frombuffer(blob, dtype=kinds[entry["dtype"]]).reshape(entry["shape"])
    return out


# ------------------------------------------------------------------------------------------ torch zip


_STORAGE = {"<f4": "FloatStorage", "<i8": "LongStorage", "<f2": "HalfStorage"}


def _unicode(text: str) -> bytes:
    raw = text.encode("utf-8")
    return b"X" + struct.pack("<I", len(raw)) + raw


def _int(value: int) -> bytes:
    return b"J" + struct.pack("<i", value)


def _tuple(values: list[int]) -> bytes:
    return b"(" + b"".join(_int(v) for v in values) + b"t"


def torch_zip(tensors: dict[str, np.ndarray], name: str = "model_weights") -> bytes:
    """The bytes ``torch.save(OrderedDict(tensors))`` writes (protocol 2 pickle, one storage per tensor)."""
    pickle_ = bytearray(b"\x80\x02ccollections\nOrderedDict\n)R(")
    storages: list[bytes] = []
    for key, array in tensors.items():
        array = np.array(array, dtype=array.dtype.newbyteorder("<"), order="C")  # keeps 0-d shapes
        storage_type = _STORAGE[array.dtype.str]
        shape = list(array.shape)
        strides = [s // array.itemsize for s in array.strides]
        pickle_ += _unicode(key) + b"ctorch._utils\n_rebuild_tensor_v2\n("
        pickle_ += (
            b"(" + _unicode("storage") + f"ctorch\n{storage_type}\n".encode() + _unicode(str(len(storages)))
        )
        pickle_ += _unicode("cpu") + _int(array.size) + b"tQ"
        pickle_ += _int(0) + _tuple(shape) + _tuple(strides) + b"\x89ccollections\nOrderedDict\n)Rt" + b"R"
        storages.append(array.tobytes())
    pickle_ += b"u."
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr(f"{name}/data.pkl", bytes(pickle_))
        archive.writestr(f"{name}/byteorder", "little")
        for i, blob in enumerate(storages):
            archive.writestr(f"{name}/data/{i}", blob)
        archive.writestr(f"{name}/version", "3\n")
    return buffer.getvalue()


# ------------------------------------------------------------------------------------------ SentencePiece


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def sentencepiece_model(tokenizer: dict[str, Any]) -> bytes:
    """A BPE ModelProto with the tokenizer's pieces (scores falling with the id, as SentencePiece orders them)."""
    special = {t["content"] for t in tokenizer["added_tokens"] if t["special"]}
    unk = tokenizer["model"]["unk_token"]
    message = b""
    for text, index in tokenizer["model"]["vocab"].items():
        kind = 2 if text == unk else 3 if text in special else 1
        score = 0.0 if kind != 1 else -float(index)
        piece = (
            _field(1, text.encode())
            + _varint(2 << 3 | 5)
            + struct.pack("<f", score)
            + _varint(3 << 3)
            + _varint(kind)
        )
        message += _field(1, piece)
    message += _field(2, _varint(3 << 3) + _varint(2))  # trainer_spec.model_type = BPE
    charsmap = [n for n in tokenizer["normalizer"]["normalizers"] if n["type"] == "Precompiled"]
    normalizer = _field(1, b"nmt_nfkc") + (
        _field(2, base64.b64decode(charsmap[0]["precompiled_charsmap"])) if charsmap else b""
    )
    return message + _field(3, normalizer)


# ------------------------------------------------------------------------------------------ the archive


def nemo_config(config: dict[str, Any], processor: dict[str, Any], labels: list[str]) -> dict[str, Any]:
    enc, fe = config["encoder_config"], processor["feature_extractor"]
    return {
        "sample_rate": fe["sampling_rate"],
        "labels": labels,
        "tokenizer": {"dir": None, "type": "bpe", "model_path": f"nemo:{TOKENIZER_MEMBER}"},
        "preprocessor": {
            "_target_": "nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor",
            "sample_rate": fe["sampling_rate"],
            "normalize": "per_feature",
            "window_size": fe["win_length"] / fe["sampling_rate"],
            "window_stride": fe["hop_length"] / fe["sampling_rate"],
            "window": "hann",
            "features": fe["feature_size"],
            "n_fft": fe["n_fft"],
            "log": True,
            "frame_splicing": 1,
            "dither": 1.0e-05,
            "pad_to": 0,
            "pad_value": 0.0,
        },
        "encoder": {
            "_target_": "nemo.collections.asr.modules.ConformerEncoder",
            "feat_in": enc["num_mel_bins"],
            "feat_out": -1,
            "n_layers": enc["num_hidden_layers"],
            "d_model": enc["hidden_size"],
            "use_bias": enc["attention_bias"],
            "subsampling": "dw_striding",
            "subsampling_factor": enc["subsampling_factor"],
            "subsampling_conv_channels": enc["subsampling_conv_channels"],
            "causal_downsampling": False,
            "ff_expansion_factor": enc["intermediate_size"] // enc["hidden_size"],
            "self_attention_model": "rel_pos",
            "n_heads": enc["num_attention_heads"],
            "att_context_size": [-1, -1],
            "att_context_style": "regular",
            "xscaling": enc["scale_input"],
            "untie_biases": True,
            "pos_emb_max_len": enc["max_position_embeddings"],
            "conv_kernel_size": enc["conv_kernel_size"],
            "conv_norm_type": "batch_norm",
            "conv_context_size": None,
            "dropout": 0.1,
        },
        "decoder": {
            "_target_": "nemo.collections.asr.modules.RNNTDecoder",
            "blank_as_pad": True,
            "vocab_size": len(labels),
            "prednet": {
                "pred_hidden": config["decoder_hidden_size"],
                "pred_rnn_layers": config["num_decoder_layers"],
            },
        },
        "joint": {
            "_target_": "nemo.collections.asr.modules.RNNTJoint",
            "num_classes": len(labels),
            "vocabulary": labels,
            "num_extra_outputs": len(config["durations"]),
            "jointnet": {
                "joint_hidden": config["decoder_hidden_size"],
                "activation": "relu",
                "encoder_hidden": enc["hidden_size"],
                "pred_hidden": config["decoder_hidden_size"],
            },
        },
        "decoding": {
            "strategy": "greedy_batch",
            "model_type": "tdt",
            "durations": config["durations"],
            "greedy": {"max_symbols": 10},
        },
        "model_defaults": {
            "tdt_durations": config["durations"],
            "num_tdt_durations": len(config["durations"]),
        },
    }


def nemo_tensors(model_dir: Path) -> dict[str, np.ndarray]:
    """The fixture's tensors under NeMo names, plus what NeMo also saves (and the importer must drop)."""
    tensors = {nemo_name(k): v for k, v in read_safetensors(model_dir / "model.safetensors").items()}
    tensors["preprocessor.featurizer.window"] = np.hanning(400).astype(np.float32)
    tensors["preprocessor.featurizer.fb"] = np.zeros((1, 128, 257), dtype=np.float32)
    return tensors


def build_nemo(
    model_dir: Path,
    out: Path,
    *,
    with_tokenizer: bool = True,
    config_edit: Any = None,
    tensors_edit: Any = None,
    gzip: bool = False,
) -> Path:
    """Write ``out`` (a .nemo) from the fixture folder; the edit hooks change the config dict or tensor dict."""
    config = json.loads((model_dir / "config.json").read_text())
    processor = json.loads((model_dir / "processor_config.json").read_text())
    tokenizer = json.loads((model_dir / "tokenizer.json").read_text())
    labels = list(tokenizer["model"]["vocab"])
    nemo = nemo_config(config, processor, labels)
    if config_edit is not None:
        config_edit(nemo)
    tensors = nemo_tensors(model_dir)
    if tensors_edit is not None:
        tensors_edit(tensors)
    members = {
        "model_config.yaml": yaml.safe_dump(nemo, allow_unicode=True).encode(),
        "model_weights.ckpt": torch_zip(tensors),
    }
    if with_tokenizer:
        members[TOKENIZER_MEMBER] = sentencepiece_model(tokenizer)
        members["a1c3e5f7_vocab.txt"] = "\n".join(labels).encode()
    with tarfile.open(out, "w:gz" if gzip else "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(f"./{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out
