"""Build a tiny random multilingual Whisper checkpoint, convert it with CTranslate2, record transformers' outputs.

Run once (Hugging Face is not needed; everything is built offline):

    python3 -m venv /tmp/venv-ref
    /tmp/venv-ref/bin/pip install torch==2.13.0 transformers==5.23.0 ctranslate2 soundfile --find-links /opt/wheels
    nice -n 10 /tmp/venv-ref/bin/python tests/reference/whisper_ct2/make_fixtures.py

Writes ``tests/fixtures/whisper_ct2/``:

* ``model80/``, ``model128/``: the CTranslate2 layout made by ``ctranslate2.converters.TransformersConverter`` from
  a random ``WhisperForConditionalGeneration`` (d_model 32, 2+2 layers, 2 heads; 80 mel bins and 99 languages as
  large-v2, or 128 bins and 100 languages with ``yue`` as large-v3), stored as float16
  (``model.bin``, ``config.json``, ``vocabulary.json``) plus ``tokenizer.json`` and ``preprocessor_config.json``.
  Every torch weight is rounded to a float16 value first, so loading it as float32 gives the reference's weights.
* ``expected.json`` / ``features.npz``: per model, transformers' log-mel features (``WhisperFeatureExtractor``, the
  valid frames and 8 more) and greedy token ids and text per case (clip, language or detection, task, prompt).

The vocabulary has the multilingual Whisper layout (51865 ids, 51866 with yue: 50257 text tokens, ``<|endoftext|>``,
``<|startoftranscript|>``, 99 or 100 languages, the task and control tokens, 1501 timestamps), because CTranslate2
treats a Whisper model as multilingual, and can detect languages, only at that size. The text tokens are a
small byte-level BPE trained on a few sentences, padded with unused filler tokens whose embeddings are zero
(as are the timestamp tokens'), so greedy decoding picks real text tokens and the fixture compresses well.

Greedy reference: transformers' forward pass (``WhisperForConditionalGeneration``), then per step the
generation config's ``suppress_tokens`` masked, ``begin_suppress_tokens`` masked at the first step, argmax,
stop at ``<|endoftext|>`` or after ``max_new_tokens`` - the rule CTranslate2's ``generate`` applies with
``suppress_blank`` and ``suppress_tokens=[-1]``. Language detection: argmax of the language tokens' logits
after ``<|startoftranscript|>`` (transformers' ``detect_language``).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import numpy as np
import soundfile
import torch
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    GenerationConfig,
    PreTrainedTokenizerFast,
    WhisperConfig,
    WhisperFeatureExtractor,
    WhisperForConditionalGeneration,
)
from transformers.models.whisper.tokenization_whisper import LANGUAGES

REPO = Path(__file__).resolve().parents[3]
OUT = REPO / "tests" / "fixtures" / "whisper_ct2"
SEED = 34
SR = 16000
TEXT_TOKENS = 50257
TIMESTAMPS = 1501
MAX_NEW_TOKENS = 20
CORPUS = [
    "emma quickly closed the early bottle and sang",
    "there are twenty hearts in the garden",
    "the quick brown fox jumps over the lazy dog",
    "der schnelle braune fuchs springt über den faulen hund",
    "el rápido zorro marrón salta sobre el perro perezoso",
    "captions for everyone, live and in every language.",
]
CLIPS = {
    "sample1": REPO / "resources" / "samples" / "demo_sample_1.wav",
    "sample2": REPO / "resources" / "samples" / "demo_sample_2.wav",
    "short": REPO / "tests" / "fixtures" / "parakeet_tdt" / "audio" / "short.wav",
    "long": REPO / "tests" / "fixtures" / "parakeet_tdt" / "audio" / "long.wav",
}
# (clip, language, task, initial prompt); language None: detected first
CASES = [
    ("sample1", "en", "transcribe", None),
    ("sample1", "de", "translate", None),
    ("sample2", None, "transcribe", None),
    ("short", "es", "transcribe", None),
    ("sample2", "en", "transcribe", "twenty hearts"),
]
# The long clip repeated to 40 s: two 30 s windows decoded independently
LONG_REPEAT_SECONDS = 40.0
CASES_128 = [
    ("sample1", "en", "transcribe", None),
    ("sample2", None, "transcribe", None),
    ("short", "yue", "translate", None),
    ("long40", None, "transcribe", None),
]
# name -> (mel bins, languages, cases): the large-v2 shape (99 languages) and the large-v3 one (128 bins, yue)
MODELS = {
    "model80": (80, 99, [*CASES, ("long40", "en", "transcribe", None)]),
    "model128": (128, 100, CASES_128),
}


def read_wav(path: Path) -> np.ndarray:
    data, rate = soundfile.read(str(path), dtype="float32", always_2d=True)
    assert rate == SR and data.shape[1] == 1, (path, rate, data.shape)
    return data[:, 0]


def build_tokenizer(n_languages: int) -> tuple[Tokenizer, int]:
    """The tokenizer and how many trained (non-filler) text tokens it has."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tokenizer.train_from_iterator(CORPUS, trainer)
    data = json.loads(tokenizer.to_str())
    vocab = data["model"]["vocab"]
    trained = len(vocab)
    for i in range(len(vocab), TEXT_TOKENS - 1):
        vocab[f"<unused{i}>"] = i
    # The multilingual vocabulary's last text token is the empty string: CTranslate2 tells multilingual
    # models (language detection) from English-only ones by its presence.
    vocab[""] = TEXT_TOKENS - 1
    tokenizer = Tokenizer.from_str(json.dumps(data))
    specials = ["<|endoftext|>", "<|startoftranscript|>"]
    specials += [f"<|{code}|>" for code in list(LANGUAGES)[:n_languages]]
    specials += ["<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nocaptions|>"]
    specials += ["<|notimestamps|>"]
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    tokenizer.add_tokens([AddedToken(f"<|{i * 0.02:.2f}|>", normalized=False) for i in range(TIMESTAMPS)])
    assert tokenizer.get_vocab_size() == 51766 + n_languages, tokenizer.get_vocab_size()
    return tokenizer, trained


def build_model(
    tokenizer: Tokenizer, trained: int, n_mels: int, n_languages: int
) -> WhisperForConditionalGeneration:
    ids = tokenizer.get_vocab()
    config = WhisperConfig(
        vocab_size=51766 + n_languages,
        num_mel_bins=n_mels,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_source_positions=1500,
        max_target_positions=448,
        pad_token_id=ids["<|endoftext|>"],
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|endoftext|>"],
        decoder_start_token_id=ids["<|startoftranscript|>"],
        tie_word_embeddings=True,
    )
    torch.manual_seed(SEED)
    model = WhisperForConditionalGeneration(config).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "layer_norm" in name or name.endswith("embed_positions.weight") and "encoder" in name:
                continue
            param.normal_(0.0, 0.3 if param.dim() > 1 else 0.1)
        embed = model.model.decoder.embed_tokens.weight
        embed.normal_(0.0, 1.0)
        embed[trained:TEXT_TOKENS] = 0.0  # fillers
        embed[ids["<|notimestamps|>"] + 1 :] = 0.0  # timestamps
        for param in model.parameters():
            param.copy_(param.half().float())
    model.generation_config = GenerationConfig(
        decoder_start_token_id=ids["<|startoftranscript|>"],
        eos_token_id=ids["<|endoftext|>"],
        pad_token_id=ids["<|endoftext|>"],
        suppress_tokens=[
            ids["<|startoftranscript|>"],
            *range(ids["<|translate|>"], ids["<|nocaptions|>"] + 1),
        ],
        begin_suppress_tokens=[ids["Ġ"], ids["<|endoftext|>"]],
        lang_to_id={f"<|{c}|>": ids[f"<|{c}|>"] for c in list(LANGUAGES)[:n_languages]},
        task_to_id={"transcribe": ids["<|transcribe|>"], "translate": ids["<|translate|>"]},
        no_timestamps_token_id=ids["<|notimestamps|>"],
        is_multilingual=True,
        alignment_heads=[[1, 0], [1, 1]],
    )
    return model


@torch.no_grad()
def greedy(model, features: np.ndarray, prompt: list[int], eot: int) -> tuple[list[int], float]:
    gen = model.generation_config
    encoded = model.model.encoder(torch.from_numpy(features)).last_hidden_state
    tokens = list(prompt)
    out: list[int] = []
    min_margin = float("inf")
    for step in range(MAX_NEW_TOKENS):
        logits = (
            model(encoder_outputs=(encoded,), decoder_input_ids=torch.tensor([tokens])).logits[0, -1].double()
        )
        logits[gen.suppress_tokens] = -np.inf
        if step == 0:
            logits[gen.begin_suppress_tokens] = -np.inf
        top = torch.topk(logits, 2)
        min_margin = min(min_margin, float(top.values[0] - top.values[1]))
        token = int(top.indices[0])
        if token == eot:
            break
        out.append(token)
        tokens.append(token)
    return out, min_margin


@torch.no_grad()
def detect(model, features: np.ndarray, sot: int) -> tuple[str, float]:
    lang_ids = sorted(model.generation_config.lang_to_id.values())
    encoded = model.model.encoder(torch.from_numpy(features)).last_hidden_state
    logits = model(encoder_outputs=(encoded,), decoder_input_ids=torch.tensor([[sot]])).logits[0, -1]
    probs = torch.softmax(logits[lang_ids].double(), dim=-1)
    best = int(torch.argmax(probs))
    code = list(LANGUAGES)[best]
    top2 = torch.topk(probs, 2).values
    return code, float(top2[0] - top2[1])


def read_clips() -> dict[str, np.ndarray]:
    audio = {name: read_wav(path) for name, path in CLIPS.items()}
    long = audio.pop("long")
    reps = int(np.ceil(LONG_REPEAT_SECONDS * SR / long.size))
    audio["long40"] = np.tile(long, reps)[: int(LONG_REPEAT_SECONDS * SR)]
    return audio


def convert(model, tokenizer: Tokenizer, extractor: WhisperFeatureExtractor, target: Path) -> None:
    import ctranslate2

    with tempfile.TemporaryDirectory() as tmp:
        hf_dir = Path(tmp) / "hf"
        model.save_pretrained(hf_dir)
        extractor.save_pretrained(hf_dir)
        tokenizer.save(str(hf_dir / "tokenizer.json"))
        PreTrainedTokenizerFast(
            tokenizer_file=str(hf_dir / "tokenizer.json"),
            eos_token="<|endoftext|>",
            bos_token="<|endoftext|>",
        ).save_pretrained(hf_dir)
        converter = ctranslate2.converters.TransformersConverter(
            str(hf_dir), copy_files=["tokenizer.json", "preprocessor_config.json"]
        )
        converter.convert(str(target), quantization="float16", force=True)


def make_model(
    name: str, n_mels: int, n_languages: int, cases: list, audio: dict, features_out: dict
) -> dict:
    tokenizer, trained = build_tokenizer(n_languages)
    ids = tokenizer.get_vocab()
    sot, eot = ids["<|startoftranscript|>"], ids["<|endoftext|>"]
    model = build_model(tokenizer, trained, n_mels, n_languages)
    extractor = WhisperFeatureExtractor(feature_size=n_mels)
    convert(model, tokenizer, extractor, OUT / name)
    lang_index = {code: ids[f"<|{code}|>"] for code in list(LANGUAGES)[:n_languages]}

    def features_of(samples: np.ndarray) -> np.ndarray:
        return extractor(samples, sampling_rate=SR, return_tensors="np").input_features.astype(np.float32)

    for clip in sorted({c[0] for c in cases} - {"long40"}):
        samples = audio[clip]
        features_out[f"{name}_{clip}"] = features_of(samples)[0, :, : samples.size // 160 + 8]

    results = []
    for clip, language, task, prompt_text in cases:
        samples = audio[clip]
        windows = [samples[i : i + 30 * SR] for i in range(0, samples.size, 30 * SR)]
        tokens_all: list[int] = []
        detected = None
        margins = []
        for window in windows:
            features = features_of(window)
            lang = language
            if lang is None:
                lang, margin = detect(model, features, sot)
                detected = detected or lang
                margins.append(margin)
            prefix = []
            if prompt_text:
                prefix = [ids["<|startofprev|>"], *tokenizer.encode(" " + prompt_text.strip()).ids]
            prompt = [*prefix, sot, lang_index[lang], ids[f"<|{task}|>"], ids["<|notimestamps|>"]]
            tokens, margin = greedy(model, features, prompt, eot)
            margins.append(margin)
            tokens_all.extend(tokens)
        results.append(
            {
                "clip": clip,
                "language": language,
                "detected_language": detected,
                "task": task,
                "initial_prompt": prompt_text,
                "token_ids": tokens_all,
                "text": tokenizer.decode(tokens_all, skip_special_tokens=True),
                "min_logit_margin": round(min(margins), 6),
            }
        )
        print(name, clip, language, task, detected, len(tokens_all), f"margin {min(margins):.4f}")
    return {"n_mels": n_mels, "languages": n_languages, "cases": results}


def main() -> None:
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    audio = read_clips()
    features_out: dict[str, np.ndarray] = {}
    models = {
        name: make_model(name, n_mels, n_languages, cases, audio, features_out)
        for name, (n_mels, n_languages, cases) in MODELS.items()
    }
    np.savez_compressed(OUT / "features.npz", **features_out)
    (OUT / "expected.json").write_text(
        json.dumps(
            {
                "describe": "tests/reference/whisper_ct2/make_fixtures.py (torch 2.13.0, transformers 5.23.0)",
                "max_new_tokens": MAX_NEW_TOKENS,
                "long40": {"source": "long.wav", "seconds": LONG_REPEAT_SECONDS},
                "models": models,
            },
            indent=1,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
