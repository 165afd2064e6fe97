"""What keeps web pages from using a server that has no API key. Without a key the server trusts whoever
reaches it on loopback, and a browser on the same machine reaches it for any page it shows:

* a page that rebinds its own DNS name to 127.0.0.1 sends its own name in ``Host``: only loopback names (and
  the bound host) are answered, parsed strictly (``localhost:evil.com`` is not ``localhost``); others 421;
* a page of another site sends a cross-site request (a form post or ``fetch`` needs no preflight for
  ``multipart/form-data`` or ``text/plain``): browsers mark it with ``Origin`` and ``Sec-Fetch-Site``, and
  anything but a loopback origin or one of ``allow_origins`` gets 403.

With an API key neither applies: a page cannot send the key's header without the server's CORS consent.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from inference.server.config import ServerConfig, bracketed, is_loopback, normalized_origin, split_host
from inference.server.errors import ApiError

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers") or []:
        if key == name:
            return str(value.decode("latin-1"))
    return None


class LoopbackHostMiddleware:
    """Only loopback host names (and the bound host) are answered without an API key; others get 421."""

    def __init__(self, app: ASGIApp, config: ServerConfig) -> None:
        self.app = app
        self.enabled = config.api_key is None
        self.allowed = LOOPBACK_NAMES | {config.host.lower(), bracketed(config.host.lower())}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.enabled:
            await self.app(scope, receive, send)
            return
        host = _header(scope, b"host")
        parsed = split_host(host) if host else None
        if host and (parsed is None or parsed[0] not in self.allowed):
            error = ApiError(
                421,
                f"this server answers only to loopback host names, not {host.strip()[:100]!r} (without an "
                "API key it must not be reachable from web pages under other names)",
                "invalid_host",
            )
            await error.response()(scope, receive, send)
            return
        await self.app(scope, receive, send)


def is_loopback_origin(origin: str) -> bool:
    normalized = normalized_origin(origin)
    if normalized is None:
        return False
    parsed = split_host(normalized.partition("://")[2])
    return parsed is not None and is_loopback(parsed[0])


class CrossSiteMiddleware:
    """Without an API key, requests from web pages of other origins get 403 (``Origin`` decides when sent;
    without it, ``Sec-Fetch-Site: cross-site`` does). ``allow_origins`` names a local web UI's origin."""

    def __init__(self, app: ASGIApp, config: ServerConfig) -> None:
        self.app = app
        self.enabled = config.api_key is None
        self.allowed = {normalized_origin(o) for o in config.allow_origins}

    def _refusal(self, origin: str | None, fetch_site: str | None) -> ApiError | None:
        if origin is not None:
            if is_loopback_origin(origin) or normalized_origin(origin) in self.allowed:
                return None
            sender = f"the web page at {origin.strip()[:100]!r}"
        elif fetch_site is not None and fetch_site.strip().lower() == "cross-site":
            sender = "a web page of another site (Sec-Fetch-Site: cross-site)"
        else:
            return None
        return ApiError(
            403,
            f"{sender} may not use this server: without an API key it answers only programs on this "
            "machine and loopback web pages",
            "cross_site_request",
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.enabled:
            error = self._refusal(_header(scope, b"origin"), _header(scope, b"sec-fetch-site"))
            if error is not None:
                error.message += "; to allow a local web UI, start the server with --allow-origin ORIGIN"
                await error.response()(scope, receive, send)
                return
        await self.app(scope, receive, send)
