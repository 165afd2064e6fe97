"""Export the bench's Parakeet-TDT checkpoint (transformers layout) to onnx-asr's ``nemo-conformer-tdt`` layout.

Run with the reference python (torch 2.13 + transformers 5.23, plus ``onnx onnxruntime``):

    .venv-ref/bin/python tests/bench/peers/export_onnx_asr.py --model CKPT_DIR --out OUT_DIR [--int8]

Writes what onnx-asr 0.12's ``NemoConformerTdt`` loads from a local folder (``models/nemo.py``):

* ``encoder-model.onnx`` (+ ``encoder-model.onnx.data`` when over 2 GB): ``audio_signal [B,128,T] f32``,
  ``length [B] i64`` → ``outputs [B,1024,T'] f32`` (the raw encoder output, as NeMo exports it),
  ``encoded_lengths [B] i64``;
* ``decoder_joint-model.onnx``: ``encoder_outputs [B,1024,1] f32``, ``targets [B,1] i32``,
  ``target_length [B] i32``, ``input_states_1/2 [2,B,640] f32`` (LSTM h/c) → ``outputs [B,1,1,8198]``
  (8193 token logits, then 5 duration logits), ``prednet_lengths``, ``output_states_1/2``. As in NeMo's
  export the joint's encoder projection runs here, once per decoder call;
* ``vocab.txt`` (``piece id``, blank named ``<blk>``) and ``config.json`` (model type, 128 features, 8x);
* with ``--int8``: ``encoder-model.int8.onnx`` and ``decoder_joint-model.int8.onnx`` from
  ``onnxruntime.quantization.quantize_dynamic`` (int8 weights, dynamic uint8 activations: what the
  published ``*.int8.onnx`` files are), loaded by onnx-asr with ``quantization="int8"``.

The legacy TorchScript exporter (``dynamo=False``) is used: it traces the model's shape arithmetic
(relative positions, rel-shift views) into ONNX shape ops, so one graph serves every clip length.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from tests.bench.peers import common  # noqa: E402

OPSET = 17


def export(model_dir: Path, out: Path, threads: int) -> None:
    import onnx
    import torch
    from torch import nn
    from transformers import ParakeetForTDT

    torch.set_num_threads(threads)
    net = ParakeetForTDT.from_pretrained(model_dir, attn_implementation="eager").eval()
    cfg = net.config
    mels = cfg.encoder_config.num_mel_bins
    hidden, pred = cfg.encoder_config.hidden_size, cfg.decoder_hidden_size
    layers = cfg.num_decoder_layers

    class Encoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = net

        def forward(
            self, audio_signal: torch.Tensor, length: torch.Tensor
        ) -> tuple[torch.Tensor, torch.Tensor]:
            frames = audio_signal.shape[2]
            mask = torch.arange(frames, device=audio_signal.device)[None, :] < length[:, None]
            states = self.net.encoder(
                input_features=audio_signal.transpose(1, 2), attention_mask=mask
            ).last_hidden_state
            lengths = self.net.encoder._get_subsampling_output_length(length).to(torch.int64)
            return states.transpose(1, 2), lengths

    class DecoderJoint(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = net

        def forward(self, encoder_outputs, targets, target_length, input_states_1, input_states_2):  # noqa: ANN001, ANN201
            enc = self.net.encoder_projector(encoder_outputs.transpose(1, 2))  # [B,1,640]
            emb = self.net.decoder.embedding(targets.to(torch.int64))  # [B,1,640]
            out, (h, c) = self.net.decoder.lstm(emb, (input_states_1, input_states_2))
            dec = self.net.decoder.decoder_projector(out)  # [B,1,640]
            logits = self.net.joint(
                decoder_hidden_states=dec[:, None, :, :], encoder_hidden_states=enc[:, :, None, :]
            )
            return logits, target_length, h, c

    out.mkdir(parents=True, exist_ok=True)
    frames = 1001  # 10 s; every length axis is dynamic
    audio = torch.randn(1, mels, frames)
    length = torch.tensor([frames - 1], dtype=torch.int64)
    tmp = out / "tmp-encoder"
    tmp.mkdir(exist_ok=True)
    start = time.perf_counter()
    with torch.no_grad():
        torch.onnx.export(
            Encoder(),
            (audio, length),
            str(tmp / "encoder-model.onnx"),
            dynamo=False,
            opset_version=OPSET,
            input_names=["audio_signal", "length"],
            output_names=["outputs", "encoded_lengths"],
            dynamic_axes={
                "audio_signal": {0: "batch", 2: "time"},
                "length": {0: "batch"},
                "outputs": {0: "batch", 2: "frames"},
                "encoded_lengths": {0: "batch"},
            },
        )
    # One external-data file with onnx-asr's name (the exporter writes one file per tensor when > 2 GB).
    head = onnx.load(
        str(tmp / "encoder-model.onnx"), load_external_data=False
    )  # a > 2 GB proto cannot be sized
    big = any(t.data_location == onnx.TensorProto.EXTERNAL for t in head.graph.initializer)
    del head
    proto = onnx.load(str(tmp / "encoder-model.onnx"))
    for stale in (out / "encoder-model.onnx", out / "encoder-model.onnx.data"):
        stale.unlink(missing_ok=True)
    onnx.save_model(
        proto,
        str(out / "encoder-model.onnx"),
        save_as_external_data=big,
        all_tensors_to_one_file=True,
        location="encoder-model.onnx.data",
    )
    del proto
    for f in tmp.iterdir():
        f.unlink()
    tmp.rmdir()
    print(f"encoder exported in {time.perf_counter() - start:.0f} s", flush=True)

    with torch.no_grad():
        torch.onnx.export(
            DecoderJoint(),
            (
                torch.randn(1, hidden, 1),
                torch.tensor([[cfg.blank_token_id]], dtype=torch.int32),
                torch.tensor([1], dtype=torch.int32),
                torch.zeros(layers, 1, pred),
                torch.zeros(layers, 1, pred),
            ),
            str(out / "decoder_joint-model.onnx"),
            dynamo=False,
            opset_version=OPSET,
            input_names=["encoder_outputs", "targets", "target_length", "input_states_1", "input_states_2"],
            output_names=["outputs", "prednet_lengths", "output_states_1", "output_states_2"],
            dynamic_axes={
                "encoder_outputs": {0: "batch"},
                "targets": {0: "batch"},
                "target_length": {0: "batch"},
                "input_states_1": {1: "batch"},
                "input_states_2": {1: "batch"},
                "outputs": {0: "batch"},
                "prednet_lengths": {0: "batch"},
                "output_states_1": {1: "batch"},
                "output_states_2": {1: "batch"},
            },
        )
    common.write_vocab(model_dir, out / "vocab.txt")
    stride = cfg.encoder_config.subsampling_factor
    config = {
        "model_type": "nemo-conformer-tdt",
        "features_size": mels,
        "subsampling_factor": stride,
        "max_tokens_per_step": cfg.max_symbols_per_step,
    }
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")


def quantize(out: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    for name in ("encoder-model", "decoder_joint-model"):
        start = time.perf_counter()
        target = out / f"{name}.int8.onnx"
        target.unlink(missing_ok=True)
        quantize_dynamic(out / f"{name}.onnx", target, weight_type=QuantType.QInt8)
        print(
            f"{target.name}: {target.stat().st_size / 1e6:.0f} MB in {time.perf_counter() - start:.0f} s",
            flush=True,
        )


def verify(model_dir: Path, out: Path, threads: int, seconds: float = 10.0, save: Path | None = None) -> None:
    """The exported encoders against the transformers encoder on the same random features (equal work).
    ``save``: also write the features and torch's output (npz) for ``encoder_precision.py``, which holds
    Captioneer's storage types to the same reference with the same measures."""
    import numpy as np
    import onnxruntime as rt
    import torch
    from transformers import ParakeetForTDT

    torch.set_num_threads(threads)
    net = ParakeetForTDT.from_pretrained(model_dir).eval()
    frames = int(seconds * 100) + 1
    feats = np.random.default_rng(0).standard_normal(
        (1, net.config.encoder_config.num_mel_bins, frames), np.float32
    )
    length = np.array([frames - 1], np.int64)
    with torch.no_grad():
        mask = torch.arange(frames)[None, :] < torch.from_numpy(length)[:, None]
        ref = net.encoder(input_features=torch.from_numpy(feats).transpose(1, 2), attention_mask=mask)
        ref = ref.last_hidden_state.transpose(1, 2).numpy()
    del net
    if save is not None:
        np.savez(save, features=feats[0].T, valid_frames=length[0], reference=ref[0].T)
    options = rt.SessionOptions()
    options.intra_op_num_threads = threads
    for name in ("encoder-model.onnx", "encoder-model.int8.onnx"):
        if not (out / name).is_file():
            continue
        session = rt.InferenceSession(str(out / name), options, providers=["CPUExecutionProvider"])
        got, lengths = session.run(["outputs", "encoded_lengths"], {"audio_signal": feats, "length": length})
        valid = int(lengths[0])
        diff = np.abs(got[..., :valid] - ref[..., :valid])
        scale = np.abs(ref[..., :valid]).max()
        rel_rms = np.sqrt(np.mean(diff**2) / np.mean(ref[..., :valid] ** 2))
        print(
            f"{name}: {valid} frames, max |ort - torch| {diff.max():.2e} (reference max {scale:.2e}), "
            f"mean {diff.mean():.2e}, relative RMS {rel_rms:.2e}",
            flush=True,
        )
        del session


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model", type=Path, required=True, help="transformers checkpoint folder (bench_parakeet's)"
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--int8", action="store_true", help="also write the quantize_dynamic int8 variant")
    parser.add_argument("--int8-only", action="store_true", help="only (re)write the int8 variant")
    parser.add_argument(
        "--verify", action="store_true", help="only compare the written encoders with torch's"
    )
    parser.add_argument(
        "--save-reference", type=Path, help="with --verify: write features + torch output (npz)"
    )
    args = parser.parse_args()
    common.quiet()
    if args.verify:
        verify(args.model, args.out, args.threads, save=args.save_reference)
        return
    if not args.int8_only:
        export(args.model, args.out, args.threads)
    if args.int8 or args.int8_only:
        quantize(args.out)


if __name__ == "__main__":
    main()
