"""The official ``openai`` client against a real server: files, formats, streaming and its errors."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import openai
import pytest

from tests.server.harness import SAMPLE_1, TEXT_1, two_sentences, wav_bytes


@pytest.fixture
def client(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=f"{base_url}/v1", api_key="not-needed-on-loopback", max_retries=0, timeout=60
    )


def test_models_lists_the_served_models(client: openai.OpenAI) -> None:
    ids = [model.id for model in client.models.list()]
    assert ids == ["demo", "faulty"]


def test_transcription_json_text_and_verbose(client: openai.OpenAI) -> None:
    with SAMPLE_1.open("rb") as audio:
        result = client.audio.transcriptions.create(model="demo", file=audio, language="en", temperature=0.2)
    assert result.text == TEXT_1
    with SAMPLE_1.open("rb") as audio:
        text = client.audio.transcriptions.create(model="demo_model", file=audio, response_format="text")
    assert text.strip() == TEXT_1
    with SAMPLE_1.open("rb") as audio:
        verbose = client.audio.transcriptions.create(
            model="demo",
            file=audio,
            response_format="verbose_json",
            timestamp_granularities=["word", "segment"],
        )
    assert verbose.text == TEXT_1
    assert verbose.language == "en" and 3.9 < verbose.duration < 4.1
    assert [w.word for w in verbose.words] == TEXT_1.split()
    assert all(0 <= w.start <= w.end <= verbose.duration for w in verbose.words)


def test_subtitles(client: openai.OpenAI) -> None:
    with SAMPLE_1.open("rb") as audio:
        srt = client.audio.transcriptions.create(model="demo", file=audio, response_format="srt")
    assert srt.startswith("1\n00:00:0") and "emma quickly" in srt and " --> " in srt
    with SAMPLE_1.open("rb") as audio:
        vtt = client.audio.transcriptions.create(model="demo", file=audio, response_format="vtt")
    assert vtt.startswith("WEBVTT") and "bottle" in vtt


def test_stream_true_gives_deltas_then_done(client: openai.OpenAI, tmp_path: Path) -> None:
    clip = tmp_path / "two.wav"
    clip.write_bytes(wav_bytes(two_sentences()))
    with clip.open("rb") as audio:
        events = list(client.audio.transcriptions.create(model="demo", file=audio, stream=True))
    kinds = [event.type for event in events]
    assert kinds[-1] == "transcript.text.done" and kinds.count("transcript.text.done") == 1
    deltas = "".join(event.delta for event in events if event.type == "transcript.text.delta")
    final = events[-1].text
    assert deltas.strip() and final.startswith(deltas.strip())  # committed text is a prefix of the final text
    assert final.startswith(TEXT_1) and "garden" in final
    assert set(kinds) <= {"transcript.text.delta", "transcript.text.partial", "transcript.text.done"}


def test_stream_of_one_short_sentence_ends_with_its_text(client: openai.OpenAI) -> None:
    with SAMPLE_1.open("rb") as audio:
        events = list(client.audio.transcriptions.create(model="demo", file=audio, stream=True))
    assert events[-1].type == "transcript.text.done" and events[-1].text == TEXT_1


def test_errors_are_openai_errors(client: openai.OpenAI) -> None:
    with SAMPLE_1.open("rb") as audio, pytest.raises(openai.NotFoundError) as missing:
        client.audio.transcriptions.create(model="whisper-1", file=audio)
    assert missing.value.code == "model_not_found" and "GET /v1/models" in missing.value.message
    with SAMPLE_1.open("rb") as audio, pytest.raises(openai.BadRequestError) as bad:
        client.audio.transcriptions.create(model="demo", file=audio, language="fr")
    assert bad.value.code == "unsupported_language" and "'fr'" in bad.value.message
    with pytest.raises(openai.BadRequestError) as corrupt:
        client.audio.transcriptions.create(model="demo", file=("noise.wav", b"RIFF\x00\x01garbage" * 10))
    assert corrupt.value.code == "invalid_audio"


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs ffmpeg (.ci/run installs it)")
@pytest.mark.parametrize(("name", "codec"), [("memo.m4a", "aac"), ("recording.webm", "libopus")])
def test_a_phone_memo_and_a_browser_recording(
    client: openai.OpenAI, tmp_path: Path, name: str, codec: str
) -> None:
    """Two of the formats OpenAI's endpoint takes that libsndfile cannot read: the server reads them through
    ffmpeg (docs/audio_input.md §1) and leaves no temporary file."""
    path = tmp_path / name
    subprocess.run(
        ["ffmpeg", "-v", "error", "-nostdin", "-i", str(SAMPLE_1), "-c:a", codec, str(path)], check=True
    )
    left_before = set(Path(tempfile.gettempdir()).glob("captioneer-upload-*"))
    with path.open("rb") as audio:
        result = client.audio.transcriptions.create(model="demo", file=audio)
    assert result.text == TEXT_1
    assert set(Path(tempfile.gettempdir()).glob("captioneer-upload-*")) == left_before
