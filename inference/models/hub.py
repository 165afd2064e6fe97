"""Talking to the Hugging Face Hub (or a mirror at ``HF_ENDPOINT``) for the model store.

File metadata comes from ``huggingface_hub.get_hf_file_metadata``; the body is streamed with
``huggingface_hub``'s own HTTP session so that we control where partial bytes go (resumable with
``Range`` across runs), how often we retry, and that cancel is checked between chunks.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx2
from huggingface_hub import constants as hf_constants
from huggingface_hub import get_hf_file_metadata, get_session, hf_hub_url
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    OfflineModeIsEnabled,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import build_hf_headers

from inference.models.errors import HubRefusedError, NetworkError, StoreError, disk_full_error
from inference.models.progress import check_cancel

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
RETRYABLE_STATUS = (408, 429, 500, 502, 503, 504)


@dataclass(frozen=True)
class RemoteFile:
    repo: str
    revision: str
    path: str
    location: str  # where the bytes are (the resolve URL, or the CDN URL it redirects to)
    size: int | None
    etag: str | None
    commit: str | None

    @property
    def etag_sha256(self) -> str | None:
        """LFS files carry the sha256 of their content as ETag; small git files carry a git sha1."""
        return self.etag if self.etag and _SHA256.match(self.etag) else None


@dataclass(frozen=True)
class RetryPolicy:
    """Retries of transient failures; the count resets whenever bytes arrive."""

    attempts: int = 6
    connect_attempts: int = 3  # no connection at all (offline, DNS): say so after ~3 s, not ~30 s
    base_delay_s: float = 1.0
    max_delay_s: float = 30.0

    def delay(self, failures: int) -> float:
        return min(self.max_delay_s, self.base_delay_s * 2 ** max(0, failures - 1))


# Where huggingface_hub finds a token: HF_TOKEN, else the file its CLI login writes (`hf` since 0.34).
TOKEN_HINT = (
    "set HF_TOKEN to a Hugging Face token that can read it, or log in once with `hf auth login` "
    "(`huggingface-cli login` with huggingface_hub before 0.34)"
)


class _Retryable(Exception):
    """A transient failure worth another attempt (5xx, 429, dropped connection, short body)."""


class HubClient:
    def __init__(
        self,
        endpoint: str | None = None,
        token: str | None = None,
        retry: RetryPolicy | None = None,
        connect_timeout_s: float = 10.0,
        read_timeout_s: float = 30.0,
        chunk_size: int = 256 * 1024,
        session_factory: Callable[[], httpx2.Client] = get_session,
    ) -> None:
        self.endpoint = (endpoint or hf_constants.ENDPOINT).rstrip("/")
        self.token = token or None
        self.retry = retry or RetryPolicy()
        self.timeout = httpx2.Timeout(read_timeout_s, connect=connect_timeout_s)
        self.chunk_size = chunk_size
        self.session_factory = session_factory

    @classmethod
    def from_environment(cls, env: Mapping[str, str] | None = None, **kwargs) -> HubClient:
        """``HF_ENDPOINT`` and ``HF_TOKEN`` read now (``huggingface_hub`` reads the endpoint at import time);
        without ``HF_TOKEN``, the token a CLI login saved is used."""
        env = os.environ if env is None else env
        return cls(endpoint=env.get("HF_ENDPOINT") or None, token=env.get("HF_TOKEN") or None, **kwargs)

    def _headers(self) -> dict[str, str]:
        # token=None lets huggingface_hub use a `hf auth login` token if there is one.
        headers = build_hf_headers(token=self.token, library_name="captioneer")
        headers["Accept-Encoding"] = "identity"  # sizes and Range offsets must refer to the raw bytes
        return headers

    def file_info(
        self, repo: str, path: str, revision: str, cancel: threading.Event | None = None
    ) -> RemoteFile:
        url = hf_hub_url(repo, path, revision=revision, endpoint=self.endpoint)
        failures = 0
        while True:
            check_cancel(cancel)
            try:
                meta = get_hf_file_metadata(
                    url,
                    token=self.token,
                    timeout=self.timeout.connect,
                    endpoint=self.endpoint,
                    library_name="captioneer",
                )
                return RemoteFile(repo, revision, path, meta.location, meta.size, meta.etag, meta.commit_hash)
            except (httpx2.TransportError, _Retryable) as exc:
                failures = self._wait_before_retry(failures, exc, cancel, repo, path)
            except HfHubHTTPError as exc:
                status = _status(exc)
                if status in RETRYABLE_STATUS:
                    failures = self._wait_before_retry(failures, exc, cancel, repo, path)
                    continue
                raise self._translate(exc, repo, path, revision) from exc
            except OfflineModeIsEnabled as exc:
                raise NetworkError(
                    "downloads are switched off (HF_HUB_OFFLINE is set)", "unset HF_HUB_OFFLINE and try again"
                ) from exc

    def download(
        self,
        remote: RemoteFile,
        partial: Path,
        on_bytes: Callable[[int], None],
        cancel: threading.Event | None = None,
        max_bytes: int | None = None,
    ) -> None:
        """Complete ``partial`` to the remote file, resuming from its current length with ``Range``.

        The body may not run past the size the hub announced (or, when it announced none, ``max_bytes``, the
        catalog's size): a server that sends more is refused and the partial file removed, so a hostile
        mirror cannot fill the disk.
        """
        limit = remote.size if remote.size is not None else max_bytes
        failures = 0
        refreshed = False
        while True:
            check_cancel(cancel)
            have = partial.stat().st_size if partial.exists() else 0
            if remote.size is not None and have > remote.size:
                partial.unlink()  # longer than the file: not ours to resume
                have = 0
            if remote.size is not None and have == remote.size:
                on_bytes(have)
                return
            try:
                self._fetch(remote, partial, have, on_bytes, cancel, limit)
                got = partial.stat().st_size
                if remote.size is not None and got != remote.size:
                    raise _Retryable(f"received {got} of {remote.size} bytes")
                return
            except (httpx2.TransportError, _Retryable) as exc:
                progressed = partial.exists() and partial.stat().st_size > have
                failures = self._wait_before_retry(
                    0 if progressed else failures, exc, cancel, remote.repo, remote.path
                )
            except HfHubHTTPError as exc:
                if (
                    _status(exc) in (401, 403, 410)
                    and not refreshed
                    and remote.location != self._resolve_url(remote)
                ):
                    # A signed CDN link expired while we were paused or retrying: ask the hub for a fresh one.
                    refreshed = True
                    remote = self.file_info(remote.repo, remote.path, remote.revision, cancel)
                    continue
                raise self._translate(exc, remote.repo, remote.path, remote.revision) from exc

    def _resolve_url(self, remote: RemoteFile) -> str:
        return hf_hub_url(remote.repo, remote.path, revision=remote.revision, endpoint=self.endpoint)

    def _fetch(
        self,
        remote: RemoteFile,
        partial: Path,
        have: int,
        on_bytes: Callable[[int], None],
        cancel: threading.Event | None,
        limit: int | None = None,
    ) -> None:
        headers = self._headers()
        if have:
            headers["Range"] = f"bytes={have}-"
        session = self.session_factory()
        with session.stream(
            "GET", remote.location, headers=headers, timeout=self.timeout, follow_redirects=True
        ) as response:
            status = response.status_code
            if status == 416 and have:
                partial.unlink()  # the server cannot continue this partial file: start over
                raise _Retryable("the server could not resume the partial file")
            if status in RETRYABLE_STATUS:
                raise _Retryable(f"HTTP {status}")
            if status >= 400:
                response.read()
                _raise_hub_status(response)
            append = have > 0 and status == 206
            done = have if append else 0
            try:
                with partial.open("ab" if append else "wb") as out:
                    for chunk in response.iter_bytes(self.chunk_size):
                        check_cancel(cancel)
                        if not chunk:
                            continue
                        if limit is not None and done + len(chunk) > limit:
                            out.close()
                            partial.unlink(missing_ok=True)
                            raise HubRefusedError(
                                f"{remote.path} from {remote.repo} is longer than the {limit} bytes announced "
                                "for it; the download was stopped and removed",
                                "install again later; if it repeats, the mirror (HF_ENDPOINT) is misbehaving",
                            )
                        out.write(chunk)
                        done += len(chunk)
                        on_bytes(done)
            except OSError as exc:
                full = disk_full_error(
                    exc,
                    f"the disk filled up while writing {partial.name}",
                    "free some space (or choose another model folder) and install again; the download resumes",
                )
                if full is not None:
                    raise full from exc
                raise

    def _wait_before_retry(
        self, failures: int, exc: Exception, cancel: threading.Event | None, repo: str, path: str
    ) -> int:
        failures += 1
        limit = self.retry.connect_attempts if isinstance(exc, httpx2.ConnectError) else self.retry.attempts
        if failures >= limit:
            raise NetworkError(
                f"could not download {path} from {repo} at {self.endpoint}: {_plain(exc)}",
                "check the internet connection (or HF_ENDPOINT) and install again; finished bytes are kept",
            ) from exc
        delay = self.retry.delay(failures)
        if cancel is not None:
            cancel.wait(delay)
            check_cancel(cancel)
        else:
            threading.Event().wait(delay)
        return failures

    def _translate(self, exc: HfHubHTTPError, repo: str, path: str, revision: str) -> StoreError:
        status = _status(exc)
        where = f"{repo}@{revision}"
        if isinstance(exc, GatedRepoError):
            return HubRefusedError(
                f"{repo} is a gated repository and this account has not been granted access (HTTP {status})",
                f"accept the model's terms on its Hugging Face page, then {TOKEN_HINT}",
            )
        if isinstance(exc, RepositoryNotFoundError):
            return HubRefusedError(
                f"the hub refused {repo}: it does not exist or is private (HTTP {status})",
                f"if it is private, {TOKEN_HINT}; otherwise the catalog entry is out of date",
            )
        if isinstance(exc, RevisionNotFoundError):
            return HubRefusedError(
                f"revision {revision!r} of {repo} does not exist (HTTP {status})",
                "the catalog entry is out of date; update Captioneer",
            )
        if isinstance(exc, RemoteEntryNotFoundError) or status == 404:
            return HubRefusedError(
                f"{path} is not in {where} (HTTP {status or 404})",
                "the catalog entry is out of date; update Captioneer",
            )
        if status == 401:
            return HubRefusedError(f"the hub rejected the credentials for {where} (HTTP 401)", TOKEN_HINT)
        if status == 403:
            return HubRefusedError(f"the hub refused access to {path} in {where} (HTTP 403)", TOKEN_HINT)
        return HubRefusedError(f"the hub answered HTTP {status} for {path} in {where}", "try again later")


def _status(exc: HfHubHTTPError) -> int | None:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def _raise_hub_status(response: httpx2.Response) -> None:
    from huggingface_hub.utils import hf_raise_for_status

    hf_raise_for_status(response)
    raise HfHubHTTPError(f"HTTP {response.status_code}", response=response)


def _plain(exc: Exception) -> str:
    if isinstance(exc, httpx2.ConnectError):
        return "cannot connect"
    if isinstance(exc, httpx2.TimeoutException):
        return "the connection timed out"
    if isinstance(exc, httpx2.TransportError):
        return f"the connection broke ({exc})"
    return str(exc)
