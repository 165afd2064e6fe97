"""Post-processing and language resolution (docs/families/confucius4_r2t2.md §4, §5, §8)."""

from __future__ import annotations

import pytest

from inference.errors import UsageError
from inference.families.confucius4_r2t2.languages import (
    BUILTIN_LANGUAGES,
    resolve_language,
    supported_languages,
)
from inference.families.confucius4_r2t2.postprocess import (
    WHITESPACE,
    detect_and_fix_repetitions,
    ends_with_rollback_punctuation,
    normalize_punct_by_context,
    parse_asr_output,
    parse_language_output,
    remove_spaces_between_chinese,
    sanitize_utf8_lossy,
    strip,
    truncate_at_pipe,
    utf8_codepoint_count,
    utf8_slice_from_codepoint,
)


def test_whitespace_set_is_pythons():
    assert {chr(c) for c in range(0x110000) if chr(c).isspace()} == WHITESPACE
    assert strip("\u3000 a b\x85\u2028") == "a b"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"", ""),
        ("héllo 你好".encode(), "héllo 你好"),
        ("你".encode()[:2], "\ufffd\ufffd"),  # partial token: one U+FFFD per byte
        (b"ab\xe4\xbd", "ab\ufffd\ufffd"),
        (b"\x80\xbf", "\ufffd\ufffd"),  # stray continuation bytes
        (b"\xf8\xff", "\ufffd\ufffd"),  # bytes that never start a sequence
        (
            b"\xc0\x80",
            "\x00",
        ),  # overlong form decodes to its code point (docs/families/confucius4_r2t2.md §8 item 3)
        (b"\xed\xa0\x80", "\ufffd\ufffd\ufffd"),  # surrogate
        (b"\xf4\x90\x80\x80", "\ufffd" * 4),  # above U+10FFFF
        ("😀".encode() + b"x", "😀x"),
    ],
)
def test_sanitize_utf8_lossy(data, expected):
    assert sanitize_utf8_lossy(data) == expected


def test_codepoint_helpers():
    data = "a你".encode() + b"\xe4" + b"z"
    assert utf8_codepoint_count(data) == 4
    assert utf8_slice_from_codepoint(data, 1) == "你\ufffdz"
    assert utf8_slice_from_codepoint("héllo", 2) == "llo"
    assert utf8_slice_from_codepoint("ab", 5) == ""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("你好,", "你好，"),
        ("ok。", "ok."),
        ("22,500", "22,500"),
        (",start", ",start"),  # nothing before: unchanged
        ("你好 ,  世界!", "你好 ，  世界！"),  # nearest non-whitespace decides
        ('he said "yes"。', 'he said "yes".'),
        ("(你好)", "(你好）"),
        ("é,", "é,"),  # non-ASCII letter: unchanged
        ("好,,", "好，,"),  # the second comma follows punctuation: unchanged
        ("\ufffd,", "\ufffd,"),
        ("", ""),
    ],
)
def test_normalize_punct_by_context(text, expected):
    assert normalize_punct_by_context(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a" * 25, "a"),
        ("a" * 20, "a" * 20),
        ("x" + "a" * 21 + "y", "xay"),
        ("ab" * 20 + "c", "abc"),
        ("ab" * 19 + "c", "ab" * 19 + "c"),
        ("hello " * 25 + "world", "hello world"),
        ("b" + "a" * 20 + "c" * 20, "ba" + "c" * 20),  # exactly 20 repeats inside a longer string collapse
        ("b" + "a" * 20 + "c" * 19, "b" + "a" * 20 + "c" * 19),  # n = 40: only i = 0 is scanned
        ("", ""),
    ],
)
def test_detect_and_fix_repetitions(text, expected):
    assert detect_and_fix_repetitions(text) == expected


def test_repetition_scan_bound_matches_release():
    # The pattern pass scans while i <= n - 40: a run of exactly 20 starting later is left alone.
    text = "q" * 1 + "xy" * 10 + "a" * 20  # n = 41, the 20 a's start at 21 > n - 40
    assert detect_and_fix_repetitions(text) == text


@pytest.mark.parametrize(
    ("raw", "language", "expected"),
    [
        ("", "", ("", "")),
        ("   ", "", ("", "")),
        ("language English<asr_text>Hello there. ", "", ("English", "Hello there.")),
        ("language None<asr_text>", "", ("", "")),
        ("language none<asr_text> x", "", ("", "x")),
        ("plain text without tag ", "", ("", "plain text without tag")),
        ("language ENGLISH<asr_text>hi", "", ("English", "hi")),
        ("noise\nlanguage chinese\nlanguage English<asr_text>你好", "", ("Chinese", "你好")),
        ("Language English<asr_text>hi", "", ("", "hi")),  # prefix is case-sensitive
        ("language English<asr_text>a<asr_text>b", "", ("English", "a<asr_text>b")),  # first tag splits
        ("language English<asr_text>" + "ha" * 25, "", ("English", "ha")),
        (" forced text ", "German", ("German", "forced text")),
        ("x" * 30, "German", ("German", "x")),
    ],
)
def test_parse_asr_output(raw, language, expected):
    parsed = parse_asr_output(raw, language)
    assert (parsed.language, parsed.text) == expected


def test_parse_language_output_keeps_repetitions_and_english_left_space():
    assert parse_language_output("language English<asr_text>" + "a" * 25).text == "a" * 25
    assert parse_language_output("  hi there  ", "English").text == "  hi there"
    assert parse_language_output("  hi there  ", "German").text == "hi there"


def test_remove_spaces_between_chinese():
    assert remove_spaces_between_chinese("你 好  世界 ok 好 x") == "你好世界 ok 好 x"
    assert remove_spaces_between_chinese(" 你 ") == " 你 "
    assert remove_spaces_between_chinese("") == ""


def test_truncate_and_rollback_punctuation():
    assert truncate_at_pipe("abc|def|g") == "abc"
    assert truncate_at_pipe("abc") == "abc"
    assert ends_with_rollback_punctuation("好，")
    assert ends_with_rollback_punctuation("end.")
    assert not ends_with_rollback_punctuation("end")
    assert not ends_with_rollback_punctuation("")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("en", "English"),
        ("  zh ", "Chinese"),
        ("yue", "Cantonese"),
        ("FIL", "Filipino"),
        ("english", "English"),
        ("ENGLISH", "English"),
        ("Auto", ""),
        ("auto", ""),
        ("none", ""),
        ("", ""),
        (None, ""),
    ],
)
def test_resolve_language(value, expected):
    assert resolve_language(value, supported_languages(None)) == expected


def test_resolve_language_errors_and_config_list():
    with pytest.raises(UsageError, match="not supported"):
        resolve_language("Klingon", supported_languages(None))
    limited = supported_languages(["English", "Chinese"])
    assert limited == ("Auto", "English", "Chinese")
    assert resolve_language("zh", limited) == "Chinese"
    with pytest.raises(UsageError, match="German"):
        resolve_language("de", limited)
    assert len(BUILTIN_LANGUAGES) == 30
