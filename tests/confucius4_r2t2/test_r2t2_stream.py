"""The R2T2 live stream around the LSP state machine: chunk arithmetic, misuse, options and the engine wiring."""

from __future__ import annotations

import numpy as np
import pytest
from fake_decoder import ScriptedDecoder
from r2t2_fixtures import HF_CHECKPOINT, checkpoint_variant

from inference.contract import Stream
from inference.engine import EngineRequest
from inference.errors import UsageError
from inference.families.confucius4_r2t2.chunk_decoder import max_stream_samples
from inference.families.confucius4_r2t2.engine import CPU_BF16_TOWER, CPU_CHUNK_MS, R2T2Engine, create_engine
from inference.families.confucius4_r2t2.lsp import StreamOptions
from inference.families.confucius4_r2t2.streaming import R2T2Stream
from inference.models.spec import load_family_spec
from inference.native import Backend, StorageType

FAMILY = "confucius4_r2t2"


def stream_with(answers: list[str], **options) -> tuple[R2T2Stream, ScriptedDecoder]:
    decoder = ScriptedDecoder(answers)
    return R2T2Stream(decoder, StreamOptions(**options), "English"), decoder


# ------------------------------------------------------------------ chunk arithmetic


def test_14_0719_s_at_320_ms_makes_44_decode_calls_including_the_final_flush():
    samples = round(14.0719 * 16000)  # 225150
    stream, decoder = stream_with(["word"] * 44)
    rng = np.random.default_rng(0)
    audio = np.zeros(samples, dtype=np.float32)
    start = 0
    while start < samples:  # uneven pushes of at most a chunk: chunking depends only on the sample count
        size = int(rng.integers(1, 5121))
        stream.push(audio[start : start + size])
        start += size
    assert len(decoder.calls) == 43  # complete chunks only while pushing
    stream.finish()
    assert stream.decode_calls == 44
    lengths = [size for size, _, _ in decoder.calls]
    assert lengths == [5120 * k for k in range(1, 44)] + [samples]
    assert {budget for _, _, budget in decoder.calls} == {32}


@pytest.mark.parametrize(
    ("chunk_ms", "samples"),
    [(320.0, 5120), (80.0, 1280), (1000.0, 16000), (100.03125, 1601), (100.03, 1600), (2000.0, 32000)],
)
def test_chunk_samples_round_half_away_from_zero(chunk_ms: float, samples: int):
    assert StreamOptions(chunk_size_ms=chunk_ms).chunk_samples == samples


def test_an_exact_number_of_chunks_needs_no_flush():
    stream, decoder = stream_with(["a"] * 3, chunk_size_ms=80.0)
    for _ in range(3):
        stream.push(np.zeros(1280, dtype=np.float32))
    stream.finish()
    assert len(decoder.calls) == 3


# ------------------------------------------------------------------ misuse


def test_push_and_finish_after_finish_or_cancel_are_errors():
    stream, _ = stream_with([])
    stream.finish()
    with pytest.raises(UsageError, match="push after finish"):
        stream.push(np.zeros(10, np.float32))
    with pytest.raises(UsageError, match="already finished"):
        stream.finish()
    stream, decoder = stream_with([])
    stream.push(np.zeros(100, np.float32))
    stream.cancel()
    stream.cancel()  # idempotent
    with pytest.raises(UsageError, match="push after finish or cancel"):
        stream.push(np.zeros(10, np.float32))
    assert decoder.calls == []


@pytest.mark.parametrize(
    ("pcm", "needle"),
    [
        (np.zeros(100, np.float64), "float32"),
        (np.zeros(100, np.int16), "float32"),
        (np.zeros((2, 100), np.float32), r"\(2, 100\)"),
        (np.zeros((100, 1), np.float32), "1-D"),
        (np.array([0.0, np.nan], np.float32), "NaN"),
        (np.array([np.inf, 0.0], np.float32), "infinite"),
    ],
)
def test_bad_samples_are_rejected_without_touching_the_state(pcm: np.ndarray, needle: str):
    stream, decoder = stream_with(["a"], chunk_size_ms=80.0)
    with pytest.raises(UsageError, match=needle):
        stream.push(pcm)
    stream.push(np.zeros(1280, np.float32))  # the stream still works: the bad push added nothing
    assert [size for size, _, _ in decoder.calls] == [1280]


def test_the_tower_limit_is_a_clear_error():
    limit = max_stream_samples(1500)
    assert limit == 11541 * 160 - 1  # 11540 frames = 1500 tokens = 115.40 s
    decoder = ScriptedDecoder(["a"] * 4)
    stream = R2T2Stream(decoder, StreamOptions(chunk_size_ms=2000.0), "English", max_samples=3 * 32000)
    for _ in range(3):
        stream.push(np.zeros(32000, np.float32))
    with pytest.raises(UsageError, match="limit of 6.00 s"):
        stream.push(np.zeros(32000, np.float32))
    assert len(decoder.calls) == 3
    with pytest.raises(UsageError, match="push after finish"):
        stream.push(np.zeros(10, np.float32))


# ------------------------------------------------------------------ options


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"chunk_size_ms": "79"}, "'chunk_size_ms' must be a number in [80, 2000]"),
        ({"confucius4_r2t2.chunk_size_ms": 2001}, "'chunk_size_ms' must be a number in [80, 2000]"),
        ({"unfixed_chunk_num": -1}, "'unfixed_chunk_num' must be an integer in [0, inf]"),
        ({"unfixed_token_num": "1.5"}, "'unfixed_token_num' must be an integer"),
        ({"max_tokens": 0}, "'max_tokens' must be an integer in [1, inf]"),
        ({"rollback_punctuation": "maybe"}, "'rollback_punctuation' must be true or false"),
        ({"confucius4_r2t2.chunk_size": 320}, "unknown session option 'confucius4_r2t2.chunk_size'"),
    ],
)
def test_session_options_are_validated(options, needle):
    with pytest.raises(UsageError) as err:
        load_family_spec(FAMILY).validate_session_options(options)
    assert needle in str(err.value)


def test_session_options_are_accepted_with_and_without_the_family_prefix():
    spec = load_family_spec(FAMILY)
    out = spec.validate_session_options(
        {
            "confucius4_r2t2.chunk_size_ms": "500",
            "unfixed_token_num": "3",
            "confucius4_r2t2.rollback_punctuation": "yes",
        }
    )
    assert out == {"chunk_size_ms": 500.0, "unfixed_token_num": 3, "rollback_punctuation": True}
    assert StreamOptions.from_options({**spec.defaults("session"), **out}) == StreamOptions(
        500.0, 2, 3, True, 32
    )


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory):
    path = checkpoint_variant(HF_CHECKPOINT, tmp_path_factory.mktemp("stream") / "hf", 800)
    # One unendpointed segment: these tests follow the LSP chunk by chunk.
    session = {"confucius4_r2t2.chunk_size_ms": 500, "unfixed_token_num": 3, "endpointing": False}
    made = create_engine(EngineRequest(path, FAMILY, session, "cpu", 1))
    yield made
    made.close()


def test_the_engine_streams_with_session_defaults_and_per_stream_overrides(engine: R2T2Engine):
    assert engine.capabilities.streaming
    stream = engine.open_stream()
    assert isinstance(stream, Stream)
    assert stream.options == StreamOptions(500.0, 2, 3, False, 32)
    stream.cancel()
    stream = engine.open_stream(
        **{
            "confucius4_r2t2.chunk_size_ms": 1000,
            "max_tokens": 4,
            "language": "en",
            "rollback_punctuation": True,
        }
    )
    assert stream.options == StreamOptions(1000.0, 2, 3, True, 4)
    assert stream.recognizer.forced_language == "English"
    stream.cancel()


def test_a_cpu_engine_streams_in_1000_ms_chunks_unless_the_session_names_a_size(tmp_path):
    """On a CPU every chunk re-prefills the open tower window and the text after it: 320 ms chunks cannot keep
    up on 2 cores, so a CPU engine defaults to CPU_CHUNK_MS; a chosen size (session or stream) wins."""
    path = checkpoint_variant(HF_CHECKPOINT, tmp_path / "hf", 800)
    spec_default = load_family_spec(FAMILY).defaults("session")["chunk_size_ms"]
    assert spec_default == 320.0 and CPU_CHUNK_MS == 1000.0
    with create_engine(EngineRequest(path, FAMILY, {}, "cpu", 1)) as cpu_default:
        assert cpu_default.open_stream().options.chunk_size_ms == CPU_CHUNK_MS
        assert cpu_default.open_stream(chunk_size_ms=640).options.chunk_size_ms == 640.0
    with create_engine(EngineRequest(path, FAMILY, {"chunk_size_ms": 320}, "cpu", 1)) as chosen:
        assert chosen.open_stream().options.chunk_size_ms == 320.0


@pytest.mark.parametrize("bf16_dot", [True, False])
def test_a_cpu_engine_takes_a_bf16_tower_where_the_cpu_has_bf16_products(tmp_path, monkeypatch, bf16_dot):
    """A live push re-runs the open window's tower layers: bf16 matrices cost less there than q8_0 or native bf16
    promoted to f32, where the CPU computes bf16 itself. A session that names a type keeps it."""
    monkeypatch.setattr(Backend, "has_bf16_dot", lambda self: bf16_dot)
    path = checkpoint_variant(HF_CHECKPOINT, tmp_path / "hf", 800)
    with create_engine(EngineRequest(path, FAMILY, {}, "cpu", 1)) as default:
        expected = CPU_BF16_TOWER if bf16_dot else "native"
        assert default.session.tower_weight_type == expected
        assert default.session_options["tower_weight_type"] == expected
        assert default.tower is not None and default.tower.storage is StorageType.parse(expected)
        assert set(default.tower.stored_types()) >= ({"bf16"} if bf16_dot else {"f32"})
    with create_engine(EngineRequest(path, FAMILY, {"tower_weight_type": "q8_0"}, "cpu", 1)) as chosen:
        assert chosen.session.tower_weight_type == "q8_0"


def test_the_engine_rejects_bad_stream_requests(engine: R2T2Engine):
    with pytest.raises(UsageError, match=r"'chunk_size_ms' must be a number in \[80, 2000\]"):
        engine.open_stream(chunk_size_ms=50)
    with pytest.raises(UsageError, match="16000 Hz"):
        engine.open_stream(sample_rate=8000)
    with pytest.raises(UsageError, match="not supported"):
        engine.open_stream(language="Klingon")
    with pytest.raises(UsageError, match="live streams only"):
        engine.transcribe(np.zeros(16000, np.float32), unfixed_token_num=2)


def test_an_engine_stream_decodes_every_chunk_of_the_accumulated_audio(engine: R2T2Engine):
    stream = engine.open_stream(chunk_size_ms=100, max_tokens=3)
    seen: list[int] = []
    decoder = stream.recognizer.decoder
    original = decoder.generate

    def spy(audio, prefix, max_tokens):
        seen.append(audio.size)
        return original(audio, prefix, max_tokens)

    decoder.generate = spy  # type: ignore[method-assign]
    for _ in range(5):
        stream.push(np.zeros(700, np.float32))
    transcript = stream.finish()
    assert seen == [1600, 3200, 3500]
    assert transcript.timing is not None and transcript.timing.audio_s == pytest.approx(3500 / 16000)


def test_endpointing_session_option_splits_the_stream_with_silero(tmp_path):
    from r2t2_fixtures import load_audio, stream_variant

    from inference.contract import Delta, SpeechEnd
    from inference.families.confucius4_r2t2.endpointing import EndpointedStream

    path = stream_variant(HF_CHECKPOINT, tmp_path / "w800", 800)
    engine = create_engine(
        EngineRequest(path, FAMILY, {"endpointing": True, "max_segment_seconds": 6}, "cpu", 1)
    )
    try:
        stream = engine.open_stream(language="English")
        assert isinstance(stream, EndpointedStream)
        clip = load_audio()["clip_a"]
        audio = np.concatenate([clip, np.zeros(16000, np.float32), clip])
        events = stream.push(audio) + stream.flush()  # as the worker does before finish
        transcript = stream.finish()
    finally:
        engine.close()
    ends = [e for e in events if isinstance(e, SpeechEnd)]
    assert len(ends) >= 2 and ends[0].segment_id == 0 and ends[0].end_s <= ends[1].start_s
    assert all(e.end_s - e.start_s <= 6.0 for e in ends)
    assert transcript.text == " ".join(s.text for s in transcript.segments)
    assert [s.text for s in transcript.segments][: len(ends)] == [e.text for e in ends]
    assert all(e.segment_id <= max(x.segment_id for x in ends) + 1 for e in events if isinstance(e, Delta))


def test_the_live_default_is_endpointing_and_a_rolling_window_replaces_it(tmp_path):
    """One live default for the app, the CLI and /live: endpointed segments, so the text re-prefilled with
    every chunk stays bounded. A stream given a rolling window takes it instead, unless the session chose
    endpointing (a conflict); endpointing off gives one segment rolled when full."""
    from inference.families.confucius4_r2t2.endpointing import EndpointedStream

    path = checkpoint_variant(HF_CHECKPOINT, tmp_path / "hf", 800)
    assert load_family_spec(FAMILY).defaults("session")["endpointing"] is True
    with create_engine(EngineRequest(path, FAMILY, {}, "cpu", 1)) as defaults:
        assert isinstance(defaults.open_stream(), EndpointedStream)
        windowed = defaults.open_stream(rolling_window_seconds=16)
        assert isinstance(windowed, R2T2Stream) and windowed.rolling_samples == 16 * 16000
    with create_engine(EngineRequest(path, FAMILY, {"rolling_window_seconds": 16}, "cpu", 1)) as rolling:
        assert isinstance(rolling.open_stream(), R2T2Stream)
    chosen = create_engine(EngineRequest(path, FAMILY, {"endpointing": True}, "cpu", 1))
    with chosen, pytest.raises(UsageError, match="both bound a live stream"):
        chosen.open_stream(rolling_window_seconds=16)
    with create_engine(EngineRequest(path, FAMILY, {"endpointing": False}, "cpu", 1)) as unendpointed:
        stream = unendpointed.open_stream()
        assert isinstance(stream, R2T2Stream) and stream.auto_roll and not stream.rolling_samples
