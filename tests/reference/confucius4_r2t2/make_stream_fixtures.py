"""Streaming (Longest-Stable-Prefix) reference outputs with transformers 5.23.0: no caching, full re-decode.

Run in a separate venv with torch==2.13.0 and transformers==5.23.0 (never the app's venv) and the project installed
with ``pip install -e . --no-deps``:

    nice -n 10 /tmp/refvenv/bin/python tests/reference/confucius4_r2t2/make_stream_fixtures.py

Writes ``tests/fixtures/confucius4_r2t2/stream_expected.json``: for every case (checkpoint window, clip, options)
the per-chunk record of the loop (text prefix sent, generated text, model-facing state, running text, committed
candidate, delta, the smallest greedy logit margin of that decode) and the final text.

The model is the HF-layout fixture checkpoint with its ``<asr_text>`` embedding row scaled by 0.25
(``r2t2_fixtures.stream_variant``; the unscaled model repeats the tag forever, so nothing would ever be
committed), at ``n_window_infer`` 800 and 400. Clips shorter than one conv chunk get the sub-chunk patch of
``make_fixtures.py`` (docs/reference_parity.md §2.7): streaming starts with such clips.

The loop below is written from docs/families/confucius4_r2t2.md §7/§8 independently of the engine's ``lsp.py``; it shares only
the text helpers of ``postprocess.py`` (sanitising, punctuation, parsing), which have their own spec tests.
Tokenising uses the transformers tokenizer; detokenising maps its byte-level pieces back to bytes so that an
invalid UTF-8 byte gives exactly one U+FFFD (the spec's rule, not Python's).
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from transformers import Qwen3ASRForConditionalGeneration, Qwen3ASRProcessor
from transformers.convert_slow_tokenizer import bytes_to_unicode

from inference.families.confucius4_r2t2.postprocess import (
    normalize_punct_by_context,
    parse_asr_output,
    parse_language_output,
    remove_spaces_between_chinese,
    sanitize_utf8_lossy,
    truncate_at_pipe,
)

REPO = Path(__file__).resolve().parents[3]
OUT = REPO / "tests" / "fixtures" / "confucius4_r2t2" / "stream_expected.json"
SR = 16000
TAG = "<asr_text>"
ROLLBACK_PUNCT = set("，。！？、；：,.!?:;")
CONTEXT = "Names: Alice, Bob. Terms: harbour, report."

# (name, clip, options): options as the engine's open_stream takes them.
CASES = [
    ("forced_default", "clip_a", {"language": "English"}),
    ("auto_default", "clip_b", {}),
    (
        "forced_1000ms_punct",
        "clip_a",
        {
            "language": "English",
            "chunk_size_ms": 1000.0,
            "unfixed_token_num": 2,
            "rollback_punctuation": True,
            "max_tokens": 12,
            "context": CONTEXT,
        },
    ),
    (
        "forced_80ms",
        "clip_b",
        {
            "language": "English",
            "chunk_size_ms": 80.0,
            "unfixed_chunk_num": 0,
            "unfixed_token_num": 3,
            "max_tokens": 8,
        },
    ),
    ("auto_context_500ms", "clip_a", {"context": CONTEXT, "chunk_size_ms": 500.0, "unfixed_chunk_num": 1}),
    ("forced_short_tail_only", "clip_short", {"language": "English", "chunk_size_ms": 1000.0}),
    (
        "forced_quiet_then_loud_640ms",
        "quiet_then_loud",
        {"language": "English", "chunk_size_ms": 640.0, "max_tokens": 16},
    ),
]
# clip_a (5.5 s) spans two 4 s attention windows at n_window_infer 400, one at 800.
WINDOW_400_CASES = ("forced_default", "forced_1000ms_punct", "forced_quiet_then_loud_640ms")
DEFAULTS = {
    "chunk_size_ms": 320.0,
    "unfixed_chunk_num": 2,
    "unfixed_token_num": 5,
    "rollback_punctuation": False,
    "max_tokens": 32,
}


def load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class Reference:
    """One checkpoint: greedy generation over the whole accumulated audio, and text <-> ids."""

    def __init__(self, model_dir: Path, patch_class) -> None:
        self.processor = Qwen3ASRProcessor.from_pretrained(model_dir)
        self.tokenizer = self.processor.tokenizer
        self.model = Qwen3ASRForConditionalGeneration.from_pretrained(model_dir, dtype=torch.float32).eval()
        self.model.config._attn_implementation = "eager"
        self.patch = patch_class()
        self.model.model.audio_tower.conv2d1.register_forward_pre_hook(self.patch)
        self.eos = list(self.model.generation_config.eos_token_id)
        self.pad = self.model.generation_config.pad_token_id
        self.special = set(self.tokenizer.all_special_ids)
        self.added = {i: t.content for i, t in self.tokenizer.added_tokens_decoder.items()}
        self.byte_of = {ch: b for b, ch in bytes_to_unicode().items()}

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    def decode(self, ids) -> str:
        out = bytearray()
        for i in ids:
            i = int(i)
            if i in self.special or i in self.eos or i == self.pad:
                continue
            if i in self.added:
                out += self.added[i].encode("utf-8")
            else:
                out += bytes(self.byte_of[ch] for ch in self.tokenizer.convert_ids_to_tokens(i))
        return sanitize_utf8_lossy(bytes(out))

    def generate(self, audio: np.ndarray, language: str, context: str, prefix: str, max_tokens: int):
        prompt = self.processor.apply_transcription_request(
            audio, language=language or None, prompt=context or None, tokenize=False
        )
        prompt = (prompt[0] if isinstance(prompt, list) else prompt) + prefix
        inputs = self.processor(text=[prompt], audio=[audio], sampling_rate=SR, return_tensors="pt")
        valid = int(inputs["input_features_mask"].sum())
        self.patch.valid_frames = valid if valid < 100 else None
        with torch.no_grad():
            out = self.model.generate(
                input_ids=inputs["input_ids"],
                attention_mask=inputs["attention_mask"],
                input_features=inputs["input_features"],
                input_features_mask=inputs["input_features_mask"],
                max_new_tokens=max_tokens,
                do_sample=False,
                eos_token_id=self.eos,
                pad_token_id=self.pad,
                output_logits=True,
                return_dict_in_generate=True,
            )
        self.patch.valid_frames = None
        generated = out.sequences[0, inputs["input_ids"].shape[1] :].tolist()
        logits = torch.stack(out.logits, 0)[:, 0].float()
        top2 = torch.topk(logits, 2, dim=-1).values
        margin = float((top2[:, 0] - top2[:, 1]).min())
        return self.decode(generated), margin, len(generated)


def stream(ref: Reference, audio: np.ndarray, options: dict) -> dict:
    """docs/families/confucius4_r2t2.md §7 literally: chunking, build_prefix, decode_chunk, the committed-delta contract, finish."""
    opts = {**DEFAULTS, **{k: v for k, v in options.items() if k in DEFAULTS}}
    forced = options.get("language", "")
    context = options.get("context", "")
    chunk = max(1, math.floor(opts["chunk_size_ms"] / 1000 * SR + 0.5))
    k_unfixed = opts["unfixed_token_num"]
    state = {"raw": "", "text": "", "language": forced, "chunk_id": 0, "published": 0}
    records = []

    def rollback(ids, k):
        while True:
            end = max(0, len(ids) - k)
            p = "" if end == 0 else ref.decode(ids[:end])
            if "\ufffd" not in p:
                return p
            if end == 0:
                return ""
            k += 1

    def build_prefix(final):
        if state["chunk_id"] < opts["unfixed_chunk_num"]:
            return ""
        raw = truncate_at_pipe(state["raw"])
        ids = ref.encode(raw)
        if final:
            end = min(len(ids), max(1, len(ids) - k_unfixed))
            return truncate_at_pipe(ref.decode(ids[:end]))
        k = 0 if opts["rollback_punctuation"] and raw and raw[-1] in ROLLBACK_PUNCT else k_unfixed
        return truncate_at_pipe(rollback(ids, k))

    def decode_chunk(accum, final):
        prefix = build_prefix(final)
        gen, margin, n_gen = ref.generate(accum, forced, context, prefix, opts["max_tokens"])
        gen = normalize_punct_by_context(gen).replace("\ufffd", "")
        raw = prefix + gen
        detected = parse_language_output(raw, "").language if not forced else ""
        if forced == "Chinese" or detected == "Chinese":
            raw = remove_spaces_between_chinese(raw)
        parsed = parse_asr_output(raw, forced)
        raw = (raw.split(TAG, 1)[0] + TAG + parsed.text) if TAG in raw else parsed.text
        raw = truncate_at_pipe(raw)
        state["raw"] = raw
        ids = ref.encode(raw)
        k = k_unfixed
        if opts["rollback_punctuation"] and raw and raw[-1] in ROLLBACK_PUNCT:
            k = 0
        if TAG in raw and raw.split(TAG, 1)[1] == "":
            k = 0
        fixed = rollback(ids, k)
        if TAG in fixed:
            fixed = fixed.split(TAG, 1)[1]
        elif not forced:
            fixed = ""
        fixed = truncate_at_pipe(fixed).replace(TAG, "")
        record = {
            "samples": int(accum.size),
            "final": final,
            "prefix": prefix,
            "generated": gen,
            "raw_decoded": raw,
            "n_generated": n_gen,
            "min_margin": round(margin, 5),
        }
        if not forced and TAG not in raw:
            state["text"] = ""
            record.update(text="", fixed="", delta="")
            return record
        state["language"] = parsed.language
        state["text"] = truncate_at_pipe(parsed.text)
        state["chunk_id"] += 1
        delta = ""
        if not final and len(fixed) > state["published"]:
            delta = fixed[state["published"] :]
            state["published"] = len(fixed)
        record.update(text=state["text"], fixed=fixed, delta=delta)
        return record

    consumed = 0
    while consumed + chunk <= audio.size:
        consumed += chunk
        records.append(decode_chunk(audio[:consumed], False))
    if consumed < audio.size:
        records.append(decode_chunk(audio, True))
    return {
        "chunks": records,
        "final_text": state["text"],
        "language": state["language"],
        "deltas": [r["delta"] for r in records if r["delta"]],
    }


def main() -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    helpers = load_module(REPO / "tests" / "confucius4_r2t2" / "r2t2_fixtures.py", "r2t2_fixtures")
    fixtures = load_module(Path(__file__).with_name("make_fixtures.py"), "make_fixtures")
    out = {
        "describe": "LSP streaming reference (transformers 5.23.0, full re-decode per chunk) on the HF fixture "
        "checkpoint with the <asr_text> row scaled (r2t2_fixtures.stream_variant); see make_stream_fixtures.py",
        "tag_scale": helpers.STREAM_TAG_SCALE,
        "cases": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        for window in (800, 400):
            model_dir = helpers.stream_variant(helpers.HF_CHECKPOINT, Path(tmp) / f"w{window}", window)
            ref = Reference(model_dir, fixtures.SubChunkPatch)
            for name, clip, options in CASES:
                if window == 400 and name not in WINDOW_400_CASES:
                    continue
                result = stream(ref, helpers.stream_clip(clip), options)
                out["cases"][f"w{window}/{name}"] = {
                    "window": window,
                    "clip": clip,
                    "options": options,
                    **result,
                }
                margins = [c["min_margin"] for c in result["chunks"]]
                print(
                    f"w{window}/{name}: {len(result['chunks'])} decodes, deltas {result['deltas']!r}, final "
                    f"{result['final_text']!r}, min margin {min(margins):.4f}"
                )
    OUT.write_text(json.dumps(out, ensure_ascii=True) + "\n", encoding="utf-8")
    print(f"{OUT.stat().st_size} bytes -> {OUT}")


if __name__ == "__main__":
    main()
