"""Whisper's tokenizer (``tokenizer.json``): special tokens by name, prompt encoding and text decoding."""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer

from inference.errors import ModelError

SOT = "<|startoftranscript|>"
EOT = "<|endoftext|>"
PREV = "<|startofprev|>"
NO_TIMESTAMPS = "<|notimestamps|>"
TASK_TOKENS = {"transcribe": "<|transcribe|>", "translate": "<|translate|>"}
MAX_PROMPT_TOKENS = 223  # half the decoder's 448 positions, less <|startofprev|> (as openai-whisper)


class WhisperTokenizer:
    def __init__(self, path: Path, lang_ids: tuple[int, ...]) -> None:
        try:
            self._tokenizer = Tokenizer.from_file(str(path))
        except Exception as exc:  # tokenizers raises a bare Exception on bad JSON
            raise ModelError(f"cannot read {path}: {exc}", "re-download the model's tokenizer.json") from exc
        self.eot = self._required(EOT, path)
        self.sot = self._required(SOT, path)
        self.no_timestamps = self._required(NO_TIMESTAMPS, path)
        self.prev = self._tokenizer.token_to_id(PREV)
        self.tasks = {
            task: i
            for task, token in TASK_TOKENS.items()
            if (i := self._tokenizer.token_to_id(token)) is not None
        }
        # language code -> token id, from config.json's lang_ids (faster-whisper's folders have them)
        self.languages: dict[str, int] = {}
        for token_id in lang_ids:
            token = self._tokenizer.id_to_token(token_id) or ""
            if token.startswith("<|") and token.endswith("|>"):
                self.languages[token[2:-2]] = token_id

    def _required(self, token: str, path: Path) -> int:
        token_id = self._tokenizer.token_to_id(token)
        if token_id is None:
            raise ModelError(f"{path} has no {token} token: not a Whisper tokenizer", "re-download the model")
        return int(token_id)

    def token(self, token_id: int) -> str:
        return self._tokenizer.id_to_token(token_id) or ""

    def text_ids(self, ids: list[int]) -> list[int]:
        """Only the text tokens (below ``<|endoftext|>``): no language, task or timestamp tokens."""
        return [i for i in ids if i < self.eot]

    def decode(self, ids: list[int]) -> str:
        return self._tokenizer.decode(self.text_ids(ids), skip_special_tokens=True)

    def encode_prompt(self, text: str) -> list[int]:
        """Tokens of previous text for ``<|startofprev|>``, the newest ``MAX_PROMPT_TOKENS`` kept."""
        ids = self._tokenizer.encode(" " + text.strip(), add_special_tokens=False).ids
        return ids[-MAX_PROMPT_TOKENS:]
