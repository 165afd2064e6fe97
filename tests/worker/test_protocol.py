"""Wire frames: audio travels as raw float32 bytes, headers as JSON, versions are checked."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from inference import protocol as p
from inference.errors import UsageError, WorkerError


def test_audio_travels_as_binary_payload_bit_exact() -> None:
    pcm = np.random.default_rng(0).uniform(-1, 1, 5120).astype(np.float32)
    frame = p.encode(p.PushAudio("s1", 7, pcm))
    assert len(frame) < pcm.nbytes + 120  # raw bytes plus a small header, not a JSON list of numbers
    message = p.decode(frame)
    assert isinstance(message, p.PushAudio) and (message.stream_id, message.seq) == ("s1", 7)
    assert message.pcm is not None and message.pcm.dtype == np.float32
    np.testing.assert_array_equal(message.pcm, pcm)


def test_every_message_type_round_trips() -> None:
    messages = [
        p.Hello(pid=12),
        p.LoadModel(1, "e1", "/m", "parakeet_tdt", {"weight_type": "q8_0"}, "cpu", 2),
        p.UnloadModel(2, "e1"),
        p.Transcribe(3, "e1", {"language": "en"}, np.zeros(3, np.float32)),
        p.CancelJob(3),
        p.OpenJob(6, "e1", {"language": "en"}, 16000),
        p.JobAudio(6, 0, np.ones(5, np.float32)),
        p.JobPassEnd(6),
        p.JobOpened(6, 2),
        p.JobTook(6, 0),
        p.PushAudio("s1", 2, np.ones(4, np.float32)),
        p.OpenStream(4, "e1", "s1", {}, {"end_silence_s": 0.4}, "segmented"),
        p.FinishStream(5, "s1"),
        p.CancelStream("s1"),
        p.Ping(9),
        p.Shutdown(),
        p.Loaded(1, "e1", "faulty", {"streaming": True}, 0.5),
        p.Opened(4, "s1", "native"),
        p.Decoding("s1", 1),
        p.Pushed("s1", 1, 512, 0.01, [{"type": "delta", "text": "a"}]),
        p.Result(5, {"text": "a"}, 0.1),
        p.EventMessage({"type": "progress", "stage": "load", "done": 1}, 1),
        p.Failed("usage", "bad", "fix it", 3),
        p.Pong(9, 0.5, 1000),
        p.LogLine(30, "inference.audio.io", "replacing 3 non-finite samples", 1796600000.25, 12),
    ]
    assert {m.type for m in messages} == set(p.MESSAGE_TYPES)
    for message in messages:
        back = p.decode(p.encode(message))
        assert type(back) is type(message)
        if hasattr(message, "pcm"):
            np.testing.assert_array_equal(back.pcm, message.pcm)  # type: ignore[attr-defined]
        else:
            assert back == message


def test_a_version_mismatch_is_a_clear_error() -> None:
    assert p.check_version(p.decode(p.encode(p.Hello(pid=1)))).pid == 1
    with pytest.raises(WorkerError, match="protocol version 99.*reinstall"):
        p.check_version(p.Hello(version=99))
    with pytest.raises(WorkerError, match="greeted with 'pong'"):
        p.check_version(p.Pong(1, 0.0))


def test_damaged_or_foreign_frames_are_refused() -> None:
    with pytest.raises(WorkerError, match="truncated"):
        p.decode(b"\x01")
    with pytest.raises(WorkerError, match="unknown message"):
        p.decode(p.encode(p.Ping(1)).replace(b'"ping"', b'"pang"'))
    header = json.dumps({"type": "ping", "nonce": 1, "from_the_future": 2}).encode()
    with pytest.raises(WorkerError, match="unknown fields"):
        p.decode(struct.pack("<I", len(header)) + header)


def test_audio_is_validated_before_it_is_sent() -> None:
    assert p.audio_payload(np.zeros(4, np.float64)).dtype == np.float32
    with pytest.raises(UsageError, match="1-D"):
        p.audio_payload(np.zeros((2, 2), np.float32))
    with pytest.raises(UsageError, match="float32 samples"):
        p.audio_payload(np.zeros(4, np.int16))
    with pytest.raises(UsageError, match="NaN"):
        p.audio_payload(np.array([np.inf], np.float32))
