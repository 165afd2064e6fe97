"""Running requests on a model's worker, off the event loop: a whole file, or a file as a stream."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio.to_thread
import numpy as np

from inference.audio.decoding import FileBlocks
from inference.client import BacklogPolicy
from inference.contract import SAMPLE_RATE, CancelToken, ErrorEvent, StreamEvent, Transcript
from inference.errors import Cancelled, CaptioneerError, WorkerError
from inference.server.errors import ApiError, error_event, from_captioneer
from inference.server.events import DONE_LINE, EventTranslator, sse
from inference.server.registry import ServedModel
from inference.server.requests import audio_errors
from inference.server.shutdown import ShutdownState

PUSH_SECONDS = 0.32  # a file streamed through the live path is pushed in pieces of this length


def _engine(model: ServedModel) -> Any:
    if model.engine is None:
        raise ApiError(
            503, f"model {model.id!r} is not loaded yet", "model_not_ready", headers={"Retry-After": "1"}
        )
    return model.engine


async def transcribe_file(
    model: ServedModel, audio: np.ndarray | FileBlocks, options: dict[str, Any], timeout_s: float
) -> Transcript:
    """A clip, or a file's blocks as they decode (a streamed job: the audio is never whole in memory); past
    ``timeout_s`` the worker is told to stop and the answer is 504."""
    await model.wait_until_restored()
    engine = _engine(model)
    cancel = CancelToken()
    timed_out = threading.Event()

    def expire() -> None:
        timed_out.set()
        cancel.cancel()

    def run() -> Transcript:
        timer = threading.Timer(timeout_s, expire)
        timer.daemon = True
        timer.start()
        try:
            if isinstance(audio, FileBlocks):
                with audio_errors(audio.limits.max_seconds):
                    return engine.transcribe_blocks(  # type: ignore[no-any-return]
                        audio, expected_samples=audio.expected_samples, cancel=cancel, **options
                    )
            return engine.transcribe(audio, cancel=cancel, **options)  # type: ignore[no-any-return]
        finally:
            timer.cancel()

    try:  # a cancelled request (its client left) does not wait for the worker: the token stops it there
        return await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
    except asyncio.CancelledError:
        cancel.cancel()
        raise
    except Cancelled:
        if timed_out.is_set():
            raise _timeout(timeout_s) from None
        raise
    except CaptioneerError as exc:
        error = from_captioneer(exc)
        error.message = f"model {model.id!r}: {error.message}"
        raise error from None


def _timeout(timeout_s: float) -> ApiError:
    return ApiError(
        504,
        f"the transcription took longer than this server's limit of {timeout_s:g} s; send shorter audio",
        "timeout",
    )


class EventPipe:
    """Stream events from the client's reader thread to an async consumer, in order."""

    _END = object()

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue[Any] = asyncio.Queue()

    def from_thread(self, events: list[StreamEvent]) -> None:
        self.loop.call_soon_threadsafe(self.queue.put_nowait, list(events))

    def put(self, item: Any) -> None:
        self.queue.put_nowait(item)

    def end(self) -> None:
        self.queue.put_nowait(self._END)

    async def items(self) -> AsyncIterator[Any]:
        while True:
            item = await self.queue.get()
            if item is self._END:
                return
            yield item


async def open_stream(model: ServedModel, pipe: EventPipe, options: dict[str, Any]) -> Any:
    await model.wait_until_restored()
    engine = _engine(model)

    def run() -> Any:
        # The body can wait for the model: pushes block (backpressure on the upload), nothing is dropped.
        return engine.open_stream(
            on_events=pipe.from_thread, backlog=BacklogPolicy("block"), mode="auto", **options
        )

    try:
        return await anyio.to_thread.run_sync(run)
    except CaptioneerError as exc:
        raise from_captioneer(exc) from None


async def sse_frames(
    pipe: EventPipe,
    translator: EventTranslator,
    work: Callable[[], Any],
    shutdown: ShutdownState | None = None,
) -> AsyncIterator[bytes]:
    """Run ``work`` (a coroutine function that feeds the stream and puts its final transcript or an
    ``ApiError`` into the pipe) and yield the SSE frames of everything the pipe carries. A server that shuts
    down ends the answer with an error event and ``[DONE]`` once its grace is over."""
    task = asyncio.ensure_future(work())
    cut: asyncio.Future[None] | None = None
    if shutdown is not None:

        async def cut_off() -> None:
            await shutdown.wait_grace_over()
            task.cancel()
            pipe.put(shutdown.cut_off())
            pipe.end()

        cut = asyncio.ensure_future(cut_off())
    try:
        async for item in pipe.items():
            if isinstance(item, list):
                for event in item:
                    if isinstance(event, ErrorEvent) and event.fatal:
                        continue  # the failure also ends the work, which reports it once
                    data = translator.translate(event)
                    if data is not None:
                        yield sse(data)
            elif isinstance(item, Transcript):
                yield sse(translator.done(item))
                yield DONE_LINE
            elif isinstance(item, ApiError):
                yield sse(error_event(item))
                yield DONE_LINE
                break
        if not (cut is not None and cut.done()):  # cut off: the work was cancelled, its answer already sent
            await task
    finally:
        if cut is not None:
            cut.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def feed_file(stream: Any, audio: np.ndarray | FileBlocks, pipe: EventPipe, timeout_s: float) -> None:
    """A whole file through the live path, in PUSH_SECONDS pieces (decoded as they go when ``audio`` is the
    file's blocks); then the final transcript. Past ``timeout_s`` the stream is dropped and the answer ends with a
    504 error event."""

    def run() -> Transcript:
        step = int(PUSH_SECONDS * SAMPLE_RATE)
        deadline = time.monotonic() + timeout_s
        if isinstance(audio, FileBlocks):
            pieces, limit = audio.pieces(step), audio.limits.max_seconds
        else:
            pieces, limit = (audio[start : start + step] for start in range(0, audio.size, step)), 0.0
        try:
            with audio_errors(limit):
                for piece in pieces:
                    if time.monotonic() > deadline:
                        raise _timeout(timeout_s)
                    stream.push(piece)
            if isinstance(audio, FileBlocks) and audio.problems:  # damage became silence: the text has a hole
                pipe.from_thread([ErrorEvent("damaged_input", p, fatal=False) for p in audio.problems])
            return stream.finish(timeout=max(deadline - time.monotonic(), 0.001))  # type: ignore[no-any-return]
        except BaseException as exc:
            stream.cancel()
            if isinstance(exc, WorkerError) and time.monotonic() > deadline:  # finish() ran out of time
                raise _timeout(timeout_s) from None
            raise

    await finish_into(pipe, lambda: anyio.to_thread.run_sync(run))


async def finish_into(pipe: EventPipe, work: Callable[[], Awaitable[Transcript]]) -> None:
    """Await ``work``; put its transcript, or its failure as an ``ApiError``, then the end, in the pipe."""
    try:
        pipe.put(await work())
    except ApiError as exc:
        pipe.put(exc)
    except CaptioneerError as exc:
        pipe.put(from_captioneer(exc))
    except Exception as exc:  # a bug: still end the stream with an error event
        pipe.put(ApiError(500, f"internal error: {type(exc).__name__}: {exc}", "internal_error"))
    finally:
        pipe.end()
