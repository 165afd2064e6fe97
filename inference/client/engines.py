"""A model loaded in the worker, with the same calls as a local ``contract.Engine``."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from inference import protocol as p
from inference.client.interfaces import EngineHost
from inference.client.jobs import run_job
from inference.client.policies import BacklogPolicy
from inference.client.streams import EventsCallback, RemoteStream
from inference.contract import CancelToken, Capabilities, ProgressCallback, Transcript


@dataclass
class EngineRecord:
    """What it takes to load an engine again after a restart."""

    message: p.LoadModel
    family: str = ""
    capabilities: Capabilities = field(default_factory=Capabilities)


class RemoteEngine:
    """A model loaded in the worker; the same calls as a local ``contract.Engine``."""

    def __init__(self, client: EngineHost, engine_id: str, family: str, capabilities: Capabilities) -> None:
        self.client = client
        self.engine_id = engine_id
        self.family = family
        self.capabilities = capabilities

    def transcribe(
        self,
        audio: np.ndarray,
        *,
        progress: ProgressCallback | None = None,
        cancel: CancelToken | None = None,
        timeout: float | None = None,
        **request_options: Any,
    ) -> Transcript:
        pcm = p.audio_payload(audio)
        request_id = self.client.next_id()
        message = p.Transcribe(request_id, self.engine_id, dict(request_options), pcm)
        result = self.client.request(message, progress=progress, cancel=cancel, timeout=timeout)
        assert isinstance(result, p.Result)
        return result.as_transcript()

    def transcribe_blocks(
        self,
        blocks: Callable[[], Iterable[np.ndarray]],
        *,
        expected_samples: int | None = None,
        progress: ProgressCallback | None = None,
        cancel: CancelToken | None = None,
        timeout: float | None = None,
        **request_options: Any,
    ) -> Transcript:
        """``transcribe`` of a file's audio sent in blocks, so neither process holds the whole clip.
        ``blocks()`` yields the audio (mono float32 at 16 kHz) from its start each time it is called: the
        worker may ask for two passes (``protocol.OpenJob``). The transcript is ``transcribe``'s."""
        return run_job(
            self.client,
            self.engine_id,
            blocks,
            expected_samples,
            dict(request_options),
            progress,
            cancel,
            timeout,
        )

    def open_stream(
        self,
        *,
        on_events: EventsCallback | None = None,
        backlog: BacklogPolicy | None = None,
        segmenter: dict[str, Any] | None = None,
        mode: str = "auto",
        **request_options: Any,
    ) -> RemoteStream:
        """``mode``: "auto" (the engine's own live path when it has one), "native", or "segmented" (Silero VAD
        closes segments that the engine transcribes offline: final text per pause, with any model)."""
        stream = RemoteStream(
            self.client,
            self.engine_id,
            dict(request_options),
            dict(segmenter or {}),
            on_events,
            backlog or BacklogPolicy(),
            mode,
        )
        self.client.open_stream(stream)
        return stream

    def close(self) -> None:
        self.client.unload(self.engine_id)
