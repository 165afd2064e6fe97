"""``POST /v1/audio/transcriptions/live``: raw PCM in a chunked body, events back while it still arrives.

The query names the model and the PCM layout. The first piece of the body is checked before the answer
starts (an audio file instead of raw PCM, or f32 samples sent as s16le and the reverse, are 400s); from
then on the answer is an SSE stream, and problems found later (a partial last frame, a stalled upload,
the limits) arrive as an ``error`` event. Every way a stream ends in good order (the body's end, a body
ending inside a frame, ``--live-max-s``, a shutdown, its model slot taken back) ends with
``transcript.text.done`` and ``[DONE]``; a non-fatal ``error`` event says why it ended early or what was
dropped. The stream takes a model slot only once it has sent some audio (``live_upload.py``). A worker past its
restart limit does not end the stream: it stays open, holding its newest audio, and resumes when the client
revives the worker; a body that ends before that ends with what was transcribed (docs/architecture.md §4.2).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from starlette.requests import Request
from starlette.responses import Response

from inference.audio.containers import container_kind
from inference.audio.io import PcmStreamDecoder
from inference.audio.limits import MAX_RATE, MIN_RATE
from inference.contract import SAMPLE_RATE
from inference.errors import UsageError
from inference.server.config import ServerConfig
from inference.server.errors import ApiError
from inference.server.events import EventTranslator, SSEResponse
from inference.server.live_upload import LiveUpload
from inference.server.registry import ModelRegistry, ServedModel
from inference.server.requests import busy_timeout_s, check_live_content_type, request_options, shown
from inference.server.routes import closer
from inference.server.transcribe import EventPipe, open_stream, sse_frames

_QUERY = {"model", "sample_rate", "channels", "sample_format", "language", "prompt", "busy_timeout_ms"}


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
    kind = container_kind(data)
    if kind is not None:
        raise ApiError(
            400,
            f"the body is an audio file ({kind}), not raw PCM; send the samples alone, or upload the "
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

    try:
        decoder = PcmStreamDecoder(sample_format, rate, channels)
    except UsageError as exc:
        raise ApiError(400, str(exc), "invalid_value") from None
    frame_bytes = (2 if sample_format == "s16le" else 4) * channels
    shutdown = request.app.state.shutdown
    upload = LiveUpload(request.stream().__aiter__(), decoder, frame_bytes, rate, limits, shutdown)
    first = await upload.first_piece()
    if not first:
        raise ApiError(400, "the body is empty: send raw PCM samples", "invalid_audio")
    check_first_piece(first, sample_format)
    upload.accept(first)
    # No slot before the stream delivers audio: a client that trickles bytes waits here, holding nothing.
    await upload.read_opening()

    async with model.slot(wait_s, holder=upload) as slot:
        pipe = EventPipe()
        stream = await open_stream(model, pipe, options)
        close = closer(stream, slot.hand_over())
    frames = sse_frames(pipe, EventTranslator(), lambda: upload.feed(stream, pipe, close), shutdown)
    return SSEResponse(frames, on_close=close)  # type: ignore[return-value]


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
