"""Starting the server: load the models (each in its own worker), then serve until interrupted."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from typing import IO, Any

from inference.errors import UsageError
from inference.paths import AppPaths
from inference.server.config import ServerConfig, bracketed
from inference.server.shutdown import POLL_S, ShutdownState

log = logging.getLogger("captioneer.server")


def serve(
    config: ServerConfig,
    model_names: list[str],
    paths: AppPaths,
    *,
    backend: str = "auto",
    threads: int | None = None,
    err: IO[str] | None = None,
) -> int:

    from inference.server.app import create_app
    from inference.server.memory import return_large_blocks_when_freed
    from inference.server.registry import ModelRegistry, resolve_models

    err = err or sys.stderr
    return_large_blocks_when_freed()  # a long-running server keeps its idle size after large requests
    registry = ModelRegistry(resolve_models(model_names, paths, config.max_concurrent))
    sock = bind(
        config.host, config.port
    )  # before loading: a busy port fails at once, and nothing says "serving"
    try:
        err.write(f"captioneer: loading {', '.join(m.id for m in registry.models)}\n")
        registry.start(backend, threads)
        shutdown = ShutdownState(config.grace_s)
        app = create_app(config, registry, shutdown)
        # uvicorn's own grace is longer: requests end themselves (with an error) when ours is over.
        raise_fd_limit()
        server = DrainingServer(uvicorn_config(app, config.grace_s, config), shutdown)
        port = sock.getsockname()[1]
        names = ", ".join(m.id for m in registry.models)
        err.write(
            f"captioneer: serving {names} on http://{bracketed(config.host)}:{port}/v1 "
            f"({'API key required' if config.api_key else 'no API key: loopback only'}); Ctrl-C stops\n"
        )
        err.flush()
        with _sigterm_stops_quietly():
            server.run(sockets=[sock])
    finally:
        sock.close()
        registry.close()
    err.write("captioneer: server stopped\n")
    return 0


def uvicorn_config(app: Any, grace_s: float, config: ServerConfig | None = None) -> Any:
    """uvicorn's settings for our app: its own grace is longer than ours (requests end themselves, with an
    error, when ours is over), and its protocol is ours (header timeout, per-client limit, JSON errors)."""
    import uvicorn

    from inference.server.connections import ConnectionLimits, guarded_protocol

    config = config or ServerConfig()
    limits = ConnectionLimits(config.header_timeout_s, config.max_connections_per_client)
    return uvicorn.Config(
        app,
        log_level="warning",
        timeout_graceful_shutdown=math.ceil(grace_s) + 3,
        http=guarded_protocol(limits),
    )


def raise_fd_limit() -> None:
    """Open files up to the hard limit: each connection is one, and the soft default (often 1024, or 256)
    is what a burst of clients meets first; the header timeout and the per-client limit do the rest."""
    try:
        import resource
    except ImportError:  # Windows: no such limit
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, or a clear error naming the address that could not be taken."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise UsageError(
            f"cannot listen on {bracketed(host)}:{port}: {exc.strerror}",
            "another program (perhaps another captioneer serve) uses it: stop it or pass --port N",
        ) from None
    sock.set_inheritable(True)
    return sock


class DrainingServer:
    """uvicorn's server, telling the app when a shutdown begins so requests in flight can wind down."""

    def __init__(self, config: Any, shutdown: ShutdownState) -> None:
        import uvicorn

        draining = self.draining = threading.Event()  # set once uvicorn's own shutdown has begun

        class _Server(uvicorn.Server):
            def handle_exit(self, sig: int, frame: Any) -> None:
                shutdown.begin()
                super().handle_exit(sig, frame)

            async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
                # uvicorn stops listening at once, so new clients would meet a refused connection; while
                # requests are in flight (within the grace) it keeps listening and they get the 503.
                draining.set()
                if self.server_state.tasks:
                    log.warning(
                        "stopping: %d request(s) in flight get up to %.0f s; new ones get 503",
                        len(self.server_state.tasks),
                        shutdown.grace_left(),
                    )
                while self.server_state.tasks and shutdown.grace_left() > 0 and not self.force_exit:
                    await asyncio.sleep(POLL_S)
                await super().shutdown(sockets)

        self._server = _Server(config)

    def run(self, sockets: list[socket.socket]) -> None:
        self._server.run(sockets=sockets)

    @property
    def started(self) -> bool:
        return bool(self._server.started)

    def stop(self) -> None:
        """As SIGTERM does (tests and embedding callers)."""
        self._server.handle_exit(signal.SIGTERM, None)


@contextlib.contextmanager
def _sigterm_stops_quietly() -> Iterator[None]:
    """uvicorn stops gracefully on SIGTERM and then raises the signal again, which would kill the process
    before the workers are shut down; while it runs, a SIGTERM it re-raises is only recorded."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, lambda *_: None)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
