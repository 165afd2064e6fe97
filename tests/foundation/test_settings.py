"""Settings persist atomically, survive damage and keep unknown keys."""

from __future__ import annotations

import json

from app.settings import Settings, SettingsStore
from inference.paths import AppPaths


def _store() -> SettingsStore:
    return SettingsStore(AppPaths.from_environment().ensure())


def test_defaults_when_missing() -> None:
    assert _store().load() == Settings()


def test_round_trip_and_unknown_keys_preserved() -> None:
    store = _store()
    store.path.write_text(json.dumps({"backend": "cuda", "future_feature": {"a": 1}}))
    settings = store.load()
    assert settings.backend == "cuda" and settings.extra == {"future_feature": {"a": 1}}
    settings.threads = 4
    store.save(settings)
    saved = json.loads(store.path.read_text())
    assert saved["threads"] == 4 and saved["future_feature"] == {"a": 1}
    assert store.load() == settings


def test_damaged_file_is_kept_aside() -> None:
    store = _store()
    store.path.write_text("{not json")
    assert store.load() == Settings()
    assert store.path.with_suffix(".json.bad").read_text() == "{not json"
    assert not store.path.exists()


def test_wrong_types_fall_back_to_defaults() -> None:
    store = _store()
    store.path.write_text(json.dumps({"overlay_lines": "three", "overlay_opacity": 1}))
    settings = store.load()
    assert settings.overlay_lines == 2 and settings.overlay_opacity == 1.0


def test_a_plaintext_token_from_an_old_version_is_dropped_and_not_logged(tmp_path, caplog) -> None:  # type: ignore[no-untyped-def]
    import json as _json

    from app.settings import SettingsStore
    from inference.paths import AppPaths

    paths = AppPaths.from_environment().ensure()
    store = SettingsStore(paths)
    store.path.parent.mkdir(parents=True, exist_ok=True)
    store.path.write_text(_json.dumps({"hf_token": "hf_secret123", "overlay_lines": 3}))
    settings = store.load()
    assert settings.overlay_lines == 3 and "hf_token" not in settings.extra
    store.save(settings)
    assert "hf_secret123" not in store.path.read_text()
    assert "Hugging Face token" in caplog.text and "hf_secret123" not in caplog.text


def test_parakeet_int8_weights_pick_the_cpu_backend_and_touch_no_other_family() -> None:
    from app.model_choices import weight_choice

    int8 = Settings(parakeet_weights="int8", backend="cuda")
    assert weight_choice("parakeet_tdt", "cuda", int8) == (
        "cpu",
        (("conv_weight_type", "int8"), ("weight_type", "int8")),
    )
    assert weight_choice("confucius4_r2t2", "cuda", int8) == ("cuda", ())
    assert weight_choice("parakeet_tdt", "auto", Settings()) == ("auto", ())
    assert weight_choice("parakeet_tdt", "auto", None) == ("auto", ())
    assert Settings.from_dict(Settings(parakeet_weights="int8").to_dict()).parakeet_weights == "int8"


def test_the_window_captions_confucius4_r2t2_by_utterance() -> None:
    """One undivided R2T2 segment gave one paragraph and subtitles spread over every pause; endpointed streams
    give a segment (paragraph, cues) per utterance."""
    from app.model_choices import live_options
    from inference.engine import load_engine
    from inference.families.confucius4_r2t2.endpointing import EndpointedStream
    from tests.confucius4_r2t2.r2t2_fixtures import HF_CHECKPOINT

    assert live_options("parakeet_tdt") == ()
    engine = load_engine(HF_CHECKPOINT, session_options=dict(live_options("confucius4_r2t2")))
    try:
        assert isinstance(engine.open_stream(), EndpointedStream)
    finally:
        engine.close()


def test_the_window_the_cli_and_live_open_the_same_r2t2_stream() -> None:
    """One live default (issue 43, tests/bench/README.md "One live default"): the window names its options, the
    CLI and /live open the engine's defaults; both give an endpointed stream with equal chunking, LSP and VAD
    options, so one benchmark run stands for all three front ends."""
    from app.model_choices import live_options
    from inference.engine import load_engine
    from inference.families.confucius4_r2t2.endpointing import EndpointedStream
    from tests.confucius4_r2t2.r2t2_fixtures import HF_CHECKPOINT

    streams = []
    for session_options in (dict(live_options("confucius4_r2t2")), {}):
        engine = load_engine(HF_CHECKPOINT, session_options=session_options)
        try:
            stream = engine.open_stream()
            assert isinstance(stream, EndpointedStream)
            streams.append((stream.options, stream.endpoints, engine.session.stream_cache))
            stream.cancel()
        finally:
            engine.close()
    assert streams[0] == streams[1]
