"""Text post-processing of the thinker's output (docs/families/confucius4_r2t2.md §5, project decisions §8).

Everything works on Unicode code points (Python ``str``); byte input only appears in ``sanitize_utf8_lossy`` and
the code-point helpers, which is where a partial UTF-8 sequence from a cut-off byte-level token shows up.
"""

from __future__ import annotations

from dataclasses import dataclass

from inference.families.confucius4_r2t2.languages import normalize_language_name

ASR_TEXT_TAG = "<asr_text>"
REPLACEMENT = "\ufffd"

# Python's str.isspace() set, spelled out because the spec defines strip() by it.
WHITESPACE = frozenset(
    [chr(c) for c in range(0x09, 0x0E)]
    + [chr(c) for c in range(0x1C, 0x20)]
    + ["\x20", "\x85", "\xa0", "\u1680"]
    + [chr(c) for c in range(0x2000, 0x200B)]
    + ["\u2028", "\u2029", "\u202f", "\u205f", "\u3000"]
)
_WHITESPACE_STR = "".join(sorted(WHITESPACE))

_ASCII_TO_FULL = {",": "，", ".": "。", "!": "！", "?": "？", ";": "；", ":": "：", "(": "（", ")": "）"}
_FULL_TO_ASCII = {full: ascii_ for ascii_, full in _ASCII_TO_FULL.items()}
_ROLLBACK_PUNCTUATION = frozenset("，。！？、；：,.!?:;")
REPETITION_THRESHOLD = 20
_MAX_PATTERN_LENGTH = 20


def strip(text: str) -> str:
    return text.strip(_WHITESPACE_STR)


def rstrip(text: str) -> str:
    return text.rstrip(_WHITESPACE_STR)


def is_cjk(ch: str) -> bool:
    return "\u4e00" <= ch <= "\u9fff"


# ------------------------------------------------------------------------------------------ UTF-8 bytes


def _sequence_length(lead: int) -> int:
    """Expected total length of a UTF-8 sequence from its lead byte; 0 for a byte that cannot start one."""
    if lead < 0x80:
        return 1
    if 0xC0 <= lead <= 0xDF:
        return 2
    if 0xE0 <= lead <= 0xEF:
        return 3
    if 0xF0 <= lead <= 0xF7:
        return 4
    return 0


def _decode_utf8(data: bytes) -> list[str]:
    """One entry per decoded code point; every byte that does not start a complete sequence gives U+FFFD.

    Overlong forms decode to their code point (as the reference engine does); a sequence that would give a
    surrogate or a code point above U+10FFFF is invalid, so each of its bytes becomes U+FFFD.
    """
    out: list[str] = []
    i, n = 0, len(data)
    while i < n:
        lead = data[i]
        length = _sequence_length(lead)
        if length == 1:
            out.append(chr(lead))
            i += 1
            continue
        if length == 0 or i + length > n or any(not 0x80 <= b <= 0xBF for b in data[i + 1 : i + length]):
            out.append(REPLACEMENT)
            i += 1
            continue
        code = lead & (0x7F >> length)
        for b in data[i + 1 : i + length]:
            code = (code << 6) | (b & 0x3F)
        if 0xD800 <= code <= 0xDFFF or code > 0x10FFFF:
            out.append(REPLACEMENT)
            i += 1
            continue
        out.append(chr(code))
        i += length
    return out


def sanitize_utf8_lossy(data: bytes) -> str:
    """Decode bytes with one U+FFFD per byte that does not start a complete valid sequence."""
    return "".join(_decode_utf8(data))


def utf8_codepoint_count(data: bytes | str) -> int:
    """Code points in ``data``; an invalid byte counts as one."""
    return len(data) if isinstance(data, str) else len(_decode_utf8(data))


def utf8_slice_from_codepoint(data: bytes | str, index: int) -> str:
    """The suffix starting at code point ``index`` (invalid bytes are U+FFFD, one code point each)."""
    text = data if isinstance(data, str) else sanitize_utf8_lossy(data)
    return text[max(0, index) :]


# --------------------------------------------------------------------------------------- text rewrites


def normalize_punct_by_context(text: str) -> str:
    """Rewrite ``, . ! ? ; : ( )`` (ASCII or full-width) by the nearest preceding non-whitespace character:
    CJK → full-width; ASCII letter/digit/``"``/``'`` → ASCII; otherwise (or at the start) unchanged."""
    out: list[str] = []
    previous: str | None = None  # nearest preceding non-whitespace character of the input
    for ch in text:
        replacement = ch
        if ch in _ASCII_TO_FULL or ch in _FULL_TO_ASCII:
            if previous is not None and is_cjk(previous):
                replacement = _ASCII_TO_FULL.get(ch, ch)
            elif previous is not None and previous.isascii() and (previous.isalnum() or previous in "\"'"):
                replacement = _FULL_TO_ASCII.get(ch, ch)
        out.append(replacement)
        if ch not in WHITESPACE:
            previous = ch
    return "".join(out)


def _fix_char_repeats(text: str, threshold: int) -> str:
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        count = 1
        while i + count < n and text[i + count] == text[i]:
            count += 1
        out.append(text[i] if count > threshold else text[i : i + count])
        i += count
    return "".join(out)


def _fix_pattern_repeats(text: str, threshold: int) -> str:
    """A pattern of up to 20 code points repeated ``threshold`` times in a row collapses to one copy.

    The outer scan runs while ``i <= n - 2*threshold`` (the released Python's bound); the first hit ends the scan
    and the remainder after the repeats is fixed recursively.
    """
    n = len(text)
    minimum = 2 * threshold
    if n < minimum:
        return text
    out: list[str] = []
    i = 0
    while i <= n - minimum:
        for k in range(1, _MAX_PATTERN_LENGTH + 1):
            if i + k * threshold > n:
                break
            pattern = text[i : i + k]
            if all(text[i + r * k : i + (r + 1) * k] == pattern for r in range(1, threshold)):
                end = i + threshold * k
                while end + k <= n and text[end : end + k] == pattern:
                    end += k
                out.append(pattern)
                out.append(_fix_pattern_repeats(text[end:], threshold))
                return "".join(out)
        out.append(text[i])
        i += 1
    out.append(text[i:])
    return "".join(out)


def detect_and_fix_repetitions(text: str, threshold: int = REPETITION_THRESHOLD) -> str:
    """Collapse character runs longer than ``threshold``, then patterns repeated ``threshold`` times."""
    return _fix_pattern_repeats(_fix_char_repeats(text, threshold), threshold)


def remove_spaces_between_chinese(text: str) -> str:
    """Delete whitespace runs that have a CJK character on both sides."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text[i] in WHITESPACE:
            end = i
            while end < n and text[end] in WHITESPACE:
                end += 1
            if not (out and is_cjk(out[-1][-1]) and end < n and is_cjk(text[end])):
                out.append(text[i:end])
            i = end
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def truncate_at_pipe(text: str) -> str:
    return text.split("|", 1)[0]


def ends_with_rollback_punctuation(text: str) -> bool:
    return bool(text) and text[-1] in _ROLLBACK_PUNCTUATION


def split_at_tag(text: str) -> tuple[str, str] | None:
    """(before, after) around the first ``<asr_text>``; None when the tag is absent."""
    if ASR_TEXT_TAG not in text:
        return None
    before, after = text.split(ASR_TEXT_TAG, 1)
    return before, after


# -------------------------------------------------------------------------------------------- parsing


@dataclass(frozen=True)
class ParsedOutput:
    language: str  # "" when unknown / silence
    text: str


def _language_from_header(header: str) -> str:
    for line in header.split("\n"):
        line = strip(line)
        if line.startswith("language "):
            return normalize_language_name(strip(line[len("language ") :]))
    return ""


def _parse(raw: str, user_language: str, fix_repetitions: bool) -> ParsedOutput:
    if user_language:
        if not fix_repetitions and user_language == "English":
            return ParsedOutput(user_language, rstrip(raw))
        text = strip(raw)
        return ParsedOutput(user_language, detect_and_fix_repetitions(text) if fix_repetitions else text)
    text = strip(raw)
    if not text:
        return ParsedOutput("", "")
    if fix_repetitions:
        text = detect_and_fix_repetitions(text)
    parts = split_at_tag(text)
    if parts is None:
        return ParsedOutput("", strip(text))
    header, body = parts
    if "language none" in header.lower():
        return ParsedOutput("", strip(body))
    return ParsedOutput(_language_from_header(header), strip(body))


def parse_asr_output(raw: str, user_language: str = "") -> ParsedOutput:
    """Split ``language X<asr_text>text`` (automatic language) or take the text as is (forced language)."""
    return _parse(raw, user_language, fix_repetitions=True)


def parse_language_output(raw: str, user_language: str = "") -> ParsedOutput:
    """``parse_asr_output`` without the repetition fix (streaming uses it to read the detected language)."""
    return _parse(raw, user_language, fix_repetitions=False)
