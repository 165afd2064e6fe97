"""The chat prompt around the audio (docs/families/confucius4_r2t2.md §4, docs/reference_parity.md §2.5).

``<|im_start|>system\\n{context}<|im_end|>\\n<|im_start|>user\\n<|audio_start|><|audio_pad|><|audio_end|><|im_end|>\\n``
``<|im_start|>assistant\\n`` + optional ``language {Name}<asr_text>`` + optional text prefix (streaming). The system
turn is always present. The whole string is tokenised with added tokens recognised, then the single audio pad id is
expanded in place to one id per audio-tower token; the tower's embeddings later replace exactly those positions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from inference.errors import ModelError, UsageError
from inference.families.confucius4_r2t2.postprocess import ASR_TEXT_TAG
from inference.families.confucius4_r2t2.tokenizer import R2T2Tokenizer

AUDIO_PAD = "<|audio_pad|>"


def prompt_text(context: str = "", language: str = "", prefix: str = "") -> str:
    """The prompt string; ``language`` is a resolved name ("" = automatic), ``prefix`` continues the answer."""
    text = (
        "<|im_start|>system\n" + context + "<|im_end|>\n<|im_start|>user\n"
        "<|audio_start|>" + AUDIO_PAD + "<|audio_end|><|im_end|>\n<|im_start|>assistant\n"
    )
    if language and language != "Auto":
        text += "language " + language + ASR_TEXT_TAG
    return text + prefix


@dataclass(frozen=True)
class Prompt:
    ids: np.ndarray  # int32 token ids, audio pad expanded
    audio_start: int  # index of the first audio position
    audio_count: int  # number of audio positions (= audio-tower tokens)

    @property
    def audio_positions(self) -> range:
        return range(self.audio_start, self.audio_start + self.audio_count)


class PromptOverflow(UsageError):
    """A prompt (audio, text so far, context) does not fit the thinker context; a live stream rolls on it."""

    def __init__(self, needed: int, room: int, audio_tokens: int, prefix_tokens: int) -> None:
        rest = needed - audio_tokens - prefix_tokens
        if rest >= room // 2:
            fix = f"shorten the context text (with the prompt's frame it takes {rest} positions)"
        else:
            fix = (
                "shorten the audio: transcribe a file offline, or stream with endpointing or "
                "rolling_window_seconds"
            )
        super().__init__(
            f"the prompt needs {needed} positions ({audio_tokens} for audio, {prefix_tokens} for the "
            f"text decoded so far, {rest} for the context and the prompt's frame), more than the "
            f"thinker context of {room}",
            fix,
        )


def build_prompt(
    tokenizer: R2T2Tokenizer,
    audio_token_id: int,
    audio_tokens: int,
    context: str = "",
    language: str = "",
    prefix: str = "",
) -> Prompt:
    """Token ids of :func:`prompt_text` with the audio pad expanded to ``audio_tokens`` copies."""
    if audio_tokens < 1:
        raise ValueError(f"a prompt needs at least one audio token, got {audio_tokens}")
    ids = tokenizer.encode(prompt_text(context, language, prefix))
    positions = [i for i, token in enumerate(ids) if token == audio_token_id]
    if len(positions) != 1:
        raise ModelError(
            f"the tokenizer turns the prompt's {AUDIO_PAD} into {len(positions)} audio_token_id "
            f"({audio_token_id}) tokens instead of one",
            "check that config.json's audio_token_id is the tokenizer's <|audio_pad|> id",
        )
    start = positions[0]
    expanded = ids[:start] + [audio_token_id] * audio_tokens + ids[start + 1 :]
    return Prompt(np.asarray(expanded, dtype=np.int32), start, audio_tokens)
