"""Reading a transcription request (multipart form or the JSON form) into audio and checked options.

The body is read with a size limit before it is parsed, the audio is decoded and checked against the
duration limit, and every field is checked here so that a bad request is a 400 naming the field.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import errno
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread
from starlette.datastructures import UploadFile
from starlette.requests import ClientDisconnect, Request

from inference.audio.decoding import FileBlocks
from inference.audio.limits import AudioLimits, AudioTooLong
from inference.contract import SAMPLE_RATE
from inference.errors import CaptioneerError, InputFileError, UsageError
from inference.languages import language_code
from inference.server.config import ServerConfig
from inference.server.errors import ApiError, from_captioneer
from inference.server.registry import ModelRegistry, ServedModel

RESPONSE_FORMATS = ("json", "text", "srt", "vtt", "verbose_json")
MAX_BUSY_TIMEOUT_MS = 600_000
_FORM_FIELDS = {
    "file",
    "model",
    "language",
    "prompt",
    "response_format",
    "temperature",
    "stream",
    "timestamp_granularities[]",
    "timestamp_granularities",
    "include[]",
    "chunking_strategy",
    "busy_timeout_ms",
    "options",
    "hotwords",
    "hotwords_score",
}
_JSON_FIELDS = {
    "model",
    "audio",
    "audio_path",
    "file",
    "language",
    "text",
    "prompt",
    "options",
    "response_format",
    "stream",
    "temperature",
    "busy_timeout_ms",
}


@dataclass
class TranscriptionRequest:
    model: ServedModel
    upload: (
        bytes  # the audio file as sent; read by ``open_source`` once the request holds a slot of the model
    )
    upload_name: str
    options: dict[str, Any]  # validated request options for the engine
    response_format: str = "json"
    stream: bool = False
    notes: list[str] = field(default_factory=list)
    busy_timeout_s: float = 0.0  # how long the client will wait for a busy model before a 429
    source: FileBlocks | None = None  # the upload as blocks, once the request holds a slot (``open_source``)

    async def open_source(self, max_audio_s: float) -> None:
        """The upload as blocks (header checked off the event loop): decoded as the worker takes them."""
        self.source = await anyio.to_thread.run_sync(audio_source, self.upload, self.upload_name, max_audio_s)
        self.upload = b""

    @property
    def duration_s(self) -> float:
        return (self.source.samples if self.source is not None else 0) / SAMPLE_RATE


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body, refused with 413 as soon as it passes ``limit`` bytes (Content-Length first)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(int(declared), limit)
    parts: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise _too_large(size, limit)
            parts.append(chunk)
    except ClientDisconnect:
        raise ApiError(
            400, "the client closed the connection before the body was complete", "incomplete_body"
        ) from None
    body = b"".join(parts)
    request._body = body  # Request.form() and .json() parse what was read here
    return body


LIVE_CONTENT_TYPES = ("application/octet-stream", "audio/pcm", "audio/l16")


def media_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


def check_live_content_type(request: Request) -> None:
    """``/live`` takes raw PCM: no Content-Type or a binary one. ``text/plain`` (what a web page may send
    without asking first) and the form types are refused with 415."""
    kind = media_type(request)
    if kind and kind not in LIVE_CONTENT_TYPES:
        raise ApiError(
            415,
            f"unsupported Content-Type {shown(kind)} for the live route: send raw PCM as "
            f"{' or '.join(LIVE_CONTENT_TYPES)} (or without a Content-Type)",
            "unsupported_media_type",
        )


def _too_large(size: int, limit: int) -> ApiError:
    return ApiError(
        413,
        f"the upload is larger than this server's limit ({size} > {limit} bytes)",
        "upload_too_large",
        param="file",
    )


def parse_bool(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ApiError(400, f"'{name}' must be true or false, got {shown(value)}", "invalid_value", param=name)


async def read_transcription_request(
    request: Request, registry: ModelRegistry, config: ServerConfig, *, details: bool = False
) -> TranscriptionRequest:
    """A multipart form (``file`` and fields) or a JSON object (``audio`` in base64 and ``options``)."""
    body = await read_body(request, config.max_upload_bytes)
    content_type = media_type(request)
    if content_type == "application/json":  # parsing and decoding run off the event loop
        return await anyio.to_thread.run_sync(_from_json, body, registry, config, details)
    if content_type in ("multipart/form-data", "application/x-www-form-urlencoded"):
        return await _from_form(request, registry, details)
    raise ApiError(
        415,
        f"unsupported Content-Type {shown(content_type or '(none)')}: send multipart/form-data with "
        "a 'file' field, or application/json with base64 'audio'",
        "unsupported_media_type",
    )


async def _from_form(request: Request, registry: ModelRegistry, details: bool) -> TranscriptionRequest:
    try:
        form = await request.form(max_files=1, max_fields=64)
    except Exception as exc:  # multipart parse errors (malformed body, too many parts)
        raise ApiError(400, f"cannot read the form: {exc}", "invalid_form") from None
    try:
        unknown = sorted(set(form.keys()) - _FORM_FIELDS)
        if unknown:
            raise ApiError(
                400,
                f"unknown form field(s) {', '.join(unknown)}; this route takes "
                f"{', '.join(sorted(_FORM_FIELDS))}",
                "unknown_parameter",
                param=unknown[0],
            )
        model = registry.get(_text_field(form.get("model"), "model"))
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise ApiError(
                400,
                "the 'file' field is required and must be an uploaded audio file",
                "missing_file",
                param="file",
            )
        notes = []
        if form.get("temperature") is not None:
            _number(form.get("temperature"), "temperature")
            notes.append("temperature is accepted and ignored: decoding is greedy")
        options = request_options(
            model,
            language=_text_field(form.get("language"), "language"),
            context=_text_field(form.get("prompt"), "prompt"),
            extra=_form_extra(form),
        )
        response_format = _response_format(form.get("response_format"), details)
        stream = parse_bool(form.get("stream") or "false", "stream")
        wait_s = busy_timeout_s(form.get("busy_timeout_ms"))
        data = await upload.read()
    finally:
        await form.close()
    return TranscriptionRequest(
        model, data, upload.filename or "file", options, response_format, stream, notes, wait_s
    )


def _from_json(
    body: bytes, registry: ModelRegistry, config: ServerConfig, details: bool
) -> TranscriptionRequest:
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ApiError(400, f"the body is not valid JSON: {exc}", "invalid_json") from None
    except ValueError:  # a number past Python's 4300-digit limit for int()
        raise ApiError(
            400, "the JSON body holds a number of more than 4300 digits; no field takes one", "invalid_json"
        ) from None
    except RecursionError:
        raise ApiError(
            400, "the JSON body is nested too deeply; requests are a flat object", "invalid_json"
        ) from None
    if not isinstance(data, dict):
        raise ApiError(400, "the JSON body must be an object", "invalid_json")
    unknown = sorted(set(data) - _JSON_FIELDS)
    if unknown:
        raise ApiError(
            400,
            f"unknown field(s) {', '.join(unknown)}; the JSON form takes {', '.join(sorted(_JSON_FIELDS))}",
            "unknown_parameter",
            param=unknown[0],
        )
    model = registry.get(_json_text(data, "model"))
    path_key = next((key for key in ("audio_path", "file") if key in data), None)
    if path_key is not None:
        if "audio" in data:
            raise ApiError(
                400, f"give either 'audio' or '{path_key}', not both", "invalid_value", param=path_key
            )
        raw = read_allowed_file(config, data[path_key], path_key)
        name = str(data[path_key])
    else:
        encoded = data.get("audio")
        if not isinstance(encoded, str) or not encoded:
            raise ApiError(
                400, "'audio' is required: the audio file's bytes in base64", "missing_audio", param="audio"
            )
        try:
            raw = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise ApiError(400, "'audio' is not valid base64", "invalid_audio", param="audio") from None
        name = "audio"
    extra = data.get("options") or {}
    if not isinstance(extra, dict):
        raise ApiError(
            400,
            "'options' must be an object of the model family's request options",
            "invalid_value",
            param="options",
        )
    context = _json_text(data, "text") or _json_text(data, "prompt")
    options = request_options(model, language=_json_text(data, "language"), context=context, extra=extra)
    return TranscriptionRequest(
        model,
        raw,
        name,
        options,
        _response_format(data.get("response_format"), details),
        parse_bool(data.get("stream", False), "stream"),
        busy_timeout_s=busy_timeout_s(data.get("busy_timeout_ms")),
    )


def read_allowed_file(config: ServerConfig, value: Any, key: str) -> bytes:
    """A file on the server named by the JSON form: only inside ``--audio-dir``, and only when it is set."""
    if config.audio_dir is None:
        raise ApiError(
            400,
            f"'{key}' (a file on the server) is off: start the server with --audio-dir DIR to "
            "allow files under DIR, or send the audio itself (base64 'audio' or a multipart upload)",
            "unsupported_parameter",
            param=key,
        )
    if not isinstance(value, str) or not value.strip() or "\x00" in value:
        raise ApiError(
            400, f"'{key}' must be a file path (text without NUL characters)", "invalid_value", param=key
        )
    root = config.audio_dir.resolve()
    name = shown(value)
    try:  # resolve() follows links and ".." (strictly: a link loop is an error on every Python version)
        path = (root / value).resolve(strict=True)
        inside = path.is_relative_to(root)
        is_file = inside and path.is_file()
        size = path.stat().st_size if is_file else 0
    except FileNotFoundError:
        raise ApiError(
            400, f"no file {name} in the server's --audio-dir", "file_not_found", param=key
        ) from None
    except (OSError, RuntimeError) as exc:  # a name too long, a link loop, no permission
        loop = isinstance(exc, RuntimeError) or getattr(exc, "errno", None) == errno.ELOOP
        why = "a symbolic link loop" if loop else getattr(exc, "strerror", None) or "it cannot be opened"
        raise ApiError(
            400, f"cannot open {name} in the server's --audio-dir: {why}", "file_not_readable", param=key
        ) from None
    if not inside:
        raise ApiError(
            403, f"'{key}' must name a file inside the server's --audio-dir", "path_not_allowed", param=key
        )
    if not is_file:
        raise ApiError(400, f"no file {name} in the server's --audio-dir", "file_not_found", param=key)
    if size > config.max_upload_bytes:
        raise _too_large(size, config.max_upload_bytes)
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ApiError(400, f"cannot read {name}: {exc.strerror}", "file_not_readable", param=key) from None


def shown(value: Any, limit: int = 60) -> str:
    """A client's value quoted in an error message, cut short: a 5000-digit number is not echoed back."""
    text = repr(value if isinstance(value, str) else str(value))
    return text if len(text) <= limit else f"{text[: limit - 5]}...' ({len(str(value))} characters)"


def busy_timeout_s(value: Any) -> float:
    """``busy_timeout_ms``: how long a request may wait for a busy model (default: not at all)."""
    if value is None or value == "":
        return 0.0
    text = str(value).strip()
    millis = int(text) if text.isascii() and text.isdigit() and len(text) <= 7 else -1
    if not 0 <= millis <= MAX_BUSY_TIMEOUT_MS:
        raise ApiError(
            400,
            f"'busy_timeout_ms' must be an integer in [0, {MAX_BUSY_TIMEOUT_MS}], got {shown(value)}",
            "invalid_value",
            param="busy_timeout_ms",
        )
    return millis / 1000


def audio_source(data: bytes, name: str, max_audio_s: float) -> FileBlocks:
    """The upload as blocks for a streamed job (``FileBlocks``): the header is checked now, the length again
    as the blocks decode (``audio_errors`` turns what the decoder refuses into the same answers)."""
    if not data:
        raise ApiError(400, f"the audio {name!r} is empty", "invalid_audio", param="file")
    try:
        with audio_errors(max_audio_s):
            source = FileBlocks(data, AudioLimits(max_audio_s), name)
    except CaptioneerError as exc:
        raise from_captioneer(exc, param="file") from None
    if source.expected_samples == 0:
        raise ApiError(400, f"the audio {name!r} has no samples", "invalid_audio", param="file")
    return source


@contextlib.contextmanager
def audio_errors(max_audio_s: float) -> Iterator[None]:
    """The decoder's refusals (while decoding, perhaps in a job's blocks) as API errors: too long → 413, a file
    that cannot be read → from its error."""
    try:
        yield
    except AudioTooLong as exc:
        lasts = f"{exc.seconds:.1f} s" if exc.exact else f"more than {max_audio_s:g} s"
        raise ApiError(
            413,
            f"the audio lasts {lasts}, more than this server's limit of {max_audio_s:g} s; split it",
            "audio_too_long",
            param="file",
        ) from None
    except InputFileError as exc:
        raise from_captioneer(exc, param="file") from None


def _form_extra(form: Any) -> dict[str, Any]:
    """Family options of a form: ``options`` (a JSON object, as in the JSON form) and, for Phonon-2, the
    ``hotwords`` / ``hotwords_score`` fields themselves (what OpenAI clients send through ``extra_body``)."""
    extra: dict[str, Any] = {}
    text = _text_field(form.get("options"), "options")
    if text:
        try:
            extra = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ApiError(
                400,
                f"'options' is not valid JSON: {exc.msg} at character {exc.pos}",
                "invalid_value",
                param="options",
            ) from None
        except (RecursionError, ValueError):  # nested too deeply, or a number past int()'s digit limit
            raise ApiError(
                400,
                "'options' is nested too deeply or holds a number too long to read; it is a flat object of "
                "the model family's request options",
                "invalid_value",
                param="options",
            ) from None
        if not isinstance(extra, dict):
            raise ApiError(
                400,
                "'options' must be a JSON object of the model family's request options",
                "invalid_value",
                param="options",
            )
    for name in ("hotwords", "hotwords_score"):
        value = form.get(name)
        if value is not None:
            if name in extra:
                raise ApiError(
                    400,
                    f"{name!r} was given both as a field and inside 'options'",
                    "invalid_value",
                    param=name,
                )
            if isinstance(value, UploadFile):
                raise ApiError(400, f"'{name}' must be a text field, not a file", "invalid_value", param=name)
            # An empty hotwords field is kept: it turns hotwords off even when a prompt is given.
            extra[name] = str(value) if name == "hotwords" else _number(value, name)
    return extra


def checked_task(model: ServedModel, task: str) -> str:
    """``task`` if the model's family offers it (Whisper's ``translate``), else a 400 naming what can."""
    option = model.spec.request_option("task") if model.spec is not None else None
    if option is None or task not in option.choices:
        from inference.registry import FamilyRegistry

        translators = FamilyRegistry.from_environment().translators()
        raise ApiError(
            400,
            f"model {model.id!r} cannot {task}: only {translators} translate speech into English; use "
            "/v1/audio/transcriptions, or serve one of those",
            "unsupported_task",
            param="model",
        )
    return task


def request_options(
    model: ServedModel, *, language: str | None, context: str | None, extra: dict[str, Any]
) -> dict[str, Any]:
    """The engine options of a request, validated by the model family's spec (400 naming the option)."""
    raw = dict(model.default_request_options)
    raw.update(extra)
    spec = model.spec
    if language:
        option = spec.request_option("language") if spec is not None else None
        known = model.languages or (spec.languages if spec is not None else ())
        if option is None or option.language_code:  # checked here, before the request reaches the model
            language = _known_language(model, language, known)
        if option is not None:
            raw["language"] = language
        # otherwise: the model finds the language itself, and this one is among those it knows
    if context:
        if spec is not None and not spec.takes_request_option("context"):
            raise ApiError(
                400, f"model {model.id!r} takes no prompt (context)", "unsupported_parameter", param="prompt"
            )
        raw["context"] = context  # the family's own option for it takes "context" as a name or an alias
    if spec is None:
        return raw
    try:
        return spec.validate_request_options(raw)
    except UsageError as exc:
        raise ApiError(400, str(exc), "invalid_option", param="options") from None


def _known_language(model: ServedModel, language: str, known: tuple[str, ...]) -> str:
    """The code of ``language`` (a code or an English name) among the model's languages, else a 400."""
    if not known:
        return language
    try:
        return language_code(language, known, f"model {model.id!r}")
    except UsageError as exc:
        raise ApiError(400, f"{exc.message}; {exc.fix}", "unsupported_language", param="language") from None


def _response_format(value: Any, details: bool) -> str:
    if value is None or value == "":
        return "verbose_json" if details else "json"
    text = str(value)
    if text not in RESPONSE_FORMATS:
        raise ApiError(
            400,
            f"response_format must be one of {', '.join(RESPONSE_FORMATS)}, got {shown(text)}",
            "invalid_value",
            param="response_format",
        )
    return text


def _text_field(value: Any, name: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, UploadFile):
        raise ApiError(400, f"'{name}' must be a text field, not a file", "invalid_value", param=name)
    return str(value).strip() or None


def _json_text(data: dict[str, Any], name: str) -> str | None:
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ApiError(400, f"'{name}' must be a string", "invalid_value", param=name)
    return value.strip() or None


def _number(value: Any, name: str) -> float:
    try:
        return float(str(value))
    except ValueError:
        raise ApiError(
            400, f"'{name}' must be a number, got {shown(value)}", "invalid_value", param=name
        ) from None
