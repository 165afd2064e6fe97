"""Export the bench's Parakeet-TDT checkpoint to sherpa-onnx's ``nemo_transducer`` layout.

Run with the reference python after ``export_onnx_asr.py`` wrote the same folder (the encoder is shared):

    .venv-ref/bin/python tests/bench/peers/export_sherpa_onnx.py --model CKPT_DIR --out OUT_DIR [--int8]

sherpa-onnx's own converter (``scripts/nemo/parakeet-tdt-0.6b-v2/export_onnx.py`` in its repository) needs
NeMo and a ``.nemo`` archive; this writes what that script writes, read from sherpa-onnx 2.0's
``offline-transducer-nemo-model.cc``:

* ``encoder.onnx``: onnx-asr's encoder graph (same inputs/outputs; its weights stay in
  ``encoder-model.onnx.data``, so the 2.4 GB are stored once) plus the metadata sherpa-onnx reads:
  ``vocab_size`` (without blank), ``subsampling_factor``, ``normalize_type`` (per_feature),
  ``pred_rnn_layers``, ``pred_hidden``, ``feat_dim``, and a ``url`` containing "tdt" (how sherpa-onnx
  decides that a NeMo transducer is TDT);
* ``decoder.onnx``: ``targets [B,U] i32``, ``target_length [B] i32``, LSTM ``h``/``c [2,B,640]`` →
  ``outputs [B,640,U]`` (the LSTM output: as in NeMo, the predictor projection belongs to the joiner),
  ``prednet_lengths``, next ``h``/``c``;
* ``joiner.onnx``: ``encoder_outputs [B,1024,T]``, ``decoder_outputs [B,640,U]`` → ``outputs
  [B,T,U,8198]`` (token logits, then duration logits);
* ``tokens.txt`` (``piece id``, ``<blk>`` last);
* with ``--int8``: ``encoder.int8.onnx`` (onnx-asr's int8 encoder plus the metadata), ``decoder.int8.onnx``
  and ``joiner.int8.onnx`` from ``quantize_dynamic`` (int8 weights, as sherpa-onnx's script does for them).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from tests.bench.peers import common  # noqa: E402

OPSET = 17


def with_metadata(source: Path, target: Path, meta: dict[str, str]) -> None:
    """Copy an ONNX graph with sherpa-onnx's metadata; external weights stay where they are (same folder)."""
    import onnx

    proto = onnx.load(str(source), load_external_data=False)
    del proto.metadata_props[:]
    for key, value in meta.items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, value
    target.unlink(missing_ok=True)
    onnx.save_model(proto, str(target))


def export(model_dir: Path, out: Path, threads: int, int8: bool) -> None:
    import torch
    from torch import nn
    from transformers import ParakeetForTDT

    if not (out / "encoder-model.onnx").is_file():
        raise SystemExit(
            f"run export_onnx_asr.py --out {out} first: the sherpa-onnx layout shares its encoder"
        )
    torch.set_num_threads(threads)
    net = ParakeetForTDT.from_pretrained(model_dir).eval()
    cfg = net.config
    hidden, pred, layers = cfg.encoder_config.hidden_size, cfg.decoder_hidden_size, cfg.num_decoder_layers
    meta = {
        "vocab_size": str(cfg.vocab_size - 1),
        "subsampling_factor": str(cfg.encoder_config.subsampling_factor),
        "normalize_type": "per_feature",
        "pred_rnn_layers": str(layers),
        "pred_hidden": str(pred),
        "feat_dim": str(cfg.encoder_config.num_mel_bins),
        "model_type": "EncDecRNNTBPEModel",
        "version": "2",
        "model_author": "Captioneer bench (random weights)",
        "url": "random-weights/parakeet-tdt-0.6b-v3",
        "comment": "transformers ParakeetForTDT exported by tests/bench/peers; only the transducer branch",
    }
    with_metadata(out / "encoder-model.onnx", out / "encoder.onnx", meta)

    class Decoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = net

        def forward(self, targets, target_length, states_1, states_2):  # noqa: ANN001, ANN201
            emb = self.net.decoder.embedding(targets.to(torch.int64))
            out, (h, c) = self.net.decoder.lstm(emb, (states_1, states_2))
            return out.transpose(1, 2), target_length, h, c

    class Joiner(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = net

        def forward(self, encoder_outputs, decoder_outputs):  # noqa: ANN001, ANN201
            enc = self.net.encoder_projector(encoder_outputs.transpose(1, 2))  # [B,T,640]
            dec = self.net.decoder.decoder_projector(decoder_outputs.transpose(1, 2))  # [B,U,640]
            return self.net.joint(
                decoder_hidden_states=dec[:, None, :, :], encoder_hidden_states=enc[:, :, None, :]
            )

    with torch.no_grad():
        torch.onnx.export(
            Decoder(),
            (
                torch.tensor([[cfg.blank_token_id]], dtype=torch.int32),
                torch.tensor([1], dtype=torch.int32),
                torch.zeros(layers, 1, pred),
                torch.zeros(layers, 1, pred),
            ),
            str(out / "decoder.onnx"),
            dynamo=False,
            opset_version=OPSET,
            input_names=["targets", "target_length", "states.1", "states.2"],
            output_names=["outputs", "prednet_lengths", "states", "states.3"],
            dynamic_axes={
                "targets": {0: "batch", 1: "tokens"},
                "target_length": {0: "batch"},
                "states.1": {1: "batch"},
                "states.2": {1: "batch"},
                "outputs": {0: "batch", 2: "tokens"},
                "prednet_lengths": {0: "batch"},
                "states": {1: "batch"},
                "states.3": {1: "batch"},
            },
        )
        torch.onnx.export(
            Joiner(),
            (torch.randn(1, hidden, 1), torch.randn(1, pred, 1)),
            str(out / "joiner.onnx"),
            dynamo=False,
            opset_version=OPSET,
            input_names=["encoder_outputs", "decoder_outputs"],
            output_names=["outputs"],
            dynamic_axes={
                "encoder_outputs": {0: "batch", 2: "frames"},
                "decoder_outputs": {0: "batch", 2: "tokens"},
                "outputs": {0: "batch", 1: "frames", 2: "tokens"},
            },
        )
    common.write_vocab(model_dir, out / "tokens.txt")
    if int8:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        if not (out / "encoder-model.int8.onnx").is_file():
            raise SystemExit(f"run export_onnx_asr.py --int8 --out {out} first")
        with_metadata(out / "encoder-model.int8.onnx", out / "encoder.int8.onnx", meta)
        for name in ("decoder", "joiner"):
            (out / f"{name}.int8.onnx").unlink(missing_ok=True)
            quantize_dynamic(out / f"{name}.onnx", out / f"{name}.int8.onnx", weight_type=QuantType.QInt8)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model", type=Path, required=True, help="transformers checkpoint folder (bench_parakeet's)"
    )
    parser.add_argument("--out", type=Path, required=True, help="the folder export_onnx_asr.py wrote")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--int8", action="store_true")
    args = parser.parse_args()
    common.quiet()
    export(args.model, args.out, args.threads, args.int8)


if __name__ == "__main__":
    main()
