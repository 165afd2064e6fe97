"""Build tiny random Qwen3-ASR (Confucius4-R2T2) checkpoints and reference outputs with transformers 5.23.0.

Run (needs torch==2.13.0, transformers==5.23.0, tokenizers, safetensors, espeak-ng and sox):

    nice -n 10 .venv-ref/bin/python tests/reference/confucius4_r2t2/make_fixtures.py

Writes ``tests/fixtures/confucius4_r2t2/``:

* ``checkpoint_hf/``: the Hugging Face Transformers layout (``save_pretrained``: ``model.audio_tower.*``,
  ``model.multi_modal_projector.*``, ``model.language_model.*``; tied LM head not stored), float32 weights,
  ``tokenizer.json``, processor config with the chat template, ``n_window_infer`` 800.
* ``checkpoint_legacy/``: the release layout (``config.json`` with ``thinker_config``; ``thinker.audio_tower.*``
  with ``proj1``/``proj2``, ``thinker.model.*``, no LM head), **bfloat16** weights holding exactly the same values
  (every weight is rounded to a bf16-representable float32 before anything runs), ``vocab.json`` +
  ``merges.txt`` + ``tokenizer_config.json`` only (no tokenizer.json, like Qwen3-ASR-1.7B),
  ``preprocessor_config.json`` (WhisperFeatureExtractor), ``n_window_infer`` 400.
  Loading it as float32 gives bit-identical weights; the expected outputs for window 400 apply to it.
* ``audio.npz``: int16 16 kHz espeak-ng clips (0.3 s, 0.6 s, ~5 s, ~4 s) and the recipe for the 35 s clip.
* ``expected.npz`` / ``expected.json``: reference outputs (see ``describe`` in expected.json).

Reference patch (project decision, docs/reference_parity.md §2.7): for a clip whose mel is shorter than one conv
chunk (< 100 frames), transformers zero-pads the chunk to 100 frames before the conv stem, the released
implementation (and the project) runs the stem on the unpadded frames. A forward pre-hook on ``conv2d1`` crops
the chunk to its valid frames for such clips; the unpatched difference is recorded in expected.json.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import (
    Qwen2Tokenizer,
    Qwen3ASRConfig,
    Qwen3ASRFeatureExtractor,
    Qwen3ASRForConditionalGeneration,
    Qwen3ASRProcessor,
)

REPO = Path(__file__).resolve().parents[3]
OUT = REPO / "tests" / "fixtures" / "confucius4_r2t2"
SEED = 20260
SR = 16000
MAX_NEW_TOKENS = 20
# Weight scales of the random model, chosen (by trying a few) for clear logit margins and output that is not
# one token repeated from the first step: token embeddings, chain radius, and the residual-branch outputs.
EMBED_STD = float(os.environ.get("R2T2_EMBED_STD", "0.5"))
CHAIN_RADIUS = float(os.environ.get("R2T2_CHAIN_RADIUS", "2.0"))
BRANCH_GAIN = float(os.environ.get("R2T2_BRANCH_GAIN", "2.0"))
PRETOKENIZE_REGEX = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|audio_start|>",
    "<|audio_end|>",
    "<|audio_pad|>",
]
ASR_TEXT = "<asr_text>"
CONTEXT = "Names: Alice, Bob. Terms: harbour, report."
CONTINUE_PREFIX = "language English<asr_text>The quick"
SUPPORT_LANGUAGES = ["Chinese", "English", "Cantonese", "German", "French"]

# Our own minimal chat template for the tiny tokenizer. It renders exactly docs/reference_parity.md §2.5: the system turn
# is always present (empty without context); audio items become <|audio_start|><|audio_pad|><|audio_end|>.
CHAT_TEMPLATE = (
    "{%- set ns = namespace(system='') -%}"
    "{%- for message in messages -%}{%- if message['role'] == 'system' -%}"
    "{%- if message['content'] is string -%}{%- set ns.system = ns.system + message['content'] -%}"
    "{%- else -%}{%- for item in message['content'] -%}{%- if item['type'] == 'text' -%}"
    "{%- set ns.system = ns.system + item['text'] -%}{%- endif -%}{%- endfor -%}{%- endif -%}"
    "{%- endif -%}{%- endfor -%}"
    "{{- '<|im_start|>system\\n' + ns.system + '<|im_end|>\\n' -}}"
    "{%- for message in messages -%}{%- if message['role'] != 'system' -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}"
    "{%- else -%}{%- for item in message['content'] -%}"
    "{%- if item['type'] == 'audio' -%}{{- '<|audio_start|><|audio_pad|><|audio_end|>' -}}"
    "{%- elif item['type'] == 'text' -%}{{- item['text'] -}}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)

TRAINING_TEXT = """The quick brown fox jumps over the lazy dog near the river bank.
Every morning the old fisherman walks to the harbour and checks his nets before the sun rises.
Some call me nature, others call me mother nature. I have been here for over four billion years.
Please send the report to Alice before the meeting on Friday, and copy Bob.
Children play in the park while their parents talk about the weather and the news.
language English
language Chinese
language German
language English
language French
language English
"""

SPEECH = {
    "clip_tiny": ("Yes.", 4800),  # 0.3 s: below the 8000-sample minimum, mel/tower only
    "clip_short": ("Hello world.", 9600),  # 0.6 s: sub-one-chunk clip (reference patched, see module doc)
    "clip_a": (
        "Some call me nature, others call me mother nature. I have been here for over four billion years.",
        0,
    ),
    "clip_b": ("Please send the report to Alice before the meeting on Friday.", 0),
}
LONG_SAMPLES = 35 * SR


def load_fixture_helpers():
    path = REPO / "tests" / "confucius4_r2t2" / "r2t2_fixtures.py"
    spec = importlib.util.spec_from_file_location("r2t2_fixtures", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ----------------------------------------------------------------------------------------------- audio


def espeak_pcm16(text: str, length: int) -> np.ndarray:
    with tempfile.TemporaryDirectory() as tmp:
        raw, resampled = Path(tmp) / "raw.wav", Path(tmp) / "16k.wav"
        subprocess.run(["espeak-ng", "-v", "en-us", "-w", str(raw), text], check=True)
        subprocess.run(["sox", str(raw), "-r", str(SR), "-c", "1", "-b", "16", str(resampled)], check=True)
        import soundfile

        pcm, rate = soundfile.read(resampled, dtype="int16")
    assert rate == SR
    if length:
        pcm = np.pad(pcm, (0, max(0, length - len(pcm))))[:length]
    return pcm.astype(np.int16)


def make_audio(helpers) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    stored = {name: espeak_pcm16(text, length) for name, (text, length) in SPEECH.items()}
    # 35 s = a, b, short, a·0.75, b·0.5, a·1.25... with 0.25 s gaps; gains are exact in float32.
    rows, total, gains, index = [], 0, [1.0, 0.75, 0.5, 1.25], 0
    while total < LONG_SAMPLES:
        clip = index % 3
        gain = gains[(index // 3) % len(gains)]
        rows.append((clip, gain, SR // 4))
        total += len(stored[["clip_a", "clip_b", "clip_short"][clip]]) + SR // 4
        index += 1
    stored["long_recipe"] = np.array(rows, dtype=np.float64)
    stored["long_samples"] = np.array(LONG_SAMPLES, dtype=np.int64)
    floats = {k: helpers.pcm16_to_float(v) for k, v in stored.items() if k.startswith("clip_")}
    floats["clip_long"] = helpers.build_long_clip(stored, stored["long_recipe"])[:LONG_SAMPLES]
    return stored, floats


# ------------------------------------------------------------------------------------------- tokenizer


def train_tokenizer() -> Tokenizer:
    tokenizer = Tokenizer(models.BPE(unk_token=None, continuing_subword_prefix="", end_of_word_suffix=""))
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=330,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    lines = TRAINING_TEXT.splitlines() * 4
    tokenizer.train_from_iterator(lines, trainer)
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tokenizer.add_tokens([AddedToken(ASR_TEXT, special=False, normalized=False)])
    return tokenizer


def hf_tokenizer(tokenizer: Tokenizer) -> Qwen2Tokenizer:
    return Qwen2Tokenizer(
        tokenizer_object=tokenizer,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        extra_special_tokens={
            "audio_token": "<|audio_pad|>",
            "audio_bos_token": "<|audio_start|>",
            "audio_eos_token": "<|audio_end|>",
        },
    )


# ------------------------------------------------------------------------------------------------ model


def make_config(ids: dict[str, int], vocab_size: int, n_window_infer: int) -> Qwen3ASRConfig:
    return Qwen3ASRConfig(
        audio_config={
            "model_type": "qwen3_asr_encoder",
            "num_mel_bins": 128,
            "encoder_layers": 2,
            "encoder_attention_heads": 4,
            "encoder_ffn_dim": 128,
            "d_model": 64,
            "activation_function": "gelu",
            "n_window": 50,
            "n_window_infer": n_window_infer,
            "downsample_hidden_size": 32,
            "output_dim": 64,
            "max_position_embeddings": 13,
        },
        text_config={
            "model_type": "qwen3",
            "vocab_size": vocab_size,
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "max_position_embeddings": 4096,
            "rms_norm_eps": 1e-6,
            "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0},
            "tie_word_embeddings": True,
            "hidden_act": "silu",
        },
        audio_token_id=ids["<|audio_pad|>"],
        pad_token_id=ids["<|endoftext|>"],
        eos_token_id=[ids["<|endoftext|>"], ids["<|im_end|>"]],
        tie_word_embeddings=True,
    )


def bf16_exact(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.to(torch.bfloat16).to(torch.float32)


def randomise(model: Qwen3ASRForConditionalGeneration, chain: list[int], seed: int) -> None:
    """Weights with O(1) activations (so logit margins are clear), bf16-exact, plus a planted token chain.

    The chain makes the untrained LM emit ``language English<asr_text>`` after ``assistant\\n`` some of the time:
    chain tokens get embeddings in a private 2-D plane, rotated by 35° and growing by 2x per step, so the tied
    LM head scores the next chain token above the current one; no other token touches that plane.
    """
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("embed_tokens.weight"):
                value = EMBED_STD * torch.randn(param.shape, generator=generator)
                value[:, :2] = 0.0
                for step, token in enumerate(chain):
                    angle = np.deg2rad(35.0 * step)
                    radius = CHAIN_RADIUS * 2.0**step
                    value[token, :] *= 0.3
                    value[token, 0] = radius * float(np.cos(angle))
                    value[token, 1] = radius * float(np.sin(angle))
            elif (
                name.endswith("norm.weight") or name.endswith("layer_norm.weight") or "ln_post.weight" in name
            ):
                value = 1.0 + 0.1 * torch.randn(param.shape, generator=generator)
            elif name.endswith(".bias"):
                value = 0.05 * torch.randn(param.shape, generator=generator)
            elif param.dim() >= 2:
                fan_in = int(np.prod(param.shape[1:]))
                value = torch.randn(param.shape, generator=generator) / np.sqrt(fan_in)
                if name.endswith(("o_proj.weight", "down_proj.weight")):
                    value *= BRANCH_GAIN
            else:
                value = 0.1 * torch.randn(param.shape, generator=generator)
            param.copy_(bf16_exact(value))


def legacy_state_dict(hf_state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Inverse of the HF converter's renames (docs/reference_parity.md §2.2)."""
    out = {}
    for name, tensor in hf_state.items():
        if name == "lm_head.weight":
            continue  # tied: the release omits it
        if name.startswith("model.multi_modal_projector.linear_1."):
            new = "thinker.audio_tower.proj1." + name.rsplit(".", 1)[1]
        elif name.startswith("model.multi_modal_projector.linear_2."):
            new = "thinker.audio_tower.proj2." + name.rsplit(".", 1)[1]
        elif name.startswith("model.language_model."):
            new = "thinker.model." + name[len("model.language_model.") :]
        elif name.startswith("model.audio_tower."):
            new = "thinker." + name[len("model.") :]
        else:
            raise KeyError(name)
        out[new] = tensor.to(torch.bfloat16).contiguous()
    return out


def legacy_config(config: Qwen3ASRConfig, ids: dict[str, int], n_window_infer: int) -> dict:
    audio, text = config.audio_config, config.text_config
    return {
        "architectures": ["Qwen3ASRForConditionalGeneration"],
        "model_type": "qwen3_asr",
        "support_languages": SUPPORT_LANGUAGES,
        "thinker_config": {
            "model_type": "qwen3_asr_thinker",
            "audio_config": {
                "model_type": "qwen3_asr_audio_encoder",
                "num_mel_bins": audio.num_mel_bins,
                "encoder_layers": audio.encoder_layers,
                "encoder_attention_heads": audio.encoder_attention_heads,
                "encoder_ffn_dim": audio.encoder_ffn_dim,
                "d_model": audio.d_model,
                "dropout": 0.0,
                "attention_dropout": 0.0,
                "activation_function": "gelu",
                "activation_dropout": 0.0,
                "scale_embedding": False,
                "max_source_positions": 1500,
                "n_window": audio.n_window,
                "n_window_infer": n_window_infer,
                "conv_chunksize": 500,
                "downsample_hidden_size": audio.downsample_hidden_size,
                "output_dim": audio.output_dim,
            },
            "text_config": {
                "model_type": "qwen3_asr_text",
                "vocab_size": text.vocab_size,
                "hidden_size": text.hidden_size,
                "intermediate_size": text.intermediate_size,
                "num_hidden_layers": text.num_hidden_layers,
                "num_attention_heads": text.num_attention_heads,
                "num_key_value_heads": text.num_key_value_heads,
                "head_dim": text.head_dim,
                "hidden_act": "silu",
                "max_position_embeddings": text.max_position_embeddings,
                "rms_norm_eps": text.rms_norm_eps,
                "rope_theta": 1000000.0,
                "rope_scaling": {
                    "interleaved": True,
                    "mrope_interleaved": True,
                    "mrope_section": [4, 2, 2],
                    "rope_type": "default",
                    "type": "default",
                },
                "attention_bias": False,
                "tie_word_embeddings": True,
            },
            "audio_token_id": ids["<|audio_pad|>"],
            "audio_start_token_id": ids["<|audio_start|>"],
            "audio_end_token_id": ids["<|audio_end|>"],
            "user_token_id": ids["<|im_start|>"],
            "initializer_range": 0.02,
        },
        "tie_word_embeddings": True,
        "torch_dtype": "bfloat16",
    }


# ------------------------------------------------------------------------------------------- reference


class SubChunkPatch:
    """Forward pre-hook on conv2d1: run the stem on the unpadded frames of a single partial chunk."""

    def __init__(self) -> None:
        self.valid_frames: int | None = None

    def __call__(self, module, args):
        if self.valid_frames is None:
            return None
        return (args[0][..., : self.valid_frames],)


def run_case(model, processor, patch, audio, language, context, prefix, eos_ids):
    prompt_text = processor.apply_transcription_request(
        audio, language=language, prompt=context, tokenize=False
    )
    prompt_text = (prompt_text[0] if isinstance(prompt_text, list) else prompt_text) + (prefix or "")
    inputs = processor(text=[prompt_text], audio=[audio], sampling_rate=SR, return_tensors="pt")
    valid = int(inputs["input_features_mask"].sum())
    patch.valid_frames = valid if valid < 100 else None
    with torch.no_grad():
        out = model.generate(
            input_ids=inputs["input_ids"],
            attention_mask=inputs["attention_mask"],
            input_features=inputs["input_features"],
            input_features_mask=inputs["input_features_mask"],
            max_new_tokens=MAX_NEW_TOKENS,
            do_sample=False,
            eos_token_id=eos_ids,
            pad_token_id=processor.tokenizer.pad_token_id,
            output_logits=True,
            return_dict_in_generate=True,
        )
    patch.valid_frames = None
    prompt_ids = inputs["input_ids"][0].numpy().astype(np.int32)
    generated = out.sequences[0, prompt_ids.shape[0] :].numpy().astype(np.int32)
    logits = torch.stack(out.logits, 0)[:, 0].float()
    top2 = torch.topk(logits, 2, dim=-1).values
    margins = (top2[:, 0] - top2[:, 1]).numpy().astype(np.float32)
    return {
        "prompt_text": prompt_text,
        "prompt_ids": prompt_ids,
        "generated_ids": generated,
        "margins": margins,
        "first_logits": logits[0].numpy().astype(np.float32),
        "text": processor.tokenizer.decode(generated.tolist(), skip_special_tokens=True),
        "raw_text": processor.tokenizer.decode(generated.tolist(), skip_special_tokens=False),
    }


def tower(model, feature_extractor, patch, audio) -> dict[str, np.ndarray]:
    feats = feature_extractor(
        audio, sampling_rate=SR, padding=True, return_attention_mask=True, return_tensors="pt"
    )
    mask = feats["attention_mask"]
    valid = int(mask.sum())
    patch.valid_frames = valid if valid < 100 else None
    captured = {}

    def capture_stem(module, args, kwargs):
        captured["stem"] = args[0].detach().clone()

    handle = model.model.audio_tower.layers[0].register_forward_pre_hook(capture_stem, with_kwargs=True)
    with torch.no_grad():
        out = model.model.get_audio_features(feats["input_features"], mask, return_dict=True)
    handle.remove()
    patch.valid_frames = None
    return {
        "mel": feats["input_features"][0].numpy().astype(np.float32),
        "mask": mask[0].numpy().astype(np.int8),
        "stem": captured["stem"].numpy().astype(np.float32),
        "encoder": out.last_hidden_state.numpy().astype(np.float32),
        "projected": out.pooler_output.numpy().astype(np.float32),
    }


# ------------------------------------------------------------------------------------------------ main


def main() -> None:
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    helpers = load_fixture_helpers()
    stored_audio, audio = make_audio(helpers)

    tokenizer = train_tokenizer()
    ids = {t: tokenizer.token_to_id(t) for t in [*SPECIAL_TOKENS, ASR_TEXT]}
    vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
    eos_ids = [ids["<|im_end|>"], ids["<|endoftext|>"]]
    chain_text = ["\n", "language", " English", ASR_TEXT]
    chain = []
    for piece in chain_text:
        encoded = tokenizer.encode(piece, add_special_tokens=False).ids
        assert len(encoded) == 1, f"chain piece {piece!r} is not one token: {encoded}"
        chain.append(encoded[0])

    if OUT.exists():
        shutil.rmtree(OUT)
    hf_dir, legacy_dir = OUT / "checkpoint_hf", OUT / "checkpoint_legacy"
    OUT.mkdir(parents=True)

    models_by_window = {}
    base_state = None
    for window in (400, 800):
        config = make_config(ids, vocab_size, window)
        config._attn_implementation = "eager"
        model = Qwen3ASRForConditionalGeneration(config).eval()
        if base_state is None:
            randomise(model, chain, SEED)
            base_state = {k: v.clone() for k, v in model.state_dict().items()}
        else:
            model.load_state_dict(base_state)
        model.generation_config.max_new_tokens = MAX_NEW_TOKENS
        model.generation_config.eos_token_id = eos_ids
        model.generation_config.pad_token_id = ids["<|endoftext|>"]
        model.generation_config.do_sample = False
        models_by_window[window] = model

    hf_tok = hf_tokenizer(tokenizer)
    feature_extractor = Qwen3ASRFeatureExtractor()
    processor = Qwen3ASRProcessor(
        feature_extractor=feature_extractor, tokenizer=hf_tok, chat_template=CHAT_TEMPLATE
    )

    # HF layout, window 800, float32.
    models_by_window[800].save_pretrained(hf_dir)
    processor.save_pretrained(hf_dir)
    saved = load_file(hf_dir / "model.safetensors")
    assert "lm_head.weight" not in saved, "tied LM head should not be stored"

    # Legacy layout, window 400, bfloat16 with identical values.
    legacy_dir.mkdir()
    full_state = dict(models_by_window[400].state_dict())
    full_state = {k: v for k, v in full_state.items() if "positional_embedding" not in k}
    save_file(legacy_state_dict(full_state), legacy_dir / "model.safetensors", metadata={"format": "pt"})
    (legacy_dir / "config.json").write_text(
        json.dumps(legacy_config(models_by_window[400].config, ids, 400), indent=2), encoding="utf-8"
    )
    (legacy_dir / "generation_config.json").write_text(
        json.dumps(
            {
                "do_sample": False,
                "eos_token_id": eos_ids,
                "pad_token_id": ids["<|endoftext|>"],
                "max_new_tokens": 512,
            },
            indent=2,
        ),
        encoding="utf-8",
    )
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer.model.save(tmp)
        shutil.copy(Path(tmp) / "vocab.json", legacy_dir / "vocab.json")
        shutil.copy(Path(tmp) / "merges.txt", legacy_dir / "merges.txt")
    added = {
        str(ids[t]): {
            "content": t,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": t != ASR_TEXT,
        }
        for t in [*SPECIAL_TOKENS, ASR_TEXT]
    }
    (legacy_dir / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "add_prefix_space": False,
                "added_tokens_decoder": added,
                "additional_special_tokens": [
                    "<|im_start|>",
                    "<|im_end|>",
                    "<|audio_start|>",
                    "<|audio_end|>",
                    "<|audio_pad|>",
                ],
                "bos_token": None,
                "eos_token": "<|im_end|>",
                "pad_token": "<|endoftext|>",
                "unk_token": None,
                "errors": "replace",
                "model_max_length": 65536,
                "split_special_tokens": False,
                "tokenizer_class": "Qwen2Tokenizer",
            },
            indent=2,
        ),
        encoding="utf-8",
    )
    (legacy_dir / "preprocessor_config.json").write_text(
        json.dumps(
            {
                "chunk_length": 30,
                "feature_extractor_type": "WhisperFeatureExtractor",
                "feature_size": 128,
                "hop_length": 160,
                "n_fft": 400,
                "n_samples": 480000,
                "nb_max_frames": 3000,
                "padding_side": "right",
                "padding_value": 0.0,
                "processor_class": "Qwen3ASRProcessor",
                "return_attention_mask": True,
                "sampling_rate": 16000,
            },
            indent=2,
        ),
        encoding="utf-8",
    )
    (legacy_dir / "chat_template.json").write_text(
        json.dumps({"chat_template": CHAT_TEMPLATE}), encoding="utf-8"
    )

    # Check the legacy file round-trips to the same weights (inverse of the renames, bf16 → f32 exact).
    legacy_back = load_file(legacy_dir / "model.safetensors")
    assert len(legacy_back) == len(saved), (len(legacy_back), len(saved))
    for name, tensor in saved.items():
        if name.startswith("model.multi_modal_projector.linear_"):
            legacy_name = "thinker.audio_tower.proj" + name.split("linear_")[1]
        elif name.startswith("model.language_model."):
            legacy_name = "thinker.model." + name[len("model.language_model.") :]
        else:
            legacy_name = "thinker." + name[len("model.") :]
        assert torch.equal(legacy_back[legacy_name].float(), tensor), name

    # Reference runs.
    patch = SubChunkPatch()
    for model in models_by_window.values():
        model.model.audio_tower.conv2d1.register_forward_pre_hook(patch)
    arrays: dict[str, np.ndarray] = {}
    meta: dict = {
        "describe": {
            "mel/<clip>": "reference log-mel (128, padded frames) float32; clip_long stores mel_head (first 200 "
            "frames), mel_tail (last 200 valid frames) as float16 and mel_frame_sum (sum over mels per frame) f32",
            "mask/<clip>": "input_features_mask (padded frames), int8",
            "stem/<clip>/w<W>": "audio tower after conv stem + conv_out + positions + compaction (tokens, d_model)",
            "encoder/<clip>/w<W>": "audio tower after ln_post (tokens, d_model)",
            "projected/<clip>/w<W>": "projector output = audio embeddings injected into the thinker (tokens, 64)",
            "case/<name>/prompt_ids": "full prompt ids with the audio pad expanded",
            "case/<name>/generated_ids": "greedy ids (includes the eos id when one was emitted)",
            "case/<name>/margins": "top-1 minus top-2 logit per generated step",
            "case/<name>/first_logits": "logits of the first generated step",
        },
        "token_ids": ids,
        "eos_token_ids": eos_ids,
        "vocab_size": vocab_size,
        "max_new_tokens": MAX_NEW_TOKENS,
        "context": CONTEXT,
        "continue_prefix": CONTINUE_PREFIX,
        "chain_tokens": chain,
        "checkpoints": {"checkpoint_hf": 800, "checkpoint_legacy": 400},
        "cases": {},
        "quirks": {},
    }
    storage_f16 = {"clip_long"}
    for clip in ["clip_tiny", "clip_short", "clip_a", "clip_b", "clip_long"]:
        for window, model in models_by_window.items():
            result = tower(model, feature_extractor, patch, audio[clip])
            dtype = np.float16 if clip in storage_f16 else np.float32
            if window == 400:
                mask = result["mask"]
                valid = int(mask.sum())
                if clip == "clip_long":
                    arrays[f"mel_head/{clip}"] = result["mel"][:, :200].astype(np.float16)
                    arrays[f"mel_tail/{clip}"] = result["mel"][:, valid - 200 : valid].astype(np.float16)
                    arrays[f"mel_frame_sum/{clip}"] = result["mel"][:, :valid].sum(0).astype(np.float32)
                else:
                    arrays[f"mel/{clip}"] = result["mel"]
                arrays[f"mask/{clip}"] = mask
            arrays[f"projected/{clip}/w{window}"] = result["projected"].astype(dtype)
            if clip in ("clip_short", "clip_a"):
                arrays[f"stem/{clip}/w{window}"] = result["stem"]
                arrays[f"encoder/{clip}/w{window}"] = result["encoder"]
        if clip in ("clip_tiny", "clip_short"):
            unpatched = (
                models_by_window[800]
                .model.get_audio_features(*_feats(feature_extractor, audio[clip]), return_dict=True)
                .pooler_output.detach()
                .numpy()
            )
            meta["quirks"][f"{clip}_unpatched_max_abs_diff"] = float(
                np.abs(unpatched - arrays[f"projected/{clip}/w800"]).max()
            )

    cases = {
        "auto": (None, None, None),
        "forced": ("English", None, None),
        "context": (None, CONTEXT, None),
        "continue": (None, None, CONTINUE_PREFIX),
    }
    for clip in ["clip_short", "clip_a"]:
        for window, model in models_by_window.items():
            for case, (language, context, prefix) in cases.items():
                name = f"{clip}/w{window}/{case}"
                result = run_case(model, processor, patch, audio[clip], language, context, prefix, eos_ids)
                store_case(
                    arrays,
                    meta,
                    name,
                    result,
                    dict(clip=clip, window=window, language=language, context=context, prefix=prefix),
                )
    # Offline 30 s spans of the long clip (the engine decodes each span separately).
    long = audio["clip_long"]
    spans = [(0, 30 * SR), (30 * SR, len(long))]
    for window, model in models_by_window.items():
        for index, (start, end) in enumerate(spans):
            name = f"clip_long_span{index}/w{window}/auto"
            result = run_case(model, processor, patch, long[start:end], None, None, None, eos_ids)
            store_case(
                arrays,
                meta,
                name,
                result,
                dict(
                    clip="clip_long",
                    span=[start, end],
                    window=window,
                    language=None,
                    context=None,
                    prefix=None,
                ),
            )

    np.savez_compressed(OUT / "audio.npz", **stored_audio)
    np.savez_compressed(OUT / "expected.npz", **arrays)
    (OUT / "expected.json").write_text(json.dumps(meta, indent=1, ensure_ascii=True) + "\n", encoding="utf-8")
    total = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    for path in sorted(OUT.rglob("*")):
        if path.is_file():
            print(f"{path.stat().st_size:>9}  {path.relative_to(OUT)}")
    print(f"{total:>9}  total")
    for name, case in meta["cases"].items():
        print(f"{name:32s} min margin {case['min_margin']:.3f}  text {case['text']!r}")
    print("quirks", meta["quirks"])


def _feats(feature_extractor, audio):
    feats = feature_extractor(
        audio, sampling_rate=SR, padding=True, return_attention_mask=True, return_tensors="pt"
    )
    return feats["input_features"], feats["attention_mask"]


def store_case(arrays, meta, name, result, info) -> None:
    for key in ("prompt_ids", "generated_ids", "margins", "first_logits"):
        arrays[f"case/{name}/{key}"] = result[key]
    meta["cases"][name] = {
        **info,
        "prompt_text": result["prompt_text"],
        "text": result["text"],
        "raw_text": result["raw_text"],
        "n_generated": int(result["generated_ids"].shape[0]),
        "min_margin": float(result["margins"].min()),
    }


if __name__ == "__main__":
    sys.exit(main())
