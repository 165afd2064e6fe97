"""The checkpoint's byte-level BPE tokenizer (Qwen2 style), loaded through ``tokenizers``.

Sources, in order: ``tokenizer.json``; else ``vocab.json`` + ``merges.txt`` built the way transformers builds a
``Qwen2Tokenizer`` (NFC, Qwen2 split regex, byte-level), with the added tokens of ``tokenizer_config.json``
(``added_tokens_decoder``) and ``added_tokens.json``. Ids of special tokens are always looked up, never assumed.
Decoding works on bytes so that a partial UTF-8 sequence can be sanitised by the spec's rule (one U+FFFD per
invalid byte), which differs from ``tokenizers``' own lossy decoding.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers
from tokenizers.models import BPE

from inference.errors import ModelError
from inference.families.confucius4_r2t2.postprocess import sanitize_utf8_lossy

QWEN2_SPLIT_REGEX = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
_CONTROL_TOKEN = re.compile(r"^<\|.*\|>$")


@cache
def _unicode_to_byte() -> dict[str, int]:
    """Inverse of the GPT-2 byte-level alphabet (printable bytes map to themselves, the rest to U+0100...)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    mapping: dict[str, int] = {chr(b): b for b in printable}
    extra = 0
    for b in range(256):
        if b not in printable:
            mapping[chr(256 + extra)] = b
            extra += 1
    return mapping


class R2T2Tokenizer:
    """Encode text with added tokens recognised; decode ids to bytes / sanitised text."""

    def __init__(self, tokenizer: Tokenizer, source: str) -> None:
        self._tokenizer = tokenizer
        self.source = source
        added = tokenizer.get_added_tokens_decoder()
        self._added_content = {token_id: token.content for token_id, token in added.items()}
        self._special_ids = frozenset(token_id for token_id, token in added.items() if token.special)

    @property
    def size(self) -> int:
        return self._tokenizer.get_vocab_size(with_added_tokens=True)

    @property
    def special_ids(self) -> frozenset[int]:
        return self._special_ids

    def token_id(self, token: str) -> int | None:
        return self._tokenizer.token_to_id(token)

    def require_id(self, token: str) -> int:
        token_id = self.token_id(token)
        if token_id is None:
            raise ModelError(
                f"the tokenizer ({self.source}) has no {token} token",
                "use the tokenizer files that ship with the checkpoint",
            )
        return token_id

    def encode(self, text: str) -> list[int]:
        return self._tokenizer.encode(text, add_special_tokens=False).ids

    def token_bytes(self, token_id: int) -> bytes:
        if token_id in self._added_content:
            return self._added_content[token_id].encode("utf-8")
        piece = self._tokenizer.id_to_token(token_id)
        if piece is None:
            raise ValueError(f"token id {token_id} is outside the vocabulary ({self.size} tokens)")
        table = _unicode_to_byte()
        return bytes(table[ch] for ch in piece)

    def decode_bytes(self, ids: Iterable[int], drop: Iterable[int] = ()) -> bytes:
        """Bytes of ``ids``, leaving out special added tokens and the extra ids in ``drop`` (pad, eos)."""
        skipped = self._special_ids | frozenset(drop)
        return b"".join(self.token_bytes(i) for i in ids if i not in skipped)

    def decode(self, ids: Iterable[int], drop: Iterable[int] = ()) -> str:
        """Text of ``ids`` with specials dropped; invalid UTF-8 gives one U+FFFD per byte."""
        return sanitize_utf8_lossy(self.decode_bytes(ids, drop))


def load_tokenizer(model_dir: Path, files: Mapping[str, bytes] | None = None) -> R2T2Tokenizer:
    """Load from a directory, or from ``files`` (name → content, e.g. GGUF-embedded sidecars) when given."""

    def read(name: str) -> bytes | None:
        if files is not None:
            return files.get(name)
        path = model_dir / name
        return path.read_bytes() if path.is_file() else None

    where = str(model_dir)
    tokenizer_json = read("tokenizer.json")
    if tokenizer_json is not None:
        try:
            return R2T2Tokenizer(
                Tokenizer.from_str(tokenizer_json.decode("utf-8")), f"{where}/tokenizer.json"
            )
        except Exception as exc:  # tokenizers raises a bare Exception on a malformed file
            raise ModelError(
                f"cannot read {where}/tokenizer.json: {exc}", "re-download the tokenizer files"
            ) from exc
    vocab_raw, merges_raw = read("vocab.json"), read("merges.txt")
    if vocab_raw is None or merges_raw is None:
        raise ModelError(
            f"{where} has no tokenizer (neither tokenizer.json nor vocab.json + merges.txt)",
            "copy the tokenizer files of the checkpoint into the model directory",
        )
    try:
        vocab = json.loads(vocab_raw.decode("utf-8"))
        merges: list[tuple[str, str]] = [
            (left, right)
            for left, _, right in (line.partition(" ") for line in merges_raw.decode("utf-8").splitlines())
            if left and not left.startswith("#version")
        ]
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelError(f"cannot read {where}/vocab.json or merges.txt: {exc}", "re-download them") from exc
    tokenizer = Tokenizer(
        BPE(
            vocab=vocab,
            merges=merges,
            unk_token=None,
            continuing_subword_prefix="",
            end_of_word_suffix="",
            fuse_unk=False,
            byte_fallback=False,
        )
    )
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    for token_id, token in sorted(_added_tokens(read, where).items()):
        assigned = (
            tokenizer.add_tokens([token]) if not token.special else tokenizer.add_special_tokens([token])
        )
        actual = tokenizer.token_to_id(token.content)
        if actual != token_id:
            raise ModelError(
                f"added token {token.content!r} should have id {token_id} but the vocabulary gives it {actual} "
                f"(added {assigned})",
                "the tokenizer files do not belong together; re-download them",
            )
    return R2T2Tokenizer(tokenizer, f"{where}/vocab.json+merges.txt")


def _added_tokens(read, where: str) -> dict[int, AddedToken]:
    tokens: dict[int, AddedToken] = {}
    special_names: set[str] = set()
    config_raw = read("tokenizer_config.json")
    if config_raw is not None:
        try:
            config = json.loads(config_raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ModelError(f"cannot read {where}/tokenizer_config.json: {exc}", "re-download it") from exc
        for key, entry in (config.get("added_tokens_decoder") or {}).items():
            tokens[int(key)] = AddedToken(
                entry["content"],
                single_word=bool(entry.get("single_word", False)),
                lstrip=bool(entry.get("lstrip", False)),
                rstrip=bool(entry.get("rstrip", False)),
                normalized=bool(entry.get("normalized", False)),
                special=bool(entry.get("special", False)),
            )
        special_names.update(config.get("additional_special_tokens") or [])
    added_raw = read("added_tokens.json")
    if added_raw is not None:
        try:
            extra = json.loads(added_raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ModelError(f"cannot read {where}/added_tokens.json: {exc}", "re-download it") from exc
        for content, token_id in extra.items():
            if int(token_id) not in tokens:
                special = content in special_names or bool(_CONTROL_TOKEN.match(content))
                tokens[int(token_id)] = AddedToken(content, normalized=False, special=special)
    return tokens
