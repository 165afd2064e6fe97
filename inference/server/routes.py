"""The file routes: ``GET /v1/models``, ``POST /v1/audio/transcriptions`` (and ``/details``), ``GET /health``."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from inference.audio.vad import needs_speech_stretches, speech_stretches
from inference.contract import SAMPLE_RATE, Segment, Transcript
from inference.formats import build_cues, render
from inference.server.config import ServerConfig
from inference.server.disconnect import unless_disconnected
from inference.server.errors import ApiError
from inference.server.events import EventTranslator, SSEResponse
from inference.server.registry import ModelRegistry
from inference.server.requests import TranscriptionRequest, checked_task, read_transcription_request
from inference.server.shutdown import ShutdownState
from inference.server.transcribe import EventPipe, feed_file, open_stream, sse_frames, transcribe_file


def _state(request: Request) -> tuple[ServerConfig, ModelRegistry]:
    return request.app.state.config, request.app.state.registry


def shutdown_of(request: Request) -> ShutdownState:
    return request.app.state.shutdown  # type: ignore[no-any-return]


async def list_models(request: Request) -> Response:
    _, registry = _state(request)
    return JSONResponse({"object": "list", "data": [m.to_json() for m in registry.models]})


async def retrieve_model(request: Request) -> Response:
    _, registry = _state(request)
    return JSONResponse(registry.get(request.path_params["model_id"]).to_json())


async def health(request: Request) -> Response:
    """``ok`` while every model's worker runs; ``degraded`` (still 200: the server answers) while one restarts
    or was given up on, with the state per model."""
    _, registry = _state(request)
    models = {
        m.id: {"active": m.active, "limit": m.max_concurrent, "worker": m.worker_state}
        for m in registry.models
    }
    status = "ok" if all(m["worker"] == "running" for m in models.values()) else "degraded"
    return JSONResponse({"status": status, "models": models})


async def transcriptions(request: Request) -> Response:
    return await _transcribe(request, details=False)


async def transcription_details(request: Request) -> Response:
    return await _transcribe(request, details=True)


async def translations(request: Request) -> Response:
    """OpenAI's translations route: the speech as English text, from models that have a translate task."""
    return await _transcribe(request, details=False, task="translate")


async def _transcribe(request: Request, *, details: bool, task: str | None = None) -> Response:
    config, registry = _state(request)
    job = await read_transcription_request(request, registry, config, details=details)
    if task is not None:
        job.options = {**job.options, "task": checked_task(job.model, task)}
    if job.stream and details:
        raise ApiError(
            400,
            "/v1/audio/transcriptions/details does not stream; drop stream=true or use "
            "/v1/audio/transcriptions",
            "invalid_value",
            param="stream",
        )
    headers = _notes_header(job.notes)
    shutdown = shutdown_of(request)
    if job.stream:
        return await _stream(job, headers, config, shutdown)

    async def run() -> tuple[Transcript, float]:
        async with job.model.slot(job.busy_timeout_s):
            # The header is read in the slot; the audio decodes block by block as the worker takes it.
            await job.open_source(config.max_audio_s)
            assert job.source is not None
            started = time.monotonic()
            work = transcribe_file(job.model, job.source, job.options, config.request_timeout_s)
            transcript = await shutdown.bounded(work)
            if job.source.samples == 0:  # a file whose header did not say it was empty
                raise ApiError(
                    400, f"the audio {job.upload_name!r} has no samples", "invalid_audio", param="file"
                )
            wall_s = time.monotonic() - started
            job.model.note_duration(wall_s)
            return transcript, wall_s

    transcript, wall_s = await unless_disconnected(request.receive, run())
    if job.source is not None and job.source.problems:  # damage became silence, or it was cut off: a hole
        headers = _notes_header([*job.notes, *job.source.problems])
    if needs_speech_stretches(
        len(transcript.words), job.response_format
    ):  # off the event loop: ~1 s per minute
        assert job.source is not None  # the whole clip, only for subtitles of text without word times
        audio = await anyio.to_thread.run_sync(job.source.decode_all)
        transcript.speech = await anyio.to_thread.run_sync(speech_stretches, audio)
    return _render(job, transcript, wall_s, details, headers)


async def _stream(
    job: TranscriptionRequest, headers: dict[str, str], config: ServerConfig, shutdown: ShutdownState
) -> Response:
    """``stream=true``: the file goes through the model's live path and its events come back as SSE; the
    answer holds the slot until it ends."""
    async with job.model.slot(job.busy_timeout_s) as slot:
        await job.open_source(config.max_audio_s)
        assert job.source is not None
        source = job.source
        pipe = EventPipe()
        stream = await open_stream(job.model, pipe, job.options)
        frames = sse_frames(
            pipe,
            EventTranslator(),
            lambda: feed_file(stream, source, pipe, config.request_timeout_s),
            shutdown,
        )
        on_close = closer(stream, slot.hand_over())
    return SSEResponse(frames, headers, on_close=on_close, watch_disconnect=True)  # type: ignore[return-value]


def closer(stream: Any, release: Callable[[], None]) -> Callable[[], None]:
    """Whatever happened to the response: the worker stream is dropped (if unfinished), the slot freed once."""
    done = False

    def close() -> None:
        nonlocal done
        if not done:
            done = True
            stream.cancel()
            release()

    return close


def _notes_header(notes: Sequence[str]) -> dict[str, str]:
    """``X-Captioneer-Notes`` for what the request should know (none: no header)."""
    return {"x-captioneer-notes": _header_value("; ".join(notes))} if notes else {}


def _header_value(text: str) -> str:
    """``text`` as a header value: printable ASCII only (the upload's name is the client's, and may hold line
    breaks or characters latin-1 cannot carry)."""
    escaped = text.encode("ascii", "backslashreplace").decode("ascii")
    return "".join(c if " " <= c <= "~" else "?" for c in escaped)[:2000]


def _timing(transcript: Transcript, duration_s: float, wall_s: float) -> dict[str, Any]:
    return {
        "wall_ms": round(wall_s * 1000),
        "audio_duration_ms": round(duration_s * 1000),
        "rtf": round(wall_s / duration_s, 4) if duration_s > 0 else 0.0,
    }


def _render(
    job: TranscriptionRequest, transcript: Transcript, wall_s: float, details: bool, headers: dict[str, str]
) -> Response:
    text = transcript.text.strip()
    timing = _timing(transcript, job.duration_s, wall_s)
    if details:
        return JSONResponse(details_json(job, transcript, timing), headers=headers)
    fmt = job.response_format
    if fmt == "json":
        usage = {"type": "duration", "seconds": math.ceil(job.duration_s)}
        return JSONResponse({"text": text, "usage": usage, "timing": timing}, headers=headers)
    if fmt == "verbose_json":
        return JSONResponse(verbose_json(job, transcript, timing), headers=headers)
    if fmt == "text":
        return PlainTextResponse(text + "\n", headers=headers)
    media = "text/vtt" if fmt == "vtt" else "application/x-subrip"
    return Response(render(transcript, fmt), media_type=media, headers=headers)


def _language(job: TranscriptionRequest, transcript: Transcript) -> str | None:
    if transcript.language:
        return transcript.language
    return job.model.languages[0] if len(job.model.languages) == 1 else None


def segments_of(transcript: Transcript) -> list[Segment]:
    """The transcript's segments; a transcript that has only words (Parakeet offline) is cut as its subtitle
    cues are (at sentence ends and line limits), so clients that read segments get its text and times."""
    if transcript.segments or not transcript.words:
        return list(transcript.segments)
    return [Segment(" ".join(cue.lines), cue.start_s, cue.end_s, cue.words) for cue in build_cues(transcript)]


def verbose_json(job: TranscriptionRequest, transcript: Transcript, timing: dict[str, Any]) -> dict[str, Any]:
    """OpenAI's verbose_json: words and segments with times in seconds."""
    return {
        "task": job.options.get("task", "transcribe"),  # "translate" on /v1/audio/translations
        "language": _language(job, transcript),
        "duration": round(job.duration_s, 3),
        "text": transcript.text.strip(),
        "words": [
            {"word": w.text.strip(), "start": round(w.start_s, 3), "end": round(w.end_s, 3)}
            for w in transcript.words
        ],
        "segments": [
            {
                "id": i,
                "start": round(s.start_s, 3),
                "end": round(s.end_s, 3),
                "text": s.text.strip(),
                "words": [
                    {"word": w.text.strip(), "start": round(w.start_s, 3), "end": round(w.end_s, 3)}
                    for w in s.words
                ],
            }
            for i, s in enumerate(segments_of(transcript))
        ],
        "usage": {"type": "duration", "seconds": math.ceil(job.duration_s)},
        "timing": timing,
    }


def details_json(job: TranscriptionRequest, transcript: Transcript, timing: dict[str, Any]) -> dict[str, Any]:
    """The seeds' details answer: words and segments in samples at ``sample_rate``, with confidences."""

    def word(w: Any) -> dict[str, Any]:
        return {
            "word": w.text.strip(),
            "start_sample": round(w.start_s * SAMPLE_RATE),
            "end_sample": round(w.end_s * SAMPLE_RATE),
            "confidence": w.confidence,
        }

    return {
        "text": transcript.text.strip(),
        "language": _language(job, transcript),
        "sample_rate": SAMPLE_RATE,
        "duration": round(job.duration_s, 3),
        "words": [word(w) for w in transcript.words],
        "segments": [
            {
                "id": i,
                "text": s.text.strip(),
                "start_sample": round(s.start_s * SAMPLE_RATE),
                "end_sample": round(s.end_s * SAMPLE_RATE),
                "words": [word(w) for w in s.words],
            }
            for i, s in enumerate(segments_of(transcript))
        ],
        "timing": timing,
    }
