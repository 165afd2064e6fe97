"""R2T2 live streams continue in a new process without losing or repeating text (the client's replay after a
worker death), and a stream without a window never ends because it is long (it rolls when full)."""

from __future__ import annotations

import numpy as np
import pytest
from fake_decoder import FakeTokenizer
from test_endpointing import LevelVad, SpeechCountingDecoder, frames, talk_with_short_pauses
from test_rolling_window import WordReader, speech, word

from inference.contract import Delta, SpeechEnd
from inference.errors import UsageError
from inference.families.confucius4_r2t2.endpointing import EndpointedStream, EndpointOptions
from inference.families.confucius4_r2t2.lsp import StreamOptions
from inference.families.confucius4_r2t2.prompt import PromptOverflow
from inference.families.confucius4_r2t2.streaming import R2T2Stream
from tests.stream_handover import run_with_handovers

STEP = 4000  # 250 ms pushes: chunk boundaries (320 ms) fall inside pushes


def plain(window_s: float | None = None):
    def make() -> R2T2Stream:
        rolling = None if window_s is None else int(window_s * 16000)
        return R2T2Stream(
            WordReader(), StreamOptions(), "English", rolling_samples=rolling, decoder_factory=WordReader
        )

    return make


@pytest.mark.parametrize("window_s", [None, 16.0])
@pytest.mark.parametrize(
    "cuts", [[16000], [33000, 36000], [100000, 100500, 101000], [250000, 400000, 470000]]
)
def test_a_replaced_plain_stream_commits_exactly_what_an_undisturbed_one_does(window_s, cuts):
    audio = speech(300)  # 30 s, one word per 100 ms
    undisturbed = run_with_handovers(plain(window_s), audio, [], STEP)
    run = run_with_handovers(plain(window_s), audio, cuts, STEP)
    assert run.streams == len(cuts) + 1
    assert run.committed == undisturbed.committed  # nothing lost, nothing twice, not even inside a word
    assert run.final.text == undisturbed.final.text == " ".join(word(i) for i in range(300))
    assert {e.segment_id for e in run.events if isinstance(e, Delta)} == {0}  # one segment goes on


def test_a_replaced_stream_in_automatic_language_mode_keeps_its_language_head():
    class Tagged(WordReader):
        def generate(self, audio: np.ndarray, prefix: str, max_tokens: int) -> str:
            head = "language English<asr_text>"
            body = super().generate(
                audio, prefix[len(head) :] if prefix.startswith(head) else prefix, max_tokens
            )
            return body if prefix.startswith(head) else head + body

    def make() -> R2T2Stream:
        return R2T2Stream(Tagged(), StreamOptions(), "", decoder_factory=Tagged)

    audio = speech(120)
    undisturbed = run_with_handovers(make, audio, [], STEP)
    run = run_with_handovers(make, audio, [60000, 90000], STEP)
    assert run.committed == undisturbed.committed and run.final.text == undisturbed.final.text
    assert "language" not in run.final.text and run.final.language == "English"


def make_endpointed() -> EndpointedStream:
    return EndpointedStream(SpeechCountingDecoder, StreamOptions(), EndpointOptions(), LevelVad(), "English")


@pytest.mark.parametrize("cut_frames", [[20], [60], [100], [130], [40, 41, 150]])
def test_a_replaced_endpointed_stream_continues_its_open_segment(cut_frames):
    audio = frames((31, False), (63, True), (37, False), (31, True), (19, False))
    undisturbed = run_with_handovers(make_endpointed, audio, [], 512 * 3)
    run = run_with_handovers(make_endpointed, audio, [f * 512 for f in cut_frames], 512 * 3)
    assert run.committed == undisturbed.committed
    assert run.final.text == undisturbed.final.text
    ends = [(round(e.start_s, 6), round(e.end_s, 6), e.text) for e in run.speech_ends]
    assert ends == [(round(e.start_s, 6), round(e.end_s, 6), e.text) for e in undisturbed.speech_ends]
    assert len({e.segment_id for e in run.speech_ends}) == 2


@pytest.mark.parametrize("cut_frames", [[200], [289], [291], [292], [250, 300]])
def test_a_replaced_stream_splits_long_talk_where_an_undisturbed_one_does(cut_frames):
    """The split at a short pause past ``segment_split_seconds`` depends on how long the open segment is: a
    replacement resumed before, at or just after the split frame (291) splits at the same pause."""
    audio = talk_with_short_pauses(6)
    undisturbed = run_with_handovers(make_endpointed, audio, [], 512 * 3)
    assert len(undisturbed.speech_ends) == 2  # split at the pause after 8 s, then the end of the talk
    run = run_with_handovers(make_endpointed, audio, [f * 512 for f in cut_frames], 512 * 3)
    assert run.committed == undisturbed.committed and run.final.text == undisturbed.final.text
    ends = [(round(e.start_s, 6), round(e.end_s, 6), e.text) for e in run.speech_ends]
    assert ends == [(round(e.start_s, 6), round(e.end_s, 6), e.text) for e in undisturbed.speech_ends]


def test_without_a_window_a_stream_rolls_at_the_tower_limit_instead_of_ending():
    stream = R2T2Stream(
        WordReader(),
        StreamOptions(chunk_size_ms=2000),
        "English",
        max_samples=20 * 16000,
        decoder_factory=WordReader,
        auto_roll=True,
    )
    audio = speech(600)  # 60 s: three times the limit
    committed = ""
    for start in range(0, audio.size, 32000):
        committed += "".join(
            e.text for e in stream.push(audio[start : start + 32000]) if isinstance(e, Delta)
        )
        assert stream._accum_samples <= 20 * 16000
    final = stream.finish()
    assert final.text == " ".join(word(i) for i in range(600))
    assert final.text.startswith(committed) and len(committed.split()) > 550


class ContextLimited(WordReader):
    """Refuses a prompt of more than ``limit`` words (audio or text), as the thinker context does."""

    limit = 120

    def generate(self, audio: np.ndarray, prefix: str, max_tokens: int) -> str:
        words = audio.size // 1600 + len(prefix.split())
        if words > self.limit:
            raise PromptOverflow(words, self.limit, audio.size // 1600, len(prefix.split()))
        return super().generate(audio, prefix, max_tokens)


def test_a_full_thinker_context_rolls_the_stream_and_text_only_grows():
    stream = R2T2Stream(
        ContextLimited(), StreamOptions(), "English", decoder_factory=ContextLimited, auto_roll=True
    )
    audio = speech(900)  # 90 s
    committed = ""
    for start in range(0, audio.size, STEP):
        committed += "".join(e.text for e in stream.push(audio[start : start + STEP]) if isinstance(e, Delta))
    final = stream.finish()
    assert final.text == " ".join(word(i) for i in range(900))
    assert final.text.startswith(committed) and len(committed.split()) > 850


def test_an_overflow_that_rolling_cannot_fix_names_the_context_text():
    class Hopeless(FakeTokenizer):
        def generate(self, audio: np.ndarray, prefix: str, max_tokens: int) -> str:
            raise PromptOverflow(2100, 2048, 20, 0)

    stream = R2T2Stream(Hopeless(), StreamOptions(), "English", decoder_factory=Hopeless, auto_roll=True)
    with pytest.raises(UsageError) as raised:
        for start in range(0, 64000, STEP):
            stream.push(speech(40)[start : start + STEP])
    assert "2080 for the context" in raised.value.message and "shorten the context text" in raised.value.fix


def test_the_overflow_of_long_audio_names_the_audio_not_a_context_that_was_never_given():
    error = PromptOverflow(2049, 2048, 1600, 400)
    assert "1600 for audio, 400 for the text decoded so far, 49 for the context" in error.message
    assert "endpointing" in error.fix and "context" not in error.fix.split(":")[0]


def test_segment_ids_and_times_of_a_replaced_endpointed_stream_match():
    audio = frames((10, False), (40, True), (20, False), (40, True), (20, False))
    undisturbed = run_with_handovers(make_endpointed, audio, [], 512 * 2)
    run = run_with_handovers(make_endpointed, audio, [30 * 512, 80 * 512], 512 * 2)
    assert [e.segment_id for e in run.speech_ends] == [0, 1]
    assert [isinstance(e, SpeechEnd) for e in run.events].count(True) == 2
    assert run.final.segments == undisturbed.final.segments


def test_a_stream_replaced_while_a_flush_waits_flushes_the_ended_segment_exactly_once():
    """A segment that ended in a push that decoded waits for its flush; a replacement resumed then takes the
    ended segment (all its audio as context) and flushes it at its first push."""
    audio = frames((31, False), (63, True), (37, False), (31, True), (19, False))
    step = 5120  # 320 ms pushes (a longer push is a backlog: catch-up decodes it at its end, after any flush)
    probe = make_endpointed()
    waiting = []
    for at in range(0, audio.size, step):
        probe.push(audio[at : at + step])
        if probe.resume_point().state.get("ended"):
            waiting.append(at + step)
    assert waiting  # the case is reached (the first segment ends in a push that decoded)
    undisturbed = run_with_handovers(make_endpointed, audio, [], step)
    for cut in waiting:
        run = run_with_handovers(make_endpointed, audio, [cut], step)
        assert run.committed == undisturbed.committed and run.final.text == undisturbed.final.text
        ends = [(e.segment_id, round(e.start_s, 6), round(e.end_s, 6), e.text) for e in run.speech_ends]
        assert ends == [
            (e.segment_id, round(e.start_s, 6), round(e.end_s, 6), e.text) for e in undisturbed.speech_ends
        ]
        segments = [(s.text, round(s.start_s, 6), round(s.end_s, 6)) for s in run.final.segments]
        assert segments == [
            (s.text, round(s.start_s, 6), round(s.end_s, 6)) for s in undisturbed.final.segments
        ]


class SmoothedLevelVad:
    """A VAD with memory, as Silero has: the probability follows each frame's level through a leaky average, so
    what it says of a frame depends on the frames before it and on where the frames fall in the audio."""

    def __init__(self) -> None:
        self.level = 0.0

    def process(self, frame: np.ndarray) -> float:
        self.level = 0.4 * self.level + 0.6 * float(np.count_nonzero(frame)) / frame.size
        return self.level

    def snapshot(self) -> str:
        return repr(self.level)

    def restore(self, snapshot: str) -> None:
        self.level = float(snapshot)


def make_endpointed_with_memory() -> EndpointedStream:
    return EndpointedStream(
        SpeechCountingDecoder, StreamOptions(), EndpointOptions(), SmoothedLevelVad(), "English"
    )


def runs(*lengths: tuple[int, bool]) -> np.ndarray:
    return np.concatenate([np.full(n, 0.1 if speech else 0.0, np.float32) for n, speech in lengths])


# Speech and pauses whose edges fall inside VAD frames, a seed trimmed to its 2 s limit (so segments do not
# start on a frame edge), a pause just long enough to end speech, a quick restart, and talk that runs on past
# segment_split_seconds with short pauses.
UNEVEN_TALK = runs(
    (40_100, False), (41_003, True), (6_100, False), (30_411, True), (9_050, False), (23_999, True),
    *[(30_517, True), (2_611, False)] * 5, (17_000, True), (21_000, False),
)  # fmt: skip


@pytest.mark.parametrize("step", [4000, 16000])
def test_a_replacement_hears_the_audio_exactly_as_the_dead_stream_did(step):
    """Its VAD picks up the dead stream's state on the same frame grid: a replacement resumed after any push
    ends and splits every segment on the same sample and decodes the same audio."""
    undisturbed = run_with_handovers(make_endpointed_with_memory, UNEVEN_TALK, [], step)
    expected = [
        (e.segment_id, round(e.start_s, 6), round(e.end_s, 6), e.text) for e in undisturbed.speech_ends
    ]
    assert len(expected) == 4  # a quick restart and a split among them
    for cut in range(step, UNEVEN_TALK.size, step):
        run = run_with_handovers(make_endpointed_with_memory, UNEVEN_TALK, [cut], step)
        ends = [(e.segment_id, round(e.start_s, 6), round(e.end_s, 6), e.text) for e in run.speech_ends]
        assert (cut, ends) == (cut, expected)
        assert (cut, run.committed, run.final.text) == (cut, undisturbed.committed, undisturbed.final.text)


def test_a_resume_point_that_does_not_fit_its_context_is_refused():
    stream = make_endpointed_with_memory()
    for start in range(0, 60_000, 4000):
        stream.push(UNEVEN_TALK[start : start + 4000])
    point = stream.resume_point()
    assert "segment" in point.state and point.context_samples > point.state["segment"]["decoded"] > 0
    short = UNEVEN_TALK[point.start_sample : point.start_sample + point.state["segment"]["decoded"] - 1]
    with pytest.raises(UsageError) as refused:
        make_endpointed_with_memory().resume(short, point.state)
    assert "does not fit its context" in refused.value.message
