"""The Starlette application: routes, the checks every request passes (Host, origin, API key, shutdown, body
rate) and OpenAI-shaped errors for everything."""

from __future__ import annotations

import hmac
import logging
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Scope

from inference.errors import CaptioneerError
from inference.server.body_rate import BodyRateLimit, BodyRateMiddleware
from inference.server.browser_guard import cross_site_check, loopback_host_check
from inference.server.checks import Check, CheckMiddleware, header
from inference.server.config import ServerConfig
from inference.server.errors import ApiError, from_captioneer
from inference.server.live import live
from inference.server.registry import ModelRegistry
from inference.server.routes import (
    health,
    list_models,
    retrieve_model,
    transcription_details,
    transcriptions,
    translations,
)
from inference.server.shutdown import ShutdownState
from inference.server.slow_readers import SendTimeoutMiddleware

log = logging.getLogger("captioneer.server")


def api_key_check(api_key: str) -> Check:
    """With an API key configured, every request needs ``Authorization: Bearer <key>`` (401 otherwise)."""

    def check(scope: Scope) -> ApiError | None:
        given = header(scope, b"authorization") or ""
        scheme, _, token = given.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), api_key.encode()):
            return None
        problem = "missing" if not given else "wrong"
        return ApiError(
            401,
            f"the API key is {problem}: send 'Authorization: Bearer <key>' with the key "
            "the server was started with",
            "invalid_api_key",
        )

    return check


def draining_check(shutdown: ShutdownState) -> Check:
    """While the server shuts down, new requests get a 503 at once (those in flight finish)."""
    return lambda _scope: shutdown.refusal() if shutdown.draining else None


async def _api_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return exc.response()


async def _captioneer_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, CaptioneerError)
    return from_captioneer(exc).response()


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        message = f"no route {request.url.path}; see GET /v1/models and POST /v1/audio/transcriptions"
        code = "not_found"
    elif exc.status_code == 405:
        message = f"{request.method} is not allowed on {request.url.path}"
        code = "method_not_allowed"
    else:
        message, code = str(exc.detail), "http_error"
    error = ApiError(exc.status_code, message, code, headers=dict(exc.headers or {}))
    return error.response()


async def _unexpected(_request: Request, exc: Exception) -> Response:
    log.exception("unexpected failure in a request", exc_info=exc)
    return ApiError(
        500, f"internal error ({type(exc).__name__}); the server log has the details", "internal_error"
    ).response()


def create_app(config: ServerConfig, registry: ModelRegistry, shutdown: ShutdownState | None = None) -> Any:
    routes = [
        Route("/v1/models", list_models, methods=["GET"]),
        Route("/v1/models/{model_id:path}", retrieve_model, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/v1/audio/transcriptions", transcriptions, methods=["POST"]),
        Route("/v1/audio/transcriptions/details", transcription_details, methods=["POST"]),
        Route("/v1/audio/transcriptions/live", live, methods=["POST"]),
        Route("/v1/audio/translations", translations, methods=["POST"]),
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={
            ApiError: _api_error,
            CaptioneerError: _captioneer_error,
            HTTPException: _http_error,
            Exception: _unexpected,
        },
    )
    app.state.config = config
    app.state.registry = registry
    app.state.shutdown = shutdown = shutdown or ShutdownState()
    inner: ASGIApp = BodyRateMiddleware(app, BodyRateLimit(config.min_body_bytes_per_s, config.body_window_s))
    inner = SendTimeoutMiddleware(inner, config.send_timeout_s)
    inner = CheckMiddleware(inner, draining_check(shutdown))
    if config.api_key is not None:
        inner = CheckMiddleware(inner, api_key_check(config.api_key))
    if (
        config.allow_origins
    ):  # a web UI there may read the answers and send JSON (a preflight, before the key)
        inner = CORSMiddleware(
            inner,
            allow_origins=list(config.allow_origins),
            allow_methods=["GET", "POST"],
            allow_headers=["authorization", "content-type"],
        )
    if config.api_key is None:  # without a key: no pages of other sites, no other host names
        inner = CheckMiddleware(CheckMiddleware(inner, cross_site_check(config)), loopback_host_check(config))
    return inner
