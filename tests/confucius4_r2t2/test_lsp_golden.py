"""The LSP state machine (docs/families/confucius4_r2t2.md §7/§8) against a scripted decoder: golden tables worked out by hand.

Each row is one decode: the model's scripted answer, then what the state machine must have asked with (the text
prefix) and what it must publish (the delta) and show (the running text). The last row of a table with
``FINAL`` is the flush that ``finish`` runs on a tail shorter than one chunk.
"""

from __future__ import annotations

import numpy as np
import pytest
from fake_decoder import ScriptedDecoder

from inference.contract import Delta, Snapshot
from inference.families.confucius4_r2t2.lsp import StreamOptions
from inference.families.confucius4_r2t2.streaming import R2T2Stream, provisional_tail

CHUNK_MS = 80.0
CHUNK = 1280  # samples of one 80 ms chunk
TAIL = 300  # a leftover shorter than one chunk
FINAL = "FINAL"


def run_table(table, language: str = "", **options):
    """Push one chunk per row (a FINAL row: a short tail, then finish); check prefix, delta and text per row."""
    answers = [row[1] if row[0] == FINAL else row[0] for row in table]
    decoder = ScriptedDecoder(answers)
    stream = R2T2Stream(decoder, StreamOptions(chunk_size_ms=CHUNK_MS, **options), language)
    deltas: list[str] = []
    for index, row in enumerate(table):
        if row[0] == FINAL:
            _, _, prefix, text = row
            stream.push(np.zeros(TAIL, dtype=np.float32))
            transcript = stream.finish()
            assert decoder.calls[index][1] == prefix, f"row {index}: prefix"
            assert transcript.text == text, f"row {index}: final text"
            return stream, deltas, transcript
        _, prefix, delta, text = row
        events = stream.push(np.zeros(CHUNK, dtype=np.float32))
        assert decoder.calls[index][1] == prefix, f"row {index}: prefix"
        assert [e.text for e in events if isinstance(e, Delta)] == ([delta] if delta else []), (
            f"row {index}: delta"
        )
        assert stream.recognizer.text == text, f"row {index}: text"
        deltas.extend(e.text for e in events if isinstance(e, Delta))
    return stream, deltas, stream.finish()


def test_forced_language_rollback_and_finish_flush():
    # Five tokens roll back; a prefix is sent from the third chunk on (unfixed_chunk_num = 2).
    table = [
        # answer                                   prefix sent              delta        running text
        (" Hello world this is a test", "", "Hello", "Hello world this is a test"),
        ("Hello world this is a test again", "", " world", "Hello world this is a test again"),
        (" this is a test again now", "Hello world", " this", "Hello world this is a test again now"),
        (
            " is a test again now please",
            "Hello world this",
            " is",
            "Hello world this is a test again now please",
        ),
        # the flush rolls back exactly five tokens and publishes nothing
        (
            FINAL,
            " is a test again now please stop",
            "Hello world this is",
            "Hello world this is is a test again now please stop",
        ),
    ]
    stream, deltas, transcript = run_table(table, "English")
    assert "".join(deltas) == "Hello world this is"
    assert transcript.language == "English"
    assert stream.decode_calls == 5


def test_automatic_language_metadata_is_never_published():
    table = [
        ("language English", "", "", ""),  # no tag: chunk_id stays 0
        ("language English<asr_text>Good morning every body here", "", "", "Good morning every body here"),
        (
            "language English<asr_text>Good morning every body here now",
            "",
            "Good",
            "Good morning every body here now",
        ),
        # third counted chunk: the prefix keeps the metadata, the delta never does
        (
            " morning every body here today again",
            "language English<asr_text>Good",
            " morning",
            "Good morning every body here today again",
        ),
    ]
    stream, deltas, _ = run_table(table, "")
    assert stream.recognizer.language == "English"
    assert all("language" not in d and "<asr_text>" not in d for d in deltas)


def test_tag_with_empty_text_commits_everything_but_shows_nothing():
    # With the tag and nothing after it the rollback is 0: the whole metadata is stable, nothing is published.
    table = [
        ("language English<asr_text>", "", "", ""),
        ("language English<asr_text>Hi", "", "", "Hi"),  # 4 ids, 5 rolled back: nothing stable
        # third counted chunk: "language English<asr_text>Hi" is 4 ids, all rolled back, so no prefix
        ("language Chinese<asr_text>Hi there you are very kind", "", "Hi", "Hi there you are very kind"),
    ]
    stream, _, _ = run_table(table, "")
    # the detected language follows the latest answer
    assert stream.recognizer.language == "Chinese"


def test_replacement_character_grows_the_rollback():
    # 你好世界 is 12 byte tokens: cutting 5 leaves a partial 世 (U+FFFD), so 6 are cut and 你好 is committed.
    table = [
        ("你好世界", "", "你好", "你好世界"),
        ("你好世界啊", "", "世", "你好世界啊"),  # 15 bytes: 10 kept = 你好世 + 1 byte, 9 kept = 你好世
    ]
    _, deltas, transcript = run_table(table, "Chinese")
    assert "".join(deltas) == "你好世"
    assert transcript.text == "你好世界啊"


def test_generated_replacement_characters_are_deleted_after_punctuation():
    # U+FFFD counts as a character when choosing the punctuation form (it is not CJK: the comma stays ASCII),
    # then it is deleted; the committed text never holds U+FFFD.
    table = [
        ("你\ufffd,好 a b c d e f", "", "你,好 a", "你,好 a b c d e f"),
    ]
    _, deltas, _ = run_table(table, "Chinese")
    assert "\ufffd" not in "".join(deltas)


@pytest.mark.parametrize(
    ("rollback_punctuation", "expected_delta"),
    [(False, ""), (True, "Hello world.")],
)
def test_punctuation_commits_everything_only_with_rollback_punctuation(rollback_punctuation, expected_delta):
    table = [("Hello world.", "", expected_delta, "Hello world.")]
    run_table(table, "English", rollback_punctuation=rollback_punctuation)


def test_rollback_punctuation_also_keeps_the_whole_prefix():
    table = [
        ("One two three four five six.", "", "One two three four five six.", "One two three four five six."),
        ("One two three four five six.", "", "", "One two three four five six."),
        (" Seven", "One two three four five six.", "", "One two three four five six. Seven"),
    ]
    run_table(table, "English", rollback_punctuation=True)


def test_punctuation_is_normalised_by_context():
    table = [
        ("你好, ok。 a b c d e", "", "你好， ok.", "你好， ok. a b c d e"),
    ]
    run_table(table, "Chinese")


def test_spaces_between_chinese_characters_are_removed_when_chinese():
    table = [("你好 世界 a b c d e", "", "你好世界", "你好世界 a b c d e")]
    run_table(table, "Chinese")
    table = [("你好 世界 a b c d e", "", "你好 世界", "你好 世界 a b c d e")]
    run_table(table, "English")


def test_shrinking_prefix_emits_nothing_and_growth_is_counted_in_code_points():
    table = [
        ("one two three four five six seven", "", "one two", "one two three four five six seven"),
        ("one", "", "", "one"),  # stable prefix shrank
        (
            "one two three four five six seven eight nine",
            "",
            " three four",
            "one two three four five six seven eight nine",
        ),
        # a stable text of more code points: only the code points past the published 18 go out
        (
            "uno dos tres cuatro cinco seis siete ocho nueve diez",
            "one two three four",
            "uno dos tres cuatro cinco",
            "one two three fouruno dos tres cuatro cinco seis siete ocho nueve diez",
        ),
    ]
    run_table(table, "English")


def test_model_emitted_tags_never_reach_the_deltas():
    table = [
        # forced language: the parsed text is the whole answer, so the model-facing state becomes
        # "a<asr_text>" + answer; the stable part after its first tag still holds tags, which are removed
        ("a<asr_text>b<asr_text>c d e f g h", "", "abc", "a<asr_text>b<asr_text>c d e f g h"),
    ]
    stream, deltas, _ = run_table(table, "English")
    assert stream.recognizer.raw_decoded == "a<asr_text>a<asr_text>b<asr_text>c d e f g h"
    assert deltas == ["abc"]


def test_pipe_truncates_text_and_prefix():
    table = [
        ("hello world and more words here now|junk", "", "hello world", "hello world and more words here now")
    ]
    run_table(table, "English")


def test_final_flush_before_unfixed_chunks_sends_no_prefix_and_never_rolls_back_past_the_first_token():
    table = [("Hi", "", "", "Hi"), (FINAL, "Hi there", "", "Hi there")]
    run_table(table, "English")
    table = [
        ("Hi", "", "", "Hi"),
        ("Hi", "", "", "Hi"),
        (FINAL, " there", "Hi", "Hi there"),  # one id, five rolled back: max(1, ...) keeps it
    ]
    run_table(table, "English")


def test_finish_without_a_tail_does_not_decode_again():
    decoder = ScriptedDecoder(["Hello world again and again"])
    stream = R2T2Stream(decoder, StreamOptions(chunk_size_ms=CHUNK_MS), "English")
    stream.push(np.zeros(CHUNK, dtype=np.float32))
    transcript = stream.finish()
    assert len(decoder.calls) == 1
    assert transcript.text == "Hello world again and again"
    assert transcript.timing is not None and transcript.timing.audio_s == pytest.approx(0.08)
    assert [(s.text, s.start_s, s.end_s) for s in transcript.segments] == [(transcript.text, 0.0, 0.08)]


def test_finish_of_an_empty_stream_decodes_nothing():
    decoder = ScriptedDecoder([])
    transcript = R2T2Stream(decoder, StreamOptions(), "").finish()
    assert transcript.text == "" and transcript.segments == [] and decoder.calls == []


def test_delta_events_carry_segment_times_and_language():
    decoder = ScriptedDecoder(["language German<asr_text>eins zwei drei vier fuenf sechs sieben"])
    stream = R2T2Stream(decoder, StreamOptions(chunk_size_ms=CHUNK_MS), "")
    stream.push(np.zeros(CHUNK - 1, dtype=np.float32))
    events = stream.push(np.zeros(1, dtype=np.float32))
    assert events == [
        Delta("eins zwei", 0, 0.0, 0.08, "German"),
        Snapshot(" drei vier fuenf sechs sieben", 0, 0.0, 0.08, "German"),
    ]


def test_snapshots_show_the_provisional_words_when_they_change():
    answers = [
        "language English",
        "language English<asr_text>one two",
        "language English<asr_text>one two",
        "language English<asr_text>one two three four five six seven",
        " uno<asr_text>dos",
    ]
    decoder = ScriptedDecoder(answers)
    stream = R2T2Stream(decoder, StreamOptions(chunk_size_ms=CHUNK_MS), "")
    pushes = [stream.push(np.zeros(CHUNK, dtype=np.float32)) for _ in answers]
    assert pushes[0] == []  # no tag: nothing to show
    assert pushes[1] == [Snapshot("one two", 0, 0.0, 0.16, "English")]
    assert pushes[2] == []  # unchanged
    assert pushes[3] == [
        Delta("one two", 0, 0.0, 0.32, "English"),
        Snapshot(" three four five six seven", 0, 0.0, 0.32, "English"),
    ]
    # the running text holds a tag the model emitted itself: snapshots never show it
    assert stream.recognizer.text == "one two uno<asr_text>dos"
    assert pushes[4] == [Snapshot(" unodos", 0, 0.0, 0.4, "English")]


def test_no_provisional_text_once_the_running_text_leaves_the_committed_text():
    assert provisional_tail("one two three", "one two") == " three"
    assert provisional_tail("uno dos", "one two") == ""
    assert provisional_tail("a<asr_text>b", "") == "ab"
