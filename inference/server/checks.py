"""Checks every HTTP request passes before it reaches a route: each is a function of the request's scope that
returns the refusal (an ``ApiError``) or None, run by one middleware."""

from __future__ import annotations

from collections.abc import Callable

from starlette.types import ASGIApp, Receive, Scope, Send

from inference.server.errors import ApiError

Check = Callable[[Scope], ApiError | None]


class CheckMiddleware:
    """Answers a request with the refusal ``check`` returns for it; passes the others on to ``app``."""

    def __init__(self, app: ASGIApp, check: Check) -> None:
        self.app = app
        self.check = check

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            error = self.check(scope)
            if error is not None:
                await error.response()(scope, receive, send)
                return
        await self.app(scope, receive, send)


def header(scope: Scope, name: bytes) -> str | None:
    """A request header (the first of its name), or None."""
    for key, value in scope.get("headers") or []:
        if key == name:
            return str(value.decode("latin-1"))
    return None
