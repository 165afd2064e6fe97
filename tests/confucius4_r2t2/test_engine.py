"""The offline engine end to end on the fixture checkpoints against the transformers 5.23 greedy cases."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from r2t2_fixtures import (
    FIXTURE_DIR,
    checkpoint_variant,
    load_audio,
    load_expected_arrays,
    load_expected_meta,
)

from inference.engine import EngineRequest, load_engine
from inference.errors import UsageError
from inference.families.confucius4_r2t2.engine import R2T2Engine, create_engine
from inference.families.confucius4_r2t2.postprocess import parse_asr_output, truncate_at_pipe
from inference.families.confucius4_r2t2.spans import join_span_texts
from tests.blas_threads import numpy_blas_threads, recording_blas_threads

FAMILY = "confucius4_r2t2"
# (fixture checkpoint, its n_window_infer, thinker_weight_type): the HF checkpoint is f32, so native is f32
# end to end; the legacy one is bf16 on disk and runs both as f32 and natively (bf16 thinker).
ENGINES = [
    ("checkpoint_hf", 800, "native"),
    ("checkpoint_legacy", 400, "f32"),
    ("checkpoint_legacy", 400, "native"),
]
MARGIN_GATE = 0.5  # reduced precision must agree on every step before the reference's first margin below this


def offline_cases(window: int) -> list[str]:
    """Fixture cases of the offline path (no text prefix) for one window."""
    return [
        name
        for name, info in load_expected_meta()["cases"].items()
        if info["window"] == window and not info["prefix"]
    ]


def case_input(name: str) -> tuple[np.ndarray, dict[str, object]]:
    info = load_expected_meta()["cases"][name]
    samples = load_audio()[info["clip"]]
    if "span" in info:
        start, end = info["span"]
        samples = samples[start:end]
    options: dict[str, object] = {}
    if info["language"]:
        options["language"] = info["language"]
    if info["context"]:
        options["context"] = info["context"]
    return samples, options


def expected_output(name: str) -> tuple[list[int], str]:
    """Reference greedy ids without eos, and the offline text the spec derives from the reference's text."""
    meta = load_expected_meta()
    info = meta["cases"][name]
    ids = [
        i
        for i in load_expected_arrays()[f"case/{name}/generated_ids"].tolist()
        if i not in meta["eos_token_ids"]
    ]
    return ids, truncate_at_pipe(parse_asr_output(info["text"], info["language"] or "").text)


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("engines")
    made: dict[tuple[str, int, str], R2T2Engine] = {}

    def get(name: str, window: int, weight_type: str) -> R2T2Engine:
        key = (name, window, weight_type)
        if key not in made:
            path = checkpoint_variant(FIXTURE_DIR / name, root / f"{name}-{window}-{weight_type}", window)
            request = EngineRequest(path, FAMILY, {"thinker_weight_type": weight_type}, "cpu", 2)
            made[key] = create_engine(request)
        return made[key]

    yield get
    for engine in made.values():
        engine.close()


@pytest.mark.parametrize(("name", "window", "weight_type"), ENGINES)
def test_greedy_ids_and_text_match_the_reference(engines, name: str, window: int, weight_type: str) -> None:
    engine = engines(name, window, weight_type)
    assert engine.thinker.storage_type == (
        "bf16" if (name, weight_type) == ("checkpoint_legacy", "native") else "f32"
    )
    cases = offline_cases(window)
    assert {c.split("/")[-1] for c in cases} == {"auto", "forced", "context"}
    for case in cases:
        samples, options = case_input(case)
        transcript = engine.transcribe(samples, max_tokens=20, **options)
        ids, text = expected_output(case)
        assert transcript.token_ids == ids, case
        assert transcript.text == text, case
        assert transcript.language == ("English" if options.get("language") else None), case


def test_long_clip_runs_as_two_30s_spans(engines) -> None:
    engine = engines("checkpoint_hf", 800, "native")
    transcript = engine.transcribe(load_audio()["clip_long"], max_tokens=20)
    spans = [expected_output(f"clip_long_span{i}/w800/auto") for i in (0, 1)]
    assert transcript.token_ids == spans[0][0] + spans[1][0]
    assert transcript.text == join_span_texts([spans[0][1], spans[1][1]])
    assert all(text for _, text in spans)  # both spans print text, so both make a segment
    assert [(s.start_s, round(s.end_s, 4)) for s in transcript.segments] == [(0.0, 30.0), (30.0, 35.0)]


def test_default_budget_comes_from_generation_config(engines) -> None:
    engine = engines("checkpoint_hf", 800, "native")  # its generation_config says max_new_tokens 20
    samples, _ = case_input("clip_a/w800/auto")
    assert engine.transcribe(samples).token_ids == expected_output("clip_a/w800/auto")[0]
    assert len(engine.transcribe(samples, max_tokens=3).token_ids) == 3


def test_request_options_use_the_spec_names_and_aliases(engines) -> None:
    engine = engines("checkpoint_hf", 800, "native")
    samples, options = case_input("clip_a/w800/context")
    by_alias = engine.transcribe(samples, max_tokens=20, prompt=options["context"])
    assert by_alias.token_ids == expected_output("clip_a/w800/context")[0]
    iso = engine.transcribe(samples, max_tokens=20, language="en")
    assert iso.token_ids == expected_output("clip_a/w800/forced")[0]
    with pytest.raises(UsageError, match="not supported"):
        engine.transcribe(samples, language="Klingon")
    with pytest.raises(UsageError, match="unknown request option"):
        engine.transcribe(samples, temperature=0.5)


def test_empty_and_silent_audio_have_defined_results(engines) -> None:
    engine = engines("checkpoint_hf", 800, "native")
    empty = engine.transcribe(np.zeros(0, np.float32))
    assert (empty.text, empty.language, empty.token_ids, empty.segments) == ("", None, [], [])
    silent = [engine.transcribe(np.zeros(16000, np.float32), max_tokens=5) for _ in range(2)]
    assert silent[0].token_ids == silent[1].token_ids and len(silent[0].token_ids) <= 5
    with pytest.raises(UsageError, match="mono"):
        engine.transcribe(np.zeros((2, 100), np.float32))
    with pytest.raises(UsageError, match="NaN"):
        engine.transcribe(np.full(100, np.nan, np.float32))


def test_load_engine_detects_the_family(tmp_path: Path) -> None:
    path = checkpoint_variant(FIXTURE_DIR / "checkpoint_legacy", tmp_path / "legacy", 400)
    engine = load_engine(path, backend="cpu", threads=1)
    try:
        assert engine.family == FAMILY
        samples, options = case_input("clip_short/w400/forced")
        assert (
            engine.transcribe(samples, max_tokens=20, **options).token_ids
            == expected_output("clip_short/w400/forced")[0]
        )
    finally:
        engine.close()


@pytest.mark.parametrize("weight_type", ["f16", "q8_0", "q6_k"])
def test_reduced_precision_agrees_while_margins_are_clear(engines, weight_type: str) -> None:
    """Measured on all 8 window-800 cases: f16, q8_0, q6_k (and bf16) identical everywhere; q4_k diverges once,
    at a step whose reference margin is 0.16. Asserted only up to the first reference margin < 0.5."""
    engine = engines("checkpoint_hf", 800, weight_type)
    assert engine.thinker.storage_type == weight_type
    for case in offline_cases(800):
        samples, options = case_input(case)
        got = engine.transcribe(samples, max_tokens=20, **options).token_ids
        ids, _ = expected_output(case)
        margins = load_expected_arrays()[f"case/{case}/margins"]
        clear = next((i for i, m in enumerate(margins) if m < MARGIN_GATE), len(margins))
        assert got[:clear] == ids[:clear], case


def test_a_clip_fed_in_blocks_gives_the_whole_clip_transcript(engines) -> None:
    """A streamed job (one pass, each 30 s span decoded once full) gives ``transcribe``'s transcript."""
    from inference.offline_jobs import open_offline_job

    engine = engines("checkpoint_hf", 800, "native")
    audio = load_audio()["clip_long"]
    whole = engine.transcribe(audio, max_tokens=20).to_json()
    whole.pop("timing")
    for size in (5, 7919, 16000 * 30, 16000 * 31):
        job = open_offline_job(engine, max_tokens=20)
        assert job.passes == 1
        for start in range(0, audio.size, size):
            job.feed(audio[start : start + size])
        job.end_pass()
        got = job.finish().to_json()
        got.pop("timing")
        assert got == whole, size


def test_the_mel_runs_on_one_blas_thread_offline_and_live(engines, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second BLAS thread for the frontend's small mel product would leave numpy's OpenBLAS worker spinning
    on a core through the tower and the thinker that follow (on 2 cores ~70 ms of a live push's tower);
    the process's BLAS setting is back afterwards."""
    from inference.audio import whisper_mel

    seen: list[set[int]] = []
    recording = recording_blas_threads(whisper_mel.log10_mel_of_padded, seen)
    monkeypatch.setattr(whisper_mel, "log10_mel_of_padded", recording)
    engine = engines("checkpoint_hf", 800, "native")
    samples, _ = case_input("clip_a/w800/auto")
    before = numpy_blas_threads()
    engine.transcribe(samples, max_tokens=3)
    offline = len(seen)
    stream = engine.open_stream(max_tokens=3, rolling_window_seconds=30)  # no VAD: every chunk decodes
    for start in range(0, samples.size, 16000):
        stream.push(samples[start : start + 16000])
    stream.finish()
    assert offline and len(seen) > offline
    assert all(pools == {1} for pools in seen), seen
    assert numpy_blas_threads() == before
