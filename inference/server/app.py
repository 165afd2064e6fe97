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
from starlette.types import ASGIApp, Receive, Scope, Send

from inference.errors import CaptioneerError
from inference.server.body_rate import BodyRateLimit, BodyRateMiddleware
from inference.server.browser_guard import CrossSiteMiddleware, LoopbackHostMiddleware
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

log = logging.getLogger("captioneer.server")


class ApiKeyMiddleware:
    """With an API key configured, every request needs ``Authorization: Bearer <key>`` (401 otherwise)."""

    def __init__(self, app: ASGIApp, api_key: str | None) -> None:
        self.app = app
        self.api_key = api_key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.api_key is None:
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        given = headers.get(b"authorization", b"").decode("latin-1")
        scheme, _, token = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            token.strip().encode(), self.api_key.encode()
        ):
            problem = "missing" if not given else "wrong"
            error = ApiError(
                401,
                f"the API key is {problem}: send 'Authorization: Bearer <key>' with the key "
                "the server was started with",
                "invalid_api_key",
            )
            await error.response()(scope, receive, send)
            return
        await self.app(scope, receive, send)


class DrainingMiddleware:
    """While the server shuts down, new requests get a 503 at once (those in flight finish)."""

    def __init__(self, app: ASGIApp, shutdown: ShutdownState) -> None:
        self.app = app
        self.shutdown = shutdown

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.shutdown.draining:
            await self.shutdown.refusal().response()(scope, receive, send)
            return
        await self.app(scope, receive, send)


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
    inner = ApiKeyMiddleware(DrainingMiddleware(inner, shutdown), config.api_key)
    if config.allow_origins:  # a local web UI there may read the answers (and send JSON: a preflight)
        inner = CORSMiddleware(
            inner,
            allow_origins=list(config.allow_origins),
            allow_methods=["GET", "POST"],
            allow_headers=["authorization", "content-type"],
        )
    return LoopbackHostMiddleware(CrossSiteMiddleware(inner, config), config)
