"""The body of one ``/live`` request: read piece by piece within the limits, decoded to 16 kHz mono, its pace
kept (``live_pace.py``), and handed to the model's stream.

Before the stream has a model slot, its upload is read until it has delivered ``OPENING_S`` of audio (or its
whole body): a client that sends a first piece and then a trickle never holds a slot. Once it holds one, it may
be asked to give the slot back (``slots.py``) when it falls behind real time while another request waits: it
then stops reading, and ends like any other stream, with its transcript and ``[DONE]``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio.to_thread
import numpy as np
from starlette.requests import ClientDisconnect

from inference.audio.io import PcmStreamDecoder
from inference.contract import SAMPLE_RATE, ErrorEvent
from inference.errors import WorkerError
from inference.server.config import LiveLimits
from inference.server.errors import ApiError
from inference.server.live_pace import LivePace
from inference.server.shutdown import ShutdownState
from inference.server.transcribe import EventPipe, finish_into

OPENING_S = 0.5  # audio a stream sends before it takes a model slot: enough for the model to start on
PUSH_SAMPLES = int(0.16 * SAMPLE_RATE)  # decoded audio is handed to the model in pieces of at least this


class LiveUpload:
    """Reads the body; ``ended`` says why reading stopped: "body" (its end), "limit" (``--live-max-s``),
    "shutdown" or "taken_back" (another request took the model slot back)."""

    def __init__(
        self,
        body: AsyncIterator[bytes],
        decoder: PcmStreamDecoder,
        frame_bytes: int,
        rate: int,
        limits: LiveLimits,
        shutdown: ShutdownState | None = None,
    ) -> None:
        self.body = body
        self.decoder = decoder
        self.frame_bytes = frame_bytes
        self.rate = rate
        self.limits = limits
        self.shutdown = shutdown
        self.pace = LivePace(limits.pace)
        self.received = 0  # body bytes
        self.ended: str | None = None
        self._limit = None if limits.max_stream_s is None else round(limits.max_stream_s * SAMPLE_RATE)
        self._taken = 0  # decoded samples kept (what --live-max-s counts)
        self._pending: list[np.ndarray] = []
        self._pending_samples = 0
        self._taken_back = asyncio.Event()

    # ------------------------------------------------------------------ a slot holder (slots.Yielding)
    def behind(self) -> bool:
        return self.ended is None and self.pace.behind()

    def give_back(self) -> None:
        self._taken_back.set()

    # ------------------------------------------------------------------ reading
    @property
    def frames(self) -> int:
        return self.received // self.frame_bytes

    async def first_piece(self) -> bytes:
        """The body's first piece (b"" for an empty body), before anything is decoded."""
        piece = await self._next(stoppable=False)
        assert piece is not None
        return piece

    def accept(self, piece: bytes) -> None:
        """Count and decode one piece of the body (413 past the byte limit)."""
        before = self.frames
        self.received += len(piece)
        if self.received > self.limits.max_body_bytes:
            raise ApiError(
                413,
                f"the body passed this server's limit of {self.limits.max_body_bytes} bytes",
                "upload_too_large",
            )
        self.pace.record((self.frames - before) / self.rate)
        self._keep(self.decoder.feed(piece))

    async def read(self) -> None:
        """Read and accept the next piece, or set ``ended``."""
        piece = await self._next(stoppable=True)
        if piece == b"":
            self.ended = "body"
        elif piece is not None:
            self.accept(piece)

    async def read_opening(self) -> None:
        """Read until the upload has delivered ``OPENING_S`` of audio or ended (no model slot is held yet)."""
        while self.ended is None and self.frames < OPENING_S * self.rate:
            await self.read()

    def _keep(self, samples: np.ndarray) -> None:
        if self._limit is not None:
            samples = samples[: max(0, self._limit - self._taken)]
            if self._taken + samples.size >= self._limit and self.ended is None:
                self.ended = "limit"
        self._taken += samples.size
        if samples.size:
            self._pending.append(samples)
            self._pending_samples += samples.size

    async def _next(self, *, stoppable: bool) -> bytes | None:
        """The next piece; b"" at the body's end; None when the stream stops reading (``ended`` says why).
        Only the time spent here counts as waiting on the client (``pace``)."""
        piece = asyncio.ensure_future(self.body.__anext__())
        stops: dict[asyncio.Future[Any], str] = {}
        if stoppable:
            stops[asyncio.ensure_future(self._taken_back.wait())] = "taken_back"
            if self.shutdown is not None:
                stops[asyncio.ensure_future(self.shutdown.wait_draining())] = "shutdown"
        self.pace.start_waiting()
        try:
            await asyncio.wait(
                {piece, *stops}, timeout=self.limits.idle_timeout_s, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            self.pace.stop_waiting()
            for stop in stops:
                stop.cancel()
        if not piece.done():
            piece.cancel()
            for stop, reason in stops.items():
                if stop.done() and not stop.cancelled():
                    self.ended = reason
                    return None
            timeout_s = self.limits.idle_timeout_s
            raise ApiError(
                408, f"no audio arrived for {timeout_s:g} s; the upload was abandoned", "idle_timeout"
            )
        try:
            return piece.result()
        except StopAsyncIteration:
            return b""
        except ClientDisconnect:
            raise ApiError(
                400,
                "the client closed the connection before the end of the body (the terminating zero-length "
                "chunk)",
                "incomplete_body",
            ) from None

    # ------------------------------------------------------------------ feeding the model
    async def feed(self, stream: Any, pipe: EventPipe, close: Callable[[], None]) -> None:
        """Push what was read and the rest of the body as it arrives; at the end, the final transcript (or an
        error) goes to the pipe, and ``close`` frees the stream's model slot at once (not when the answer has
        been sent to a client that may read it slowly)."""

        async def push(force: bool = False) -> None:
            if self._pending_samples and (force or self._pending_samples >= PUSH_SAMPLES):
                chunk = np.concatenate(self._pending) if len(self._pending) > 1 else self._pending[0]
                self._pending.clear()
                self._pending_samples = 0
                await anyio.to_thread.run_sync(stream.push, chunk)

        def note(kind: str, message: str, fix: str) -> None:
            """Why the stream ends early or what was dropped: an error event that does not end it."""
            pipe.put([ErrorEvent(kind, message, fix, fatal=False)])

        async def run() -> None:
            await push()
            while self.ended is None:
                await self.read()
                await push()
            self._note_end(note)
            # A partial last frame is dropped, never an error: the decoder keeps only whole frames.
            self._keep(self.decoder.feed(b"", last=True))
            await push(force=True)

        async def fed() -> Any:
            try:
                await run()
                return await anyio.to_thread.run_sync(stream.finish)
            except WorkerError as exc:
                if getattr(getattr(stream, "client", None), "gave_up", None) is None:
                    raise
                # The body ended while no worker runs (none was revived yet): end in good order with what was
                # transcribed; the audio since the failure is marked as a gap.
                note(
                    "worker_failed",
                    f"{exc.message}; no worker was revived before the upload ended, so the stream ends with "
                    "what was transcribed before",
                    "send the rest in a new stream in a moment: the next request starts a fresh worker",
                )
                return stream.heard()
            finally:
                close()

        await finish_into(pipe, fed)

    def _note_end(self, note: Callable[[str, str, str], None]) -> None:
        if self.ended == "limit":
            note(
                "stream_limit",
                f"the stream reached this server's limit of {self.limits.max_stream_s:g} s of audio "
                "(--live-max-s); the transcript covers that much, the rest of the upload was not read",
                "open a new stream for the rest, or ask for a higher --live-max-s",
            )
        elif self.ended == "shutdown":  # the upload ends here, and what arrived is transcribed
            note(
                "server_shutting_down",
                f"the server is shutting down: the upload was cut at {self.frames / self.rate:.1f} s; "
                "the transcript covers the audio received",
                "send the rest again",
            )
        elif self.ended == "taken_back":
            audio_s, waited_s = self.pace.in_window()
            note(
                "stream_too_slow",
                f"the upload fell behind real time ({audio_s:.1f} s of audio in the last {waited_s:.1f} s, less "
                f"than {self.limits.pace.min_realtime:g} of it) while another request waited for this model, "
                "so it gave its place up; the transcript covers the audio received",
                "send audio at least as fast as it plays, or open a new stream for the rest",
            )
        elif self.received % self.frame_bytes:
            note(
                "partial_frame",
                f"the body ends inside a frame: {self.received} bytes is not a whole number of "
                f"{self.frame_bytes}-byte frames, so the last {self.received % self.frame_bytes} byte(s) were "
                "dropped",
                "send whole frames (check sample_format and channels)",
            )
