"""The Parakeet-TDT engine end to end from WAV against the transformers 5.23 reference fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from parakeet_fixtures import CLIPS, MODELS, audio_path, expected, model_dir

from inference.audio.io import load_audio_file
from inference.engine import load_engine
from inference.errors import BackendError, UsageError
from inference.families.parakeet_tdt.engine import ParakeetEngine, check_weight_budget
from inference.families.parakeet_tdt.options import DecodeMode
from inference.families.parakeet_tdt.text import token_timestamps
from tests.blas_threads import numpy_blas_threads, recording_blas_threads

SECONDS_PER_FRAME = 0.08


@pytest.fixture(scope="module", params=MODELS)
def engine(request: pytest.FixtureRequest) -> Iterator[tuple[str, ParakeetEngine]]:
    eng = load_engine(model_dir(request.param), backend="cpu", threads=2)
    assert isinstance(eng, ParakeetEngine)
    yield request.param, eng
    eng.close()


def _audio(clip: str) -> np.ndarray:
    return load_audio_file(audio_path(clip))


def _assert_words_sane(words, text: str, audio_s: float) -> None:  # type: ignore[no-untyped-def]
    assert " ".join(w.text for w in words) == text
    assert all(0.0 <= w.start_s <= w.end_s <= audio_s + 0.08 for w in words)
    for prev, word in zip(words, words[1:], strict=False):
        assert prev.end_s <= word.start_s + 1e-9


@pytest.mark.parametrize("clip", CLIPS)
def test_full_context_matches_reference(engine, clip: str) -> None:  # type: ignore[no-untyped-def]
    model, eng = engine
    ref = expected(model)["clips"][clip]
    audio = _audio(clip)
    assert audio.size == ref["num_samples"]
    decoded = eng.decode(audio)
    assert decoded.mode is DecodeMode.FULL_CONTEXT
    tokens = decoded.spans[0].tokens
    assert [t.token_id for t in tokens] == ref["token_ids"]
    assert [t.frame for t in tokens] == ref["token_frames"]
    assert [t.duration for t in tokens] == ref["token_durations"]
    got = token_timestamps(tokens, eng.tokenizer, SECONDS_PER_FRAME)
    assert [g["token"] for g in got] == [h["token"] for h in ref["hf_token_timestamps"]]
    for g, h in zip(got, ref["hf_token_timestamps"], strict=True):
        assert g["start"] == pytest.approx(h["start"], abs=1e-9) and g["end"] == pytest.approx(
            h["end"], abs=1e-9
        )

    transcript = eng.transcribe(audio)
    assert transcript.text == ref["text"]
    assert transcript.token_ids == ref["token_ids"]
    assert transcript.language is None
    assert transcript.timing is not None and transcript.timing.audio_s == pytest.approx(audio.size / 16000)
    _assert_words_sane(transcript.words, transcript.text, audio.size / 16000)


def test_long_form_matches_windowed_reference(engine) -> None:  # type: ignore[no-untyped-def]
    model, eng = engine
    ref = expected(model)["long_form"]
    audio = _audio("long")
    decoded = eng.decode(
        audio, audio_chunk_mode="fixed"
    )  # session defaults: center 2 s, left 10 s, right 2 s
    assert (ref["center_s"], ref["left_s"], ref["right_s"]) == (2.0, 10.0, 2.0)
    assert decoded.mode is DecodeMode.LONG_FORM
    tokens = decoded.spans[0].tokens
    assert [t.token_id for t in tokens] == ref["token_ids"]
    assert [t.frame for t in tokens] == ref["token_frames"]
    assert [t.duration for t in tokens] == ref["token_durations"]
    transcript = eng.transcribe(audio, audio_chunk_mode="fixed")
    assert transcript.text == ref["text"]
    _assert_words_sane(transcript.words, transcript.text, audio.size / 16000)
    assert transcript.words[-1].end_s <= ref["audio_end_frame"] * SECONDS_PER_FRAME + 1e-9


def test_token_budget_is_carried_across_windows(engine) -> None:  # type: ignore[no-untyped-def]
    model, eng = engine
    full_ref = expected(model)["clips"]["medium"]["token_ids"]
    assert eng.transcribe(_audio("medium"), max_tokens=3).token_ids == full_ref[:3]
    long_ref = expected(model)["long_form"]["token_ids"]
    budget = len(long_ref) // 2
    got = eng.transcribe(_audio("long"), audio_chunk_mode="fixed", max_tokens=budget).token_ids
    assert got == long_ref[:budget]


def test_vad_mode_decodes_speech_spans_independently(engine) -> None:  # type: ignore[no-untyped-def]
    _model, eng = engine
    audio = _audio("long")
    transcript = eng.transcribe(audio, audio_chunk_mode="vad", audio_chunk_duration_sec=4.0)
    segments = transcript.segments
    assert segments, "the long clip has six sentences of speech"
    assert transcript.text == " ".join(s.text for s in segments)
    duration = audio.size / 16000
    for seg in segments:
        assert 0.0 <= seg.start_s < seg.end_s <= duration
        assert seg.end_s - seg.start_s <= 4.0 + 1e-9
        assert all(seg.start_s - 1e-9 <= w.start_s <= w.end_s <= seg.end_s for w in seg.words)
    for prev, seg in zip(segments, segments[1:], strict=False):
        assert prev.end_s <= seg.start_s
    assert [w for s in segments for w in s.words] == transcript.words
    _assert_words_sane(transcript.words, transcript.text, duration)
    # The silent stretches (1.5 s and 2.5 s pauses) are not decoded.
    covered = sum(s.end_s - s.start_s for s in segments)
    assert covered < duration - 3.0
    # Each span equals a full-context decode of the same samples (a fresh decoder per span).
    first = segments[0]
    start, end = round(first.start_s * 16000), round(first.end_s * 16000)
    alone = eng.transcribe(audio[start:end], audio_chunk_mode="none")
    assert alone.text.strip() == first.text


def test_offline_mode_auto_switches_on_the_threshold() -> None:
    model = "tiny_b"
    audio = _audio("long")  # 30.0014 s: just above the default 30 s threshold
    long_ref = expected(model)["long_form"]["token_ids"]
    full_ref = expected(model)["clips"]["long"]["token_ids"]
    with load_engine(
        model_dir(model), session_options={"offline_mode": "auto"}, backend="cpu", threads=2
    ) as eng:
        decoded = eng.decode(audio)
        assert decoded.mode is DecodeMode.LONG_FORM
        assert [t.token_id for t in decoded.spans[0].tokens] == long_ref
        assert eng.transcribe(audio, audio_chunk_mode="none").token_ids == full_ref
    options = {"offline_mode": "auto", "audio_chunk_threshold_sec": 30.01}
    with load_engine(model_dir(model), session_options=options, backend="cpu", threads=2) as eng:
        assert eng.decode(audio).mode is DecodeMode.FULL_CONTEXT
        assert eng.transcribe(audio, audio_chunk_mode="fixed").token_ids == long_ref


def test_edge_inputs(engine) -> None:  # type: ignore[no-untyped-def]
    _model, eng = engine
    for audio in (np.zeros(0, np.float32), np.zeros(16000, np.float32)):
        for mode in ("auto", "fixed", "vad", "none"):
            transcript = eng.transcribe(audio, audio_chunk_mode=mode)
            assert (transcript.text, transcript.words, transcript.token_ids) == ("", [], [])
    speech = _audio("short")
    tiny = speech[8000:8800]  # 0.05 s of speech: one encoder frame
    transcript = eng.transcribe(tiny)
    assert len(transcript.token_ids) <= 10  # the budget of one frame
    _assert_words_sane(transcript.words, eng.tokenizer.decode(transcript.token_ids), 0.05)
    with_nan = speech.copy()
    with_nan[100:200] = np.nan
    with pytest.raises(UsageError, match="NaN or infinite"):  # both families refuse them (the contract)
        eng.transcribe(with_nan)


def test_request_errors(engine) -> None:  # type: ignore[no-untyped-def]
    _model, eng = engine
    with pytest.raises(UsageError, match="mono"):
        eng.transcribe(np.zeros((100, 2), np.float32))
    with pytest.raises(UsageError, match="unknown request option"):
        eng.transcribe(np.zeros(100, np.float32), beam_size=4)
    with pytest.raises(UsageError, match="Phonon-2"):
        eng.transcribe(np.zeros(100, np.float32), hotwords="captioneer")


def test_session_errors() -> None:
    with pytest.raises(UsageError, match="weight_type"):
        load_engine(model_dir("tiny_a"), session_options={"weight_type": "q4_0"}, backend="cpu")
    with pytest.raises(UsageError, match="streaming_attention_mode"):
        load_engine(
            model_dir("tiny_a"), session_options={"streaming_attention_mode": "chunked"}, backend="cpu"
        )
    check_weight_budget(3 << 20, 3)
    with pytest.raises(BackendError, match="weight_context_mb=3"):
        check_weight_budget((3 << 20) + 1, 3)


def test_keep_language_tags_matches_reference(engine) -> None:  # type: ignore[no-untyped-def]
    model, eng = engine
    for clip in ("medium", "quiet"):  # tiny_a emits <unk> (a special token) on these clips
        ref = expected(model)["clips"][clip]
        audio = _audio(clip)
        assert eng.transcribe(audio, keep_language_tags=True).text == ref["text_with_special"]
    if model == "tiny_a":
        assert ref["text_with_special"] != ref["text"]


def test_encoder_graph_arena_bounds_full_context_memory() -> None:
    audio = _audio("long")
    # tiny_a needs ~17 MiB for the 30 s clip at once and 6-8 MiB per 14 s long-form window
    with load_engine(
        model_dir("tiny_a"), backend="cpu", threads=2, session_options={"encoder_graph_arena_mb": 10}
    ) as small:
        with pytest.raises(UsageError, match="encoder_graph_arena_mb=10") as caught:
            small.transcribe(audio)
        assert "long_form" in caught.value.fix
        # shorter windows fit the same arena (older window graphs are evicted to stay within it)
        # and give the reference long-form result
        assert (
            small.transcribe(audio, audio_chunk_mode="fixed").text == expected("tiny_a")["long_form"]["text"]
        )
        assert 0 < small.encoder.graph_buffer_bytes <= 10 * 2**20


def test_features_run_on_one_blas_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """A second BLAS thread for the small mel product would leave numpy's OpenBLAS worker spinning on a core
    through the encoder that follows; the process's BLAS setting is back afterwards."""
    from inference.families.parakeet_tdt import engine as engine_module

    seen: list[set[int]] = []
    recording = recording_blas_threads(engine_module.compute_features, seen)
    monkeypatch.setattr(engine_module, "compute_features", recording)
    with load_engine(model_dir("tiny_a"), backend="cpu", threads=2) as engine:
        before = numpy_blas_threads()
        engine.transcribe(_audio(CLIPS[0]))
        assert seen and all(pools == {1} for pools in seen), seen
        assert numpy_blas_threads() == before
