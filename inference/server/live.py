"""``POST /v1/audio/transcriptions/live``: raw PCM in a chunked body, events back while it still arrives.

The query names the model and the PCM layout. The first piece of the body is checked before the answer
starts (an audio file instead of raw PCM, or f32 samples sent as s16le and the reverse, are 400s); from
then on the answer is an SSE stream, and problems found later (a partial last frame, a stalled upload,
the limits) arrive as an ``error`` event. Every way a stream ends in good order (the body's end, a body
ending inside a frame, ``--live-max-s``, a shutdown, the body's end while the worker is down) ends with
``transcript.text.done`` and ``[DONE]``; a non-fatal ``error`` event says why it ended early or what was dropped.
A worker past its restart limit does not end the stream: it stays open, holding its newest audio, and resumes
when the client revives the worker (docs/architecture.md §4.1).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import anyio.to_thread
import numpy as np
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from inference.audio.io import PcmStreamDecoder
from inference.audio.limits import MAX_RATE, MIN_RATE
from inference.contract import SAMPLE_RATE, ErrorEvent
from inference.errors import UsageError, WorkerError
from inference.server.config import LiveLimits, ServerConfig
from inference.server.errors import ApiError
from inference.server.events import EventTranslator, SSEResponse
from inference.server.registry import ModelRegistry, ServedModel
from inference.server.requests import busy_timeout_s, check_live_content_type, request_options, shown
from inference.server.routes import closer
from inference.server.shutdown import ShutdownState
from inference.server.transcribe import EventPipe, finish_into, open_stream, sse_frames

PUSH_SAMPLES = int(0.16 * SAMPLE_RATE)  # decoded audio is handed to the model in pieces of at least this
_QUERY = {"model", "sample_rate", "channels", "sample_format", "language", "prompt", "busy_timeout_ms"}
_CONTAINERS = {b"RIFF": "WAV", b"RIFX": "WAV", b"OggS": "Ogg", b"fLaC": "FLAC", b"ID3": "MP3"}


def _int(query: Any, name: str, default: int, low: int, high: int) -> int:
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(
            400, f"'{name}' must be an integer, got {shown(raw)}", "invalid_value", param=name
        ) from None
    if not low <= value <= high:
        raise ApiError(400, f"'{name}' must be in [{low}, {high}], got {value}", "invalid_value", param=name)
    return value


def check_first_piece(data: bytes, sample_format: str) -> None:
    """Catch the usual mistakes before the stream starts: a container file, or the other sample format."""
    for magic, kind in _CONTAINERS.items():
        if data.startswith(magic):
            raise ApiError(
                400,
                f"the body is a {kind} file, not raw PCM; send the samples alone, or upload the "
                "file to POST /v1/audio/transcriptions",
                "invalid_audio",
            )
    usable = len(data) // 4 * 4
    if usable < 256:
        return  # too little to judge
    as_f32 = np.frombuffer(data[:usable], dtype="<f4")
    finite = np.isfinite(as_f32)
    if sample_format == "f32le":
        if not finite.all() or float(np.max(np.abs(as_f32[finite]), initial=0.0)) > 64.0:
            raise ApiError(
                400,
                "the body does not look like f32le PCM (values that are not numbers or far "
                "outside [-1, 1]); if it holds 16-bit samples, pass sample_format=s16le",
                "sample_format_mismatch",
                param="sample_format",
            )
    elif finite.all():
        magnitude = np.abs(as_f32)
        if float(magnitude.max()) <= 1.0 and float(np.median(magnitude)) > 1e-7:
            raise ApiError(
                400,
                "the body looks like 32-bit float samples in [-1, 1], not s16le; pass sample_format=f32le",
                "sample_format_mismatch",
                param="sample_format",
            )


async def live(request: Request) -> Response:
    config: ServerConfig = request.app.state.config
    registry: ModelRegistry = request.app.state.registry
    query = request.query_params
    unknown = sorted(set(query.keys()) - _QUERY)
    if unknown:
        raise ApiError(
            400,
            f"unknown query parameter(s) {', '.join(unknown)}; this route takes {', '.join(sorted(_QUERY))}",
            "unknown_parameter",
            param=unknown[0],
        )
    check_live_content_type(request)
    model = registry.get(query.get("model"))  # may be left out when the server has one model
    rate = _int(query, "sample_rate", SAMPLE_RATE, MIN_RATE, MAX_RATE)
    channels = _int(query, "channels", 1, 1, 16)
    sample_format = query.get("sample_format") or "s16le"
    if sample_format not in ("s16le", "f32le"):
        raise ApiError(
            400,
            f"'sample_format' must be s16le or f32le, got {sample_format!r}",
            "invalid_value",
            param="sample_format",
        )
    wait_s = busy_timeout_s(query.get("busy_timeout_ms"))
    options = request_options(model, language=query.get("language"), context=query.get("prompt"), extra={})
    refuse_unusable_prompt(model, options)
    limits = config.live
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limits.max_body_bytes:
        raise ApiError(
            413,
            f"the body is larger than this server's limit ({declared} > {limits.max_body_bytes} bytes)",
            "upload_too_large",
        )

    body = request.stream().__aiter__()
    first = await _next(body, limits.idle_timeout_s)
    if not first:
        raise ApiError(400, "the body is empty: send raw PCM samples", "invalid_audio")
    check_first_piece(first, sample_format)
    try:
        decoder = PcmStreamDecoder(sample_format, rate, channels)
    except UsageError as exc:
        raise ApiError(400, str(exc), "invalid_value") from None

    async with model.slot(wait_s) as slot:
        pipe = EventPipe()
        stream = await open_stream(model, pipe, options)
        release = slot.hand_over()
    frame_bytes = (2 if sample_format == "s16le" else 4) * channels

    shutdown = request.app.state.shutdown

    async def feed() -> None:
        await feed_body(pipe, stream, body, first, decoder, frame_bytes, limits, rate, shutdown)

    frames = sse_frames(pipe, EventTranslator(), feed, shutdown)
    return SSEResponse(frames, on_close=closer(stream, release))  # type: ignore[return-value]


def refuse_unusable_prompt(model: ServedModel, options: dict[str, Any]) -> None:
    """A prompt the loaded model cannot use is a 400 now, not a fatal event once the audio reaches it (the
    family's spec may take a context that only some of its models use, as Parakeet's is Phonon-2's)."""
    capabilities = getattr(model.engine, "capabilities", None)
    if options.get("context") and capabilities is not None and not capabilities.context:
        raise ApiError(
            400,
            f"model {model.id!r} takes no prompt (context); leave 'prompt' out for this model",
            "unsupported_parameter",
            param="prompt",
        )


async def _next(
    body: AsyncIterator[bytes], timeout_s: float, shutdown: ShutdownState | None = None
) -> bytes | None:
    """The next piece of the body; b"" at its end; None when the server began shutting down meanwhile."""
    piece = asyncio.ensure_future(body.__anext__())
    draining = asyncio.ensure_future(shutdown.wait_draining()) if shutdown is not None else None
    try:
        await asyncio.wait(
            {piece} | ({draining} if draining else set()),
            timeout=timeout_s,
            return_when=asyncio.FIRST_COMPLETED,
        )
    finally:
        if draining is not None:
            draining.cancel()
    if not piece.done():
        piece.cancel()
        if draining is not None and shutdown is not None and shutdown.draining:
            return None
        raise ApiError(408, f"no audio arrived for {timeout_s:g} s; the upload was abandoned", "idle_timeout")
    try:
        return piece.result()
    except StopAsyncIteration:
        return b""
    except ClientDisconnect:
        raise ApiError(
            400,
            "the client closed the connection before the end of the body (the terminating zero-length chunk)",
            "incomplete_body",
        ) from None


async def feed_body(
    pipe: EventPipe,
    stream: Any,
    body: AsyncIterator[bytes],
    first: bytes,
    decoder: PcmStreamDecoder,
    frame_bytes: int,
    limits: LiveLimits,
    rate: int,
    shutdown: ShutdownState | None = None,
) -> None:
    """Decode and push the body as it arrives; at its end, the final transcript (or an error) goes to the pipe."""
    received = 0
    limit = None if limits.max_stream_s is None else round(limits.max_stream_s * SAMPLE_RATE)
    taken = 0  # samples handed to the stream
    pending: list[np.ndarray] = []
    pending_samples = 0

    async def push(samples: np.ndarray, force: bool = False) -> None:
        nonlocal pending_samples, taken
        if limit is not None:
            samples = samples[: max(0, limit - taken)]
        taken += samples.size
        if samples.size:
            pending.append(samples)
            pending_samples += samples.size
        if pending_samples and (force or pending_samples >= PUSH_SAMPLES):
            chunk = np.concatenate(pending) if len(pending) > 1 else pending[0]
            pending.clear()
            pending_samples = 0
            await anyio.to_thread.run_sync(stream.push, chunk)

    def note(kind: str, message: str, fix: str) -> None:
        """Why the stream ends early or what was dropped: an error event that does not end it."""
        pipe.put([ErrorEvent(kind, message, fix, fatal=False)])

    async def run() -> None:
        nonlocal received
        piece: bytes | None = first
        while piece:
            received += len(piece)
            if received > limits.max_body_bytes:
                raise ApiError(
                    413,
                    f"the body passed this server's limit of {limits.max_body_bytes} bytes",
                    "upload_too_large",
                )
            await push(decoder.feed(piece))
            if limit is not None and taken >= limit:
                note(
                    "stream_limit",
                    f"the stream reached this server's limit of {limits.max_stream_s:g} s of audio "
                    "(--live-max-s); the transcript covers that much, the rest of the upload was not read",
                    "open a new stream for the rest, or ask for a higher --live-max-s",
                )
                break
            piece = await _next(body, limits.idle_timeout_s, shutdown)
        if piece is None:  # shutting down: the upload ends here, and what arrived is transcribed
            said = received // frame_bytes / rate
            note(
                "server_shutting_down",
                f"the server is shutting down: the upload was cut at {said:.1f} s; "
                "the transcript covers the audio received",
                "send the rest again",
            )
        elif piece == b"" and received % frame_bytes:
            note(
                "partial_frame",
                f"the body ends inside a frame: {received} bytes is not a whole number of {frame_bytes}-byte "
                f"frames, so the last {received % frame_bytes} byte(s) were dropped",
                "send whole frames (check sample_format and channels)",
            )
        # A partial last frame is dropped, never an error: the decoder keeps only whole frames.
        await push(decoder.feed(b"", last=True), force=True)

    async def fed() -> Any:
        try:
            await run()
            return await anyio.to_thread.run_sync(stream.finish)
        except WorkerError as exc:
            if getattr(getattr(stream, "client", None), "gave_up", None) is None:
                raise
            # The body ended while no worker runs (none was revived yet): end in good order with what was
            # transcribed; the audio since the failure is marked as a gap.
            note(
                "worker_failed",
                f"{exc.message}; no worker was revived before the upload ended, so the stream ends with what "
                "was transcribed before",
                "send the rest in a new stream in a moment: the next request starts a fresh worker",
            )
            return stream.heard()

    await finish_into(pipe, fed)
