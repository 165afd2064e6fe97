"""Token agreement of reduced storage types (f16, bf16, q8_0, int8) with the f32 reference decode, beside its margins.

The tiny random fixture models decide many greedy steps by small logit margins (the reference records the
top-1/top-2 gap of every joint step), so a reduced type can flip a decision that a trained model would not.
Each row therefore reports, next to the agreement, the smallest reference margin and the reference margin
around the first flipped token.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from parakeet_fixtures import CLIPS, MODELS, audio_path, expected, model_dir

from inference.audio.io import load_audio_file
from inference.engine import load_engine
from tests.text_metrics import edit_distance

# (weight_type, conv_weight_type) pairs measured against the f32 checkpoint.
STORAGE_CONFIGS = (
    ("f16", "native"),
    ("f16", "f16"),
    ("bf16", "native"),
    ("q8_0", "native"),
    ("int8", "int8"),
)


@dataclass(frozen=True)
class ClipAgreement:
    clip: str
    reference_tokens: int
    edits: int  # token-level Levenshtein distance to the reference ids
    identical: bool  # ids, frames and durations all equal
    min_reference_margin: float  # smallest top-1/top-2 token-logit gap of any reference joint step
    flip_margin: (
        float | None
    )  # smallest reference margin between the last agreeing and the first differing token


@dataclass(frozen=True)
class StorageAgreement:
    model: str
    weight_type: str
    conv_weight_type: str
    clips: tuple[ClipAgreement, ...]

    @property
    def token_agreement(self) -> float:
        total = sum(c.reference_tokens for c in self.clips)
        return 1.0 - sum(c.edits for c in self.clips) / max(1, total)

    @property
    def identical_clips(self) -> int:
        return sum(c.identical for c in self.clips)


def _flip_margin(ref: dict, got: list[tuple[int, int, int]]) -> float | None:
    want = list(zip(ref["token_ids"], ref["token_frames"], ref["token_durations"], strict=True))
    first = next((i for i, (w, g) in enumerate(zip(want, got, strict=False)) if w != g), None)
    if first is None:
        if len(want) == len(got):
            return None
        first = min(len(want), len(got))
    steps = ref["steps"]
    lo = want[first - 1][1] if first > 0 else 0
    hi = want[first][1] if first < len(want) else float("inf")
    margins = [m for f, m in zip(steps["frame"], steps["token_margin"], strict=True) if lo <= f <= hi]
    return min(margins) if margins else None


def measure(
    model: str, weight_type: str, conv_weight_type: str, clips: Iterable[str] = CLIPS
) -> StorageAgreement:
    options = {"weight_type": weight_type, "conv_weight_type": conv_weight_type}
    rows = []
    with load_engine(model_dir(model), session_options=options, backend="cpu", threads=2) as engine:
        for clip in clips:
            ref = expected(model)["clips"][clip]
            decoded = engine.decode(load_audio_file(audio_path(clip)))
            tokens = [(t.token_id, t.frame, t.duration) for span in decoded.spans for t in span.tokens]
            ids = [t[0] for t in tokens]
            rows.append(
                ClipAgreement(
                    clip=clip,
                    reference_tokens=len(ref["token_ids"]),
                    edits=edit_distance(ref["token_ids"], ids),
                    identical=ids == ref["token_ids"]
                    and [t[1] for t in tokens] == ref["token_frames"]
                    and [t[2] for t in tokens] == ref["token_durations"],
                    min_reference_margin=float(ref["min_token_margin"]),
                    flip_margin=_flip_margin(ref, tokens),
                )
            )
    return StorageAgreement(model, weight_type, conv_weight_type, tuple(rows))


def measure_all(models: Iterable[str] = MODELS) -> list[StorageAgreement]:
    return [measure(model, w, c) for model in models for w, c in STORAGE_CONFIGS]


def format_table(results: Iterable[StorageAgreement]) -> str:
    lines = [
        f"{'model':7} {'weights':7} {'conv':6} {'agree':>7} {'same':>5}  per clip (edits/tokens, ref min margin, flip margin)",
    ]
    for r in results:
        detail = "  ".join(
            f"{c.clip}:{c.edits}/{c.reference_tokens},{c.min_reference_margin:.3f},"
            + ("-" if c.flip_margin is None else f"{c.flip_margin:.3f}")
            for c in r.clips
        )
        lines.append(
            f"{r.model:7} {r.weight_type:7} {r.conv_weight_type:6} {r.token_agreement:7.3f} "
            f"{r.identical_clips:>2}/{len(r.clips)}  {detail}"
        )
    return "\n".join(lines)
