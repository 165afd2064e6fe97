"""Train the tiny ParakeetForTDT demo model on the cached espeak-ng corpus (transformers 5.23 TDT loss).

`--steps N` sets a step budget: the learning rate schedule (warmup, then cosine decay) follows the step count and
runs are bit-reproducible with the same torch build, thread count and CPU. `--budget-min M` instead stops by wall
clock (not reproducible). The first `--ctc-only-until` of the budget trains the encoder alone with CTC (final +
intermediate heads), then the transducer loss joins. A checkpoint (state dict + optimizer) is written every
--checkpoint-every-s seconds and at the end; `--export-only` turns the latest checkpoint into the shipped layout
(save_pretrained + processor_config.json + tokenizer.json). The shipped model is three stages (PROVENANCE.md):

    # stage 1, from scratch (5000 steps, ~76 min on 2 shared cores, one thread)
    .venv-ref/bin/python tests/reference/demo_model/train.py --data $DEMO_WORK/data4 --work $DEMO_WORK/run8 \
        --out $DEMO_WORK/export8 --steps 5000 --max-frames 6000 --threads 1
    # stage 2, fine-tune from stage 1 with speaker augmentation (VTLP mel warp + time stretch)
    mkdir -p $DEMO_WORK/run9 && cp $DEMO_WORK/run8/tokenizer.json $DEMO_WORK/run9/
    .venv-ref/bin/python tests/reference/demo_model/train.py --data $DEMO_WORK/data4 --work $DEMO_WORK/run9 \
        --out $DEMO_WORK/export9 --init-from $DEMO_WORK/run8/checkpoint.pt --steps 3600 --max-frames 6000 \
        --threads 1 --lr 1e-3 --ctc-only-until 0 --specaug-from 0 --vtlp 0.15 --time-stretch 0.1 --augment-prob 0.8
    # stage 3, fine-tune from stage 2 with stronger augmentation (the shipped weights)
    mkdir -p $DEMO_WORK/run10 && cp $DEMO_WORK/run8/tokenizer.json $DEMO_WORK/run10/
    .venv-ref/bin/python tests/reference/demo_model/train.py --data $DEMO_WORK/data4 --work $DEMO_WORK/run10 \
        --out $DEMO_WORK/export10 --init-from $DEMO_WORK/run9/checkpoint.pt --steps 1900 --max-frames 6000 \
        --threads 1 --lr 6e-4 --ctc-only-until 0 --specaug-from 0 --vtlp 0.2 --time-stretch 0.15 --augment-prob 0.9

The augmentation options default to off, which is the stage-1 recipe.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import Clip, load_split  # noqa: E402
from tokenizer import build_processor, train_tokenizer  # noqa: E402

SEED = 1234


def model_config(vocab_size: int, blank_id: int, pad_id: int):
    from transformers import ParakeetTDTConfig

    encoder = {
        "model_type": "parakeet_encoder",
        "hidden_size": 144,
        "num_hidden_layers": 5,
        "num_attention_heads": 4,
        "intermediate_size": 576,
        "hidden_act": "silu",
        "attention_bias": False,
        "convolution_bias": False,
        "conv_kernel_size": 9,
        "subsampling_factor": 8,
        "subsampling_conv_channels": 96,
        "subsampling_conv_kernel_size": 3,
        "subsampling_conv_stride": 2,
        "num_mel_bins": 128,
        "scale_input": False,
        "dropout": 0.1,
        "dropout_positions": 0.0,
        "layerdrop": 0.0,
        "activation_dropout": 0.1,
        "attention_dropout": 0.1,
        "max_position_embeddings": 5000,
    }
    return ParakeetTDTConfig(
        vocab_size=vocab_size,
        blank_token_id=blank_id,
        pad_token_id=pad_id,
        decoder_hidden_size=192,
        num_decoder_layers=2,
        hidden_act="relu",
        max_symbols_per_step=10,
        durations=[0, 1, 2, 3, 4],
        encoder_config=encoder,
    )


def reset_to_torch_init(model: torch.nn.Module) -> None:
    """transformers initialises every Linear/Conv with N(0, 0.02). Through the four stacked subsampling
    convs that shrinks the signal ~1e-6 times, below the LayerNorm eps, and the encoder never learns
    (the decoder then learns a language model alone). PyTorch's fan-in scaled defaults keep it alive."""
    for module in model.modules():
        if isinstance(module, (torch.nn.Linear, torch.nn.Conv1d, torch.nn.Conv2d)):
            module.reset_parameters()


def init_subsampling(model: torch.nn.Module) -> None:
    """He-initialise the convolutional subsampling (ReLU gain) with zero biases. With PyTorch's defaults
    its output has std ~0.05 and ~83 % of it is a constant offset from the biases, so the conformer
    sees almost no audio and the CTC loss sits on its blank plateau for ~1400 steps (measured)."""
    for module in model.encoder.subsampling.modules():
        if isinstance(module, (torch.nn.Conv2d, torch.nn.Linear)):
            gain = "relu" if isinstance(module, torch.nn.Conv2d) else "linear"
            torch.nn.init.kaiming_normal_(module.weight, nonlinearity=gain)
            torch.nn.init.zeros_(module.bias)


class CTCHeads(torch.nn.Module):
    """Training-only CTC heads (never shipped) on the encoder output and on intermediate taps: the
    subsampling output and chosen conformer layers. Supervising the lower layers directly lets the
    encoder leave the blank plateau within a few hundred steps instead of ~1400 (measured on the corpus)."""

    def __init__(self, model: torch.nn.Module, taps: list[str]):
        super().__init__()
        hidden, vocab = model.config.encoder_config.hidden_size, model.config.vocab_size
        self.heads = torch.nn.ModuleDict({name: torch.nn.Linear(hidden, vocab) for name in ["final", *taps]})
        self._captured: dict[str, torch.Tensor] = {}
        for name in taps:
            module = model.encoder.subsampling if name == "subsampling" else model.encoder.layers[int(name)]
            module.register_forward_hook(self._capture(name))

    def _capture(self, name: str):
        def hook(module, inputs, output) -> None:
            self._captured[name] = output[0] if isinstance(output, tuple) else output

        return hook

    def loss(self, encoded, labels: torch.Tensor, pad_id: int, blank_id: int) -> torch.Tensor:
        """Mean CTC loss over the heads, for the encoder pass that just ran."""
        lengths = encoded.attention_mask.sum(-1)
        outputs = {"final": encoded.last_hidden_state, **self._captured}
        losses = [
            ctc_loss(head(outputs[name]), lengths, labels, pad_id, blank_id)
            for name, head in self.heads.items()
        ]
        return torch.stack(losses).mean()


def make_batches(clips: list[Clip], max_frames: int, rng: random.Random) -> list[list[int]]:
    """Length-bucketed batches: sort by frames (with a little jitter), cut at max padded frames."""
    order = sorted(range(len(clips)), key=lambda i: len(clips[i].features) + rng.uniform(0, 30))
    batches, current, longest = [], [], 0
    for i in order:
        n = len(clips[i].features)
        if current and max(longest, n) * (len(current) + 1) > max_frames:
            batches.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, n)
    if current:
        batches.append(current)
    rng.shuffle(batches)
    return batches


def spec_augment(feats: torch.Tensor, lengths: torch.Tensor, gen: torch.Generator) -> None:
    """In place: 2 frequency masks (<= 15 bins) and 2 time masks (<= 5 % of the clip) per example."""
    for b in range(feats.shape[0]):
        n = int(lengths[b])
        for _ in range(2):
            w = int(torch.randint(0, 16, (1,), generator=gen))
            f0 = int(torch.randint(0, 128 - w + 1, (1,), generator=gen))
            feats[b, :n, f0 : f0 + w] = 0
            tw = int(torch.randint(0, max(1, n // 20) + 1, (1,), generator=gen))
            t0 = int(torch.randint(0, max(1, n - tw + 1), (1,), generator=gen))
            feats[b, t0 : t0 + tw, :] = 0


def _slaney_mel(hz: torch.Tensor) -> torch.Tensor:
    """Hz -> slaney mel (librosa/transformers ``mel_scale="slaney"``: linear below 1 kHz, log above)."""
    mel = hz * 3.0 / 200.0
    log_part = 15.0 + torch.log(torch.clamp(hz, min=1e-3) / 1000.0) * 27.0 / math.log(6.4)
    return torch.where(hz >= 1000.0, log_part, mel)


def _slaney_hz(mel: torch.Tensor) -> torch.Tensor:
    hz = mel * 200.0 / 3.0
    return torch.where(mel >= 15.0, 1000.0 * torch.exp(math.log(6.4) / 27.0 * (mel - 15.0)), hz)


N_MELS, NYQUIST_HZ = 128, 8000.0
# centre of each mel band of the reference extractor (128 slaney bands, 0 Hz .. Nyquist of 16 kHz)
MEL_CENTRES_HZ = _slaney_hz(
    torch.linspace(0.0, float(_slaney_mel(torch.tensor(NYQUIST_HZ))), N_MELS + 2)[1:-1].double()
)


def vtlp_source_bins(alpha: float, boundary_hz: float = 4800.0) -> torch.Tensor:
    """Fractional source mel-band index for every output band under vocal-tract-length perturbation
    (Jaitly & Hinton 2013): a speaker with a vocal tract ``alpha`` times shorter has its spectrum at ``alpha`` × f,
    so output frequency f reads the source at f / alpha up to a boundary, then a straight line that maps the
    Nyquist frequency onto itself (no band runs off the end)."""
    f = MEL_CENTRES_HZ
    b = boundary_hz * min(alpha, 1.0)
    # f_out = alpha * f_src below b / alpha (source) ... invert the piecewise-linear forward warp
    edge_out = b  # output frequency of the break point
    src = torch.where(
        f <= edge_out,
        f / alpha,
        b / alpha + (f - edge_out) * (NYQUIST_HZ - b / alpha) / (NYQUIST_HZ - edge_out),
    )
    centres_mel = _slaney_mel(MEL_CENTRES_HZ)
    src_mel = _slaney_mel(torch.clamp(src, 0.0, NYQUIST_HZ))
    # mel centres are equally spaced: fractional index by linear interpolation of the mel value
    step = float(centres_mel[1] - centres_mel[0])
    return torch.clamp((src_mel - centres_mel[0]) / step, 0.0, N_MELS - 1.0).float()


def speaker_augment(x: torch.Tensor, gen: torch.Generator, warp: float, stretch: float) -> torch.Tensor:
    """One clip's normalised log-mel features (frames, 128) under a random speaker/rate change, drawn from ``gen``:
    a VTLP warp of the mel axis with alpha ~ U(1 - warp, 1 + warp) and a time stretch by a rate ~ U(1 - stretch,
    1 + stretch) (linear interpolation of frames). Each band is re-normalised to zero mean and unit variance
    afterwards, as the reference extractor normalises every clip. ``warp == stretch == 0`` returns ``x``
    unchanged and draws nothing."""
    if warp > 0:
        alpha = 1.0 + warp * (2.0 * float(torch.rand((), generator=gen)) - 1.0)
        pos = vtlp_source_bins(alpha)
        lo = pos.floor().long().clamp(max=N_MELS - 2)
        frac = pos - lo
        x = x[:, lo] * (1 - frac) + x[:, lo + 1] * frac
    if stretch > 0:
        rate = 1.0 + stretch * (2.0 * float(torch.rand((), generator=gen)) - 1.0)
        n = x.shape[0]
        m = max(2, round(n / rate))
        t = torch.linspace(0.0, n - 1.0, m)
        lo_t = t.floor().long().clamp(max=n - 2)
        ft = (t - lo_t)[:, None]
        x = x[lo_t] * (1 - ft) + x[lo_t + 1] * ft
    if warp > 0 or stretch > 0:
        mean = x.mean(0, keepdim=True)
        std = x.std(0, keepdim=True)
        x = (x - mean) / (std + 1e-5)
    return x


def collate(clips: list[Clip], ids: list[list[int]], blank_id: int, pad_id: int, augment=None):
    """Pad a batch; ``augment`` (a function of one clip's float32 feature tensor) may change each clip first."""
    tensors = [torch.from_numpy(c.features.astype(np.float32)) for c in clips]
    if augment is not None:
        tensors = [augment(t) for t in tensors]
    lengths = torch.tensor([len(t) for t in tensors])
    feats = torch.zeros(len(clips), int(lengths.max()), 128)
    for b, t in enumerate(tensors):
        feats[b, : len(t)] = t
    mask = torch.arange(feats.shape[1])[None, :] < lengths[:, None]
    max_u = max(len(x) for x in ids)
    labels = torch.full((len(clips), max_u), pad_id, dtype=torch.long)
    for b, x in enumerate(ids):
        labels[b, : len(x)] = torch.tensor(x)
    decoder_input = torch.cat([torch.full((len(clips), 1), blank_id, dtype=torch.long), labels], dim=1)
    return feats, mask, lengths, labels, decoder_input


def ctc_loss(
    logits: torch.Tensor, lengths: torch.Tensor, labels: torch.Tensor, pad_id: int, blank_id: int
) -> torch.Tensor:
    log_probs = torch.log_softmax(logits.float(), dim=-1).transpose(0, 1)
    label_lengths = (labels != pad_id).sum(-1)
    return torch.nn.functional.ctc_loss(
        log_probs, labels, lengths, label_lengths, blank=blank_id, reduction="mean", zero_infinity=True
    )


def lr_at(fraction: float, peak: float, warmup: float = 0.06, floor: float = 0.03) -> float:
    if fraction < warmup:
        return peak * max(fraction / warmup, 0.02)
    progress = min(1.0, (fraction - warmup) / (1 - warmup))
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


def export(model, processor, out_dir: Path) -> None:
    """save_pretrained layout the engine loads; blank embedding row zeroed (docs/reference_parity.md §1.5)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    model = model.eval()
    with torch.no_grad():
        model.decoder.embedding.weight[model.config.blank_token_id].zero_()
    model.generation_config.decoder_start_token_id = model.config.blank_token_id
    model.generation_config.suppress_tokens = list(
        range(model.config.vocab_size, model.config.vocab_size + len(model.config.durations))
    )
    model.save_pretrained(out_dir)
    processor.save_pretrained(out_dir)


def load_checkpoint(
    path: Path, model: torch.nn.Module, ctc_heads: CTCHeads, optimizer: torch.optim.Optimizer
) -> dict:
    """Load weights, CTC heads and optimizer moments from ``path`` in place; returns its saved run state."""
    saved = torch.load(path, weights_only=False)
    if "ctc_heads" not in saved:
        raise SystemExit(
            f"{path} was written by the older single-CTC-head recipe, which this train.py cannot "
            "continue; start a fresh --work directory (or use the train.py of that run)"
        )
    model.load_state_dict(saved["model"])
    ctc_heads.load_state_dict(saved["ctc_heads"])
    optimizer.load_state_dict(saved["optimizer"])
    return saved["state"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data",
        type=Path,
        required=True,
        action="append",
        help="a make_data.py corpus; repeat to train on the union of their train splits",
    )
    parser.add_argument("--work", type=Path, required=True, help="checkpoints, tokenizer, logs")
    parser.add_argument("--out", type=Path, required=True, help="exported model directory")
    parser.add_argument("--budget-min", type=float, default=55.0)
    parser.add_argument(
        "--steps",
        type=int,
        help="budget in optimizer steps instead of minutes: the schedule follows the step count, "
        "so a rerun with the same torch build and CPU gives the same weights (a wall-clock budget "
        "does not)",
    )
    parser.add_argument("--checkpoint-every-s", type=float, default=240.0)
    parser.add_argument("--max-frames", type=int, default=10000, help="padded mel frames per batch")
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument(
        "--ctc-weight",
        type=float,
        default=0.3,
        help="weight of the auxiliary CTC loss (mean over the CTC heads)",
    )
    parser.add_argument(
        "--ctc-taps",
        default="subsampling,1",
        help="comma-separated intermediate CTC taps: 'subsampling' and/or conformer layer indices",
    )
    parser.add_argument(
        "--ctc-only-until",
        type=float,
        default=0.1,
        help="fraction of the budget trained on the encoder CTC loss alone (the transducer "
        "loss is skipped), so the encoder learns to read audio before the decoder can "
        "fall back on a language model",
    )
    parser.add_argument(
        "--specaug-from",
        type=float,
        default=0.1,
        help="fraction of the budget after which SpecAugment masks are applied",
    )
    parser.add_argument(
        "--vtlp",
        type=float,
        default=0.0,
        help="speaker augmentation: warp each clip's mel axis by a vocal-tract-length factor drawn "
        "from U(1 - VTLP, 1 + VTLP) (0: off, the original recipe)",
    )
    parser.add_argument(
        "--time-stretch",
        type=float,
        default=0.0,
        help="stretch each clip's frames by a rate drawn from U(1 - X, 1 + X) (0: off)",
    )
    parser.add_argument(
        "--augment-prob",
        type=float,
        default=1.0,
        help="fraction of clips that get --vtlp/--time-stretch (drawn per clip)",
    )
    parser.add_argument("--export-only", action="store_true")
    parser.add_argument(
        "--init-from",
        type=Path,
        help="start from this checkpoint's weights and optimizer moments with a fresh schedule "
        "(a new cosine cycle over --budget-min); ignored when --work has a checkpoint",
    )
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(SEED)
    rng = random.Random(SEED)
    gen = torch.Generator().manual_seed(SEED)
    args.work.mkdir(parents=True, exist_ok=True)

    from transformers import ParakeetForTDT

    train = [] if args.export_only else [clip for data in args.data for clip in load_split(data, "train")]
    tok_path = args.work / "tokenizer.json"
    if not tok_path.exists():
        train_tokenizer([c.text for c in train], args.vocab, tok_path)
    processor = build_processor(tok_path)
    tokenizer = processor.tokenizer
    blank_id = tokenizer.convert_tokens_to_ids("<blank>")
    pad_id = tokenizer.convert_tokens_to_ids("<pad>")
    config = model_config(len(tokenizer), blank_id, pad_id)
    model = ParakeetForTDT(config)
    reset_to_torch_init(model)
    init_subsampling(model)
    # auxiliary CTC heads on the encoder (training only, never shipped): speed up the alignment
    # learning a transducer otherwise needs many steps for
    ctc_heads = CTCHeads(model, [tap for tap in args.ctc_taps.split(",") if tap])
    params = list(model.parameters()) + list(ctc_heads.parameters())
    optimizer = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.98), weight_decay=1e-3)
    ckpt_path = args.work / "checkpoint.pt"
    state = {"elapsed_s": 0.0, "step": 0, "epoch": 0}
    if ckpt_path.exists():
        state = load_checkpoint(ckpt_path, model, ctc_heads, optimizer)
        print(f"resumed at step {state['step']} ({state['elapsed_s']:.0f}s)", flush=True)
    elif args.init_from is not None:
        step = load_checkpoint(args.init_from, model, ctc_heads, optimizer)["step"]
        state = {"elapsed_s": 0.0, "step": step, "epoch": 0, "schedule_start_step": step}
        print(f"initialised from {args.init_from} (step {state['step']}), new schedule", flush=True)
    blank_row = model.decoder.embedding.weight[blank_id]
    with torch.no_grad():
        # the engine (like NeMo, whose prediction net pads with blank) starts from a zero blank
        # embedding; train with that row fixed at zero so training and inference see the same state
        blank_row.zero_()
    if args.export_only:
        export(model, processor, args.out)
        return

    n_params = sum(p.numel() for p in model.parameters())
    print(
        f"{len(train)} train clips, {sum(len(c.features) for c in train) / 360000:.2f} h, "
        f"vocab {len(tokenizer)}, {n_params / 1e6:.2f} M params",
        flush=True,
    )
    label_ids = [tokenizer.encode(c.text, add_special_tokens=False) for c in train]
    budget_s = args.budget_min * 60
    start = time.monotonic() - state["elapsed_s"]
    last_ckpt = time.monotonic()
    log = open(args.work / "train_log.jsonl", "a")  # noqa: SIM115 - appended to for the whole run

    def save() -> None:
        state["elapsed_s"] = time.monotonic() - start
        torch.save(
            {
                "model": model.state_dict(),
                "ctc_heads": ctc_heads.state_dict(),
                "optimizer": optimizer.state_dict(),
                "state": state,
            },
            args.work / "checkpoint.tmp",
        )
        (args.work / "checkpoint.tmp").replace(ckpt_path)

    augment = None
    if args.vtlp > 0 or args.time_stretch > 0:

        def augment(x: torch.Tensor) -> torch.Tensor:
            if args.augment_prob < 1.0 and float(torch.rand((), generator=gen)) >= args.augment_prob:
                return x
            return speaker_augment(x, gen, args.vtlp, args.time_stretch)

    model.train()
    ctc_heads.train()
    done = False
    while not done:
        batches = make_batches(train, args.max_frames, rng)
        for batch in batches:
            if args.steps:
                fraction = (state["step"] - state.get("schedule_start_step", 0)) / args.steps
            else:
                fraction = (time.monotonic() - start) / budget_s
            if fraction >= 1.0:
                done = True
                break
            for group in optimizer.param_groups:
                group["lr"] = lr_at(fraction, args.lr)
            feats, mask, lengths, labels, decoder_input = collate(
                [train[i] for i in batch], [label_ids[i] for i in batch], blank_id, pad_id, augment
            )
            if fraction >= args.specaug_from:
                spec_augment(feats, lengths, gen)
            encoded = model.get_audio_features(input_features=feats, attention_mask=mask)
            ctc = ctc_heads.loss(encoded, labels, pad_id, blank_id)
            if fraction < args.ctc_only_until:
                transducer_loss, loss = None, ctc
            else:
                transducer_loss = model(
                    encoder_outputs=encoded, decoder_input_ids=decoder_input, labels=labels
                ).loss
                loss = transducer_loss + args.ctc_weight * ctc
            optimizer.zero_grad()
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            with torch.no_grad():
                blank_row.zero_()
            state["step"] += 1
            if state["step"] % 10 == 0:
                record = {
                    "step": state["step"],
                    "epoch": state["epoch"],
                    "loss": None if transducer_loss is None else round(float(transducer_loss.detach()), 4),
                    "ctc": round(float(ctc.detach()), 4),
                    "grad_norm": round(float(grad_norm), 3),
                    "lr": optimizer.param_groups[0]["lr"],
                    "t": round(time.monotonic() - start),
                }
                print(json.dumps(record), flush=True)
                log.write(json.dumps(record) + "\n")
                log.flush()
            if time.monotonic() - last_ckpt > args.checkpoint_every_s:
                save()
                last_ckpt = time.monotonic()
        else:
            state["epoch"] += 1
    save()
    export(model, processor, args.out)
    print(
        f"done: {state['step']} steps, {state['epoch']} full epochs, {time.monotonic() - start:.0f}s",
        flush=True,
    )


if __name__ == "__main__":
    main()
