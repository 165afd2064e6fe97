"""Starting the server: load the models (each in its own worker), then serve until interrupted."""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
from collections.abc import Iterator
from typing import IO

from inference.paths import AppPaths
from inference.server.config import ServerConfig

log = logging.getLogger("captioneer.server")


def serve(config: ServerConfig, model_names: list[str], paths: AppPaths, *, backend: str = "auto",
          threads: int | None = None, err: IO[str] | None = None) -> int:  # fmt: skip
    import uvicorn

    from inference.server.app import create_app
    from inference.server.registry import ModelRegistry, resolve_models

    err = err or sys.stderr
    registry = ModelRegistry(resolve_models(model_names, paths, config.max_concurrent))
    err.write(f"captioneer: loading {', '.join(m.id for m in registry.models)}\n")
    registry.start(backend, threads)
    try:
        app = create_app(config, registry)
        names = ", ".join(m.id for m in registry.models)
        err.write(f"captioneer: serving {names} on http://{_url_host(config.host)}:{config.port}/v1 "
                  f"({'API key required' if config.api_key else 'no API key: loopback only'}); Ctrl-C stops\n")
        err.flush()
        with _sigterm_stops_quietly():
            uvicorn.run(app, host=config.host, port=config.port, log_level="warning", timeout_graceful_shutdown=5)
    finally:
        registry.close()
    err.write("captioneer: server stopped\n")
    return 0


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


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
