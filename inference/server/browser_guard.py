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

from starlette.types import Scope

from inference.server.checks import Check, header
from inference.server.config import ServerConfig, bracketed, is_loopback, normalized_origin, split_host
from inference.server.errors import ApiError

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})


def loopback_host_check(config: ServerConfig) -> Check:
    """Only loopback host names (and the bound host) are answered; others get 421."""
    allowed = LOOPBACK_NAMES | {config.host.lower(), bracketed(config.host.lower())}

    def check(scope: Scope) -> ApiError | None:
        host = header(scope, b"host")
        parsed = split_host(host) if host else None
        if not host or (parsed is not None and parsed[0] in allowed):
            return None
        return ApiError(
            421,
            f"this server answers only to loopback host names, not {host.strip()[:100]!r} (without an "
            "API key it must not be reachable from web pages under other names)",
            "invalid_host",
        )

    return check


def is_loopback_origin(origin: str) -> bool:
    normalized = normalized_origin(origin)
    if normalized is None:
        return False
    parsed = split_host(normalized.partition("://")[2])
    return parsed is not None and is_loopback(parsed[0])


def cross_site_check(config: ServerConfig) -> Check:
    """Requests from web pages of other origins get 403 (``Origin`` decides when sent; without it,
    ``Sec-Fetch-Site: cross-site`` does). ``allow_origins`` names a local web UI's origin."""
    allowed = {normalized_origin(o) for o in config.allow_origins}

    def check(scope: Scope) -> ApiError | None:
        origin = header(scope, b"origin")
        fetch_site = header(scope, b"sec-fetch-site")
        if origin is not None:
            if is_loopback_origin(origin) or normalized_origin(origin) in allowed:
                return None
            sender = f"the web page at {origin.strip()[:100]!r}"
        elif fetch_site is not None and fetch_site.strip().lower() == "cross-site":
            sender = "a web page of another site (Sec-Fetch-Site: cross-site)"
        else:
            return None
        return ApiError(
            403,
            f"{sender} may not use this server: without an API key it answers only programs on this "
            "machine and loopback web pages; to allow a local web UI, start the server with "
            "--allow-origin ORIGIN",
            "cross_site_request",
        )

    return check
