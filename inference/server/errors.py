"""Errors in OpenAI's shape: ``{"error": {"message", "type", "param", "code"}}`` with a fitting status."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

from inference.errors import (
    BackendError,
    Cancelled,
    CaptioneerError,
    InputFileError,
    ModelError,
    NotImplementedFamilyError,
    UsageError,
    WorkerError,
)


class ApiError(Exception):
    """An HTTP error answer. ``message`` names the problem and how to fix it."""

    def __init__(
        self,
        status: int,
        message: str,
        code: str,
        *,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.headers = headers or {}

    @property
    def type(self) -> str:
        if self.status == 401:
            return "authentication_error"
        if self.status == 429:
            return "rate_limit_error"
        return "invalid_request_error" if self.status < 500 else "server_error"

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


def _text(exc: CaptioneerError) -> str:
    return f"{exc.message} ({exc.fix})" if exc.fix else exc.message


def from_captioneer(exc: CaptioneerError, *, param: str | None = None) -> ApiError:
    """The HTTP answer for an error raised while handling a request."""
    if isinstance(exc, UsageError):
        return ApiError(400, _text(exc), "invalid_value", param=param)
    if isinstance(exc, InputFileError):
        return ApiError(400, _text(exc), "invalid_audio", param=param or "file")
    if isinstance(exc, NotImplementedFamilyError):
        return ApiError(400, _text(exc), "unsupported")
    if isinstance(exc, Cancelled):
        return ApiError(499, _text(exc), "cancelled")
    if isinstance(exc, WorkerError):
        return ApiError(
            503, f"the request failed because {_text(exc)}", "worker_crashed", headers={"Retry-After": "1"}
        )
    if isinstance(exc, ModelError):
        return ApiError(500, _text(exc), "model_error")
    if isinstance(exc, BackendError):
        return ApiError(500, _text(exc), "backend_error")
    return ApiError(500, _text(exc), "internal_error")


def error_event(error: ApiError, *, fatal: bool = True) -> dict[str, Any]:
    """The same error as a server-sent event (once a stream has started, the status is already sent)."""
    return {"type": "error", **error.body(), "fatal": fatal}
