"""A download never runs past the size announced for it: a server that keeps sending is refused and the partial
file removed (it was written until the disk was full)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from inference.models.errors import HubRefusedError
from inference.models.hub import HubClient, RemoteFile
from inference.models.store import PARTIAL_DIR
from tests.models.hub_fixtures import make_store

CHUNK = b"\0" * 65536


def _client(sent: list[int]) -> HubClient:
    def endless() -> Iterator[bytes]:
        for _ in range(1000):  # 64 MB, far past any announced size here
            sent.append(len(CHUNK))
            yield CHUNK

    def handler(_request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=endless())

    return HubClient(session_factory=lambda: httpx2.Client(transport=httpx2.MockTransport(handler)))


def _remote(size: int | None) -> RemoteFile:
    return RemoteFile("org/model", "main", "model.bin", "http://hub.invalid/model.bin", size, None, None)


@pytest.mark.parametrize(("announced", "catalog"), [(100_000, None), (None, 100_000)])
def test_a_body_longer_than_announced_is_refused_and_removed(
    tmp_path: Path, announced: int | None, catalog: int | None
) -> None:
    sent: list[int] = []
    partial = tmp_path / "model.bin.part"
    client = _client(sent)
    with pytest.raises(
        HubRefusedError, match="model.bin from org/model is longer than the 100000 bytes announced"
    ):
        client.download(_remote(announced), partial, lambda _done: None, max_bytes=catalog)
    assert not partial.exists()
    # stopped within one read of the bound, not at the end of the 64 MB body
    assert sum(sent) <= 100_000 + client.chunk_size + len(CHUNK)


def test_a_body_of_the_announced_size_is_kept(tmp_path: Path) -> None:
    partial = tmp_path / "model.bin.part"
    _client([]).download(_remote(None), partial, lambda _done: None, max_bytes=None)
    assert partial.stat().st_size == 1000 * len(CHUNK)  # no size known anywhere: nothing to bound by


@pytest.mark.parametrize("sidecar", [b"[1, 2]", b"\xff", b"[" * 100_000, b'{"sha256": 5}'])
def test_a_damaged_resume_sidecar_starts_the_file_afresh(app_paths, hub, sidecar: bytes) -> None:  # type: ignore[no-untyped-def]
    # A list was an AttributeError, deep nesting a RecursionError, a bad byte a UnicodeDecodeError.
    partial_dir = app_paths.models / PARTIAL_DIR / "tiny_gguf"
    partial_dir.mkdir(parents=True)
    (partial_dir / "Sub-GGUF%2Ftiny-q8_0.gguf.json").write_bytes(sidecar)  # named like the partial file
    store = make_store(app_paths)
    store.install("tiny_gguf")
    assert store.catalog.installed_path(store.catalog.get("tiny_gguf")) is not None
