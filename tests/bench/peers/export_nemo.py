"""Pack the bench's Parakeet-TDT checkpoint (transformers layout) as a NeMo ``.nemo`` archive.

The ggml ports convert from NeMo only: CrispASR's ``models/convert-parakeet-to-gguf.py`` and transcribe.cpp's
``scripts/convert-parakeet.py`` read a ``.nemo`` tar (``model_config.yaml``, ``model_weights.ckpt`` with NeMo's
tensor names, a SentencePiece ``*_tokenizer.model``). Neither converter ships in the PyPI wheels; they are run
from the projects' own repositories. This writes such an archive without NeMo:

    .venv-ref/bin/python tests/bench/peers/export_nemo.py --model CKPT_DIR --out OUT_DIR/parakeet.nemo

(needs ``sentencepiece`` and ``pyyaml`` in the reference python). Names follow NeMo's FastConformer/TDT modules
(the inverse of transformers' NeMo conversion); the SentencePiece model holds the checkpoint's 8192 pieces with
zero scores (the bench only compares token ids); the mel filterbank and window are NeMo's (Slaney, 128 mels,
symmetric Hann 400).
"""

from __future__ import annotations

import argparse
import io
import json
import re
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from tests.bench.peers import common  # noqa: E402

RENAMES = [  # transformers name pattern → NeMo name (first match wins)
    (r"^encoder\.subsampling\.layers\.(\d+)\.", r"encoder.pre_encode.conv.\1."),
    (r"^encoder\.subsampling\.linear\.", "encoder.pre_encode.out."),
    (r"\.self_attn\.q_proj\.", ".self_attn.linear_q."),
    (r"\.self_attn\.k_proj\.", ".self_attn.linear_k."),
    (r"\.self_attn\.v_proj\.", ".self_attn.linear_v."),
    (r"\.self_attn\.o_proj\.", ".self_attn.linear_out."),
    (r"\.self_attn\.relative_k_proj\.", ".self_attn.linear_pos."),
    (r"\.self_attn\.bias_u$", ".self_attn.pos_bias_u"),
    (r"\.self_attn\.bias_v$", ".self_attn.pos_bias_v"),
    (r"\.conv\.norm\.", ".conv.batch_norm."),
    (r"^decoder\.embedding\.", "decoder.prediction.embed."),
    (r"^decoder\.lstm\.", "decoder.prediction.dec_rnn.lstm."),
    (r"^decoder\.decoder_projector\.", "joint.pred."),
    (r"^encoder_projector\.", "joint.enc."),
    (r"^joint\.head\.", "joint.joint_net.2."),
]


def nemo_name(name: str) -> str:
    for pattern, repl in RENAMES:
        name, hits = re.subn(pattern, repl, name)
        if hits and pattern.startswith("^"):
            break
    return name


def sentencepiece_model(pieces: list[str]) -> bytes:
    from sentencepiece import sentencepiece_model_pb2 as sp_pb2

    proto = sp_pb2.ModelProto()
    proto.trainer_spec.model_type = sp_pb2.TrainerSpec.BPE
    proto.trainer_spec.vocab_size = len(pieces)
    proto.trainer_spec.unk_id, proto.trainer_spec.bos_id, proto.trainer_spec.eos_id = 0, -1, -1
    proto.trainer_spec.pad_id = -1
    proto.normalizer_spec.name = "identity"
    proto.normalizer_spec.add_dummy_prefix = True
    for index, piece in enumerate(pieces):
        entry = proto.pieces.add()
        entry.piece, entry.score = piece, 0.0
        entry.type = (
            sp_pb2.ModelProto.SentencePiece.UNKNOWN if index == 0 else sp_pb2.ModelProto.SentencePiece.NORMAL
        )
    return proto.SerializeToString()


def export(model_dir: Path, out: Path) -> None:
    import numpy as np
    import torch
    import yaml
    from safetensors.torch import load_file
    from transformers.audio_utils import mel_filter_bank

    config = json.loads((model_dir / "config.json").read_text())
    enc = config["encoder_config"]
    state = {nemo_name(k): v for k, v in load_file(str(model_dir / "model.safetensors")).items()}
    fb = mel_filter_bank(
        num_frequency_bins=257,
        num_mel_filters=enc["num_mel_bins"],
        min_frequency=0.0,
        max_frequency=8000.0,
        sampling_rate=16000,
        norm="slaney",
        mel_scale="slaney",
    )
    state["preprocessor.featurizer.fb"] = torch.from_numpy(np.ascontiguousarray(fb.T[None], dtype=np.float32))
    state["preprocessor.featurizer.window"] = torch.hann_window(400, periodic=False)
    vocab = config["vocab_size"] - 1  # NeMo's vocab excludes the blank
    cfg = {
        "sample_rate": 16000,
        "preprocessor": {
            "_target_": "nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor",
            "sample_rate": 16000,
            "normalize": "per_feature",
            "window_size": 0.025,
            "window_stride": 0.01,
            "window": "hann",
            "features": enc["num_mel_bins"],
            "n_fft": 512,
            "log": True,
            "frame_splicing": 1,
            "dither": 0.0,
            "pad_to": 0,
            "pad_value": 0.0,
        },
        "encoder": {
            "_target_": "nemo.collections.asr.modules.ConformerEncoder",
            "feat_in": enc["num_mel_bins"],
            "n_layers": enc["num_hidden_layers"],
            "d_model": enc["hidden_size"],
            "subsampling": "dw_striding",
            "subsampling_factor": enc["subsampling_factor"],
            "subsampling_conv_channels": enc["subsampling_conv_channels"],
            "ff_expansion_factor": enc["intermediate_size"] // enc["hidden_size"],
            "self_attention_model": "rel_pos",
            "n_heads": enc["num_attention_heads"],
            "att_context_size": [-1, -1],
            "xscaling": bool(enc["scale_input"]),
            "pos_emb_max_len": enc["max_position_embeddings"],
            "conv_kernel_size": enc["conv_kernel_size"],
            "conv_norm_type": "batch_norm",
            "use_bias": bool(enc["attention_bias"]),
        },
        "decoder": {
            "_target_": "nemo.collections.asr.modules.RNNTDecoder",
            "vocab_size": vocab,
            "blank_as_pad": True,
            "prednet": {
                "pred_hidden": config["decoder_hidden_size"],
                "pred_rnn_layers": config["num_decoder_layers"],
            },
            "durations": list(config["durations"]),
        },
        "joint": {
            "_target_": "nemo.collections.asr.modules.RNNTJoint",
            "num_classes": vocab,
            "num_extra_outputs": len(config["durations"]),
            "jointnet": {
                "joint_hidden": config["decoder_hidden_size"],
                "activation": config["hidden_act"],
                "encoder_hidden": enc["hidden_size"],
                "pred_hidden": config["decoder_hidden_size"],
            },
        },
        "model_defaults": {"tdt_durations": list(config["durations"])},
        "decoding": {
            "strategy": "greedy",
            "durations": list(config["durations"]),
            "greedy": {"max_symbols": config["max_symbols_per_step"]},
        },
        "tokenizer": {"dir": ".", "type": "bpe", "model_path": "nemo:tokenizer.model"},
        "target": "nemo.collections.asr.models.rnnt_bpe_models.EncDecRNNTBPEModel",
    }
    pieces = common.pieces(model_dir)[:vocab]
    out.parent.mkdir(parents=True, exist_ok=True)
    common.write_vocab(model_dir, out.parent / "vocab.txt")  # the worker maps the port's pieces back to ids
    tmp = out.with_suffix(".tmp")
    with tarfile.open(tmp, "w") as tar:

        def add(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(f"./{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))

        add("model_config.yaml", yaml.safe_dump(cfg, sort_keys=False).encode())
        add("bench_tokenizer.model", sentencepiece_model(pieces))
        weights = out.with_suffix(
            ".ckpt.tmp"
        )  # through a file: a 2.5 GB in-memory copy would double the peak
        torch.save(state, weights)
        del state
        tar.add(weights, arcname="./model_weights.ckpt")
        weights.unlink()
    tmp.rename(out)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model", type=Path, required=True, help="transformers checkpoint folder (bench_parakeet's)"
    )
    parser.add_argument("--out", type=Path, required=True, help="the .nemo file to write")
    args = parser.parse_args()
    export(args.model, args.out)


if __name__ == "__main__":
    main()
