"""A NeMo SentencePiece model (``tokenizer.model``) → the ``tokenizer.json`` this family loads.

The model file is a protobuf ``ModelProto``; only the fields the conversion needs are read here (no protobuf
or sentencepiece dependency): the pieces (text, score, type), ``trainer_spec.model_type`` and
``normalizer_spec.precompiled_charsmap``. The result has the shape transformers' ``ParakeetConverter`` gives
the stock v3 vocabulary (docs/reference_parity.md §1.6): a byte-fallback BPE whose merges are regenerated from the
piece scores, the precompiled normalizer, Metaspace pre-tokenizer and decoder, control and unknown pieces as
special added tokens, and ``<blank>`` appended as the last id.
"""

from __future__ import annotations

import base64
import json
import struct
from dataclasses import dataclass
from typing import Any

from inference.errors import ModelError

WORD_MARK = "\u2581"
BLANK = "<blank>"
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
BPE_MODEL = 2
# The file is untrusted: more pieces than any real vocabulary (v3 has 8192) or pieces so long that regenerating
# the merges (every split of every piece) would run for hours are refused.
MAX_PIECES = 1 << 20
MAX_SPLIT_WORK = 64 << 20  # the sum of the pieces' squared lengths


@dataclass(frozen=True)
class Piece:
    text: str
    score: float
    kind: int


@dataclass(frozen=True)
class SentencePieceModel:
    pieces: tuple[Piece, ...]
    model_type: int
    precompiled_charsmap: bytes
    add_dummy_prefix: bool = (
        True  # a word mark before the first word, as transformers' prepend_scheme "always"
    )


def _varint(data: bytes, pos: int, source: str) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ModelError(
                f"{source} is truncated or not a SentencePiece model", "use the .nemo's own tokenizer.model"
            )
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def _fields(data: bytes, source: str) -> list[tuple[int, int | bytes]]:
    """(field number, value) of one protobuf message: ints for varint/fixed fields, bytes for length-delimited."""
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos, source)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos, source)
            out.append((number, value))
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            if pos + size > len(data):
                raise ModelError(f"{source} is truncated", "use the .nemo's own tokenizer.model")
            out.append((number, int.from_bytes(data[pos : pos + size], "little")))
            pos += size
        elif wire == 2:
            size, pos = _varint(data, pos, source)
            if pos + size > len(data):
                raise ModelError(f"{source} is truncated", "use the .nemo's own tokenizer.model")
            out.append((number, data[pos : pos + size]))
            pos += size
        else:
            raise ModelError(
                f"{source} is not a SentencePiece model (wire type {wire})",
                "use the .nemo's own tokenizer.model",
            )
    return out


def parse_model(data: bytes, source: str) -> SentencePieceModel:
    pieces: list[Piece] = []
    model_type, charsmap, dummy_prefix = 1, b"", True
    for number, value in _fields(data, source):
        if number == 1 and isinstance(value, bytes):
            text, score, kind = None, 0.0, NORMAL
            for sub, item in _fields(value, source):
                if sub == 1 and isinstance(item, bytes):
                    try:
                        text = item.decode("utf-8", "strict")
                    except UnicodeDecodeError:
                        raise ModelError(
                            f"{source}: piece {len(pieces)} is not UTF-8 text",
                            "use the .nemo's own tokenizer.model",
                        ) from None
                elif sub == 2 and isinstance(item, int) and item < 1 << 32:
                    score = struct.unpack("<f", item.to_bytes(4, "little"))[0]
                elif sub == 3 and isinstance(item, int):
                    kind = item
            if text is None:
                raise ModelError(
                    f"{source}: piece {len(pieces)} has no text", "use the .nemo's own tokenizer.model"
                )
            pieces.append(Piece(text, score, kind))
            if len(pieces) > MAX_PIECES:
                raise ModelError(
                    f"{source} holds more than {MAX_PIECES} pieces, more than any SentencePiece vocabulary",
                    "use the .nemo's own tokenizer.model",
                )
        elif number == 2 and isinstance(value, bytes):
            model_type = next((v for n, v in _fields(value, source) if n == 3 and isinstance(v, int)), 1)
        elif number == 3 and isinstance(value, bytes):
            normalizer = _fields(value, source)
            charsmap = next((v for n, v in normalizer if n == 2 and isinstance(v, bytes)), b"")
            dummy_prefix = next((bool(v) for n, v in normalizer if n == 3 and isinstance(v, int)), True)
    if not pieces:
        raise ModelError(
            f"{source} holds no pieces; it is not a SentencePiece model",
            "use the .nemo's own tokenizer.model",
        )
    if sum(len(p.text) ** 2 for p in pieces) > MAX_SPLIT_WORK:
        raise ModelError(
            f"{source} has pieces too long for a SentencePiece vocabulary",
            "use the .nemo's own tokenizer.model",
        )
    return SentencePieceModel(tuple(pieces), model_type, charsmap, dummy_prefix)


def bpe_merges(pieces: tuple[Piece, ...]) -> list[list[str]]:
    """Every split of a piece into two pieces of the vocabulary, highest-scoring merged piece first."""
    vocab = {p.text: i for i, p in enumerate(pieces)}
    found: list[tuple[float, str, str]] = []
    for piece in pieces:
        splits = [(piece.text[:i], piece.text[i:]) for i in range(1, len(piece.text))]
        local = sorted(
            (s for s in splits if s[0] in vocab and s[1] in vocab), key=lambda s: (vocab[s[0]], vocab[s[1]])
        )
        found.extend((piece.score, left, right) for left, right in local)
    # Higher score first; among the splits of one piece the longer left part first (as transformers orders them).
    found.sort(key=lambda m: (m[0], len(m[1]), len(m[2])), reverse=True)
    return [[left, right] for _, left, right in found]


def _added(token_id: int, content: str, special: bool) -> dict[str, Any]:
    return {
        "id": token_id,
        "content": content,
        "single_word": False,
        "lstrip": False,
        "rstrip": False,
        "normalized": False,
        "special": special,
    }


def tokenizer_json(model: SentencePieceModel, source: str) -> str:
    """The tokenizer.json text; its ids are the piece indices, and ``<blank>`` gets ``len(pieces)``."""
    if model.model_type != BPE_MODEL:
        raise ModelError(
            f"{source} is a SentencePiece model of type {model.model_type}, not BPE (2)",
            "Parakeet-TDT checkpoints use a BPE tokenizer; use the stock tokenizer with --sidecars",
        )
    texts = [p.text for p in model.pieces]
    if len(set(texts)) != len(texts):
        raise ModelError(f"{source} names a piece twice", "use the .nemo's own tokenizer.model")
    unk = next((p.text for p in model.pieces if p.kind == UNKNOWN), None)
    if unk is None:
        raise ModelError(f"{source} has no unknown piece", "use the .nemo's own tokenizer.model")
    added = [
        _added(i, p.text, p.kind != USER_DEFINED)
        for i, p in enumerate(model.pieces)
        if p.kind in (UNKNOWN, CONTROL, USER_DEFINED)
    ]
    added.append(_added(len(model.pieces), BLANK, True))
    prepend = "always" if model.add_dummy_prefix else "never"
    metaspace = {"type": "Metaspace", "replacement": WORD_MARK, "prepend_scheme": prepend, "split": True}
    normalizers: list[dict[str, Any]] = []
    if model.precompiled_charsmap:
        normalizers.append(
            {
                "type": "Precompiled",
                "precompiled_charsmap": base64.b64encode(model.precompiled_charsmap).decode("ascii"),
            }
        )
    normalizers += [
        {"type": "Strip", "strip_left": False, "strip_right": True},
        {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": WORD_MARK},
    ]
    spec = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": normalizers},
        "pre_tokenizer": metaspace,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {},
        },
        "decoder": metaspace,
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": unk,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": True,
            "byte_fallback": True,
            "ignore_merges": False,
            "vocab": {text: i for i, text in enumerate(texts)},
            "merges": bpe_merges(model.pieces),
        },
    }
    return json.dumps(spec, ensure_ascii=False, indent=2) + "\n"
