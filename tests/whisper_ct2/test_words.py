"""Words from token alignments: start times, grouping on spaces, characters split over byte tokens."""

from __future__ import annotations

from inference.families.whisper_ct2.words import aligned_words, group_words, token_start_times

PIECES = {1: " hello", 2: " wor", 3: "ld", 4: "!", 5: " big"}


def decode(ids: list[int]) -> str:
    return "".join(PIECES[i] for i in ids)


def test_a_token_starts_where_the_path_first_reaches_it() -> None:
    path = [(0, 0), (0, 1), (1, 5), (2, 5), (2, 9), (3, 12)]
    assert token_start_times(path, 4) == [0.0, 0.1, 0.1, 0.24]


def test_a_skipped_token_starts_with_the_next_one() -> None:
    assert token_start_times([(0, 2), (2, 7)], 3) == [0.04, 0.14, 0.14]


def test_words_start_at_a_leading_space() -> None:
    assert group_words([1, 2, 3, 4, 5], decode, spaceless=False) == [
        ("hello", [0]),
        ("world!", [1, 2, 3]),
        ("big", [4]),
    ]
    assert [w for w, _ in group_words([2, 3], decode, spaceless=True)] == ["wor", "ld"]


def test_a_character_split_over_byte_tokens_stays_whole() -> None:
    data = " né".encode()  # b" n\xc3\xa9": the last character is two bytes
    pieces = {10: data[:2], 11: data[2:3], 12: data[3:]}

    def decode_bytes(ids: list[int]) -> str:
        return b"".join(pieces[i] for i in ids).decode("utf-8", errors="replace")

    assert group_words([10, 11, 12], decode_bytes, spaceless=True) == [("n", [0]), ("é", [1, 2])]


def test_aligned_words_take_their_end_from_the_next_token() -> None:
    path = [(0, 0), (1, 10), (2, 20), (3, 25), (4, 30), (5, 40)]
    words = aligned_words([1, 2, 3, 4, 5], path, [0.5, 1.0, 1.0, 1.0, 0.25], decode, spaceless=False)
    assert [(w.text, w.start_s, w.end_s, w.confidence) for w in words] == [
        ("hello", 0.0, 0.2, 0.5),
        ("world!", 0.2, 0.6, 1.0),
        ("big", 0.6, 0.8, 0.25),
    ]
